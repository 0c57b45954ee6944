"""statistics() of every primitive, and the non-blocking acquires.

- each primitive answers ``statistics()`` with a frozen value whose fields
  agree with one another, counting waiting tasks and threads alike;
- a lock names its holder: the task's operation, or the thread;
- a limiter records a borrower as the token is handed over, before the
  waiting task runs again;
- ``acquire_nowait()`` works from tasks and threads, and never takes a
  permit from under a queued waiter (FIFO).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest

import asyncop
from asyncop import (
    CapacityLimiter,
    CapacityLimiterStatistics,
    Channel,
    ChannelStatistics,
    Condition,
    ConditionStatistics,
    Event,
    EventStatistics,
    Lock,
    LockStatistics,
    Semaphore,
    SemaphoreStatistics,
    WouldBlock,
    lowlevel,
)
from asyncop.testing import wait_all_blocked

pytestmark = pytest.mark.timeout(30)


async def awaits(make: Callable[..., Awaitable[Any]], *args: Any) -> None:
    """Await ``make(*args)``: a task for the primitives' awaitables."""
    await make(*args)


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.001)


def test_statistics_are_frozen_values() -> None:
    stats = Lock().statistics()
    assert stats == LockStatistics(locked=False, owner=None, tasks_waiting=0)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        stats.locked = True  # type: ignore[misc]
    assert Event().statistics() == EventStatistics(0)
    assert Semaphore(2).statistics() == SemaphoreStatistics(0)


def test_event_statistics_count_waiting_tasks_and_threads(vruntime: asyncop.Runtime) -> None:
    event = Event()
    thread = threading.Thread(target=event.wait, args=(10,))

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(awaits, event.wait_async)
            s.spawn(awaits, event.wait_async)
            await wait_all_blocked()
            thread.start()
            await asyncop.spawn_blocking(wait_until, lambda: event.statistics().tasks_waiting == 3)
            event.set()
        assert event.statistics() == EventStatistics(tasks_waiting=0)

    vruntime.run(main)
    thread.join(5)


def test_lock_statistics_name_the_holding_task_or_thread(vruntime: asyncop.Runtime) -> None:
    lock = Lock()
    holder = threading.current_thread()

    async def waiter() -> None:
        async with lock:
            pass

    async def main() -> None:
        me = asyncop.current_operation()
        assert me is not None
        async with lock:
            assert lock.statistics() == LockStatistics(True, me, 0)
            async with asyncop.scope() as s:
                s.spawn(waiter)
                s.spawn(waiter)
                await wait_all_blocked()
                assert lock.statistics() == LockStatistics(True, me, 2)
                lock.release()
                # Handed to the first waiter before it runs: it holds it now.
                stats = lock.statistics()
                assert stats.locked and stats.owner is not me and stats.tasks_waiting == 1
                await lock.lock_async()  # (for the 'async with' to release)
        assert lock.statistics() == LockStatistics(False, None, 0)

    vruntime.run(main)
    with lock:
        assert lock.statistics() == LockStatistics(True, holder, 0)


def test_semaphore_and_condition_statistics_count_their_waiters(
    vruntime: asyncop.Runtime,
) -> None:
    sem = Semaphore(0)
    cond = Condition()

    async def notified() -> None:
        async with cond:
            await cond.wait_async()

    async def main() -> None:
        me = lowlevel.current_task()
        async with asyncop.scope() as s:
            s.spawn(awaits, sem.acquire_async)
            s.spawn(notified)
            s.spawn(notified)
            await wait_all_blocked()
            assert sem.statistics() == SemaphoreStatistics(tasks_waiting=1)
            assert cond.statistics() == ConditionStatistics(2, LockStatistics(False, None, 0))
            sem.release()
            async with cond:
                assert cond.statistics().lock_statistics == LockStatistics(True, me, 0)
                cond.notify_all()
        assert sem.statistics().tasks_waiting == cond.statistics().tasks_waiting == 0

    vruntime.run(main)


