"""Sync scopes: ``with runtime.scope() as root:`` blocks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop import Cancelled, OperationState
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(20)

REPO = Path(__file__).resolve().parents[2]


class Boom(Exception):
    """The failure the tests raise on purpose."""


@pytest.fixture
def manual() -> Iterator[tuple[asyncop.Runtime, VirtualClock]]:
    """A 2-worker runtime on a virtual clock that moves only by ``advance()``."""
    clock = VirtualClock(autojump=False)
    rt = asyncop.Runtime(2, name=f"mrt{id(object()):x}", clock=clock)
    try:
        yield rt, clock
    finally:
        assert rt.shutdown(timeout=10), "runtime did not shut down in 10 s"
        prefix = f"{rt.name}-"
        assert [t for t in threading.enumerate() if t.name.startswith(prefix)] == []


def waits_for_cancel(started: threading.Event, log: list[str]) -> Callable[[], None]:
    """A child body: signal ``started``, block on its token, then leave cancelled."""

    def child() -> None:
        op = asyncop.current_operation()
        assert op is not None
        started.set()
        if op.token.wait(5):
            log.append("saw cancel")
            time.sleep(0.02)  # the exit must still be waiting after this
            log.append("ended")
        op.token.check()

    return child


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


# ----------------------------------------------------------------------
# The exit waits for the children; spawning into the scope
# ----------------------------------------------------------------------


def test_exit_waits_for_every_child(runtime: asyncop.Runtime) -> None:
    release = threading.Event()
    ended: list[int] = []

    def child(i: int) -> None:
        release.wait(5)
        time.sleep(0.03)
        ended.append(i)

    with runtime.scope() as root:
        kids = [root.spawn(child, i) for i in range(4)]
        release.set()
    assert sorted(ended) == [0, 1, 2, 3]
    assert all(kid.state is OperationState.COMPLETED for kid in kids)
    assert root.first_child is None


def test_child_can_spawn_a_sibling_after_the_block_left(runtime: asyncop.Runtime) -> None:
    body_left = threading.Event()
    siblings: list[asyncop.AsyncOperation] = []
    ran: list[str] = []

    def late_sibling() -> None:
        ran.append("sibling")

    def first_child(root: asyncop.AsyncOperation) -> None:
        body_left.wait(5)
        time.sleep(0.05)  # let the scope's thread block at the exit
        siblings.append(root.spawn(late_sibling))

    with runtime.scope() as root:
        root.spawn(first_child, root)
        body_left.set()
    assert ran == ["sibling"]
    assert siblings[0].state is OperationState.COMPLETED
    assert root.state is OperationState.COMPLETED


def test_spawn_after_the_scope_exited_raises_runtime_error(runtime: asyncop.Runtime) -> None:
    with runtime.scope(name="closed") as root:
        pass
    with pytest.raises(RuntimeError, match="closed"):
        root.spawn(lambda: None)


def test_children_are_linked_under_the_scope(runtime: asyncop.Runtime) -> None:
    release = threading.Event()
    with runtime.scope() as root:
        kid = root.spawn(release.wait, 5)
        assert kid.parent is root
        assert root.children() == [kid]
        release.set()
    assert kid.parent is None


# ----------------------------------------------------------------------
# current_operation() and linking
# ----------------------------------------------------------------------


def test_current_operation_inside_the_block_is_the_scope(runtime: asyncop.Runtime) -> None:
    with runtime.scope() as root:
        inside = asyncop.current_operation()
    assert inside is root


def test_current_operation_is_restored_after_the_block(runtime: asyncop.Runtime) -> None:
    with runtime.scope(), runtime.scope():
        pass
    assert asyncop.current_operation() is None


def test_scope_in_a_callback_is_linked_under_the_callback(runtime: asyncop.Runtime) -> None:
    seen: dict[str, Any] = {}

    def work(op: asyncop.AsyncOperation, _context: object) -> None:
        with runtime.scope() as inner:
            seen["parent"] = inner.parent
            seen["current"] = asyncop.current_operation() is inner
        seen["after"] = asyncop.current_operation()

    op = runtime.create(work)
    runtime.submit(op)
    assert op.wait(5).state is OperationState.COMPLETED
    assert seen == {"parent": op, "current": True, "after": op}


def test_top_level_scope_has_no_parent(runtime: asyncop.Runtime) -> None:
    with runtime.scope() as root:
        assert root.parent is None
        assert root.state is OperationState.RUNNING


# ----------------------------------------------------------------------
# Errors in the body and in children
# ----------------------------------------------------------------------


def test_body_error_cancels_children_and_waits_for_them(runtime: asyncop.Runtime) -> None:
    started = threading.Event()
    log: list[str] = []
    with pytest.raises(ExceptionGroup), runtime.scope() as root:
        kid = root.spawn(waits_for_cancel(started, log))
        assert started.wait(5)
        raise Boom("body")
    assert log == ["saw cancel", "ended"]
    assert kid.state is OperationState.CANCELLED


def test_body_error_is_raised_in_an_exception_group_even_alone(
    runtime: asyncop.Runtime,
) -> None:
    error = Boom("only one")
    with pytest.raises(ExceptionGroup) as caught, runtime.scope() as root:
        raise error
    assert list(caught.value.exceptions) == [error]
    assert root.state is OperationState.FAILED


def test_keyboard_interrupt_in_body_cancels_waits_and_reraises_itself(
    runtime: asyncop.Runtime,
) -> None:
    started = threading.Event()
    log: list[str] = []
    interrupt = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt) as caught, runtime.scope() as root:
        kid = root.spawn(waits_for_cancel(started, log))
        assert started.wait(5)
        raise interrupt
    assert caught.value is interrupt
    assert log == ["saw cancel", "ended"]
    assert kid.state is OperationState.CANCELLED
    assert root.state is OperationState.CANCELLED


def test_failing_child_cancels_its_siblings(runtime: asyncop.Runtime) -> None:
    started = threading.Event()
    log: list[str] = []

    def fail() -> None:
        started.wait(5)
        raise Boom("child")

    with pytest.raises(ExceptionGroup), runtime.scope() as root:
        sibling = root.spawn(waits_for_cancel(started, log))
        root.spawn(fail)
    assert log == ["saw cancel", "ended"]
    assert sibling.state is OperationState.CANCELLED
    assert root.state is OperationState.FAILED


def test_cancelled_siblings_never_appear_in_the_group(runtime: asyncop.Runtime) -> None:
    started = threading.Event()
    error = Boom("child")

    def fail() -> None:
        started.wait(5)
        raise error

    with pytest.raises(ExceptionGroup) as caught, runtime.scope() as root:
        root.spawn(waits_for_cancel(started, []))
        root.spawn(fail)
    assert leaves(caught.value) == [error]


def test_block_raises_a_group_of_every_child_failure(runtime: asyncop.Runtime) -> None:
    both_running = threading.Barrier(2, timeout=5)

    def fail(tag: str) -> None:
        both_running.wait()
        raise Boom(tag)

    with pytest.raises(ExceptionGroup) as caught, runtime.scope() as root:
        root.spawn(fail, "a")
        root.spawn(fail, "b")
    assert sorted(str(exc) for exc in leaves(caught.value)) == ["a", "b"]


def test_body_error_and_child_failure_share_one_group(runtime: asyncop.Runtime) -> None:
    child_failed = threading.Event()
    body_error = Boom("body")

    def fail() -> None:
        child_failed.set()
        raise Boom("child")

    with pytest.raises(ExceptionGroup) as caught, runtime.scope() as root:
        kid = root.spawn(fail)
        assert child_failed.wait(5)
        kid.wait(5)
        raise body_error
    assert sorted(str(exc) for exc in leaves(caught.value)) == ["body", "child"]
    assert body_error in leaves(caught.value)


def test_failing_child_error_is_observed_through_the_scope(runtime: asyncop.Runtime) -> None:
    with pytest.raises(ExceptionGroup) as caught, runtime.scope() as root:
        root.spawn(lambda: 1 / 0)
    assert isinstance(leaves(caught.value)[0], ZeroDivisionError)
    # The error leaves through the block only: the scope keeps no reference
    # to it (its traceback holds the frame holding ``root``: a cycle).
    assert root.state is OperationState.FAILED
    assert root.error is None
    with pytest.raises(asyncop.InvalidStateError, match="raised out of its block"):
        root.result()


# ----------------------------------------------------------------------
# supervise=True
# ----------------------------------------------------------------------


def test_supervised_failing_child_does_not_cancel_its_siblings(
    runtime: asyncop.Runtime,
) -> None:
    seen: list[bool] = []

    def fail() -> None:
        raise Boom("supervised")

    def sibling(bad: asyncop.AsyncOperation) -> str:
        bad.wait(5)
        op = asyncop.current_operation()
        assert op is not None
        seen.append(op.token.wait(0.05))
        return "kept going"

    with runtime.scope(supervise=True) as root:
        bad = root.spawn(fail)
        good = root.spawn(sibling, bad)
    assert seen == [False]
    assert good.result() == "kept going"


def test_supervised_failing_child_does_not_make_the_block_raise(
    runtime: asyncop.Runtime,
) -> None:
    after: list[str] = []
    with runtime.scope(supervise=True) as root:
        root.spawn(lambda: 1 / 0)
    after.append("left")
    assert after == ["left"]
    assert root.state is OperationState.COMPLETED


def test_supervised_failure_stays_on_the_child(runtime: asyncop.Runtime) -> None:
    error = Boom("mine")

    def fail() -> None:
        raise error

    with runtime.scope(supervise=True) as root:
        bad = root.spawn(fail)
    assert bad.state is OperationState.FAILED
    with pytest.raises(Boom) as caught:
        bad.result()
    assert caught.value is error
    assert root.error is None


# ----------------------------------------------------------------------
# Normal completion
# ----------------------------------------------------------------------


def test_scope_whose_block_and_children_ended_normally_is_completed(
    runtime: asyncop.Runtime,
) -> None:
    with runtime.scope(name="fine") as root:
        kids = [root.spawn(lambda i=i: i * 2) for i in range(3)]
    assert root.state is OperationState.COMPLETED
    assert root.done
    assert [kid.result() for kid in kids] == [0, 2, 4]


# ----------------------------------------------------------------------
# timeout= and deadline=
# ----------------------------------------------------------------------


def test_timeout_that_cancels_a_child_raises_bare_timeout_error(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, clock = manual
    started = threading.Event()
    log: list[str] = []
    with pytest.raises(TimeoutError) as caught, rt.scope(timeout=10) as root:
        kid = root.spawn(waits_for_cancel(started, log))
        assert started.wait(5)
        clock.advance(11)
    assert type(caught.value) is TimeoutError
    assert root.expired
    assert kid.state is OperationState.CANCELLED
    assert log == ["saw cancel", "ended"]


def test_timeout_that_interrupts_the_body_raises_timeout_error(
    vruntime: asyncop.Runtime,
) -> None:
    start = vruntime.now()
    with pytest.raises(TimeoutError) as caught, vruntime.scope(timeout=3600) as root:
        assert root.token.wait(5)  # autojump moves the clock an hour
        root.token.check()
    assert type(caught.value) is TimeoutError
    assert root.expired
    assert vruntime.now() - start >= 3600


def test_deadline_that_interrupts_nothing_does_not_raise(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, clock = manual
    with rt.scope(timeout=1) as root:
        clock.advance(2)
        assert root.token.wait(5)
        # The body ends normally: nothing was interrupted.
    assert root.expired
    assert root.state is OperationState.COMPLETED


def test_deadline_argument_is_an_absolute_time(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, clock = manual
    clock.advance(100)
    with rt.scope(deadline=105) as root:
        assert root.deadline == 105
        clock.advance(4)
        assert not root.token.wait(0.05)
        clock.advance(1)
        assert root.token.wait(5)
        assert root.expired


def test_timeout_and_deadline_together_keep_the_earlier(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, _clock = manual
    with rt.scope(timeout=10, deadline=5) as root:
        assert root.deadline == 5
    with rt.scope(timeout=3, deadline=50) as root:
        assert root.deadline == 3


def test_moving_the_deadline_later_postpones_the_timeout(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, clock = manual
    with rt.scope(timeout=1) as root:
        root.deadline = rt.now() + 100
        clock.advance(50)
        assert not root.token.wait(0.1)
        clock.advance(60)
        assert root.token.wait(5)
    assert root.expired


def test_moving_the_deadline_into_the_past_cancels_at_once(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, _clock = manual
    with pytest.raises(TimeoutError), rt.scope(timeout=100) as root:
        root.deadline = rt.now()
        assert root.token.cancelled
        assert root.expired
        root.token.check()


def test_clearing_the_deadline_disarms_it(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, clock = manual
    with rt.scope(timeout=1) as root:
        root.deadline = None
        clock.advance(10)
        assert not root.token.wait(0.1)
    assert not root.expired
    assert root.state is OperationState.COMPLETED
    assert rt.registrations() == 0


# ----------------------------------------------------------------------
# Nested deadlines
# ----------------------------------------------------------------------


def test_inner_deadline_raises_only_in_the_inner_scope(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, clock = manual
    with rt.scope(timeout=100) as outer:
        with pytest.raises(TimeoutError), rt.scope(timeout=1) as inner:
            clock.advance(2)
            assert inner.token.wait(5)
            inner.token.check()
        assert not outer.token.cancelled
    assert inner.expired
    assert not outer.expired
    assert outer.state is OperationState.COMPLETED


def test_outer_deadline_passes_cancelled_through_the_inner_scope(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, clock = manual
    passed: list[str] = []
    with pytest.raises(TimeoutError), rt.scope(timeout=1) as outer:
        try:
            with rt.scope(timeout=100) as inner:
                clock.advance(2)
                assert inner.token.wait(5)
                inner.token.check()
        except Cancelled:
            passed.append("inner let Cancelled pass")
            raise
    assert passed == ["inner let Cancelled pass"]
    assert outer.expired
    assert not inner.expired


@pytest.mark.parametrize("outer_armed_last", [False, True])
def test_same_instant_deadlines_outer_raises_and_inner_passes(
    manual: tuple[asyncop.Runtime, VirtualClock], outer_armed_last: bool
) -> None:
    rt, clock = manual
    when = rt.now() + 5
    passed: list[str] = []
    with pytest.raises(TimeoutError) as caught, rt.scope(deadline=when) as outer:
        try:
            with rt.scope(deadline=when) as inner:
                if outer_armed_last:
                    # Re-arm the outer timer after the inner one, so the
                    # inner deadline is the first to be processed.
                    outer.deadline = when
                clock.advance(5)
                assert inner.token.wait(5)
                inner.token.check()
        except Cancelled:
            passed.append("inner let Cancelled pass")
            raise
    assert type(caught.value) is TimeoutError
    assert passed == ["inner let Cancelled pass"]
    assert outer.expired
    assert not inner.expired


# ----------------------------------------------------------------------
# root.cancel() from inside the block
# ----------------------------------------------------------------------


def test_cancel_from_inside_stops_at_the_scope(runtime: asyncop.Runtime) -> None:
    after: list[str] = []
    with runtime.scope() as root:
        root.cancel()
        root.token.check()
        after.append("not reached")
    after.append("left normally")
    assert after == ["left normally"]
    assert root.state is OperationState.CANCELLED
    assert not root.expired


def test_cancel_from_inside_cancels_the_children(runtime: asyncop.Runtime) -> None:
    started = threading.Event()
    log: list[str] = []
    with runtime.scope() as root:
        kid = root.spawn(waits_for_cancel(started, log))
        assert started.wait(5)
        root.cancel()
    assert log == ["saw cancel", "ended"]
    assert kid.state is OperationState.CANCELLED


def test_child_spawned_into_a_cancelled_scope_never_runs(runtime: asyncop.Runtime) -> None:
    ran: list[str] = []
    with runtime.scope() as root:
        root.cancel()
        kid = root.spawn(ran.append, "ran")
        assert kid.state is OperationState.CANCELLED
        assert kid.token.cancelled
    assert ran == []


def test_cancelled_propagates_when_an_enclosing_scope_was_cancelled_too(
    runtime: asyncop.Runtime,
) -> None:
    passed: list[str] = []
    with runtime.scope() as outer:
        try:
            with runtime.scope() as inner:
                outer.cancel()
                inner.token.check()
        except Cancelled:
            passed.append("propagated out of inner")
            raise
    assert passed == ["propagated out of inner"]
    assert outer.state is OperationState.CANCELLED
    assert inner.state is OperationState.CANCELLED


def test_cancel_of_an_inner_scope_does_not_reach_the_outer(runtime: asyncop.Runtime) -> None:
    with runtime.scope() as outer:
        with runtime.scope() as inner:
            inner.cancel()
            inner.token.check()
        assert not outer.token.cancelled
    assert outer.state is OperationState.COMPLETED
    assert inner.state is OperationState.CANCELLED


# ----------------------------------------------------------------------
# Entering is not a cancellation point; shield=True
# ----------------------------------------------------------------------


def test_entering_a_scope_in_a_cancelled_callback_does_not_raise(
    runtime: asyncop.Runtime,
) -> None:
    log: list[Any] = []

    def work(op: asyncop.AsyncOperation, _context: object) -> None:
        op.cancel()
        try:
            with runtime.scope() as inner:
                log.append(("body", inner.token.cancelled))
            log.append("after the block")
        except BaseException as exc:
            log.append(exc)
            raise
        op.token.check()

    op = runtime.create(work)
    runtime.submit(op)
    assert op.wait(5).state is OperationState.CANCELLED
    # Entering did not raise; the exit did, as the enclosing operation was
    # cancelled from outside the scope: the code after the block never ran.
    assert log[0] == ("body", True)
    assert len(log) == 2 and isinstance(log[1], Cancelled)


def test_scope_in_a_cancelled_callback_is_running_during_its_block(
    runtime: asyncop.Runtime,
) -> None:
    states: list[OperationState] = []

    def work(op: asyncop.AsyncOperation, _context: object) -> None:
        op.cancel()
        try:
            with runtime.scope() as inner:
                states.append(inner.state)
                inner.token.check()
        finally:
            states.append(inner.state)

    op = runtime.create(work)
    runtime.submit(op)
    assert op.wait(5).state is OperationState.CANCELLED
    assert states == [OperationState.RUNNING, OperationState.CANCELLED]


def test_child_spawned_into_a_scope_in_a_cancelled_callback_is_born_cancelled(
    runtime: asyncop.Runtime,
) -> None:
    seen: dict[str, Any] = {}
    ran: list[str] = []

    def work(op: asyncop.AsyncOperation, _context: object) -> None:
        op.cancel()
        try:
            with runtime.scope() as inner:
                kid = inner.spawn(ran.append, "ran")
                seen["kid"] = (kid.state, kid.token.cancelled)
        except BaseException as exc:
            seen["raised"] = exc

    op = runtime.create(work)
    runtime.submit(op)
    op.wait(5)
    assert seen["kid"] == (OperationState.CANCELLED, True)
    assert isinstance(seen["raised"], Cancelled)
    assert ran == []


def test_shielded_scope_in_a_cancelled_callback_is_not_cancelled(
    runtime: asyncop.Runtime,
) -> None:
    seen: dict[str, Any] = {}

    def work(op: asyncop.AsyncOperation, _context: object) -> str:
        op.cancel()
        with runtime.scope(shield=True) as shielded:
            seen["cancelled"] = shielded.token.cancelled
            kid = shielded.spawn(lambda: "child ran")
        seen["kid"] = kid.result()
        seen["state"] = shielded.state
        return "done"

    op = runtime.create(work)
    runtime.submit(op)
    result = op.wait(5)
    assert seen == {"cancelled": False, "kid": "child ran", "state": OperationState.COMPLETED}
    # The callback returned normally, so it keeps its value.
    assert result.state is OperationState.COMPLETED
    assert result.value == "done"


def test_cancel_of_the_enclosing_operation_does_not_enter_a_shielded_scope(
    runtime: asyncop.Runtime,
) -> None:
    entered = threading.Event()
    outer_cancelled = threading.Event()
    seen: dict[str, bool] = {}

    def child() -> None:
        op = asyncop.current_operation()
        assert op is not None
        outer_cancelled.wait(5)
        seen["child"] = op.token.cancelled

    def work(op: asyncop.AsyncOperation, _context: object) -> None:
        with runtime.scope(shield=True) as shielded:
            kid = shielded.spawn(child)
            entered.set()
            outer_cancelled.wait(5)
            seen["callback"] = op.token.cancelled
            seen["shielded"] = shielded.token.cancelled
        seen["kid completed"] = kid.state is OperationState.COMPLETED

    op = runtime.create(work)
    runtime.submit(op)
    assert entered.wait(5)
    op.cancel()
    outer_cancelled.set()
    op.wait(5)
    assert seen == {
        "callback": True,
        "shielded": False,
        "child": False,
        "kid completed": True,
    }


def test_shielded_scope_still_obeys_its_own_deadline(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, clock = manual
    with rt.scope() as outer:
        outer.cancel()
        with pytest.raises(TimeoutError), rt.scope(shield=True, timeout=1) as shielded:
            assert not shielded.token.cancelled
            clock.advance(2)
            assert shielded.token.wait(5)
            shielded.token.check()
        assert shielded.expired


# ----------------------------------------------------------------------
# A scope's error leaves through its block only
# ----------------------------------------------------------------------


def test_enclosing_scope_that_catches_the_inner_group_completes(
    runtime: asyncop.Runtime,
) -> None:
    with runtime.scope() as outer:
        try:
            with runtime.scope():
                raise Boom("inner")
        except ExceptionGroup as group:
            assert [str(exc) for exc in group.exceptions] == ["inner"]
        assert not outer.token.cancelled
    assert outer.state is OperationState.COMPLETED


def test_enclosing_scope_that_catches_a_failing_child_group_completes(
    runtime: asyncop.Runtime,
) -> None:
    with runtime.scope() as outer:
        try:
            with runtime.scope() as inner:
                inner.spawn(lambda: 1 / 0)
        except ExceptionGroup:
            pass
        sibling = outer.spawn(lambda: "still runs")
    assert outer.state is OperationState.COMPLETED
    assert sibling.result() == "still runs"


def test_callback_that_catches_a_scope_error_completes_with_its_value(
    runtime: asyncop.Runtime,
) -> None:
    def work(op: asyncop.AsyncOperation, _context: object) -> str:
        try:
            with runtime.scope() as inner:
                inner.spawn(lambda: 1 / 0)
        except ExceptionGroup:
            return "recovered"
        return "unreachable"

    op = runtime.create(work)
    runtime.submit(op)
    result = op.wait(5)
    assert result.state is OperationState.COMPLETED
    assert result.value == "recovered"


def test_callback_that_catches_a_scope_timeout_completes(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, clock = manual

    def work(op: asyncop.AsyncOperation, _context: object) -> str:
        try:
            with rt.scope(timeout=1) as inner:
                clock.advance(2)
                inner.token.wait(5)
                inner.token.check()
        except TimeoutError:
            return "timed out"
        return "unreachable"

    op = rt.create(work)
    rt.submit(op)
    result = op.wait(5)
    assert result.state is OperationState.COMPLETED
    assert result.value == "timed out"


# ----------------------------------------------------------------------
# A real Ctrl-C while the thread is blocked at the exit
# ----------------------------------------------------------------------

SIGINT_SCRIPT = textwrap.dedent(
    """
    import sys
    import asyncop

    rt = asyncop.Runtime(2, name="sigint")
    root = kid = None

    def child():
        root.token.wait()
        root.token.check()

    try:
        with rt.scope() as root:
            kid = root.spawn(child)
            print("ready", flush=True)
        print("exit did not wait", flush=True)
    except KeyboardInterrupt:
        print("interrupted", kid.state.name, root.state.name, flush=True)
        ok = rt.shutdown(timeout=5)
        sys.exit(0 if ok and kid.state.name == "CANCELLED" else 3)
    sys.exit(4)
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX signals")
@pytest.mark.timeout(30)
def test_sigint_while_blocked_at_the_exit_cancels_waits_and_reraises() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-c", SIGINT_SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.strip() == "ready"
        time.sleep(0.3)  # let the main thread block at the scope's exit
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=5)
    assert proc.returncode == 0, (rest, err)
    assert rest.split() == ["interrupted", "CANCELLED", "CANCELLED"]
