"""Condition: wait/notify over a Lock, from tasks and threads, and cancel-safe re-acquiring."""

from __future__ import annotations

import math
import random
import threading
from typing import Any

import pytest

import asyncop
from asyncop import Cancelled, Condition, Lock, OperationState
from asyncop.testing import VirtualClock, wait_all_blocked
from tests.runtime.test_channel import wait_until

pytestmark = pytest.mark.timeout(60)


def holds(cond: Condition) -> bool:
    """Whether the calling task or thread holds ``cond``'s lock."""
    try:
        cond._check_held("holds()")
    except RuntimeError:
        return False
    return True


def test_task_waits_until_notified_and_holds_the_lock_again(vruntime: asyncop.Runtime) -> None:
    cond = Condition()
    log: list[str] = []

    async def consumer() -> None:
        async with cond:
            log.append("waiting")
            await cond.wait_async()
            assert holds(cond)
            log.append("woken")

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(consumer)
            await wait_all_blocked()
            assert not cond.locked()  # the waiter released it
            async with cond:
                log.append("notify")
                cond.notify()
                await asyncop.sleep(0.1)
                log.append("release")

    vruntime.run(main)
    assert log == ["waiting", "notify", "release", "woken"]


def test_thread_wait_returns_true_when_notified() -> None:
    cond = Condition()
    results: list[bool] = []

    def waiter() -> None:
        with cond:
            results.append(cond.wait(timeout=10))
            results.append(holds(cond))

    thread = threading.Thread(target=waiter)
    thread.start()
    wait_until(lambda: cond.statistics().tasks_waiting == 1)
    with cond:
        cond.notify()
    thread.join(10)
    assert results == [True, True]


def test_thread_wait_times_out_with_false_holding_the_lock() -> None:
    cond = Condition()
    with cond:
        assert cond.wait(timeout=0.02) is False
        assert holds(cond)
        assert cond.statistics().tasks_waiting == 0
    assert not cond.locked()


def test_bad_timeout_raises_before_the_lock_is_released() -> None:
    cond = Condition()
    with cond:
        with pytest.raises(TypeError):
            cond.wait(timeout="1")  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            cond.wait(timeout=float("nan"))
        assert holds(cond)


def test_wait_and_notify_without_the_lock_raise(vruntime: asyncop.Runtime) -> None:
    cond = Condition()
    with pytest.raises(RuntimeError, match="without holding its lock"):
        cond.wait()
    with pytest.raises(RuntimeError, match="without holding its lock"):
        cond.notify()
    with pytest.raises(RuntimeError, match="without holding its lock"):
        cond.notify_all()

    async def task_waits() -> None:
        await cond.wait_async()

    with pytest.raises(RuntimeError, match="without holding its lock"):
        vruntime.run(task_waits)


def test_lock_held_by_another_thread_does_not_count() -> None:
    cond = Condition()
    cond.acquire()
    errors: list[BaseException] = []

    def other() -> None:
        try:
            cond.notify()
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(10)
    cond.release()
    assert len(errors) == 1


def test_blocking_wait_in_a_coroutine_raises(vruntime: asyncop.Runtime) -> None:
    cond = Condition()

    async def blocks() -> None:
        async with cond:
            cond.wait()

    with pytest.raises(RuntimeError, match="wait_async"):
        vruntime.run(blocks)


@pytest.mark.asyncop
async def test_notify_n_wakes_the_oldest_n_and_notify_all_the_rest(
    autojump_clock: VirtualClock,
) -> None:
    cond = Condition()
    woken: list[int] = []

    async def waiter(i: int) -> None:
        async with cond:
            await cond.wait_async()
            woken.append(i)

    async with asyncop.scope() as s:
        for i in range(5):
            s.spawn(waiter, i)
            await wait_all_blocked()
        async with cond:
            cond.notify(2)
        await wait_all_blocked()
        assert woken == [0, 1]
        async with cond:
            cond.notify_all()
    assert woken == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("n", [1.5, 2.0, math.inf, math.nan, "2", None, True, False], ids=repr)
def test_notify_refuses_a_count_that_is_not_an_int_at_the_call(n: Any) -> None:
    # As threading.Condition: an int (a bool is no count); checked before
    # anything else, the lock included, and nobody is woken.
    cond = Condition()
    waiter = cond._enqueue()
    with pytest.raises(TypeError, match=r"Condition\.notify\(n\) needs an int"):
        cond.notify(n)
    with cond, pytest.raises(TypeError, match=type(n).__name__):
        cond.notify(n)
    assert not waiter.notified


