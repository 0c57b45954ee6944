"""The receive methods every stream shares: when a receive yields, and what a cancel keeps."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

import pytest

import asyncop
from asyncop import Cancelled
from asyncop.net import SocketStream

from .._net import finish

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def one_worker() -> Iterator[asyncop.Runtime]:
    # One worker: only the stream's own yields let another task in.
    rt = asyncop.Runtime(1, name=f"rb{id(object()):x}")
    try:
        yield rt
    finally:
        assert rt.shutdown(timeout=10), "runtime did not shut down in 10 s"


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def run_reader(
    rt: asyncop.Runtime, a: socket.socket, b: socket.socket, first: int, second: int
) -> list[str]:
    """Receive twice, with the peer's second message sent in between; log who ran when."""
    log: list[str] = []

    async def other() -> None:
        log.append("other")

    async def main() -> None:
        async with SocketStream(a) as stream, asyncop.scope() as s:
            b.sendall(b"one")
            await asyncop.sleep(0.05)  # in the socket before the first receive
            s.spawn(other)  # ready from now on
            log.append((await stream.receive_some(first)).decode())
            b.sendall(b"two")  # in the socket before the second receive
            log.append((await stream.receive_some(second)).decode())

    rt.run(main)
    finish(rt)
    return log


@pytest.mark.parametrize(
    "max_bytes",
    [10**12, sys.maxsize, sys.maxsize + 1, 2**70],
    ids=["1e12", "maxsize", "maxsize+1", "2**70"],
)
def test_a_huge_max_bytes_receives_what_there_is(
    one_worker: asyncop.Runtime, pair: tuple[socket.socket, socket.socket], max_bytes: int
) -> None:
    # "At most max_bytes": a huge one is no reason to allocate that much
    # (MemoryError) or to overflow a C size; receive_until takes it as a frame limit.
    a, b = pair

    async def main() -> tuple[bytes, bytes]:
        async with SocketStream(a) as stream:
            b.sendall(b"some")
            some = await stream.receive_some(max_bytes)
            b.sendall(b"frame\nrest")
            return some, await stream.receive_until(b"\n", max_bytes)

    assert one_worker.run(main) == (b"some", b"frame")
    finish(one_worker)


def test_a_receive_after_a_read_that_drained_the_socket_lets_ready_tasks_run_first(
    one_worker: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair
    # The first read took all there was (3 of up to 64 bytes): the second
    # yields before reading, although its bytes are there already.
    assert run_reader(one_worker, a, b, 64, 64) == ["one", "other", "two"]


def test_a_receive_after_a_read_that_filled_its_request_reads_at_once(
    one_worker: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair
    # The first read got all it asked for, so more may be waiting: no yield.
    assert run_reader(one_worker, a, b, 2, 64) == ["on", "etwo", "other"]


def test_a_receive_the_buffer_serves_does_not_yield_after_a_drained_read(
    one_worker: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair
    log: list[str] = []

    async def other() -> None:
        log.append("other")

    async def main() -> None:
        async with SocketStream(a) as stream, asyncop.scope() as s:
            b.sendall(b"GET /\r\n\r\nGET /next\r\n\r\n")
            await asyncop.sleep(0.05)
            s.spawn(other)
            log.append((await stream.receive_until(b"\r\n\r\n", 100)).decode())
            # The first read drained the socket, but the buffer holds a whole frame.
            log.append((await stream.receive_until(b"\r\n\r\n", 100)).decode())

    one_worker.run(main)
    finish(one_worker)
    assert log == ["GET /", "GET /next", "other"]


def test_a_cancel_at_the_yield_after_a_drained_read_takes_no_data(
    one_worker: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair

    async def main() -> list[bytes]:
        async with SocketStream(a) as stream:
            b.sendall(b"head\r\npartial")
            await asyncop.sleep(0.05)
            got = [await stream.receive_until(b"\r\n", 100)]  # drains the socket
            b.sendall(b" line\r\n")
            async with asyncop.scope() as s:
                s.cancel()
                with pytest.raises(Cancelled):
                    await stream.receive_until(b"\r\n", 100)
            got.append(await stream.receive_until(b"\r\n", 100))
            return got

    assert one_worker.run(main) == [b"head", b"partial line"]
    finish(one_worker)


def test_send_all_sends_bytes_bytearrays_and_views_of_wide_items_whole(
    one_worker: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair
    words = memoryview(bytearray(range(8))).cast("H")  # 4 items of 2 bytes
    big = b"x" * (4 << 20)  # more than a socket buffer holds: the rest waits for room

    async def drain(out: bytearray, size: int) -> None:
        async with SocketStream(b) as peer:
            while len(out) < size:
                out += await peer.receive_some()

    async def main() -> bytes:
        received = bytearray()
        size = 3 + 3 + 8 + len(big)
        async with SocketStream(a) as stream, asyncop.scope() as s:
            s.spawn(drain, received, size)
            await stream.send_all(b"abc")
            await stream.send_all(bytearray(b"def"))
            await stream.send_all(words)
            await stream.send_all(big)
            await stream.send_all(b"")
        return bytes(received)

    assert one_worker.run(main) == b"abcdef" + bytes(range(8)) + big
    finish(one_worker)


def test_a_stream_yield_never_hands_the_shared_checkpoint_marker_to_checkpoint(
    one_worker: asyncop.Runtime, pair: tuple[socket.socket, socket.socket]
) -> None:
    # An awaited checkpoint becomes a spare that checkpoint() hands out again,
    # with its "awaited" flag cleared: the stepper's shared marker must not.
    from asyncop.runtime._core._awaitables import CHECKPOINT, _spare

    a, b = pair
    assert run_reader(one_worker, a, b, 64, 64) == ["one", "other", "two"]
    assert all(spare is not CHECKPOINT for spare in _spare)
