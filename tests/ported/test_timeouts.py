"""Timeouts and deadlines, ported from trio's timeout cases and asyncio's
``asyncio.timeout`` cases.

Mapping: ``trio.fail_after(t)`` / ``asyncio.timeout(t)`` -> ``scope(timeout=t)``
(raises ``TimeoutError``); ``trio.move_on_after(t)`` -> the same scope with the
``TimeoutError`` caught and ``s.expired`` read; ``fail_at``/``move_on_at`` ->
``scope(deadline=...)``.
"""

from __future__ import annotations

import math
import threading

import pytest

import asyncop
from asyncop import Cancelled, OperationState
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


async def sleep_forever() -> None:
    await asyncop.sleep(math.inf)


async def nap(seconds: float) -> str:
    await asyncop.sleep(seconds)
    return "woke"


@pytest.mark.asyncop
async def test_sleep_takes_the_time_asked(autojump_clock: VirtualClock) -> None:
    t0 = asyncop.current_time()
    await asyncop.sleep(1.5)
    assert asyncop.current_time() - t0 == pytest.approx(1.5)


@pytest.mark.asyncop
async def test_sleep_until(autojump_clock: VirtualClock) -> None:
    target = asyncop.current_time() + 7
    await asyncop.sleep_until(target)
    assert asyncop.current_time() == pytest.approx(target)


@pytest.mark.asyncop
async def test_sleep_until_in_the_past_returns_at_once(autojump_clock: VirtualClock) -> None:
    await asyncop.sleep(5)
    await asyncop.sleep_until(1)
    assert asyncop.current_time() == 5


@pytest.mark.asyncop
async def test_negative_sleep_is_zero(autojump_clock: VirtualClock) -> None:
    await asyncop.sleep(-3)
    assert asyncop.current_time() == 0


@pytest.mark.asyncop
async def test_bad_sleep_values_raise(autojump_clock: VirtualClock) -> None:
    with pytest.raises(ValueError):
        await asyncop.sleep(math.nan)
    with pytest.raises(TypeError):
        await asyncop.sleep("1")  # type: ignore[arg-type]


@pytest.mark.asyncop
async def test_sleep_inf_with_a_timeout(autojump_clock: VirtualClock) -> None:
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=3):
            await asyncop.sleep(math.inf)
    assert asyncop.current_time() == 3


@pytest.mark.asyncop
async def test_fail_after_raises_at_the_timeout(autojump_clock: VirtualClock) -> None:
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=1):
            await asyncop.sleep(2)
    assert asyncop.current_time() == 1


@pytest.mark.asyncop
async def test_move_on_after_style(autojump_clock: VirtualClock) -> None:
    reached: list[str] = []
    try:
        async with asyncop.scope(timeout=1) as s:
            await asyncop.sleep(2)
            reached.append("no")
    except TimeoutError:
        reached.append("timed out")
    assert s.expired
    assert reached == ["timed out"]


@pytest.mark.asyncop
async def test_no_timeout_when_body_finishes_first(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope(timeout=2) as s:
        await asyncop.sleep(1)
    assert not s.expired
    await asyncop.sleep(5)  # the old deadline must not fire later
    assert asyncop.current_time() == 6


@pytest.mark.asyncop
async def test_deadline_in_the_past_fires_at_first_await(autojump_clock: VirtualClock) -> None:
    await asyncop.sleep(10)
    log: list[str] = []
    with pytest.raises(TimeoutError):
        async with asyncop.scope(deadline=5):
            log.append("entered")
            await asyncop.sleep(1)
    assert log == ["entered"]
    assert asyncop.current_time() == 10


@pytest.mark.asyncop
async def test_zero_timeout_fires_at_first_await(autojump_clock: VirtualClock) -> None:
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=0):
            await asyncop.checkpoint()


@pytest.mark.asyncop
async def test_negative_timeout_is_zero(autojump_clock: VirtualClock) -> None:
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=-1):
            await asyncop.sleep(1)
    assert asyncop.current_time() == 0


@pytest.mark.asyncop
async def test_expired_timeout_with_no_await_does_not_raise(autojump_clock: VirtualClock) -> None:
    # trio: move_on_after(0) around code with no checkpoint does nothing visible.
    async with asyncop.scope(timeout=0) as s:
        x = 1 + 1
    assert x == 2
    assert not s.expired or s.state is not OperationState.FAILED


@pytest.mark.asyncop
async def test_bad_timeouts_raise_before_anything(autojump_clock: VirtualClock) -> None:
    with pytest.raises(ValueError):
        async with asyncop.scope(timeout=math.nan):
            pass
    with pytest.raises(TypeError):
        async with asyncop.scope(timeout="5"):  # type: ignore[arg-type]
            pass


