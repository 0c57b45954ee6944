"""``move_on_after``, ``fail_after``, ``move_on_at``, ``fail_at``, from the user's side."""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import asyncop
from asyncop import Cancelled, OperationState
from asyncop.testing import VirtualClock
from tests._freethreading import may_not_free_by_refcounting
from tests.conftest import Marker

pytestmark = pytest.mark.timeout(20)

MOVE_ON = [asyncop.move_on_after, asyncop.move_on_at]
ALL_FOUR = [asyncop.move_on_after, asyncop.move_on_at, asyncop.fail_after, asyncop.fail_at]


class Boom(Exception):
    """The failure the tests raise on purpose."""


def me() -> asyncop.AsyncOperation[Any]:
    op = asyncop.current_operation()
    assert op is not None
    return op


async def nap(seconds: float) -> str:
    await asyncop.sleep(seconds)
    return "done"


async def forever(log: list[str] | None = None) -> None:
    try:
        await asyncop.sleep_forever()
    finally:
        if log is not None:
            log.append("child ended")


def after(seconds: float, make: Callable[..., asyncop.TimeoutScope]) -> asyncop.TimeoutScope:
    """``make`` for ``seconds`` from now, whether it takes a length or a time."""
    if make in (asyncop.move_on_at, asyncop.fail_at):
        return make(asyncop.current_time() + seconds)
    return make(seconds)


# ----------------------------------------------------------------------
# The deadline ends the block: move on, or fail
# ----------------------------------------------------------------------


@pytest.mark.asyncop
@pytest.mark.parametrize("make", MOVE_ON)
async def test_move_on_ends_the_block_at_its_deadline_and_goes_on(
    autojump_clock: VirtualClock, make: Callable[..., asyncop.TimeoutScope]
) -> None:
    log: list[str] = []
    async with after(3, make) as cs:
        await asyncop.sleep_forever()
        log.append("not reached")
    log.append("after the block")
    assert log == ["after the block"]
    assert cs.cancelled_caught
    assert asyncop.current_time() == 3


@pytest.mark.asyncop
@pytest.mark.parametrize("make", ALL_FOUR)
async def test_block_that_finishes_in_time_catches_nothing(
    autojump_clock: VirtualClock, make: Callable[..., asyncop.TimeoutScope]
) -> None:
    async with after(5, make) as cs:
        await asyncop.sleep(2)
    assert not cs.cancelled_caught
    await asyncop.sleep(10)  # the old deadline must not fire later
    assert asyncop.current_time() == 12


@pytest.mark.asyncop
@pytest.mark.parametrize("make", [asyncop.fail_after, asyncop.fail_at])
async def test_fail_raises_timeout_error_from_the_cancelled(
    autojump_clock: VirtualClock, make: Callable[..., asyncop.TimeoutScope]
) -> None:
    reached: list[str] = []
    with pytest.raises(TimeoutError) as info:
        async with after(2, make) as cs:
            await asyncop.sleep(10)
            reached.append("no")
    assert reached == []
    assert cs.cancelled_caught
    assert isinstance(info.value.__cause__, Cancelled)
    assert make.__name__ in str(info.value)
    assert asyncop.current_time() == 2


@pytest.mark.asyncop
async def test_the_block_is_a_scope_in_the_tree(autojump_clock: VirtualClock) -> None:
    outer = me()
    async with asyncop.move_on_after(5):
        inner = me()
        assert inner is not outer
        assert inner.parent is outer
        assert inner.name == "move_on_after(5)"
        assert "move_on_after(5)" in outer.runtime.dump()
    assert me() is outer


@pytest.mark.asyncop
@pytest.mark.parametrize("make", ALL_FOUR)
async def test_zero_or_negative_time_cancels_at_the_first_await(
    autojump_clock: VirtualClock, make: Callable[..., asyncop.TimeoutScope]
) -> None:
    for seconds in (0, -1):
        try:
            async with after(seconds, make) as cs:
                await asyncop.checkpoint()
        except TimeoutError:
            assert make in (asyncop.fail_after, asyncop.fail_at)
        assert cs.cancelled_caught
    assert asyncop.current_time() == 0


