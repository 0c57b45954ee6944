"""What comes out of tasks and scopes: Cancelled, Ctrl-C, SystemExit, groups.

- A task into which ``Cancelled`` was delivered ends CANCELLED, even if it
  catches it and returns a value.
- KeyboardInterrupt and SystemExit are never lost or grouped: they come out
  bare, after the children have ended, carrying pending failures as their
  ``__context__``.
- ``Cancelled`` names its reason; chaining follows asyncio; no reference
  cycle keeps a caught group, its tracebacks or their frames alive.
"""

from __future__ import annotations

import threading
import time
import traceback
import weakref
from typing import Any

import pytest

import asyncop
from asyncop import CancellationError, Cancelled, OperationState
from tests._freethreading import may_not_free_by_refcounting
from tests.conftest import Marker

pytestmark = pytest.mark.timeout(30)


class Boom(Exception):
    """The failure the tests raise on purpose."""


async def park_forever() -> None:
    await asyncop.Event().wait_async()


def leaves(group: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    stack = [group]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(exc.exceptions)
        else:
            found.append(exc)
    return found


def spawn_started(
    runtime: asyncop.Runtime, fn: Any, *args: Any
) -> tuple[asyncop.AsyncOperation, threading.Event]:
    started = threading.Event()
    return runtime.spawn(fn, started, *args), started


# ----------------------------------------------------------------------
# A delivered Cancelled ends the task CANCELLED
# ----------------------------------------------------------------------


async def _catch_everything_and_return(started: threading.Event) -> str:
    try:
        started.set()
        await park_forever()
    except BaseException:
        return "swallowed"
    return "not reached"


async def _catch_cancelled_in_a_nested_call(started: threading.Event) -> str:
    async def inner() -> None:
        started.set()
        await asyncop.sleep(100)

    try:
        await inner()
    except Cancelled:
        pass
    return "swallowed"


@pytest.mark.parametrize("fn", [_catch_everything_and_return, _catch_cancelled_in_a_nested_call])
def test_task_that_catches_cancelled_and_returns_ends_cancelled(
    runtime: asyncop.Runtime, fn: Any
) -> None:
    op, started = spawn_started(runtime, fn)
    assert started.wait(10)
    op.cancel()
    result = op.wait(10)
    assert result.state is OperationState.CANCELLED
    assert result.value is None
    with pytest.raises(CancellationError):
        op.result()


def test_awaiting_a_task_that_swallowed_its_cancel_raises_cancellation_error(
    runtime: asyncop.Runtime,
) -> None:
    async def main() -> str:
        started = threading.Event()
        child = asyncop.current_operation().spawn(  # type: ignore[union-attr]
            _catch_everything_and_return, started
        )
        await asyncop.sleep(0.05)
        child.cancel()
        try:
            await child
        except CancellationError:
            return "cancellation error"
        return "value came through"

    assert runtime.run(main) == "cancellation error"


def test_task_cancelled_after_its_last_cancellation_point_keeps_its_value(
    runtime: asyncop.Runtime,
) -> None:
    past_last_await = threading.Event()
    cancelled = threading.Event()

    async def work() -> int:
        await asyncop.checkpoint()
        past_last_await.set()
        cancelled.wait(10)  # blocking: not a cancellation point
        return 7

    op = runtime.spawn(work)
    assert past_last_await.wait(10)
    op.cancel()
    cancelled.set()
    result = op.wait(10)
    assert (result.state, result.value) == (OperationState.COMPLETED, 7)


def test_cancelled_absorbed_by_a_scopes_own_cancel_keeps_the_tasks_value(
    vruntime: asyncop.Runtime,
) -> None:
    async def work() -> str:
        async with asyncop.scope() as s:
            s.cancel()
            await asyncop.sleep(1)
        return "value"

    op = vruntime.spawn(work)
    result = op.wait(10)
    assert (result.state, result.value) == (OperationState.COMPLETED, "value")


# ----------------------------------------------------------------------
# KeyboardInterrupt and SystemExit are never lost or grouped
# ----------------------------------------------------------------------


async def _crash_soon() -> None:
    await asyncop.sleep(0.05)
    1 / 0  # noqa: B018


async def _interrupt_in_finally_while_a_child_fails() -> None:
    async with asyncop.scope() as g:
        g.spawn(_crash_soon)
        try:
            await asyncop.sleep(10)
        finally:
            raise KeyboardInterrupt


def test_body_interrupt_wins_over_a_failing_child_async(runtime: asyncop.Runtime) -> None:
    with pytest.raises(KeyboardInterrupt) as caught:
        runtime.run(_interrupt_in_finally_while_a_child_fails)
    context = caught.value.__context__
    assert isinstance(context, BaseExceptionGroup)
    assert [type(e) for e in leaves(context)] == [ZeroDivisionError]


@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("supervise", [False, True])
def test_child_interrupt_comes_out_of_async_scope_bare(
    runtime: asyncop.Runtime, kind: type[BaseException], supervise: bool
) -> None:
    seen: list[BaseException] = []

    async def child() -> None:
        await asyncop.sleep(0.01)
        raise kind

    async def sibling() -> None:
        await asyncop.sleep(0.01)
        raise Boom

    async def main() -> None:
        try:
            async with asyncop.scope(supervise=supervise) as g:
                g.spawn(child)
                if not supervise:
                    g.spawn(sibling)
                await asyncop.sleep(10)
        except BaseException as exc:
            seen.append(exc)

    runtime.run(main)
    assert len(seen) == 1
    assert type(seen[0]) is kind


@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit])
def test_child_interrupt_comes_out_of_sync_scope_bare(
    runtime: asyncop.Runtime, kind: type[BaseException]
) -> None:
    def child() -> None:
        raise kind

    with pytest.raises(kind), runtime.scope() as s:
        s.spawn(child)


