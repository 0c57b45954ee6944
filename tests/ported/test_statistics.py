"""``statistics()`` of every primitive at each step, and the misuse errors around
them, ported from trio's and anyio's lock, event, semaphore, capacity limiter
and memory channel cases.

Differences that follow asyncop's rules: a lock's or limiter's holder is the
task's ``AsyncOperation`` (or the ``threading.Thread``); ``borrowers`` is a
tuple; ``total_tokens`` may be 0; the channel fields say "ends" where trio says
"channels"; a blocked thread counts as a waiting task.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest

import asyncop
from asyncop import LockStatistics, OperationState, WouldBlock
from asyncop.testing import VirtualClock, assert_checkpoints, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


async def wait_for(event: asyncop.Event) -> None:
    await event.wait_async()


# ---------------------------------------------------------------- Lock


@pytest.mark.asyncop
async def test_lock_statistics_step_by_step(autojump_clock: VirtualClock) -> None:
    lock = asyncop.Lock()
    me = asyncop.current_operation()
    assert lock.statistics() == LockStatistics(False, None, 0)
    lock.acquire_nowait()
    assert lock.statistics() == LockStatistics(True, me, 0)
    with pytest.raises(RuntimeError):
        lock.acquire_nowait()
    with pytest.raises(RuntimeError):
        await lock.lock_async()
    assert lock.statistics() == LockStatistics(True, me, 0)

    async def waiter() -> None:
        async with lock:
            pass

    async with asyncop.scope() as s:
        for i in range(1, 3):
            s.spawn(waiter)
            await wait_all_blocked()
            assert lock.statistics().tasks_waiting == i
        lock.release()
        # Handed to the oldest waiter at once, before it runs.
        stats = lock.statistics()
        assert stats.locked and stats.owner not in (None, me)
        assert stats.tasks_waiting == 1
        with pytest.raises(WouldBlock):
            lock.acquire_nowait()
    assert lock.statistics() == LockStatistics(False, None, 0)


@pytest.mark.asyncop
async def test_release_by_a_task_that_does_not_hold_the_lock(autojump_clock: VirtualClock) -> None:
    lock = asyncop.Lock()
    await lock.lock_async()
    errors: list[RuntimeError] = []

    async def other() -> None:
        try:
            lock.release()
        except RuntimeError as exc:
            errors.append(exc)

    async with asyncop.scope() as s:
        s.spawn(other)
    assert len(errors) == 1
    assert lock.statistics().owner is asyncop.current_operation()
    lock.release()
    with pytest.raises(RuntimeError):
        lock.release()


@pytest.mark.asyncop
async def test_cancelled_lock_waiters_leave_the_count_and_the_order(
    autojump_clock: VirtualClock,
) -> None:
    lock = asyncop.Lock()
    order: list[int] = []

    async def worker(i: int) -> None:
        async with lock:
            order.append(i)
            await asyncop.sleep(1)

    async with asyncop.scope() as s:
        await lock.lock_async()
        ops = []
        for i in range(5):  # one at a time: they queue in this order
            ops.append(s.spawn(worker, i))
            await wait_all_blocked()
        assert lock.statistics().tasks_waiting == 5
        ops[1].cancel()
        ops[3].cancel()
        assert lock.statistics().tasks_waiting == 3
        lock.release()
    assert order == [0, 2, 4]
    assert [op.state for op in ops[1::2]] == [OperationState.CANCELLED] * 2
    assert lock.statistics() == LockStatistics(False, None, 0)


@pytest.mark.asyncop
async def test_cancelled_uncontended_acquire_takes_nothing(autojump_clock: VirtualClock) -> None:
    lock = asyncop.Lock()
    async with asyncop.scope() as s:
        s.cancel()
        with pytest.raises(asyncop.Cancelled):
            await lock.lock_async()
        assert not lock.locked()
    assert lock.statistics() == LockStatistics(False, None, 0)


def test_a_thread_that_timed_out_leaves_no_waiter() -> None:
    lock = asyncop.Lock()
    assert lock.acquire()
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(lock.acquire(timeout=0.05)))
    thread.start()
    thread.join()
    assert results == [False]
    assert lock.statistics() == LockStatistics(True, threading.current_thread(), 0)
    lock.release()
    assert lock.statistics() == LockStatistics(False, None, 0)


# ---------------------------------------------------------------- Event


@pytest.mark.asyncop
async def test_event_statistics(autojump_clock: VirtualClock) -> None:
    event = asyncop.Event()
    async with asyncop.scope() as s:
        assert event.statistics().tasks_waiting == 0
        for i in range(1, 3):
            s.spawn(wait_for, event)
            await wait_all_blocked()
            assert event.statistics().tasks_waiting == i
        event.set()
        assert event.statistics().tasks_waiting == 0
    other = asyncop.Event()
    async with asyncop.scope() as s:
        op = s.spawn(wait_for, other)
        await wait_all_blocked()
        assert other.statistics().tasks_waiting == 1
        op.cancel()
        assert other.statistics().tasks_waiting == 0
    assert not other.is_set()


@pytest.mark.asyncop
async def test_cancel_and_set_in_one_step_the_cancel_came_first(
    autojump_clock: VirtualClock,
) -> None:
    event = asyncop.Event()
    async with asyncop.scope() as s:
        op = s.spawn(wait_for, event)
        await wait_all_blocked()
        op.cancel()
        event.set()
    assert op.state is OperationState.CANCELLED
    assert event.statistics().tasks_waiting == 0


# ---------------------------------------------------------------- Semaphore


@pytest.mark.asyncop
async def test_semaphore_values_and_statistics(autojump_clock: VirtualClock) -> None:
    with pytest.raises(TypeError):
        asyncop.Semaphore(1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        asyncop.Semaphore(-1)
    sem = asyncop.Semaphore(1)
    assert sem.value == 1 and sem.max_value is None
    sem.release()
    assert sem.value == 2
    assert sem.statistics().tasks_waiting == 0
    sem.acquire_nowait()
    assert sem.value == 1
    with assert_checkpoints():
        await sem.acquire_async()
    assert sem.value == 0
    with pytest.raises(WouldBlock):
        sem.acquire_nowait()
    sem.release()
    with assert_checkpoints():
        async with sem:
            assert sem.value == 0
    assert sem.value == 1
    sem.acquire_nowait()
    record: list[int] = []

    async def do_acquire(i: int) -> None:
        async with sem:
            record.append(i)
            await asyncop.sleep(1)

    async with asyncop.scope() as s:
        s.spawn(do_acquire, 1)
        await wait_all_blocked()
        s.spawn(do_acquire, 2)
        await wait_all_blocked()
        assert sem.statistics().tasks_waiting == 2
        sem.release()
        # Handed to the first waiter: nothing for a newcomer.
        assert sem.value == 0
        assert sem.statistics().tasks_waiting == 1
        with pytest.raises(WouldBlock):
            sem.acquire_nowait()
    assert record == [1, 2]
    assert sem.value == 1


def test_bounded_semaphore_values() -> None:
    with pytest.raises(TypeError):
        asyncop.Semaphore(1, max_value=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        asyncop.Semaphore(2, max_value=1)
    with pytest.raises(ValueError):
        asyncop.Semaphore(1, max_value=-1)
    bounded = asyncop.Semaphore(1, max_value=1)
    assert bounded.max_value == 1
    with pytest.raises(ValueError):
        bounded.release()
    assert bounded.value == 1
    bounded.acquire_nowait()
    bounded.release()
    assert bounded.value == 1
    nothing = asyncop.Semaphore(0, max_value=0)
    with pytest.raises(ValueError):
        nothing.release()
    assert asyncop.Semaphore(0, max_value=2).max_value == 2


@pytest.mark.asyncop
async def test_bounded_release_to_a_cancelled_waiter_goes_to_the_next(
    autojump_clock: VirtualClock,
) -> None:
    sem = asyncop.Semaphore(0, max_value=1)

    async def take() -> None:
        await sem.acquire_async()

    async with asyncop.scope() as s:
        first = s.spawn(take)
        second = s.spawn(take)
        await wait_all_blocked()
        first.cancel()
        sem.release()
        assert sem.value == 0
        assert sem.statistics().tasks_waiting == 0
    assert first.state is OperationState.CANCELLED
    assert second.state is OperationState.COMPLETED
    assert sem.value == 0


@pytest.mark.asyncop
async def test_each_release_goes_to_a_queued_waiter(autojump_clock: VirtualClock) -> None:
    sem = asyncop.Semaphore(0)
    order: list[int] = []

    async def take(i: int) -> None:
        await sem.acquire_async()
        order.append(i)

    async with asyncop.scope() as s:
        for i in range(3):  # one at a time: they queue in this order
            s.spawn(take, i)
            await wait_all_blocked()
        for _ in range(3):
            sem.release()
            with pytest.raises(WouldBlock):
                sem.acquire_nowait()
            await wait_all_blocked()  # (the woken one records its turn first)
    assert order == [0, 1, 2]
    assert sem.value == 0


# ---------------------------------------------------------------- CapacityLimiter


@pytest.mark.asyncop
async def test_limiter_borrowers_step_by_step(autojump_clock: VirtualClock) -> None:
    limiter = asyncop.CapacityLimiter(2)
    me = asyncop.current_operation()
    assert "CapacityLimiter" in repr(limiter)
    assert (limiter.total_tokens, limiter.borrowed_tokens, limiter.available_tokens) == (2, 0, 2)
    with pytest.raises(RuntimeError):
        limiter.release()
    limiter.acquire_nowait()
    assert (limiter.borrowed_tokens, limiter.available_tokens) == (1, 1)
    stats = limiter.statistics()
    assert (stats.borrowed_tokens, stats.total_tokens, stats.tasks_waiting) == (1, 2, 0)
    assert stats.borrowers == (me,)
    with pytest.raises(RuntimeError):
        limiter.acquire_nowait()
    with pytest.raises(RuntimeError):
        await limiter.acquire_async()
    assert limiter.borrowed_tokens == 1
    with assert_checkpoints():
        await limiter.acquire_on_behalf_of_async("someone")
    assert limiter.borrowed_tokens == 2
    with pytest.raises(WouldBlock):
        limiter.acquire_on_behalf_of_nowait("third party")
    assert set(limiter.statistics().borrowers) == {me, "someone"}
    limiter.release_on_behalf_of(me)
    assert limiter.statistics().borrowers == ("someone",)
    with pytest.raises(RuntimeError):
        limiter.release_on_behalf_of("someone else")
    limiter.release_on_behalf_of("someone")
    assert limiter.borrowed_tokens == 0
    async with limiter:
        assert limiter.borrowed_tokens == 1
    assert limiter.borrowed_tokens == 0


@pytest.mark.asyncop
async def test_limiter_hands_a_released_token_to_the_waiter(autojump_clock: VirtualClock) -> None:
    limiter = asyncop.CapacityLimiter(2)
    async with asyncop.scope() as s:
        await limiter.acquire_on_behalf_of_async("value 1")
        await limiter.acquire_on_behalf_of_async("value 2")
        s.spawn(limiter.acquire_on_behalf_of_async, "value 3")
        await wait_all_blocked()
        assert limiter.borrowed_tokens == 2
        assert limiter.statistics().tasks_waiting == 1
        limiter.release_on_behalf_of("value 2")
        # Recorded as the token is handed over, before the waiter runs.
        assert set(limiter.statistics().borrowers) == {"value 1", "value 3"}
        assert limiter.statistics().tasks_waiting == 0
        with pytest.raises(WouldBlock):
            limiter.acquire_nowait()
    limiter.release_on_behalf_of("value 3")
    limiter.release_on_behalf_of("value 1")
    assert limiter.statistics().borrowers == ()


@pytest.mark.asyncop
async def test_limiter_total_tokens_changes_with_tokens_out(autojump_clock: VirtualClock) -> None:
    limiter = asyncop.CapacityLimiter(2)
    for bad in (1.0, "1", None):
        with pytest.raises(TypeError):
            limiter.total_tokens = bad  # type: ignore[assignment]
    with pytest.raises(ValueError):
        limiter.total_tokens = -1
    limiter.total_tokens = 10
    assert limiter.total_tokens == 10
    limiter.total_tokens = 2

    def borrowers() -> set[Any]:
        return set(limiter.statistics().borrowers)

    async with asyncop.scope() as s:
        for i in range(5):
            s.spawn(limiter.acquire_on_behalf_of_async, i)
            await wait_all_blocked()
        assert borrowers() == {0, 1}
        assert limiter.statistics().tasks_waiting == 3
        limiter.total_tokens += 1
        assert borrowers() == {0, 1, 2}
        assert limiter.statistics().tasks_waiting == 2
        assert limiter.available_tokens == 0
        limiter.total_tokens -= 1
        # Tokens already lent cannot be taken back.
        assert borrowers() == {0, 1, 2}
        assert limiter.statistics().tasks_waiting == 2
        assert limiter.available_tokens == 0
        limiter.release_on_behalf_of(0)  # retired
        assert borrowers() == {1, 2}
        assert limiter.statistics().tasks_waiting == 2
        limiter.release_on_behalf_of(1)
        assert borrowers() == {2, 3}
        assert limiter.statistics().tasks_waiting == 1
        limiter.total_tokens += 2
        assert borrowers() == {2, 3, 4}
        assert limiter.statistics().tasks_waiting == 0
        assert limiter.available_tokens == 1
    for borrower in (2, 3, 4):
        limiter.release_on_behalf_of(borrower)
    assert (limiter.borrowed_tokens, limiter.available_tokens) == (0, 4)


@pytest.mark.asyncop
async def test_limiter_lowered_to_zero_then_raised(autojump_clock: VirtualClock) -> None:
    limiter = asyncop.CapacityLimiter(2)
    limiter.acquire_on_behalf_of_nowait("a")
    limiter.total_tokens = 0
    assert limiter.available_tokens == 0
    with pytest.raises(WouldBlock):
        limiter.acquire_on_behalf_of_nowait("b")
    async with asyncop.scope() as s:
        s.spawn(limiter.acquire_on_behalf_of_async, "b")
        await wait_all_blocked()
        limiter.release_on_behalf_of("a")
        assert limiter.statistics().tasks_waiting == 1
        assert limiter.borrowed_tokens == 0
        limiter.total_tokens = 1
        assert limiter.statistics().borrowers == ("b",)
    limiter.release_on_behalf_of("b")
    assert limiter.available_tokens == 1


@pytest.mark.asyncop
async def test_limiter_without_limit(autojump_clock: VirtualClock) -> None:
    limiter = asyncop.CapacityLimiter(math.inf)
    assert limiter.available_tokens == math.inf
    limiter.acquire_nowait()
    assert (limiter.borrowed_tokens, limiter.available_tokens) == (1, math.inf)
    limiter.total_tokens = 3
    assert limiter.available_tokens == 2
    limiter.total_tokens = math.inf
    assert limiter.available_tokens == math.inf
    limiter.release()
    assert limiter.statistics().total_tokens == math.inf


@pytest.mark.asyncop
async def test_cancelled_limiter_waiter_may_ask_again(autojump_clock: VirtualClock) -> None:
    limiter = asyncop.CapacityLimiter(1)
    await limiter.acquire_async()
    async with asyncop.scope() as s:
        first = s.spawn(limiter.acquire_on_behalf_of_async, "a")
        s.spawn(limiter.acquire_on_behalf_of_async, "b")
        await wait_all_blocked()
        assert limiter.statistics().tasks_waiting == 2
        first.cancel()
        assert limiter.statistics().tasks_waiting == 1
        limiter.release()
    assert limiter.statistics().borrowers == ("b",)
    limiter.release_on_behalf_of("b")
    limiter.acquire_on_behalf_of_nowait("a")  # "a" is no longer marked as waiting
    limiter.release_on_behalf_of("a")
    assert limiter.statistics().borrowers == ()


@pytest.mark.asyncop
async def test_limiter_token_order_follows_start_order(autojump_clock: VirtualClock) -> None:
    limiter = asyncop.CapacityLimiter(1)
    results: list[int] = []
    event = asyncop.Event()

    async def append(x: int, *, task_status: asyncop.TaskStatus[None]) -> None:
        task_status.started()
        async with limiter:
            await event.wait_async()
            results.append(x)

    async with asyncop.scope() as s:
        for i in [0, 1, 2]:
            await s.start(append, i)
            await wait_all_blocked()  # (queued on the limiter before the next starts)
        event.set()
    assert results == [0, 1, 2]


@pytest.mark.asyncop
async def test_raising_total_tokens_lets_every_waiter_in(autojump_clock: VirtualClock) -> None:
    limiter = asyncop.CapacityLimiter(1)
    entered = [asyncop.Event() for _ in range(3)]
    go_on = asyncop.Event()

    async def worker(event: asyncop.Event) -> None:
        async with limiter:
            event.set()
            await go_on.wait_async()

    async with asyncop.scope() as s:
        for event in entered[:2]:
            s.spawn(worker, event)
        await wait_all_blocked()
        assert sum(event.is_set() for event in entered) == 1
        limiter.total_tokens = 3
        s.spawn(worker, entered[2])
        async with asyncop.fail_after(1):
            for event in entered[1:]:
                await event.wait_async()
        go_on.set()


def test_a_thread_that_timed_out_waiting_for_a_token_leaves_no_trace(
    vruntime: asyncop.Runtime,
) -> None:
    limiter = asyncop.CapacityLimiter(1)
    assert limiter.acquire()
    assert limiter.statistics().borrowers == (threading.current_thread(),)
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(limiter.acquire(timeout=0.05)))
    thread.start()
    thread.join()
    assert results == [False]
    assert limiter.statistics().tasks_waiting == 0
    limiter.release()
    assert limiter.statistics().borrowers == ()


# ---------------------------------------------------------------- Channel


@pytest.mark.asyncop
async def test_channel_statistics_step_by_step(autojump_clock: VirtualClock) -> None:
    channel = asyncop.Channel[None](2)
    tx, rx = channel.sender(), channel.receiver()
    assert tx.statistics() == rx.statistics() == channel.statistics()
    stats = tx.statistics()
    assert (stats.current_buffer_used, stats.max_buffer_size) == (0, 2)
    assert (stats.open_send_ends, stats.open_receive_ends) == (1, 1)
    assert (stats.tasks_waiting_send, stats.tasks_waiting_receive) == (0, 0)
    tx.try_send(None)
    assert tx.statistics().current_buffer_used == 1
    tx2 = tx.clone()
    assert tx.statistics().open_send_ends == 2
    await tx.aclose()
    assert tx2.statistics().open_send_ends == 1
    assert tx.statistics().open_send_ends == 1  # a closed end still reads them
    rx2 = rx.clone()
    assert tx2.statistics().open_receive_ends == 2
    await rx2.aclose()
    assert tx2.statistics().open_receive_ends == 1

    async def send() -> None:
        await tx2.send_async(None)

    async with asyncop.scope() as s:
        tx2.try_send(None)
        assert tx2.statistics().current_buffer_used == 2
        s.spawn(send)
        s.spawn(send)
        await wait_all_blocked()
        assert tx2.statistics().tasks_waiting_send == 2
        s.cancel()
    assert tx2.statistics().tasks_waiting_send == 0
    assert tx2.statistics().current_buffer_used == 2
    while True:
        try:
            rx.try_recv()
        except WouldBlock:
            break

    async def receive() -> None:
        await rx.recv_async()

    async with asyncop.scope() as s:
        s.spawn(receive)
        await wait_all_blocked()
        assert tx2.statistics().tasks_waiting_receive == 1
        s.cancel()
    assert tx2.statistics().tasks_waiting_receive == 0


@pytest.mark.asyncop
async def test_plain_channel_statistics(autojump_clock: VirtualClock) -> None:
    channel = asyncop.Channel[int](0)
    stats = channel.statistics()
    assert (stats.open_send_ends, stats.open_receive_ends, stats.max_buffer_size) == (0, 0, 0)

    async def send() -> None:
        await channel.send_async(1)

    async with asyncop.scope() as s:
        s.spawn(send)
        await wait_all_blocked()
        stats = channel.statistics()
        assert (stats.tasks_waiting_send, stats.current_buffer_used) == (1, 0)
        assert await channel.recv_async() == 1
    assert channel.statistics().tasks_waiting_send == 0
    assert asyncop.Channel[int](math.inf).statistics().max_buffer_size == math.inf


@pytest.mark.asyncop
async def test_cancelled_channel_waiters_leave_the_counts_at_once(
    autojump_clock: VirtualClock,
) -> None:
    channel = asyncop.Channel[int](0)

    async def send() -> None:
        await channel.send_async(1)

    async def receive() -> None:
        await channel.recv_async()

    async with asyncop.scope() as s:
        senders = [s.spawn(send) for _ in range(2)]
        await wait_all_blocked()
        assert channel.statistics().tasks_waiting_send == 2
        senders[0].cancel()
        assert channel.statistics().tasks_waiting_send == 1
        assert channel.try_recv() == 1  # from the live sender
        assert channel.statistics().tasks_waiting_send == 0
    async with asyncop.scope() as s:
        receivers = [s.spawn(receive) for _ in range(2)]
        await wait_all_blocked()
        assert channel.statistics().tasks_waiting_receive == 2
        receivers[1].cancel()
        assert channel.statistics().tasks_waiting_receive == 1
        channel.try_send(5)
        assert channel.statistics().tasks_waiting_receive == 0
    assert [op.state for op in receivers] == [OperationState.COMPLETED, OperationState.CANCELLED]
