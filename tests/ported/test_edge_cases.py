"""Finer cases from asyncio's lock/condition/semaphore/queue suites, trio's
memory-channel close rules, anyio's task-group edge cases, and trio's
thread and testing helpers, on asyncop.
"""

from __future__ import annotations

import threading
import time

import pytest

import asyncop
from asyncop import (
    Cancelled,
    Channel,
    ClosedResourceError,
    EndOfChannel,
    OperationState,
    WouldBlock,
)
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


class Boom(Exception):
    """A failure raised on purpose."""


async def sleep_forever() -> None:
    await asyncop.sleep(float("inf"))


# ---------------------------------------------------------------- Lock / Semaphore


@pytest.mark.asyncop
async def test_lock_stays_locked_when_handed_to_a_waiter(autojump_clock: VirtualClock) -> None:
    # trio test_Lock: release with a waiter hands the lock over at once
    lock = asyncop.Lock()

    async def waiter() -> None:
        async with lock:
            await asyncop.sleep(1)

    async with asyncop.scope() as s:
        guard = await lock.lock_async()
        s.spawn(waiter)
        await wait_all_blocked()
        guard.release()
        assert lock.locked()  # already the waiter's: no newcomer can barge in
    assert not lock.locked()


@pytest.mark.asyncop
async def test_lock_acquire_with_zero_timeout_from_thread(autojump_clock: VirtualClock) -> None:
    lock = asyncop.Lock()
    results: list[bool] = []
    async with lock:
        t = threading.Thread(target=lambda: results.append(lock.acquire(0)))
        t.start()
        t.join()
    assert results == [False]


@pytest.mark.asyncop
async def test_semaphore_handed_over_then_cancelled_is_given_back(
    autojump_clock: VirtualClock,
) -> None:
    # asyncio test_acquire_hang: release, then cancel the woken waiter in the same
    # instant; the permit must reach the other waiter (here through async with).
    sem = asyncop.Semaphore(0)
    got: list[str] = []

    async def taker(name: str) -> None:
        async with sem:
            got.append(name)
            await asyncop.sleep(1)

    async with asyncop.scope() as s:
        a = s.spawn(taker, "a")
        await wait_all_blocked()
        s.spawn(taker, "b")
        await wait_all_blocked()
        sem.release()
        a.cancel()
    assert "b" in got
    assert sem.value == 1


@pytest.mark.asyncop
async def test_semaphore_release_from_a_thread_wakes_a_task(autojump_clock: VirtualClock) -> None:
    sem = asyncop.Semaphore(0)

    async with asyncop.scope() as s:
        s.spawn(lambda: sem.release())
        await sem.acquire_async()


@pytest.mark.asyncop
async def test_bounded_semaphore_release_past_max_keeps_value(
    autojump_clock: VirtualClock,
) -> None:
    sem = asyncop.Semaphore(2, max_value=2)
    await sem.acquire_async()
    sem.release()
    with pytest.raises(ValueError):
        sem.release()
    assert sem.value == 2


# ---------------------------------------------------------------- Condition


@pytest.mark.asyncop
async def test_condition_cancel_while_reacquiring_waits_for_the_lock(
    autojump_clock: VirtualClock,
) -> None:
    # asyncio test_cancelled_error_re_aquire: notified, cancelled while the lock is
    # still held elsewhere; the waiter must still hold the lock when it leaves.
    cond = asyncop.Condition()
    log: list[str] = []

    async def waiter() -> None:
        async with cond:
            try:
                await cond.wait_async()
            except Cancelled:
                log.append(f"cancelled holding={cond.locked()} at={asyncop.current_time()}")
                raise

    async with asyncop.scope() as s:
        op = s.spawn(waiter)
        await wait_all_blocked()
        async with cond:
            cond.notify()
            await asyncop.sleep(0.5)
            op.cancel()
            await asyncop.sleep(0.5)
    assert log == ["cancelled holding=True at=1.0"]
    assert not cond.locked()