def test_body_interrupt_in_sync_scope_carries_the_failure_group(
    runtime: asyncop.Runtime,
) -> None:
    failed = threading.Event()

    def child() -> None:
        failed.set()
        raise Boom("child")

    with pytest.raises(KeyboardInterrupt) as caught, runtime.scope() as s:
        kid = s.spawn(child)
        assert failed.wait(10)
        kid.wait(10)
        raise KeyboardInterrupt
    context = caught.value.__context__
    assert isinstance(context, BaseExceptionGroup)
    assert [str(e) for e in leaves(context)] == ["child"]


@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit])
def test_run_raises_a_childs_interrupt_bare(
    runtime: asyncop.Runtime, kind: type[BaseException]
) -> None:
    async def child() -> None:
        raise kind

    async def main() -> None:
        me = asyncop.current_operation()
        assert me is not None
        me.spawn(child)
        await asyncop.sleep(10)

    with pytest.raises(kind):
        runtime.run(main)


def test_plain_tree_keeps_a_childs_system_exit_bare(runtime: asyncop.Runtime) -> None:
    def child() -> None:
        raise SystemExit(3)

    def parent() -> None:
        me = asyncop.current_operation()
        assert me is not None
        me.spawn(child)

    result = runtime.spawn(parent).wait(10)
    assert result.state is OperationState.FAILED
    assert type(result.error) is SystemExit
    assert result.error.code == 3


# ----------------------------------------------------------------------
# Cancelled says why
# ----------------------------------------------------------------------


def test_cancelled_in_a_task_shows_the_cancel_reason(runtime: asyncop.Runtime) -> None:
    seen: list[BaseException] = []

    async def work(started: threading.Event) -> None:
        try:
            started.set()
            await park_forever()
        except Cancelled as exc:
            seen.append(exc)
            raise

    op, started = spawn_started(runtime, work)
    assert started.wait(10)
    op.cancel("user pressed stop")
    op.wait(10)
    assert "user pressed stop" in str(seen[0])
    assert "work" in str(seen[0])
    assert seen[0].reason == "user pressed stop"  # type: ignore[attr-defined]


def test_cancelled_by_a_deadline_says_so(vruntime: asyncop.Runtime) -> None:
    seen: list[BaseException] = []

    async def work() -> None:
        try:
            async with asyncop.scope(timeout=1):
                await asyncop.sleep(5)
        except TimeoutError as exc:
            seen.append(exc.__cause__)  # type: ignore[arg-type]

    vruntime.run(work)
    assert isinstance(seen[0], Cancelled)
    assert "deadline" in str(seen[0])


