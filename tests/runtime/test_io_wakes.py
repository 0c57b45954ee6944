"""Where a socket readiness is taken and run: on the worker that polled, not handed on."""

from __future__ import annotations

import itertools
import socket
import threading
import time

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
