"""asyncop.net: connect, accept, recv and send_all over 127.0.0.1 on non-blocking sockets."""

from __future__ import annotations

import hashlib
import random
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import asyncop
import asyncop.net
from asyncop import Cancelled, ClosedResourceError, OperationState
from asyncop.net import accept_async, connect_async, recv_async, send_all_async
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(30)

HOST = "127.0.0.1"


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Poll ``predicate`` from the test thread until it holds; fail after ``timeout``."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting until {what}")
        time.sleep(0.001)


@pytest.fixture
def closing() -> Iterator[Callable[[socket.socket], socket.socket]]:
    """Register sockets to close at the end of the test."""
    socks: list[socket.socket] = []

    def add(sock: socket.socket) -> socket.socket:
        socks.append(sock)
        return sock

    try:
        yield add
    finally:
        for sock in socks:
            sock.close()


@pytest.fixture
def listener(closing: Callable[[socket.socket], socket.socket]) -> socket.socket:
    """A TCP listener on an ephemeral port of 127.0.0.1."""
    return closing(socket.create_server((HOST, 0)))


def port_of(sock: socket.socket) -> int:
    port: int = sock.getsockname()[1]
    return port


def me() -> asyncop.AsyncOperation:
    op = asyncop.current_operation()
    assert op is not None
    return op


async def recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        data = await recv_async(sock, min(n, 1 << 16))
        if not data:
            break
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


async def recv_until_eof(sock: socket.socket) -> bytes:
    chunks = []
    while data := await recv_async(sock, 1 << 16):
        chunks.append(data)
    return b"".join(chunks)


def blocking_pair(closing: Callable[[socket.socket], socket.socket]) -> tuple[Any, Any]:
    a, b = socket.socketpair()
    return closing(a), closing(b)


# ----------------------------------------------------------------------
# connect_async and accept_async
# ----------------------------------------------------------------------


def test_connect_async_returns_a_connected_non_blocking_socket(
    runtime: asyncop.Runtime, listener: socket.socket, closing: Any
) -> None:
    sock = closing(runtime.run(connect_async, HOST, port_of(listener)))
    peer, _ = listener.accept()
    closing(peer)
    assert sock.getpeername() == (HOST, port_of(listener))
    assert peer.getpeername() == sock.getsockname()
    assert sock.getblocking() is False


def test_connect_async_resolves_a_hostname(
    runtime: asyncop.Runtime, listener: socket.socket, closing: Any
) -> None:
    sock = closing(runtime.run(connect_async, "localhost", port_of(listener)))
    closing(listener.accept()[0])
    assert sock.getpeername()[1] == port_of(listener)


def test_accept_async_returns_the_socket_and_address_like_socket_accept(
    runtime: asyncop.Runtime, listener: socket.socket, closing: Any
) -> None:
    op = runtime.spawn(accept_async, listener)
    wait_until(lambda: runtime.registrations() == 1, "accept_async is parked")
    client = closing(socket.create_connection((HOST, port_of(listener)), timeout=5))
    result = op.wait(5).value
    assert isinstance(result, tuple) and len(result) == 2
    sock, addr = result
    closing(sock)
    assert isinstance(sock, socket.socket)
    assert addr == client.getsockname()
    assert sock.getpeername() == addr
    assert sock.getblocking() is False


def test_connect_to_a_port_nobody_listens_on_raises_connection_refused(
    runtime: asyncop.Runtime, closing: Any
) -> None:
    # Bound but not listening: the port stays ours, and a SYN to it gets RST.
    bound = closing(socket.socket())
    bound.bind((HOST, 0))
    with pytest.raises(ConnectionRefusedError):
        runtime.run(connect_async, HOST, port_of(bound))


# ----------------------------------------------------------------------
# Transfers
# ----------------------------------------------------------------------


