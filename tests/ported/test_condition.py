"""Condition: wait, notify and the hand-over of the lock, ported from trio's
``Condition`` cases, anyio's condition cases and asyncio's condition cases.

A notified waiter is queued on the lock at once, in the order notified, and
wakes holding it (as trio's): the notifier and any newcomer get the lock after
it. Differences that follow asyncop's rules: a waiter notified and then
cancelled passes its notification on to the next waiter (as asyncio's), and a
Condition works from threads as well as tasks.
"""

from __future__ import annotations

import threading

import pytest

import asyncop
from asyncop import BrokenResourceError, Cancelled, OperationState, WouldBlock
from asyncop.testing import VirtualClock, assert_checkpoints, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


@pytest.mark.asyncop
async def test_locking_and_misuse(autojump_clock: VirtualClock) -> None:
    with pytest.raises(TypeError):
        asyncop.Condition(asyncop.Semaphore(1))  # type: ignore[arg-type]
    lock = asyncop.Lock()
    cond = asyncop.Condition(lock)
    assert cond.lock is lock
    assert not lock.locked() and not cond.locked()
    with assert_checkpoints():
        await cond.acquire_async()
    assert lock.locked() and cond.locked()
    cond.release()
    with pytest.raises(RuntimeError):
        await cond.wait_async()
    with pytest.raises(RuntimeError):
        cond.notify()
    with pytest.raises(RuntimeError):
        cond.notify_all()
    assert not cond.locked()