@pytest.mark.parametrize("n", [-1, -(2**70)])
def test_notify_refuses_a_negative_count_as_threading_does(n: int) -> None:
    cond = Condition()
    waiter = cond._enqueue()
    with cond, pytest.raises(ValueError, match=rf"notify\({n}\)"):
        cond.notify(n)
    assert not waiter.notified


def test_notify_zero_wakes_nobody_and_a_huge_count_wakes_every_waiter() -> None:
    cond = Condition()
    waiters = [cond._enqueue() for _ in range(3)]
    with cond:
        cond.notify(0)
        assert not any(waiter.notified for waiter in waiters)
        cond.notify(2**70)
        assert all(waiter.notified for waiter in waiters)
        assert cond.statistics().tasks_waiting == 0


def test_a_task_notifies_a_waiting_thread(runtime: asyncop.Runtime) -> None:
    cond = Condition()
    items: list[int] = []
    got: list[int] = []

    def consumer() -> None:
        with cond:
            while not items:
                cond.wait(timeout=10)
            got.append(items.pop())

    thread = threading.Thread(target=consumer)
    thread.start()
    wait_until(lambda: cond.statistics().tasks_waiting == 1)

    async def producer() -> None:
        async with cond:
            items.append(7)
            cond.notify()

    runtime.run(producer)
    thread.join(10)
    assert got == [7]


def test_shared_lock_and_lock_type_check() -> None:
    lock = Lock()
    one, two = Condition(lock), Condition(lock)
    assert one.lock is two.lock is lock
    with one:
        assert two.locked()
        two.notify()  # holding the shared lock counts for both
    with pytest.raises(TypeError, match=r"asyncop\.Lock"):
        Condition(threading.Lock())  # type: ignore[arg-type]


def test_cancelled_waiter_holds_the_lock_before_it_leaves(vruntime: asyncop.Runtime) -> None:
    cond = Condition()
    seen: list[Any] = []

    async def waiter() -> None:
        async with cond:
            try:
                await cond.wait_async()
            except Cancelled:
                seen.append(("holds", holds(cond)))
                raise

    async def main() -> None:
        async with asyncop.scope() as s:
            op = s.spawn(waiter)
            await wait_all_blocked()
            async with cond:
                op.cancel()
                await asyncop.sleep(0.5)  # the waiter cannot leave while we hold it
                seen.append("main releases")
        assert op.state is OperationState.CANCELLED
        assert not cond.locked()

    vruntime.run(main)
    assert seen == ["main releases", ("holds", True)]


def test_a_notified_waiter_that_is_cancelled_passes_the_notification_on(
    vruntime: asyncop.Runtime,
) -> None:
    cond = Condition()
    woken: list[str] = []

    async def waiter(label: str) -> None:
        async with cond:
            await cond.wait_async()
            woken.append(label)

    async def main() -> None:
        async with asyncop.scope() as s:
            first = s.spawn(waiter, "first")
            await wait_all_blocked()
            s.spawn(waiter, "second")
            await wait_all_blocked()
            async with cond:
                first.cancel()  # the cancel wins first's wait...
                cond.notify(1)  # ...so this notify must reach second
        assert first.state is OperationState.CANCELLED

    vruntime.run(main)
    assert woken == ["second"]


@pytest.mark.parametrize("seed", range(6))
def test_cancel_at_random_points_never_leaves_a_waiter_without_the_lock(
    vruntime: asyncop.Runtime, seed: int
) -> None:
    rng = random.Random(seed)
    cond = Condition()
    state = {"count": 0}
    problems: list[str] = []

    async def worker(i: int) -> None:
        for _ in range(20):
            async with cond:
                try:
                    if rng.random() < 0.5:
                        await cond.wait_async()
                    else:
                        state["count"] += 1
                        cond.notify(rng.randint(1, 3))
                    await asyncop.sleep(rng.random() * 0.01)
                finally:
                    if not holds(cond):
                        problems.append(f"worker {i} left without the lock")

    async def main() -> None:
        async with asyncop.scope() as s:
            ops = [s.spawn(worker, i) for i in range(8)]
            for _ in range(40):
                await asyncop.sleep(rng.random() * 0.01)
                rng.choice(ops).cancel()
                async with cond:
                    cond.notify_all()
            for op in ops:
                op.cancel()

    try:
        vruntime.run(main)
    except BaseException:
        print(f"seed={seed}")
        raise
    assert problems == [], f"seed={seed}"
    assert not cond.locked(), f"seed={seed}"