@pytest.mark.asyncop
async def test_infinite_timeout_means_no_limit(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope(timeout=math.inf) as s:
        await asyncop.sleep(1e6)
    assert not s.expired
    async with asyncop.scope(deadline=1e300):
        await asyncop.sleep(1)


@pytest.mark.asyncop
async def test_timeout_and_deadline_together(autojump_clock: VirtualClock) -> None:
    # the earlier of the two wins (or the call refuses both)
    try:
        async with asyncop.scope(timeout=5, deadline=2):
            await asyncop.sleep(10)
    except TimeoutError:
        assert asyncop.current_time() == 2
    except (TypeError, ValueError):
        pass


@pytest.mark.asyncop
async def test_move_deadline_later(autojump_clock: VirtualClock) -> None:
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=1) as s:
            await asyncop.sleep(0.5)
            s.deadline = asyncop.current_time() + 2
            await asyncop.sleep(10)
    assert asyncop.current_time() == 2.5


@pytest.mark.asyncop
async def test_move_deadline_earlier(autojump_clock: VirtualClock) -> None:
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=10) as s:
            s.deadline = asyncop.current_time() + 1
            await asyncop.sleep(10)
    assert asyncop.current_time() == 1


@pytest.mark.asyncop
async def test_remove_deadline(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope(timeout=1) as s:
        s.deadline = None
        await asyncop.sleep(5)
    assert not s.expired


@pytest.mark.asyncop
async def test_set_deadline_on_a_scope_without_one(autojump_clock: VirtualClock) -> None:
    with pytest.raises(TimeoutError):
        async with asyncop.scope() as s:
            assert s.deadline is None
            s.deadline = asyncop.current_time() + 3
            await sleep_forever()
    assert asyncop.current_time() == 3


@pytest.mark.asyncop
async def test_move_deadline_into_the_past_fires_at_once(autojump_clock: VirtualClock) -> None:
    await asyncop.sleep(5)
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=10) as s:
            s.deadline = 1
            await asyncop.sleep(1)
    assert asyncop.current_time() == 5


@pytest.mark.asyncop
async def test_deadline_property_reads_back(autojump_clock: VirtualClock) -> None:
    await asyncop.sleep(3)
    async with asyncop.scope(timeout=4) as s:
        assert s.deadline == pytest.approx(7)
    async with asyncop.scope(deadline=9) as s2:
        assert s2.deadline == pytest.approx(9)


@pytest.mark.asyncop
async def test_inner_timeout_shorter(autojump_clock: VirtualClock) -> None:
    log: list[str] = []
    async with asyncop.scope(timeout=10) as outer:
        try:
            async with asyncop.scope(timeout=1):
                await asyncop.sleep(5)
        except TimeoutError:
            log.append("inner")
        await asyncop.sleep(1)
    assert log == ["inner"]
    assert not outer.expired
    assert asyncop.current_time() == 2


@pytest.mark.asyncop
async def test_outer_timeout_shorter(autojump_clock: VirtualClock) -> None:
    log: list[str] = []
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=1):
            try:
                async with asyncop.scope(timeout=5) as inner:
                    await asyncop.sleep(10)
            except TimeoutError:
                log.append("inner wrongly timed out")
            except Cancelled:
                log.append("inner let cancel pass")
                raise
    assert log == ["inner let cancel pass"]
    assert not inner.expired
    assert asyncop.current_time() == 1


@pytest.mark.asyncop
async def test_same_instant_outer_wins(autojump_clock: VirtualClock) -> None:
    log: list[str] = []
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=1):
            try:
                async with asyncop.scope(timeout=1):
                    await asyncop.sleep(10)
            except TimeoutError:
                log.append("inner")
    assert log == []


@pytest.mark.asyncop
async def test_timeout_error_is_chained_from_cancelled(autojump_clock: VirtualClock) -> None:
    with pytest.raises(TimeoutError) as info:
        async with asyncop.scope(timeout=1):
            await asyncop.sleep(2)
    assert isinstance(info.value.__cause__, Cancelled)


@pytest.mark.asyncop
async def test_error_in_body_wins_over_timeout(autojump_clock: VirtualClock) -> None:
    # asyncio test_foreign_exception_passed
    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope(timeout=5):
            await asyncop.sleep(1)
            raise KeyError("x")
    assert isinstance(info.value.exceptions[0], KeyError)


@pytest.mark.asyncop
async def test_error_raised_while_handling_timeout_cancel(autojump_clock: VirtualClock) -> None:
    # asyncio test_foreign_exception_on_timeout: the body turns the cancel into an error.
    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope(timeout=1):
            try:
                await asyncop.sleep(2)
            except Cancelled:
                raise KeyError("during cancel") from None
    assert isinstance(info.value.exceptions[0], KeyError)


@pytest.mark.asyncop
async def test_outside_cancel_is_not_a_timeout(autojump_clock: VirtualClock) -> None:
    # asyncio test_foreign_cancel_doesnt_timeout_if_not_expired
    async def runner() -> None:
        async with asyncop.scope(timeout=10):
            await sleep_forever()

    async with asyncop.scope() as s:
        op = s.spawn(runner)
        await wait_all_blocked()
        op.cancel()
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_timeout_cancels_children(autojump_clock: VirtualClock) -> None:
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=1) as s:
            kid = s.spawn(sleep_forever)
    assert kid.state is OperationState.CANCELLED
    assert asyncop.current_time() == 1


