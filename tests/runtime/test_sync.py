"""Lock, Event and Semaphore between coroutine tasks and threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

import asyncop
from asyncop import BrokenResourceError, Cancelled, OperationState
from asyncop.testing import wait_all_blocked

pytestmark = pytest.mark.timeout(20)


# ----------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------


def here() -> asyncop.AsyncOperation:
    """The operation whose code is running (inside a coroutine task)."""
    op = asyncop.current_operation()
    assert op is not None
    return op


def queued(primitive: Any) -> int:
    """How many waiters ``primitive`` has queued.

    Threads blocked in ``acquire()`` are invisible to ``wait_all_blocked``,
    so tests that queue threads in a known order watch the waiter count.
    """
    count: int = primitive.statistics().tasks_waiting
    return count


def has_waiters(primitive: Any, count: int) -> bool:
    """Whether ``primitive`` has exactly ``count`` waiters queued."""
    return queued(primitive) == count


def has_length(items: list[Any], count: int) -> bool:
    """Whether ``items`` holds exactly ``count`` entries."""
    return len(items) == count


def wait_until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``cond`` from a thread until it holds; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {timeout} s")
        time.sleep(0.001)


class Threads:
    """Start plain threads that record their exception; join them all at the end."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self, fn: Callable[[], None]) -> threading.Thread:
        def body() -> None:
            try:
                fn()
            except BaseException as exc:
                self.errors.append(exc)

        thread = threading.Thread(target=body, daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def join(self) -> None:
        for thread in self.threads:
            thread.join(5)
            assert not thread.is_alive(), "a test thread is still blocked"


@pytest.fixture
def threads() -> Iterator[Threads]:
    pool = Threads()
    yield pool
    pool.join()


# ----------------------------------------------------------------------
# Lock: the ways to acquire and release
# ----------------------------------------------------------------------


def test_lock_async_returns_a_guard_whose_release_unlocks(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()

    async def main() -> list[bool]:
        seen = [lock.locked()]
        guard = await lock.lock_async()
        seen.append(lock.locked())
        guard.release()
        seen.append(lock.locked())
        return seen

    assert runtime.run(main) == [False, True, False]


def test_lock_guard_works_as_async_context_manager(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()

    async def main() -> list[bool]:
        seen = []
        guard = await lock.lock_async()
        async with guard:
            seen.append(lock.locked())
        seen.append(lock.locked())
        return seen

    assert runtime.run(main) == [True, False]


def test_a_spent_guard_never_releases_a_later_hold_of_its_lock(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock("db")

    async def main() -> list[object]:
        seen: list[object] = []
        first = await lock.lock_async()
        first.release()
        second = await lock.lock_async()  # the same task holds it again
        for spent in (first.release, lambda: first.__exit__(None, None, None)):
            with pytest.raises(RuntimeError, match="released it already") as caught:
                spent()
            seen.append(lock.locked())
        async with second:
            pass
        seen.append(lock.locked())
        with pytest.raises(RuntimeError, match="released it already"):
            await second.__aexit__(None, None, None)
        seen.append(str(caught.value))
        return seen

    *held, message = runtime.run(main)
    assert held == [True, True, False]
    assert "lock 'db'" in str(message)


def test_async_with_lock_holds_it_inside_the_block_only(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()

    async def main() -> list[bool]:
        seen = []
        async with lock:
            seen.append(lock.locked())
            await asyncop.checkpoint()
            seen.append(lock.locked())
        seen.append(lock.locked())
        return seen

    assert runtime.run(main) == [True, True, False]


def test_async_with_lock_releases_when_the_block_raises(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()

    async def main() -> bool:
        with pytest.raises(KeyError):
            async with lock:
                raise KeyError("x")
        return lock.locked()

    assert runtime.run(main) is False


def test_thread_acquire_and_release() -> None:
    lock = asyncop.Lock()
    assert lock.acquire() is True
    assert lock.locked()
    lock.release()
    assert not lock.locked()


def test_thread_with_lock_holds_it_inside_the_block_only() -> None:
    lock = asyncop.Lock()
    with lock:
        assert lock.locked()
    assert not lock.locked()


def test_holder_task_may_call_lock_release(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()

    async def main() -> bool:
        await lock.lock_async()
        lock.release()
        return lock.locked()

    assert runtime.run(main) is False


def test_releasing_a_lock_nobody_holds_raises_runtime_error() -> None:
    lock = asyncop.Lock()
    with pytest.raises(RuntimeError):
        lock.release()
    assert not lock.locked()


def test_task_releasing_a_lock_nobody_holds_raises_runtime_error(
    runtime: asyncop.Runtime,
) -> None:
    lock = asyncop.Lock()

    async def main() -> None:
        lock.release()

    with pytest.raises(RuntimeError):
        runtime.run(main)


def test_releasing_a_lock_held_by_another_thread_raises(threads: Threads) -> None:
    lock = asyncop.Lock()
    lock.acquire()
    errors: list[BaseException] = []

    def other() -> None:
        try:
            lock.release()
        except RuntimeError as exc:
            errors.append(exc)

    threads.start(other)
    threads.join()
    assert len(errors) == 1
    assert lock.locked()
    lock.release()
    assert not lock.locked()


def test_releasing_a_lock_held_by_another_task_raises(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()

    async def intruder() -> str:
        try:
            lock.release()
        except RuntimeError:
            return "refused"
        return "released"

    async def main() -> tuple[str, bool]:
        async with lock:
            child = here().spawn(intruder)
            outcome: str = await child
            still_locked = lock.locked()
        return outcome, still_locked

    assert runtime.run(main) == ("refused", True)


def test_task_releasing_a_lock_held_by_a_thread_raises(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()
    lock.acquire()

    async def intruder() -> None:
        lock.release()

    with pytest.raises(RuntimeError):
        runtime.run(intruder)
    assert lock.locked()
    lock.release()


def test_thread_releasing_a_lock_held_by_a_task_raises(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()
    held = threading.Event()
    done = threading.Event()

    async def holder() -> None:
        async with lock:
            held.set()
            await asyncop.spawn_blocking(done.wait, 5)

    op = runtime.spawn(holder)
    assert held.wait(5)
    with pytest.raises(RuntimeError):
        lock.release()
    assert lock.locked()
    done.set()
    assert op.wait(5).state is OperationState.COMPLETED
    assert not lock.locked()


def test_blocking_acquire_inside_a_coroutine_raises_and_names_lock_async(
    runtime: asyncop.Runtime,
) -> None:
    lock = asyncop.Lock()

    async def main() -> None:
        lock.acquire(timeout=1)

    with pytest.raises(RuntimeError, match="lock_async"):
        runtime.run(main)
    assert not lock.locked()


def test_thread_acquire_times_out_with_false(threads: Threads) -> None:
    lock = asyncop.Lock()
    lock.acquire()
    results: list[bool] = []
    threads.start(lambda: results.append(lock.acquire(timeout=0.05)))
    threads.join()
    assert results == [False]
    lock.release()


def test_timed_out_acquire_leaves_no_waiter_behind(threads: Threads) -> None:
    lock = asyncop.Lock()
    lock.acquire()
    results: list[bool] = []
    threads.start(lambda: results.append(lock.acquire(timeout=0.05)))
    threads.join()
    assert results == [False]
    lock.release()
    # Had the timed-out waiter stayed queued, the release would have gone to it.
    assert not lock.locked()
    assert lock.acquire(timeout=0) is True
    lock.release()


# ----------------------------------------------------------------------
# Lock: mutual exclusion and fairness
# ----------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_tasks_and_threads_never_hold_the_lock_together(
    runtime: asyncop.Runtime, threads: Threads
) -> None:
    lock = asyncop.Lock()
    rounds = 150
    state = {"counter": 0, "inside": 0, "overlaps": 0}

    def enter() -> int:
        state["inside"] += 1
        if state["inside"] != 1:
            state["overlaps"] += 1
        return state["counter"]

    def leave(value: int) -> None:
        state["counter"] = value + 1
        state["inside"] -= 1

    async def task_body() -> None:
        for _ in range(rounds):
            async with lock:
                value = enter()
                await asyncop.checkpoint()  # yield inside the critical section
                leave(value)

    def thread_body() -> None:
        for _ in range(rounds):
            with lock:
                value = enter()
                time.sleep(0)  # yield inside the critical section
                leave(value)

    async def main() -> None:
        async with asyncop.scope() as s:
            for _ in range(3):
                s.spawn(task_body)

    for _ in range(2):
        threads.start(thread_body)
    runtime.run(main)
    threads.join()
    assert threads.errors == []
    assert state["overlaps"] == 0
    assert state["counter"] == 5 * rounds
    assert not lock.locked()


def test_queued_tasks_acquire_in_queue_order(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()
    log: list[str] = []

    async def waiter(name: str) -> None:
        async with lock:
            log.append(name)
            await asyncop.checkpoint()

    async def main() -> None:
        async with asyncop.scope() as s, lock:
            for name in "ABCD":
                s.spawn(waiter, name)
                await wait_all_blocked()  # queued before the next one starts
        # leaving the block handed the lock to A, then B...

    runtime.run(main)
    assert log == ["A", "B", "C", "D"]


def test_queued_tasks_and_threads_acquire_in_queue_order(
    runtime: asyncop.Runtime, threads: Threads
) -> None:
    lock = asyncop.Lock()
    log: list[str] = []

    async def task_waiter(name: str) -> None:
        async with lock:
            log.append(name)
            await asyncop.checkpoint()

    def thread_waiter(name: str) -> None:
        with lock:
            log.append(name)
            time.sleep(0.001)

    lock.acquire()
    ops = []
    for index, name in enumerate(["t1", "th2", "t3", "th4", "t5"]):
        if name.startswith("th"):
            threads.start(partial(thread_waiter, name))
        else:
            ops.append(runtime.spawn(task_waiter, name))
        wait_until(partial(has_waiters, lock, index + 1))
    lock.release()
    for op in ops:
        assert op.wait(5).state is OperationState.COMPLETED
    threads.join()
    assert threads.errors == []
    assert log == ["t1", "th2", "t3", "th4", "t5"]
    assert not lock.locked()


def test_release_hands_the_lock_to_the_queued_task_not_a_newcomer_thread(
    runtime: asyncop.Runtime,
) -> None:
    lock = asyncop.Lock()
    go = threading.Event()

    async def waiter() -> None:
        guard = await lock.lock_async()
        await asyncop.spawn_blocking(go.wait, 5)
        guard.release()

    lock.acquire()
    op = runtime.spawn(waiter)
    wait_until(lambda: queued(lock) == 1)
    lock.release()
    # The lock went straight to the waiter: a newcomer cannot take it.
    assert lock.locked()
    assert lock.acquire(timeout=0) is False
    go.set()
    assert op.wait(5).state is OperationState.COMPLETED
    assert not lock.locked()


def test_newcomer_task_queues_behind_the_waiter_a_release_woke(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()
    log: list[str] = []

    async def waiter() -> None:
        async with lock:
            log.append("waiter")
            await asyncop.checkpoint()

    async def main() -> None:
        async with asyncop.scope() as s:
            await lock.lock_async()
            s.spawn(waiter)
            await wait_all_blocked()
            lock.release()
            # Straight back to the lock: the queued waiter must go first.
            async with lock:
                log.append("newcomer")

    runtime.run(main)
    assert log == ["waiter", "newcomer"]


def test_release_hands_the_lock_to_the_queued_thread_not_a_newcomer_task(
    runtime: asyncop.Runtime, threads: Threads
) -> None:
    lock = asyncop.Lock()
    log: list[str] = []
    go = threading.Event()

    def thread_waiter() -> None:
        with lock:
            log.append("thread")
            go.wait(5)

    async def main() -> None:
        await lock.lock_async()
        await asyncop.spawn_blocking(threads.start, thread_waiter)
        await asyncop.spawn_blocking(wait_until, lambda: queued(lock) == 1)
        lock.release()
        go.set()
        async with lock:
            log.append("task")

    runtime.run(main)
    threads.join()
    assert log == ["thread", "task"]


# ----------------------------------------------------------------------
# Lock: a task that ends holding it breaks it
# ----------------------------------------------------------------------


def test_task_ending_with_the_lock_breaks_it_for_queued_waiters(
    runtime: asyncop.Runtime, threads: Threads
) -> None:
    lock = asyncop.Lock()
    go = threading.Event()
    outcomes: dict[str, str] = {}

    async def holder() -> None:
        await lock.lock_async()
        await asyncop.spawn_blocking(go.wait, 5)
        # returns without releasing

    async def task_waiter() -> None:
        try:
            await lock.lock_async()
        except BrokenResourceError:
            outcomes["task"] = "broken"
        else:
            outcomes["task"] = "acquired"

    def thread_waiter() -> None:
        try:
            lock.acquire(timeout=5)
        except BrokenResourceError:
            outcomes["thread"] = "broken"
        else:
            outcomes["thread"] = "acquired"

    hold = runtime.spawn(holder)
    wait_until(lock.locked)
    wait = runtime.spawn(task_waiter)
    wait_until(lambda: queued(lock) == 1)
    threads.start(thread_waiter)
    wait_until(lambda: queued(lock) == 2)
    go.set()
    assert hold.wait(5).state is OperationState.COMPLETED
    assert wait.wait(5).state is OperationState.COMPLETED
    threads.join()
    assert outcomes == {"task": "broken", "thread": "broken"}


def test_task_ending_with_the_lock_breaks_it_for_later_acquirers(
    runtime: asyncop.Runtime,
) -> None:
    lock = asyncop.Lock()

    async def holder() -> None:
        await lock.lock_async()

    runtime.run(holder)

    async def late_task() -> None:
        await lock.lock_async()

    with pytest.raises(BrokenResourceError):
        runtime.run(late_task)
    with pytest.raises(BrokenResourceError):
        lock.acquire(timeout=1)


def test_task_failing_with_the_lock_breaks_it(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()

    async def holder() -> None:
        await lock.lock_async()
        raise KeyError("boom")

    with pytest.raises(KeyError):
        runtime.run(holder)
    with pytest.raises(BrokenResourceError):
        lock.acquire(timeout=1)


def test_task_that_released_before_ending_leaves_the_lock_usable(
    runtime: asyncop.Runtime,
) -> None:
    lock = asyncop.Lock()

    async def holder() -> None:
        async with lock:
            await asyncop.checkpoint()

    runtime.run(holder)
    assert lock.acquire(timeout=1) is True
    lock.release()


# ----------------------------------------------------------------------
# Lock: cancelled waiters
# ----------------------------------------------------------------------


def test_cancelled_first_waiter_passes_the_lock_to_the_next(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()
    log: list[str] = []

    async def waiter(name: str) -> None:
        async with lock:
            log.append(name)
            await asyncop.checkpoint()

    async def main() -> tuple[OperationState, OperationState]:
        async with asyncop.scope() as s:
            await lock.lock_async()
            a = s.spawn(waiter, "A")
            await wait_all_blocked()
            b = s.spawn(waiter, "B")
            await wait_all_blocked()
            a.cancel()
            lock.release()
        return a.state, b.state

    assert runtime.run(main) == (OperationState.CANCELLED, OperationState.COMPLETED)
    assert log == ["B"]
    assert not lock.locked()


def test_cancelling_the_only_waiter_leaves_the_lock_free_after_release(
    runtime: asyncop.Runtime,
) -> None:
    lock = asyncop.Lock()

    async def waiter() -> None:
        await lock.lock_async()

    async def main() -> tuple[OperationState, bool]:
        async with asyncop.scope() as s:
            await lock.lock_async()
            a = s.spawn(waiter)
            await wait_all_blocked()
            a.cancel()
            lock.release()
        return a.state, lock.locked()

    assert runtime.run(main) == (OperationState.CANCELLED, False)


def test_waiter_cancelled_and_gone_does_not_get_the_lock(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()

    async def waiter() -> None:
        await lock.lock_async()

    async def main() -> tuple[OperationState, bool]:
        async with asyncop.scope() as s:
            await lock.lock_async()
            a = s.spawn(waiter)
            await wait_all_blocked()
            a.cancel()
            await asyncop.race(a)  # the waiter has ended
            lock.release()
        return a.state, lock.locked()

    assert runtime.run(main) == (OperationState.CANCELLED, False)


@pytest.mark.timeout(30)
def test_cancel_racing_a_release_never_leaves_the_lock_held(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()

    async def waiter() -> None:
        async with lock:
            await asyncop.checkpoint()

    for _ in range(200):
        lock.acquire()
        op = runtime.spawn(waiter)
        wait_until(lambda: queued(lock) == 1)
        canceller = threading.Thread(target=op.cancel)
        canceller.start()
        lock.release()
        canceller.join(5)
        op.wait(5)
        assert op.done
        assert not lock.locked(), "the lock was left held after a cancel raced the release"
    assert lock.acquire(timeout=1) is True
    lock.release()


# ----------------------------------------------------------------------
# Event
# ----------------------------------------------------------------------


def test_event_starts_clear_and_set_makes_is_set_true() -> None:
    event = asyncop.Event()
    assert event.is_set() is False
    event.set()
    assert event.is_set() is True


def test_event_wait_returns_false_on_timeout() -> None:
    event = asyncop.Event()
    started = time.monotonic()
    assert event.wait(0.05) is False
    assert time.monotonic() - started >= 0.04


def test_event_wait_returns_true_once_set() -> None:
    event = asyncop.Event()
    event.set()
    assert event.wait(0) is True
    assert event.wait(5) is True


def test_event_set_from_another_thread_wakes_a_waiting_thread(threads: Threads) -> None:
    event = asyncop.Event()
    results: list[bool] = []
    threads.start(lambda: results.append(event.wait(5)))
    wait_until(lambda: queued(event) == 1)
    event.set()
    threads.join()
    assert results == [True]


def test_event_wait_async_returns_once_set(runtime: asyncop.Runtime) -> None:
    event = asyncop.Event()
    log: list[str] = []

    async def waiter() -> None:
        await event.wait_async()
        log.append("woke")

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(waiter)
            await wait_all_blocked()
            log.append("set")
            event.set()

    runtime.run(main)
    assert log == ["set", "woke"]


def test_event_wait_async_on_a_set_event_returns_at_once(runtime: asyncop.Runtime) -> None:
    event = asyncop.Event()
    event.set()

    async def main() -> str:
        await event.wait_async()
        return "passed"

    assert runtime.run(main) == "passed"


def test_event_set_wakes_tasks_and_threads_together(
    runtime: asyncop.Runtime, threads: Threads
) -> None:
    event = asyncop.Event()
    woke: set[str] = set()
    lock = threading.Lock()

    async def task_waiter(name: str) -> None:
        await event.wait_async()
        with lock:
            woke.add(name)

    def thread_waiter(name: str) -> None:
        if event.wait(5):
            with lock:
                woke.add(name)

    ops = [runtime.spawn(task_waiter, f"task{i}") for i in range(3)]
    for i in range(2):
        threads.start(partial(thread_waiter, f"thread{i}"))
    wait_until(lambda: queued(event) == 5)
    assert woke == set()
    event.set()
    for op in ops:
        assert op.wait(5).state is OperationState.COMPLETED
    threads.join()
    assert woke == {"task0", "task1", "task2", "thread0", "thread1"}


def test_event_set_twice_is_harmless(runtime: asyncop.Runtime) -> None:
    event = asyncop.Event()
    event.set()
    event.set()
    assert event.is_set()
    assert event.wait(0) is True

    async def main() -> str:
        await event.wait_async()
        return "passed"

    assert runtime.run(main) == "passed"


def test_event_set_twice_wakes_each_waiter_once(runtime: asyncop.Runtime) -> None:
    event = asyncop.Event()
    wakes: list[str] = []

    async def waiter() -> None:
        await event.wait_async()
        wakes.append("woke")
        await event.wait_async()
        wakes.append("passed again")

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(waiter)
            await wait_all_blocked()
            event.set()
            event.set()

    runtime.run(main)
    assert wakes == ["woke", "passed again"]


def test_cancelled_event_waiter_leaves_and_set_wakes_the_rest(runtime: asyncop.Runtime) -> None:
    event = asyncop.Event()
    woke: set[str] = set()

    async def waiter(name: str) -> None:
        await event.wait_async()
        woke.add(name)

    async def main() -> tuple[OperationState, OperationState]:
        async with asyncop.scope() as s:
            a = s.spawn(waiter, "A")
            b = s.spawn(waiter, "B")
            await wait_all_blocked()
            a.cancel()
            await wait_all_blocked()
            event.set()
        return a.state, b.state

    assert runtime.run(main) == (OperationState.CANCELLED, OperationState.COMPLETED)
    assert woke == {"B"}


def test_event_blocking_wait_inside_a_coroutine_raises(runtime: asyncop.Runtime) -> None:
    event = asyncop.Event()

    async def main() -> None:
        event.wait(1)

    with pytest.raises(RuntimeError, match="wait_async"):
        runtime.run(main)


# ----------------------------------------------------------------------
# Semaphore
# ----------------------------------------------------------------------


def test_semaphore_value_counts_permits() -> None:
    sem = asyncop.Semaphore(2)
    assert sem.value == 2
    assert sem.acquire(timeout=0) is True
    assert sem.value == 1
    sem.release()
    assert sem.value == 2


def test_semaphore_zero_is_valid_and_has_no_permit() -> None:
    sem = asyncop.Semaphore(0)
    assert sem.value == 0
    assert sem.acquire(timeout=0.02) is False
    sem.release()
    assert sem.value == 1
    assert sem.acquire(timeout=0) is True


def test_semaphore_negative_initial_value_raises_value_error() -> None:
    with pytest.raises(ValueError):
        asyncop.Semaphore(-1)


def test_semaphore_thread_acquire_times_out_with_false(threads: Threads) -> None:
    sem = asyncop.Semaphore(1)
    assert sem.acquire(timeout=0) is True
    results: list[bool] = []
    threads.start(lambda: results.append(sem.acquire(timeout=0.05)))
    threads.join()
    assert results == [False]
    assert sem.value == 0


def test_semaphore_timed_out_acquire_leaves_no_waiter_behind(threads: Threads) -> None:
    sem = asyncop.Semaphore(0)
    results: list[bool] = []
    threads.start(lambda: results.append(sem.acquire(timeout=0.05)))
    threads.join()
    assert results == [False]
    sem.release()
    assert sem.value == 1


def test_semaphore_with_statement_takes_and_returns_a_permit() -> None:
    sem = asyncop.Semaphore(1)
    with sem:
        assert sem.value == 0
    assert sem.value == 1


def test_semaphore_acquire_async_takes_a_permit(runtime: asyncop.Runtime) -> None:
    sem = asyncop.Semaphore(2)

    async def main() -> list[int]:
        seen = [sem.value]
        await sem.acquire_async()
        seen.append(sem.value)
        sem.release()
        seen.append(sem.value)
        return seen

    assert runtime.run(main) == [2, 1, 2]


def test_semaphore_async_with_holds_a_permit_inside_the_block(runtime: asyncop.Runtime) -> None:
    sem = asyncop.Semaphore(3)

    async def main() -> list[int]:
        seen = []
        async with sem:
            seen.append(sem.value)
            await asyncop.checkpoint()
        seen.append(sem.value)
        return seen

    assert runtime.run(main) == [2, 3]


def test_semaphore_limits_concurrent_holders(runtime: asyncop.Runtime) -> None:
    sem = asyncop.Semaphore(2)
    state = {"inside": 0, "most": 0}

    async def worker() -> None:
        for _ in range(20):
            async with sem:
                state["inside"] += 1
                state["most"] = max(state["most"], state["inside"])
                await asyncop.checkpoint()
                state["inside"] -= 1

    async def main() -> None:
        async with asyncop.scope() as s:
            for _ in range(5):
                s.spawn(worker)

    runtime.run(main)
    assert state["most"] == 2
    assert sem.value == 2


def test_semaphore_hands_permits_to_tasks_in_queue_order(runtime: asyncop.Runtime) -> None:
    sem = asyncop.Semaphore(0)
    log: list[str] = []

    async def waiter(name: str) -> None:
        await sem.acquire_async()
        log.append(name)

    async def main() -> list[list[str]]:
        snapshots = []
        async with asyncop.scope() as s:
            for name in "ABC":
                s.spawn(waiter, name)
                await wait_all_blocked()
            for _ in range(3):
                sem.release()
                await wait_all_blocked()
                snapshots.append(list(log))
        return snapshots

    assert runtime.run(main) == [["A"], ["A", "B"], ["A", "B", "C"]]
    assert sem.value == 0


def test_semaphore_hands_permits_to_tasks_and_threads_in_queue_order(
    runtime: asyncop.Runtime, threads: Threads
) -> None:
    sem = asyncop.Semaphore(0)
    log: list[str] = []

    async def task_waiter(name: str) -> None:
        await sem.acquire_async()
        log.append(name)

    def thread_waiter(name: str) -> None:
        if sem.acquire(timeout=5):
            log.append(name)

    names = ["t1", "th2", "t3", "th4"]
    ops = []
    for index, name in enumerate(names):
        if name.startswith("th"):
            threads.start(partial(thread_waiter, name))
        else:
            ops.append(runtime.spawn(task_waiter, name))
        wait_until(partial(has_waiters, sem, index + 1))
    for count in range(1, len(names) + 1):
        sem.release()
        wait_until(partial(has_length, log, count))
        assert log == names[:count]
    for op in ops:
        assert op.wait(5).state is OperationState.COMPLETED
    threads.join()
    assert sem.value == 0


def test_semaphore_release_goes_to_the_queued_waiter_not_a_newcomer(
    runtime: asyncop.Runtime,
) -> None:
    sem = asyncop.Semaphore(0)
    go = threading.Event()

    async def waiter() -> None:
        await sem.acquire_async()
        await asyncop.spawn_blocking(go.wait, 5)

    op = runtime.spawn(waiter)
    wait_until(lambda: queued(sem) == 1)
    sem.release()
    assert sem.value == 0
    assert sem.acquire(timeout=0) is False
    go.set()
    assert op.wait(5).state is OperationState.COMPLETED


def test_cancelled_semaphore_waiter_passes_the_permit_to_the_next(
    runtime: asyncop.Runtime,
) -> None:
    sem = asyncop.Semaphore(0)
    log: list[str] = []

    async def waiter(name: str) -> None:
        await sem.acquire_async()
        log.append(name)

    async def main() -> tuple[OperationState, OperationState, int]:
        async with asyncop.scope() as s:
            a = s.spawn(waiter, "A")
            await wait_all_blocked()
            b = s.spawn(waiter, "B")
            await wait_all_blocked()
            a.cancel()
            sem.release()
        return a.state, b.state, sem.value

    assert runtime.run(main) == (OperationState.CANCELLED, OperationState.COMPLETED, 0)
    assert log == ["B"]


def test_cancelled_only_semaphore_waiter_leaves_the_permit_in_the_pool(
    runtime: asyncop.Runtime,
) -> None:
    sem = asyncop.Semaphore(0)

    async def waiter() -> None:
        await sem.acquire_async()

    async def main() -> tuple[OperationState, int]:
        async with asyncop.scope() as s:
            a = s.spawn(waiter)
            await wait_all_blocked()
            a.cancel()
            sem.release()
        return a.state, sem.value

    assert runtime.run(main) == (OperationState.CANCELLED, 1)


@pytest.mark.timeout(30)
def test_cancel_racing_a_semaphore_release_never_loses_the_permit(
    runtime: asyncop.Runtime,
) -> None:
    sem = asyncop.Semaphore(0)

    async def waiter() -> None:
        async with sem:
            await asyncop.checkpoint()

    for _ in range(200):
        op = runtime.spawn(waiter)
        wait_until(lambda: queued(sem) == 1)
        canceller = threading.Thread(target=op.cancel)
        canceller.start()
        sem.release()
        canceller.join(5)
        op.wait(5)
        assert op.done
        # Whether the waiter got the permit (and gave it back) or refused it,
        # the one permit is in the pool again.
        assert sem.value == 1
        assert sem.acquire(timeout=0) is True


def test_semaphore_blocking_acquire_inside_a_coroutine_raises(runtime: asyncop.Runtime) -> None:
    sem = asyncop.Semaphore(1)

    async def main() -> None:
        sem.acquire(timeout=1)

    with pytest.raises(RuntimeError, match="acquire_async"):
        runtime.run(main)
    assert sem.value == 1


def test_cancelled_task_waiting_on_a_lock_raises_cancelled_at_the_await(
    runtime: asyncop.Runtime,
) -> None:
    lock = asyncop.Lock()
    log: list[str] = []

    async def waiter() -> None:
        try:
            await lock.lock_async()
        except Cancelled:
            log.append("cancelled at the await")
            raise

    async def main() -> OperationState:
        async with asyncop.scope() as s:
            await lock.lock_async()
            a = s.spawn(waiter)
            await wait_all_blocked()
            a.cancel()
            await wait_all_blocked()
            lock.release()
        return a.state

    assert runtime.run(main) is OperationState.CANCELLED
    assert log == ["cancelled at the await"]


def test_cancelled_task_does_not_take_a_free_lock(runtime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()
    never = asyncop.Event()
    log: list[str] = []

    async def victim() -> None:
        try:
            await never.wait_async()
        except Cancelled:
            log.append("cancelled")
        try:
            await lock.lock_async()  # cancellation is level-triggered
        except Cancelled:
            log.append("refused the lock")
            raise
        log.append("took the lock")

    async def main() -> bool:
        async with asyncop.scope() as s:
            a = s.spawn(victim)
            await wait_all_blocked()
            a.cancel()
        return lock.locked()

    assert runtime.run(main) is False
    assert log == ["cancelled", "refused the lock"]


def test_cancelled_task_does_not_take_a_free_permit(runtime: asyncop.Runtime) -> None:
    sem = asyncop.Semaphore(1)
    never = asyncop.Event()

    async def victim() -> None:
        try:
            await never.wait_async()
        except Cancelled:
            pass
        await sem.acquire_async()

    async def main() -> int:
        async with asyncop.scope() as s:
            a = s.spawn(victim)
            await wait_all_blocked()
            a.cancel()
        return sem.value

    assert runtime.run(main) == 1


# ----------------------------------------------------------------------
# Re-entry: the holder acquiring again raises at once, naming the lock
# ----------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [None, 5.0, 0])
def test_a_thread_acquiring_a_lock_it_holds_raises_at_once(timeout: float | None) -> None:
    lock = asyncop.Lock("config")
    assert lock.acquire()
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="'config' is already held by the task or thread"):
        lock.acquire(timeout=timeout)
    assert time.monotonic() - start < 1.0
    # Still held by the thread, once: one release frees it.
    assert lock.locked()
    lock.release()
    assert not lock.locked()


def test_nested_with_blocks_on_one_lock_raise_instead_of_deadlocking() -> None:
    lock = asyncop.Lock("nested")
    with pytest.raises(RuntimeError, match="'nested'"), lock, lock:
        pass
    assert not lock.locked()


def test_a_sync_operation_acquiring_its_lock_again_fails_at_once() -> None:
    lock = asyncop.Lock("op-lock")
    with asyncop.Runtime(2) as rt:

        def work() -> None:
            with lock:
                lock.acquire()

        result = rt.spawn(work).wait(5)
    assert result.state is OperationState.FAILED
    assert isinstance(result.error, RuntimeError) and "'op-lock'" in str(result.error)
    assert not lock.locked()


def test_a_task_acquiring_a_lock_it_holds_fails_at_once() -> None:
    lock = asyncop.Lock("task-lock")

    async def twice() -> str:
        async with lock:
            try:
                await lock.lock_async()
            except RuntimeError as exc:
                return str(exc)
        return "no error"

    async def nested() -> None:
        async with lock, lock:
            pass

    with asyncop.Runtime(2) as rt:
        message = rt.spawn(twice).wait(5).value
        assert "'task-lock' is already held" in message
        result = rt.spawn(nested).wait(5)
        assert result.state is OperationState.FAILED
        assert isinstance(result.error, RuntimeError)
    assert not lock.locked()


def test_other_holders_still_make_an_acquirer_wait() -> None:
    lock = asyncop.Lock()
    assert lock.acquire()
    got: list[bool] = []
    other = threading.Thread(target=lambda: got.append(lock.acquire(timeout=0.05)))
    other.start()
    other.join(5)
    assert got == [False]
    lock.release()