def test_cancelled_from_a_sync_token_shows_the_reason(runtime: asyncop.Runtime) -> None:
    seen: list[BaseException] = []

    def work(started: threading.Event) -> None:
        op = asyncop.current_operation()
        assert op is not None
        started.set()
        op.token.wait(10)
        try:
            op.token.check()
        except Cancelled as exc:
            seen.append(exc)
            raise

    op, started = spawn_started(runtime, work)
    assert started.wait(10)
    op.cancel("shutting down")
    op.wait(10)
    assert "shutting down" in str(seen[0])


def test_user_made_cancelled_keeps_its_message() -> None:
    assert str(Cancelled("mine")) == "mine"
    assert str(Cancelled()) == "cancelled"


def test_cancelled_with_an_unprintable_reason_still_prints(runtime: asyncop.Runtime) -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise ValueError("no")

    seen: list[str] = []

    async def work(started: threading.Event) -> None:
        try:
            started.set()
            await park_forever()
        except Cancelled as exc:
            seen.append(str(exc))
            raise

    op, started = spawn_started(runtime, work)
    assert started.wait(10)
    op.cancel(Unprintable())
    op.wait(10)
    assert "Unprintable" in seen[0]


# ----------------------------------------------------------------------
# Chaining
# ----------------------------------------------------------------------


def test_scope_timeout_is_raised_from_the_cancelled(vruntime: asyncop.Runtime) -> None:
    async def work() -> BaseException:
        try:
            async with asyncop.scope(timeout=1):
                await asyncop.sleep(5)
        except TimeoutError as exc:
            return exc
        raise AssertionError("no timeout")

    exc = vruntime.run(work)
    assert isinstance(exc.__cause__, Cancelled)
    assert exc.__context__ is exc.__cause__


def test_async_group_never_has_a_member_as_context(runtime: asyncop.Runtime) -> None:
    started = threading.Event()

    def fail_later() -> None:
        started.set()
        time.sleep(0.05)  # not a cancellation point: it fails after the body
        raise Boom("child")

    async def work() -> BaseException:
        try:
            async with asyncop.scope() as s:
                s.spawn(fail_later)
                while not started.is_set():
                    await asyncop.sleep(0.001)
                raise Boom("body")
        except ExceptionGroup as group:
            return group
        raise AssertionError("no group")

    group = runtime.run(work)
    members = leaves(group)
    assert group.__context__ is not group
    assert group.__context__ not in members
    assert sorted(str(e) for e in members) == ["body", "child"]


def test_sync_group_never_has_a_member_as_context(runtime: asyncop.Runtime) -> None:
    body = Boom("body")
    with pytest.raises(ExceptionGroup) as caught, runtime.scope() as s:
        s.spawn(lambda: 1 / 0).wait(10)
        raise body
    assert caught.value.__context__ is None
    assert body in leaves(caught.value)


def test_group_raised_in_an_except_block_keeps_that_context(runtime: asyncop.Runtime) -> None:
    handled = KeyError("being handled")
    try:
        raise handled
    except KeyError:
        with pytest.raises(ExceptionGroup) as caught, runtime.scope() as s:
            s.spawn(lambda: 1 / 0)
    assert caught.value.__context__ is handled


def test_cancelled_thrown_into_nested_excepts_chains_to_the_innermost(
    runtime: asyncop.Runtime,
) -> None:
    seen: list[BaseException] = []

    async def work(started: threading.Event) -> None:
        try:
            raise KeyError("outer")
        except KeyError:
            try:
                raise ValueError("inner")
            except ValueError:
                try:
                    started.set()
                    await park_forever()
                except Cancelled as exc:
                    seen.append(exc)
                    raise

    op, started = spawn_started(runtime, work)
    assert started.wait(10)
    op.cancel()
    op.wait(10)
    assert isinstance(seen[0].__context__, ValueError)
    assert isinstance(seen[0].__context__.__context__, KeyError)


# What a task waits in when the error comes, each in a frame of its own.
async def _wait_sleeping() -> None:
    await asyncop.sleep(3600)


async def _wait_on_event() -> None:
    await asyncop.Event().wait_async()


