"""Runtime-level rules, ported from trio's run-loop cases (``trio.run``, current
task, contextvars, nice errors, exception chaining and garbage) and asyncio's.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import sys
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import asyncop
from asyncop import Cancelled, OperationState
from asyncop.testing import VirtualClock, wait_all_blocked
from tests._freethreading import FREE_THREADED, may_not_free_by_refcounting

pytestmark = pytest.mark.timeout(30)


class Boom(Exception):
    """A failure raised on purpose."""


async def sleep_forever() -> None:
    await asyncop.sleep(float("inf"))


def test_current_operation_outside_is_none() -> None:
    assert asyncop.current_operation() is None


def test_current_time_outside_a_runtime_raises() -> None:
    with pytest.raises(RuntimeError):
        asyncop.current_time()


def test_current_runtime(vruntime: asyncop.Runtime) -> None:
    async def main() -> asyncop.Runtime:
        return asyncop.current_runtime()

    assert vruntime.run(main) is vruntime
    with pytest.raises(RuntimeError):
        asyncop.current_runtime()


def test_root_operation_is_current(vruntime: asyncop.Runtime) -> None:
    async def main() -> bool:
        me = asyncop.current_operation()
        return me is not None and me.parent is None

    assert vruntime.run(main)


def test_run_nested_inside_a_task_raises(vruntime: asyncop.Runtime) -> None:
    # trio test_run_nesting: trio.run inside trio.run raises RuntimeError.
    async def inner() -> int:
        return 1

    async def main() -> None:
        with pytest.raises(RuntimeError):
            vruntime.run(inner)

    vruntime.run(main)


def test_wait_inside_a_task_raises(vruntime: asyncop.Runtime) -> None:
    async def main() -> None:
        async with asyncop.scope() as s:
            op = s.spawn(sleep_forever)
            with pytest.raises(RuntimeError, match="await"):
                op.wait(1)
            op.cancel()

    vruntime.run(main)


def test_spawning_a_coroutine_object_is_refused(vruntime: asyncop.Runtime) -> None:
    async def fn() -> None:
        pass

    coro = fn()
    try:
        with pytest.raises(TypeError):
            vruntime.spawn(coro)  # type: ignore[call-overload]
    finally:
        coro.close()


def test_spawning_a_non_callable_is_refused(vruntime: asyncop.Runtime) -> None:
    with pytest.raises(TypeError):
        vruntime.spawn(42)  # type: ignore[call-overload]


def test_spawning_an_async_generator_function_is_refused(vruntime: asyncop.Runtime) -> None:
    async def agen():  # type: ignore[no-untyped-def]
        yield 1

    op = None
    try:
        op = vruntime.spawn(agen)
    except TypeError:
        return
    result = op.wait(5)
    assert result.state is OperationState.FAILED
    assert isinstance(result.error, TypeError)


def test_awaiting_asyncio_sleep_gives_a_clear_error(vruntime: asyncop.Runtime) -> None:
    async def main() -> None:
        await asyncio.sleep(0)

    with pytest.raises(TypeError, match=r"asyncop\.anyio"):
        vruntime.run(main)


def test_asyncop_awaitable_under_asyncio_gives_a_clear_error() -> None:
    async def main() -> None:
        await asyncop.sleep(0)

    with pytest.raises(TypeError, match="asyncop"):
        asyncio.run(main())


@pytest.mark.filterwarnings("error")
def test_never_awaited_awaitable_warns() -> None:
    with pytest.warns(RuntimeWarning, match="never awaited"):
        asyncop.sleep(1)
        gc.collect()


def test_workers_validation() -> None:
    with pytest.raises(ValueError):
        asyncop.Runtime(0)
    with pytest.raises(TypeError):
        asyncop.Runtime(1.5)  # type: ignore[arg-type]


def test_contextvars_in_multiple_tasks(vruntime: asyncop.Runtime) -> None:
    var: contextvars.ContextVar[int] = contextvars.ContextVar("var")

    async def child(i: int) -> int:
        var.set(i)
        await asyncop.sleep(1)
        return var.get()

    async def main() -> list[int]:
        var.set(-1)
        async with asyncop.scope() as s:
            ops = [s.spawn(child, i) for i in range(5)]
        assert var.get() == -1
        return [o.result() for o in ops]

    assert vruntime.run(main) == [0, 1, 2, 3, 4]


def test_contextvars_from_the_calling_thread(vruntime: asyncop.Runtime) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="none")
    var.set("thread value")

    async def main() -> str:
        return var.get()

    assert vruntime.run(main) == "thread value"


def test_spawn_blocking_copies_context(vruntime: asyncop.Runtime) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="none")

    async def main() -> str:
        var.set("task")
        return await asyncop.spawn_blocking(var.get)

    assert vruntime.run(main) == "task"


def test_exc_info_survives_an_await_in_except(vruntime: asyncop.Runtime) -> None:
    # trio test_exc_info
    async def main() -> None:
        try:
            raise KeyError("outer")
        except KeyError:
            await asyncop.sleep(1)
            assert sys.exc_info()[0] is KeyError
        assert sys.exc_info() == (None, None, None)

    vruntime.run(main)


def test_exc_info_is_per_task(vruntime: asyncop.Runtime) -> None:
    async def child(exc: Exception, seen: list[object]) -> None:
        try:
            raise exc
        except Exception:
            await asyncop.sleep(1)
            seen.append(sys.exc_info()[1])

    async def main() -> None:
        a, b = KeyError("a"), ValueError("b")
        seen_a: list[object] = []
        seen_b: list[object] = []
        async with asyncop.scope() as s:
            s.spawn(child, a, seen_a)
            s.spawn(child, b, seen_b)
        assert seen_a == [a] and seen_b == [b]

    vruntime.run(main)


def test_cancelled_raised_in_except_block_chains_context(vruntime: asyncop.Runtime) -> None:
    # trio test_exception_chaining_after_throw
    seen: list[BaseException | None] = []

    async def child() -> None:
        try:
            raise KeyError("handling")
        except KeyError:
            try:
                await sleep_forever()
            except Cancelled as exc:
                seen.append(exc.__context__)
                raise

    async def main() -> None:
        async with asyncop.scope() as s:
            op = s.spawn(child)
            await wait_all_blocked()
            op.cancel()

    vruntime.run(main)
    assert isinstance(seen[0], KeyError)


def test_group_has_no_context_loop(vruntime: asyncop.Runtime) -> None:
    # trio test_nursery_exception_chaining_doesnt_make_context_loops
    async def crasher() -> None:
        raise KeyError

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(crasher)
            s.spawn(crasher)
            raise ValueError

    with pytest.raises(ExceptionGroup) as info:
        vruntime.run(main)
    group = info.value
    for member in group.exceptions:
        ctx = member.__context__
        while ctx is not None:
            assert ctx is not group
            ctx = ctx.__context__
    assert group.__context__ is None or group.__context__ not in group.exceptions


def assert_freed_by_refcounting(
    runtime: asyncop.Runtime,
    main: Callable[[], Awaitable[bool]],
    refs: list[weakref.ref[Any]],
) -> None:
    """Run ``main`` with the collector off: the objects of ``refs`` must be freed.

    ``main`` returns whether they were already gone when it returned, as
    they are on a default build. On a free-threaded build, an object whose
    last reference another thread drops is freed by the thread that made it,
    the next time that thread runs (biased reference counting); a worker
    that parks may not run again until the runtime shuts down, so the check
    waits for that there. The collector stays off throughout: an object
    that a reference cycle holds stays alive and fails the check either way.
    """
    gc.collect()
    gc.disable()
    try:
        freed_at_once = runtime.run(main)
        if not FREE_THREADED:
            assert freed_at_once, "not freed by the time the scope was left"
        assert runtime.shutdown(timeout=10)
        assert all(ref() is None for ref in refs), "a reference cycle keeps it"
    finally:
        gc.enable()


def test_locals_freed_promptly_on_cancel(vruntime: asyncop.Runtime) -> None:
    # trio test_locals_destroyed_promptly_on_cancel
    class Local:
        pass

    refs: list[weakref.ref[Local]] = []

    async def child() -> None:
        obj = Local()
        refs.append(weakref.ref(obj))
        await sleep_forever()

    async def main() -> bool:
        async with asyncop.scope() as s:
            s.spawn(child)
            await wait_all_blocked()
            s.cancel()
        return refs[0]() is None

    assert_freed_by_refcounting(vruntime, main, refs)


def _finished_coroutine_frames_keep_their_caller() -> bool:
    """Whether a failed coroutine's frame keeps its caller's frame (``f_back``).

    3.11 drops the link when the coroutine ends; 3.12, and 3.13 before a
    later fix, keep it, so the caller's locals live as long as the failure.
    """

    async def fail() -> None:
        raise ValueError

    coro = fail()
    try:
        coro.send(None)
    except ValueError as exc:
        tb = exc.__traceback__
        assert tb is not None and tb.tb_next is not None
        linked = tb.tb_next.tb_frame.f_back is not None
        del tb
        return linked
    return False


@pytest.mark.xfail(
    _finished_coroutine_frames_keep_their_caller(),
    strict=False,
    reason=(
        "on this Python a failed task's frame keeps the stepper's frame, "
        "which keeps the operation and so its failure"
    ),
)
def test_caught_group_is_freed_without_gc(vruntime: asyncop.Runtime) -> None:
    class Payload(Exception):
        pass

    refs: list[weakref.ref[BaseException]] = []

    def make() -> Payload:
        err = Payload()  # no frame of the task holds it: no cycle made by the test
        refs.append(weakref.ref(err))
        return err

    async def crasher() -> None:
        raise make()

    async def main() -> bool:
        try:
            async with asyncop.scope() as s:
                s.spawn(crasher)
        except* Payload:
            pass
        return refs[0]() is None

    assert_freed_by_refcounting(vruntime, main, refs)


@may_not_free_by_refcounting
def test_timeout_scope_leaves_no_cyclic_garbage(vruntime: asyncop.Runtime) -> None:
    # trio test_cancel_scope_exit_doesnt_create_cyclic_garbage
    async def main() -> None:
        for _ in range(3):
            try:
                async with asyncop.scope(timeout=1):
                    await sleep_forever()
            except TimeoutError:
                pass

    gc.collect()
    gc.disable()
    try:
        vruntime.run(main)
        # On a free-threaded build the collector also counts objects that no cycle
        # holds but that wait for the thread that made them to free them
        # (see assert_freed_by_refcounting): the workers do when they exit.
        assert vruntime.shutdown(timeout=10)
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_checkpoint_notices_a_deadline_that_passed_while_running() -> None:
    # trio test_yield_briefly_checks_for_timeout: the clock jumps past the deadline
    # inside a step; the next checkpoint must raise.
    clock = VirtualClock(autojump=False)

    async def main() -> str:
        async with asyncop.scope(timeout=1):
            clock.advance(2)
            await asyncop.checkpoint()
            return "ran on past its deadline"

    with asyncop.Runtime(1, clock=clock) as rt, pytest.raises(TimeoutError):
        rt.run(main)


def test_sleep_never_wakes_early_on_the_real_clock(runtime: asyncop.Runtime) -> None:
    async def main() -> list[float]:
        lates = []
        for delay in (0.0015, 0.005, 0.0123, 0.02):
            t0 = time.monotonic()
            await asyncop.sleep(delay)
            lates.append(time.monotonic() - t0 - delay)
        return lates

    assert min(runtime.run(main)) >= 0


def test_current_time_tracks_the_real_clock(runtime: asyncop.Runtime) -> None:
    async def main() -> float:
        t0 = asyncop.current_time()
        await asyncop.sleep(0.05)
        return asyncop.current_time() - t0

    assert runtime.run(main) >= 0.05


def test_dump_shows_the_tree(vruntime: asyncop.Runtime) -> None:
    async def main() -> str:
        async with asyncop.scope(name="page") as s:
            s.spawn(sleep_forever, name="fetch_body")
            await wait_all_blocked()
            text = vruntime.dump()
            s.cancel()
        return text

    text = vruntime.run(main)
    assert "page" in text
    assert "fetch_body" in text


def test_shutdown_cancels_everything() -> None:
    rt = asyncop.Runtime(2, clock=VirtualClock(autojump=True))
    op = rt.spawn(sleep_forever)
    assert rt.shutdown(timeout=10)
    assert op.state is OperationState.CANCELLED


def test_run_after_shutdown_raises() -> None:
    rt = asyncop.Runtime(1)
    rt.shutdown(timeout=10)

    async def main() -> None:
        pass

    with pytest.raises(RuntimeError):
        rt.run(main)


async def nap_long() -> None:
    await asyncop.sleep(1000)  # a finite sleep arms a timer (an infinite one does not)


def test_registrations_released_when_tasks_end(vruntime: asyncop.Runtime) -> None:
    async def main() -> None:
        async with asyncop.scope() as s:
            for _ in range(10):
                s.spawn(nap_long)
            await wait_all_blocked()
            assert vruntime.registrations() >= 10
            s.cancel()

    vruntime.run(main)
    assert vruntime.registrations() == 0


def test_moving_a_deadline_many_times_does_not_leak(vruntime: asyncop.Runtime) -> None:
    # trio test_cancel_scope_deadline_duplicates
    async def main() -> int:
        async with asyncop.scope() as s:
            for i in range(1000):
                s.deadline = asyncop.current_time() + 100 + i
                s.deadline = None
            await asyncop.sleep(1)
        return vruntime.registrations()

    assert vruntime.run(main) <= 1


def test_keyboard_interrupt_from_a_task_propagates_from_run(vruntime: asyncop.Runtime) -> None:
    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(sleep_forever)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        vruntime.run(main)


def test_error_in_run_root_is_raised_bare(vruntime: asyncop.Runtime) -> None:
    async def main() -> None:
        raise Boom("root")

    with pytest.raises(Boom, match="root"):
        vruntime.run(main)
