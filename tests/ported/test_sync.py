"""Lock, Event, Semaphore, Condition and CapacityLimiter, ported from trio's and
anyio's synchronization cases and asyncio's lock, event, condition and
semaphore cases.

Differences that follow asyncop's rules: every primitive works from threads as
well as tasks; re-acquiring a Lock you hold raises RuntimeError at once (asyncio
would deadlock); a Lock whose holder ends without releasing it is broken; an
acquire that need not wait does not yield to other tasks (as in asyncio; trio's
does).
"""

from __future__ import annotations

import gc
import math
import threading
from typing import Any

import pytest

import asyncop
from asyncop import BrokenResourceError, Cancelled, OperationState
from asyncop.testing import VirtualClock, assert_checkpoints, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


async def sleep_forever() -> None:
    await asyncop.sleep(float("inf"))


# ---------------------------------------------------------------- Event


@pytest.mark.asyncop
async def test_event_basic(autojump_clock: VirtualClock) -> None:
    ev = asyncop.Event()
    assert not ev.is_set()
    ev.set()
    assert ev.is_set()
    with assert_checkpoints():
        await ev.wait_async()
    ev.set()  # setting twice is harmless
    assert ev.is_set()


@pytest.mark.asyncop
async def test_event_wakes_every_waiter(autojump_clock: VirtualClock) -> None:
    ev = asyncop.Event()
    woken: list[int] = []

    async def waiter(i: int) -> None:
        await ev.wait_async()
        woken.append(i)

    async with asyncop.scope() as s:
        for i in range(5):
            s.spawn(waiter, i)
        await wait_all_blocked()
        assert woken == []
        ev.set()
    assert sorted(woken) == [0, 1, 2, 3, 4]


@pytest.mark.asyncop
async def test_event_wait_cancelled(autojump_clock: VirtualClock) -> None:
    ev = asyncop.Event()
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=1):
            await ev.wait_async()
    ev.set()
    await ev.wait_async()


def test_event_wait_from_thread_returns_bool() -> None:
    ev = asyncop.Event()
    assert ev.wait(0.01) is False
    threading.Timer(0.02, ev.set).start()
    assert ev.wait(5) is True


def test_event_set_from_thread_wakes_task(vruntime: asyncop.Runtime) -> None:
    ev = asyncop.Event()

    async def main() -> str:
        async with asyncop.scope() as s:
            s.spawn(lambda: ev.set())
            await ev.wait_async()
        return "woken"

    assert vruntime.run(main) == "woken"


# ---------------------------------------------------------------- Lock


@pytest.mark.asyncop
async def test_lock_basic(autojump_clock: VirtualClock) -> None:
    lock = asyncop.Lock()
    assert not lock.locked()
    async with lock:
        assert lock.locked()
    assert not lock.locked()
    guard = await lock.lock_async()
    assert lock.locked()
    guard.release()
    assert not lock.locked()


@pytest.mark.asyncop
async def test_lock_acquire_is_a_checkpoint_even_uncontended(
    autojump_clock: VirtualClock,
) -> None:
    lock = asyncop.Lock()
    with assert_checkpoints():
        async with lock:
            pass


@pytest.mark.asyncop
async def test_lock_is_fifo(autojump_clock: VirtualClock) -> None:
    lock = asyncop.Lock()
    order: list[int] = []

    async def worker(i: int) -> None:
        async with lock:
            order.append(i)
            await asyncop.sleep(1)

    async with asyncop.scope() as s:
        for i in range(5):
            s.spawn(worker, i)
            await wait_all_blocked()
    assert order == [0, 1, 2, 3, 4]
    assert asyncop.current_time() == 5


@pytest.mark.asyncop
async def test_lock_release_unheld_raises(autojump_clock: VirtualClock) -> None:
    with pytest.raises(RuntimeError):
        asyncop.Lock().release()


@pytest.mark.asyncop
async def test_lock_release_by_another_task_raises(autojump_clock: VirtualClock) -> None:
    lock = asyncop.Lock()
    errors: list[BaseException] = []

    async def other() -> None:
        try:
            lock.release()
        except RuntimeError as exc:
            errors.append(exc)

    async with lock, asyncop.scope() as s:
        s.spawn(other)
    assert len(errors) == 1