def test_recv_async_waits_for_data_and_returns_it(runtime: asyncop.Runtime, closing: Any) -> None:
    a, b = blocking_pair(closing)
    op = runtime.spawn(recv_async, a, 100)
    wait_until(lambda: runtime.registrations() == 1, "recv_async is parked")
    b.sendall(b"hello")
    assert op.wait(5).value == b"hello"


def test_recv_async_returns_empty_bytes_when_the_peer_closes(
    runtime: asyncop.Runtime, closing: Any
) -> None:
    a, b = blocking_pair(closing)
    op = runtime.spawn(recv_async, a, 100)
    wait_until(lambda: runtime.registrations() == 1, "recv_async is parked")
    b.close()
    assert op.wait(5).value == b""


@pytest.mark.parametrize("n", [10**12, sys.maxsize, 2**70], ids=["1e12", "maxsize", "2**70"])
def test_recv_async_with_a_huge_count_returns_what_there_is(
    runtime: asyncop.Runtime, closing: Any, n: int
) -> None:
    # "Up to n": a huge n is no reason to allocate n bytes (MemoryError) or
    # to overflow a C size.
    a, b = blocking_pair(closing)
    b.sendall(b"hello")
    assert runtime.spawn(recv_async, a, n).wait(5).value == b"hello"


@pytest.mark.timeout(60)
def test_several_megabytes_arrive_intact(runtime: asyncop.Runtime, listener: socket.socket) -> None:
    payload = random.Random(7).randbytes(6 * 1024 * 1024 + 17)

    async def server() -> tuple[int, str]:
        conn, _ = await accept_async(listener)
        with conn:
            data = await recv_until_eof(conn)
        return len(data), hashlib.sha256(data).hexdigest()

    async def client() -> None:
        sock = await connect_async(HOST, port_of(listener))
        with sock:
            await send_all_async(sock, payload)
            sock.shutdown(socket.SHUT_WR)

    async def main() -> tuple[int, str]:
        srv = me().spawn(server)
        me().spawn(client)
        value: tuple[int, str] = await srv
        return value

    op = runtime.spawn(main)
    assert op.wait(30).value == (len(payload), hashlib.sha256(payload).hexdigest())


def test_send_all_async_accepts_bytearray_and_memoryview(
    runtime: asyncop.Runtime, closing: Any
) -> None:
    a, b = blocking_pair(closing)

    async def main() -> bytes:
        await send_all_async(a, bytearray(b"ab"))
        await send_all_async(a, memoryview(b"cd"))
        a.shutdown(socket.SHUT_WR)
        return await recv_until_eof(b)

    assert runtime.run(main) == b"abcd"


@pytest.mark.timeout(60)
def test_echo_server_serves_several_concurrent_clients(
    runtime: asyncop.Runtime, listener: socket.socket
) -> None:
    clients = 6
    rng = random.Random(11)
    payloads = [rng.randbytes(rng.randint(1, 300_000)) for _ in range(clients)]
    served: list[Any] = []

    async def handle(conn: socket.socket) -> None:
        with conn:
            while data := await recv_async(conn, 1 << 16):
                await send_all_async(conn, data)

    async def server() -> None:
        async with asyncop.scope() as s:
            for _ in range(clients):
                conn, addr = await accept_async(listener)
                served.append(addr)
                s.spawn(handle, conn)

    async def client(payload: bytes) -> bytes:
        sock = await connect_async(HOST, port_of(listener))
        with sock:

            async def sender() -> None:
                # Send and receive at once: the echo would fill both buffers
                # if the client sent everything before reading.
                await send_all_async(sock, payload)
                sock.shutdown(socket.SHUT_WR)

            async with asyncop.scope() as s:
                s.spawn(sender)
                return await recv_until_eof(sock)

    async def main() -> list[bytes]:
        async with asyncop.scope() as s:
            s.spawn(server)
            ops = [s.spawn(client, p) for p in payloads]
        return [op.result() for op in ops]

    op = runtime.spawn(main)
    assert op.wait(30).value == payloads
    assert len(set(served)) == clients


