"""asyncop as an anyio backend: anyio code runs inside asyncop tasks.

- ``anyio.run(main, backend="asyncop")`` finds the backend after ``import
  asyncop``, through anyio's own lookup (a test fails loudly if anyio
  changes it), with ``Runtime``'s options or an existing runtime;
- inside an asyncop task sniffio names ``"asyncop"``, and nowhere else;
- task groups and cancel scopes are asyncop scopes: they show in
  ``dump()``, an asyncop cancel from outside interrupts anyio code, and an
  anyio cancel scope cancels only its own block;
- the anyio pytest plugin runs tests with ``anyio_backend = "asyncop"``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import sniffio

import asyncop
import asyncop.asyncio_bridge
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(30)


def run(main: Any, *args: Any, **options: Any) -> Any:
    options.setdefault("clock", VirtualClock(autojump=True))
    options.setdefault("workers", 2)
    return anyio.run(main, *args, backend="asyncop", backend_options=options)


# ----------------------------------------------------------------------
# Finding the backend
# ----------------------------------------------------------------------


def test_anyio_finds_the_backend_through_its_own_lookup() -> None:
    # anyio loads a backend by importing anyio._backends._<name>; should a
    # newer anyio look elsewhere, this fails and says so.
    from anyio._core import _eventloop

    from asyncop._anyio import AsyncopBackend

    _eventloop.loaded_backends.pop("asyncop", None)
    assert _eventloop.get_async_backend("asyncop") is AsyncopBackend, (
        "anyio no longer finds its backends as anyio._backends._<name>: "
        "asyncop._anyio_hook must follow its new lookup"
    )


def test_run_returns_the_value_and_raises_the_error() -> None:
    async def main(x: int) -> int:
        await anyio.sleep(1)
        return x * 2

    async def fails() -> None:
        raise KeyError("boom")

    assert run(main, 21) == 42
    with pytest.raises(KeyError, match="boom"):
        run(fails)


def test_run_on_an_existing_runtime_leaves_it_running() -> None:
    async def main() -> str:
        return asyncop.current_runtime().name

    with asyncop.Runtime(2, name="given") as rt:
        assert anyio.run(main, backend="asyncop", backend_options={"runtime": rt}) == "given"
        assert anyio.run(main, backend="asyncop", backend_options={"runtime": rt}) == "given"


@pytest.mark.parametrize(
    ("options", "error"),
    [({"wokers": 2}, TypeError), ({"runtime": "rt"}, TypeError), ({"workers": 0}, ValueError)],
)
def test_bad_backend_options_are_refused(options: dict[str, Any], error: type) -> None:
    async def main() -> None:
        pass  # pragma: no cover

    with pytest.raises(error):
        anyio.run(main, backend="asyncop", backend_options=options)


def test_backend_options_take_every_runtime_argument(tmp_path: Path) -> None:
    # The live console and the asyncio bridge's host loop are Runtime's
    # arguments too: an anyio program passes them as backend_options.
    path = str(tmp_path / "c.sock")
    made: list[asyncio.AbstractEventLoop] = []

    def loop_factory() -> asyncio.AbstractEventLoop:
        made.append(asyncio.new_event_loop())
        return made[-1]

    async def on_the_host_loop() -> bool:
        return asyncio.get_running_loop() is made[0]

    def ask(request: bytes) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX) as client:
            client.settimeout(10)
            client.connect(path)
            client.sendall(request + b"\n")
            answer = client.makefile("rb").readline()
        result: dict[str, Any] = json.loads(answer)
        return result

    async def main() -> tuple[list[str], bool]:
        hello = await anyio.to_thread.run_sync(ask, b"hello")
        return hello["runtimes"], await asyncop.asyncio_bridge.run(on_the_host_loop)

    options = {"console": path, "asyncio_loop_factory": loop_factory, "name": "served"}
    assert anyio.run(main, backend="asyncop", backend_options=options) == (["served"], True)
    assert not os.path.exists(path)  # removed as the runtime shut down


# ----------------------------------------------------------------------
# sniffio
# ----------------------------------------------------------------------


def test_sniffio_names_asyncop_in_tasks_and_nothing_in_callbacks() -> None:
    seen: dict[str, Any] = {}

    def callback() -> None:
        try:
            seen["callback"] = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            seen["callback"] = None

    async def task() -> None:
        seen["task"] = sniffio.current_async_library()

    async def main() -> None:
        seen["main"] = sniffio.current_async_library()
        async with asyncop.scope() as s:
            s.spawn(task)
            s.spawn(callback)

    run(main)
    assert seen == {"main": "asyncop", "task": "asyncop", "callback": None}


def test_sniffio_names_asyncop_in_the_step_that_first_imports_it() -> None:
    # A library that imports sniffio lazily (httpx's transport does) asks it
    # in the very step that loads it; a fresh interpreter has not loaded it.
    code = (
        "import sys, asyncop\n"
        "async def main():\n"
        "    import sniffio\n"
        "    return sniffio.current_async_library()\n"
        "with asyncop.Runtime(1) as rt:\n"
        "    print(rt.run(main))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "asyncop"


def test_plain_asyncop_tasks_can_call_anyio() -> None:
    async def main() -> float:
        await anyio.sleep(2)
        return anyio.current_time()

    with asyncop.Runtime(2, clock=VirtualClock(autojump=True)) as rt:
        assert rt.run(main) == 2


# ----------------------------------------------------------------------
# Task groups and cancel scopes
# ----------------------------------------------------------------------


def test_task_group_runs_its_tasks_and_raises_their_failures_as_a_group() -> None:
    done: list[int] = []

    async def worker(i: int) -> None:
        await anyio.sleep(i)
        done.append(i)

    async def failing() -> None:
        await anyio.sleep(1.5)
        raise ValueError("bad")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(worker, i)
        assert done == [0, 1, 2]
        with pytest.raises(ExceptionGroup) as info:
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker, 5)
                tg.start_soon(failing)
        assert [type(e) for e in info.value.exceptions] == [ValueError]
        assert done == [0, 1, 2]  # the sleeper was cancelled

    run(main)


def test_start_returns_what_the_task_reports() -> None:
    async def server(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        await anyio.sleep(1)
        task_status.started("ready")
        await anyio.sleep_forever()

    async def main() -> str:
        async with anyio.create_task_group() as tg:
            value = await tg.start(server)
            tg.cancel_scope.cancel()
        return value

    assert run(main) == "ready"


@pytest.mark.parametrize(
    ("how", "cancelled"),
    [("start_soon", "the group"), ("start", "the group"), ("start", "the caller's scope")],
)
def test_a_task_launched_under_a_cancel_runs_until_its_first_checkpoint(
    how: str, cancelled: str
) -> None:
    # anyio's rule, on every backend: a task always runs until its first
    # checkpoint, where a cancel already pending lands (a task start()
    # launches is under its caller's scope until it reports).
    log: list[str] = []

    async def task(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        log.append("ran")
        await anyio.sleep(1)
        log.append("not reached")

    async def main() -> bool:
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as caller:
                (tg.cancel_scope if cancelled == "the group" else caller).cancel()
                if how == "start":
                    await tg.start(task)
                else:
                    tg.start_soon(task)
                    await anyio.sleep(1)
        return tg.cancel_scope.cancel_called

    group_cancelled = run(main)
    assert log == ["ran"]
    assert group_cancelled == (cancelled == "the group")


def test_a_started_task_is_the_callers_until_it_reports() -> None:
    # Before started(), the group's cancel does not reach the task, and its
    # failure is start()'s; after it, the task is the group's.
    log: list[str] = []

    async def slow_start(*, task_status: Any) -> None:
        await anyio.sleep(1)
        log.append("still running after the group's cancel")
        task_status.started()
        await anyio.sleep(1)
        log.append("not reached")

    async def fails_first(*, task_status: Any) -> None:
        await anyio.sleep(1)
        raise ValueError("not ready")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_after, tg.cancel_scope, 0.5)
            with anyio.CancelScope(shield=True):
                await tg.start(slow_start)
        async with anyio.create_task_group() as tg:
            with pytest.raises(ValueError, match="not ready"):
                await tg.start(fails_first)
            log.append(f"group cancelled: {tg.cancel_scope.cancel_called}")

    run(main)
    assert log == ["still running after the group's cancel", "group cancelled: False"]


async def _cancel_after(scope: anyio.CancelScope, delay: float) -> None:
    await anyio.sleep(delay)
    scope.cancel()


def test_move_on_after_and_fail_after() -> None:
    async def main() -> list[Any]:
        log: list[Any] = []
        with anyio.move_on_after(5) as scope:
            await anyio.sleep(10)
        log += [scope.cancel_called, scope.cancelled_caught, anyio.current_time()]
        with pytest.raises(TimeoutError):
            with anyio.fail_after(1):
                await anyio.sleep(10)
        with anyio.move_on_after(5) as scope:
            await anyio.sleep(1)
        log += [scope.cancel_called, scope.cancelled_caught]
        return log

    assert run(main) == [True, True, 5, False, False]


def test_a_cancel_scope_cancels_only_its_own_block() -> None:
    async def main() -> list[str]:
        log: list[str] = []
        with anyio.CancelScope() as outer:
            with anyio.CancelScope() as inner:
                inner.cancel()
                await anyio.sleep(1)
                log.append("not reached")
            log.append(f"inner caught {inner.cancelled_caught}")
            await anyio.sleep(1)
            log.append("outer goes on")
        log.append(f"outer caught {outer.cancelled_caught}")
        return log

    assert run(main) == ["inner caught True", "outer goes on", "outer caught False"]


def test_an_outer_cancel_passes_through_an_inner_scope() -> None:
    async def main() -> list[bool]:
        with anyio.CancelScope() as outer:
            with anyio.CancelScope() as inner:
                outer.cancel()
                await anyio.sleep(1)
        return [inner.cancelled_caught, outer.cancelled_caught]

    assert run(main) == [False, True]


def test_a_shield_keeps_an_outer_cancel_out() -> None:
    async def main() -> list[Any]:
        with anyio.CancelScope() as outer:
            outer.cancel()
            with anyio.CancelScope(shield=True):
                await anyio.sleep(1)
                shielded = anyio.current_effective_deadline()
            await anyio.sleep(1)
        return [shielded, outer.cancelled_caught]

    assert run(main) == [math.inf, True]


def test_a_deadline_moved_while_the_block_runs() -> None:
    async def main() -> float:
        with anyio.CancelScope(deadline=anyio.current_time() + 1) as scope:
            scope.deadline += 4
            assert anyio.current_effective_deadline() == scope.deadline
            await anyio.sleep(10)
        return anyio.current_time()

    assert run(main) == 5


def test_an_asyncop_cancel_from_outside_interrupts_anyio_code() -> None:
    entered = threading.Event()
    log: list[str] = []

    async def anyio_code() -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.sleep_forever)
                entered.set()
                await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            log.append("cancelled")
            raise

    with asyncop.Runtime(2) as rt:
        op = rt.spawn(anyio_code)
        assert entered.wait(10)
        assert "task group" in rt.dump()
        op.cancel("from outside")
        assert op.wait(10).state is asyncop.OperationState.CANCELLED
    assert log == ["cancelled"]


def test_a_scope_timeout_interrupts_anyio_code() -> None:
    async def main() -> bool:
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=3), anyio.create_task_group() as tg:
                tg.start_soon(anyio.sleep_forever)
        return True

    assert run(main)


def test_tasks_are_operations_with_anyio_task_info() -> None:
    async def child(infos: list[anyio.TaskInfo]) -> None:
        infos.append(anyio.get_current_task())
        await anyio.sleep(1)

    async def main() -> None:
        infos: list[anyio.TaskInfo] = []
        me = anyio.get_current_task()
        async with anyio.create_task_group() as tg:
            tg.start_soon(child, infos, name="kid")
            await anyio.sleep(0.5)
            running = anyio.get_running_tasks()
            assert "kid" in asyncop.current_runtime().dump()
        assert infos[0].name == "kid"
        assert infos[0].parent_id == me.id
        assert {info.id for info in running} >= {me.id, infos[0].id}

    run(main)


def test_checkpoints() -> None:
    async def main() -> list[str]:
        log: list[str] = []
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint_if_cancelled()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await anyio.lowlevel.cancel_shielded_checkpoint()
            log.append("shielded checkpoint did not raise")
            await anyio.lowlevel.checkpoint_if_cancelled()
            log.append("not reached")
        log.append(f"caught {scope.cancelled_caught}")
        return log

    assert run(main) == ["shielded checkpoint did not raise", "caught True"]


# ----------------------------------------------------------------------
# The pytest plugin
# ----------------------------------------------------------------------


def test_the_anyio_pytest_plugin_runs_tests_on_asyncop(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import contextvars
        import anyio
        import pytest

        pytestmark = pytest.mark.anyio
        var = contextvars.ContextVar("var", default=0)

        @pytest.fixture
        def anyio_backend():
            return "asyncop"

        @pytest.fixture
        async def value():
            var.set(7)
            yield 42
            await anyio.sleep(0)

        async def test_fixture_and_context(value):
            assert value == 42
            assert var.get() == 7
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.sleep, 0)

        async def test_fails():
            raise AssertionError("expected")
        """
    )
    result = pytester.runpytest_subprocess("-p", "anyio", "-q")
    result.assert_outcomes(passed=1, failed=1)