@pytest.mark.asyncop
async def test_lock_reentry_raises(autojump_clock: VirtualClock) -> None:
    lock = asyncop.Lock()
    async with lock:
        with pytest.raises(RuntimeError):
            await lock.lock_async()
    assert not lock.locked()


@pytest.mark.asyncop
async def test_cancelled_lock_waiter_does_not_take_the_lock(autojump_clock: VirtualClock) -> None:
    lock = asyncop.Lock()
    got: list[str] = []

    async def waiter(name: str) -> None:
        async with lock:
            got.append(name)

    async with asyncop.scope() as s:
        guard = await lock.lock_async()
        a = s.spawn(waiter, "a")
        await wait_all_blocked()
        s.spawn(waiter, "b")
        await wait_all_blocked()
        a.cancel()
        await wait_all_blocked()
        guard.release()
    assert got == ["b"]
    assert a.state is OperationState.CANCELLED
    assert not lock.locked()


@pytest.mark.asyncop
async def test_lock_handed_over_then_cancelled_keeps_the_lock(
    autojump_clock: VirtualClock,
) -> None:
    # asyncio test_cancel_release_race: a release and a cancel in the same instant
    # must not lose the lock.
    lock = asyncop.Lock()

    async def waiter() -> None:
        async with lock:
            await asyncop.sleep(0)

    async with asyncop.scope() as s:
        guard = await lock.lock_async()
        op = s.spawn(waiter)
        await wait_all_blocked()
        guard.release()
        op.cancel()
    assert not lock.locked()
    async with lock:
        pass


@pytest.mark.asyncop
async def test_a_lock_guard_releases_only_its_own_acquisition(
    autojump_clock: VirtualClock,
) -> None:
    # As releasing a lock one does not hold: a guard used up by release()
    # (or by its with block) must not release a later acquisition.
    lock = asyncop.Lock()
    guard = await lock.lock_async()
    guard.release()
    with pytest.raises(RuntimeError, match="released it already"):
        guard.release()
    assert not lock.locked()

    async with lock:
        with pytest.raises(RuntimeError, match="released it already"):
            guard.release()
        assert lock.locked()
    assert not lock.locked()

    async with await lock.lock_async() as used:
        pass
    second = await lock.lock_async()
    with pytest.raises(RuntimeError, match="released it already"):
        used.release()
    assert lock.statistics().owner is asyncop.current_operation()
    second.release()
    assert not lock.locked()


@pytest.mark.asyncop
async def test_task_ending_with_the_lock_breaks_it(autojump_clock: VirtualClock) -> None:
    lock = asyncop.Lock()

    async def holder() -> None:
        await lock.lock_async()

    async with asyncop.scope() as s:
        s.spawn(holder)
    with pytest.raises(BrokenResourceError):
        await lock.lock_async()


@pytest.mark.asyncop
async def test_a_broken_lock_names_the_task_that_ended_holding_it(
    autojump_clock: VirtualClock,
) -> None:
    # As trio's "Owner of this lock exited without releasing": the error
    # says which task to look at, for waiters already queued and for later ones.
    lock = asyncop.Lock()

    async def forgetful_holder() -> None:
        await lock.lock_async()
        await asyncop.sleep(1)

    async def waiter() -> None:
        await lock.lock_async()

    with pytest.raises(ExceptionGroup) as queued:
        async with asyncop.scope() as s:
            s.spawn(forgetful_holder)
            await wait_all_blocked()
            s.spawn(waiter)
    [error] = queued.value.exceptions
    assert isinstance(error, BrokenResourceError)
    assert "forgetful_holder' ended" in str(error)
    with pytest.raises(BrokenResourceError, match="forgetful_holder' ended"):
        await lock.lock_async()


