"""Scopes as task groups and timeout blocks, ported from anyio's task group and
cancel scope cases, trio's cancel scope and ``start`` cases, and asyncio's task
group and timeout cases.

Differences that follow asyncop's rules: cancellation is level-triggered (an
``except Cancelled`` that awaits raises again, where asyncio lets it run); a
``Cancelled`` that meets two expired deadlines stops at the outer one, as in
trio (asyncio raises ``TimeoutError`` from both); an error from a block is
always grouped.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Callable

import pytest

import asyncop
from asyncop import Cancelled, OperationState, TaskStatus
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


class Custom(Exception):
    """A failure raised on purpose."""


async def sleep_forever() -> None:
    await asyncop.sleep_forever()


async def fail_in_finally(error: BaseException, delay: float) -> None:
    try:
        await asyncop.sleep(delay)
    finally:
        raise error


# ---------------------------------------------------------------- deadlines


@pytest.mark.asyncop
async def test_relative_deadline_counts_from_entry(autojump_clock: VirtualClock) -> None:
    cs = asyncop.move_on_after(5)
    await asyncop.sleep(3)
    start = asyncop.current_time()
    async with cs:
        assert cs.deadline == start + 5
        await asyncop.sleep(10)
    assert cs.cancelled_caught
    assert asyncop.current_time() == start + 5


@pytest.mark.asyncop
async def test_deadline_set_before_entry_is_kept(autojump_clock: VirtualClock) -> None:
    cs = asyncop.move_on_after(5)
    cs.deadline = 3
    assert cs.deadline == 3
    async with cs:
        await asyncop.sleep(10)
    assert asyncop.current_time() == 3
    assert cs.cancelled_caught


@pytest.mark.asyncop
async def test_zero_timeout_cancels_at_the_first_await(autojump_clock: VirtualClock) -> None:
    async with asyncop.move_on_after(0) as cs:
        await asyncop.sleep(0)
        pytest.fail("the first await should have raised")
    assert cs.cancelled_caught
    with pytest.raises(TimeoutError):
        async with asyncop.fail_after(-11):
            await asyncop.sleep(0)
    async with asyncop.fail_after(0) as cs:
        pass  # no await: nothing to interrupt
    assert not cs.cancelled_caught


@pytest.mark.asyncop
async def test_deadline_moved_later_inside_the_block(autojump_clock: VirtualClock) -> None:
    async with asyncop.fail_after(0.1) as cs:
        cs.deadline += 0.3
        await asyncop.sleep(0.2)
    assert not cs.cancelled_caught


@pytest.mark.asyncop
async def test_deadline_moved_back_and_forth_fires_once_at_the_last(
    autojump_clock: VirtualClock,
) -> None:
    async with asyncop.move_on_after(10) as cs:
        for i in range(100):
            cs.deadline = 5 + i % 3
        cs.deadline = 6
        await asyncop.sleep(100)
    assert cs.cancelled_caught
    assert asyncop.current_time() == 6


@pytest.mark.asyncop
async def test_deadline_of_minus_infinity_cancels_at_once(autojump_clock: VirtualClock) -> None:
    async with asyncop.move_on_after(10) as cs:
        cs.deadline = -math.inf
        await asyncop.checkpoint()
    assert cs.cancelled_caught


@pytest.mark.asyncop
async def test_deadline_and_a_sleep_ending_at_the_same_instant(
    autojump_clock: VirtualClock,
) -> None:
    async with asyncop.move_on_at(5) as cs:
        await asyncop.sleep_until(5)
        await asyncop.checkpoint()
    assert cs.cancelled_caught
    assert asyncop.current_time() == 5


@pytest.mark.asyncop
async def test_both_deadlines_passed_while_busy_the_outer_raises(
    autojump_clock: VirtualClock,
) -> None:
    log: list[str] = []
    with pytest.raises(TimeoutError):
        async with asyncop.fail_after(0.1):
            try:
                async with asyncop.fail_after(0.01):
                    autojump_clock.advance(0.1)  # busy past both deadlines
                    await asyncop.sleep(1)
            except Cancelled:
                log.append("inner let it pass")
                raise
    assert log == ["inner let it pass"]


@pytest.mark.asyncop
async def test_inner_deadline_passed_while_busy_then_the_outer(
    autojump_clock: VirtualClock,
) -> None:
    log: list[str] = []
    with pytest.raises(TimeoutError):
        async with asyncop.fail_after(0.1):
            try:
                async with asyncop.fail_after(0.01):
                    autojump_clock.advance(0.05)
                    await asyncop.sleep(1)
            except TimeoutError:
                log.append("inner")
            await asyncop.sleep(10)
    assert log == ["inner"]
    assert asyncop.current_time() == pytest.approx(0.1)


@pytest.mark.asyncop
async def test_fail_after_cancelled_by_hand_is_no_timeout(autojump_clock: VirtualClock) -> None:
    async with asyncop.fail_after(1) as cs:
        cs.cancel()
        await asyncop.checkpoint()
    assert cs.cancelled_caught
    async with asyncop.fail_after(0.1) as cs:
        cs.cancel()
        autojump_clock.advance(0.11)  # the deadline passes too, after the cancel
        await asyncop.sleep(0)
    assert cs.cancelled_caught


@pytest.mark.asyncop
async def test_outside_cancel_is_not_caught_by_a_timeout_block(
    autojump_clock: VirtualClock,
) -> None:
    async with asyncop.scope() as outer:
        async with asyncop.move_on_after(5) as cs:
            outer.cancel()
            await asyncop.sleep(1)
        pytest.fail("the outer cancel should have passed")
    assert not cs.cancelled_caught

    async def body() -> None:
        async with asyncop.fail_after(10):
            await asyncop.sleep_forever()

    async with asyncop.scope() as s:
        op = s.spawn(body)
        await wait_all_blocked()
        op.cancel()
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_timeout_over_a_group_whose_children_also_wait(
    autojump_clock: VirtualClock,
) -> None:
    with pytest.raises(TimeoutError):
        async with asyncop.fail_after(0.1), asyncop.scope() as group:
            group.spawn(sleep_forever)
            await asyncop.sleep(2)
    assert asyncop.current_time() == pytest.approx(0.1)


@pytest.mark.asyncop
async def test_fail_after_inside_a_scope_cancelled_from_a_sibling(
    autojump_clock: VirtualClock,
) -> None:
    async def killer(target: asyncop.AsyncOperation[None]) -> None:
        await wait_all_blocked()
        target.cancel()

    reached: list[str] = []
    async with asyncop.scope() as group:
        async with asyncop.scope() as target, asyncop.scope():
            group.spawn(killer, target)
            async with asyncop.fail_after(1):
                await asyncop.sleep(2)
                reached.append("1")
            reached.append("2")
        assert reached == []
    assert asyncop.current_time() == 0


@pytest.mark.asyncop
async def test_fail_after_under_a_shield_still_fires(autojump_clock: VirtualClock) -> None:
    async def killer(target: asyncop.AsyncOperation[None]) -> None:
        await wait_all_blocked()
        target.cancel()

    with pytest.raises(ExceptionGroup) as info:
        async with (
            asyncop.scope() as group,
            asyncop.scope() as target,
            asyncop.scope(shield=True),
        ):
            group.spawn(killer, target)
            async with asyncop.fail_after(0.2):
                await asyncop.sleep(2)
    assert info.group_contains(TimeoutError)


@pytest.mark.asyncop
async def test_shielded_block_can_wait_for_a_cancelled_child(
    autojump_clock: VirtualClock,
) -> None:
    cancelled = asyncop.Event()

    async def wait_cancel() -> None:
        try:
            await asyncop.sleep_forever()
        except Cancelled:
            cancelled.set()
            raise

    async with asyncop.scope() as parent, asyncop.scope() as group:
        group.spawn(wait_cancel)
        await wait_all_blocked()
        async with asyncop.scope(shield=True), asyncop.fail_after(1):
            parent.cancel()
            await cancelled.wait_async()


@pytest.mark.asyncop
async def test_shield_set_and_unset_while_a_cancel_is_pending(
    autojump_clock: VirtualClock,
) -> None:
    async with asyncop.scope() as outer:
        async with asyncop.scope() as inner:
            await asyncop.checkpoint()
            outer.cancel()
            with pytest.raises(Cancelled):
                await asyncop.checkpoint()
            assert inner.shield is False
            with pytest.raises(TypeError):
                inner.shield = "hello"  # type: ignore[assignment]
            inner.shield = True
            await asyncop.checkpoint()  # shielded from outer now
            async with asyncop.scope() as innermost:
                innermost.cancel()
                with pytest.raises(Cancelled):
                    await asyncop.checkpoint()
            await asyncop.checkpoint()
            inner.shield = False
            with pytest.raises(Cancelled):
                await asyncop.checkpoint()
            inner.shield = True
            await asyncop.checkpoint()
            inner.cancel()  # a shield does not keep the scope's own cancel out
            await asyncop.checkpoint()
            pytest.fail("inner's own cancel should have ended the block")
        pytest.fail("outer's cancel should have ended the block")


@pytest.mark.asyncop
async def test_shielded_scope_keeps_its_own_deadline(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as group:
        group.cancel()
        async with asyncop.scope(shield=True), asyncop.move_on_after(1) as cs:
            await asyncop.sleep(5)
    assert cs.cancelled_caught
    assert asyncop.current_time() == 1


# ---------------------------------------------------------------- failures


@pytest.mark.asyncop
async def test_every_child_failure_is_in_the_group(autojump_clock: VirtualClock) -> None:
    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as group:
            group.spawn(fail_in_finally, Custom("task1"), 0.1)
            group.spawn(fail_in_finally, Custom("task2"), 0.15)
    assert sorted(str(e) for e in info.value.exceptions) == ["task1", "task2"]


@pytest.mark.asyncop
async def test_body_and_child_failures_are_in_the_group(autojump_clock: VirtualClock) -> None:
    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as group:
            group.spawn(fail_in_finally, Custom("child"), 2)
            await wait_all_blocked()
            raise Custom("host")
    assert sorted(str(e) for e in info.value.exceptions) == ["child", "host"]


@pytest.mark.asyncop
async def test_body_that_raises_after_catching_the_cancel(autojump_clock: VirtualClock) -> None:
    async def crash() -> None:
        raise KeyError

    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as group:
            group.spawn(crash)
            try:
                await asyncop.sleep(10)
            except Cancelled:
                raise Custom("body") from None
    assert sorted(type(e).__name__ for e in info.value.exceptions) == ["Custom", "KeyError"]


@pytest.mark.asyncop
async def test_context_manager_raising_in_the_body_while_cancelled(
    autojump_clock: VirtualClock,
) -> None:
    async def raise_exc() -> None:
        raise Custom

    @contextlib.asynccontextmanager
    async def database() -> AsyncIterator[None]:
        try:
            yield
        finally:
            raise Custom

    caught: list[int] = []
    try:
        async with asyncop.scope() as group, database():
            group.spawn(raise_exc)
            await asyncop.sleep(1)
    except* Custom as err:
        caught.append(len(err.exceptions))
    assert caught == [2]
    assert not asyncop.current_operation().token.cancelled
    await asyncop.sleep(0)


@pytest.mark.asyncop
async def test_body_failure_cancels_the_children(autojump_clock: VirtualClock) -> None:
    children: list[asyncop.AsyncOperation[int]] = []

    async def value_after(seconds: float, value: int) -> int:
        await asyncop.sleep(seconds)
        return value

    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as group:
            children.append(group.spawn(value_after, 1, 42))
            children.append(group.spawn(value_after, 2, 11))
            await asyncop.sleep(0.1)
            raise ZeroDivisionError
    assert [type(e) for e in info.value.exceptions] == [ZeroDivisionError]
    assert [child.state for child in children] == [OperationState.CANCELLED] * 2


@pytest.mark.asyncop
async def test_child_failure_cancels_its_sibling(autojump_clock: VirtualClock) -> None:
    cancelled: list[str] = []

    async def crash_later() -> None:
        await asyncop.sleep(1)
        raise ZeroDivisionError

    async def sleeper() -> None:
        try:
            await asyncop.sleep(10)
        except Cancelled:
            cancelled.append("sleeper")
            raise

    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as group:
            crasher = group.spawn(crash_later)
            other = group.spawn(sleeper)
    assert cancelled == ["sleeper"]
    assert crasher.state is OperationState.FAILED
    assert other.state is OperationState.CANCELLED
    assert [type(e) for e in info.value.exceptions] == [ZeroDivisionError]


@pytest.mark.asyncop
async def test_failures_of_a_nested_group_stay_nested(autojump_clock: VirtualClock) -> None:
    async def crash_soon() -> None:
        await asyncop.sleep(0.1)
        raise ZeroDivisionError

    async def runner() -> None:
        async with asyncop.scope() as inner:
            for _ in range(5):
                inner.spawn(crash_soon)
            await asyncop.sleep(10)

    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as outer:
            outer.spawn(runner)
            await asyncop.sleep(10)
    (nested,) = info.value.exceptions
    assert isinstance(nested, ExceptionGroup)
    assert [type(e) for e in nested.exceptions] == [ZeroDivisionError] * 5


@pytest.mark.asyncop
async def test_base_exception_failures_make_a_base_group(autojump_clock: VirtualClock) -> None:
    class MyBase(BaseException):
        pass

    async def crash() -> None:
        raise MyBase

    with pytest.raises(BaseExceptionGroup) as info:
        async with asyncop.scope() as group:
            group.spawn(crash)
            await asyncop.sleep(1)
    assert not isinstance(info.value, ExceptionGroup)


@pytest.mark.asyncop
async def test_spawn_into_a_failed_group_raises(autojump_clock: VirtualClock) -> None:
    with pytest.raises(ExceptionGroup):
        async with asyncop.scope() as group:
            raise Custom
    with pytest.raises(RuntimeError):
        group.spawn(sleep_forever)


@pytest.mark.asyncop
async def test_a_scope_cannot_be_entered_twice(autojump_clock: VirtualClock) -> None:
    cs = asyncop.move_on_after(1)
    async with cs:
        pass
    with pytest.raises(RuntimeError):
        async with cs:
            pass
    group = asyncop.scope()
    async with group:
        with pytest.raises(RuntimeError):
            async with group:
                pass
    with pytest.raises(RuntimeError):
        async with group:
            pass


# ---------------------------------------------------------------- cancel from within


@pytest.mark.asyncop
async def test_cancelling_a_group_cancels_a_nested_group_s_children(
    autojump_clock: VirtualClock,
) -> None:
    cancel_received = False

    async def waiter() -> None:
        nonlocal cancel_received
        try:
            await asyncop.sleep(5)
        finally:
            cancel_received = True

    async def subgroup() -> None:
        async with asyncop.scope() as inner:
            inner.spawn(waiter)

    async with asyncop.scope() as group:
        group.spawn(subgroup)
        await wait_all_blocked()
        group.cancel()
    assert cancel_received
    assert asyncop.current_time() == 0


@pytest.mark.asyncop
async def test_cancelled_runner_cancels_every_child_of_its_group(
    autojump_clock: VirtualClock,
) -> None:
    ended = 0

    async def child() -> None:
        nonlocal ended
        try:
            await asyncop.sleep(10)
        finally:
            ended += 1

    async def runner() -> None:
        async with asyncop.scope() as group:
            for _ in range(5):
                group.spawn(child)
        pytest.fail("the cancel should have passed the group")

    async with asyncop.scope() as s:
        op = s.spawn(runner)
        await asyncop.sleep(0.1)
        op.cancel()
    assert ended == 5
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_caught_cancel_raises_again_at_the_next_await(autojump_clock: VirtualClock) -> None:
    marks: list[int] = []

    async def child() -> None:
        marks.append(1)
        try:
            await asyncop.sleep_forever()
        except Cancelled:
            pass
        await asyncop.sleep(0)
        marks.append(2)

    async with asyncop.scope() as group:
        group.spawn(child)
        await wait_all_blocked()
        group.cancel()
    assert marks == [1]


# ---------------------------------------------------------------- start()


async def open_target(*, task_status: TaskStatus[asyncop.AsyncOperation[None]]) -> None:
    async with asyncop.scope() as target:
        task_status.started(target)
        await asyncop.sleep_forever()


async def sleeping_children(
    before_started: Callable[[], object], *, task_status: TaskStatus[None]
) -> None:
    async with asyncop.scope() as inner:
        inner.spawn(sleep_forever)
        inner.spawn(sleep_forever)
        await wait_all_blocked()
        before_started()
        task_status.started()


@pytest.mark.asyncop
async def test_start_into_a_scope_cancelled_just_before_started(
    autojump_clock: VirtualClock,
) -> None:
    async with asyncop.scope() as s:
        target = await s.start(open_target)
        await target.start(sleeping_children, target.cancel)
    assert asyncop.current_time() == 0


@pytest.mark.asyncop
async def test_start_into_a_scope_cancelled_just_after_started(
    autojump_clock: VirtualClock,
) -> None:
    async with asyncop.scope() as s:
        target = await s.start(open_target)
        await target.start(sleeping_children, lambda: None)
        target.cancel()
    assert asyncop.current_time() == 0


@pytest.mark.asyncop
async def test_starting_task_cancelled_by_itself_before_started(
    autojump_clock: VirtualClock,
) -> None:
    async def cancels_itself(*, task_status: TaskStatus[None]) -> None:
        asyncop.current_operation().cancel()
        await asyncop.checkpoint()
        task_status.started()

    async with asyncop.scope() as s:
        with pytest.raises(RuntimeError, match=r"without calling task_status\.started"):
            await s.start(cancels_itself)


@pytest.mark.asyncop
async def test_start_in_a_cancelled_inner_scope_leaves_the_group_alone(
    autojump_clock: VirtualClock,
) -> None:
    async def serve(*, task_status: TaskStatus[None]) -> None:
        task_status.started()
        await asyncop.sleep_forever()

    async with asyncop.scope() as group:
        async with asyncop.scope() as inner:
            inner.cancel()
            await group.start(serve)
        assert not group.token.cancelled
        group.cancel()


@pytest.mark.asyncop
async def test_start_of_a_plain_function_in_a_task(autojump_clock: VirtualClock) -> None:
    def ready(*, task_status: TaskStatus[str]) -> int:
        task_status.started("sync")
        return 1

    async with asyncop.scope() as s:
        assert await s.start(ready) == "sync"
