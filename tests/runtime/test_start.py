"""``start()``: launch a task and wait until it calls ``task_status.started()``."""

from __future__ import annotations

import sys
import threading
import time
from types import FrameType
from typing import Any

import pytest

import asyncop
from asyncop import Cancelled, OperationState, TaskStatus
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


class Boom(Exception):
    """The failure the tests raise on purpose."""


async def ready_after(
    delay: float, value: Any, log: list[str], *, task_status: TaskStatus[Any]
) -> str:
    await asyncop.sleep(delay)
    log.append("ready")
    task_status.started(value)
    await asyncop.sleep(1)
    log.append("finished")
    return "done"


@pytest.mark.asyncop
async def test_await_start_returns_the_started_value_and_the_task_keeps_running(
    autojump_clock: VirtualClock,
) -> None:
    log: list[str] = []
    async with asyncop.scope() as s:
        value = await s.start(ready_after, 0.5, 42, log)
        log.append(f"start returned {value}")
        assert [child.name for child in s.children()] == ["ready_after"]
    assert value == 42
    assert log == ["ready", "start returned 42", "finished"]


@pytest.mark.asyncop
async def test_started_without_a_value_gives_none(autojump_clock: VirtualClock) -> None:
    async def fn(*, task_status: TaskStatus[None]) -> None:
        task_status.started()

    async with asyncop.scope() as s:
        assert await s.start(fn) is None


def test_start_from_a_thread_blocks_until_ready(vruntime: asyncop.Runtime) -> None:
    log: list[str] = []
    gate = asyncop.Event()

    async def server(greeting: str, *, task_status: TaskStatus[str]) -> None:
        await asyncop.sleep(0.5)
        log.append("ready")
        task_status.started(greeting)
        await gate.wait_async()
        log.append("finished")

    with vruntime.scope() as root:
        value = root.start(server, "hello", name="server")
        log.append("start returned")
        assert [child.name for child in root.children()] == ["server"]
        gate.set()
    assert value == "hello"
    assert log == ["ready", "start returned", "finished"]


def test_a_sync_function_can_be_started(runtime: asyncop.Runtime) -> None:
    go_on = threading.Event()

    def worker(x: int, *, task_status: TaskStatus[int]) -> int:
        task_status.started(x + 1)
        go_on.wait(10)
        return x

    async def main() -> int:
        async with asyncop.scope() as s:
            value: int = await s.start(worker, 1)
            go_on.set()
        return value

    assert runtime.run(main) == 2