async def _wait_receiving() -> None:
    channel: asyncop.Channel[int] = asyncop.Channel()
    await channel.recv_async()


async def _wait_on_operation() -> None:
    await asyncop.current_operation(require=True).spawn(_wait_sleeping)


async def _wait_on_a_lock() -> None:
    lock = asyncop.Lock()
    async with lock:
        await asyncop.current_operation(require=True).spawn(_take, lock)


async def _take(lock: asyncop.Lock) -> None:
    await lock.lock_async()


async def _wait_checkpointing() -> None:
    while True:
        await asyncop.checkpoint()


@pytest.mark.parametrize(
    "wait",
    [
        _wait_sleeping,
        _wait_on_event,
        _wait_receiving,
        _wait_on_operation,
        _wait_on_a_lock,
        _wait_checkpointing,
    ],
)
def test_cancelled_chains_to_the_exception_handled_where_the_task_waits(
    vruntime: asyncop.Runtime, wait: Any
) -> None:
    # The outer frame handles a KeyError and awaits the inner one, which
    # handles an IndexError and waits: the Cancelled is raised where the
    # task waits, so its context is the IndexError, whose own is the
    # KeyError, as trio gives.
    seen: list[BaseException] = []

    async def inner() -> None:
        try:
            raise IndexError("inner")
        except IndexError:
            await wait()

    async def outer() -> None:
        try:
            raise KeyError("outer")
        except KeyError:
            try:
                await inner()
            except Cancelled as exc:
                seen.append(exc)
                raise

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(outer)
            for _ in range(5):
                await asyncop.checkpoint()
            s.cancel()

    vruntime.run(main)
    assert isinstance(seen[0].__context__, IndexError)
    assert isinstance(seen[0].__context__.__context__, KeyError)


def test_an_error_a_wait_ends_with_chains_to_the_exception_handled_there(
    vruntime: asyncop.Runtime,
) -> None:
    # Not only Cancelled: a receive on a channel closed meanwhile.
    channel: asyncop.Channel[int] = asyncop.Channel()
    seen: list[BaseException] = []

    async def inner() -> None:
        try:
            raise IndexError("inner")
        except IndexError:
            await channel.recv_async()

    async def outer() -> None:
        try:
            raise KeyError("outer")
        except KeyError:
            try:
                await inner()
            except asyncop.EndOfChannel as exc:
                seen.append(exc)

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(outer)
            await asyncop.sleep(1)
            channel.close()

    vruntime.run(main)
    assert isinstance(seen[0].__context__, IndexError)
    assert isinstance(seen[0].__context__.__context__, KeyError)


def test_cancelled_still_reaches_a_task_waiting_in_its_own_awaitable(
    vruntime: asyncop.Runtime,
) -> None:
    # An awaitable of the user's (a generator around an asyncop event) gets
    # the error thrown in, as before.
    class Nap:
        def __await__(self) -> Any:
            return (yield from asyncop.sleep(3600).__await__())

    seen: list[BaseException] = []

    async def napper() -> None:
        try:
            await Nap()
        except Cancelled as exc:
            seen.append(exc)
            raise

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(napper)
            await asyncop.sleep(1)
            s.cancel()

    vruntime.run(main)
    assert isinstance(seen[0], Cancelled)


# ----------------------------------------------------------------------
# No reference cycles
# ----------------------------------------------------------------------


@may_not_free_by_refcounting
def test_caught_async_group_is_freed_by_refcounting(runtime: asyncop.Runtime, no_gc: None) -> None:
    refs: list[weakref.ref[Marker]] = []

    async def fail() -> None:
        raise Boom("child")

    async def work() -> None:
        marker = Marker()
        refs.append(weakref.ref(marker))
        try:
            async with asyncop.scope() as s:
                s.spawn(fail)
                await asyncop.sleep(0.05)
                raise Boom("body")
        except ExceptionGroup as e:
            del e

    runtime.run(work)
    time.sleep(0.05)
    assert refs[0]() is None, "the group, its tracebacks or frames are in a cycle"


