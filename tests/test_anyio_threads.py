"""anyio's to_thread and from_thread, and its blocking portals, on the "asyncop" backend.

- ``to_thread.run_sync`` runs on asyncop's blocking-call threads, bounded by
  the anyio limiter given or the runtime's default one (40 tokens, shared
  with ``spawn_blocking``); waiting for a token is a cancellation point; a
  cancel waits for the thread unless ``abandon_on_cancel``;
- ``from_thread.check_cancelled()`` reports the waiting task's cancel;
- ``from_thread.run`` from such a thread runs under the waiting task's
  scope, so the task's cancel reaches it; from a thread given a token, or
  an abandoned one, it runs as a root of the runtime; from an asyncop sync
  callback it needs no token and runs under the callback;
- a call from a task is refused, and one to a runtime shut down raises
  ``RunFinishedError``;
- ``start_blocking_portal(backend="asyncop")`` works.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import pytest
import sniffio

import asyncop
from asyncop import lowlevel

pytestmark = pytest.mark.timeout(30)

var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")


def run(main: Any, *args: Any, **options: Any) -> Any:
    options.setdefault("workers", 2)
    return anyio.run(main, *args, backend="asyncop", backend_options=options)


def test_run_sync_runs_in_another_thread_with_the_tasks_context() -> None:
    def in_thread(x: int) -> tuple[int, str, str | None, bool]:
        return (
            x * 2,
            var.get(),
            sniffio.current_async_library_cvar.get(),
            (threading.current_thread() is not caller),
        )

    async def main() -> None:
        var.set("from the task")
        assert await anyio.to_thread.run_sync(in_thread, 21) == (42, "from the task", None, True)
        with pytest.raises(KeyError, match="boom"):
            await anyio.to_thread.run_sync({}.__getitem__, "boom")

    caller = threading.current_thread()
    run(main)


def test_the_default_thread_limiter_is_the_runtimes_shared_one() -> None:
    async def main() -> None:
        limiter = anyio.to_thread.current_default_thread_limiter()
        assert limiter is anyio.to_thread.current_default_thread_limiter()
        assert isinstance(limiter, anyio.CapacityLimiter) and limiter.total_tokens == 40
        shared = asyncop.current_default_limiter()

        def count() -> tuple[int, int]:
            return limiter.borrowed_tokens, shared.borrowed_tokens

        assert await anyio.to_thread.run_sync(count) == (1, 1)

    run(main)


def test_a_custom_limiter_bounds_the_threads_and_its_wait_is_cancellable() -> None:
    async def main() -> None:
        limiter = anyio.CapacityLimiter(2)
        release = threading.Event()
        started: list[int] = []

        def blocking(n: int) -> None:
            started.append(n)
            release.wait(10)

        async with anyio.create_task_group() as tg:
            for n in range(2):
                tg.start_soon(lambda n=n: anyio.to_thread.run_sync(blocking, n, limiter=limiter))
            while limiter.borrowed_tokens < 2:
                await anyio.sleep(0.001)
            with anyio.move_on_after(0.05) as scope:
                await anyio.to_thread.run_sync(blocking, 2, limiter=limiter)
            assert scope.cancelled_caught  # it waited for a token, and gave up
            release.set()
        assert sorted(started) == [0, 1] and limiter.borrowed_tokens == 0

    run(main)


@pytest.mark.parametrize("abandon", [False, True])
def test_a_cancelled_task_waits_for_its_thread_unless_it_abandons_it(abandon: bool) -> None:
    async def main() -> list[str]:
        log: list[str] = []
        started, release = threading.Event(), threading.Event()

        def blocking() -> None:
            started.set()
            release.wait(10)
            log.append("thread done")

        async def task() -> None:
            try:
                await anyio.to_thread.run_sync(blocking, abandon_on_cancel=abandon)
            finally:
                log.append("task done")

        async with anyio.create_task_group() as tg:
            tg.start_soon(task)
            await anyio.to_thread.run_sync(started.wait)
            tg.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.05)  # the task gets its cancel meanwhile
            release.set()
        while len(log) < 2:
            await anyio.sleep(0.001)
        return log

    expected = ["task done", "thread done"] if abandon else ["thread done", "task done"]
    assert run(main) == expected


@pytest.mark.parametrize("abandon", [False, True])
def test_check_cancelled_reports_the_waiting_tasks_cancel(abandon: bool) -> None:
    async def main() -> None:
        started, go_on = threading.Event(), threading.Event()
        checks: list[str] = []

        def worker() -> None:
            anyio.from_thread.check_cancelled()
            checks.append("not cancelled")
            started.set()
            go_on.wait(10)
            try:
                anyio.from_thread.check_cancelled()
            except asyncop.Cancelled:
                checks.append("cancelled")

        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: anyio.to_thread.run_sync(worker, abandon_on_cancel=abandon))
            await anyio.to_thread.run_sync(started.wait)
            tg.cancel_scope.cancel()
            go_on.set()
        while len(checks) < 2:
            await anyio.sleep(0.001)
        assert checks == ["not cancelled", "cancelled"]

    run(main)


def test_from_thread_run_runs_under_the_waiting_tasks_scope() -> None:
    async def main() -> None:
        host = lowlevel.current_task()
        parents: list[Any] = []

        async def inside() -> str:
            me = lowlevel.current_task()
            assert me is not None
            parents.append(me.parent)
            await anyio.sleep(0)
            return var.get()

        def worker() -> str:
            var.set("from the thread")
            return anyio.from_thread.run(inside)

        with anyio.CancelScope():
            scope_op = asyncop.current_operation()
            assert await anyio.to_thread.run_sync(worker) == "from the thread"
        assert parents == [scope_op] and scope_op is not host

    run(main)


def test_the_waiting_tasks_cancel_reaches_a_call_from_its_thread() -> None:
    async def main() -> None:
        async def bomb() -> None:
            scope.cancel()  # cancels the task waiting for the thread, so this too
            await anyio.sleep(10)

        with anyio.CancelScope() as scope:
            await anyio.to_thread.run_sync(anyio.from_thread.run, bomb)
        assert scope.cancelled_caught

    run(main)


def test_a_call_under_a_cancelled_task_starts_and_is_cancelled_at_its_first_await() -> None:
    async def main() -> list[str]:
        log: list[str] = []
        cancelled = threading.Event()

        async def afn() -> None:
            log.append("started")
            await anyio.sleep(10)
            log.append("never")

        def worker() -> None:
            cancelled.wait(10)
            try:
                anyio.from_thread.run(afn)
            except asyncop.Cancelled:
                log.append("thread saw the cancel")

        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, worker)
                await anyio.sleep(0.01)
                scope.cancel()
                cancelled.set()
        return log

    assert run(main) == ["started", "thread saw the cancel"]


def test_an_abandoned_threads_call_runs_as_a_root_that_outlives_the_task() -> None:
    async def main() -> None:
        released, done = anyio.Event(), anyio.Event()

        async def later() -> None:
            scope.cancel()
            me = lowlevel.current_task()
            assert me is not None and me.parent is None
            await released.wait()
            done.set()

        with anyio.CancelScope() as scope:
            await anyio.to_thread.run_sync(anyio.from_thread.run, later, abandon_on_cancel=True)
        assert scope.cancelled_caught
        released.set()
        with anyio.fail_after(5):
            await done.wait()

    run(main)


def test_from_thread_run_sync_runs_even_after_the_waiting_task_was_cancelled() -> None:
    async def main() -> None:
        done = anyio.Event()

        def worker() -> None:
            anyio.from_thread.run_sync(scope.cancel)
            anyio.from_thread.run_sync(done.set)

        with anyio.CancelScope() as scope:
            await anyio.to_thread.run_sync(worker)
        assert done.is_set() and scope.cancel_called

    run(main)


def test_plain_threads_call_in_with_a_token_and_sync_callbacks_without() -> None:
    async def main() -> None:
        token = anyio.lowlevel.current_token()
        results: list[Any] = []

        async def whoami() -> Any:
            await anyio.sleep(0)
            me = lowlevel.current_task()
            assert me is not None
            return me.parent

        def plain_thread() -> None:
            results.append(anyio.from_thread.run(whoami, token=token))
            results.append(anyio.from_thread.run_sync(sniffio.current_async_library, token=token))

        thread = threading.Thread(target=plain_thread)
        thread.start()
        await anyio.to_thread.run_sync(thread.join, 10)
        assert results == [None, "asyncop"]

        def sync_callback() -> tuple[Any, Any]:
            return asyncop.current_operation(), anyio.from_thread.run(whoami)

        me = asyncop.current_operation()
        assert me is not None
        callback_op, parent = await me.spawn(sync_callback)
        assert parent is callback_op

    run(main)


def test_calls_from_a_task_are_refused_and_a_finished_run_is_reported() -> None:
    async def main() -> anyio.lowlevel.EventLoopToken:
        token = anyio.lowlevel.current_token()
        with pytest.raises(RuntimeError, match="cannot be called from the event loop thread"):
            anyio.from_thread.run_sync(int, token=token)
        with pytest.raises(RuntimeError, match="cannot be called from the event loop thread"):
            anyio.from_thread.run(anyio.sleep, 0, token=token)
        return token

    token = run(main)
    with pytest.raises(anyio.RunFinishedError):
        anyio.from_thread.run(anyio.sleep, 0, token=token)
    with pytest.raises(anyio.RunFinishedError):
        anyio.from_thread.run_sync(int, token=token)


def test_a_blocking_portal_runs_calls_tasks_and_context_managers() -> None:
    @asynccontextmanager
    async def resource() -> AsyncIterator[str]:
        yield "opened"

    async def add(a: int, b: int) -> int:
        await anyio.sleep(0)
        return a + b

    with anyio.from_thread.start_blocking_portal(backend="asyncop") as portal:
        assert portal.call(add, 1, 2) == 3
        assert portal.call(sniffio.current_async_library) == "asyncop"
        event = portal.call(anyio.Event)
        future = portal.start_task_soon(event.wait)
        portal.call(event.set)
        assert future.result(5) is None
        with portal.wrap_async_context_manager(resource()) as value:
            assert value == "opened"
        sleeper = portal.start_task_soon(anyio.sleep, 10)
        sleeper.cancel()
    assert sleeper.cancelled()


def test_an_idle_blocking_portal_is_not_reported_as_stuck(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Between two calls the portal's runtime waits, by design, for threads
    # that the deadlock watch cannot see: no report, in warn or raise mode.
    caplog.set_level(logging.WARNING, logger="asyncop")
    options = {"deadlock": "raise", "deadlock_after": 0.05}
    with anyio.from_thread.start_blocking_portal("asyncop", options) as portal:
        assert portal.call(anyio.sleep, 0) is None
        time.sleep(0.4)  # idle: eight times deadlock_after
        assert portal.call(sniffio.current_async_library) == "asyncop"
    assert not [r for r in caplog.records if "is stuck" in r.getMessage()]
