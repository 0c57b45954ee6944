"""anyio's networking on the asyncop backend: streams, listeners, datagrams, lookups, waits.

- TCP and Unix streams carry bytes both ways, with anyio's extra
  attributes and ``TCP_NODELAY``; a peer that closed its side gives
  ``EndOfStream`` (never ``b""``), a peer's reset ``BrokenResourceError``;
- a stream used after ``aclose()`` raises ``ClosedResourceError``, and a
  task waiting on it when another closes it gets the same; a second task in
  the same direction gets ``BusyResourceError``;
- every call is a cancellation point, and a cancelled receive takes no
  byte; a task reading a socket that always has data lets the others run;
- listeners accept with ``serve()``; UDP and Unix datagram sockets,
  connected or not, send and receive packets; Unix streams pass fds;
- ``getaddrinfo``/``getnameinfo`` resolve off the workers, and a cancel
  leaves a lookup that hangs; ``wait_readable``/``notify_closing`` follow
  anyio's rules; TLS from ``anyio.streams.tls`` runs over these streams.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import SocketAttribute, SocketListener, SocketStream
from anyio.streams.tls import TLSListener

import asyncop
from asyncop.testing import VirtualClock, assert_checkpoints

from ._net_errors import _contexts as tls_contexts

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.skipif(sys.platform == "win32", reason="Unix sockets and fd passing"),
]

HOST = "127.0.0.1"


def run(
    main: Callable[..., Awaitable[Any]], *args: Any, workers: int = 2, real_clock: bool = False
) -> Any:
    # The virtual clock jumps only when every task waits on a timer, never
    # over a socket wait: a network test runs at the network's pace.
    options: dict[str, Any] = {"workers": workers}
    if not real_clock:
        options["clock"] = VirtualClock(autojump=True)
    return anyio.run(main, *args, backend="asyncop", backend_options=options)


async def connected_pair() -> tuple[SocketStream, SocketStream]:
    """A client stream and the server's end of it, over TCP on loopback."""
    listener = await anyio.create_tcp_listener(local_host=HOST)
    async with listener:
        port = listener.extra(SocketAttribute.local_port)
        client = await anyio.connect_tcp(HOST, port)
        (inner,) = listener.listeners
        assert isinstance(inner, SocketListener)
        server = await inner.accept()
    return client, server