def test_caught_async_group_of_one_child_is_freed_by_refcounting(
    runtime: asyncop.Runtime, no_gc: None
) -> None:
    refs: list[weakref.ref[Marker]] = []

    async def fail() -> None:
        raise Boom("child")

    async def work() -> None:
        marker = Marker()
        refs.append(weakref.ref(marker))
        try:
            async with asyncop.scope() as s:
                s.spawn(fail)
        except* Boom:
            pass

    runtime.run(work)
    time.sleep(0.05)
    assert refs[0]() is None, "the group, its tracebacks or frames are in a cycle"


@may_not_free_by_refcounting
def test_caught_sync_group_is_freed_by_refcounting(runtime: asyncop.Runtime, no_gc: None) -> None:
    def work() -> weakref.ref[Marker]:
        marker = Marker()
        try:
            with runtime.scope() as s:
                s.spawn(lambda: 1 / 0).wait(10)
                raise Boom("body")
        except ExceptionGroup as e:
            del e
        return weakref.ref(marker)

    ref = work()
    assert ref() is None, "the group, its tracebacks or frames are in a cycle"


@may_not_free_by_refcounting
def test_caught_timeout_is_freed_by_refcounting(vruntime: asyncop.Runtime, no_gc: None) -> None:
    refs: list[weakref.ref[Marker]] = []

    async def work() -> None:
        marker = Marker()
        refs.append(weakref.ref(marker))
        try:
            async with asyncop.scope(timeout=1):
                await asyncop.sleep(5)
        except TimeoutError as e:
            del e

    vruntime.run(work)
    # With the GIL off, an object whose last reference another thread drops is
    # freed by the thread that made it (biased reference counting), here a
    # worker that may stay parked: its exit frees it. The collector stays off,
    # so a cycle would still keep it.
    assert vruntime.shutdown(timeout=10)
    assert refs[0]() is None, "the timeout, its tracebacks or frames are in a cycle"


# ----------------------------------------------------------------------
# A group of only the scope's own Cancelled is absorbed
# ----------------------------------------------------------------------


def test_group_of_only_own_cancelled_is_absorbed_async(vruntime: asyncop.Runtime) -> None:
    log: list[str] = []

    async def work() -> str:
        async with asyncop.scope() as s:
            s.cancel()
            try:
                await asyncop.sleep(1)
            except Cancelled as exc:
                raise BaseExceptionGroup("wrapped", [exc]) from None
        log.append("after")
        return "value"

    assert vruntime.run(work) == "value"
    assert log == ["after"]


def test_group_of_only_own_cancelled_is_absorbed_sync(runtime: asyncop.Runtime) -> None:
    with runtime.scope() as s:
        s.cancel()
        try:
            s.token.check()
        except Cancelled as exc:
            raise BaseExceptionGroup("wrapped", [exc, Cancelled()]) from None
    assert s.state is OperationState.CANCELLED


def test_group_of_only_cancelled_from_outside_still_cancels_the_task(
    runtime: asyncop.Runtime,
) -> None:
    log: list[str] = []

    async def work(started: threading.Event) -> None:
        async with asyncop.scope():
            try:
                started.set()
                await park_forever()
            except Cancelled as exc:
                raise BaseExceptionGroup("wrapped", [exc]) from None
        log.append("after")

    op, started = spawn_started(runtime, work)
    assert started.wait(10)
    op.cancel()
    assert op.wait(10).state is OperationState.CANCELLED
    assert log == []


# ----------------------------------------------------------------------
# A task's failure carries the user's frames, none of the runtime's
# ----------------------------------------------------------------------


def test_a_failed_task_traceback_starts_in_its_coroutine(runtime: asyncop.Runtime) -> None:
    async def inner() -> None:
        await asyncop.sleep(0)
        raise Boom("inner")

    async def failing() -> None:
        await inner()

    op = runtime.spawn(failing)
    assert op.wait(10).state is OperationState.FAILED
    error = op.error
    assert isinstance(error, Boom)
    names = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
    assert names == ["failing", "inner"]


def test_a_task_failing_at_its_first_step_shows_its_own_frame_only(
    runtime: asyncop.Runtime,
) -> None:
    async def failing_at_once() -> None:
        raise Boom("at once")

    op = runtime.spawn(failing_at_once)
    assert op.wait(10).state is OperationState.FAILED
    error = op.error
    assert isinstance(error, Boom)
    names = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
    assert names == ["failing_at_once"]