@pytest.mark.asyncop
@pytest.mark.parametrize("make", ALL_FOUR)
async def test_inf_and_none_mean_no_limit(
    autojump_clock: VirtualClock, make: Callable[..., asyncop.TimeoutScope]
) -> None:
    for limit in (math.inf, None, 1e300):
        async with make(limit) as cs:
            assert cs.deadline >= 1e300  # a far-away deadline is kept, and never comes
            await asyncop.sleep(1e6)
        assert not cs.cancelled_caught
    assert asyncop.current_time() == 3e6


# ----------------------------------------------------------------------
# The deadline, read and moved
# ----------------------------------------------------------------------


@pytest.mark.asyncop
async def test_deadline_reads_as_a_time_on_the_runtime_clock(autojump_clock: VirtualClock) -> None:
    await asyncop.sleep(10)
    cs = asyncop.move_on_after(5)
    assert cs.deadline == 15  # before entry: seconds from now
    await asyncop.sleep(1)
    async with cs:
        assert cs.deadline == 16  # fixed at entry, as the timeout starts there
    assert cs.deadline == 16
    assert asyncop.move_on_at(42).deadline == 42
    assert asyncop.fail_at(-math.inf).deadline == -math.inf


@pytest.mark.asyncop
@pytest.mark.parametrize("make", ALL_FOUR)
async def test_deadline_moved_out_while_the_block_runs(
    autojump_clock: VirtualClock, make: Callable[..., asyncop.TimeoutScope]
) -> None:
    async with after(1, make) as cs:
        cs.deadline += 2
        await asyncop.sleep(2.5)
        cs.deadline = math.inf  # no limit from here on
        await asyncop.sleep(100)
    assert not cs.cancelled_caught
    assert cs.deadline == math.inf
    assert asyncop.current_time() == 102.5


@pytest.mark.asyncop
async def test_deadline_pulled_in_cancels_at_the_next_await(autojump_clock: VirtualClock) -> None:
    async with asyncop.move_on_after(100) as cs:
        cs.deadline = asyncop.current_time() + 1
        await asyncop.sleep(50)
    assert cs.cancelled_caught
    assert asyncop.current_time() == 1
    with pytest.raises(TimeoutError):
        async with asyncop.fail_after(100) as cs:
            cs.deadline = asyncop.current_time()  # now: due at once
            await asyncop.sleep(50)
    assert asyncop.current_time() == 1


@pytest.mark.asyncop
async def test_deadline_set_before_entry_is_the_one_used(autojump_clock: VirtualClock) -> None:
    cs = asyncop.move_on_after(100)
    cs.deadline = 4
    async with cs:
        await asyncop.sleep_forever()
    assert cs.cancelled_caught
    assert asyncop.current_time() == 4


@pytest.mark.asyncop
async def test_bad_deadline_raises_and_leaves_the_deadline_alone(
    autojump_clock: VirtualClock,
) -> None:
    cs = asyncop.move_on_after(3)
    for bad, error in ((math.nan, ValueError), ("1", TypeError), (True, TypeError)):
        with pytest.raises(error, match="deadline"):
            cs.deadline = bad
        assert cs.deadline == asyncop.current_time() + 3
        async with asyncop.move_on_after(2) as inner:
            with pytest.raises(error, match="deadline"):
                inner.deadline = bad
            assert inner.deadline == asyncop.current_time() + 2
            await asyncop.sleep(1)
        assert not inner.cancelled_caught


# ----------------------------------------------------------------------
# Nesting, cancels from outside, cancel()
# ----------------------------------------------------------------------


@pytest.mark.asyncop
@pytest.mark.parametrize("inner_make", ALL_FOUR)
async def test_outer_deadline_passes_through_the_inner_scope(
    autojump_clock: VirtualClock, inner_make: Callable[..., asyncop.TimeoutScope]
) -> None:
    log: list[str] = []
    async with asyncop.move_on_after(1) as outer:
        async with after(10, inner_make) as inner:
            await asyncop.sleep_forever()
        log.append("after the inner block")  # not reached: Cancelled went through
    log.append("after the outer block")
    assert log == ["after the outer block"]
    assert outer.cancelled_caught
    assert not inner.cancelled_caught
    assert asyncop.current_time() == 1