# ----------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------


def test_a_peer_reset_raises_connection_reset_error(
    runtime: asyncop.Runtime, listener: socket.socket, closing: Any
) -> None:
    client = socket.create_connection((HOST, port_of(listener)), timeout=5)
    conn = closing(listener.accept()[0])
    op = runtime.spawn(recv_async, conn, 100)
    wait_until(lambda: runtime.registrations() == 1, "recv_async is parked")
    # SO_LINGER with a zero timeout makes close() send RST instead of FIN.
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()
    result = op.wait(5)
    assert result.state is OperationState.FAILED
    assert isinstance(result.error, ConnectionResetError)


def test_sending_to_a_reset_peer_raises_a_connection_error(
    runtime: asyncop.Runtime, listener: socket.socket, closing: Any
) -> None:
    client = socket.create_connection((HOST, port_of(listener)), timeout=5)
    conn = closing(listener.accept()[0])
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()
    time.sleep(0.05)  # let the RST arrive
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        runtime.run(send_all_async, conn, b"x" * (1 << 20))


@pytest.mark.parametrize("helper", ["recv_async", "send_all_async", "accept_async"])
def test_using_a_closed_socket_raises_closed_resource_error(
    runtime: asyncop.Runtime, helper: str
) -> None:
    sock = socket.socket()
    sock.close()
    calls: dict[str, Callable[[], Any]] = {
        "recv_async": lambda: recv_async(sock, 10),
        "send_all_async": lambda: send_all_async(sock, b"x"),
        "accept_async": lambda: accept_async(sock),
    }

    async def main() -> Any:
        return await calls[helper]()

    with pytest.raises(ClosedResourceError):
        runtime.run(main)


def test_notify_closing_ends_a_pending_recv_with_closed_resource_error(
    runtime: asyncop.Runtime, closing: Any
) -> None:
    a, _ = blocking_pair(closing)
    op = runtime.spawn(recv_async, a, 10)
    wait_until(lambda: runtime.registrations() == 1, "recv_async is parked")
    asyncop.notify_closing(a)
    result = op.wait(5)
    assert result.state is OperationState.FAILED
    assert isinstance(result.error, ClosedResourceError)


# ----------------------------------------------------------------------
# Blocking sockets
# ----------------------------------------------------------------------


def test_recv_async_switches_a_blocking_socket_to_non_blocking(
    runtime: asyncop.Runtime, closing: Any
) -> None:
    a, b = blocking_pair(closing)
    assert a.getblocking() is True
    op = runtime.spawn(recv_async, a, 10)
    # A blocking recv would hold the worker inside the kernel and never park.
    wait_until(lambda: runtime.registrations() == 1, "recv_async is parked")
    assert a.getblocking() is False
    b.sendall(b"x")
    assert op.wait(5).value == b"x"


def test_accept_async_switches_a_blocking_listener_to_non_blocking(
    runtime: asyncop.Runtime, listener: socket.socket, closing: Any
) -> None:
    assert listener.getblocking() is True
    op = runtime.spawn(accept_async, listener)
    wait_until(lambda: runtime.registrations() == 1, "accept_async is parked")
    assert listener.getblocking() is False
    closing(socket.create_connection((HOST, port_of(listener)), timeout=5))
    closing(op.wait(5).value[0])


def test_accept_async_on_a_socket_that_is_not_listening_says_to_call_listen(
    runtime: asyncop.Runtime, closing: Any
) -> None:
    bound = closing(socket.socket())
    bound.bind((HOST, 0))
    error = runtime.spawn(accept_async, bound).wait(5).error
    assert type(error) is OSError, error  # as asyncio's sock_accept, with a message
    assert error.errno is not None
    assert repr(bound) in str(error)
    assert "listen() first" in str(error)
    # As the streams layer refuses the same socket:
    with pytest.raises(ValueError, match=r"listen\(\) first"):
        asyncop.net.SocketListener(bound)


