"""The rules every asyncop stream follows, from the cases of trio's generic
stream checks and its high-level networking tests: plain sockets, TLS over
them, and the in-memory pair, each held to the same rules; then listeners,
serving and TLS sessions over TCP.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest

import asyncop
from asyncop import (
    BrokenResourceError,
    BusyResourceError,
    Cancelled,
    ClosedResourceError,
    net,
)
from asyncop.testing import memory_stream_pair, wait_all_blocked

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.timeout(30)

HOST = "127.0.0.1"
KINDS = ["socket", "tls", "memory"]


@pytest.fixture(scope="module")
def contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context for 127.0.0.1, and a client context that trusts it."""
    authority = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost", HOST).configure_cert(server)
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return server, client


@asynccontextmanager
async def connected(
    kind: str, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> AsyncIterator[tuple[Any, Any]]:
    """Two connected streams of ``kind``, closed at the end."""
    if kind == "memory":
        a, b = memory_stream_pair()
    else:
        sa, sb = socket.socketpair()
        a, b = net.SocketStream(sa), net.SocketStream(sb)
        if kind == "tls":
            server, client = contexts
            a = net.TLSStream.wrap(a, ssl_context=client, server_hostname="localhost")
            b = net.TLSStream.wrap(b, ssl_context=server, server_side=True)
            async with asyncop.scope() as s:
                s.spawn(b.do_handshake)
                await a.do_handshake()
    try:
        yield a, b
    finally:
        await a.aclose()
        await b.aclose()


async def fill(stream: Any) -> None:
    """Send until the stream blocks (never returns for a socket)."""
    chunk = b"x" * 65536
    while True:
        await stream.send_all(chunk)


async def expect(error: type[BaseException], call: Callable[[], Any], log: list[str]) -> None:
    try:
        await call()
    except error:
        log.append(error.__name__)


# -- one stream, several tasks -------------------------------------------------


@pytest.mark.asyncop
@pytest.mark.parametrize("kind", KINDS)
async def test_two_receives_at_once_are_refused(
    kind: str, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    log: list[str] = []
    async with connected(kind, contexts) as (a, b), asyncop.scope() as s:
        first = s.spawn(b.receive_some)
        await wait_all_blocked()
        with pytest.raises(BusyResourceError):
            await b.receive_some()
        await a.send_all(b"hi")
        assert await first == b"hi"
    assert log == []


@pytest.mark.asyncop
@pytest.mark.parametrize("kind", ["socket", "tls"])
async def test_two_sends_at_once_are_refused(
    kind: str, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    async with connected(kind, contexts) as (a, _b), asyncop.scope() as s:
        s.spawn(fill, a)
        await wait_all_blocked()
        with pytest.raises(BusyResourceError):
            await a.send_all(b"more")
        with pytest.raises(BusyResourceError):
            await a.send_eof()
        s.cancel()


@pytest.mark.asyncop
@pytest.mark.parametrize("kind", KINDS)
async def test_close_wakes_a_blocked_receive_with_closed_resource_error(
    kind: str, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    log: list[str] = []
    async with connected(kind, contexts) as (_a, b):
        async with asyncop.scope() as s:
            s.spawn(expect, ClosedResourceError, b.receive_some, log)
            await wait_all_blocked()
            await b.aclose()
        assert log == ["ClosedResourceError"]


@pytest.mark.asyncop
@pytest.mark.parametrize("kind", ["socket", "tls"])
async def test_close_wakes_a_blocked_send_with_closed_resource_error(
    kind: str, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    log: list[str] = []
    async with connected(kind, contexts) as (a, _b):
        async with asyncop.scope() as s:
            s.spawn(expect, ClosedResourceError, lambda: fill(a), log)
            await wait_all_blocked()
            await a.aclose()
        assert log == ["ClosedResourceError"]


@pytest.mark.asyncop
@pytest.mark.parametrize("kind", KINDS)
async def test_a_closed_stream_refuses_everything(
    kind: str, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    async with connected(kind, contexts) as (a, _b):
        await a.aclose()
        await a.aclose()  # twice is harmless
        with pytest.raises(ClosedResourceError):
            await a.receive_some()
        with pytest.raises(ClosedResourceError):
            await a.send_all(b"late")
        with pytest.raises(ClosedResourceError):
            await a.send_eof()


@pytest.mark.asyncop
@pytest.mark.parametrize("kind", KINDS)
async def test_aclose_in_a_cancelled_task_still_closes(
    kind: str, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    async with connected(kind, contexts) as (a, b):
        async with asyncop.move_on_after(10) as cs:
            cs.cancel()
            with pytest.raises(Cancelled):
                await a.aclose()
        with pytest.raises(ClosedResourceError):
            await a.send_all(b"x")
        if kind == "tls":
            # Cancelled, it closed the transport without its close_notify:
            # the peer reads the end of the stream, or a reset when data it
            # never read (session tickets) was still queued on this side.
            try:
                assert await b.receive_some() == b""
            except BrokenResourceError:
                pass
        else:
            assert await b.receive_some() == b""


# -- data and end of stream -----------------------------------------------------


@pytest.mark.asyncop
@pytest.mark.parametrize("kind", KINDS)
async def test_data_both_ways_then_end_of_stream_after_close(
    kind: str, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    async with connected(kind, contexts) as (a, b):
        await a.send_all(b"ping")
        assert await b.receive_exactly(4) == b"ping"
        await b.send_all(bytearray(b"pong"))
        assert await a.receive_exactly(4) == b"pong"
        await a.send_all(memoryview(b"abc"))
        await a.send_all(b"")
        assert await b.receive_exactly(3) == b"abc"
        await a.aclose()
        assert await b.receive_some() == b""
        assert await b.receive_some() == b""


@pytest.mark.asyncop
@pytest.mark.parametrize("kind", KINDS)
async def test_send_eof_half_closes(
    kind: str, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    async with connected(kind, contexts) as (a, b):
        if kind == "tls" and a.version() != "TLSv1.3":
            pytest.skip("half-close needs TLS 1.3")
        await a.send_all(b"last")
        await a.send_eof()
        await a.send_eof()  # twice is harmless
        with pytest.raises(ClosedResourceError):
            await a.send_all(b"after eof")
        assert await b.receive_exactly(4) == b"last"
        assert await b.receive_some() == b""
        # The other direction still works.
        await b.send_all(b"reply")
        assert await a.receive_exactly(5) == b"reply"


@pytest.mark.asyncop
@pytest.mark.parametrize("kind", KINDS)
async def test_receive_some_takes_at_most_max_bytes(
    kind: str, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    async with connected(kind, contexts) as (a, b):
        await a.send_all(b"0123456789")
        got = b""
        while len(got) < 10:
            part = await b.receive_some(3)
            assert 1 <= len(part) <= 3
            got += part
        assert got == b"0123456789"


@pytest.mark.asyncop
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", [0, -1])
async def test_receive_some_refuses_a_size_below_one(
    kind: str, bad: int, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    async with connected(kind, contexts) as (_a, b):
        with pytest.raises(ValueError):
            await b.receive_some(bad)


@pytest.mark.asyncop
@pytest.mark.parametrize("kind", KINDS)
async def test_a_cancelled_receive_loses_nothing(
    kind: str, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    async with connected(kind, contexts) as (a, b):
        async with asyncop.scope() as s:
            s.spawn(b.receive_some)
            await wait_all_blocked()
            s.cancel()
        await a.send_all(b"kept")
        assert await b.receive_exactly(4) == b"kept"


@pytest.mark.asyncop
@pytest.mark.parametrize("kind", ["socket", "tls"])
async def test_send_to_a_peer_that_is_gone_breaks(
    kind: str, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    async with connected(kind, contexts) as (a, b):
        await b.aclose()
        with pytest.raises(BrokenResourceError):
            for _ in range(100):
                await a.send_all(b"y" * 65536)


# -- listeners and serving ------------------------------------------------------------


async def echo(stream: Any) -> None:
    async for chunk in stream:
        await stream.send_all(chunk)


@pytest.mark.asyncop
async def test_serve_tcp_and_open_tcp_stream() -> None:
    async with asyncop.scope() as s:
        listeners = await s.start(partial(net.serve_tcp, host=HOST), echo, 0)
        port = listeners[0].socket.getsockname()[1]
        for _ in range(3):
            client = await net.open_tcp_stream(HOST, port)
            async with client:
                await client.send_all(b"hello")
                assert await client.receive_exactly(5) == b"hello"
                await client.send_eof()
                assert await client.receive_some() == b""
        s.cancel()
    assert all(listener.socket.fileno() == -1 for listener in listeners)


@pytest.mark.asyncop
async def test_open_tcp_stream_to_a_closed_port_raises_oserror() -> None:
    listeners = await net.open_tcp_listeners(0, host=HOST)
    port = listeners[0].socket.getsockname()[1]
    for listener in listeners:
        await listener.aclose()
    with pytest.raises(OSError):
        await net.open_tcp_stream(HOST, port)


@pytest.mark.asyncop
async def test_listener_accept_and_close_while_accepting() -> None:
    (listener,) = await net.open_tcp_listeners(0, host=HOST)
    port = listener.socket.getsockname()[1]
    log: list[str] = []
    async with asyncop.scope() as s:
        s.spawn(expect, ClosedResourceError, listener.accept, log)
        await wait_all_blocked()
        await listener.aclose()
    assert log == ["ClosedResourceError"]
    with pytest.raises(ClosedResourceError):
        await listener.accept()
    await listener.aclose()
    with pytest.raises(OSError):
        await net.open_tcp_stream(HOST, port)


@pytest.mark.asyncop
async def test_two_accepts_at_once_are_refused() -> None:
    (listener,) = await net.open_tcp_listeners(0, host=HOST)
    async with listener, asyncop.scope() as s:
        s.spawn(listener.accept)
        await wait_all_blocked()
        with pytest.raises(BusyResourceError):
            await listener.accept()
        s.cancel()


# -- TLS sessions over TCP -----------------------------------------------------------------


@pytest.mark.asyncop
async def test_tls_serve_and_connect(contexts: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    server, client = contexts
    async with asyncop.scope() as s:
        listeners = await s.start(partial(net.serve_tcp, host=HOST, ssl_context=server), echo, 0)
        port = listeners[0].socket.getsockname()[1]
        stream = await net.open_tcp_stream(
            HOST, port, ssl_context=client, server_hostname="localhost"
        )
        async with stream:
            assert isinstance(stream, net.TLSStream)
            assert stream.version() is not None
            await stream.send_all(b"secret")
            assert await stream.receive_exactly(6) == b"secret"
        s.cancel()


@pytest.mark.asyncop
async def test_tls_to_an_untrusted_server_fails(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    server, _ = contexts
    untrusting = ssl.create_default_context()
    async with asyncop.scope() as s:
        listeners = await s.start(partial(net.serve_tcp, host=HOST, ssl_context=server), echo, 0)
        port = listeners[0].socket.getsockname()[1]
        with pytest.raises(ssl.SSLError):
            await net.open_tcp_stream(HOST, port, ssl_context=untrusting)
        s.cancel()


@pytest.mark.asyncop
async def test_tls_unwrap_hands_back_the_plain_stream(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    async with connected("tls", contexts) as (a, b):
        await a.send_all(b"over tls")
        assert await b.receive_exactly(8) == b"over tls"
        async with asyncop.scope() as s:
            theirs = s.spawn(b.unwrap)
            mine, trailing = await a.unwrap()
        their_stream, their_trailing = await theirs
        assert trailing == b"" and their_trailing == b""
        await mine.send_all(b"plain")
        got = their_trailing
        while len(got) < 5:
            got += await their_stream.receive_some()
        assert got == b"plain"
        with pytest.raises(ClosedResourceError):
            await a.send_all(b"after unwrap")


@pytest.mark.asyncop
async def test_tls_peer_closing_without_close_notify_reads_as_the_end(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    # asyncop reads a transport that ended without close_notify as the end
    # of the stream (trio's https_compatible=True); frame messages to detect
    # truncation.
    server, client = contexts
    ta, tb = memory_stream_pair()
    a = net.TLSStream.wrap(ta, ssl_context=client, server_hostname="localhost")
    b = net.TLSStream.wrap(tb, ssl_context=server, server_side=True)
    async with asyncop.scope() as s:
        s.spawn(b.do_handshake)
        await a.do_handshake()
    await a.send_all(b"before")
    await ta.aclose()
    assert await b.receive_exactly(6) == b"before"
    assert await b.receive_some() == b""
    await b.aclose()


@pytest.mark.asyncop
async def test_tls_aclose_during_the_peers_blocked_receive(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    async with connected("tls", contexts) as (a, b):
        async with asyncop.scope() as s:
            reader = s.spawn(b.receive_some)
            await wait_all_blocked()
            await a.aclose()
        assert await reader == b""


@pytest.mark.asyncop
async def test_tls_receive_before_the_handshake_does_it(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    server, client = contexts
    sa, sb = socket.socketpair()
    a = net.TLSStream.wrap(net.SocketStream(sa), ssl_context=client, server_hostname="localhost")
    b = net.TLSStream.wrap(net.SocketStream(sb), ssl_context=server, server_side=True)
    async with a, b, asyncop.scope() as s:
        reader = s.spawn(b.receive_some)
        await a.send_all(b"first")
        assert await reader == b"first"


@pytest.mark.asyncop
async def test_tls_two_handshakes_at_once_both_wait_for_it(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    server, client = contexts
    sa, sb = socket.socketpair()
    a = net.TLSStream.wrap(net.SocketStream(sa), ssl_context=client, server_hostname="localhost")
    b = net.TLSStream.wrap(net.SocketStream(sb), ssl_context=server, server_side=True)
    async with a, b, asyncop.scope() as s:
        s.spawn(b.do_handshake)
        first = s.spawn(a.do_handshake)
        await a.do_handshake()
        await first
        assert a.version() is not None
        await a.do_handshake()  # once done, it returns at once


@pytest.mark.asyncop
@pytest.mark.parametrize("kind", KINDS)
async def test_full_duplex_send_while_a_receive_waits(
    kind: str, contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    async with connected(kind, contexts) as (a, b), asyncop.scope() as s:
        reader = s.spawn(a.receive_some)
        await wait_all_blocked()
        await a.send_all(b"to b")
        assert await b.receive_exactly(4) == b"to b"
        await b.send_all(b"to a")
        assert await reader == b"to a"


@pytest.mark.asyncop
async def test_tls_unwrap_while_a_receive_waits_is_refused(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    async with connected("tls", contexts) as (a, _b), asyncop.scope() as s:
        s.spawn(a.receive_some)
        await wait_all_blocked()
        with pytest.raises(BusyResourceError):
            await a.unwrap()
        s.cancel()


@pytest.mark.asyncop
async def test_a_failing_handler_ends_only_its_own_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    async def handler(stream: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("this connection only")
        await echo(stream)

    async with asyncop.scope() as s:
        listeners = await s.start(partial(net.serve_tcp, host=HOST), handler, 0)
        port = listeners[0].socket.getsockname()[1]
        first = await net.open_tcp_stream(HOST, port)
        async with first:
            assert await first.receive_some() == b""
        second = await net.open_tcp_stream(HOST, port)
        async with second:
            await second.send_all(b"still serving")
            assert await second.receive_exactly(13) == b"still serving"
        s.cancel()
    assert "this connection only" in caplog.text


@pytest.mark.asyncop
async def test_a_failed_tls_handshake_does_not_stop_the_server(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    server, client = contexts
    async with asyncop.scope() as s:
        listeners = await s.start(partial(net.serve_tcp, host=HOST, ssl_context=server), echo, 0)
        port = listeners[0].socket.getsockname()[1]
        plain = await net.open_tcp_stream(HOST, port)
        async with plain:
            await plain.send_all(b"GET / HTTP/1.0\r\n\r\n")
            with pytest.raises(BrokenResourceError):
                while await plain.receive_some():
                    pass
                raise BrokenResourceError
        good = await net.open_tcp_stream(
            HOST, port, ssl_context=client, server_hostname="localhost"
        )
        async with good:
            await good.send_all(b"ok")
            assert await good.receive_exactly(2) == b"ok"
        s.cancel()
