"""Stream, listener, TLS, UDP and Unix-socket rules that trio's, anyio's and
asyncio's networking suites check, written against asyncop.net, over 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import ssl
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import asyncop
import asyncop.asyncio_bridge as bridge
from asyncop import BrokenResourceError, Cancelled, ClosedResourceError, net
from asyncop.testing import wait_all_blocked

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.timeout(30)

HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context for localhost/127.0.0.1, and a client context that trusts it."""
    authority = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost", HOST).configure_cert(server)
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return server, client


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    with a, b:
        yield a, b


def tls_pair(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], a: socket.socket, b: socket.socket
) -> tuple[net.TLSStream, net.TLSStream]:
    server, client = contexts
    return (
        net.TLSStream.wrap(net.SocketStream(a), ssl_context=client, server_hostname="localhost"),
        net.TLSStream.wrap(net.SocketStream(b), ssl_context=server, server_side=True),
    )


async def handshake(client: net.TLSStream, server: net.TLSStream) -> None:
    async with asyncop.scope() as s:
        s.spawn(server.do_handshake)
        await client.do_handshake()


def nothing_sent(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        sock.recv(1)
    except BlockingIOError:
        return True
    return False


# -- what a send takes ---------------------------------------------------------------


@pytest.mark.asyncop
async def test_send_all_refuses_text_at_once_naming_the_stream(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    # trio and anyio type send_all's data as bytes-like; a str is the usual slip
    a, b = pair
    stream = net.SocketStream(a)
    with pytest.raises(TypeError, match=r"SocketStream\.send_all\(\) needs bytes-like.*encode"):
        await stream.send_all("hello")  # type: ignore[arg-type]
    await stream.send_all(bytearray(b"ok"))  # still usable: the guard was released
    assert b.recv(10) == b"ok"


@pytest.mark.asyncop
async def test_tls_send_all_refuses_text_before_the_handshake(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair
    client, _server = tls_pair(contexts, a, socket.socket())
    with pytest.raises(TypeError, match=r"TLSStream\.send_all\(\) needs bytes-like"):
        await client.send_all("hello")  # type: ignore[arg-type]
    assert nothing_sent(b)  # no ClientHello went out for a call that could not send


@pytest.mark.asyncop
async def test_udp_sendto_refuses_text_at_once() -> None:
    async with await net.open_udp_socket(HOST) as sock:
        with pytest.raises(TypeError, match=r"UDPSocket\.sendto\(\) needs bytes-like"):
            await sock.sendto("ping", *sock.local_address)  # type: ignore[arg-type]


# -- closing under a task, and after the end -------------------------------------------


@pytest.mark.asyncop
async def test_aclose_wakes_a_send_all_waiting_for_room(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, _b = pair  # b never reads: a's buffer fills up
    stream = net.SocketStream(a)

    async def sender() -> None:
        await stream.send_all(b"x" * 20_000_000)

    async with asyncop.scope(supervise=True) as s:
        task = s.spawn(sender)
        await wait_all_blocked()
        await stream.aclose()
    assert isinstance(task.error, ClosedResourceError)
    with pytest.raises(ClosedResourceError):
        await stream.send_all(b"")  # even an empty send: the stream is gone


@pytest.mark.asyncop
async def test_a_peer_that_closed_breaks_sends_and_ends_receives(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    stream = net.SocketStream(a)
    b.close()
    assert await stream.receive_some() == b""
    for _ in range(2):  # and it stays broken
        with pytest.raises(BrokenResourceError) as info:
            await stream.send_all(b"x" * 100_000)
        assert isinstance(info.value.__cause__, OSError)
    await stream.aclose()


# -- listeners and servers ---------------------------------------------------------------


@pytest.mark.asyncop
async def test_listeners_reuse_addresses_and_keep_ipv6_to_itself() -> None:
    listeners = await net.open_tcp_listeners(0)
    try:
        for listener in listeners:
            sock = listener.socket
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)
            if sock.family == socket.AF_INET6:
                assert sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY)
    finally:
        for listener in listeners:
            await listener.aclose()


@pytest.mark.asyncop
async def test_a_cancelled_server_closes_its_listeners_and_frees_the_port() -> None:
    async def handler(stream: net.SocketStream) -> None:
        await stream.send_all(b"hi")

    async with asyncop.scope() as s:
        start = functools.partial(net.serve_tcp, handler, 0, host=HOST)
        listeners = await s.start(start)
        port = listeners[0].socket.getsockname()[1]
        async with await net.open_tcp_stream(HOST, port) as stream:
            assert await stream.receive_some() == b"hi"
        s.cancel()
    assert [listener.socket.fileno() for listener in listeners] == [-1]
    # A connection closed a moment ago does not keep the port (SO_REUSEADDR).
    again = await net.open_tcp_listeners(port, host=HOST)
    for listener in again:
        await listener.aclose()


@pytest.mark.asyncop
async def test_an_unresolvable_name_raises_gaierror_from_open_tcp_stream() -> None:
    with pytest.raises(socket.gaierror):
        await net.open_tcp_stream("nonexistent.invalid", 80)


# -- TLS --------------------------------------------------------------------------------


@pytest.mark.asyncop
async def test_tls_aclose_in_a_cancelled_task_still_closes(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair
    client, server = tls_pair(contexts, a, b)
    await handshake(client, server)
    async with asyncop.scope() as s:
        s.cancel()
        with pytest.raises(Cancelled):
            await client.aclose()
    assert a.fileno() == -1
    await server.aclose()


@pytest.mark.asyncop
async def test_tls_aclose_does_not_wait_for_a_peer_that_never_reads(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair
    client, server = tls_pair(contexts, a, b)
    await handshake(client, server)
    async with asyncop.move_on_after(0.2):  # fills the socket buffers: no room left
        await client.send_all(b"x" * 50_000_000)
    async with asyncop.fail_after(5):
        await client.aclose()
    assert a.fileno() == -1
    await server.aclose()


@pytest.mark.asyncop
async def test_an_empty_tls_send_does_the_handshake(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair
    client, server = tls_pair(contexts, a, b)
    async with asyncop.scope() as s:
        s.spawn(server.do_handshake)
        await client.send_all(b"")
    assert client.version() == "TLSv1.3"
    await client.aclose()
    await server.aclose()


@pytest.mark.asyncop
async def test_no_common_protocol_fails_both_sides_with_the_ssl_reason(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    old_server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)  # up to TLS 1.2 only
    authority = trustme.CA()
    authority.issue_cert("localhost").configure_cert(old_server)
    old_server.maximum_version = ssl.TLSVersion.TLSv1_2
    new_client = ssl.create_default_context()
    authority.configure_trust(new_client)
    new_client.minimum_version = ssl.TLSVersion.TLSv1_3
    a, b = pair
    client = net.TLSStream.wrap(
        net.SocketStream(a), ssl_context=new_client, server_hostname="localhost"
    )
    server = net.TLSStream.wrap(net.SocketStream(b), ssl_context=old_server, server_side=True)
    errors: list[BaseException] = []

    async def serve() -> None:
        try:
            await server.do_handshake()
        except ssl.SSLError as exc:
            errors.append(exc)

    async with asyncop.scope() as s:
        s.spawn(serve)
        with pytest.raises(ssl.SSLError) as info:
            await client.do_handshake()
    assert info.value.reason == "TLSV1_ALERT_PROTOCOL_VERSION"
    assert [getattr(e, "reason", None) for e in errors] == ["UNSUPPORTED_PROTOCOL"]
    with pytest.raises(BrokenResourceError):  # the stream is unusable after that
        await client.receive_some()
    await client.aclose()
    await server.aclose()


@pytest.mark.asyncop
async def test_a_plaintext_peer_fails_the_handshake_with_wrong_version_number(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair
    client, _server = tls_pair(contexts, a, socket.socket())
    b.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    with pytest.raises(ssl.SSLError) as info:
        await client.do_handshake()
    assert info.value.reason == "WRONG_VERSION_NUMBER"
    await client.aclose()


# -- UDP --------------------------------------------------------------------------------


@pytest.mark.asyncop
async def test_udp_carries_an_empty_datagram_and_sends_to_a_name() -> None:
    async with (
        await net.open_udp_socket(HOST) as receiver,
        await net.open_udp_socket(HOST) as sender,
    ):
        port = receiver.local_address[1]
        await sender.sendto(b"", HOST, port)
        assert await receiver.recvfrom() == (b"", sender.local_address)
        await sender.sendto(b"by name", "localhost", port)
        assert await receiver.recvfrom() == (b"by name", sender.local_address)


@pytest.mark.asyncop
async def test_udp_socket_closed_while_sendto_resolves_raises_closed_resource_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entered, release = threading.Event(), threading.Event()
    real = socket.getaddrinfo

    def slow_getaddrinfo(host: Any, port: Any, *args: Any) -> Any:
        numeric_only = len(args) == 4 and args[3] & socket.AI_NUMERICHOST
        if host == "slow.example" and not numeric_only:  # the lookup in a thread
            entered.set()
            release.wait(10)
            return real(HOST, port, *args)
        return real(host, port, *args)

    monkeypatch.setattr(socket, "getaddrinfo", slow_getaddrinfo)
    sock = await net.open_udp_socket(HOST)

    async def send() -> None:
        await sock.sendto(b"ping", "slow.example", 9)

    try:
        async with asyncop.scope(supervise=True) as s:
            task = s.spawn(send)
            while not entered.is_set():  # (a thread's wait is not "blocked")
                await asyncop.sleep(0.001)
            await sock.aclose()
            release.set()
    finally:
        release.set()
    assert isinstance(task.error, ClosedResourceError), task.error
    assert "while a task used it" in str(task.error)


# -- Unix-domain sockets ------------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's abstract namespace")
@pytest.mark.asyncop
async def test_an_abstract_unix_socket_serves_with_no_file() -> None:
    path = f"\0asyncop-test-{os.getpid()}-{id(object())}"

    async def handler(stream: net.SocketStream) -> None:
        await stream.send_all(b"abstract")

    async with asyncop.scope() as s:
        [listener] = await s.start(functools.partial(net.serve_unix, handler, path))
        async with await net.open_unix_stream(path) as stream:
            assert await stream.receive_some() == b"abstract"
        s.cancel()
    assert listener.socket.fileno() == -1


@pytest.mark.asyncop
async def test_unix_paths_as_pathlike_or_bytes_are_cleaned_up(tmp_path: Path) -> None:
    for path in (tmp_path / "a.sock", os.fsencode(tmp_path / "b.sock")):
        listener = await net.open_unix_listener(path)
        async with await net.open_unix_stream(path):
            pass
        assert os.path.exists(path)
        await listener.aclose()
        assert not os.path.exists(path)


@pytest.mark.asyncop
async def test_unix_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "gone" / "app.sock"
    with pytest.raises(FileNotFoundError, match=r"cannot listen on Unix socket .*gone"):
        await net.open_unix_listener(missing)
    with pytest.raises(OSError, match="too long; choose a shorter path"):
        await net.open_unix_listener(tmp_path / ("x" * 200))
    with pytest.raises(ValueError, match="empty path"):
        await net.open_unix_stream("")


# -- the asyncio bridge -------------------------------------------------------------------


@pytest.mark.asyncop
async def test_asyncio_side_timeouts_and_cancels_come_back_as_asyncios_own() -> None:
    async def wait_for_too_long() -> None:
        await asyncio.wait_for(asyncio.sleep(10), 0.01)

    async def cancels_itself() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(10)

    with pytest.raises(TimeoutError):
        await bridge.run(wait_for_too_long)
    with pytest.raises(asyncio.CancelledError):
        await bridge.run(cancels_itself)
    await asyncop.checkpoint()  # not an asyncop cancel: the task goes on
    me = asyncop.current_operation()
    assert me is not None and not me.token.cancelled


@pytest.mark.asyncop
async def test_an_asyncio_client_times_out_against_a_silent_asyncop_server() -> None:
    async def handler(stream: net.SocketStream) -> None:
        await asyncop.sleep_forever()

    async def client(port: int) -> str:
        reader, writer = await asyncio.open_connection(HOST, port)
        try:
            async with asyncio.timeout(0.05):
                await reader.read(10)
        except TimeoutError:
            return "timed out"
        finally:
            writer.close()
            await writer.wait_closed()
        return "read"

    async with asyncop.scope() as s:
        listeners = await s.start(functools.partial(net.serve_tcp, handler, 0, host=HOST))
        assert await bridge.run(client, listeners[0].socket.getsockname()[1]) == "timed out"
        s.cancel()


@pytest.mark.asyncop
async def test_a_closed_stream_or_udp_socket_refuses_address_queries(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    # trio's SocketStream: a closed stream raises ClosedResourceError, never EBADF
    stream = net.SocketStream(pair[0])
    await stream.aclose()
    for query in (
        stream.getsockname,
        stream.getpeername,
        lambda: stream.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
        lambda: stream.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
    ):
        with pytest.raises(ClosedResourceError, match="stream was closed"):
            query()
    sock = await net.open_udp_socket(HOST)
    await sock.aclose()
    with pytest.raises(ClosedResourceError, match="UDP socket was closed"):
        sock.local_address  # noqa: B018


@pytest.mark.asyncop
async def test_a_plain_def_handler_fails_its_connection_saying_to_make_it_async(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def handler(stream: net.SocketStream) -> None:
        pass

    async with asyncop.scope() as s:
        start = functools.partial(net.serve_tcp, handler, 0, host=HOST)
        listeners = await s.start(start)
        port = listeners[0].socket.getsockname()[1]
        async with await net.open_tcp_stream(HOST, port) as stream:
            assert await stream.receive_some() == b""  # closed; the server goes on
        s.cancel()
    [record] = [r for r in caplog.records if r.exc_info]
    assert record.exc_info is not None
    error = record.exc_info[1]
    assert isinstance(error, TypeError)
    assert ".handler' returned NoneType, not an awaitable" in str(error)
    assert "async def handler(stream)" in str(error)


@pytest.mark.asyncop
async def test_accept_on_a_socket_closed_behind_the_listener_raises_closed_resource_error() -> None:
    [listener] = await net.open_tcp_listeners(0, host=HOST)
    listener.socket.close()  # not through the listener
    with pytest.raises(ClosedResourceError, match="listener was closed while a task used it"):
        await listener.accept()
    await listener.aclose()