@pytest.mark.asyncop
async def test_timeout_interrupting_only_a_child(autojump_clock: VirtualClock) -> None:
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=1) as s:
            s.spawn(sleep_forever)


@pytest.mark.asyncop
async def test_shielded_child_outlives_the_timeout(autojump_clock: VirtualClock) -> None:
    log: list[str] = []
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=1):
            async with asyncop.scope(shield=True):
                await asyncop.sleep(3)
                log.append("shielded done")
            await asyncop.sleep(1)
    assert log == ["shielded done"]
    assert asyncop.current_time() == 3


@pytest.mark.asyncop
async def test_timeout_helper_leaves_the_operation_running(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        op = s.spawn(nap, 5)
        with pytest.raises(TimeoutError):
            await asyncop.timeout(1, op)
        assert not op.done
        assert await asyncop.timeout(10, op) == "woke"


@pytest.mark.asyncop
@pytest.mark.parametrize("no_limit", [None, math.inf])
async def test_timeout_with_no_limit_waits_as_long_as_it_takes(
    autojump_clock: VirtualClock, no_limit: float | None
) -> None:
    # As asyncio.wait_for(aw, None), and as move_on_after(None).
    async with asyncop.scope() as s:
        op = s.spawn(nap, 10_000)
        assert await asyncop.timeout(no_limit, op) == "woke"
        assert asyncop.current_time() == 10_000


@pytest.mark.asyncop
async def test_race_gives_the_first(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        slow = s.spawn(nap, 5)
        fast = s.spawn(nap, 1)
        first = await asyncop.race(slow, fast)
        assert first is fast
        assert not slow.done
        slow.cancel()


@pytest.mark.asyncop
async def test_select_cancels_losers(autojump_clock: VirtualClock) -> None:
    ch: asyncop.Channel[int] = asyncop.Channel(1)
    index, _value = await asyncop.select(asyncop.sleep(1), ch.recv_async())
    assert index == 0
    ch.try_send(5)
    assert ch.try_recv() == 5  # the losing receive took nothing


@pytest.mark.asyncop
async def test_select_value_from_channel(autojump_clock: VirtualClock) -> None:
    ch: asyncop.Channel[int] = asyncop.Channel(1)
    ch.try_send(9)
    assert await asyncop.select(asyncop.sleep(1), ch.recv_async()) == (1, 9)


@pytest.mark.asyncop
async def test_operation_deadline(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        op = s.spawn(sleep_forever)
        op.deadline = asyncop.current_time() + 2
    assert op.state is OperationState.CANCELLED
    assert op.expired
    assert asyncop.current_time() == 2


@pytest.mark.asyncop
async def test_current_time_is_monotonic(autojump_clock: VirtualClock) -> None:
    times = []
    for _ in range(5):
        times.append(asyncop.current_time())
        await asyncop.sleep(0.1)
    assert times == sorted(times)


@pytest.mark.asyncop
async def test_timers_fire_in_deadline_order(autojump_clock: VirtualClock) -> None:
    order: list[int] = []

    async def sleeper(i: int, d: float) -> None:
        await asyncop.sleep(d)
        order.append(i)

    async with asyncop.scope() as s:
        for i, d in enumerate([3, 1, 2, 1, 0.5]):
            s.spawn(sleeper, i, d)
    assert order == [4, 1, 3, 2, 0]


def test_wait_with_timeout_from_a_thread(vruntime: asyncop.Runtime) -> None:
    op = vruntime.spawn(sleep_forever)
    with pytest.raises(TimeoutError):
        op.wait(0.01)
    op.cancel()
    assert op.wait(5).state is OperationState.CANCELLED


@pytest.mark.parametrize("value", [-1, 0, -math.inf])
def test_negative_thread_timeouts_only_look(value: float) -> None:
    lock = asyncop.Lock()
    lock.acquire()
    sem = asyncop.Semaphore(0)
    ev = asyncop.Event()
    ch: asyncop.Channel[int] = asyncop.Channel(0)
    holder: list[bool] = []

    def other_thread() -> None:
        holder.append(lock.acquire(value))

    t = threading.Thread(target=other_thread)
    t.start()
    t.join(5)
    assert holder == [False]
    assert sem.acquire(value) is False
    assert ev.wait(value) is False
    with pytest.raises(TimeoutError):
        ch.recv(timeout=value)
    with pytest.raises(TimeoutError):
        ch.send(1, timeout=value)


@pytest.mark.parametrize("value", [math.nan, "1"])
def test_bad_thread_timeouts_raise_before_anything(value: object) -> None:
    sem = asyncop.Semaphore(1)
    ch: asyncop.Channel[int] = asyncop.Channel(1)
    error = ValueError if isinstance(value, float) else TypeError
    with pytest.raises(error):
        sem.acquire(value)  # type: ignore[arg-type]
    assert sem.value == 1
    with pytest.raises(error):
        ch.send(1, timeout=value)  # type: ignore[arg-type]
    assert len(ch) == 0
    with pytest.raises(error):
        asyncop.Event().wait(value)  # type: ignore[arg-type]