def test_a_child_may_call_started_before_start_gets_on(runtime: asyncop.Runtime) -> None:
    # Another worker may run the child as soon as it is spawned, while the
    # caller of start() is still on its way: hold the caller up right there.
    def child(*, task_status: TaskStatus[str]) -> None:
        task_status.started("ready")

    def slow_after_spawn(frame: FrameType, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code.co_name == "spawn":
            time.sleep(0.05)

    with runtime.scope() as s:
        sys.setprofile(slow_after_spawn)
        try:
            value = s.start(child)
        finally:
            sys.setprofile(None)
    assert value == "ready"


def test_the_scope_object_starts_into_its_operation(vruntime: asyncop.Runtime) -> None:
    log: list[str] = []
    block = vruntime.scope(name="outer")
    with pytest.raises(RuntimeError, match="not entered"):
        block.start(ready_after, 0, 1, log)
    parents: list[asyncop.AsyncOperation | None] = []

    async def fn(*, task_status: TaskStatus[int]) -> None:
        me = asyncop.current_operation()
        parents.append(me.parent if me is not None else None)
        task_status.started(7)

    with block as root:
        assert block.start(fn) == 7
    assert parents == [root]


def test_error_before_started_raises_from_start_and_leaves_the_scope_alone(
    vruntime: asyncop.Runtime,
) -> None:
    log: list[str] = []

    async def fails(*, task_status: TaskStatus[None]) -> None:
        await asyncop.sleep(0.1)
        raise Boom("not ready")

    async def sibling() -> None:
        await asyncop.sleep(1)
        log.append("sibling finished")

    async def main() -> list[str]:
        async with asyncop.scope() as s:
            s.spawn(sibling)
            with pytest.raises(Boom, match="not ready"):
                await s.start(fails)
            names = [child.name for child in s.children()]
        return names

    assert [name.rsplit(".", 1)[-1] for name in vruntime.run(main)] == ["sibling"]
    assert log == ["sibling finished"]


def test_error_before_started_raises_from_a_thread_start(vruntime: asyncop.Runtime) -> None:
    def fails(*, task_status: TaskStatus[None]) -> None:
        raise Boom("sync failure")

    with vruntime.scope() as root:
        with pytest.raises(Boom):
            root.start(fails)
        assert root.children() == []


def test_returning_without_started_raises_runtime_error(vruntime: asyncop.Runtime) -> None:
    async def lazy(*, task_status: TaskStatus[None]) -> int:
        await asyncop.sleep(0.1)
        return 5

    async def main() -> None:
        async with asyncop.scope() as s:
            with pytest.raises(RuntimeError, match=r"lazy' returned without calling"):
                await s.start(lazy)

    vruntime.run(main)
    with vruntime.scope() as root, pytest.raises(RuntimeError, match=r"task_status\.started"):
        root.start(lazy)


@pytest.mark.asyncop
async def test_calling_started_twice_raises_in_the_task(autojump_clock: VirtualClock) -> None:
    seen: list[BaseException] = []

    async def twice(*, task_status: TaskStatus[int]) -> None:
        task_status.started(1)
        try:
            task_status.started(2)
        except RuntimeError as exc:
            seen.append(exc)

    async with asyncop.scope() as s:
        assert await s.start(twice) == 1
    assert len(seen) == 1
    assert "twice" in str(seen[0])


def test_failure_after_started_fails_the_scope_like_any_child(vruntime: asyncop.Runtime) -> None:
    async def later(*, task_status: TaskStatus[None]) -> None:
        task_status.started()
        await asyncop.sleep(0.1)
        raise Boom("after ready")

    async def main() -> None:
        async with asyncop.scope() as s:
            await s.start(later)
            await asyncop.sleep(5)

    with pytest.raises(ExceptionGroup) as info:
        vruntime.run(main)
    assert info.group_contains(Boom, match="after ready")


def test_cancelled_caller_cancels_the_unstarted_task_and_waits_for_it(
    vruntime: asyncop.Runtime,
) -> None:
    log: list[str] = []

    async def slow(*, task_status: TaskStatus[None]) -> None:
        try:
            await asyncop.sleep(100)
        finally:
            log.append("slow cleaned up")
        task_status.started()

    async def caller(target: asyncop.AsyncOperation) -> None:
        try:
            await target.start(slow)
        except Cancelled:
            log.append("caller cancelled")
            raise

    async def main() -> list[str]:
        async with asyncop.scope() as s:
            op = s.spawn(caller, s)
            await wait_all_blocked()
            op.cancel()
            await asyncop.race(op)
            names = [child.name for child in s.children()]
            assert op.state is OperationState.CANCELLED
        return names

    assert vruntime.run(main) == []
    assert log == ["slow cleaned up", "caller cancelled"]


def test_cancelled_target_before_started_raises_runtime_error(vruntime: asyncop.Runtime) -> None:
    async def slow(*, task_status: TaskStatus[None]) -> None:
        await asyncop.sleep(100)

    async def main() -> str:
        async with asyncop.scope() as outer:
            async with asyncop.scope() as target:
                target.cancel()
            with pytest.raises(RuntimeError, match=r"ended|cancel"):
                await target.start(slow)

            async def nap() -> None:
                await asyncop.sleep(0)

            inner = outer.spawn(nap)
            await inner
        return "ok"

    assert vruntime.run(main) == "ok"


def test_start_into_a_live_scope_from_a_thread_while_a_task_runs_it(
    runtime: asyncop.Runtime,
) -> None:
    ready = threading.Event()
    target: list[asyncop.AsyncOperation] = []

    async def host() -> None:
        async with asyncop.scope() as s:
            target.append(s)
            ready.set()
            await asyncop.sleep(0.5)

    def server(*, task_status: TaskStatus[str]) -> None:
        task_status.started("up")

    op = runtime.spawn(host)
    assert ready.wait(10)
    assert target[0].start(server) == "up"
    op.wait(10)
    assert op.state is OperationState.COMPLETED


def test_task_status_ignored_lets_the_function_run_on_its_own(vruntime: asyncop.Runtime) -> None:
    async def serve(*, task_status: TaskStatus[int] = asyncop.TASK_STATUS_IGNORED) -> str:
        task_status.started(3)
        return "served"

    assert vruntime.run(serve) == "served"
    assert repr(asyncop.TASK_STATUS_IGNORED) == "TASK_STATUS_IGNORED"


def test_start_refuses_a_non_callable(vruntime: asyncop.Runtime) -> None:
    with vruntime.scope() as root, pytest.raises(TypeError, match="start"):
        root.start(42)  # type: ignore[arg-type]


def test_start_into_an_exited_scope_raises(vruntime: asyncop.Runtime) -> None:
    async def fn(*, task_status: TaskStatus[None]) -> None:
        task_status.started()

    with vruntime.scope() as root:
        pass
    with pytest.raises(RuntimeError, match="spawn into"):
        root.start(fn)
