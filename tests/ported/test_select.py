"""``select``, ``race`` and ``timeout(op)``, ported from asyncio's ``wait``/
``wait_for`` cases and trio's "first of several" patterns, plus trio's
sticky-deadline and channel-fairness cases.
"""

from __future__ import annotations

import math

import pytest

import asyncop
from asyncop import Cancelled, Channel, WouldBlock
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


async def nap(seconds: float) -> float:
    await asyncop.sleep(seconds)
    return seconds


@pytest.mark.asyncop
async def test_timeout_zero_on_a_finished_operation_gives_its_value(
    autojump_clock: VirtualClock,
) -> None:
    # asyncio test_wait_for_timeout_less_then_0_or_0_future_done
    async with asyncop.scope() as s:
        op = s.spawn(nap, 1)
        await op
        assert await asyncop.timeout(0, op) == 1
        assert await asyncop.timeout(-1, op) == 1


@pytest.mark.asyncop
async def test_timeout_zero_on_a_running_operation_raises(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        op = s.spawn(nap, 1)
        with pytest.raises(TimeoutError):
            await asyncop.timeout(0, op)
        assert await op == 1


@pytest.mark.asyncop
async def test_timeout_passes_the_operation_error(autojump_clock: VirtualClock) -> None:
    async def bad() -> None:
        await asyncop.sleep(1)
        raise KeyError("x")

    async with asyncop.scope() as s:
        op = s.spawn(bad, supervise=True)
        with pytest.raises(KeyError):
            await asyncop.timeout(5, op)


@pytest.mark.asyncop
async def test_race_with_finished_operation(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        done = s.spawn(nap, 0)
        await done
        slow = s.spawn(nap, 10)
        assert await asyncop.race(slow, done) is done
        slow.cancel()


@pytest.mark.asyncop
async def test_race_and_select_need_arguments(autojump_clock: VirtualClock) -> None:
    with pytest.raises((TypeError, ValueError)):
        await asyncop.race()
    with pytest.raises((TypeError, ValueError)):
        await asyncop.select()


@pytest.mark.asyncop
async def test_select_two_ready_picks_one_and_leaves_the_other(
    autojump_clock: VirtualClock,
) -> None:
    a: Channel[str] = Channel(1)
    b: Channel[str] = Channel(1)
    a.try_send("a")
    b.try_send("b")
    index, value = await asyncop.select(a.recv_async(), b.recv_async())
    assert (index, value) in ((0, "a"), (1, "b"))
    left = b if index == 0 else a
    assert left.try_recv() in ("a", "b")


@pytest.mark.asyncop
async def test_select_losing_lock_is_not_taken(autojump_clock: VirtualClock) -> None:
    lock = asyncop.Lock()
    ev = asyncop.Event()
    ev.set()
    done = asyncop.Event()

    async def holder() -> None:
        async with lock:
            await done.wait_async()

    async with asyncop.scope() as s:
        s.spawn(holder)
        await wait_all_blocked()
        index, _ = await asyncop.select(lock.lock_async(), ev.wait_async())
        assert index == 1
        done.set()
    assert not lock.locked()


@pytest.mark.asyncop
async def test_select_losing_semaphore_takes_no_permit(autojump_clock: VirtualClock) -> None:
    sem = asyncop.Semaphore(0)

    async def releaser() -> None:
        await asyncop.sleep(2)
        sem.release()

    async with asyncop.scope() as s:
        s.spawn(releaser)
        index, _ = await asyncop.select(sem.acquire_async(), asyncop.sleep(1))
        assert index == 1
    assert sem.value == 1


@pytest.mark.asyncop
async def test_cancelled_select_takes_nothing(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(1)

    async def selector() -> None:
        await asyncop.select(ch.recv_async(), asyncop.sleep(100))

    async with asyncop.scope() as s:
        op = s.spawn(selector)
        await wait_all_blocked()
        op.cancel()
    ch.try_send(3)
    assert ch.try_recv() == 3


@pytest.mark.asyncop
async def test_select_on_an_operation(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        op = s.spawn(nap, 1)
        assert await asyncop.select(op, asyncop.sleep(5)) == (0, 1)


@pytest.mark.asyncop
async def test_rendezvous_item_cannot_be_stolen(autojump_clock: VirtualClock) -> None:
    # trio test_channel_fairness: a woken receiver's item is handed to it directly
    ch: Channel[int] = Channel(0)

    async def receiver() -> int:
        return await ch.recv_async()

    async with asyncop.scope() as s:
        op = s.spawn(receiver)
        await wait_all_blocked()
        ch.try_send(1)
        with pytest.raises(WouldBlock):
            ch.try_recv()
    assert op.result() == 1


@pytest.mark.asyncop
async def test_expired_scope_stays_cancelled_when_deadline_moves_later(
    autojump_clock: VirtualClock,
) -> None:
    # trio: once a cancel scope's deadline fired, the cancel is sticky.
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=1) as s:
            async with asyncop.scope(shield=True):
                await asyncop.sleep(2)
            assert s.expired
            s.deadline = asyncop.current_time() + 10
            await asyncop.sleep(1)
    assert asyncop.current_time() == 2


@pytest.mark.asyncop
async def test_deadline_setter_validates(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        with pytest.raises(ValueError):
            s.deadline = math.nan
        with pytest.raises(TypeError):
            s.deadline = "soon"  # type: ignore[assignment]
        s.deadline = math.inf
        await asyncop.sleep(1)
    assert not s.expired


@pytest.mark.asyncop
async def test_cancel_inside_select_body_level_triggered(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        s.cancel()
        with pytest.raises(Cancelled):
            await asyncop.select(asyncop.sleep(1), asyncop.Event().wait_async())
