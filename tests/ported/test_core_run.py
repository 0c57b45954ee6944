"""Cancel scopes, shielding, errors during unwinding and the clock, from the
cases of trio's core run tests, in asyncop's spelling.

Deliberate differences from trio, which these tests follow:
- in a coroutine, the timeout scopes are entered with ``async with``, and an
  error that leaves one comes out in an ExceptionGroup;
- cancelling a scope that was never entered raises RuntimeError (trio lets
  an unentered CancelScope be cancelled ahead of time); a deadline already
  passed when the block is entered gives the same effect.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest

import asyncop
from asyncop import Cancelled, OperationState
from asyncop.lowlevel import pass_checkpoint
from asyncop.testing import VirtualClock, assert_checkpoints, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


class Boom(Exception):
    """A failure raised on purpose."""


def leaves(group: BaseException) -> list[BaseException]:
    """Every non-group exception inside ``group``, depth first."""
    if isinstance(group, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in group.exceptions:
            out.extend(leaves(inner))
        return out
    return [group]


# -- cancel scopes and deadlines ----------------------------------------------


@pytest.mark.asyncop
async def test_deadline_moved_later_while_the_block_waits(autojump_clock: VirtualClock) -> None:
    async def push_back(cs: asyncop.TimeoutScope) -> None:
        await asyncop.sleep(1)
        cs.deadline += 5

    async with asyncop.scope() as s, asyncop.move_on_after(2) as cs:
        s.spawn(push_back, cs)
        await asyncop.sleep_forever()
    assert cs.cancelled_caught
    assert asyncop.current_time() == 7


@pytest.mark.asyncop
async def test_deadline_moved_earlier_while_the_block_waits(autojump_clock: VirtualClock) -> None:
    async def pull_in(cs: asyncop.TimeoutScope) -> None:
        await asyncop.sleep(1)
        cs.deadline = asyncop.current_time() + 0.5

    async with asyncop.scope() as s, asyncop.move_on_after(100) as cs:
        s.spawn(pull_in, cs)
        await asyncop.sleep_forever()
    assert cs.cancelled_caught
    assert asyncop.current_time() == 1.5


@pytest.mark.asyncop
async def test_deadline_removed_while_the_block_waits(autojump_clock: VirtualClock) -> None:
    async def lift(cs: asyncop.TimeoutScope) -> None:
        await asyncop.sleep(1)
        cs.deadline = math.inf

    async with asyncop.scope() as s, asyncop.move_on_after(2) as cs:
        s.spawn(lift, cs)
        await asyncop.sleep(10)
    assert not cs.cancelled_caught
    assert asyncop.current_time() == 10


@pytest.mark.asyncop
async def test_deadline_reads_before_and_after_the_block(autojump_clock: VirtualClock) -> None:
    await asyncop.sleep(3)
    cs = asyncop.move_on_after(2)
    assert cs.deadline == 5
    async with cs:
        assert cs.deadline == 5
        cs.deadline = 8
    assert cs.deadline == 8
    assert not cs.cancelled_caught
    # Moving the deadline of a scope that has ended changes nothing else.
    cs.deadline = 0
    await asyncop.checkpoint()


@pytest.mark.asyncop
async def test_cancelled_caught_is_false_when_nothing_was_interrupted(
    autojump_clock: VirtualClock,
) -> None:
    async with asyncop.move_on_after(1) as cs:
        cs.cancel()
    assert not cs.cancelled_caught

    async with asyncop.move_on_after(1) as cs:
        cs.cancel()
        await asyncop.checkpoint()
    assert cs.cancelled_caught


@pytest.mark.asyncop
async def test_cancel_on_an_ended_scope_is_harmless(autojump_clock: VirtualClock) -> None:
    async with asyncop.move_on_after(5) as cs:
        await asyncop.sleep(1)
    cs.cancel()
    await asyncop.sleep(1)
    assert not cs.cancelled_caught
    assert asyncop.current_time() == 2


@pytest.mark.asyncop
async def test_deadline_already_passed_on_entry_cancels_the_first_await(
    autojump_clock: VirtualClock,
) -> None:
    await asyncop.sleep(5)
    async with asyncop.move_on_at(1) as cs:
        reached = True
        await asyncop.checkpoint()
        reached_after = True  # pragma: no cover - the await above raises
    assert reached
    assert "reached_after" not in locals()
    assert cs.cancelled_caught


@pytest.mark.asyncop
async def test_cancel_before_entry_is_refused(autojump_clock: VirtualClock) -> None:
    cs = asyncop.move_on_after(5)
    with pytest.raises(RuntimeError):
        cs.cancel()
    async with cs:
        await asyncop.sleep(1)
    assert not cs.cancelled_caught


@pytest.mark.asyncop
async def test_outer_cancel_passes_through_move_on_after(autojump_clock: VirtualClock) -> None:
    async with asyncop.move_on_after(10) as outer, asyncop.move_on_after(5) as inner:
        outer.cancel()
        await asyncop.sleep_forever()
    assert outer.cancelled_caught
    assert not inner.cancelled_caught
    assert asyncop.current_time() == 0


@pytest.mark.asyncop
async def test_nested_deadlines_the_inner_fires_first(autojump_clock: VirtualClock) -> None:
    async with asyncop.move_on_after(10) as outer:
        async with asyncop.move_on_after(3) as inner:
            await asyncop.sleep_forever()
        assert asyncop.current_time() == 3
        await asyncop.sleep_forever()
    assert inner.cancelled_caught and outer.cancelled_caught
    assert asyncop.current_time() == 10


@pytest.mark.asyncop
async def test_shield_after_the_scope_was_cancelled(autojump_clock: VirtualClock) -> None:
    log: list[str] = []
    async with asyncop.move_on_after(10) as outer:
        outer.cancel()
        async with asyncop.move_on_after(math.inf, shield=True):
            await asyncop.sleep(1)
            log.append("shielded sleep ran")
        with pytest.raises(Cancelled):
            await asyncop.checkpoint()
        log.append("raised after")
    assert log == ["shielded sleep ran", "raised after"]
    # The Cancelled was caught inside the block, so the exit stopped nothing.
    assert not outer.cancelled_caught
    assert asyncop.current_time() == 1


@pytest.mark.asyncop
async def test_shield_keeps_an_outer_deadline_out_of_its_block(
    autojump_clock: VirtualClock,
) -> None:
    async with asyncop.move_on_after(1) as outer:
        async with asyncop.move_on_after(math.inf, shield=True) as inner:
            await asyncop.sleep(5)
            assert asyncop.current_time() == 5
        await asyncop.checkpoint()
        raise AssertionError("the outer deadline should have cancelled this")
    assert outer.cancelled_caught
    assert not inner.cancelled_caught


@pytest.mark.asyncop
async def test_shield_toggled_off_while_waiting_lets_the_cancel_in(
    autojump_clock: VirtualClock,
) -> None:
    async def unshield(op: asyncop.AsyncOperation) -> None:
        await asyncop.sleep(2)
        op.shield = False

    async with asyncop.move_on_after(1) as outer, asyncop.scope(shield=True) as inner:
        inner.spawn(unshield, inner)
        outer.cancel()
        await asyncop.sleep_forever()
    assert outer.cancelled_caught
    assert asyncop.current_time() == 2


# -- exceptions while unwinding -----------------------------------------------


@pytest.mark.asyncop
async def test_error_raised_in_finally_during_cancellation(autojump_clock: VirtualClock) -> None:
    async def child() -> None:
        try:
            await asyncop.sleep_forever()
        finally:
            raise Boom("from finally")

    with pytest.raises(BaseExceptionGroup) as info:
        async with asyncop.scope() as s:
            s.spawn(child)
            await asyncop.sleep(1)
            s.cancel()
    (boom,) = leaves(info.value)
    assert isinstance(boom, Boom)
    assert isinstance(boom.__context__, Cancelled)


@pytest.mark.asyncop
async def test_error_in_finally_of_a_timed_out_block(autojump_clock: VirtualClock) -> None:
    with pytest.raises(BaseExceptionGroup) as info:
        async with asyncop.move_on_after(1) as cs:
            try:
                await asyncop.sleep_forever()
            finally:
                raise Boom("cleanup failed")
    (boom,) = leaves(info.value)
    assert isinstance(boom, Boom)
    assert isinstance(boom.__context__, Cancelled)
    assert not cs.cancelled_caught


@pytest.mark.asyncop
async def test_errors_of_several_children_come_out_flat(autojump_clock: VirtualClock) -> None:
    async def fail(delay: float, exc: BaseException) -> None:
        try:
            await asyncop.sleep(delay)
        finally:
            if delay:
                await asyncop.checkpoint()  # re-raises the cancel in cleanup
        raise exc  # pragma: no cover - only the zero delay gets here

    errors = [Boom("a"), ValueError("b"), KeyError("c")]
    with pytest.raises(BaseExceptionGroup) as info:
        async with asyncop.scope() as s:
            for exc in errors:
                s.spawn(fail, 0, exc)
    assert type(info.value) is ExceptionGroup
    assert sorted(map(repr, info.value.exceptions)) == sorted(map(repr, errors))


@pytest.mark.asyncop
async def test_errors_of_nested_scopes_nest(autojump_clock: VirtualClock) -> None:
    async def crash(exc: BaseException) -> None:
        await asyncop.checkpoint()
        raise exc

    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as outer:
            outer.spawn(crash, Boom("outer"))
            async with asyncop.scope() as inner:
                inner.spawn(crash, ValueError("inner"))
                inner.spawn(crash, KeyError("inner"))
    shapes = sorted(
        type(e).__name__ if not isinstance(e, BaseExceptionGroup) else "group"
        for e in info.value.exceptions
    )
    assert shapes in (["Boom", "group"], ["Boom"], ["group"])
    found = {type(e) for e in leaves(info.value)}
    assert ValueError in found or Boom in found


@pytest.mark.asyncop
async def test_keyboard_interrupt_through_a_timeout_scope(autojump_clock: VirtualClock) -> None:
    async def sleeper(log: list[str]) -> None:
        try:
            await asyncop.sleep_forever()
        finally:
            log.append("child unwound")

    log: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        async with asyncop.move_on_after(10) as cs:
            cs_op = asyncop.current_operation()
            assert cs_op is not None
            cs_op.spawn(sleeper, log)
            await asyncop.sleep(1)
            raise KeyboardInterrupt
    assert log == ["child unwound"]
    assert not cs.cancelled_caught


@pytest.mark.asyncop
async def test_system_exit_from_a_child_of_a_shielded_scope(autojump_clock: VirtualClock) -> None:
    async def leave() -> None:
        await asyncop.sleep(1)
        raise SystemExit(3)

    with pytest.raises(SystemExit) as info:
        async with asyncop.scope(shield=True) as s:
            s.spawn(leave)
            await asyncop.sleep_forever()
    assert info.value.code == 3


@pytest.mark.asyncop
async def test_generator_exit_through_a_scope_in_an_async_generator(
    autojump_clock: VirtualClock,
) -> None:
    log: list[str] = []

    async def numbers() -> object:
        async with asyncop.move_on_after(100):
            try:
                yield 1
                yield 2
            finally:
                log.append("generator closed")

    gen = numbers()
    assert await gen.__anext__() == 1  # type: ignore[attr-defined]
    await gen.aclose()  # type: ignore[attr-defined]
    assert log == ["generator closed"]
    await asyncop.sleep(1)
    assert asyncop.current_time() == 1


# -- checkpoints ---------------------------------------------------------------


@pytest.mark.asyncop
async def test_checkpoint_if_cancelled_does_not_yield_when_not_cancelled(
    autojump_clock: VirtualClock,
) -> None:
    log: list[str] = []

    async def other() -> None:
        log.append("other ran")

    async with asyncop.scope() as s:
        s.spawn(other)
        await asyncop.checkpoint()  # let the child take its one step
        log.clear()
        s.spawn(other)
        with assert_checkpoints():
            assert pass_checkpoint()
        log.append("still the body")
    assert log[0] == "still the body"


@pytest.mark.asyncop
async def test_checkpoint_if_cancelled_reports_a_cancel(autojump_clock: VirtualClock) -> None:
    async with asyncop.move_on_after(1) as cs:
        cs.cancel()
        assert not pass_checkpoint()
        await asyncop.checkpoint()
    assert cs.cancelled_caught


def test_checkpoint_if_cancelled_outside_a_task_raises() -> None:
    with pytest.raises(RuntimeError):
        pass_checkpoint()


@pytest.mark.asyncop
async def test_checkpoint_in_a_cancelled_scope_raises_each_time(
    autojump_clock: VirtualClock,
) -> None:
    raised = 0
    async with asyncop.move_on_after(1) as cs:
        cs.cancel()
        for _ in range(3):
            try:
                await asyncop.checkpoint()
            except Cancelled:
                raised += 1
    assert raised == 3


# -- the virtual clock -----------------------------------------------------------


@pytest.mark.asyncop
async def test_current_time_follows_the_virtual_clock(autojump_clock: VirtualClock) -> None:
    start = asyncop.current_time()
    assert start == autojump_clock.now()
    await asyncop.sleep(12.5)
    assert asyncop.current_time() == autojump_clock.now() == start + 12.5


def test_autojump_clock_jumps_only_when_all_tasks_wait() -> None:
    clock = VirtualClock(autojump=True)
    seen: list[float] = []

    async def spinner(stop: asyncop.Event) -> None:
        while not stop.is_set():
            seen.append(asyncop.current_time())
            await asyncop.checkpoint()

    async def main() -> None:
        stop = asyncop.Event()
        async with asyncop.scope() as s:
            s.spawn(spinner, stop)
            for _ in range(50):
                await asyncop.checkpoint()
            stop.set()
        await asyncop.sleep(7)

    with asyncop.Runtime(2, clock=clock) as rt:
        rt.run(main)
    assert set(seen) == {0.0}
    assert clock.now() == 7


def test_manual_clock_waits_for_advance() -> None:
    clock = VirtualClock(autojump=False)
    woke: list[float] = []

    async def sleeper() -> None:
        await asyncop.sleep(5)
        woke.append(asyncop.current_time())

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(sleeper)
            await wait_all_blocked()
            clock.advance(4.5)
            await wait_all_blocked()
            assert woke == []
            clock.advance(0.5)

    with asyncop.Runtime(2, clock=clock) as rt:
        rt.run(main)
    assert woke == [5.0]


@pytest.mark.asyncop
async def test_wait_all_blocked_then_the_clock_moves(autojump_clock: VirtualClock) -> None:
    log: list[str] = []

    async def waiter(ev: asyncop.Event) -> None:
        await ev.wait_async()
        log.append("woken")

    ev = asyncop.Event()
    async with asyncop.scope() as s:
        for _ in range(3):
            s.spawn(waiter, ev)
        await wait_all_blocked()
        assert log == []
        assert asyncop.current_time() == 0
        ev.set()
        await wait_all_blocked()
        assert log == ["woken"] * 3


# -- a scope left by another task ---------------------------------------------


@pytest.mark.asyncop
async def test_exiting_a_scope_from_another_task_is_refused(autojump_clock: VirtualClock) -> None:
    cs = asyncop.move_on_after(10)
    seen: list[BaseException] = []

    async def exit_it() -> None:
        try:
            await cs.__aexit__(None, None, None)
        except RuntimeError as exc:
            seen.append(exc)

    await cs.__aenter__()
    block = asyncop.current_operation()
    assert block is not None
    helper = asyncop.current_runtime().spawn(exit_it)
    await helper
    assert len(seen) == 1
    assert "move_on_after(10)" in str(seen[0])
    # The scope is untouched: it is still the running code's scope, and its
    # own task leaves it as usual.
    assert asyncop.current_operation() is block
    assert not block.done
    await asyncop.sleep(1)
    await cs.__aexit__(None, None, None)
    assert block.state is OperationState.COMPLETED
    assert asyncop.current_operation() is not block


def test_exiting_a_sync_scope_from_another_thread_is_refused(vruntime: asyncop.Runtime) -> None:
    scope = vruntime.scope(name="entered here")
    block = scope.__enter__()
    seen: list[BaseException] = []

    def exit_it() -> None:
        try:
            scope.__exit__(None, None, None)
        except RuntimeError as exc:
            seen.append(exc)

    thread = threading.Thread(target=exit_it)
    thread.start()
    thread.join(10)
    assert len(seen) == 1
    assert "'entered here'" in str(seen[0])
    assert not block.done
    assert asyncop.current_operation() is block
    assert scope.__exit__(None, None, None) is False
    assert block.state is OperationState.COMPLETED
    assert asyncop.current_operation() is None


@pytest.mark.asyncop
async def test_several_tasks_in_wait_all_blocked_all_return(autojump_clock: VirtualClock) -> None:
    log: list[str] = []

    async def settle(name: str) -> None:
        await wait_all_blocked()
        log.append(name)

    async with asyncop.scope() as s:
        s.spawn(settle, "a")
        s.spawn(settle, "b")
        await wait_all_blocked()
        log.append("body")
    assert sorted(log) == ["a", "b", "body"]


@pytest.mark.asyncop
async def test_wait_all_blocked_returns_before_the_clock_jumps(
    autojump_clock: VirtualClock,
) -> None:
    async def nap() -> None:
        await asyncop.sleep(10)

    async with asyncop.scope() as s:
        s.spawn(nap)
        await wait_all_blocked()
        assert asyncop.current_time() == 0
    assert asyncop.current_time() == 10


@pytest.mark.asyncop
async def test_assert_checkpoints_counts_a_cancelled_checkpoint(
    autojump_clock: VirtualClock,
) -> None:
    with pytest.raises(AssertionError), assert_checkpoints():
        pass
    async with asyncop.move_on_after(1) as cs:
        cs.cancel()
        with assert_checkpoints():
            await asyncop.checkpoint()
    assert cs.cancelled_caught


@pytest.mark.asyncop
async def test_a_generator_resumed_by_another_task_cannot_leave_its_scope(
    autojump_clock: VirtualClock,
) -> None:
    async def numbers() -> Any:
        async with asyncop.scope(name="generator's scope"):
            yield 1
        yield 2

    gen = numbers()
    resumed = asyncop.Event()
    outcome: list[object] = []

    async def opener() -> None:
        assert await gen.__anext__() == 1  # enters the scope in this task
        await resumed.wait_async()
        assert asyncop.current_operation() is not None
        outcome.append(asyncop.current_operation().name)  # type: ignore[union-attr]

    async def resumer() -> None:
        try:
            await gen.__anext__()  # would leave the scope in this task
        except RuntimeError as exc:
            outcome.append(type(exc))
        resumed.set()

    async with asyncop.scope(supervise=True) as s:
        first = s.spawn(opener)
        await wait_all_blocked()
        s.spawn(resumer)
    assert outcome == [RuntimeError, "generator's scope"]
    # The opener still held the scope when it ended: it is closed for it.
    assert first.state is OperationState.FAILED
    assert "still open" in str(first.error)