@pytest.mark.asyncop
async def test_inner_deadline_leaves_the_outer_scope_running(autojump_clock: VirtualClock) -> None:
    async with asyncop.move_on_after(10) as outer:
        async with asyncop.move_on_after(1) as inner:
            await asyncop.sleep_forever()
        await asyncop.sleep(2)
    assert inner.cancelled_caught
    assert not outer.cancelled_caught
    assert asyncop.current_time() == 3


@pytest.mark.asyncop
async def test_same_instant_deadlines_belong_to_the_outer_scope(
    autojump_clock: VirtualClock,
) -> None:
    with pytest.raises(TimeoutError, match="fail_after"):
        async with asyncop.fail_after(1) as outer, asyncop.move_on_after(1) as inner:
            await asyncop.sleep_forever()
    assert outer.cancelled_caught
    assert not inner.cancelled_caught


@pytest.mark.asyncop
@pytest.mark.parametrize("make", ALL_FOUR)
async def test_cancel_from_outside_passes_through(
    autojump_clock: VirtualClock, make: Callable[..., asyncop.TimeoutScope]
) -> None:
    log: list[str] = []
    seen: list[asyncop.TimeoutScope] = []

    async def worker() -> None:
        async with after(100, make) as cs:
            seen.append(cs)
            await asyncop.sleep_forever()
        log.append("after the block")  # must not run: the task was cancelled

    op = me().spawn(worker)
    await asyncop.sleep(1)
    op.cancel("from outside")
    await asyncop.race(op)
    assert op.state is OperationState.CANCELLED
    assert log == []
    assert not seen[0].cancelled_caught
    assert asyncop.current_time() == 1


@pytest.mark.asyncop
async def test_cancel_from_outside_after_the_deadline_fired_still_passes(
    autojump_clock: VirtualClock,
) -> None:
    log: list[str] = []

    async def worker(cs: asyncop.TimeoutScope) -> None:
        async with cs:
            me().spawn(forever, log)
            # The deadline fires at 1 and cancels the child; the exit waits for it.
        log.append("after the block")

    cs = asyncop.move_on_after(1)
    op = me().spawn(worker, cs)
    await asyncop.sleep(0.5)
    op.cancel("from outside")
    await asyncop.race(op)
    assert log == ["child ended"]
    assert op.state is OperationState.CANCELLED
    assert not cs.cancelled_caught


@pytest.mark.asyncop
@pytest.mark.parametrize("make", ALL_FOUR)
async def test_cancel_ends_the_block_without_timeout_error(
    autojump_clock: VirtualClock, make: Callable[..., asyncop.TimeoutScope]
) -> None:
    cs = after(100, make)
    with pytest.raises(RuntimeError, match="not entered"):
        cs.cancel()
    async with cs:
        cs.cancel("enough")
        await asyncop.sleep(1)
    assert cs.cancelled_caught
    assert asyncop.current_time() == 0


@pytest.mark.asyncop
async def test_shield_keeps_a_cancel_from_outside_out_of_the_block(
    autojump_clock: VirtualClock,
) -> None:
    log: list[Any] = []

    async def cleanup() -> None:
        try:
            await asyncop.sleep_forever()
        finally:
            async with asyncop.move_on_after(5, shield=True) as cs:
                await asyncop.sleep(2)  # runs, though the task is cancelled
                log.append(("cleaned", asyncop.current_time()))
                await asyncop.sleep_forever()  # the deadline still ends it
            log.append(("caught", cs.cancelled_caught))

    op = me().spawn(cleanup)
    await asyncop.sleep(1)
    op.cancel()
    await asyncop.race(op)
    assert log == [("cleaned", 3), ("caught", True)]
    assert op.state is OperationState.CANCELLED


# ----------------------------------------------------------------------
# Children spawned into the block
# ----------------------------------------------------------------------


@pytest.mark.asyncop
async def test_children_are_cancelled_at_the_deadline_and_waited_for(
    autojump_clock: VirtualClock,
) -> None:
    log: list[str] = []
    async with asyncop.move_on_after(2) as cs:
        quick = me().spawn(nap, 1)
        slow = me().spawn(forever, log)
        # The block ends at once; the exit waits for the children.
    assert log == ["child ended"]
    assert quick.state is OperationState.COMPLETED
    assert slow.state is OperationState.CANCELLED
    assert cs.cancelled_caught
    assert asyncop.current_time() == 2