def test_accept_async_on_a_datagram_socket_is_refused_the_same_way(
    runtime: asyncop.Runtime, closing: Any
) -> None:
    udp = closing(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    udp.bind((HOST, 0))
    error = runtime.spawn(accept_async, udp).wait(5).error
    assert type(error) is OSError, error
    assert "not listening" in str(error)


def test_send_all_async_switches_a_blocking_socket_to_non_blocking(
    runtime: asyncop.Runtime, closing: Any
) -> None:
    a, b = blocking_pair(closing)
    payload = b"y" * (4 * 1024 * 1024)  # far more than the buffers hold
    op = runtime.spawn(send_all_async, a, payload)
    wait_until(lambda: runtime.registrations() == 1, "send_all_async is parked")
    assert a.getblocking() is False
    b.settimeout(5)
    received = 0
    while received < len(payload):
        received += len(b.recv(1 << 20))
    assert op.wait(5).state is OperationState.COMPLETED
    assert received == len(payload)


# ----------------------------------------------------------------------
# Cancellation
# ----------------------------------------------------------------------


def test_cancelled_recv_takes_nothing_and_a_new_reader_gets_everything(
    runtime: asyncop.Runtime, closing: Any
) -> None:
    a, b = blocking_pair(closing)
    op = runtime.spawn(recv_async, a, 100)
    wait_until(lambda: runtime.registrations() == 1, "recv_async is parked")
    op.cancel()
    assert op.wait(5).state is OperationState.CANCELLED
    b.sendall(b"every byte")
    assert runtime.run(recv_exactly, a, 10) == b"every byte"


async def reader(sock: socket.socket, got: list[bytes]) -> None:
    got.append(await recv_async(sock, 1 << 16))
    await asyncop.checkpoint()  # a cancelled reader leaves here


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_recv_cancelled_as_data_arrives_loses_and_duplicates_nothing(
    runtime: asyncop.Runtime, closing: Any, seed: int
) -> None:
    rng = random.Random(seed)
    a, b = blocking_pair(closing)
    a.setblocking(False)
    expected = bytearray()
    seen = bytearray()
    for round_ in range(40):
        chunk = f"<{seed}:{round_}>".encode() * rng.randint(1, 50)
        expected += chunk
        got: list[bytes] = []
        op = runtime.spawn(reader, a, got)
        if rng.random() < 0.7:
            wait_until(lambda: runtime.registrations() == 1, f"seed={seed}: reader parked")
        # The byte and the cancel race: either may win the reader's waker.
        sender = threading.Thread(target=b.sendall, args=(chunk,))
        sender.start()
        if rng.random() < 0.5:
            time.sleep(rng.choice((0.0, 0.0001, 0.001)))
        op.cancel()
        sender.join(5)
        assert op.wait(5).state in (OperationState.CANCELLED, OperationState.COMPLETED)
        seen += b"".join(got)
        # A fresh reader takes whatever the cancelled one left.
        missing = len(expected) - len(seen)
        assert missing >= 0, f"seed={seed} round={round_}: bytes were duplicated"
        if missing:
            seen += runtime.run(recv_exactly, a, missing)
        assert bytes(seen) == bytes(expected), f"seed={seed} round={round_}"
        assert runtime.registrations() == 0, f"seed={seed} round={round_}"


def test_cancelled_send_all_reports_the_bytes_sent_and_the_peer_gets_exactly_those(
    runtime: asyncop.Runtime, closing: Any
) -> None:
    # Small buffers so that send_all_async parks after a few hundred KB.
    server = closing(socket.socket())
    server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    server.bind((HOST, 0))
    server.listen()
    client = closing(socket.socket())
    client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 * 1024)
    client.connect((HOST, port_of(server)))
    peer = closing(server.accept()[0])
    payload = random.Random(5).randbytes(8 * 1024 * 1024)
    notes: list[str] = []

    async def sender() -> None:
        try:
            await send_all_async(client, payload)
        except Cancelled as exc:
            notes.extend(getattr(exc, "__notes__", []))
            raise

    op = runtime.spawn(sender)
    wait_until(lambda: runtime.registrations() == 1, "send_all_async is parked on a full buffer")
    op.cancel()
    assert op.wait(5).state is OperationState.CANCELLED
    assert len(notes) == 1, notes
    match = re.search(r"(\d+) of (\d+) bytes", notes[0])
    assert match is not None, notes
    sent, total = int(match[1]), int(match[2])
    assert total == len(payload)
    assert 0 < sent < len(payload)

    client.shutdown(socket.SHUT_WR)
    peer.settimeout(5)
    chunks = []
    while data := peer.recv(1 << 20):
        chunks.append(data)
    assert b"".join(chunks) == payload[:sent]


