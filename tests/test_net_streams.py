"""asyncop.net streams: SocketStream, open_tcp_stream, listeners and serve_tcp, getaddrinfo."""

from __future__ import annotations

import errno
import functools
import logging
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import asyncop
from asyncop import (
    BrokenResourceError,
    BusyResourceError,
    Cancelled,
    ClosedResourceError,
)
from asyncop.net import (
    DelimiterNotFound,
    IncompleteRead,
    SocketListener,
    SocketStream,
    getaddrinfo,
    open_tcp_listeners,
    open_tcp_stream,
    serve_listeners,
    serve_tcp,
)
from asyncop.runtime._net import _dns, _serve, _tcp
from asyncop.testing import assert_checkpoints

from ._net import Status, finish
from .conftest import runtime_threads

pytestmark = pytest.mark.timeout(30)

HOST = "127.0.0.1"


def port_of(listeners: Any) -> int:
    port: int = listeners[0].socket.getsockname()[1]
    return port


@pytest.fixture
def pair(runtime: asyncop.Runtime) -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    try:
        yield a, b
    finally:
        a.close()
        b.close()


async def echo(stream: Any) -> None:
    async for chunk in stream:
        await stream.send_all(chunk)


# -- SocketStream over a socketpair ------------------------------------------------


def test_receive_some_returns_data_then_empty_bytes_at_eof_every_time(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def main() -> list[bytes]:
        stream = SocketStream(a)
        b.sendall(b"hello")
        b.shutdown(socket.SHUT_WR)
        got = [await stream.receive_some()]
        got.append(await stream.receive_some())
        got.append(await stream.receive_some())
        await stream.aclose()
        return got

    assert runtime.run(main) == [b"hello", b"", b""]
    finish(runtime)


def test_receive_some_respects_max_bytes_and_refuses_a_bad_one(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def main() -> list[bytes]:
        async with SocketStream(a) as stream:
            b.sendall(b"abcdef")
            await asyncop.sleep(0.05)
            got = [await stream.receive_some(2), await stream.receive_some(10)]
            with pytest.raises(ValueError, match="at least 1 byte"):
                await stream.receive_some(0)
            with pytest.raises(TypeError):
                await stream.receive_some("3")  # type: ignore[arg-type]
            return got

    assert runtime.run(main) == [b"ab", b"cdef"]
    finish(runtime)


def test_send_all_sends_everything_while_the_peer_reads_slowly(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair
    payload = bytes(range(256)) * 40_000  # 10 MB: many waits for room
    received = bytearray()

    def reader() -> None:
        while chunk := b.recv(1 << 16):
            received.extend(chunk)

    thread = threading.Thread(target=reader)
    thread.start()

    async def main() -> None:
        async with SocketStream(a) as stream:
            await stream.send_all(payload)
            await stream.send_eof()

    runtime.run(main)
    thread.join(10)
    assert bytes(received) == payload
    finish(runtime)


def test_receive_exactly_gathers_pieces_and_keeps_the_rest(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def feed() -> None:
        for piece in (b"\x00\x00", b"\x00\x05he", b"llo", b"tail"):
            b.sendall(piece)
            await asyncop.sleep(0.01)
        b.shutdown(socket.SHUT_WR)

    async def main() -> tuple[bytes, bytes]:
        async with SocketStream(a) as stream, asyncop.scope() as s:
            s.spawn(feed)
            (length,) = struct.unpack("!I", await stream.receive_exactly(4))
            body = await stream.receive_exactly(length)
            rest = b"".join([chunk async for chunk in stream])
            return body, rest

    assert runtime.run(main) == (b"hello", b"tail")
    finish(runtime)


def test_receive_exactly_raises_incomplete_read_with_the_partial_bytes(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def main() -> IncompleteRead:
        async with SocketStream(a) as stream:
            b.sendall(b"abc")
            b.shutdown(socket.SHUT_WR)
            with pytest.raises(IncompleteRead, match="3 of the 10 bytes") as info:
                await stream.receive_exactly(10)
            assert await stream.receive_some() == b""
            return info.value

    error = runtime.run(main)
    assert error.partial == b"abc"
    assert isinstance(error, EOFError)
    finish(runtime)


def test_receive_until_splits_frames_and_keeps_bytes_past_the_delimiter(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def feed() -> None:
        # The delimiter is cut across two sends.
        for piece in (b"GET / HTTP/1.1\r", b"\nHost: x\r\n\r\nBODY", b"MORE"):
            b.sendall(piece)
            await asyncop.sleep(0.01)
        b.shutdown(socket.SHUT_WR)

    async def main() -> list[bytes]:
        async with SocketStream(a) as stream, asyncop.scope() as s:
            s.spawn(feed)
            got = [await stream.receive_until(b"\r\n", 100)]
            got.append(await stream.receive_until(b"\r\n", 100))
            got.append(await stream.receive_until(b"\r\n", 100))
            got.append(await stream.receive_exactly(6))
            got.append(await stream.receive_some())
            return got

    assert runtime.run(main) == [b"GET / HTTP/1.1", b"Host: x", b"", b"BODYMO", b"RE"]
    finish(runtime)


def test_receive_until_raises_when_max_bytes_come_first_and_keeps_them(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def main() -> bytes:
        async with SocketStream(a) as stream:
            b.sendall(b"0123456789\n")
            await asyncop.sleep(0.05)
            with pytest.raises(DelimiterNotFound, match="max_bytes=5"):
                await stream.receive_until(b"\n", 5)
            # Exactly at the limit is allowed.
            return await stream.receive_until(b"\n", 10)

    assert runtime.run(main) == b"0123456789"
    finish(runtime)


def test_receive_until_raises_incomplete_read_at_eof(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def main() -> bytes:
        async with SocketStream(a) as stream:
            b.sendall(b"no newline")
            b.shutdown(socket.SHUT_WR)
            with pytest.raises(IncompleteRead) as info:
                await stream.receive_until(b"\n", 100)
            with pytest.raises(ValueError, match="empty delimiter"):
                await stream.receive_until(b"", 100)
            with pytest.raises(TypeError, match="bytes delimiter"):
                await stream.receive_until("\n", 100)  # type: ignore[arg-type]
            return info.value.partial

    assert runtime.run(main) == b"no newline"
    finish(runtime)


def test_two_tasks_receiving_at_once_get_busy_resource_error(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def main() -> bytes:
        async with SocketStream(a) as stream, asyncop.scope() as s:
            first = s.spawn(stream.receive_some)
            await asyncop.sleep(0.05)
            for method, args in (
                (stream.receive_some, ()),
                (stream.receive_exactly, (1,)),
                (stream.receive_until, (b"\n", 10)),
            ):
                with pytest.raises(BusyResourceError, match="already receiving"):
                    await method(*args)  # type: ignore[operator]
            b.sendall(b"x")
            data: bytes = await first
            return data

    assert runtime.run(main) == b"x"
    finish(runtime)


def test_two_tasks_sending_at_once_get_busy_resource_error_but_send_and_receive_mix(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def main() -> bytes:
        async with SocketStream(a) as stream, asyncop.scope() as s:
            blocked = s.spawn(stream.send_all, b"x" * 20_000_000)  # fills the buffer
            await asyncop.sleep(0.05)
            with pytest.raises(BusyResourceError, match="already sending"):
                await stream.send_all(b"y")
            with pytest.raises(BusyResourceError):
                await stream.send_eof()
            b.sendall(b"reply")
            reply = await stream.receive_some()  # the other direction is free
            blocked.cancel()
            return reply

    assert runtime.run(main) == b"reply"
    finish(runtime)


def test_send_eof_half_closes_and_the_stream_still_receives(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def main() -> bytes:
        async with SocketStream(a) as stream:
            await stream.send_all(b"request")
            await stream.send_eof()
            await stream.send_eof()  # harmless twice
            with pytest.raises(ClosedResourceError, match="send_eof"):
                await stream.send_all(b"more")
            b.settimeout(5)
            assert b.recv(100) == b"request"
            assert b.recv(100) == b""  # the peer saw the end
            b.sendall(b"response")
            return await stream.receive_some()

    assert runtime.run(main) == b"response"
    finish(runtime)


def test_aclose_wakes_a_parked_receiver_and_later_use_is_refused(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, _b = pair

    async def receiver(stream: SocketStream) -> str:
        try:
            await stream.receive_some()
        except ClosedResourceError as exc:
            return str(exc)
        return "no error"

    async def main() -> str:
        stream = SocketStream(a)
        async with asyncop.scope() as s:
            task = s.spawn(receiver, stream)
            await asyncop.sleep(0.05)
            await stream.aclose()
        await stream.aclose()  # idempotent
        with pytest.raises(ClosedResourceError):
            await stream.receive_some()
        with pytest.raises(ClosedResourceError):
            await stream.send_all(b"x")
        result: str = task.result()
        return result

    assert "closed" in runtime.run(main)
    assert a.fileno() == -1
    finish(runtime)


def test_a_cancelled_receive_loses_no_data(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def main() -> bytes:
        async with SocketStream(a) as stream:
            with pytest.raises(TimeoutError):
                async with asyncop.scope(timeout=0.05):
                    await stream.receive_until(b"\n", 100)
            b.sendall(b"partial")
            with pytest.raises(TimeoutError):
                async with asyncop.scope(timeout=0.1):
                    await stream.receive_until(b"\n", 100)  # takes "partial", then waits
            b.sendall(b" line\n")
            return await stream.receive_until(b"\n", 100)

    assert runtime.run(main) == b"partial line"
    finish(runtime)


def test_a_cancelled_task_takes_nothing_even_when_data_is_ready(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def main() -> bytes:
        async with SocketStream(a) as stream:
            b.sendall(b"data")
            await asyncop.sleep(0.05)
            async with asyncop.scope() as s:
                s.cancel()
                with pytest.raises(Cancelled):
                    await stream.receive_some()
            return await stream.receive_some()

    assert runtime.run(main) == b"data"
    finish(runtime)


def test_a_stream_that_always_has_data_still_lets_other_tasks_run() -> None:
    # One worker, so that only the stream's own yields let the other task in.
    a, b = socket.socketpair()
    stop = threading.Event()

    def flood() -> None:
        chunk = b"x" * 65536
        while not stop.is_set():
            try:
                b.sendall(chunk)
            except OSError:
                return

    writer = threading.Thread(target=flood)
    writer.start()
    log: list[str] = []

    async def other() -> None:
        while True:
            log.append("other")
            await asyncop.checkpoint()

    async def main() -> None:
        async with SocketStream(a) as stream:
            await asyncop.sleep(0.1)  # the socket's buffer is full
            async with asyncop.scope() as s:
                s.spawn(other)
                for _ in range(200):
                    await stream.receive_some(64)
                    log.append("read")
                s.cancel()

    with asyncop.Runtime(1, name="fair") as rt:
        try:
            rt.run(main)
        finally:
            stop.set()
            b.close()
            writer.join(10)
        finish(rt)
    first_read = log.index("read")
    others = log[first_read : len(log) - log[::-1].index("read")].count("other")
    assert others >= 5, log[:40]  # one yield per FAIR_STREAK reads at least


def test_a_receive_with_data_ready_passes_a_checkpoint(
    runtime: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def main() -> None:
        async with SocketStream(a) as stream:
            b.sendall(b"ready")
            await asyncop.sleep(0.05)
            with assert_checkpoints():
                assert await stream.receive_some() == b"ready"
            with assert_checkpoints():
                await stream.send_all(b"room")

    runtime.run(main)
    finish(runtime)


def test_a_reset_connection_raises_broken_resource_error(runtime: asyncop.Runtime) -> None:
    async def main() -> None:
        listener = socket.create_server((HOST, 0))
        with listener:
            stream = await open_tcp_stream(HOST, listener.getsockname()[1])
            peer, _ = listener.accept()
            peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            peer.close()  # RST
            await asyncop.sleep(0.05)
            async with stream:
                with pytest.raises(BrokenResourceError, match="broken") as info:
                    await stream.receive_some()
                assert isinstance(info.value.__cause__, ConnectionResetError)

    runtime.run(main)
    finish(runtime)


def test_socket_stream_refuses_what_is_not_a_connected_stream_socket() -> None:
    with pytest.raises(TypeError, match=r"socket\.socket"):
        SocketStream(3)  # type: ignore[arg-type]
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
        pytest.raises(ValueError, match="SOCK_STREAM"),
    ):
        SocketStream(udp)
    sock = socket.socket()
    sock.close()
    with pytest.raises(ClosedResourceError):
        SocketStream(sock)


# -- open_tcp_stream ----------------------------------------------------------------


def test_open_tcp_stream_connects_and_sets_nodelay(runtime: asyncop.Runtime) -> None:
    async def main() -> tuple[int, bytes]:
        with socket.create_server((HOST, 0)) as listener:
            stream = await open_tcp_stream("localhost", listener.getsockname()[1])
            async with stream:
                assert isinstance(stream, SocketStream)
                peer, _ = listener.accept()
                with peer:
                    peer.sendall(b"hi")
                    nodelay = stream.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                    stream.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                    assert stream.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)
                    return nodelay, await stream.receive_some()

    nodelay, data = runtime.run(main)
    assert nodelay and data == b"hi"
    finish(runtime)


def test_open_tcp_stream_refused_names_the_address(runtime: asyncop.Runtime) -> None:
    with socket.create_server((HOST, 0)) as probe:
        port = probe.getsockname()[1]  # closed below: nobody listens there

    async def main() -> None:
        with pytest.raises(ConnectionRefusedError, match=f"127.0.0.1 port {port}"):
            await open_tcp_stream(HOST, port)

    runtime.run(main)
    finish(runtime)


def test_open_tcp_stream_checks_its_arguments(runtime: asyncop.Runtime) -> None:
    async def main() -> None:
        with pytest.raises(TypeError, match="int port"):
            await open_tcp_stream(HOST, "80")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="65535"):
            await open_tcp_stream(HOST, 70000)
        with pytest.raises(ValueError, match="ssl_context"):
            await open_tcp_stream(HOST, 80, server_hostname="x")
        with pytest.raises(ValueError, match="NaN"):
            await open_tcp_stream(HOST, 80, happy_eyeballs_delay=float("nan"))

    runtime.run(main)


@pytest.mark.parametrize(
    ("tls", "error"),
    [
        ({"ssl_context": "x"}, TypeError),
        ({"ssl_context": ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)}, ValueError),
        ({"ssl_context": ssl.create_default_context(), "server_hostname": 5}, TypeError),
    ],
    ids=["not-a-context", "server-side-context", "hostname-not-a-str"],
)
def test_open_tcp_stream_refuses_bad_tls_arguments_before_connecting(
    runtime: asyncop.Runtime, tls: dict[str, Any], error: type
) -> None:
    with socket.create_server((HOST, 0)) as listener:
        port = listener.getsockname()[1]

        async def main() -> None:
            with pytest.raises(error):
                await open_tcp_stream(HOST, port, **tls)

        runtime.run(main)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    finish(runtime)


@pytest.mark.parametrize("server_hostname", ["", "x" * 64 + ".example"])
def test_open_tcp_stream_closes_the_connection_when_tls_setup_fails_after_connecting(
    runtime: asyncop.Runtime, server_hostname: str
) -> None:
    with socket.create_server((HOST, 0)) as listener:
        port = listener.getsockname()[1]

        async def main() -> BaseException:
            context = ssl.create_default_context()
            with pytest.raises(ValueError) as info:  # the name OpenSSL cannot take
                await open_tcp_stream(
                    HOST, port, ssl_context=context, server_hostname=server_hostname
                )
            return info.value  # kept alive, with its frames, while the peer looks

        error = runtime.run(main)
        peer, _ = listener.accept()
        with peer:
            peer.settimeout(10)
            assert peer.recv(10) == b""  # the client closed its end
        del error
    finish(runtime)


class Targets:
    """Addresses for Happy Eyeballs tests: a good one, a refusing one, a black hole."""

    def __init__(self) -> None:
        self.good = socket.create_server((HOST, 0))
        with socket.create_server((HOST, 0)) as probe:
            self.refused_port = probe.getsockname()[1]
        # A listener whose accept queue is full drops new SYNs: a connect
        # to it hangs, like one to a dead address.
        self.hole = socket.socket()
        self.hole.bind((HOST, 0))
        self.hole.listen(0)
        self.filler = socket.create_connection(self.hole.getsockname())
        time.sleep(0.05)

    def entry(self, port: int) -> tuple[Any, ...]:
        return (socket.AF_INET, socket.SOCK_STREAM, 6, "", (HOST, port))

    @property
    def good_entry(self) -> tuple[Any, ...]:
        return self.entry(self.good.getsockname()[1])

    @property
    def refused_entry(self) -> tuple[Any, ...]:
        return self.entry(self.refused_port)

    @property
    def hole_entry(self) -> tuple[Any, ...]:
        return self.entry(self.hole.getsockname()[1])

    def close(self) -> None:
        for sock in (self.good, self.hole, self.filler):
            sock.close()


@pytest.fixture
def targets() -> Iterator[Targets]:
    made = Targets()
    try:
        yield made
    finally:
        made.close()


def resolve_to(monkeypatch: pytest.MonkeyPatch, entries: list[tuple[Any, ...]]) -> None:
    async def fake(*args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        return list(entries)

    monkeypatch.setattr(_dns, "getaddrinfo", fake)


def test_happy_eyeballs_moves_on_at_once_when_an_attempt_fails(
    runtime: asyncop.Runtime, targets: Targets, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_to(monkeypatch, [targets.refused_entry, targets.refused_entry, targets.good_entry])

    async def main() -> float:
        start = asyncop.current_time()
        stream = await open_tcp_stream("example", 1, happy_eyeballs_delay=5)
        async with stream:
            assert stream.getpeername() == targets.good.getsockname()  # type: ignore[union-attr]
        return asyncop.current_time() - start

    assert runtime.run(main) < 2.0  # not the 10 s two delays would take
    finish(runtime)


def test_happy_eyeballs_starts_the_next_attempt_after_the_delay_and_cancels_the_loser(
    runtime: asyncop.Runtime, targets: Targets, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_to(monkeypatch, [targets.hole_entry, targets.good_entry])

    async def main() -> float:
        start = asyncop.current_time()
        stream = await open_tcp_stream("example", 1, happy_eyeballs_delay=0.2)
        elapsed = asyncop.current_time() - start
        await stream.aclose()
        return elapsed

    elapsed = runtime.run(main)
    assert 0.15 < elapsed < 3.0
    finish(runtime)  # the black-hole attempt was cancelled: no I/O wait is left


def test_happy_eyeballs_with_no_delay_limit_tries_one_address_at_a_time(
    runtime: asyncop.Runtime, targets: Targets, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_to(monkeypatch, [targets.hole_entry, targets.good_entry])

    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=0.5):
                await open_tcp_stream("example", 1, happy_eyeballs_delay=None)

    runtime.run(main)
    finish(runtime)


def test_happy_eyeballs_reports_every_failed_attempt(
    runtime: asyncop.Runtime, targets: Targets, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = socket.create_server((HOST, 0))
    other_port = other.getsockname()[1]
    other.close()
    resolve_to(monkeypatch, [targets.refused_entry, targets.entry(other_port)])

    async def main() -> ConnectionRefusedError:
        with pytest.raises(ConnectionRefusedError) as info:
            await open_tcp_stream("example", 1)
        return info.value

    error = runtime.run(main)
    text = str(error)
    assert "all 2 addresses failed" in text
    assert f"port {targets.refused_port}" in text and f"port {other_port}" in text
    assert error.errno == errno.ECONNREFUSED
    assert isinstance(error.__cause__, ExceptionGroup)
    finish(runtime)


def test_cancelling_open_tcp_stream_cancels_every_attempt(
    runtime: asyncop.Runtime, targets: Targets, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_to(monkeypatch, [targets.hole_entry, targets.hole_entry, targets.hole_entry])

    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=0.3):
                await open_tcp_stream("example", 1, happy_eyeballs_delay=0.05)

    runtime.run(main)
    finish(runtime)


def test_interleave_alternates_address_families() -> None:
    v4 = [(socket.AF_INET, 1, 6, "", (f"10.0.0.{i}", 1)) for i in range(3)]
    v6 = [(socket.AF_INET6, 1, 6, "", (f"::{i}", 1, 0, 0)) for i in range(2)]
    ordered = _tcp._interleave([*v6, *v4])
    assert [entry[4][0] for entry in ordered] == ["::0", "10.0.0.0", "::1", "10.0.0.1", "10.0.0.2"]


# -- listeners and servers ----------------------------------------------------------


def test_open_tcp_listeners_share_one_port_and_accept(runtime: asyncop.Runtime) -> None:
    async def main() -> bytes:
        listeners = await open_tcp_listeners(0, host=HOST)
        assert len(listeners) == 1 and isinstance(listeners[0], SocketListener)
        async with listeners[0] as listener, asyncop.scope() as s:
            client = s.spawn(open_tcp_stream, HOST, port_of(listeners))
            server_side = await listener.accept()
            client_side = await client
            async with server_side, client_side:
                await client_side.send_all(b"ping")
                return await server_side.receive_some()

    assert runtime.run(main) == b"ping"
    finish(runtime)


def test_open_tcp_listeners_on_every_interface_use_the_same_port(
    runtime: asyncop.Runtime,
) -> None:
    async def main() -> set[int]:
        listeners = await open_tcp_listeners(0)
        try:
            return {listener.socket.getsockname()[1] for listener in listeners}
        finally:
            for listener in listeners:
                await listener.aclose()

    ports = runtime.run(main)
    assert len(ports) == 1
    finish(runtime)


def test_open_tcp_listeners_on_a_busy_port_raises(runtime: asyncop.Runtime) -> None:
    async def main() -> None:
        with socket.create_server((HOST, 0)) as busy:
            with pytest.raises(OSError, match="cannot listen") as info:
                await open_tcp_listeners(busy.getsockname()[1], host=HOST)
            assert info.value.errno == errno.EADDRINUSE

    runtime.run(main)
    finish(runtime)


def test_closing_a_listener_wakes_accept(runtime: asyncop.Runtime) -> None:
    async def main() -> None:
        (listener,) = await open_tcp_listeners(0, host=HOST)

        async def accept() -> str:
            try:
                await listener.accept()
            except ClosedResourceError as exc:
                return str(exc)
            return "accepted"

        async with asyncop.scope() as s:
            waiting = s.spawn(accept)
            await asyncop.sleep(0.05)
            await listener.aclose()
        assert "closed" in waiting.result()

    runtime.run(main)
    finish(runtime)


def test_serve_tcp_echoes_for_many_clients_and_reports_its_listeners(
    runtime: asyncop.Runtime,
) -> None:
    async def client(port: int, text: bytes) -> bytes:
        async with await open_tcp_stream(HOST, port) as stream:
            await stream.send_all(text)
            await stream.send_eof()
            return b"".join([chunk async for chunk in stream])

    async def main() -> list[bytes]:
        async with asyncop.scope() as s:
            listeners = await s.start(functools.partial(serve_tcp, echo, 0, host=HOST))
            assert all(isinstance(listener, SocketListener) for listener in listeners)
            port = port_of(listeners)
            async with asyncop.scope() as clients:
                ops = [clients.spawn(client, port, b"m%d" % i * 1000) for i in range(10)]
            s.cancel()
        return [op.result() for op in ops]

    assert runtime.run(main) == [b"m%d" % i * 1000 for i in range(10)]
    finish(runtime)


def test_a_failing_handler_is_logged_and_the_server_goes_on(
    runtime: asyncop.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    async def handler(stream: Any) -> None:
        line = await stream.receive_until(b"\n", 100)
        if line == b"boom":
            raise ValueError("handler exploded")
        await stream.send_all(b"ok " + line)

    async def ask(port: int, line: bytes) -> bytes:
        async with await open_tcp_stream(HOST, port) as stream:
            await stream.send_all(line + b"\n")
            return b"".join([chunk async for chunk in stream])

    async def main() -> list[bytes]:
        async with asyncop.scope() as s:
            port = port_of(await s.start(functools.partial(serve_tcp, handler, 0, host=HOST)))
            got = [await ask(port, b"boom"), await ask(port, b"fine")]
            [server] = s.children()
            assert server.state is asyncop.OperationState.RUNNING
            server.cancel()
        return got

    with caplog.at_level(logging.ERROR, logger="asyncop.net"):
        assert runtime.run(main) == [b"", b"ok fine"]
    failures = [r for r in caplog.records if "failed for the connection" in r.getMessage()]
    assert len(failures) == 1
    assert failures[0].exc_info is not None and "handler exploded" in str(failures[0].exc_info[1])
    finish(runtime)


def test_cancelling_the_server_cancels_every_connection(runtime: asyncop.Runtime) -> None:
    events: list[str] = []

    async def handler(stream: Any) -> None:
        events.append("start")
        try:
            await stream.receive_some()
        except Cancelled:
            events.append("cancelled")
            raise

    async def main() -> None:
        status = Status()
        async with asyncop.scope() as s:
            server = s.spawn(
                functools.partial(serve_tcp, handler, 0, host=HOST, task_status=status)
            )
            await status.event.wait_async()
            clients = [await open_tcp_stream(HOST, port_of(status.value)) for _ in range(3)]
            while len(events) < 3:
                await asyncop.sleep(0.01)
            assert len(server.children()) == 1  # the server scope
            server.cancel()
        assert server.state is asyncop.OperationState.CANCELLED
        for client in clients:
            assert await client.receive_some() == b""  # the server closed its side
            await client.aclose()

    runtime.run(main)
    assert events == ["start"] * 3 + ["cancelled"] * 3
    finish(runtime)


def test_closing_the_listeners_ends_serve_listeners_after_its_connections(
    runtime: asyncop.Runtime,
) -> None:
    async def main() -> None:
        listeners = await open_tcp_listeners(0, host=HOST)
        port = port_of(listeners)
        async with asyncop.scope() as s:
            server = s.spawn(serve_listeners, echo, listeners)
            stream = await open_tcp_stream(HOST, port)
            await stream.send_all(b"x")
            assert await stream.receive_some() == b"x"
            for listener in listeners:
                await listener.aclose()
            await asyncop.sleep(0.05)
            assert not server.done  # the connection still runs
            await stream.aclose()
        assert server.state is asyncop.OperationState.COMPLETED

    runtime.run(main)
    finish(runtime)


class FlakyListener(socket.socket):
    """A listening socket whose accept() fails with EMFILE a few times."""

    failures = 3
    calls = 0

    def accept(self) -> tuple[socket.socket, Any]:
        FlakyListener.calls += 1
        if FlakyListener.failures:
            FlakyListener.failures -= 1
            raise OSError(errno.EMFILE, "Too many open files")
        return super().accept()


def test_accept_out_of_file_descriptors_backs_off_instead_of_spinning(
    runtime: asyncop.Runtime, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_serve, "ACCEPT_BACKOFF", 0.05)
    sock = FlakyListener(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((HOST, 0))
    sock.listen()
    FlakyListener.calls = 0
    FlakyListener.failures = 3

    async def main() -> bytes:
        listener = SocketListener(sock)
        async with asyncop.scope() as s:
            server = s.spawn(serve_listeners, echo, [listener])
            async with await open_tcp_stream(HOST, sock.getsockname()[1]) as stream:
                await stream.send_all(b"still serving")
                reply = await stream.receive_some()
            server.cancel()
        return reply

    with caplog.at_level(logging.WARNING, logger="asyncop.net"):
        assert runtime.run(main) == b"still serving"
    assert FlakyListener.calls <= 10  # three failures, each followed by a pause
    assert sum("retrying" in r.getMessage() for r in caplog.records) == 3
    finish(runtime)


def test_serve_tcp_refuses_a_handler_that_is_not_callable(runtime: asyncop.Runtime) -> None:
    async def main() -> None:
        with pytest.raises(TypeError, match="callable handler"):
            await serve_tcp("nope", 0)  # type: ignore[arg-type]

    runtime.run(main)


def test_serve_tcp_called_without_start_ignores_its_task_status(
    runtime: asyncop.Runtime,
) -> None:
    async def main() -> bytes:
        listeners = await open_tcp_listeners(0, host=HOST)
        port = port_of(listeners)
        async with asyncop.scope() as s:
            s.spawn(serve_listeners, echo, listeners)  # the default TASK_STATUS_IGNORED
            async with await open_tcp_stream(HOST, port) as stream:
                await stream.send_all(b"plain spawn")
                got = await stream.receive_some()
            s.cancel()
        return got

    assert runtime.run(main) == b"plain spawn"
    finish(runtime)


def test_start_raises_what_keeps_serve_tcp_from_starting(runtime: asyncop.Runtime) -> None:
    async def main() -> None:
        with socket.socket() as taken:
            taken.bind((HOST, 0))
            taken.listen()
            async with asyncop.scope() as s:
                with pytest.raises(OSError):
                    await s.start(
                        functools.partial(serve_tcp, echo, taken.getsockname()[1], host=HOST)
                    )
                assert s.children() == []

    runtime.run(main)
    finish(runtime)


# -- getaddrinfo --------------------------------------------------------------------


def blocking_threads(runtime: asyncop.Runtime) -> list[str]:
    return [t.name for t in runtime_threads(runtime) if "blocking" in t.name]


def test_getaddrinfo_resolves_numeric_addresses_without_a_thread(
    runtime: asyncop.Runtime,
) -> None:
    async def main() -> list[Any]:
        v4 = await getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM)
        v6 = await getaddrinfo("::1", "80", type=socket.SOCK_STREAM)
        none = await getaddrinfo(None, 80, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        return [v4, v6, none]

    v4, v6, none = runtime.run(main)
    assert v4[0][4] == ("127.0.0.1", 80)
    assert v6[0][0] == socket.AF_INET6
    assert none
    assert blocking_threads(runtime) == []
    finish(runtime)


def test_getaddrinfo_resolves_a_name_in_a_thread(runtime: asyncop.Runtime) -> None:
    async def main() -> list[Any]:
        return await getaddrinfo("localhost", 80, socket.AF_INET, socket.SOCK_STREAM)

    infos = runtime.run(main)
    assert infos[0][4] == ("127.0.0.1", 80)
    assert blocking_threads(runtime)
    finish(runtime)


def test_getaddrinfo_of_an_unknown_name_raises_gaierror(runtime: asyncop.Runtime) -> None:
    async def main() -> None:
        with pytest.raises(socket.gaierror):
            await getaddrinfo("no-such-host.invalid", 80)

    runtime.run(main)


@pytest.fixture
def slow_resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """socket.getaddrinfo that blocks names until released; counts the concurrency."""
    real = socket.getaddrinfo
    state: dict[str, Any] = {"running": 0, "peak": 0, "started": 0}
    lock = threading.Lock()
    release = threading.Event()
    state["release"] = release

    def fake(host: Any, port: Any, *args: Any) -> Any:
        flags = args[3] if len(args) > 3 else 0
        if flags & socket.AI_NUMERICHOST:
            return real(host, port, *args)
        with lock:
            state["running"] += 1
            state["started"] += 1
            state["peak"] = max(state["peak"], state["running"])
        try:
            release.wait(20)
            return real("127.0.0.1", port, *args)
        finally:
            with lock:
                state["running"] -= 1

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    try:
        yield state
    finally:
        release.set()


def test_getaddrinfo_is_cancelled_at_once_and_abandons_the_lookup(
    runtime: asyncop.Runtime, slow_resolver: dict[str, Any]
) -> None:
    async def main() -> float:
        start = asyncop.current_time()
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=0.1):
                await getaddrinfo("slow.example", 80)
        return asyncop.current_time() - start

    assert runtime.run(main) < 2.0
    assert slow_resolver["started"] == 1
    slow_resolver["release"].set()
    finish(runtime)


def test_getaddrinfo_runs_a_bounded_number_of_lookups_at_once(
    runtime: asyncop.Runtime, slow_resolver: dict[str, Any]
) -> None:
    count = _dns.MAX_RESOLVER_THREADS + 10

    async def main() -> int:
        async with asyncop.scope() as s:
            ops = [s.spawn(getaddrinfo, f"host{i}.example", 80) for i in range(count)]
            deadline = asyncop.current_time() + 5
            while slow_resolver["running"] < _dns.MAX_RESOLVER_THREADS:
                assert asyncop.current_time() < deadline
                await asyncop.sleep(0.01)
            await asyncop.sleep(0.1)
            peak: int = slow_resolver["peak"]
            slow_resolver["release"].set()
        assert all(op.result()[0][4][0] == "127.0.0.1" for op in ops)
        return peak

    assert runtime.run(main) == _dns.MAX_RESOLVER_THREADS
    assert slow_resolver["started"] == count
    finish(runtime)


def test_getaddrinfo_cancelled_while_queued_never_starts_its_lookup(
    runtime: asyncop.Runtime, slow_resolver: dict[str, Any]
) -> None:
    async def main() -> None:
        async with asyncop.scope() as s:
            holders = [
                s.spawn(getaddrinfo, f"hold{i}.example", 80)
                for i in range(_dns.MAX_RESOLVER_THREADS)
            ]
            while slow_resolver["running"] < _dns.MAX_RESOLVER_THREADS:
                await asyncop.sleep(0.01)
            with pytest.raises(TimeoutError):
                async with asyncop.scope(timeout=0.05):
                    await getaddrinfo("queued.example", 80)
            slow_resolver["release"].set()
        assert all(op.done for op in holders)
        assert _dns._slots.value == _dns.MAX_RESOLVER_THREADS  # every slot came back

    runtime.run(main)
    assert slow_resolver["started"] == _dns.MAX_RESOLVER_THREADS
    finish(runtime)


def test_getaddrinfo_checks_its_arguments(runtime: asyncop.Runtime) -> None:
    async def main() -> None:
        with pytest.raises(TypeError, match="family"):
            await getaddrinfo("localhost", 80, family="inet")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="host"):
            await getaddrinfo(12, 80)  # type: ignore[arg-type]

    runtime.run(main)


def test_importing_the_stream_modules_warns_about_nothing_at_exit() -> None:
    # The shared cancellation-point singleton is collected at exit; it must
    # not be reported as an awaitable somebody forgot to await.
    import subprocess
    import sys

    code = "import asyncop.net, asyncop.process, asyncop.signals"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
