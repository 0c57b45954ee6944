"""The error cases of ``asyncop.net``'s streams, servers, TLS, Unix and UDP sockets.

``tests/test_error_messages.py`` adds ``NET_CASES`` to its table: each row is
``(id, trigger, error type, text the message names, kind, public)`` and each
trigger takes that module's ``Ctx`` and returns the exception it provoked.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import asyncop
import asyncop.testing
from asyncop import BrokenResourceError, ClosedResourceError, net
from asyncop.runtime._net import _dns

__all__ = ["NET_CASES"]


def _run(c: Any, fn: Callable[..., Any], *args: Any) -> BaseException:
    """Run ``fn(*args)`` as a root operation of the real-clock runtime; return its error."""
    op = c.rt.spawn(fn, *args)
    result = op.wait(20)
    assert result.error is not None, f"{fn!r} raised nothing"
    return result.error


def _raises(fn: Callable[..., Any], *args: Any) -> BaseException:
    try:
        fn(*args)
    except BaseException as exc:
        return exc
    raise AssertionError(f"{fn!r} raised nothing")


@contextlib.contextmanager
def _pair() -> Iterator[tuple[net.SocketStream, socket.socket]]:
    a, b = socket.socketpair()
    with b:
        stream = net.SocketStream(a)
        try:
            yield stream
        finally:
            stream.close()


def _on_stream(c: Any, action: Callable[[net.SocketStream, socket.socket], Any]) -> BaseException:
    a, b = socket.socketpair()

    async def main() -> None:
        stream = net.SocketStream(a)
        try:
            await action(stream, b)
        finally:
            stream.close()

    with b:
        return _run(c, main)


def _contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    trustme = pytest.importorskip("trustme")
    authority = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return server, client


def _with_tls_server(
    c: Any,
    handler: Callable[[Any], Any],
    client: Callable[[int, ssl.SSLContext], Any],
    *,
    client_context: Callable[[ssl.SSLContext], ssl.SSLContext] = lambda ctx: ctx,
) -> BaseException:
    """Serve TLS with ``handler``; run ``client(port, context)``; return what it raised."""
    server_context, context = _contexts()

    async def main() -> None:
        listeners = await net.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        error: BaseException | None = None
        async with asyncop.scope() as s:
            server = s.spawn(
                functools.partial(
                    net.serve_listeners, handler, listeners, ssl_context=server_context
                )
            )
            try:
                await client(port, client_context(context))
            except Exception as exc:  # raised here, it would come out grouped
                error = exc
            server.cancel()
        if error is not None:
            raise error

    return _run(c, main)


class _FailingTransport:
    """A stream whose sends or receives fail, as a broken connection would."""

    def __init__(self, *, fail_receive: bool) -> None:
        self.fail_receive = fail_receive

    async def receive_some(self, max_bytes: int = 65536) -> bytes:
        await asyncop.checkpoint()
        if self.fail_receive:
            raise BrokenResourceError("the test transport broke")
        return b""

    async def send_all(self, data: bytes) -> None:
        await asyncop.checkpoint()
        if not self.fail_receive:
            raise BrokenResourceError("the test transport broke")

    async def aclose(self) -> None:
        await asyncop.checkpoint()


# -- streams -------------------------------------------------------------------------


def t_receive_some_type(c: Any) -> BaseException:
    return _on_stream(c, lambda s, _: s.receive_some("3"))


def t_receive_some_zero(c: Any) -> BaseException:
    return _on_stream(c, lambda s, _: s.receive_some(0))


def t_receive_exactly_type(c: Any) -> BaseException:
    return _on_stream(c, lambda s, _: s.receive_exactly(2.5))


def t_receive_exactly_negative(c: Any) -> BaseException:
    return _on_stream(c, lambda s, _: s.receive_exactly(-1))


def t_receive_until_type(c: Any) -> BaseException:
    return _on_stream(c, lambda s, _: s.receive_until("\n", 10))


def t_receive_until_empty(c: Any) -> BaseException:
    return _on_stream(c, lambda s, _: s.receive_until(b"", 10))


def t_stream_send_all_text(c: Any) -> BaseException:
    async def action(stream: net.SocketStream, _: socket.socket) -> None:
        await stream.send_all("hello")  # type: ignore[arg-type]

    return _on_stream(c, action)


def t_stream_closed(c: Any) -> BaseException:
    async def action(stream: net.SocketStream, _: socket.socket) -> None:
        await stream.aclose()
        await stream.receive_some()

    return _on_stream(c, action)


def t_stream_closed_under(c: Any) -> BaseException:
    async def action(stream: net.SocketStream, _: socket.socket) -> None:
        stream.socket.close()  # behind the stream's back
        await stream.receive_some()

    return _on_stream(c, action)


def t_stream_eof_sent(c: Any) -> BaseException:
    async def action(stream: net.SocketStream, _: socket.socket) -> None:
        await stream.send_eof()
        await stream.send_all(b"late")

    return _on_stream(c, action)


def t_stream_reset(c: Any) -> BaseException:
    from .test_error_messages import reset_pair

    client, server = reset_pair()
    server.close()

    async def main() -> None:
        async with net.SocketStream(client) as stream:
            await asyncop.sleep(0.05)
            await stream.receive_some()

    return _run(c, main)


def t_socket_stream_type(c: Any) -> BaseException:
    return _raises(net.SocketStream, 3)


def t_socket_stream_datagram(c: Any) -> BaseException:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        return _raises(net.SocketStream, udp)


def t_socket_stream_closed(c: Any) -> BaseException:
    sock = socket.socket()
    sock.close()
    return _raises(net.SocketStream, sock)


# -- TCP --------------------------------------------------------------------------------


def t_getaddrinfo_family(c: Any) -> BaseException:
    return _run(c, functools.partial(net.getaddrinfo, "localhost", 80, family="inet"))


def t_getaddrinfo_host(c: Any) -> BaseException:
    return _run(c, net.getaddrinfo, 12, 80)


def t_tcp_port_type(c: Any) -> BaseException:
    return _run(c, net.open_tcp_stream, "127.0.0.1", "80")


def t_tcp_port_range(c: Any) -> BaseException:
    return _run(c, net.open_tcp_stream, "127.0.0.1", 70000)


def t_tcp_host_type(c: Any) -> BaseException:
    return _run(c, net.open_tcp_stream, 5, 80)


def t_tcp_server_hostname(c: Any) -> BaseException:
    return _run(c, functools.partial(net.open_tcp_stream, "h", 1, server_hostname="h"))


def t_serve_handler(c: Any) -> BaseException:
    return _run(c, net.serve_tcp, "not a handler", 0)


def t_listener_type(c: Any) -> BaseException:
    return _raises(net.SocketListener, 3)


def t_listener_not_listening(c: Any) -> BaseException:
    with socket.socket() as sock:
        return _raises(net.SocketListener, sock)


def t_listener_closed(c: Any) -> BaseException:
    async def main() -> None:
        (listener,) = await net.open_tcp_listeners(0, host="127.0.0.1")
        await listener.aclose()
        await listener.accept()

    return _run(c, main)


def t_listeners_backlog(c: Any) -> BaseException:
    return _run(c, functools.partial(net.open_tcp_listeners, 0, host="127.0.0.1", backlog=-1))


def t_listeners_backlog_type(c: Any) -> BaseException:
    return _run(c, functools.partial(net.open_tcp_listeners, 0, host="127.0.0.1", backlog=1.5))


def t_unix_backlog_type(c: Any) -> BaseException:
    with tempfile.TemporaryDirectory() as folder:
        listen = functools.partial(net.open_unix_listener, backlog="8")
        return _run(c, listen, os.path.join(folder, "server.sock"))


def t_listeners_no_address(c: Any) -> BaseException:
    async def nothing(*args: Any, **kwargs: Any) -> list[Any]:
        return []

    saved = _dns.getaddrinfo
    _dns.getaddrinfo = nothing  # type: ignore[assignment]
    try:
        return _run(c, functools.partial(net.open_tcp_listeners, 0, host="127.0.0.1"))
    finally:
        _dns.getaddrinfo = saved  # type: ignore[assignment]


def t_listeners_busy(c: Any) -> BaseException:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        return _run(c, functools.partial(net.open_tcp_listeners, port, host="127.0.0.1"))


# -- TLS ---------------------------------------------------------------------------------


def t_wrap_context_type(c: Any) -> BaseException:
    with _pair() as stream:
        return _raises(functools.partial(net.TLSStream.wrap, stream, ssl_context="tls"))


def t_wrap_not_a_stream(c: Any) -> BaseException:
    return _raises(
        functools.partial(net.TLSStream.wrap, object(), ssl_context=ssl.create_default_context())
    )


def t_wrap_server_hostname_on_server(c: Any) -> BaseException:
    with _pair() as stream:
        return _raises(
            functools.partial(
                net.TLSStream.wrap,
                stream,
                ssl_context=ssl.create_default_context(ssl.Purpose.CLIENT_AUTH),
                server_side=True,
                server_hostname="example.org",
            )
        )


def t_wrap_needs_server_hostname(c: Any) -> BaseException:
    with _pair() as stream:
        return _raises(
            functools.partial(net.TLSStream.wrap, stream, ssl_context=ssl.create_default_context())
        )


def _tls_over(transport: Any) -> net.TLSStream:
    return net.TLSStream.wrap(
        transport, ssl_context=ssl.create_default_context(), server_hostname="example.org"
    )


def t_tls_getpeercert_early(c: Any) -> BaseException:
    return _raises(_tls_over(_FailingTransport(fail_receive=True)).getpeercert)


def t_tls_transport_send_broke(c: Any) -> BaseException:
    return _run(c, _tls_over(_FailingTransport(fail_receive=False)).do_handshake)


def t_tls_transport_receive_broke(c: Any) -> BaseException:
    return _run(c, _tls_over(_FailingTransport(fail_receive=True)).do_handshake)


def t_tls_broken_earlier(c: Any) -> BaseException:
    tls = _tls_over(_FailingTransport(fail_receive=True))

    async def main() -> None:
        with contextlib.suppress(BrokenResourceError):
            await tls.do_handshake()
        await tls.send_all(b"after the failure")

    return _run(c, main)


def t_tls_closed(c: Any) -> BaseException:
    tls = _tls_over(_FailingTransport(fail_receive=True))

    async def main() -> None:
        await tls.aclose()
        await tls.receive_some()

    return _run(c, main)


def t_tls_closed_under(c: Any) -> BaseException:
    async def main() -> None:
        with socket.create_server(("127.0.0.1", 0)) as silent:
            raw = await net.open_tcp_stream("127.0.0.1", silent.getsockname()[1])
            tls = net.TLSStream.wrap(
                raw, ssl_context=ssl.create_default_context(), server_hostname="example.org"
            )
            closer = threading.Timer(0.05, raw.close)  # while the handshake waits
            closer.start()
            try:
                await tls.do_handshake()
            finally:
                closer.join()

    return _run(c, main)


def t_tls_handshake_eof(c: Any) -> BaseException:
    def hang_up(listener: socket.socket) -> None:
        peer, _ = listener.accept()
        peer.shutdown(socket.SHUT_WR)  # end of stream, in answer to the client hello
        peer.recv(65536)
        peer.close()

    async def main() -> None:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            thread = threading.Thread(target=hang_up, args=(listener,))
            thread.start()
            try:
                await net.open_tcp_stream(
                    "127.0.0.1", listener.getsockname()[1], ssl_context=ssl.create_default_context()
                )
            finally:
                thread.join(10)

    return _run(c, main)


def t_tls_eof_sent(c: Any) -> BaseException:
    async def handler(stream: Any) -> None:
        await stream.receive_some()

    async def client(port: int, context: ssl.SSLContext) -> None:
        async with await net.open_tcp_stream("127.0.0.1", port, ssl_context=context) as tls:
            await tls.send_eof()
            await tls.send_all(b"late")

    return _with_tls_server(c, handler, client)


def t_tls_send_eof_old(c: Any) -> BaseException:
    async def handler(stream: Any) -> None:
        await stream.receive_some()

    async def client(port: int, context: ssl.SSLContext) -> None:
        async with await net.open_tcp_stream("127.0.0.1", port, ssl_context=context) as tls:
            await tls.send_eof()

    def tls12(context: ssl.SSLContext) -> ssl.SSLContext:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        return context

    return _with_tls_server(c, handler, client, client_context=tls12)


def t_tls_unwrapped(c: Any) -> BaseException:
    async def handler(stream: Any) -> None:
        await stream.unwrap()

    async def client(port: int, context: ssl.SSLContext) -> None:
        tls = await net.open_tcp_stream("127.0.0.1", port, ssl_context=context)
        transport, _ = await tls.unwrap()
        async with transport:
            await tls.receive_some()

    return _with_tls_server(c, handler, client)


def t_tls_unwrap_without_close_notify(c: Any) -> BaseException:
    async def handler(stream: Any) -> None:
        stream.transport_stream.close()  # a bare TCP close

    async def client(port: int, context: ssl.SSLContext) -> None:
        async with await net.open_tcp_stream("127.0.0.1", port, ssl_context=context) as tls:
            await tls.unwrap()

    return _with_tls_server(c, handler, client)


# -- Unix and UDP --------------------------------------------------------------------


def t_unix_path_type(c: Any) -> BaseException:
    return _run(c, net.open_unix_stream, 3)


def t_unix_refused(c: Any) -> BaseException:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "stale.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
            stale.bind(path)
        return _run(c, net.open_unix_stream, path)


def t_unix_not_a_socket(c: Any) -> BaseException:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "notes.txt")
        with open(path, "w") as file:
            file.write("keep me")
        return _run(c, net.open_unix_listener, path)


def t_unix_empty_path(c: Any) -> BaseException:
    return _run(c, net.open_unix_listener, "")


def t_unix_missing_folder(c: Any) -> BaseException:
    with tempfile.TemporaryDirectory() as folder:
        return _run(c, net.open_unix_listener, os.path.join(folder, "gone", "app.sock"))


def t_unix_path_too_long(c: Any) -> BaseException:
    return _run(c, net.open_unix_stream, "/tmp/" + "x" * 200 + ".sock")


def t_udp_port_type(c: Any) -> BaseException:
    return _run(c, net.open_udp_socket, "127.0.0.1", "53")


def t_udp_port_range(c: Any) -> BaseException:
    return _run(c, net.open_udp_socket, "127.0.0.1", -1)


def t_udp_sendto_port_range(c: Any) -> BaseException:
    async def main() -> None:
        async with await net.open_udp_socket("127.0.0.1") as sock:
            await sock.sendto(b"ping", "127.0.0.1", 70000)

    return _run(c, main)


def t_udp_sendto_text(c: Any) -> BaseException:
    async def main() -> None:
        async with await net.open_udp_socket("127.0.0.1") as sock:
            await sock.sendto("ping", *sock.local_address)  # type: ignore[arg-type]

    return _run(c, main)


def t_serve_sync_handler(c: Any) -> BaseException:
    """A plain ``def`` handler: each connection fails, logged with the error."""
    errors: list[BaseException] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.exc_info and record.exc_info[1] is not None:
                errors.append(record.exc_info[1])

    def handler(stream: Any) -> None:
        pass

    async def main() -> None:
        async with asyncop.scope() as s:
            start = functools.partial(net.serve_tcp, handler, 0, host="127.0.0.1")
            listeners = await s.start(start)
            port = listeners[0].socket.getsockname()[1]
            async with await net.open_tcp_stream("127.0.0.1", port) as stream:
                await stream.receive_some()  # b"": the server closed it
            s.cancel()

    keep = Keep()
    logger = logging.getLogger("asyncop.net")
    logger.addHandler(keep)
    try:
        c.rt.run(main)
    finally:
        logger.removeHandler(keep)
    return errors[0]


def t_udp_socket_type(c: Any) -> BaseException:
    with socket.socket() as tcp:
        return _raises(net.UDPSocket, tcp)


def t_udp_closed(c: Any) -> BaseException:
    async def main() -> None:
        sock = await net.open_udp_socket("127.0.0.1")
        await sock.aclose()
        await sock.recvfrom()

    return _run(c, main)


def t_getaddrinfo_port_type(c: Any) -> BaseException:
    return _run(c, net.getaddrinfo, "127.0.0.1", 1.5)


def t_tcp_server_hostname_type(c: Any) -> BaseException:
    context = ssl.create_default_context()
    return _run(
        c, functools.partial(net.open_tcp_stream, "h", 1, ssl_context=context, server_hostname=5)
    )


def t_tcp_server_context(c: Any) -> BaseException:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    return _run(c, functools.partial(net.open_tcp_stream, "h", 1, ssl_context=context))


def t_serve_client_context(c: Any) -> BaseException:
    context = ssl.create_default_context()
    return _run(c, functools.partial(net.serve_tcp, _unreached, 0, ssl_context=context))


def t_serve_handshake_timeout(c: Any) -> BaseException:
    return _run(c, functools.partial(net.serve_tcp, _unreached, 0, handshake_timeout=0))


def _serve_listeners_of(c: Any, listeners: Any) -> BaseException:
    return _run(c, net.serve_listeners, _unreached, listeners)


def t_serve_one_listener(c: Any) -> BaseException:
    async def main() -> None:
        (listener,) = await net.open_tcp_listeners(0, host="127.0.0.1")
        async with listener:
            await net.serve_listeners(_unreached, listener)  # type: ignore[arg-type]

    return _run(c, main)


def t_serve_listeners_not_a_list(c: Any) -> BaseException:
    return _serve_listeners_of(c, 8080)


def t_serve_listeners_item(c: Any) -> BaseException:
    return _serve_listeners_of(c, ["127.0.0.1:8080"])


def t_tls_handshake_timeout(c: Any) -> BaseException:
    a, _b = asyncop.testing.memory_stream_pair()  # _b never answers
    tls = net.TLSStream.wrap(
        a,
        ssl_context=ssl.create_default_context(),
        server_hostname="example.org",
        handshake_timeout=0.05,
    )
    return _run(c, tls.do_handshake)


def t_memory_send_str(c: Any) -> BaseException:
    a, _b = asyncop.testing.memory_stream_pair()
    return _run(c, a.send_all, "text")


def t_memory_send_to_closed(c: Any) -> BaseException:
    a, b = asyncop.testing.memory_stream_pair()
    b.close()
    return _run(c, a.send_all, b"to nobody")


async def _unreached(stream: Any) -> None:
    raise AssertionError("no connection was expected")


# (id, trigger, error, named in the message, kind, public)
NET_CASES: list[tuple[str, Callable[[Any], BaseException], type[BaseException], str, str, bool]]
NET_CASES = [
    ("stream-receive-some-type", t_receive_some_type, TypeError, "receive_some", "misuse", True),
    ("stream-receive-some-zero", t_receive_some_zero, ValueError, "receive_some", "misuse", True),
    ("stream-receive-exactly-type", t_receive_exactly_type, TypeError, "float", "misuse", True),
    (
        "stream-receive-exactly-negative",
        t_receive_exactly_negative,
        ValueError,
        "-1",
        "misuse",
        True,
    ),
    ("stream-receive-until-type", t_receive_until_type, TypeError, "str", "misuse", True),
    (
        "stream-receive-until-empty",
        t_receive_until_empty,
        ValueError,
        "receive_until",
        "misuse",
        True,
    ),
    (
        "stream-send-all-text",
        t_stream_send_all_text,
        TypeError,
        "SocketStream.send_all()",
        "misuse",
        True,
    ),
    ("stream-closed", t_stream_closed, ClosedResourceError, "stream", "misuse", True),
    ("stream-closed-under", t_stream_closed_under, ClosedResourceError, "stream", "outcome", True),
    ("stream-eof-sent", t_stream_eof_sent, ClosedResourceError, "send_eof", "misuse", True),
    ("stream-reset", t_stream_reset, BrokenResourceError, "receive_some", "outcome", True),
    ("socket-stream-type", t_socket_stream_type, TypeError, "int", "misuse", True),
    ("socket-stream-datagram", t_socket_stream_datagram, ValueError, "SOCK_DGRAM", "misuse", True),
    (
        "socket-stream-closed",
        t_socket_stream_closed,
        ClosedResourceError,
        "SocketStream",
        "misuse",
        True,
    ),
    ("getaddrinfo-family", t_getaddrinfo_family, TypeError, "family", "misuse", True),
    ("getaddrinfo-host", t_getaddrinfo_host, TypeError, "int", "misuse", True),
    ("tcp-port-type", t_tcp_port_type, TypeError, "open_tcp_stream()", "misuse", True),
    ("tcp-port-range", t_tcp_port_range, ValueError, "70000", "misuse", True),
    ("tcp-host-type", t_tcp_host_type, TypeError, "int", "misuse", True),
    ("tcp-server-hostname", t_tcp_server_hostname, ValueError, "server_hostname", "misuse", True),
    ("serve-handler", t_serve_handler, TypeError, "serve_tcp()", "misuse", True),
    ("listener-type", t_listener_type, TypeError, "SocketListener", "misuse", True),
    (
        "listener-not-listening",
        t_listener_not_listening,
        ValueError,
        "SocketListener",
        "misuse",
        True,
    ),
    ("listener-closed", t_listener_closed, ClosedResourceError, "listener", "misuse", True),
    ("listeners-backlog", t_listeners_backlog, ValueError, "-1", "misuse", True),
    ("listeners-backlog-type", t_listeners_backlog_type, TypeError, "float", "misuse", True),
    ("unix-backlog-type", t_unix_backlog_type, TypeError, "open_unix_listener", "misuse", True),
    ("listeners-no-address", t_listeners_no_address, OSError, "127.0.0.1", "outcome", False),
    ("listeners-busy", t_listeners_busy, OSError, "127.0.0.1", "outcome", True),
    ("tls-wrap-context-type", t_wrap_context_type, TypeError, "str", "misuse", True),
    ("tls-wrap-not-a-stream", t_wrap_not_a_stream, TypeError, "object", "misuse", True),
    (
        "tls-wrap-server-hostname",
        t_wrap_server_hostname_on_server,
        ValueError,
        "server_side",
        "misuse",
        True,
    ),
    (
        "tls-wrap-needs-hostname",
        t_wrap_needs_server_hostname,
        ValueError,
        "server_hostname",
        "misuse",
        True,
    ),
    (
        "tls-transport-send-broke",
        t_tls_transport_send_broke,
        BrokenResourceError,
        "sending",
        "outcome",
        True,
    ),
    (
        "tls-transport-receive-broke",
        t_tls_transport_receive_broke,
        BrokenResourceError,
        "receiving",
        "outcome",
        True,
    ),
    (
        "tls-broken-earlier",
        t_tls_broken_earlier,
        BrokenResourceError,
        "TLS stream",
        "outcome",
        True,
    ),
    ("tls-getpeercert-early", t_tls_getpeercert_early, ValueError, "getpeercert", "misuse", True),
    ("tls-closed", t_tls_closed, ClosedResourceError, "TLS stream", "misuse", True),
    ("tls-closed-under", t_tls_closed_under, ClosedResourceError, "TLS stream", "outcome", True),
    (
        "tls-handshake-eof",
        t_tls_handshake_eof,
        BrokenResourceError,
        "TLS handshake",
        "outcome",
        True,
    ),
    ("tls-eof-sent", t_tls_eof_sent, ClosedResourceError, "TLS stream", "misuse", True),
    ("tls-send-eof-old", t_tls_send_eof_old, NotImplementedError, "TLSv1.2", "misuse", True),
    ("tls-unwrapped", t_tls_unwrapped, ClosedResourceError, "unwrap", "misuse", True),
    (
        "tls-unwrap-no-close-notify",
        t_tls_unwrap_without_close_notify,
        BrokenResourceError,
        "close_notify",
        "outcome",
        True,
    ),
    ("unix-path-type", t_unix_path_type, TypeError, "open_unix_stream()", "misuse", True),
    ("unix-refused", t_unix_refused, ConnectionRefusedError, "stale.sock", "outcome", True),
    ("unix-not-a-socket", t_unix_not_a_socket, FileExistsError, "notes.txt", "misuse", True),
    ("unix-empty-path", t_unix_empty_path, ValueError, "open_unix_listener()", "misuse", True),
    ("unix-missing-folder", t_unix_missing_folder, FileNotFoundError, "gone", "outcome", True),
    ("unix-path-too-long", t_unix_path_too_long, OSError, "xxxx.sock", "misuse", True),
    ("serve-sync-handler", t_serve_sync_handler, TypeError, "async def handler", "misuse", True),
    ("udp-sendto-text", t_udp_sendto_text, TypeError, "UDPSocket.sendto()", "misuse", True),
    ("udp-port-type", t_udp_port_type, TypeError, "local_port", "misuse", True),
    ("udp-port-range", t_udp_port_range, ValueError, "local_port", "misuse", True),
    ("udp-sendto-port-range", t_udp_sendto_port_range, ValueError, "70000", "misuse", True),
    ("udp-socket-type", t_udp_socket_type, TypeError, "UDPSocket", "misuse", True),
    ("udp-closed", t_udp_closed, ClosedResourceError, "UDP socket", "misuse", True),
    ("getaddrinfo-port-type", t_getaddrinfo_port_type, TypeError, "float", "misuse", True),
    (
        "tcp-server-hostname-type",
        t_tcp_server_hostname_type,
        TypeError,
        "server_hostname",
        "misuse",
        True,
    ),
    ("tcp-server-context", t_tcp_server_context, ValueError, "PROTOCOL_TLS_SERVER", "misuse", True),
    (
        "serve-client-context",
        t_serve_client_context,
        ValueError,
        "PROTOCOL_TLS_CLIENT",
        "misuse",
        True,
    ),
    (
        "serve-handshake-timeout",
        t_serve_handshake_timeout,
        ValueError,
        "handshake_timeout",
        "misuse",
        True,
    ),
    ("serve-one-listener", t_serve_one_listener, TypeError, "SocketListener", "misuse", True),
    ("serve-listeners-type", t_serve_listeners_not_a_list, TypeError, "int", "misuse", True),
    ("serve-listeners-item", t_serve_listeners_item, TypeError, "str", "misuse", True),
    ("tls-handshake-timeout", t_tls_handshake_timeout, TimeoutError, "0.05", "outcome", True),
    ("memory-send-str", t_memory_send_str, TypeError, "str", "misuse", True),
    (
        "memory-send-to-closed",
        t_memory_send_to_closed,
        BrokenResourceError,
        "end a",
        "outcome",
        True,
    ),
]