# -- bad arguments are named -------------------------------------------------------


@pytest.mark.parametrize("bad", [None, "127.0.0.1:80", 5, b"sock"], ids=repr)
def test_the_helpers_name_an_argument_that_is_not_a_socket(
    runtime: asyncop.Runtime, bad: Any
) -> None:
    calls: dict[str, tuple[Callable[..., Any], tuple[Any, ...], str]] = {
        "recv_async": (recv_async, (bad, 10), "'sock'"),
        "send_all_async": (send_all_async, (bad, b"x"), "'sock'"),
        "accept_async": (accept_async, (bad,), "'listener'"),
    }
    for name, (fn, args, arg) in calls.items():
        op = runtime.spawn(fn, *args)
        op.wait(5)
        assert isinstance(op.error, TypeError), (name, op.error)
        assert name in str(op.error) and arg in str(op.error)


@pytest.mark.parametrize(
    ("host", "port", "error", "names"),
    [
        (None, 80, TypeError, "'host'"),
        (b"127.0.0.1", 80, TypeError, "'host'"),
        ("127.0.0.1", "80", TypeError, "'port'"),
        ("127.0.0.1", None, TypeError, "'port'"),
        ("127.0.0.1", True, TypeError, "'port'"),
        ("127.0.0.1", 70000, ValueError, "70000"),
        ("127.0.0.1", -1, ValueError, "-1"),
    ],
)
def test_connect_async_names_a_bad_host_or_port(
    runtime: asyncop.Runtime, host: Any, port: Any, error: type, names: str
) -> None:
    op = runtime.spawn(connect_async, host, port)
    op.wait(5)
    assert isinstance(op.error, error), op.error
    assert names in str(op.error)


@pytest.mark.parametrize(
    ("n", "error"), [("10", TypeError), (None, TypeError), (0, ValueError), (-5, ValueError)]
)
def test_recv_async_names_a_bad_count_and_takes_nothing(
    runtime: asyncop.Runtime, n: Any, error: type
) -> None:
    a, b = socket.socketpair()
    try:
        b.sendall(b"kept")
        op = runtime.spawn(recv_async, a, n)
        op.wait(5)
        message = str(op.error)
        assert isinstance(op.error, error) and ("'n'" in message or "n=" in message)
        a.setblocking(True)
        assert a.recv(10) == b"kept"
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("data", ["text", 5, None, [1, 2]], ids=repr)
def test_send_all_async_names_data_that_is_not_bytes(runtime: asyncop.Runtime, data: Any) -> None:
    a, b = socket.socketpair()
    try:
        op = runtime.spawn(send_all_async, a, data)
        op.wait(5)
        assert isinstance(op.error, TypeError) and "'data'" in str(op.error)
    finally:
        a.close()
        b.close()


# ----------------------------------------------------------------------
# A virtual clock over network waits: io_grace
# ----------------------------------------------------------------------