@pytest.mark.asyncop
async def test_children_that_end_in_time_leave_nothing_caught(
    autojump_clock: VirtualClock,
) -> None:
    async with asyncop.fail_after(5) as cs:
        ops = [me().spawn(nap, n) for n in (1, 2, 3)]
    assert [op.result() for op in ops] == ["done"] * 3
    assert not cs.cancelled_caught
    assert asyncop.current_time() == 3


@pytest.mark.asyncop
async def test_child_failure_is_raised_not_moved_on(autojump_clock: VirtualClock) -> None:
    async def fail() -> None:
        await asyncop.sleep(1)
        raise Boom

    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.move_on_after(10) as cs:
            me().spawn(fail)
            await asyncop.sleep_forever()
    assert info.group_contains(Boom)
    assert not cs.cancelled_caught
    assert asyncop.current_time() == 1


@pytest.mark.asyncop
async def test_an_error_leaving_the_block_comes_out_in_a_group(
    autojump_clock: VirtualClock,
) -> None:
    # Unlike trio's cancel scopes: the block is a scope's block, whose errors
    # are grouped even alone; only the scope's own expiry is bare.
    for timeout_scope in (asyncop.move_on_after, asyncop.fail_after):
        with pytest.raises(ExceptionGroup) as info:
            async with timeout_scope(10) as cs:
                raise Boom
        assert [type(e) for e in info.value.exceptions] == [Boom]
        assert not cs.cancelled_caught
    with pytest.raises(ExceptionGroup) as nested:
        async with asyncop.fail_after(10) as outer, asyncop.fail_after(1) as inner:
            await asyncop.sleep_forever()
    assert [type(e) for e in nested.value.exceptions] == [TimeoutError]
    assert inner.cancelled_caught and not outer.cancelled_caught
    assert asyncop.current_time() == 1


@pytest.mark.asyncop
async def test_fail_after_times_out_a_slow_child(autojump_clock: VirtualClock) -> None:
    log: list[str] = []
    with pytest.raises(TimeoutError):
        async with asyncop.fail_after(3):
            me().spawn(forever, log)
    assert log == ["child ended"]
    assert asyncop.current_time() == 3


# ----------------------------------------------------------------------
# Misuse: raised at once, with nothing made
# ----------------------------------------------------------------------


@pytest.mark.asyncop
@pytest.mark.parametrize("make", ALL_FOUR)
async def test_bad_times_raise_before_anything_is_made(
    autojump_clock: VirtualClock, make: Callable[..., asyncop.TimeoutScope]
) -> None:
    bad_values = ((math.nan, ValueError), ("1", TypeError), (True, TypeError), ([], TypeError))
    for bad, error in bad_values:
        with pytest.raises(error, match=make.__name__):
            make(bad)
    assert me().children() == []
    assert me().runtime.registrations() == 0


def test_called_outside_an_operation_raises() -> None:
    for make in ALL_FOUR:
        with pytest.raises(RuntimeError, match=f"{make.__name__}.*operation"):
            make(1)


@pytest.mark.asyncop
async def test_sync_with_in_a_coroutine_is_refused(autojump_clock: VirtualClock) -> None:
    cs = asyncop.move_on_after(1)
    with pytest.raises(RuntimeError, match=r"async with asyncop\.move_on_after"), cs:
        pass  # pragma: no cover
    assert me().children() == []
    async with cs:  # still usable the right way
        await asyncop.sleep_forever()
    assert cs.cancelled_caught


@pytest.mark.asyncop
async def test_entering_twice_is_refused(autojump_clock: VirtualClock) -> None:
    cs = asyncop.fail_after(1)
    async with cs:
        pass
    with pytest.raises(RuntimeError, match=r"already entered.*call it again"):
        async with cs:
            pass  # pragma: no cover


# ----------------------------------------------------------------------
# The sync form: a thread inside a scope, a callback on a worker
# ----------------------------------------------------------------------


