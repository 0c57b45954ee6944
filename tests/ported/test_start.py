"""``start()`` / ``task_status``, ported from trio's ``nursery.start`` cases and
anyio's ``TaskGroup.start`` cases.

Deliberate difference: a task started into a scope that is already cancelled
never runs (trio and anyio run it up to its first checkpoint).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import asyncop
from asyncop import TASK_STATUS_IGNORED, Cancelled, OperationState, TaskStatus
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


class Boom(Exception):
    """A failure raised on purpose."""


async def sleep_forever() -> None:
    await asyncop.sleep(float("inf"))


async def ready_then_sleep(value: Any = None, *, task_status: TaskStatus[Any]) -> str:
    await asyncop.sleep(1)
    task_status.started(value)
    await asyncop.sleep(1)
    return "finished"


@pytest.mark.asyncop
async def test_start_returns_the_value_and_the_task_runs_on(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        assert await s.start(ready_then_sleep, "hello") == "hello"
        assert asyncop.current_time() == 1
        (child,) = s.children()
    assert child.result() == "finished"
    assert asyncop.current_time() == 2


@pytest.mark.asyncop
async def test_started_without_value_gives_none(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        assert await s.start(ready_then_sleep) is None


@pytest.mark.asyncop
async def test_started_twice_raises(autojump_clock: VirtualClock) -> None:
    errors: list[BaseException] = []

    async def twice(*, task_status: TaskStatus[int]) -> None:
        task_status.started(1)
        try:
            task_status.started(2)
        except RuntimeError as exc:
            errors.append(exc)

    async with asyncop.scope() as s:
        assert await s.start(twice) == 1
    assert len(errors) == 1


@pytest.mark.asyncop
async def test_return_without_started_raises_runtime_error(autojump_clock: VirtualClock) -> None:
    async def never(*, task_status: TaskStatus[None]) -> None:
        await asyncop.sleep(1)

    async with asyncop.scope() as s:
        with pytest.raises(RuntimeError):
            await s.start(never)


@pytest.mark.asyncop
async def test_error_before_started_is_raised_bare_from_start(
    autojump_clock: VirtualClock,
) -> None:
    async def fails(*, task_status: TaskStatus[None]) -> None:
        await asyncop.sleep(1)
        raise Boom("early")

    async with asyncop.scope() as s:
        sibling = s.spawn(asyncop_nap, 5)
        with pytest.raises(Boom):
            await s.start(fails)
    # the failure went to start()'s caller only: the sibling was not cancelled
    assert sibling.state is OperationState.COMPLETED


async def asyncop_nap(seconds: float) -> None:
    await asyncop.sleep(seconds)


@pytest.mark.asyncop
async def test_error_after_started_fails_the_scope(autojump_clock: VirtualClock) -> None:
    async def fails_later(*, task_status: TaskStatus[None]) -> None:
        task_status.started()
        await asyncop.sleep(1)
        raise Boom("late")

    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as s:
            await s.start(fails_later)
            await sleep_forever()
    assert [type(e) for e in info.value.exceptions] == [Boom]


@pytest.mark.asyncop
async def test_cancelled_caller_cancels_the_starting_task(autojump_clock: VirtualClock) -> None:
    log: list[str] = []

    async def slow_start(*, task_status: TaskStatus[None]) -> None:
        try:
            await asyncop.sleep(10)
        except Cancelled:
            log.append("child cancelled")
            raise
        task_status.started()

    async with asyncop.scope() as outer:
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=1):
                await outer.start(slow_start)
    assert log == ["child cancelled"]
    assert outer.children() == []


@pytest.mark.asyncop
async def test_started_task_outlives_its_starter(autojump_clock: VirtualClock) -> None:
    holder: list[str] = []

    async def server(*, task_status: TaskStatus[None]) -> None:
        task_status.started()
        await asyncop.sleep(5)
        holder.append("server done")

    async def starter(s: asyncop.AsyncOperation) -> None:
        await s.start(server)

    async with asyncop.scope() as s:
        op = s.spawn(starter, s)
        await asyncop.sleep(1)
        assert op.state is OperationState.COMPLETED
    assert holder == ["server done"]


@pytest.mark.asyncop
async def test_start_keeps_scope_open(autojump_clock: VirtualClock) -> None:
    # trio test_nursery_start_keeps_nursery_open
    log: list[str] = []

    async def sleep_then_start(s: asyncop.AsyncOperation) -> None:
        await s.start(ready_then_sleep)
        log.append("started")

    async with asyncop.scope() as outer, asyncop.scope() as inner:
        outer.spawn(sleep_then_start, inner)
        await wait_all_blocked()
    assert log == ["started"]
    assert asyncop.current_time() == 2


@pytest.mark.asyncop
async def test_start_from_outside_into_a_cancelled_scope(autojump_clock: VirtualClock) -> None:
    # As in trio and anyio: the task runs under the caller until started(),
    # then belongs to the cancelled scope, whose cancel reaches it at its
    # next await.
    ran: list[str] = []

    async def fn(*, task_status: TaskStatus[None]) -> None:
        ran.append("ran")
        task_status.started()
        await asyncop.checkpoint()
        ran.append("not reached")

    async def caller(target: asyncop.AsyncOperation) -> str:
        try:
            await target.start(fn)
        except RuntimeError as exc:
            return str(exc)
        return "started"

    async with asyncop.scope() as outer, asyncop.scope(name="target") as target:
        target.cancel()
        op = outer.spawn(caller, target)
        async with asyncop.scope(shield=True):  # keep target open meanwhile
            await asyncop.sleep(1)
    assert ran == ["ran"]
    assert op.result() == "started"


@pytest.mark.asyncop
async def test_nested_start(autojump_clock: VirtualClock) -> None:
    async def inner(*, task_status: TaskStatus[str]) -> None:
        task_status.started("inner")
        await asyncop.sleep(1)

    async def outer(s: asyncop.AsyncOperation, *, task_status: TaskStatus[str]) -> None:
        value = await s.start(inner)
        task_status.started(value + "+outer")

    async with asyncop.scope() as s:
        assert await s.start(outer, s) == "inner+outer"


@pytest.mark.asyncop
async def test_start_without_task_status_parameter(autojump_clock: VirtualClock) -> None:
    async def plain() -> None:
        await asyncop.sleep(0)

    async with asyncop.scope() as s:
        with pytest.raises(TypeError):
            await s.start(plain)


@pytest.mark.asyncop
async def test_task_status_ignored_default_with_spawn(autojump_clock: VirtualClock) -> None:
    async def server(*, task_status: TaskStatus[int] = TASK_STATUS_IGNORED) -> int:
        task_status.started(1)
        await asyncop.sleep(1)
        return 2

    async with asyncop.scope() as s:
        op = s.spawn(server)
    assert op.result() == 2


@pytest.mark.asyncop
async def test_start_names_the_child(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        await s.start(ready_then_sleep, name="srv")
        assert [c.name for c in s.children()] == ["srv"]


@pytest.mark.asyncop
async def test_start_after_scope_exit_raises(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        pass
    with pytest.raises(RuntimeError):
        await s.start(ready_then_sleep)


def test_start_sync_function_from_thread(vruntime: asyncop.Runtime) -> None:
    def worker(*, task_status: TaskStatus[str]) -> None:
        task_status.started("ready")

    with vruntime.scope() as s:
        assert s.start(worker) == "ready"


def test_start_from_thread_error_before_started(vruntime: asyncop.Runtime) -> None:
    async def fails(*, task_status: TaskStatus[None]) -> None:
        raise Boom

    with vruntime.scope() as s, pytest.raises(Boom):
        s.start(fails)


def test_started_from_another_thread(vruntime: asyncop.Runtime) -> None:
    async def fn(*, task_status: TaskStatus[str]) -> None:
        t = threading.Thread(target=task_status.started, args=("from thread",))
        t.start()
        await asyncop.sleep(1)
        t.join()

    async def main() -> str:
        async with asyncop.scope() as s:
            return str(await s.start(fn))

    assert vruntime.run(main) == "from thread"


async def reports_nothing(seconds: float) -> None:
    await asyncop.sleep(seconds)


class _StartableObject:
    async def __call__(self, *, task_status: TaskStatus[str]) -> None:
        task_status.started("from __call__")


async def takes_any_keyword(**kwargs: Any) -> None:
    kwargs["task_status"].started("from **kwargs")


@pytest.mark.asyncop
async def test_start_of_a_function_without_task_status_says_what_to_add(
    autojump_clock: VirtualClock,
) -> None:
    # The call would fail inside the child with Python's own "unexpected
    # keyword argument": start() refuses it first, naming the function and
    # the parameter to add, and starts nothing.
    async with asyncop.scope() as s:
        with pytest.raises(TypeError, match="'reports_nothing' with a task_status keyword") as e:
            await s.start(reports_nothing, 1)
        assert "give it a keyword parameter 'task_status'" in str(e.value)
        assert s.children() == []


@pytest.mark.asyncop
async def test_start_accepts_task_status_by_any_spelling(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        assert await s.start(_StartableObject()) == "from __call__"
        assert await s.start(takes_any_keyword) == "from **kwargs"


def test_start_of_a_function_without_task_status_from_a_thread(
    vruntime: asyncop.Runtime,
) -> None:
    expected = "'reports_nothing' with a task_status keyword"
    with vruntime.scope() as s, pytest.raises(TypeError, match=expected):
        s.start(reports_nothing, 1)