@pytest.mark.asyncop
async def test_notify_more_than_waiting(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()
    woken: list[int] = []

    async def waiter(i: int) -> None:
        async with cond:
            await cond.wait_async()
            woken.append(i)

    async with asyncop.scope() as s:
        for i in range(2):
            s.spawn(waiter, i)
        await wait_all_blocked()
        async with cond:
            cond.notify(10)
    assert sorted(woken) == [0, 1]


@pytest.mark.asyncop
async def test_condition_notify_from_thread(autojump_clock: VirtualClock) -> None:
    cond = asyncop.Condition()

    def notifier() -> None:
        with cond:
            cond.notify_all()

    async with asyncop.scope() as s, cond:
        s.spawn(notifier)
        await cond.wait_async()
        assert cond.locked()


# ---------------------------------------------------------------- Channel (queue-like)


@pytest.mark.asyncop
async def test_receive_unblocks_a_waiting_sender(autojump_clock: VirtualClock) -> None:
    # asyncio test_get_with_putters
    ch: Channel[int] = Channel(1)
    ch.try_send(1)
    sent: list[int] = []

    async def sender() -> None:
        await ch.send_async(2)
        sent.append(2)

    async with asyncop.scope() as s:
        s.spawn(sender)
        await wait_all_blocked()
        assert ch.try_recv() == 1
        await wait_all_blocked()
        assert sent == [2]
        assert ch.try_recv() == 2


@pytest.mark.asyncop
async def test_try_recv_takes_from_a_blocked_rendezvous_sender(
    autojump_clock: VirtualClock,
) -> None:
    ch: Channel[int] = Channel(0)
    with pytest.raises(WouldBlock):
        ch.try_recv()

    async def sender() -> None:
        await ch.send_async(5)

    async with asyncop.scope() as s:
        op = s.spawn(sender)
        await wait_all_blocked()
        assert ch.try_recv() == 5
    assert op.state is OperationState.COMPLETED


@pytest.mark.asyncop
async def test_closing_my_receiver_end_wakes_my_blocked_receive(
    autojump_clock: VirtualClock,
) -> None:
    # trio test_close_basics: closing an end wakes the tasks blocked on that end
    # with ClosedResourceError.
    ch: Channel[int] = Channel(0)
    rx = ch.receiver()
    keep = ch.sender()
    errors: list[str] = []

    async def receiver() -> None:
        try:
            await rx.recv_async()
        except (ClosedResourceError, EndOfChannel) as exc:
            errors.append(type(exc).__name__)

    async with asyncop.scope(timeout=10) as s:
        s.spawn(receiver)
        await wait_all_blocked()
        rx.close()
    assert errors == ["ClosedResourceError"]
    keep.close()


@pytest.mark.asyncop
async def test_closing_my_sender_end_wakes_my_blocked_send(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(0)
    tx = ch.sender()
    keep = ch.receiver()
    errors: list[str] = []

    async def sender() -> None:
        try:
            await tx.send_async(1)
        except ClosedResourceError as exc:
            errors.append(type(exc).__name__)

    async with asyncop.scope(timeout=10) as s:
        s.spawn(sender)
        await wait_all_blocked()
        tx.close()
    assert errors == ["ClosedResourceError"]
    with pytest.raises(EndOfChannel):  # tx was the last sender
        keep.try_recv()


@pytest.mark.asyncop
async def test_closing_one_receiver_clone_wakes_its_blocked_receive(
    autojump_clock: VirtualClock,
) -> None:
    # trio test_close_multiple_receive_handles: a receive blocked on an end that is
    # closed raises ClosedResourceError, even while other receiver ends stay open.
    ch: Channel[int] = Channel(0)
    rx = ch.receiver()
    other = rx.clone()
    tx = ch.sender()
    errors: list[str] = []

    async def receiver() -> None:
        try:
            await rx.recv_async()
            errors.append("received through a closed end")
        except ClosedResourceError:
            errors.append("ClosedResourceError")

    async with asyncop.scope(timeout=10) as s:
        s.spawn(receiver)
        await wait_all_blocked()
        rx.close()
        await wait_all_blocked()
        with pytest.raises(WouldBlock):
            tx.try_send(1)  # nobody open is waiting
    assert errors == ["ClosedResourceError"]
    other.close()
    tx.close()


@pytest.mark.asyncop
async def test_closing_one_sender_clone_wakes_its_blocked_send(
    autojump_clock: VirtualClock,
) -> None:
    ch: Channel[int] = Channel(0)
    tx = ch.sender()
    other = tx.clone()
    rx = ch.receiver()
    errors: list[str] = []

    async def sender() -> None:
        try:
            await tx.send_async(1)
            errors.append("sent through a closed end")
        except ClosedResourceError:
            errors.append("ClosedResourceError")

    async with asyncop.scope(timeout=10) as s:
        s.spawn(sender)
        await wait_all_blocked()
        tx.close()
        await wait_all_blocked()
        with pytest.raises(WouldBlock):
            rx.try_recv()  # the closed end's item must not arrive
    assert errors == ["ClosedResourceError"]
    other.close()
    rx.close()


@pytest.mark.asyncop
async def test_ends_of_a_closed_channel(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(1)
    ch.try_send(1)
    ch.close()
    rx = ch.receiver()
    assert rx.try_recv() == 1
    with pytest.raises(EndOfChannel):
        rx.try_recv()
    tx = ch.sender()
    with pytest.raises(ClosedResourceError):
        tx.try_send(1)


@pytest.mark.asyncop
async def test_send_on_rendezvous_after_receiver_cancelled(autojump_clock: VirtualClock) -> None:
    # asyncio test_cancelled_getters_not_being_held_in_self_getters
    ch: Channel[int] = Channel(0)

    async def receiver() -> None:
        await ch.recv_async()

    async with asyncop.scope() as s:
        op = s.spawn(receiver)
        await wait_all_blocked()
        op.cancel()
        await wait_all_blocked()
        with pytest.raises(WouldBlock):
            ch.try_send(1)


# ---------------------------------------------------------------- task-group edges (anyio)


@pytest.mark.asyncop
async def test_cancel_while_scope_waits_for_children(autojump_clock: VirtualClock) -> None:
    # anyio test_cancel_exiting_task_group
    async def runner() -> None:
        async with asyncop.scope() as s:
            s.spawn(sleep_forever)
        # the body ended; the exit waits for the child

    async with asyncop.scope() as outer:
        op = outer.spawn(runner)
        await wait_all_blocked()
        op.cancel()
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_error_from_child_while_body_waits_at_exit(autojump_clock: VirtualClock) -> None:
    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as s:
            s.spawn(sleep_forever)

            async def late() -> None:
                await asyncop.sleep(1)
                raise Boom("late")

            s.spawn(late)
    assert [type(e) for e in info.value.exceptions] == [Boom]


@pytest.mark.asyncop
async def test_triple_nested_shield(autojump_clock: VirtualClock) -> None:
    # anyio test_triple_nested_shield: outer -> shield -> middle -> shield
    log: list[str] = []
    async with asyncop.scope() as outer:
        async with asyncop.scope(shield=True):
            async with asyncop.scope() as middle:
                async with asyncop.scope(shield=True):
                    outer.cancel()
                    middle.cancel()
                    await asyncop.sleep(1)
                    log.append("inner shield ran")
                with pytest.raises(Cancelled):
                    await asyncop.sleep(1)
                log.append("middle saw its cancel")
            await asyncop.sleep(1)  # the outer cancel is kept out by the shield
            log.append("outer shield ran")
        with pytest.raises(Cancelled):
            await asyncop.sleep(1)
        log.append("outer saw its cancel")
    assert log == [
        "inner shield ran",
        "middle saw its cancel",
        "outer shield ran",
        "outer saw its cancel",
    ]
    assert asyncop.current_time() == 2


@pytest.mark.asyncop
async def test_cancel_from_shielded_scope_itself(autojump_clock: VirtualClock) -> None:
    # anyio test_cancel_from_shielded_scope
    async with asyncop.scope(shield=True) as s:
        s.cancel()
        with pytest.raises(Cancelled):
            await asyncop.checkpoint()
    await asyncop.checkpoint()  # the cancel stopped at that scope


@pytest.mark.asyncop
async def test_scope_in_async_generator(autojump_clock: VirtualClock) -> None:
    async def gen():  # type: ignore[no-untyped-def]
        async with asyncop.scope() as s:
            s.spawn(asyncop_nap, 1)
            yield 1
            yield 2

    got = [x async for x in gen()]
    assert got == [1, 2]


async def asyncop_nap(seconds: float) -> None:
    await asyncop.sleep(seconds)


@pytest.mark.asyncop
async def test_cancel_propagation_with_inner_spawn(autojump_clock: VirtualClock) -> None:
    # anyio test_cancel_propagation_with_inner_spawn
    async def g() -> None:
        async with asyncop.scope() as s:
            s.spawn(sleep_forever)
            await sleep_forever()

    async with asyncop.scope() as s:
        s.spawn(g)
        await wait_all_blocked()
        s.cancel()
    assert s.children() == []


@pytest.mark.asyncop
async def test_exception_group_from_nested_failures_in_body_and_child(
    autojump_clock: VirtualClock,
) -> None:
    async def inner() -> None:
        async with asyncop.scope() as s:
            s.spawn(crash, KeyError("a"))
            await sleep_forever()

    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as s:
            s.spawn(inner)
            s.spawn(crash, ValueError("b"))
    names = sorted(type(e).__name__ for e in _leaves(info.value))
    assert names in (["KeyError", "ValueError"], ["KeyError"], ["ValueError"])


async def crash(exc: BaseException) -> None:
    await asyncop.sleep(1)
    raise exc


def _leaves(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in group.exceptions:
            out.extend(_leaves(inner))
        return out
    return [group]


# ---------------------------------------------------------------- threads (trio to_thread)


def test_spawn_blocking_returns_and_raises(vruntime: asyncop.Runtime) -> None:
    def ok(x: int) -> int:
        return x + 1

    def bad() -> None:
        raise Boom("thread")

    async def main() -> int:
        with pytest.raises(Boom):
            await asyncop.spawn_blocking(bad)
        return await asyncop.spawn_blocking(ok, 1)

    assert vruntime.run(main) == 2


def test_spawn_blocking_cancel_waits_and_keeps_value(runtime: asyncop.Runtime) -> None:
    # trio to_thread.run_sync without abandon: the cancel waits for the thread.
    release = threading.Event()
    log: list[str] = []

    def blocker() -> str:
        release.wait(10)
        log.append("thread done")
        return "value"

    async def child() -> None:
        log.append(await asyncop.spawn_blocking(blocker))
        await asyncop.checkpoint()
        log.append("not reached")

    async def main() -> OperationState:
        async with asyncop.scope() as s:
            op = s.spawn(child)
            await asyncop.sleep(0.05)
            op.cancel()
            await asyncop.sleep(0.05)
            assert not op.done
            release.set()
        return op.state

    assert runtime.run(main) is OperationState.CANCELLED
    assert log == ["thread done", "value"]


def test_spawn_blocking_abandon_wakes_at_once(runtime: asyncop.Runtime) -> None:
    release = threading.Event()

    def blocker() -> str:
        release.wait(10)
        return "late"

    async def child() -> str:
        return await asyncop.spawn_blocking(blocker, abandon=True)

    async def main() -> OperationState:
        async with asyncop.scope() as s:
            op = s.spawn(child)
            await asyncop.sleep(0.05)
            op.cancel()
        return op.state

    try:
        assert runtime.run(main) is OperationState.CANCELLED
    finally:
        release.set()


def test_current_operation_in_spawn_blocking_thread(vruntime: asyncop.Runtime) -> None:
    async def main() -> bool:
        me = asyncop.current_operation()
        seen = await asyncop.spawn_blocking(asyncop.current_operation)
        return seen is None or seen is me or seen.parent is me

    # None (a plain thread, as trio's to_thread), the task, or a node under it.
    assert vruntime.run(main)


# ---------------------------------------------------------------- testing helpers (trio)


@pytest.mark.asyncop
async def test_wait_all_blocked_waits_for_a_chain_of_wakeups(autojump_clock: VirtualClock) -> None:
    # trio test_wait_all_tasks_blocked
    log: list[int] = []

    async def relay(i: int, inbox: asyncop.Event, outbox: asyncop.Event) -> None:
        await inbox.wait_async()
        log.append(i)
        outbox.set()

    events = [asyncop.Event() for _ in range(6)]
    async with asyncop.scope() as s:
        for i in range(5):
            s.spawn(relay, i, events[i], events[i + 1])
        await wait_all_blocked()
        assert log == []
        events[0].set()
        await wait_all_blocked()
        assert log == [0, 1, 2, 3, 4]


@pytest.mark.asyncop
async def test_wait_all_blocked_does_not_return_while_a_thread_call_runs(
    autojump_clock: VirtualClock,
) -> None:
    done: list[str] = []

    async def child() -> None:
        await asyncop.spawn_blocking(time.sleep, 0.05)
        done.append("child")

    async with asyncop.scope() as s:
        s.spawn(child)
        await asyncop.checkpoint()
        await wait_all_blocked()
        assert done == ["child"]


def test_virtual_clock_advance_by_hand() -> None:
    clock = VirtualClock(autojump=False)
    with pytest.raises(ValueError):
        clock.advance(-1)

    async def nap() -> float:
        await asyncop.sleep(10)
        return asyncop.current_time()

    with asyncop.Runtime(1, clock=clock) as rt:
        op = rt.spawn(nap)
        deadline = time.monotonic() + 10
        while rt.registrations() == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        clock.advance(9.5)
        time.sleep(0.02)
        assert not op.done
        clock.advance(0.5)
        assert op.wait(5).value == 10


def test_virtual_clock_start_value() -> None:
    clock = VirtualClock(autojump=True, start=100.0)

    async def main() -> float:
        await asyncop.sleep(1)
        return asyncop.current_time()

    with asyncop.Runtime(1, clock=clock) as rt:
        assert rt.run(main) == 101.0