def test_limiter_records_a_borrower_as_the_token_is_handed_over(
    vruntime: asyncop.Runtime,
) -> None:
    limiter = CapacityLimiter(1)
    seen: list[CapacityLimiterStatistics] = []

    async def borrower() -> None:
        await limiter.acquire_async()
        limiter.release()

    async def main() -> None:
        limiter.acquire_on_behalf_of_nowait("holder")
        async with asyncop.scope() as s:
            waiting = s.spawn(borrower)
            await wait_all_blocked()
            seen.append(limiter.statistics())
            limiter.release_on_behalf_of("holder")
            # Before the waiter runs again, the token is already its own.
            seen.append(limiter.statistics())
            with pytest.raises(WouldBlock):
                limiter.acquire_on_behalf_of_nowait("newcomer")
        assert seen == [
            CapacityLimiterStatistics(1, 1, ("holder",), 1),
            CapacityLimiterStatistics(1, 1, (waiting,), 0),
        ]
        assert limiter.statistics() == CapacityLimiterStatistics(0, 1, (), 0)

    vruntime.run(main)


def test_limiter_statistics_show_an_unlimited_total(vruntime: asyncop.Runtime) -> None:
    limiter = CapacityLimiter(math.inf)
    limiter.acquire_on_behalf_of_nowait("a")
    assert limiter.statistics() == CapacityLimiterStatistics(1, math.inf, ("a",), 0)


def test_channel_statistics_count_buffer_ends_and_waiters(vruntime: asyncop.Runtime) -> None:
    channel: Channel[int] = Channel(2)
    tx, rx = channel.sender(), channel.receiver()
    tx2 = tx.clone()
    rendezvous: Channel[int] = Channel(0)

    async def main() -> None:
        await tx.send_async(1)
        assert channel.statistics() == ChannelStatistics(1, 2, 2, 1, 0, 0)
        await tx.send_async(2)
        async with asyncop.scope() as s:
            s.spawn(awaits, tx2.send_async, 3)
            s.spawn(awaits, rendezvous.recv_async)
            s.spawn(awaits, rendezvous.recv_async)
            await wait_all_blocked()
            assert channel.statistics() == ChannelStatistics(2, 2, 2, 1, 1, 0)
            assert rx.statistics() == tx.statistics() == channel.statistics()
            assert rendezvous.statistics() == ChannelStatistics(0, 0, 0, 0, 0, 2)
            assert await rx.recv_async() == 1
            await rendezvous.send_async(0)
            await rendezvous.send_async(0)
        assert channel.statistics() == ChannelStatistics(2, 2, 2, 1, 0, 0)
        tx.close()
        tx2.close()
        assert channel.statistics().open_send_ends == 0

    vruntime.run(main)


def test_acquire_nowait_works_in_tasks_and_threads(vruntime: asyncop.Runtime) -> None:
    lock = Lock("shared")
    sem = Semaphore(1)
    limiter = CapacityLimiter(1)

    async def main() -> None:
        me = asyncop.current_operation()
        lock.acquire_nowait()
        assert lock.statistics().owner is me
        with pytest.raises(RuntimeError, match="already held"):
            lock.acquire_nowait()
        sem.acquire_nowait()
        with pytest.raises(WouldBlock):
            sem.acquire_nowait()
        limiter.acquire_nowait()
        assert limiter.statistics().borrowers == (me,)
        with pytest.raises(RuntimeError, match="already holding one of"):
            limiter.acquire_nowait()
        lock.release()
        sem.release()
        limiter.release()

    vruntime.run(main)
    lock.acquire_nowait()
    assert lock.statistics().owner is threading.current_thread()
    lock.release()
    sem.acquire_nowait()
    limiter.acquire_nowait()
    assert limiter.borrowed_tokens == 1
    limiter.release()


def test_acquire_nowait_never_takes_a_permit_from_a_queued_waiter(
    vruntime: asyncop.Runtime,
) -> None:
    lock = Lock()
    sem = Semaphore(0)
    got: list[str] = []

    async def lock_waiter() -> None:
        async with lock:
            got.append("lock")

    async def main() -> None:
        await lock.lock_async()
        async with asyncop.scope() as s:
            s.spawn(lock_waiter)
            s.spawn(awaits, sem.acquire_async)
            await wait_all_blocked()
            lock.release()  # handed to the waiter, which has not run yet
            with pytest.raises(WouldBlock):
                lock.acquire_nowait()
            sem.release()  # likewise
            with pytest.raises(WouldBlock):
                sem.acquire_nowait()
        assert got == ["lock"] and sem.value == 0

    vruntime.run(main)


def test_acquire_nowait_on_a_broken_lock_raises(vruntime: asyncop.Runtime) -> None:
    lock = Lock()

    async def ends_holding_it() -> None:
        await lock.lock_async()

    vruntime.run(ends_holding_it)
    with pytest.raises(asyncop.BrokenResourceError):
        lock.acquire_nowait()
