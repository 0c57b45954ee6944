"""Where a socket readiness is taken and run: on the worker that polled, not handed on."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from typing import Any

import pytest

import asyncop
from asyncop import ClosedResourceError, OperationState
from asyncop.net import recv_async, send_all_async
from asyncop.platform import selector_name

pytestmark = pytest.mark.timeout(30)

needs_epoll = pytest.mark.skipif(
    selector_name(None) != "epoll", reason="the workers drive the multiplexer on epoll only"
)


def _pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    return a, b


@needs_epoll
def test_a_socket_ping_pong_between_two_tasks_stays_on_one_worker_thread() -> None:
    # Each readiness is taken by the worker that just parked a task on the
    # other socket, which runs the woken task itself: the exchange does not
    # bounce between the two workers.
    rounds = 400
    a, b = _pair()
    threads: list[int] = []

    async def echo() -> None:
        for _ in range(rounds):
            data = await recv_async(b, 1)
            threads.append(threading.get_ident())
            await send_all_async(b, data)

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(echo)
            for _ in range(rounds):
                await send_all_async(a, b"x")
                assert await recv_async(a, 1) == b"x"
                threads.append(threading.get_ident())

    rt = asyncop.Runtime(2, name="io-wakes-pingpong")
    try:
        rt.run(main)
    finally:
        assert rt.shutdown(timeout=10)
        a.close()
        b.close()
    assert len(threads) == 2 * rounds
    hops = sum(1 for before, after in itertools.pairwise(threads) if before != after)
    # A busy machine may preempt a worker long enough for the monitor to
    # hand its queue on now and then; a hand-off per readiness would make
    # about one hop per step.
    assert hops < rounds // 10, f"{hops} thread hops in {2 * rounds} steps"


@needs_epoll
def test_a_worker_that_never_parks_still_fails_a_wait_on_a_socket_closed_under_it() -> None:
    # With one worker kept busy, only its zero-timeout polls look at the
    # multiplexer; they must still sweep for fds closed without
    # notify_closing(), which epoll never reports.
    a, b = _pair()
    number = a.fileno()

    async def waiter() -> None:
        await asyncop.readable(a)

    async def busy(until: asyncop.AsyncOperation[None]) -> int:
        rounds = 0
        end = time.monotonic() + 10
        while not until.done and time.monotonic() < end:
            await asyncop.checkpoint()
            rounds += 1
        return rounds

    rt = asyncop.Runtime(1, name="io-wakes-sweep")
    try:
        op = rt.spawn(waiter)
        end = time.monotonic() + 5
        while rt.registrations() != 1 and time.monotonic() < end:
            time.sleep(0.001)
        assert rt.registrations() == 1
        spinner = rt.spawn(busy, op)
        a.close()
        result = op.wait(10)
        assert spinner.wait(10).state is OperationState.COMPLETED
    finally:
        assert rt.shutdown(timeout=10)
        a.close()
        b.close()
    assert result.state is OperationState.FAILED
    assert isinstance(result.error, ClosedResourceError)
    assert f"fd {number}" in str(result.error)


class _HeldPoll:
    """The reactor's epoll, with the first parked poll that reports ``fd`` held back.

    It stands for a poller preempted between ``epoll_wait`` and its lock:
    the readiness is collected, and not yet delivered, until ``release``.
    """

    def __init__(self, epoll: object, fd: int) -> None:
        self._epoll = epoll
        self.fd = fd
        self.entered = threading.Event()
        self.caught = threading.Event()
        self.release = threading.Event()
        self.polled_again = threading.Event()
        self._holder: int | None = None

    def poll(self, timeout: float = -1) -> list[tuple[int, int]]:
        if self._holder == threading.get_ident():
            self.polled_again.set()  # it has delivered what it held
        if timeout != 0 and not self.caught.is_set():
            self.entered.set()
        events: list[tuple[int, int]] = self._epoll.poll(timeout)  # type: ignore[attr-defined]
        if timeout != 0 and not self.caught.is_set() and any(fd == self.fd for fd, _ in events):
            self._holder = threading.get_ident()
            self.caught.set()
            self.release.wait(10)
        return events

    def __getattr__(self, name: str) -> object:
        return getattr(self._epoll, name)


def _until(predicate: object, what: str) -> None:
    end = time.monotonic() + 5
    while not predicate() and time.monotonic() < end:  # type: ignore[operator]
        time.sleep(0.001)
    assert predicate(), what  # type: ignore[operator]


@needs_epoll
def test_a_readiness_of_a_closed_socket_does_not_wake_a_wait_on_its_reused_number() -> None:
    # A poller collects a readiness of fd N; before it delivers it, the
    # socket is closed and a new socket gets number N, and a task waits on
    # that one. The readiness was the old file's: the new wait must not wake
    # until its own socket is ready.
    made: list[socket.socket] = []

    async def wait_on(sock: socket.socket) -> bytes:
        try:
            await asyncop.readable(sock)
        except ClosedResourceError:
            return b"closed"
        return sock.recv(1)  # not ready: a wrong wake fails here (BlockingIOError)

    rt = asyncop.Runtime(2, name="io-wakes-reused-number")
    reactor: Any = None
    held: _HeldPoll | None = None
    try:
        for _ in range(5):  # (a busy worker's poll may take the readiness: again)
            a, b = _pair()
            made += [a, b]
            number = a.fileno()
            op1 = rt.spawn(wait_on, a)
            _until(lambda: rt.registrations() == 1, "the first wait is parked")
            reactor = rt._reactor  # type: ignore[attr-defined]
            held = _HeldPoll(getattr(reactor._epoll, "_epoll", reactor._epoll), number)
            reactor._epoll = held
            reactor.wake_poller()  # the poller comes back through the wrapper
            assert held.entered.wait(5)
            b.send(b"x")
            if held.caught.wait(2):
                break
            assert op1.wait(5).value == b"x"
        else:
            pytest.fail("no parked poll collected the readiness")
        asyncop.notify_closing(a)
        a.close()
        assert op1.wait(5).value == b"closed"
        a2, b2 = socket.socketpair()
        made += [a2, b2]
        if b2.fileno() == number:
            a2, b2 = b2, a2
        if a2.fileno() != number:
            pytest.skip(f"the OS did not reuse fd {number}")
        a2.setblocking(False)
        op2 = rt.spawn(wait_on, a2)
        _until(lambda: rt.registrations() == 1, "the second wait is parked")
        held.release.set()
        assert held.polled_again.wait(5)
        b2.send(b"y")
        result = op2.wait(5)
    finally:
        if held is not None:
            held.release.set()
        assert rt.shutdown(timeout=10)
        for sock in made:
            sock.close()
    assert result.state is OperationState.COMPLETED, result.error
    assert result.value == b"y"