async def cancel_when_blocked(scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once every other task waits (on a socket, say)."""
    await anyio.wait_all_tasks_blocked()
    scope.cancel()


# ----------------------------------------------------------------------
# TCP streams
# ----------------------------------------------------------------------


def test_tcp_streams_carry_bytes_both_ways_with_their_attributes() -> None:
    async def main() -> None:
        client, server = await connected_pair()
        async with client, server:
            await client.send(b"ping")
            assert await server.receive() == b"ping"
            await server.send(b"pong")
            assert await client.receive() == b"pong"
            for stream, peer in ((client, server), (server, client)):
                raw = stream.extra(SocketAttribute.raw_socket)
                assert raw.gettimeout() == 0  # non-blocking
                assert raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
                assert stream.extra(SocketAttribute.family) == socket.AF_INET
                local = stream.extra(SocketAttribute.local_address)
                assert local == raw.getsockname()
                assert stream.extra(SocketAttribute.local_port) == local[1]
                assert stream.extra(SocketAttribute.remote_address) == peer.extra(
                    SocketAttribute.local_address
                )
                assert stream.extra(SocketAttribute.remote_port) == peer.extra(
                    SocketAttribute.local_port
                )

    run(main)


def test_a_large_send_arrives_whole_while_the_peer_reads() -> None:
    payload = os.urandom(4 * 1024 * 1024)  # more than the kernel buffers hold

    async def main() -> bytes:
        client, server = await connected_pair()
        received = bytearray()

        async def read_all() -> None:
            while len(received) < len(payload):
                received.extend(await server.receive())

        async with client, server, anyio.create_task_group() as tg:
            tg.start_soon(read_all)
            await client.send(payload)
        return bytes(received)

    assert run(main) == payload


def test_a_peer_that_closed_gives_end_of_stream_then_closed_after_aclose() -> None:
    async def main() -> None:
        client, server = await connected_pair()
        async with client:
            await server.send(b"last")
            await server.aclose()
            assert await client.receive() == b"last"
            with pytest.raises(anyio.EndOfStream):
                await client.receive()
            with pytest.raises(anyio.EndOfStream):  # and again: never b""
                await client.receive(1)
        with pytest.raises(anyio.ClosedResourceError, match="SocketStream was closed with aclose"):
            await client.receive()
        with pytest.raises(anyio.ClosedResourceError, match="open a new one"):
            await client.send(b"x")

    run(main)


@pytest.mark.parametrize(
    ("max_bytes", "error", "match"),
    [
        (0, ValueError, "max_bytes must be a positive integer, got 0"),
        (-1, ValueError, "max_bytes must be a positive integer, got -1"),
        ("1", TypeError, "needs an int max_bytes, got str"),
        (True, TypeError, "needs an int max_bytes, got bool"),
    ],
)
def test_receive_refuses_a_max_bytes_that_is_not_a_positive_int(
    max_bytes: Any, error: type[Exception], match: str
) -> None:
    async def main() -> None:
        client, server = await connected_pair()
        async with client, server:
            await server.send(b"x")
            with pytest.raises(error, match=match):
                await client.receive(max_bytes)
            assert await client.receive(1) == b"x"  # nothing was taken

    run(main)


def test_send_eof_ends_the_peers_reads_and_the_stream_still_receives() -> None:
    async def main() -> None:
        client, server = await connected_pair()
        async with client, server:
            await client.send(b"question")
            await client.send_eof()
            assert await server.receive() == b"question"
            with pytest.raises(anyio.EndOfStream):
                await server.receive()
            await server.send(b"answer")
            assert await client.receive() == b"answer"

    run(main)


def test_a_peers_reset_raises_broken_resource_from_the_os_error() -> None:
    async def main() -> None:
        client, server = await connected_pair()
        raw = server.extra(SocketAttribute.raw_socket)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await server.aclose()  # with a zero linger: a reset, not a close
        async with client:
            with pytest.raises(anyio.BrokenResourceError) as info:
                await client.receive()
            assert isinstance(info.value.__cause__, ConnectionResetError)
            with pytest.raises(anyio.BrokenResourceError) as info:
                for _ in range(1000):
                    await client.send(b"x" * 1024)
            assert isinstance(info.value.__cause__, OSError)

    run(main)


def test_aclose_wakes_a_task_waiting_to_receive_with_closed_resource() -> None:
    async def main() -> None:
        client, server = await connected_pair()
        async with server:

            async def closer() -> None:
                await anyio.wait_all_tasks_blocked()
                await client.aclose()

            async with anyio.create_task_group() as tg:
                tg.start_soon(closer)
                with pytest.raises(anyio.ClosedResourceError):
                    await client.receive()
            assert client.extra(SocketAttribute.raw_socket).fileno() == -1

    run(main)


def test_aclose_in_a_cancelled_scope_closes_then_raises_the_cancel() -> None:
    async def main() -> None:
        client, server = await connected_pair()
        async with server:
            raw = client.extra(SocketAttribute.raw_socket)
            with anyio.CancelScope() as scope:
                scope.cancel()
                await client.aclose()
            assert scope.cancelled_caught
            assert raw.fileno() == -1

    run(main)


@pytest.mark.parametrize("direction", ["receive", "send"])
def test_a_second_task_in_the_same_direction_is_busy(direction: str) -> None:
    async def main() -> None:
        client, server = await connected_pair()
        async with client, server:

            async def first() -> None:
                if direction == "receive":
                    await client.receive()
                else:
                    while True:  # nobody reads: this fills the buffers, then waits
                        await client.send(b"\0" * 65536)

            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await anyio.wait_all_tasks_blocked()
                match = "already reading from" if direction == "receive" else "already writing to"
                with pytest.raises(anyio.BusyResourceError, match=match):
                    if direction == "receive":
                        await client.receive()
                    else:
                        await client.send(b"x")
                tg.cancel_scope.cancel()

    run(main)


def test_a_cancelled_receive_takes_no_byte() -> None:
    async def main() -> list[bytes]:
        client, server = await connected_pair()
        async with client, server:
            # Cancelled while it waits...
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(cancel_when_blocked, scope)
                    await client.receive()
            assert scope.cancelled_caught
            # ...and cancelled before it starts, with data waiting: nothing is taken.
            await server.send(b"kept")
            await anyio.wait_readable(client.extra(SocketAttribute.raw_socket))
            with anyio.CancelScope() as scope:
                scope.cancel()
                await client.receive()
            assert scope.cancelled_caught
            return [await client.receive()]

    assert run(main) == [b"kept"]


def test_every_call_passes_a_cancellation_point_even_when_the_socket_is_ready() -> None:
    async def main() -> None:
        client, server = await connected_pair()
        async with client, server:
            await server.send(b"ready")
            await anyio.wait_readable(client.extra(SocketAttribute.raw_socket))
            with assert_checkpoints():
                assert await client.receive() == b"ready"
            with assert_checkpoints():
                await client.send(b"room")  # the socket has room: it does not wait

    run(main)


def test_a_reader_of_a_socket_that_always_has_data_lets_other_tasks_run() -> None:
    async def main() -> int:
        client, server = await connected_pair()
        ticks = 0
        reads = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await anyio.lowlevel.checkpoint()

        async with client, server, anyio.create_task_group() as tg:
            await server.send(b"x" * 100_000)
            await anyio.wait_readable(client.extra(SocketAttribute.raw_socket))
            tg.start_soon(ticker)
            before = ticks
            while reads < 100:
                await client.receive(1)  # the socket holds far more than 100 bytes
                reads += 1
            tg.cancel_scope.cancel()
        return ticks - before

    # One worker: the ticker runs only when the reader yields.
    assert run(main, workers=1) > 0


def test_an_asyncop_cancel_from_outside_interrupts_a_receive() -> None:
    ready = threading.Event()

    async def reader() -> None:
        client, server = await connected_pair()
        async with client, server:
            ready.set()
            await client.receive()

    with asyncop.Runtime(2) as rt:
        op = rt.spawn(reader)
        assert ready.wait(10)
        op.cancel("stop reading")
        assert op.wait(10).state is asyncop.OperationState.CANCELLED


def test_connecting_to_a_closed_port_says_so() -> None:
    async def main() -> None:
        with socket.socket() as unused:
            unused.bind((HOST, 0))
            port = unused.getsockname()[1]  # bound, never listening: refused
            with pytest.raises(OSError, match="All connection attempts failed") as info:
                await anyio.connect_tcp(HOST, port)
        assert isinstance(info.value.__cause__, ConnectionRefusedError)

    run(main)


def test_connect_tcp_binds_the_local_address_asked_for() -> None:
    async def main() -> None:
        listener = await anyio.create_tcp_listener(local_host=HOST)
        async with listener:
            port = listener.extra(SocketAttribute.local_port)
            async with await anyio.connect_tcp(HOST, port, local_host=HOST) as client:
                assert client.extra(SocketAttribute.local_address)[0] == HOST

    run(main)


# ----------------------------------------------------------------------
# Listeners
# ----------------------------------------------------------------------


def test_a_listener_serves_connections_until_cancelled() -> None:
    async def main() -> list[bytes]:
        answers: list[bytes] = []

        async def handle(stream: SocketStream) -> None:
            async with stream:
                await stream.send((await stream.receive()).upper())

        listener = await anyio.create_tcp_listener(local_host=HOST)
        port = listener.extra(SocketAttribute.local_port)
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, handle)
            for word in (b"one", b"two"):
                async with await anyio.connect_tcp(HOST, port) as client:
                    await client.send(word)
                    answers.append(await client.receive())
            tg.cancel_scope.cancel()
        return answers

    assert run(main) == [b"ONE", b"TWO"]


def test_closing_a_listener_wakes_its_accept_and_then_refuses_it() -> None:
    async def main() -> None:
        multi = await anyio.create_tcp_listener(local_host=HOST)
        (listener,) = multi.listeners
        assert isinstance(listener, SocketListener)

        async def accept() -> None:
            with pytest.raises(anyio.ClosedResourceError):
                await listener.accept()

        async with anyio.create_task_group() as tg:
            tg.start_soon(accept)
            await anyio.wait_all_tasks_blocked()
            await multi.aclose()
        with pytest.raises(anyio.ClosedResourceError):
            await listener.accept()
        assert listener.extra(SocketAttribute.raw_socket).fileno() == -1
        with pytest.raises(anyio.TypedAttributeLookupError):
            listener.extra(SocketAttribute.remote_address)

    run(main)


def test_wrapped_sockets_become_anyio_streams_and_listeners() -> None:
    async def main() -> bytes:
        with socket.socket() as raw_listener:
            raw_listener.bind((HOST, 0))
            raw_listener.listen()
            listener = await SocketListener.from_socket(raw_listener)
            raw_client = socket.create_connection(raw_listener.getsockname())
            async with (
                listener,
                await SocketStream.from_socket(raw_client) as client,
                await listener.accept() as server,
            ):
                await client.send(b"wrapped")
                return await server.receive()

    assert run(main) == b"wrapped"


# ----------------------------------------------------------------------
# Unix streams
# ----------------------------------------------------------------------


def test_unix_streams_carry_bytes_and_file_descriptors(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    (tmp_path / "f").write_text("through the socket")

    async def main() -> tuple[bytes, bytes, str]:
        raw_listener = socket.socket(socket.AF_UNIX)
        raw_listener.bind(path)
        raw_listener.listen()
        async with await SocketListener.from_socket(raw_listener) as listener:
            client = await anyio.connect_unix(path)
            server = await listener.accept()
            assert isinstance(server, anyio.abc.UNIXSocketStream)
            async with client, server:
                await client.send(b"plain")
                plain = await server.receive()
                with (tmp_path / "f").open() as f:
                    await client.send_fds(b"fd", [f])
                message, fds = await server.receive_fds(10, 1)
                with os.fdopen(fds[0]) as received:
                    text = received.read()
                assert server.extra(SocketAttribute.family) == socket.AF_UNIX
                assert client.extra(SocketAttribute.remote_address) == path
                return plain, message, text

    assert run(main) == (b"plain", b"fd", "through the socket")


@pytest.mark.skipif(not hasattr(socket, "SCM_CREDENTIALS"), reason="Linux's SCM_CREDENTIALS")
def test_receive_fds_refuses_other_ancillary_data_and_leaks_no_descriptor() -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def main() -> tuple[int, str]:
        a, peer = socket.socketpair()
        with peer:
            async with await anyio.abc.UNIXSocketStream.from_socket(a) as stream:
                raw = stream.extra(SocketAttribute.raw_socket)
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
                before = open_fds()
                with open(os.devnull) as passed:
                    fd = struct.pack("i", passed.fileno())
                    peer.sendmsg(
                        [b"x"],
                        [
                            (socket.SOL_SOCKET, socket.SCM_RIGHTS, fd),
                            (
                                socket.SOL_SOCKET,
                                socket.SCM_CREDENTIALS,
                                struct.pack("3i", os.getpid(), os.getuid(), os.getgid()),
                            ),
                        ],
                    )
                with pytest.raises(RuntimeError) as info:
                    await stream.receive_fds(10, 16)  # room for both messages
                return open_fds() - before, str(info.value)

    leaked, message = run(main)
    assert leaked == 0
    assert "other than descriptors" in message


# ----------------------------------------------------------------------
# Datagrams
# ----------------------------------------------------------------------


def test_udp_sockets_send_and_receive_packets_by_address_and_name() -> None:
    async def main() -> None:
        async with (
            await anyio.create_udp_socket(local_host=HOST) as a,
            await anyio.create_udp_socket(local_host=HOST) as b,
        ):
            a_port = a.extra(SocketAttribute.local_port)
            b_port = b.extra(SocketAttribute.local_port)
            await a.sendto(b"by address", HOST, b_port)
            assert await b.receive() == (b"by address", (HOST, a_port))
            await a.sendto(b"by name", "localhost", b_port)
            assert await b.receive() == (b"by name", (HOST, a_port))
            async with await anyio.create_connected_udp_socket(
                HOST, b_port, local_host=HOST
            ) as connected:
                assert connected.extra(SocketAttribute.remote_port) == b_port
                await connected.send(b"connected")
                data, sender = await b.receive()
                assert data == b"connected"
                await b.sendto(b"reply", *sender)
                assert await connected.receive() == b"reply"
        with pytest.raises(anyio.ClosedResourceError):
            await a.receive()

    run(main)


def test_a_udp_bind_failure_closes_the_new_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[socket.socket] = []
    real_socket = socket.socket

    def recording_socket(*args: Any, **kwargs: Any) -> socket.socket:
        sock = real_socket(*args, **kwargs)
        made.append(sock)
        return sock

    async def main() -> None:
        with real_socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
            taken.bind((HOST, 0))
            port = taken.getsockname()[1]
            monkeypatch.setattr(socket, "socket", recording_socket)
            with pytest.raises(OSError):
                await anyio.create_udp_socket(local_host=HOST, local_port=port)
            monkeypatch.undo()

    run(main)
    assert made and all(sock.fileno() == -1 for sock in made)


def test_unix_datagram_sockets_send_and_receive_packets(tmp_path: Path) -> None:
    a_path = str(tmp_path / "a.sock")
    b_path = str(tmp_path / "b.sock")

    def bound(path: str) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        return sock

    async def main() -> None:
        async with (
            await anyio.abc.UNIXDatagramSocket.from_socket(bound(a_path)) as a,
            await anyio.abc.UNIXDatagramSocket.from_socket(bound(b_path)) as b,
        ):
            await a.sendto(b"hello", b_path)
            assert await b.receive() == (b"hello", a_path)
            raw = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            raw.connect(a_path)
            async with await anyio.abc.ConnectedUNIXDatagramSocket.from_socket(raw) as connected:
                assert connected.extra(SocketAttribute.remote_address) == a_path
                await connected.send(b"connected")
                data, _ = await a.receive()
                assert data == b"connected"
            with pytest.raises(anyio.ClosedResourceError):
                await connected.send(b"after close")

    run(main)


def test_closing_a_datagram_socket_wakes_its_receiver() -> None:
    async def main() -> None:
        udp = await anyio.create_udp_socket(local_host=HOST)

        async def receive() -> None:
            with pytest.raises(anyio.ClosedResourceError):
                await udp.receive()

        async with anyio.create_task_group() as tg:
            tg.start_soon(receive)
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(anyio.BusyResourceError, match="already reading from"):
                await udp.receive()
            await udp.aclose()

    run(main)


# ----------------------------------------------------------------------
# Lookups and raw waits
# ----------------------------------------------------------------------


def test_getaddrinfo_and_getnameinfo_resolve() -> None:
    async def main() -> None:
        infos = await anyio.getaddrinfo(HOST, 80, type=socket.SOCK_STREAM)
        assert infos[0][4] == (HOST, 80)
        assert await anyio.getnameinfo((HOST, 80)) == socket.getnameinfo((HOST, 80), 0)

    run(main)


def test_a_cancel_leaves_a_getnameinfo_that_hangs(monkeypatch: pytest.MonkeyPatch) -> None:
    entered = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    def hanging_getnameinfo(sockaddr: Any, flags: int) -> tuple[str, str]:
        entered.set()
        release.wait(20)
        finished.set()
        return ("late", "answer")

    monkeypatch.setattr(socket, "getnameinfo", hanging_getnameinfo)

    async def main() -> tuple[bool, bool]:
        async def cancel_once_it_hangs(scope: anyio.CancelScope) -> None:
            while not entered.is_set():
                await anyio.sleep(0.01)
            scope.cancel()

        try:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(cancel_once_it_hangs, scope)
                    await anyio.getnameinfo((HOST, 80))
            return scope.cancelled_caught, finished.is_set()
        finally:
            release.set()  # (the runtime's shutdown waits for the thread)

    # The real clock: a virtual one does not jump while a thread runs.
    assert run(main, real_clock=True) == (True, False)  # it left while the lookup hung


def test_notify_closing_wakes_raw_waiters_with_closed_resource() -> None:
    async def main() -> None:
        a, b = socket.socketpair()
        with a, b:
            a.setblocking(False)
            while True:  # fill a's send buffer so that it is not writable
                try:
                    a.send(b"\0" * 65536)
                except BlockingIOError:
                    break

            async def wait(waiter: Callable[[Any], Awaitable[None]]) -> None:
                with pytest.raises(anyio.ClosedResourceError):
                    await waiter(a)

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait, anyio.wait_readable)
                tg.start_soon(wait, anyio.wait_writable)
                await anyio.wait_all_tasks_blocked()
                with pytest.raises(anyio.BusyResourceError):
                    await anyio.wait_readable(a.fileno())
                anyio.notify_closing(a)

    run(main)


# ----------------------------------------------------------------------
# TLS
# ----------------------------------------------------------------------


def test_tls_from_anyio_streams_runs_over_these_streams() -> None:
    server_context, client_context = tls_contexts()  # for the name 127.0.0.1

    async def main() -> bytes:
        async def handle(stream: Any) -> None:
            async with stream:
                await stream.send((await stream.receive())[::-1])

        tcp = await anyio.create_tcp_listener(local_host=HOST)
        port = tcp.extra(SocketAttribute.local_port)
        listener = TLSListener(tcp, server_context)
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, handle)
            async with await anyio.connect_tcp(
                HOST, port, ssl_context=client_context, tls_hostname=HOST
            ) as client:
                await client.send(b"secret")
                answer = await client.receive()
            tg.cancel_scope.cancel()
        return answer

    assert run(main) == b"terces"
