"""Async scopes: ``async with asyncop.scope() as s:`` in coroutines."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import asyncop
from asyncop import Cancelled, OperationState
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(20)


class Boom(Exception):
    """The failure the tests raise on purpose."""


@pytest.fixture
def manual() -> Iterator[tuple[asyncop.Runtime, VirtualClock]]:
    """A 2-worker runtime on a virtual clock that moves only by ``advance()``."""
    clock = VirtualClock(autojump=False)
    rt = asyncop.Runtime(2, name=f"amrt{id(object()):x}", clock=clock)
    try:
        yield rt, clock
    finally:
        assert rt.shutdown(timeout=10), "runtime did not shut down in 10 s"
        prefix = f"{rt.name}-"
        assert [t for t in threading.enumerate() if t.name.startswith(prefix)] == []


def me() -> asyncop.AsyncOperation:
    op = asyncop.current_operation()
    assert op is not None
    return op


def leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    """The non-group exceptions inside ``group``, depth first."""
    found: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(reversed(exc.exceptions))
        else:
            found.append(exc)
    return found


async def sleep_then_log(seconds: float, label: str, log: list[Any]) -> str:
    try:
        await asyncop.sleep(seconds)
    except Cancelled:
        log.append((label, "cancelled", asyncop.current_time()))
        raise
    log.append((label, "done", asyncop.current_time()))
    return label


async def nap(seconds: float) -> None:
    await asyncop.sleep(seconds)


async def fail_after(seconds: float, error: BaseException) -> None:
    await asyncop.sleep(seconds)
    raise error


# ----------------------------------------------------------------------
# The exit waits for every child
# ----------------------------------------------------------------------


def test_exit_waits_for_every_child(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def main() -> float:
        async with asyncop.scope() as s:
            s.spawn(sleep_then_log, 3, "a", log)
            s.spawn(sleep_then_log, 7, "b", log)
            s.spawn(sleep_then_log, 1, "c", log)
        log.append(("exit", asyncop.current_time()))
        return asyncop.current_time()

    assert vruntime.run(main) == pytest.approx(7)
    assert log == [
        ("c", "done", pytest.approx(1)),
        ("a", "done", pytest.approx(3)),
        ("b", "done", pytest.approx(7)),
        ("exit", pytest.approx(7)),
    ]


def test_children_of_children_are_waited_for(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def parent() -> None:
        me().spawn(sleep_then_log, 5, "grandchild", log)

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(parent)
        log.append(("exit", asyncop.current_time()))

    vruntime.run(main)
    assert log == [("grandchild", "done", pytest.approx(5)), ("exit", pytest.approx(5))]


def test_scope_that_ended_normally_is_completed(vruntime: asyncop.Runtime) -> None:
    async def main() -> asyncop.AsyncOperation:
        async with asyncop.scope() as s:
            s.spawn(nap, 1)
        return s

    assert vruntime.run(main).state is OperationState.COMPLETED


def test_children_may_spawn_into_the_scope_while_it_waits(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def main() -> None:
        async with asyncop.scope() as s:

            async def spawner() -> None:
                await asyncop.sleep(2)
                s.spawn(sleep_then_log, 3, "late", log)

            s.spawn(spawner)
        log.append(("exit", asyncop.current_time()))

    vruntime.run(main)
    assert log == [("late", "done", pytest.approx(5)), ("exit", pytest.approx(5))]


# ----------------------------------------------------------------------
# A failing child
# ----------------------------------------------------------------------


def test_failing_child_cancels_its_siblings(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(sleep_then_log, 100, "sibling", log)
            s.spawn(fail_after, 2, Boom())

    with pytest.raises(ExceptionGroup):
        vruntime.run(main)
    assert log == [("sibling", "cancelled", pytest.approx(2))]


def test_failing_child_cancels_the_body_at_its_next_await(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(fail_after, 2, Boom())
            try:
                await asyncop.sleep(100)
            except Cancelled:
                log.append(("body cancelled", asyncop.current_time()))
                raise
            log.append("body went on")

    with pytest.raises(ExceptionGroup):
        vruntime.run(main)
    assert log == [("body cancelled", pytest.approx(2))]


def test_failing_child_makes_the_block_raise_a_group_of_it(vruntime: asyncop.Runtime) -> None:
    error = Boom("child")

    async def main() -> Any:
        try:
            async with asyncop.scope() as s:
                s.spawn(fail_after, 1, error)
                s.spawn(nap, 100)
                await asyncop.sleep(100)
        except ExceptionGroup as group:
            return group
        return None

    group = vruntime.run(main)
    assert isinstance(group, ExceptionGroup)
    assert leaves(group) == [error]


def test_group_holds_every_failure_and_no_cancellation(vruntime: asyncop.Runtime) -> None:
    first, second = Boom("first"), ValueError("second")

    async def main() -> Any:
        try:
            async with asyncop.scope() as s:
                s.spawn(fail_after, 3, first)
                s.spawn(fail_after, 3, second)
                s.spawn(nap, 100)
                await asyncop.sleep(100)
        except ExceptionGroup as group:
            return group
        return None

    group = vruntime.run(main)
    assert isinstance(group, ExceptionGroup)
    found = leaves(group)
    assert {id(e) for e in found} == {id(first), id(second)}
    assert not any(isinstance(e, Cancelled) for e in found)


def test_body_that_catches_cancel_still_leaves_at_its_next_await(
    vruntime: asyncop.Runtime,
) -> None:
    log: list[Any] = []

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(fail_after, 1, Boom())
            try:
                await asyncop.sleep(100)
            except Cancelled:
                log.append("caught")
            try:
                await asyncop.sleep(100)
            except Cancelled:
                log.append(("cancelled again", asyncop.current_time()))
                raise

    with pytest.raises(ExceptionGroup):
        vruntime.run(main)
    assert log == ["caught", ("cancelled again", pytest.approx(1))]


# ----------------------------------------------------------------------
# An exception in the body
# ----------------------------------------------------------------------


def test_body_exception_cancels_the_children(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(sleep_then_log, 100, "child", log)
            await asyncop.sleep(4)
            raise Boom

    with pytest.raises(ExceptionGroup):
        vruntime.run(main)
    assert log == [("child", "cancelled", pytest.approx(4))]


def test_body_exception_alone_is_wrapped_in_a_group(vruntime: asyncop.Runtime) -> None:
    error = Boom("body")

    async def main() -> Any:
        try:
            async with asyncop.scope():
                raise error
        except ExceptionGroup as group:
            return group
        except Boom:
            return "bare"
        return None

    group = vruntime.run(main)
    assert isinstance(group, ExceptionGroup)
    assert group.exceptions == (error,)


def test_body_exception_exits_only_after_the_children_end(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def cleanup_child() -> None:
        try:
            await asyncop.sleep(100)
        except Cancelled:
            async with asyncop.scope(shield=True):
                await asyncop.sleep(3)
            log.append(("child cleaned up", asyncop.current_time()))
            raise

    async def main() -> None:
        try:
            async with asyncop.scope() as s:
                s.spawn(cleanup_child)
                await asyncop.sleep(1)
                raise Boom
        except ExceptionGroup:
            log.append(("exit", asyncop.current_time()))

    vruntime.run(main)
    assert log == [("child cleaned up", pytest.approx(4)), ("exit", pytest.approx(4))]


def test_body_exception_and_child_failure_are_in_one_group(vruntime: asyncop.Runtime) -> None:
    body_error, child_error = Boom("body"), ValueError("child")

    async def child() -> None:
        try:
            await asyncop.sleep(100)
        except Cancelled:
            raise child_error from None

    async def main() -> Any:
        try:
            async with asyncop.scope() as s:
                s.spawn(child)
                await asyncop.sleep(1)
                raise body_error
        except ExceptionGroup as group:
            return group
        return None

    group = vruntime.run(main)
    assert {id(e) for e in leaves(group)} == {id(body_error), id(child_error)}


# ----------------------------------------------------------------------
# timeout= and deadline=
# ----------------------------------------------------------------------


def test_timeout_that_interrupts_the_body_raises_timeout_error(vruntime: asyncop.Runtime) -> None:
    async def main() -> float:
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=5):
                await asyncop.sleep(100)
        return asyncop.current_time()

    assert vruntime.run(main) == pytest.approx(5)


def test_timeout_that_interrupts_a_child_raises_timeout_error(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def main() -> float:
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=5) as s:
                s.spawn(sleep_then_log, 100, "child", log)
        return asyncop.current_time()

    assert vruntime.run(main) == pytest.approx(5)
    assert log == [("child", "cancelled", pytest.approx(5))]


def test_timeout_error_is_bare_not_in_a_group(vruntime: asyncop.Runtime) -> None:
    async def main() -> Any:
        try:
            async with asyncop.scope(timeout=1):
                await asyncop.sleep(10)
        except BaseException as exc:
            return exc
        return None

    error = vruntime.run(main)
    assert type(error) is TimeoutError


def test_deadline_that_interrupts_raises_timeout_error(vruntime: asyncop.Runtime) -> None:
    async def main() -> float:
        await asyncop.sleep(10)
        with pytest.raises(TimeoutError):
            async with asyncop.scope(deadline=asyncop.current_time() + 3):
                await asyncop.sleep(100)
        return asyncop.current_time()

    assert vruntime.run(main) == pytest.approx(13)


def test_block_that_ends_before_its_timeout_raises_nothing(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[bool, float]:
        async with asyncop.scope(timeout=5) as s:
            await asyncop.sleep(2)
        await asyncop.sleep(10)  # past the old deadline: it must not fire now
        return s.expired, asyncop.current_time()

    assert vruntime.run(main) == (False, pytest.approx(12))


def test_deadline_that_interrupted_nothing_raises_nothing(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    # The deadline passes during a blocking call, which is not a cancellation
    # point; the block then leaves without awaiting, so nothing was
    # interrupted by the cancel.
    rt, clock = manual

    def pass_the_deadline(scope_op: asyncop.AsyncOperation) -> bool:
        clock.advance(10)
        return scope_op.token.wait(5)

    async def main() -> tuple[bool, bool, OperationState]:
        async with asyncop.scope(timeout=5) as s:
            saw_cancel = await asyncop.spawn_blocking(pass_the_deadline, s)
        return saw_cancel, s.expired, s.state

    op = rt.spawn(main)
    result = op.wait(10)
    assert result.state is OperationState.COMPLETED, result
    saw_cancel, expired, _state = result.value
    assert saw_cancel
    assert expired


def test_deadline_can_be_moved_later_while_the_block_runs(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[bool, float]:
        async with asyncop.scope(timeout=5) as s:
            s.deadline = asyncop.current_time() + 100
            await asyncop.sleep(50)
        return s.expired, asyncop.current_time()

    assert vruntime.run(main) == (False, pytest.approx(50))


def test_deadline_can_be_moved_earlier_while_the_block_runs(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[bool, float]:
        scope = asyncop.scope(timeout=100)
        with pytest.raises(TimeoutError):
            async with scope as s:
                await asyncop.sleep(1)
                s.deadline = asyncop.current_time() + 2
                await asyncop.sleep(50)
        return s.expired, asyncop.current_time()

    assert vruntime.run(main) == (True, pytest.approx(3))


def test_deadline_can_be_set_on_a_scope_opened_without_one(vruntime: asyncop.Runtime) -> None:
    async def main() -> float:
        with pytest.raises(TimeoutError):
            async with asyncop.scope() as s:
                s.deadline = asyncop.current_time() + 4
                await asyncop.sleep(50)
        return asyncop.current_time()

    assert vruntime.run(main) == pytest.approx(4)


def test_clearing_the_deadline_stops_the_timeout(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[bool, float]:
        async with asyncop.scope(timeout=5) as s:
            s.deadline = None
            await asyncop.sleep(20)
        return s.expired, asyncop.current_time()

    assert vruntime.run(main) == (False, pytest.approx(20))


def test_expired_is_true_after_the_deadline_fired(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[bool, bool]:
        scope = asyncop.scope(timeout=1)
        with pytest.raises(TimeoutError):
            async with scope as s:
                before = s.expired
                await asyncop.sleep(10)
        return before, s.expired

    assert vruntime.run(main) == (False, True)


def test_expired_reads_true_inside_the_block_after_the_deadline(
    vruntime: asyncop.Runtime,
) -> None:
    log: list[Any] = []

    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=2) as s:
                log.append(s.expired)
                try:
                    await asyncop.sleep(10)
                finally:
                    log.append(s.expired)

    vruntime.run(main)
    assert log == [False, True]


# ----------------------------------------------------------------------
# shield=
# ----------------------------------------------------------------------


def test_shielded_scope_blocks_a_cancel_from_above(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def task() -> None:
        async with asyncop.scope(shield=True):
            await asyncop.sleep(10)
            log.append(("shielded sleep ended", asyncop.current_time()))
        try:
            await asyncop.checkpoint()
        except Cancelled:
            log.append("cancelled after the shield")
            raise

    async def main() -> OperationState:
        op = me().spawn(task)
        await asyncop.sleep(1)
        op.cancel()
        await asyncop.race(op)
        return op.state

    assert vruntime.run(main) is OperationState.CANCELLED
    assert log == [("shielded sleep ended", pytest.approx(10)), "cancelled after the shield"]


def test_shielded_scope_keeps_the_cancel_out_of_its_children(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def task() -> None:
        async with asyncop.scope(shield=True) as s:
            s.spawn(sleep_then_log, 10, "shielded child", log)

    async def main() -> None:
        op = me().spawn(task)
        await asyncop.sleep(1)
        op.cancel()
        await asyncop.race(op)

    vruntime.run(main)
    assert log == [("shielded child", "done", pytest.approx(10))]


def test_shielded_scope_admits_its_own_deadline(vruntime: asyncop.Runtime) -> None:
    async def main() -> float:
        with pytest.raises(TimeoutError):
            async with asyncop.scope(shield=True, timeout=3):
                await asyncop.sleep(100)
        return asyncop.current_time()

    assert vruntime.run(main) == pytest.approx(3)


def test_shielded_scope_admits_its_own_cancel(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []
    holder: list[asyncop.AsyncOperation] = []

    async def task() -> str:
        async with asyncop.scope(shield=True) as s:
            holder.append(s)
            try:
                await asyncop.sleep(100)
            except Cancelled:
                log.append(("body cancelled", asyncop.current_time()))
                raise
        return "after"

    async def main() -> Any:
        op = me().spawn(task)
        await asyncop.sleep(2)
        holder[0].cancel()
        return await op

    assert vruntime.run(main) == "after"
    assert log == [("body cancelled", pytest.approx(2))]


def test_shield_set_while_running_blocks_a_later_cancel(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def task() -> None:
        async with asyncop.scope() as s:
            s.shield = True
            await asyncop.sleep(10)
            log.append(("sleep ended", asyncop.current_time()))

    async def main() -> OperationState:
        op = me().spawn(task)
        await asyncop.sleep(1)
        op.cancel()
        await asyncop.race(op)
        return op.state

    vruntime.run(main)
    assert log == [("sleep ended", pytest.approx(10))]


def test_clearing_shield_under_a_cancelled_parent_lets_the_cancel_in(
    vruntime: asyncop.Runtime,
) -> None:
    log: list[Any] = []
    cancelled = asyncop.Event()

    async def task() -> None:
        async with asyncop.scope(shield=True) as s:
            await cancelled.wait_async()
            log.append("woke under the shield")
            s.shield = False
            try:
                await asyncop.checkpoint()
            except Cancelled:
                log.append("cancel let in")
                raise
            log.append("went on")

    async def main() -> OperationState:
        op = me().spawn(task)
        await wait_all_blocked()
        op.cancel()
        cancelled.set()
        await asyncop.race(op)
        return op.state

    assert vruntime.run(main) is OperationState.CANCELLED
    assert log == ["woke under the shield", "cancel let in"]


def test_clearing_shield_while_parked_wakes_the_body(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []
    holder: list[asyncop.AsyncOperation] = []

    async def task() -> None:
        async with asyncop.scope(shield=True) as s:
            holder.append(s)
            try:
                await asyncop.sleep(100)
            except Cancelled:
                log.append(("cancelled", asyncop.current_time()))
                raise

    async def main() -> None:
        op = me().spawn(task)
        await asyncop.sleep(1)
        op.cancel()
        await asyncop.sleep(1)
        holder[0].shield = False
        await asyncop.race(op)

    vruntime.run(main)
    assert log == [("cancelled", pytest.approx(2))]


# ----------------------------------------------------------------------
# Spawning into a scope
# ----------------------------------------------------------------------


def test_spawn_into_a_cancelling_scope_gives_a_child_born_cancelled(
    vruntime: asyncop.Runtime,
) -> None:
    ran: list[str] = []

    async def child() -> None:
        ran.append("child")

    async def main() -> tuple[OperationState, bool]:
        async with asyncop.scope() as s:
            s.cancel()
            op = s.spawn(child)
            born = op.state, op.token.cancelled
        return born

    state, token_cancelled = vruntime.run(main)
    assert state is OperationState.CANCELLED
    assert token_cancelled
    assert ran == []


def test_spawn_into_a_scope_cancelled_by_a_failure_never_runs(vruntime: asyncop.Runtime) -> None:
    ran: list[str] = []

    def child() -> None:
        ran.append("child")

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(fail_after, 1, Boom())
            try:
                await asyncop.sleep(100)
            finally:
                late = s.spawn(child)
                assert late.state is OperationState.CANCELLED

    with pytest.raises(ExceptionGroup):
        vruntime.run(main)
    assert ran == []


def test_spawn_into_an_exited_scope_raises_runtime_error(vruntime: asyncop.Runtime) -> None:
    async def child() -> None:
        pass

    async def main() -> str:
        async with asyncop.scope() as s:
            pass
        try:
            s.spawn(child)
        except RuntimeError as exc:
            return str(exc)
        return ""

    assert vruntime.run(main) != ""


# ----------------------------------------------------------------------
# s.cancel() from inside
# ----------------------------------------------------------------------


def test_cancel_from_inside_ends_the_block_at_the_next_await(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def main() -> str:
        async with asyncop.scope() as s:
            s.cancel()
            log.append("still running until the next await")
            await asyncop.sleep(100)
            log.append("went on")
        log.append(("after the block", asyncop.current_time()))
        await asyncop.sleep(1)  # the task itself is not cancelled
        return "returned"

    assert vruntime.run(main) == "returned"
    assert log == ["still running until the next await", ("after the block", 0.0)]


def test_cancel_from_inside_cancels_the_children_too(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(sleep_then_log, 100, "child", log)
            await asyncop.sleep(2)
            s.cancel()

    vruntime.run(main)
    assert log == [("child", "cancelled", pytest.approx(2))]


def test_cancel_from_inside_while_outside_is_cancelled_passes_on(
    vruntime: asyncop.Runtime,
) -> None:
    log: list[Any] = []

    async def task() -> None:
        async with asyncop.scope() as s:
            me().parent.cancel()  # type: ignore[union-attr]  # the task, from inside
            s.cancel()
            await asyncop.checkpoint()
        log.append("went on after the block")

    op = vruntime.spawn(task)
    assert op.wait(5).state is OperationState.CANCELLED
    assert log == []


# ----------------------------------------------------------------------
# Nested deadlines
# ----------------------------------------------------------------------


def test_equal_nested_deadlines_outer_raises_inner_lets_cancel_pass(
    vruntime: asyncop.Runtime,
) -> None:
    log: list[Any] = []

    async def main() -> None:
        try:
            async with asyncop.scope(deadline=5, name="outer"):
                try:
                    async with asyncop.scope(deadline=5, name="inner"):
                        await asyncop.sleep(100)
                except BaseException as exc:
                    log.append(("inner let out", type(exc).__name__))
                    raise
        except BaseException as exc:
            log.append(("outer raised", type(exc).__name__))

    vruntime.run(main)
    assert log == [("inner let out", "Cancelled"), ("outer raised", "TimeoutError")]


def test_earlier_inner_deadline_raises_in_the_inner_scope_only(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def main() -> None:
        async with asyncop.scope(deadline=50) as outer:
            try:
                async with asyncop.scope(deadline=5):
                    await asyncop.sleep(100)
            except TimeoutError:
                log.append(("inner timed out", asyncop.current_time()))
            await asyncop.sleep(1)
            log.append(("outer went on", asyncop.current_time()))
        log.append(("outer expired", outer.expired))

    vruntime.run(main)
    assert log == [
        ("inner timed out", pytest.approx(5)),
        ("outer went on", pytest.approx(6)),
        ("outer expired", False),
    ]


def test_earlier_outer_deadline_raises_in_the_outer_scope(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def main() -> None:
        try:
            async with asyncop.scope(deadline=3):
                try:
                    async with asyncop.scope(deadline=50):
                        await asyncop.sleep(100)
                except BaseException as exc:
                    log.append(("inner let out", type(exc).__name__))
                    raise
        except TimeoutError:
            log.append(("outer timed out", asyncop.current_time()))

    vruntime.run(main)
    assert log == [("inner let out", "Cancelled"), ("outer timed out", pytest.approx(3))]


# ----------------------------------------------------------------------
# supervise=True
# ----------------------------------------------------------------------


def test_supervised_scope_keeps_a_failure_on_the_child(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []
    error = Boom("supervised")

    async def main() -> asyncop.AsyncOperation:
        async with asyncop.scope(supervise=True) as s:
            bad = s.spawn(fail_after, 1, error)
            s.spawn(sleep_then_log, 5, "sibling", log)
            await asyncop.sleep(3)
            log.append(("body went on", asyncop.current_time()))
        return bad

    bad = vruntime.run(main)
    assert log == [("body went on", pytest.approx(3)), ("sibling", "done", pytest.approx(5))]
    assert bad.state is OperationState.FAILED
    assert bad.error is error


def test_supervised_scope_still_raises_a_body_exception(vruntime: asyncop.Runtime) -> None:
    async def main() -> None:
        async with asyncop.scope(supervise=True):
            raise Boom

    with pytest.raises(ExceptionGroup):
        vruntime.run(main)


# ----------------------------------------------------------------------
# The block is the scope's own work
# ----------------------------------------------------------------------


def test_current_operation_in_the_block_is_the_scope(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[bool, bool, bool]:
        task = me()
        async with asyncop.scope() as s:
            inside = asyncop.current_operation() is s
            await asyncop.sleep(1)
            after_await = asyncop.current_operation() is s
        return inside, after_await, asyncop.current_operation() is task

    assert vruntime.run(main) == (True, True, True)


def test_scope_is_a_child_of_the_task(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[bool, str]:
        task = me()
        async with asyncop.scope(name="named") as s:
            return s.parent is task, s.name

    assert vruntime.run(main) == (True, "named")


def test_entering_a_scope_is_not_a_cancellation_point(vruntime: asyncop.Runtime) -> None:
    log: list[str] = []

    async def task() -> None:
        me().cancel()
        async with asyncop.scope():
            log.append("entered")
            await asyncop.checkpoint()
            log.append("went on")

    op = vruntime.spawn(task)
    assert op.wait(5).state is OperationState.CANCELLED
    assert log == ["entered"]


def test_shielded_scope_opened_in_a_cancelled_task_is_not_cancelled(
    vruntime: asyncop.Runtime,
) -> None:
    log: list[Any] = []

    async def task() -> None:
        me().cancel()
        async with asyncop.scope(shield=True) as s:
            log.append(("token cancelled", s.token.cancelled))
            await asyncop.sleep(2)
            log.append(("slept", asyncop.current_time()))
        await asyncop.checkpoint()
        log.append("went on")

    op = vruntime.spawn(task)
    assert op.wait(5).state is OperationState.CANCELLED
    assert log == [("token cancelled", False), ("slept", pytest.approx(2))]


def test_scope_error_is_raised_out_of_its_block_only(vruntime: asyncop.Runtime) -> None:
    async def main() -> str:
        try:
            async with asyncop.scope() as s:
                s.spawn(fail_after, 1, Boom())
        except ExceptionGroup:
            pass
        await asyncop.sleep(1)  # the enclosing task is not cancelled
        return "carried on"

    op = vruntime.spawn(main)
    result = op.wait(5)
    assert result.state is OperationState.COMPLETED
    assert result.value == "carried on"


def test_scope_outside_any_operation_raises_runtime_error() -> None:
    with pytest.raises(RuntimeError):
        asyncop.scope()


def test_runtime_scope_works_in_a_coroutine_of_that_runtime(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def main() -> tuple[bool, float]:
        task = me()
        async with vruntime.scope(timeout=50) as s:
            linked = s.parent is task
            s.spawn(sleep_then_log, 4, "child", log)
        return linked, asyncop.current_time()

    assert vruntime.run(main) == (True, pytest.approx(4))
    assert log == [("child", "done", pytest.approx(4))]


def test_scope_of_another_runtime_is_refused_in_a_coroutine(
    vruntime: asyncop.Runtime, runtime: asyncop.Runtime
) -> None:
    async def main() -> None:
        async with runtime.scope():
            pass

    with pytest.raises(RuntimeError):
        vruntime.run(main)


def test_sync_scope_in_a_coroutine_is_refused(vruntime: asyncop.Runtime) -> None:
    async def main() -> None:
        with vruntime.scope():
            pass

    with pytest.raises(RuntimeError):
        vruntime.run(main)