@pytest.fixture
def manual() -> Iterator[tuple[asyncop.Runtime, VirtualClock]]:
    """A 2-worker runtime on a virtual clock that moves only by ``advance()``."""
    clock = VirtualClock(autojump=False)
    rt = asyncop.Runtime(2, name=f"tsrt{id(object()):x}", clock=clock)
    try:
        yield rt, clock
    finally:
        assert rt.shutdown(timeout=10), "runtime did not shut down in 10 s"


def _block_until_cancelled() -> None:
    token = me().token
    token.wait()
    token.check()


def test_sync_form_in_a_thread_inside_a_scope(runtime: asyncop.Runtime) -> None:
    # On the real clock: this thread is outside the runtime, and an
    # autojumping clock cannot see it work between two waits.
    log: list[str] = []
    start = runtime.now()
    with runtime.scope():
        with asyncop.move_on_after(0.05) as cs:
            me().spawn(forever, log)
            _block_until_cancelled()
            log.append("not reached")
        log.append("moved on")
        assert cs.cancelled_caught
        with pytest.raises(TimeoutError) as info, asyncop.fail_after(0.05) as failed:
            _block_until_cancelled()
        assert isinstance(info.value.__cause__, Cancelled)
        assert failed.cancelled_caught
        with asyncop.fail_after(5) as in_time:
            failed.deadline = 0  # an exited scope: harmless
        assert not in_time.cancelled_caught
    assert log == ["child ended", "moved on"]
    assert runtime.now() - start < 4


def test_sync_form_in_a_callback_on_a_worker(manual: tuple[asyncop.Runtime, VirtualClock]) -> None:
    rt, clock = manual

    def callback() -> tuple[bool, float]:
        with asyncop.move_on_after(10) as cs:
            cs.deadline -= 5
            _block_until_cancelled()
        return cs.cancelled_caught, asyncop.current_time()

    op = rt.spawn(callback)
    deadline = time.monotonic() + 5
    while rt.registrations() == 0 and time.monotonic() < deadline:
        time.sleep(0.001)  # until the block's deadline timer is armed
    clock.advance(5)
    assert op.wait(5).value == (True, 5)


def test_sync_form_passes_a_cancel_from_outside(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, _clock = manual
    log: list[str] = []
    entered = threading.Event()

    def callback() -> None:
        with asyncop.move_on_after(10) as cs:
            entered.set()
            _block_until_cancelled()
        log.append(f"after the block {cs.cancelled_caught}")

    op = rt.spawn(callback)
    assert entered.wait(5)
    op.cancel("from outside")
    assert op.wait(5).state is OperationState.CANCELLED
    assert log == []


# ----------------------------------------------------------------------
# Nothing left in a reference cycle
# ----------------------------------------------------------------------


@may_not_free_by_refcounting
@pytest.mark.parametrize("make", [asyncop.move_on_after, asyncop.fail_after])
def test_an_expired_block_is_freed_by_refcounting(
    vruntime: asyncop.Runtime, no_gc: None, make: Callable[..., asyncop.TimeoutScope]
) -> None:
    refs: list[weakref.ref[Marker]] = []

    async def work() -> None:
        marker = Marker()
        refs.append(weakref.ref(marker))
        try:
            async with make(1):
                await asyncop.sleep_forever()
        except TimeoutError as e:
            del e

    vruntime.run(work)
    # (A worker may free what it dropped last only at its exit: see
    # test_exception_rules.py. The collector stays off.)
    assert vruntime.shutdown(timeout=10)
    assert refs[0]() is None, "the scope, its exceptions or frames are in a cycle"


def test_an_expired_sync_block_is_freed_by_refcounting(
    vruntime: asyncop.Runtime, no_gc: None
) -> None:
    def work() -> weakref.ref[Marker]:
        marker = Marker()
        with vruntime.scope():
            with asyncop.move_on_after(1):
                _block_until_cancelled()
            try:
                with asyncop.fail_after(1):
                    _block_until_cancelled()
            except TimeoutError as e:
                del e
        return weakref.ref(marker)

    ref = work()
    assert ref() is None, "the scope, its exceptions or frames are in a cycle"