async def _ask_a_server_that_never_answers(port: int) -> tuple[bool, float]:
    stream = await asyncop.net.open_tcp_stream(HOST, port)
    try:
        await stream.send_all(b"ping")
        async with asyncop.move_on_after(30) as cs:
            await stream.receive_some()
        return cs.cancelled_caught, asyncop.current_time()
    finally:
        await stream.aclose()


def test_io_grace_lets_a_network_timeout_fire_under_autojump(listener: socket.socket) -> None:
    # The listener never accepts: the connection sits in its backlog, and
    # the client's read never becomes ready.
    clock = VirtualClock(autojump=True, io_grace=0.05)
    with asyncop.Runtime(2, clock=clock) as rt:
        started = time.monotonic()
        op = rt.spawn(_ask_a_server_that_never_answers, port_of(listener))
        assert op.wait(10).value == (True, 30)
        assert time.monotonic() - started < 10  # not 30 s: the clock jumped
        assert rt.registrations() == 0


def test_without_io_grace_the_clock_waits_for_the_network(listener: socket.socket) -> None:
    clock = VirtualClock(autojump=True)
    with asyncop.Runtime(2, clock=clock) as rt:
        op = rt.spawn(_ask_a_server_that_never_answers, port_of(listener))
        wait_until(lambda: rt.registrations() > 0, "the client waits on its socket")
        with pytest.raises(TimeoutError):
            op.wait(0.3)  # real seconds: the clock must not jump over the read
        assert rt.now() == 0
        op.cancel("done looking")
        assert op.wait(5).state is OperationState.CANCELLED


# ----------------------------------------------------------------------
# recv_async's choice between reading at once and waiting first
# ----------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["epoll", "poll"])
def test_recv_async_that_waits_first_sees_data_that_came_before_it(
    closing: Any, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    if backend == "epoll" and not hasattr(__import__("select"), "epoll"):
        pytest.skip("no epoll here")
    monkeypatch.setenv("ASYNCOP_SELECTOR", backend)
    a, b = blocking_pair(closing)
    with asyncop.Runtime(1, name=f"first-{backend}") as rt:
        for round_ in range(40):
            # A read that waits, then data sent before the next read begins:
            # that read, which waits first, must still see it.
            op = rt.spawn(recv_async, a, 100)
            wait_until(lambda: rt.registrations() == 1, f"round {round_}: recv_async is parked")
            b.sendall(b"waited")
            assert op.wait(5).value == b"waited"
            b.sendall(f"ready {round_}".encode())
            assert rt.run(recv_async, a, 100) == f"ready {round_}".encode()


def test_a_socket_that_always_has_data_lets_the_other_tasks_run(closing: Any) -> None:
    a, b = blocking_pair(closing)
    a.setblocking(False)
    b.sendall(b"x" * 400)
    log: list[str] = []

    async def other() -> None:
        while True:
            log.append("other")
            await asyncop.checkpoint()

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(other)
            for _ in range(200):
                assert await recv_async(a, 2) == b"xx"
                log.append("read")
            s.cancel()

    with asyncop.Runtime(1, name="fair") as rt:
        rt.run(main)
    first_read = log.index("read")
    others = log[first_read : len(log) - log[::-1].index("read")].count("other")
    assert others >= 5, log[:40]


def test_a_reader_cancelled_between_ready_reads_takes_nothing_more(closing: Any) -> None:
    a, b = blocking_pair(closing)
    a.setblocking(False)
    data = bytes(range(200))
    b.sendall(data)
    got = bytearray()

    async def read_all() -> None:
        while len(got) < len(data):
            got.extend(await recv_async(a, 1))

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(read_all)
            # Runs when the reader, which always finds data, lets it.
            await asyncop.checkpoint()
            s.cancel()

    with asyncop.Runtime(1, name="cancel-ready") as rt:
        rt.run(main)
        assert len(got) < len(data), "the reader never let the cancel in"
        rest = rt.run(recv_exactly, a, len(data) - len(got))
    assert bytes(got) + rest == data
