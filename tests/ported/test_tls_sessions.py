"""TLS sessions over in-memory transports, from the cases of trio's TLS
stream tests: large transfers both ways at once, TLS inside TLS, handing the
transport back, a peer leaving mid-handshake, and cancellation points.
"""

from __future__ import annotations

import ssl

import pytest

import asyncop
from asyncop import BrokenResourceError, ClosedResourceError, net
from asyncop.testing import assert_checkpoints, memory_stream_pair, wait_all_blocked

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context for "localhost", and a client context that trusts it."""
    authority = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost").configure_cert(server)
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return server, client


def wrap_pair(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], a: object, b: object
) -> tuple[net.TLSStream, net.TLSStream]:
    server, client = contexts
    return (
        net.TLSStream.wrap(a, ssl_context=client, server_hostname="localhost"),
        net.TLSStream.wrap(b, ssl_context=server, server_side=True),
    )


async def handshake(client: net.TLSStream, server: net.TLSStream) -> None:
    async with asyncop.scope() as s:
        s.spawn(server.do_handshake)
        await client.do_handshake()


@pytest.mark.asyncop
async def test_large_transfers_both_ways_at_once(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    client, server = wrap_pair(contexts, *memory_stream_pair())
    data = bytes(range(256)) * 4096  # 1 MiB each way

    async def pump(src: net.TLSStream, dst: net.TLSStream) -> bytes:
        async with asyncop.scope() as s:
            s.spawn(src.send_all, data)
            got = bytearray()
            while len(got) < len(data):
                got += await dst.receive_some()
        return bytes(got)

    async with asyncop.scope() as s:
        there = s.spawn(pump, client, server)
        back = s.spawn(pump, server, client)
    assert there.result() == data and back.result() == data
    await client.aclose()
    await server.aclose()


@pytest.mark.asyncop
async def test_tls_inside_tls(contexts: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    outer_client, outer_server = wrap_pair(contexts, *memory_stream_pair())
    client, server = wrap_pair(contexts, outer_client, outer_server)
    await handshake(client, server)
    await client.send_all(b"nested")
    assert await server.receive_exactly(6) == b"nested"
    await client.aclose()
    assert await server.receive_some() == b""
    await server.aclose()
    with pytest.raises(ClosedResourceError):
        await outer_client.send_all(b"the inner close closed it")


@pytest.mark.asyncop
async def test_unwrap_returns_what_came_after_the_close_notify(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    client, server = wrap_pair(contexts, *memory_stream_pair())
    await handshake(client, server)

    async def server_unwraps() -> bytes:
        transport, trailing = await server.unwrap()
        await transport.send_all(b"in the clear")
        return bytes(trailing)

    async with asyncop.scope() as s:
        theirs = s.spawn(server_unwraps)
        transport, trailing = await client.unwrap()
    got = bytes(trailing)
    while len(got) < 12:
        got += await transport.receive_some()
    assert got == b"in the clear"
    assert theirs.result() == b""
    with pytest.raises(ClosedResourceError):
        await client.receive_some()


@pytest.mark.asyncop
async def test_a_peer_leaving_mid_handshake_breaks_it(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    client, server = wrap_pair(contexts, *memory_stream_pair())
    errors: list[BaseException] = []

    async def shake() -> None:
        try:
            await client.do_handshake()
        except BrokenResourceError as exc:
            errors.append(exc)

    async with asyncop.scope() as s:
        s.spawn(shake)
        await wait_all_blocked()
        await server.aclose()
    assert len(errors) == 1
    with pytest.raises(BrokenResourceError):
        await client.send_all(b"after")
    await client.aclose()


@pytest.mark.asyncop
async def test_a_failed_handshake_then_aclose_raises_nothing_more(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    server_context, _ = contexts
    a, b = memory_stream_pair()
    distrustful = net.TLSStream.wrap(
        a, ssl_context=ssl.create_default_context(), server_hostname="localhost"
    )
    server = net.TLSStream.wrap(b, ssl_context=server_context, server_side=True)
    async with asyncop.scope() as s:
        s.spawn(_quietly, server.do_handshake)
        with pytest.raises(ssl.SSLCertVerificationError):
            await distrustful.do_handshake()
        await distrustful.aclose()
    await server.aclose()


async def _quietly(call: object) -> None:
    try:
        await call()  # type: ignore[operator]
    except (BrokenResourceError, ClosedResourceError, ssl.SSLError):
        pass


def test_attributes_before_the_handshake() -> None:
    authority = trustme.CA()
    client_context = ssl.create_default_context()
    authority.configure_trust(client_context)
    a, _ = memory_stream_pair()
    client = net.TLSStream.wrap(a, ssl_context=client_context, server_hostname="localhost")
    assert client.version() is None
    assert client.cipher() is None
    assert client.selected_alpn_protocol() is None
    assert client.server_hostname == "localhost"
    assert not client.server_side


@pytest.mark.asyncop
async def test_every_call_is_a_cancellation_point(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    client, server = wrap_pair(contexts, *memory_stream_pair())
    await handshake(client, server)
    with assert_checkpoints():
        await client.do_handshake()  # done already: returns at once
    with assert_checkpoints():
        await client.send_all(b"x")
    with assert_checkpoints():
        await client.send_all(b"")
    with assert_checkpoints():
        assert await server.receive_some() == b"x"
    with assert_checkpoints():
        await client.aclose()
    with assert_checkpoints():
        await client.aclose()
    await server.aclose()
