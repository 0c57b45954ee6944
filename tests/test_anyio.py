"""The anyio bridge: waiting for and spawning asyncop work from asyncio, uvloop and trio."""

from __future__ import annotations

import functools
import importlib.util
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

import asyncop
import asyncop.anyio
from asyncop import OperationState
from tests.conftest import runtime_threads

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

HAS_UVLOOP = importlib.util.find_spec("uvloop") is not None


@pytest.fixture(
    params=[
        pytest.param(("asyncio", {}), id="asyncio"),
        pytest.param(
            ("asyncio", {"use_uvloop": True}),
            id="uvloop",
            marks=pytest.mark.skipif(not HAS_UVLOOP, reason="uvloop is not installed"),
        ),
        pytest.param(("trio", {}), id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """The host event loops the bridge must serve, as anyio's plugin expects them."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def rt() -> Iterator[asyncop.Runtime]:
    """A 2-worker runtime of this module's own; shut down and checked for leaks."""
    runtime = asyncop.Runtime(2, name=f"bridge{id(object()):x}")
    try:
        yield runtime
    finally:
        assert runtime.shutdown(timeout=10), "runtime did not shut down in 10 s"
        assert runtime_threads(runtime) == []


# ----------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------


async def until(predicate: Callable[[], bool], timeout: float = 5) -> None:
    """Poll ``predicate`` from the host loop without blocking it."""
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.002)


async def settled(op: asyncop.AsyncOperation) -> OperationState:
    """Wait, from the host loop, until ``op`` has ended; return its final state."""
    await until(lambda: op.done)
    return op.state


def answer(*args: int) -> int:
    return 42 + sum(args)


async def async_answer(*args: int) -> int:
    await asyncop.sleep(0.001)
    return 42 + sum(args)


def fail_with(error: BaseException) -> None:
    raise error


async def async_fail_with(error: BaseException) -> None:
    await asyncop.sleep(0.001)
    raise error


async def nap(seconds: float) -> None:
    await asyncop.sleep(seconds)


def thread_name() -> str:
    return threading.current_thread().name


def block_until_cancelled(log: list[str], label: str) -> None:
    """Sync work: hold a worker until the token is cancelled, then leave CANCELLED."""
    token = asyncop.current_operation().token  # type: ignore[union-attr]
    log.append(f"{label} running")
    token.wait(5)
    token.check()
    log.append(f"{label} was never cancelled")


async def sleep_until_cancelled(log: list[str], label: str) -> None:
    log.append(f"{label} running")
    await asyncop.sleep(30)
    log.append(f"{label} was never cancelled")


async def parent_with_children(children: list[asyncop.AsyncOperation], log: list[str]) -> None:
    """A coroutine parent with a sync and a coroutine child, all waiting to be cancelled."""
    me = asyncop.current_operation()
    assert me is not None
    children.append(me.spawn(block_until_cancelled, log, "sync child"))
    children.append(me.spawn(sleep_until_cancelled, log, "async child"))
    await sleep_until_cancelled(log, "parent")


async def start_tree(
    rt: asyncop.Runtime,
) -> tuple[asyncop.AsyncOperation, list[asyncop.AsyncOperation], list[str]]:
    """Spawn a parent with two children and wait until all three are running."""
    children: list[asyncop.AsyncOperation] = []
    log: list[str] = []
    op = rt.spawn(parent_with_children, children, log)
    await until(lambda: len(log) == 3)
    assert set(log) == {"parent running", "sync child running", "async child running"}
    return op, children, log


async def assert_tree_cancelled(
    op: asyncop.AsyncOperation, children: list[asyncop.AsyncOperation], log: list[str]
) -> None:
    assert await settled(op) is OperationState.CANCELLED
    assert [child.state for child in children] == [OperationState.CANCELLED] * 2
    assert all(child.token.cancelled for child in children)
    assert op.token.cancelled
    assert not any("never cancelled" in line for line in log)


# ----------------------------------------------------------------------
# The plugin
# ----------------------------------------------------------------------


def test_anyio_pytest_plugin_is_active(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.has_plugin("anyio")


# ----------------------------------------------------------------------
# wait(op): outcomes
# ----------------------------------------------------------------------


async def test_wait_returns_the_value_of_a_sync_operation(rt: asyncop.Runtime) -> None:
    op = rt.spawn(answer, 1)
    assert await asyncop.anyio.wait(op) == 43


async def test_wait_returns_the_value_of_a_coroutine_operation(rt: asyncop.Runtime) -> None:
    op = rt.spawn(async_answer, 2)
    assert await asyncop.anyio.wait(op) == 44


async def test_wait_raises_the_failure_of_a_sync_operation(rt: asyncop.Runtime) -> None:
    error = ValueError("boom")
    op = rt.spawn(fail_with, error)
    with pytest.raises(ValueError) as info:
        await asyncop.anyio.wait(op)
    assert info.value is error


async def test_wait_raises_the_failure_of_a_coroutine_operation(rt: asyncop.Runtime) -> None:
    error = KeyError("missing")
    op = rt.spawn(async_fail_with, error)
    with pytest.raises(KeyError) as info:
        await asyncop.anyio.wait(op)
    assert info.value is error


async def test_wait_raises_cancellation_error_when_someone_else_cancels(
    rt: asyncop.Runtime,
) -> None:
    log: list[str] = []
    op = rt.spawn(sleep_until_cancelled, log, "op")
    await until(lambda: log == ["op running"])
    outcome: list[str] = []

    async def waiter(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        task_status.started()
        try:
            await asyncop.anyio.wait(op)
        except asyncop.CancellationError:
            outcome.append("CancellationError")
        except anyio.get_cancelled_exc_class():
            outcome.append("host cancelled")
            raise

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(waiter)
            op.cancel("someone else")
    assert outcome == ["CancellationError"]
    assert op.state is OperationState.CANCELLED


async def test_wait_on_an_operation_already_completed_returns_its_value(
    rt: asyncop.Runtime,
) -> None:
    op = rt.spawn(answer)
    assert op.wait(5).state is OperationState.COMPLETED
    assert await asyncop.anyio.wait(op) == 42


async def test_wait_on_an_operation_already_failed_raises_its_failure(
    rt: asyncop.Runtime,
) -> None:
    error = RuntimeError("already broken")
    op = rt.spawn(fail_with, error)
    assert op.wait(5).state is OperationState.FAILED
    with pytest.raises(RuntimeError) as info:
        await asyncop.anyio.wait(op)
    assert info.value is error


async def test_wait_on_an_operation_already_cancelled_raises_cancellation_error(
    rt: asyncop.Runtime,
) -> None:
    op = rt.spawn(nap, 30)
    op.cancel()
    assert op.wait(5).state is OperationState.CANCELLED
    with pytest.raises(asyncop.CancellationError):
        await asyncop.anyio.wait(op)


async def test_wait_on_an_operation_already_done_is_a_host_checkpoint(
    rt: asyncop.Runtime,
) -> None:
    op = rt.spawn(answer)
    op.wait(5)
    reached: list[str] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        await asyncop.anyio.wait(op)
        reached.append("after wait")
    assert scope.cancelled_caught
    assert reached == []


async def test_wait_refuses_what_is_not_an_operation() -> None:
    with pytest.raises(TypeError, match="AsyncOperation"):
        await asyncop.anyio.wait(42)  # type: ignore[arg-type]


# ----------------------------------------------------------------------
# wait(op): the host loop keeps running
# ----------------------------------------------------------------------


async def ticks_while_waiting(op: asyncop.AsyncOperation) -> int:
    """Count 10 ms host ticks that happen while ``wait(op)`` waits."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        before = ticks
        await asyncop.anyio.wait(op)
        during = ticks - before
        tg.cancel_scope.cancel()
    return during


async def test_host_loop_keeps_ticking_while_waiting_for_a_sync_operation(
    rt: asyncop.Runtime,
) -> None:
    op = rt.spawn(time.sleep, 0.3)
    during = await ticks_while_waiting(op)
    assert op.state is OperationState.COMPLETED
    assert during >= 10, f"only {during} host ticks in 0.3 s: the host loop was blocked"


async def test_host_loop_keeps_ticking_while_waiting_for_a_coroutine_operation(
    rt: asyncop.Runtime,
) -> None:
    op = rt.spawn(nap, 0.3)
    during = await ticks_while_waiting(op)
    assert op.state is OperationState.COMPLETED
    assert during >= 10, f"only {during} host ticks in 0.3 s: the host loop was blocked"


# ----------------------------------------------------------------------
# wait(op): cancelling the host
# ----------------------------------------------------------------------


async def test_move_on_after_while_waiting_cancels_the_subtree(rt: asyncop.Runtime) -> None:
    op, children, log = await start_tree(rt)
    with anyio.move_on_after(0.05) as scope:
        await asyncop.anyio.wait(op)
    assert scope.cancelled_caught
    await assert_tree_cancelled(op, children, log)


async def test_fail_after_while_waiting_raises_the_hosts_timeout_and_cancels_the_subtree(
    rt: asyncop.Runtime,
) -> None:
    op, children, log = await start_tree(rt)
    with pytest.raises(TimeoutError) as info:
        with anyio.fail_after(0.05):
            await asyncop.anyio.wait(op)
    assert not isinstance(info.value, asyncop.CancellationError)
    await assert_tree_cancelled(op, children, log)


async def test_task_group_cancel_while_waiting_delivers_the_hosts_cancellation(
    rt: asyncop.Runtime,
) -> None:
    op, children, log = await start_tree(rt)
    outcome: list[str] = []

    async def waiter(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        task_status.started()
        try:
            await asyncop.anyio.wait(op)
        except anyio.get_cancelled_exc_class():
            outcome.append("host cancelled")
            raise
        except BaseException as exc:
            outcome.append(f"{type(exc).__name__}")
            raise

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(waiter)
            tg.cancel_scope.cancel()
    assert outcome == ["host cancelled"]
    await assert_tree_cancelled(op, children, log)


async def test_host_cancelled_while_waiting_lets_a_sync_operation_finish_on_its_own(
    rt: asyncop.Runtime,
) -> None:
    # The host does not wait for the cancelled operation to unwind: it leaves
    # at once, and asyncop runs the stubborn callback to its end.
    release = threading.Event()
    started = threading.Event()

    def stubborn() -> str:
        started.set()
        release.wait(5)
        return "finished anyway"

    op = rt.spawn(stubborn)
    await until(started.is_set)
    with anyio.move_on_after(0.05) as scope:
        await asyncop.anyio.wait(op)
    assert scope.cancelled_caught
    assert not op.done
    assert op.token.cancelled
    release.set()
    assert await settled(op) is OperationState.COMPLETED
    assert op.result() == "finished anyway"


# ----------------------------------------------------------------------
# spawn(fn, *args)
# ----------------------------------------------------------------------


async def test_spawn_runs_a_sync_function_on_a_worker_of_the_given_runtime(
    rt: asyncop.Runtime,
) -> None:
    name = await asyncop.anyio.spawn(thread_name, runtime=rt)
    assert name.startswith(f"{rt.name}-")
    assert name != threading.current_thread().name


async def test_spawn_passes_arguments_and_returns_the_value(rt: asyncop.Runtime) -> None:
    assert await asyncop.anyio.spawn(answer, 1, 2, 3, runtime=rt) == 48


async def test_spawn_runs_an_async_function_as_an_asyncop_coroutine(
    rt: asyncop.Runtime,
) -> None:
    seen: list[object] = []

    async def work(x: int) -> int:
        op = asyncop.current_operation()
        seen.append(op)
        before = asyncop.current_time()
        await asyncop.sleep(0.02)
        seen.append(asyncop.current_time() - before)
        seen.append(threading.current_thread().name)
        return x * 2

    assert await asyncop.anyio.spawn(work, 21, runtime=rt) == 42
    op, elapsed, name = seen
    assert isinstance(op, asyncop.AsyncOperation)
    assert op.runtime is rt
    assert op.state is OperationState.COMPLETED
    assert isinstance(elapsed, float) and elapsed >= 0.015
    assert isinstance(name, str) and name.startswith(f"{rt.name}-")


async def test_spawn_raises_the_failure_of_a_sync_function(rt: asyncop.Runtime) -> None:
    error = ValueError("sync failure")
    with pytest.raises(ValueError) as info:
        await asyncop.anyio.spawn(fail_with, error, runtime=rt)
    assert info.value is error


async def test_spawn_raises_the_failure_of_an_async_function(rt: asyncop.Runtime) -> None:
    error = LookupError("async failure")
    with pytest.raises(LookupError) as info:
        await asyncop.anyio.spawn(async_fail_with, error, runtime=rt)
    assert info.value is error


async def test_spawn_without_a_runtime_uses_the_default_runtime() -> None:
    name = await asyncop.anyio.spawn(thread_name)
    assert name.startswith(f"{asyncop.default_runtime().name}-")


@pytest.mark.parametrize(
    "work", [block_until_cancelled, sleep_until_cancelled], ids=["sync", "async"]
)
async def test_cancelling_the_spawning_task_cancels_the_work(
    rt: asyncop.Runtime, work: Callable[[list[str], str], Any]
) -> None:
    captured: list[asyncop.AsyncOperation] = []
    log: list[str] = []

    def capturing(log: list[str], label: str) -> Any:
        op = asyncop.current_operation()
        assert op is not None
        captured.append(op)
        return work(log, label)

    # An async work must stay an async function so that spawn runs it as a
    # coroutine: wrap it in a coroutine function of its own.
    async def capturing_async(log: list[str], label: str) -> Any:
        op = asyncop.current_operation()
        assert op is not None
        captured.append(op)
        return await work(log, label)

    target = capturing_async if work is sleep_until_cancelled else capturing
    outcome: list[str] = []

    async def host_task() -> None:
        try:
            await asyncop.anyio.spawn(target, log, "work", runtime=rt)
        except anyio.get_cancelled_exc_class():
            outcome.append("host cancelled")
            raise

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(host_task)
            await until(lambda: log == ["work running"])
            tg.cancel_scope.cancel()
    assert outcome == ["host cancelled"]
    [op] = captured
    assert await settled(op) is OperationState.CANCELLED
    assert op.token.cancelled
    assert log == ["work running"]


# ----------------------------------------------------------------------
# Many waiters
# ----------------------------------------------------------------------


async def test_two_hundred_concurrent_waits_all_complete(rt: asyncop.Runtime) -> None:
    ops = [rt.spawn(async_answer, i) for i in range(200)]
    results: dict[int, int] = {}

    async def waiter(i: int, op: asyncop.AsyncOperation) -> None:
        results[i] = await asyncop.anyio.wait(op)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for i, op in enumerate(ops):
                tg.start_soon(waiter, i, op)
    assert results == {i: 42 + i for i in range(200)}


async def test_two_hundred_concurrent_spawns_all_complete(rt: asyncop.Runtime) -> None:
    results: dict[int, int] = {}

    async def spawner(i: int) -> None:
        fn = answer if i % 2 else async_answer
        results[i] = await asyncop.anyio.spawn(fn, i, runtime=rt)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for i in range(200):
                tg.start_soon(spawner, i)
    assert results == {i: 42 + i for i in range(200)}


# ----------------------------------------------------------------------
# After the host loop has ended
# ----------------------------------------------------------------------


def test_late_completion_after_the_host_loop_ended_is_silent(
    anyio_backend: tuple[str, dict[str, Any]],
    rt: asyncop.Runtime,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend, options = anyio_backend
    thread_errors: list[object] = []
    monkeypatch.setattr(threading, "excepthook", thread_errors.append)
    caplog.set_level(logging.DEBUG, logger="asyncop")
    release = threading.Event()
    started = threading.Event()

    def stubborn() -> str:
        started.set()
        release.wait(5)
        return "late"

    op = rt.spawn(stubborn)

    async def host() -> bool:
        await until(started.is_set)
        with anyio.move_on_after(0.05) as scope:
            await asyncop.anyio.wait(op)
        return scope.cancelled_caught

    assert anyio.run(host, backend=backend, backend_options=options) is True
    assert not op.done
    release.set()
    assert op.wait(5).state is OperationState.COMPLETED
    assert op.result() == "late"
    time.sleep(0.05)  # let the worker run whatever follows the completion
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert thread_errors == []


def test_operation_ending_as_the_host_loop_closes_is_silent(
    anyio_backend: tuple[str, dict[str, Any]],
    rt: asyncop.Runtime,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Many waits are cancelled while their operations are ending, so that
    # some completions are handed to a host loop that is closing or closed.
    backend, options = anyio_backend
    thread_errors: list[object] = []
    monkeypatch.setattr(threading, "excepthook", thread_errors.append)
    caplog.set_level(logging.DEBUG, logger="asyncop")
    ops = [rt.spawn(time.sleep, 0.002 * (i % 10)) for i in range(50)]

    async def host() -> None:
        async with anyio.create_task_group() as tg:
            for op in ops:
                tg.start_soon(functools.partial(asyncop.anyio.wait, op))
            await anyio.sleep(0.01)
            tg.cancel_scope.cancel()

    anyio.run(host, backend=backend, backend_options=options)
    for op in ops:
        assert op.wait(5).state in {OperationState.COMPLETED, OperationState.CANCELLED}
    time.sleep(0.05)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert thread_errors == []