def test_lock_from_threads(vruntime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()
    counter = [0]

    def work() -> None:
        for _ in range(100):
            assert lock.acquire(5)
            v = counter[0]
            counter[0] = v + 1
            lock.release()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter[0] == 400


def test_lock_acquire_timeout_from_thread() -> None:
    lock = asyncop.Lock()
    assert lock.acquire(1)
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(lock.acquire(0.01)))
    t.start()
    t.join()
    assert result == [False]
    lock.release()


def test_lock_reentry_from_thread_raises() -> None:
    lock = asyncop.Lock()
    with lock, pytest.raises(RuntimeError):
        lock.acquire()
    assert not lock.locked()


def test_lock_from_task_and_thread_mutually_exclude(vruntime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()
    inside = [0]
    peak = [0]

    def thread_work() -> None:
        for _ in range(20):
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
                inside[0] -= 1

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(thread_work)
            for _ in range(20):
                async with lock:
                    inside[0] += 1
                    peak[0] = max(peak[0], inside[0])
                    await asyncop.checkpoint()
                    inside[0] -= 1

    vruntime.run(main)
    gc.collect()
    assert peak[0] == 1


# ---------------------------------------------------------------- Semaphore


@pytest.mark.asyncop
async def test_semaphore_basic(autojump_clock: VirtualClock) -> None:
    sem = asyncop.Semaphore(2)
    assert sem.value == 2
    await sem.acquire_async()
    assert sem.value == 1
    async with sem:
        assert sem.value == 0
    assert sem.value == 1
    sem.release()
    assert sem.value == 2


@pytest.mark.asyncop
async def test_semaphore_zero_blocks_until_release(autojump_clock: VirtualClock) -> None:
    sem = asyncop.Semaphore(0)
    got: list[str] = []

    async def taker() -> None:
        await sem.acquire_async()
        got.append("got")

    async with asyncop.scope() as s:
        s.spawn(taker)
        await wait_all_blocked()
        assert got == []
        sem.release()
    assert got == ["got"]
    assert sem.value == 0


def test_semaphore_bad_values() -> None:
    with pytest.raises(ValueError):
        asyncop.Semaphore(-1)
    with pytest.raises(TypeError):
        asyncop.Semaphore(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        asyncop.Semaphore(3, max_value=2)


def test_semaphore_max_value() -> None:
    sem = asyncop.Semaphore(1, max_value=1)
    assert sem.max_value == 1
    with pytest.raises(ValueError):
        sem.release()
    assert sem.value == 1
    assert sem.acquire(0)
    sem.release()


def test_unbounded_semaphore_release_grows() -> None:
    sem = asyncop.Semaphore(0)
    sem.release()
    sem.release()
    assert sem.value == 2


@pytest.mark.asyncop
async def test_semaphore_is_fifo(autojump_clock: VirtualClock) -> None:
    sem = asyncop.Semaphore(0)
    order: list[int] = []

    async def taker(i: int) -> None:
        await sem.acquire_async()
        order.append(i)

    async with asyncop.scope() as s:
        for i in range(4):
            s.spawn(taker, i)
            await wait_all_blocked()
        for _ in range(4):
            sem.release()
    assert order == [0, 1, 2, 3]


@pytest.mark.asyncop
async def test_release_does_not_let_a_newcomer_jump_the_queue(autojump_clock: VirtualClock) -> None:
    # asyncio test_acquire_fifo_order / "no barging": a released permit goes to the queued waiter.
    sem = asyncop.Semaphore(0)
    order: list[str] = []

    async def queued() -> None:
        await sem.acquire_async()
        order.append("queued")

    async with asyncop.scope() as s:
        s.spawn(queued)
        await wait_all_blocked()
        sem.release()
        assert sem.value == 0  # already the queued waiter's
    assert order == ["queued"]


@pytest.mark.asyncop
async def test_cancelled_semaphore_waiter_loses_nothing(autojump_clock: VirtualClock) -> None:
    sem = asyncop.Semaphore(0)

    async def taker() -> None:
        await sem.acquire_async()

    async with asyncop.scope() as s:
        ops = [s.spawn(taker) for _ in range(3)]
        await wait_all_blocked()
        ops[0].cancel()
        sem.release()
        sem.release()
    assert [o.state for o in ops] == [
        OperationState.CANCELLED,
        OperationState.COMPLETED,
        OperationState.COMPLETED,
    ]
    assert sem.value == 0


def test_semaphore_acquire_timeout_from_thread() -> None:
    sem = asyncop.Semaphore(0)
    assert sem.acquire(0.01) is False
    assert sem.acquire(0) is False
    sem.release()
    assert sem.acquire(0) is True


# ---------------------------------------------------------------- Condition


@pytest.mark.asyncop
async def test_condition_wait_requires_the_lock(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    with pytest.raises(RuntimeError):
        await cond.wait_async()
    with pytest.raises(RuntimeError):
        cond.notify()
    with pytest.raises(RuntimeError):
        cond.notify_all()


def test_condition_needs_an_asyncop_lock() -> None:
    with pytest.raises(TypeError):
        asyncop.Condition(threading.Lock())  # type: ignore[arg-type]


@pytest.mark.asyncop
async def test_condition_notify_wakes_one_in_order(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    woken: list[int] = []

    async def waiter(i: int) -> None:
        async with cond:
            await cond.wait_async()
            woken.append(i)

    async with asyncop.scope() as s:
        for i in range(3):
            s.spawn(waiter, i)
            await wait_all_blocked()
        async with cond:
            cond.notify()
        await wait_all_blocked()
        assert woken == [0]
        async with cond:
            cond.notify(2)
    assert woken == [0, 1, 2]


@pytest.mark.asyncop
async def test_condition_notify_all(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    woken: list[int] = []

    async def waiter(i: int) -> None:
        async with cond:
            await cond.wait_async()
            assert cond.locked()
            woken.append(i)

    async with asyncop.scope() as s:
        for i in range(4):
            s.spawn(waiter, i)
        await wait_all_blocked()
        async with cond:
            cond.notify_all()
            assert woken == []
    assert sorted(woken) == [0, 1, 2, 3]


@pytest.mark.asyncop
async def test_condition_notify_with_no_waiters_is_lost(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    async with cond:
        cond.notify()
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=1), cond:
            await cond.wait_async()


@pytest.mark.asyncop
async def test_cancelled_condition_waiter_holds_the_lock_again(
    autojump_clock: VirtualClock,
) -> None:
    cond = asyncop.Condition()
    held: list[bool] = []

    async def waiter() -> None:
        async with cond:
            try:
                await cond.wait_async()
            except Cancelled:
                held.append(cond.locked())
                raise

    async with asyncop.scope() as s:
        op = s.spawn(waiter)
        await wait_all_blocked()
        op.cancel()
    assert held == [True]
    assert not cond.locked()


@pytest.mark.asyncop
async def test_cancelled_waiter_passes_its_notification_on(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    woken: list[str] = []

    async def waiter(name: str) -> None:
        async with cond:
            await cond.wait_async()
            woken.append(name)

    async with asyncop.scope() as s:
        a = s.spawn(waiter, "a")
        await wait_all_blocked()
        s.spawn(waiter, "b")
        await wait_all_blocked()
        async with cond:
            cond.notify(1)
            a.cancel()
    assert woken == ["b"]


@pytest.mark.asyncop
async def test_condition_wait_with_timeout_reacquires(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    async with cond:
        try:
            async with asyncop.scope(timeout=1):
                await cond.wait_async()
        except TimeoutError:
            pass
        assert cond.locked()


def test_condition_wait_from_thread_with_timeout() -> None:
    cond = asyncop.Condition()
    with cond:
        assert cond.wait(0.01) is False
        assert cond.locked()


def test_condition_shared_lock() -> None:
    lock = asyncop.Lock()
    c1 = asyncop.Condition(lock)
    c2 = asyncop.Condition(lock)
    assert c1.lock is lock and c2.lock is lock
    with c1:
        assert c2.locked()


def test_condition_producer_consumer_threads(runtime: asyncop.Runtime) -> None:
    cond = asyncop.Condition()
    items: list[int] = []
    got: list[int] = []

    def consumer() -> None:
        for _ in range(10):
            with cond:
                while not items:
                    cond.wait(5)
                got.append(items.pop(0))

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(consumer)
            for i in range(10):
                async with cond:
                    items.append(i)
                    cond.notify()
                await asyncop.sleep(0.01)

    runtime.run(main)
    assert got == list(range(10))


# ---------------------------------------------------------------- CapacityLimiter


def test_limiter_bad_totals() -> None:
    with pytest.raises(ValueError):
        asyncop.CapacityLimiter(-1)
    with pytest.raises(TypeError):
        asyncop.CapacityLimiter(1.5)  # type: ignore[arg-type]
    lim = asyncop.CapacityLimiter(1)
    with pytest.raises(ValueError):
        lim.total_tokens = -1
    with pytest.raises(TypeError):
        lim.total_tokens = "2"  # type: ignore[assignment]


def test_limiter_infinite_total() -> None:
    lim = asyncop.CapacityLimiter(math.inf)
    borrowers = [object() for _ in range(100)]
    for b in borrowers:
        assert lim.acquire_on_behalf_of(b, 0)
    assert lim.borrowed_tokens == 100


@pytest.mark.asyncop
async def test_limiter_counts(autojump_clock: VirtualClock) -> None:
    lim = asyncop.CapacityLimiter(2)
    assert (lim.total_tokens, lim.borrowed_tokens, lim.available_tokens) == (2, 0, 2)
    async with lim:
        assert (lim.borrowed_tokens, lim.available_tokens) == (1, 1)
        with pytest.raises(RuntimeError):
            await lim.acquire_async()
    assert lim.borrowed_tokens == 0


@pytest.mark.asyncop
async def test_limiter_release_without_token_raises(autojump_clock: VirtualClock) -> None:
    lim = asyncop.CapacityLimiter(1)
    with pytest.raises(RuntimeError):
        lim.release()
    with pytest.raises(RuntimeError):
        lim.release_on_behalf_of(object())


@pytest.mark.asyncop
async def test_limiter_on_behalf_of(autojump_clock: VirtualClock) -> None:
    lim = asyncop.CapacityLimiter(2)
    a, b = object(), object()
    await lim.acquire_on_behalf_of_async(a)
    await lim.acquire_on_behalf_of_async(b)
    assert lim.available_tokens == 0
    with pytest.raises(RuntimeError):
        await lim.acquire_on_behalf_of_async(a)
    lim.release_on_behalf_of(a)
    with pytest.raises(RuntimeError):
        lim.release_on_behalf_of(a)
    lim.release_on_behalf_of(b)
    assert lim.borrowed_tokens == 0


@pytest.mark.asyncop
async def test_limiter_limits_concurrency_and_is_fifo(autojump_clock: VirtualClock) -> None:
    lim = asyncop.CapacityLimiter(2)
    running = [0]
    peak = [0]
    order: list[int] = []

    async def worker(i: int) -> None:
        async with lim:
            order.append(i)
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            await asyncop.sleep(1)
            running[0] -= 1

    async with asyncop.scope() as s:
        for i in range(6):
            s.spawn(worker, i)
            await wait_all_blocked()
    assert peak[0] == 2
    assert order == list(range(6))
    assert asyncop.current_time() == 3


@pytest.mark.asyncop
async def test_raising_total_tokens_wakes_waiters(autojump_clock: VirtualClock) -> None:
    lim = asyncop.CapacityLimiter(1)
    got: list[int] = []

    async def worker(i: int) -> None:
        async with lim:
            got.append(i)
            await sleep_forever()

    async with asyncop.scope() as s:
        for i in range(3):
            s.spawn(worker, i)
        await wait_all_blocked()
        assert len(got) == 1
        lim.total_tokens = 3
        await wait_all_blocked()
        assert sorted(got) == [0, 1, 2]
        s.cancel()


@pytest.mark.asyncop
async def test_lowering_total_tokens_retires_returned_tokens(autojump_clock: VirtualClock) -> None:
    lim = asyncop.CapacityLimiter(3)
    borrowers = [object() for _ in range(3)]
    for b in borrowers:
        await lim.acquire_on_behalf_of_async(b)
    lim.total_tokens = 1
    lim.release_on_behalf_of(borrowers[0])
    assert lim.available_tokens == 0
    lim.release_on_behalf_of(borrowers[1])
    assert lim.available_tokens == 0
    lim.release_on_behalf_of(borrowers[2])
    assert lim.available_tokens == 1
    assert lim.borrowed_tokens == 0


@pytest.mark.asyncop
async def test_cancelled_limiter_waiter_takes_no_token(autojump_clock: VirtualClock) -> None:
    lim = asyncop.CapacityLimiter(1)

    async def worker() -> None:
        async with lim:
            await asyncop.sleep(1)

    async with asyncop.scope() as s:
        await lim.acquire_async()
        w = s.spawn(worker)
        await wait_all_blocked()
        w.cancel()
        await wait_all_blocked()
        lim.release()
    assert w.state is OperationState.CANCELLED
    assert lim.borrowed_tokens == 0
    assert lim.available_tokens == 1


def test_limiter_from_threads(vruntime: asyncop.Runtime) -> None:
    lim = asyncop.CapacityLimiter(2)
    running = [0]
    peak = [0]
    guard = threading.Lock()

    def work() -> None:
        with lim:
            with guard:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            threading.Event().wait(0.01)
            with guard:
                running[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] <= 2
    assert lim.borrowed_tokens == 0


def test_limiter_thread_acquire_timeout() -> None:
    lim = asyncop.CapacityLimiter(1)
    a = object()
    assert lim.acquire_on_behalf_of(a, 0)
    assert lim.acquire_on_behalf_of(object(), 0.01) is False
    assert lim.borrowed_tokens == 1
    lim.release_on_behalf_of(a)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_spawn_blocking_with_limiter(vruntime: asyncop.Runtime) -> None:
    # Also: the limiter's internal token wait must not warn "never awaited".
    lim = asyncop.CapacityLimiter(1)
    running = [0]
    peak = [0]
    guard = threading.Lock()

    def work() -> None:
        with guard:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        threading.Event().wait(0.01)
        with guard:
            running[0] -= 1

    async def call() -> None:
        await asyncop.spawn_blocking(work, limiter=lim)

    async def main() -> None:
        async with asyncop.scope() as s:
            for _ in range(4):
                s.spawn(call)

    vruntime.run(main)
    gc.collect()
    assert peak[0] == 1


# ---------------------------------------------------------------- taking turns


def _lock_likes() -> list[Any]:
    return [asyncop.Lock, lambda: asyncop.Semaphore(1), lambda: asyncop.CapacityLimiter(1)]


@pytest.mark.asyncop
@pytest.mark.parametrize("make", _lock_likes(), ids=["Lock", "Semaphore", "CapacityLimiter"])
async def test_tasks_looping_on_a_lock_take_turns_with_a_checkpoint(
    autojump_clock: VirtualClock, make: Any
) -> None:
    # trio's generic FIFO fairness case. An acquire that need not wait does
    # not yield (as in asyncio), so the loop passes a checkpoint to let the
    # other tasks queue; from then on each release goes to the oldest waiter.
    lock_like = make()
    record: list[int] = []

    async def loopy(name: int) -> None:
        for _ in range(5):
            async with lock_like:
                record.append(name)
            await asyncop.checkpoint()

    async with asyncop.scope() as s:
        for name in (1, 2, 3):
            s.spawn(loopy, name)
    assert record == [1, 2, 3] * 5


@pytest.mark.asyncop
@pytest.mark.parametrize("make", _lock_likes(), ids=["Lock", "Semaphore", "CapacityLimiter"])
async def test_acquire_nowait_holds_back_a_later_acquire(
    autojump_clock: VirtualClock, make: Any
) -> None:
    lock_like = make()
    record: list[str] = []

    async def taker() -> None:
        record.append("started")
        async with lock_like:
            pass
        record.append("finished")

    async with asyncop.scope() as s:
        lock_like.acquire_nowait()
        s.spawn(taker)
        await wait_all_blocked()
        assert record == ["started"]
        lock_like.release()
    assert record == ["started", "finished"]