@pytest.mark.asyncop
async def test_notify_one_then_all(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    finished: list[int] = []

    async def waiter(i: int) -> None:
        async with cond:
            await cond.wait_async()
            finished.append(i)  # (holding the lock: in the order it is handed on)

    async with asyncop.scope() as s:
        for i in range(3):
            s.spawn(waiter, i)
            await wait_all_blocked()
        async with cond:
            cond.notify()
        await wait_all_blocked()
        assert finished == [0]
        async with cond:
            cond.notify_all()
        await wait_all_blocked()
        assert finished == [0, 1, 2]
    assert not cond.locked()


@pytest.mark.asyncop
async def test_notified_waiters_queue_on_the_lock_at_once(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    me = asyncop.current_operation()
    finished: list[int] = []

    async def waiter(i: int) -> None:
        async with cond:
            await cond.wait_async()
            finished.append(i)  # (holding the lock: in the order it is handed on)

    async with asyncop.scope() as s:
        for i in range(3):
            s.spawn(waiter, i)
            await wait_all_blocked()
        async with cond:
            cond.notify(2)
            stats = cond.statistics()
            assert stats.tasks_waiting == 1
            assert stats.lock_statistics.tasks_waiting == 2
        # Leaving the block handed the lock to the oldest notified waiter.
        assert cond.locked()
        assert cond.lock.statistics().owner is not me
        await wait_all_blocked()
        assert finished == [0, 1]
        assert cond.statistics().tasks_waiting == 1
        async with cond:
            cond.notify_all()
    assert finished == [0, 1, 2]


@pytest.mark.asyncop
async def test_the_notifier_cannot_take_the_lock_back_first(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    order: list[str] = []

    async def waiter() -> None:
        async with cond:
            await cond.wait_async()
            order.append("waiter")

    async with asyncop.scope() as s:
        s.spawn(waiter)
        await wait_all_blocked()
        async with cond:
            cond.notify()
        with pytest.raises(WouldBlock):
            cond.lock.acquire_nowait()
        async with cond:
            order.append("notifier")
    assert order == ["waiter", "notifier"]


@pytest.mark.asyncop
async def test_a_newcomer_queues_behind_the_notified_waiters(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    order: list[str] = []

    async def waiter(name: str) -> None:
        async with cond:
            await cond.wait_async()
            order.append(name)
            await asyncop.sleep(1)

    async def newcomer() -> None:
        async with cond:
            order.append("newcomer")

    async with asyncop.scope() as s:
        s.spawn(waiter, "a")
        s.spawn(waiter, "b")
        await wait_all_blocked()
        async with cond:
            cond.notify_all()
            s.spawn(newcomer)
            await wait_all_blocked()  # the newcomer queues while we hold the lock
            assert cond.lock.statistics().tasks_waiting == 3
    assert order == ["a", "b", "newcomer"]


@pytest.mark.asyncop
async def test_statistics_as_waiters_come_and_go(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    me = asyncop.current_operation()

    async def waiter() -> None:
        async with cond:
            await cond.wait_async()

    async with asyncop.scope() as s:
        assert cond.statistics().lock_statistics.owner is None
        assert cond.statistics().tasks_waiting == 0
        async with cond:
            assert cond.statistics().lock_statistics.owner is me
            assert cond.statistics().tasks_waiting == 0
        for i in range(1, 3):
            s.spawn(waiter)
            await wait_all_blocked()
            assert cond.statistics().tasks_waiting == i
        for i in range(1, -1, -1):
            async with cond:
                cond.notify(1)
            await wait_all_blocked()
            assert cond.statistics().tasks_waiting == i
            assert cond.statistics().lock_statistics.tasks_waiting == 0
    assert cond.statistics().lock_statistics == asyncop.LockStatistics(False, None, 0)


@pytest.mark.asyncop
async def test_cancelled_waiter_holds_the_lock_in_finally(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    me = asyncop.current_operation()
    async with asyncop.move_on_after(1) as cs, cond:
        try:
            await cond.wait_async()
        finally:
            assert cond.locked()
            assert cond.lock.statistics().owner is me
    assert cs.cancelled_caught
    assert not cond.locked()


@pytest.mark.asyncop
async def test_cancel_wait_while_the_lock_is_contested(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    seen: list[str] = []

    async def waiter() -> None:
        async with cond:
            try:
                await cond.wait_async()
            except Cancelled:
                seen.append("cancelled, holding" if cond.locked() else "cancelled, not holding")
                raise

    async with asyncop.scope() as s:
        op = s.spawn(waiter)
        await wait_all_blocked()
        async with cond:
            op.cancel()
            await asyncop.sleep(1)  # it cannot leave while we hold the lock
            seen.append("released")
    assert seen == ["released", "cancelled, holding"]
    assert op.state is OperationState.CANCELLED
    assert not cond.locked()


@pytest.mark.asyncop
async def test_notified_then_cancelled_passes_the_notification_on(
    autojump_clock: VirtualClock,
) -> None:
    cond = asyncop.Condition()
    woken: list[int] = []

    async def waiter(i: int) -> None:
        async with cond:
            await cond.wait_async()
            woken.append(i)

    async with asyncop.scope() as s:
        ops = []
        for i in range(3):  # one at a time: they queue in this order
            ops.append(s.spawn(waiter, i))
            await wait_all_blocked()
        async with cond:
            cond.notify(1)
            ops[0].cancel()  # notified, then cancelled before it ran
        await wait_all_blocked()
        assert woken == [1]
        assert cond.statistics().tasks_waiting == 1
        async with cond:
            cond.notify_all()
    assert woken == [1, 2]
    assert ops[0].state is OperationState.CANCELLED
    assert not cond.locked()


@pytest.mark.asyncop
async def test_notified_waiter_gets_a_broken_lock(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    errors: list[BaseException] = []

    async def waiter() -> None:
        await cond.acquire_async()
        try:
            await cond.wait_async()
        except BrokenResourceError as exc:
            errors.append(exc)
        assert not cond.locked()

    async def notifier_that_keeps_the_lock() -> None:
        await cond.acquire_async()
        cond.notify()
        # Ends holding the lock: the lock is broken.

    async with asyncop.scope(supervise=True) as s:
        s.spawn(waiter)
        await wait_all_blocked()
        s.spawn(notifier_that_keeps_the_lock)
    assert len(errors) == 1


def test_a_notified_thread_wakes_holding_the_lock(vruntime: asyncop.Runtime) -> None:
    cond = asyncop.Condition()
    results: list[object] = []
    checked = threading.Event()

    def thread_waiter() -> None:
        with cond:
            results.append(cond.wait(10))
            results.append(cond.lock.statistics().owner is threading.current_thread())
            # Hold the lock until the task has seen it handed over: with the
            # GIL off this thread could otherwise release it first.
            checked.wait(10)

    async def main() -> None:
        thread = threading.Thread(target=thread_waiter)
        thread.start()
        while cond.statistics().tasks_waiting == 0:
            await asyncop.sleep(0.001)
        async with cond:
            cond.notify()
            assert cond.lock.statistics().tasks_waiting == 1
        try:
            # Handed to the thread by the release, not free for the taking.
            with pytest.raises(WouldBlock):
                cond.lock.acquire_nowait()
        finally:
            checked.set()
        await asyncop.spawn_blocking(thread.join)

    vruntime.run(main)
    assert results == [True, True]
    assert not cond.locked()


def test_a_thread_timing_out_holds_the_lock_and_returns_false() -> None:
    cond = asyncop.Condition()
    with cond:
        assert cond.wait(0.01) is False
        assert cond.lock.statistics().owner is threading.current_thread()
        assert cond.statistics().tasks_waiting == 0
    assert not cond.locked()


@pytest.mark.asyncop
async def test_a_cancelled_waiter_leaves_the_count_at_once(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()

    async def waiter() -> None:
        async with cond:
            await cond.wait_async()

    async with asyncop.scope() as s:
        ops = [s.spawn(waiter) for _ in range(2)]
        await wait_all_blocked()
        assert cond.statistics().tasks_waiting == 2
        ops[0].cancel()
        assert cond.statistics().tasks_waiting == 1
        await wait_all_blocked()
        assert cond.statistics().tasks_waiting == 1
        async with cond:
            cond.notify_all()
    assert cond.statistics().tasks_waiting == 0
