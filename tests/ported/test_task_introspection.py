"""Looking at running tasks from inside the program, as asyncio's task
introspection does: every live task (``all_tasks``), the current one
(``current_task``), where a task is suspended (``get_stack``,
``print_stack``), and the slow-step warning of asyncio's debug mode.
"""

from __future__ import annotations

import logging
import time
from types import CoroutineType, FrameType
from typing import Any

import pytest

import asyncop
from asyncop import OperationState, lowlevel
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(30)

never = asyncop.Event(name="never")


async def innermost() -> None:
    await never.wait_async()


async def middle() -> None:
    await innermost()


async def outer() -> None:
    await middle()


def vruntime() -> asyncop.Runtime:
    return asyncop.Runtime(2, clock=VirtualClock(autojump=True))


def stack_of(op: asyncop.AsyncOperation[Any]) -> list[FrameType]:
    """The frames of a suspended task, outermost first, as ``Task.get_stack()`` gives."""
    frames = []
    coro: Any = lowlevel.task_coroutine(op)
    while isinstance(coro, CoroutineType) and coro.cr_frame is not None:
        frames.append(coro.cr_frame)
        coro = coro.cr_await
    return frames


def test_running_tasks_lists_live_tasks_started_or_not_and_drops_ended_ones() -> None:
    async def main() -> None:
        runtime = asyncop.current_runtime()
        me = asyncop.current_operation(require=True)
        async with asyncop.scope() as s:
            waiting = s.spawn(outer, name="waiting")
            quick = s.spawn(middle, name="fresh")
            assert lowlevel.running_tasks(runtime) == [me, waiting, quick]
            assert quick.state is OperationState.PENDING  # not stepped yet
            await wait_all_blocked()
            quick.cancel()
            await asyncop.checkpoint()
            assert lowlevel.running_tasks(runtime) == [me, waiting]
            assert s.children() == [waiting]
            waiting.cancel()

    with vruntime() as runtime:
        runtime.run(main)
        assert lowlevel.running_tasks(runtime) == []


def test_current_task_is_the_stepping_task_and_none_on_threads() -> None:
    def in_callback() -> tuple[object, object]:
        return lowlevel.current_task(), asyncop.current_operation()

    async def main() -> None:
        me = lowlevel.current_task()
        assert me is asyncop.current_operation()
        async with asyncop.scope(name="block") as block:
            assert lowlevel.current_task() is me  # the task runs the block
            assert asyncop.current_operation() is block
        callback = asyncop.current_operation(require=True).spawn(in_callback)
        task, op = await callback
        assert task is None and op is callback
        assert await asyncop.spawn_blocking(in_callback) == (None, None)

    with vruntime() as runtime:
        runtime.run(main)
    assert lowlevel.current_task() is None


def test_the_coroutine_of_a_parked_task_gives_its_await_chain() -> None:
    async def main() -> None:
        async with asyncop.scope() as s:
            op = s.spawn(outer, name="chain")
            assert lowlevel.task_coroutine(op) is None  # before its first step
            await wait_all_blocked()
            frames = stack_of(op)
            assert [frame.f_code.co_name for frame in frames] == ["outer", "middle", "innermost"]
            assert frames[-1].f_lineno == innermost.__code__.co_firstlineno + 1
            op.cancel()
        assert lowlevel.task_coroutine(op) is None  # ended

    with vruntime() as runtime:
        runtime.run(main)


def test_dump_names_the_line_of_the_innermost_await_and_what_it_waits_on() -> None:
    async def main() -> str:
        async with asyncop.scope() as s:
            s.spawn(outer, name="chain")
            await wait_all_blocked()
            text = asyncop.current_runtime().dump()
            s.cancel()
        return text

    with vruntime() as runtime:
        text = runtime.run(main)
    (line,) = [line for line in text.splitlines() if line.strip().startswith("chain [")]
    expected_line = innermost.__code__.co_firstlineno + 1
    assert line.endswith(f"waiting on event 'never' at {__file__}:{expected_line}")


def test_repr_says_name_state_and_where_it_was_made() -> None:
    async def main() -> asyncop.AsyncOperation[None]:
        op = asyncop.current_operation(require=True).spawn(middle, name="named")
        assert repr(op) == f"<AsyncOperation 'named' PENDING at {__file__}:{line + 1}>"
        await wait_all_blocked()
        op.cancel()
        return op

    line = test_repr_says_name_state_and_where_it_was_made.__code__.co_firstlineno + 1
    with vruntime() as runtime:
        op = runtime.run(main)
    assert repr(op) == f"<AsyncOperation 'named' CANCELLED at {__file__}:{line + 1}>"


def test_a_step_that_blocks_is_reported_with_the_task_and_its_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # asyncio's debug mode logs a slow callback; asyncop always does, past 0.1 s.
    async def careless() -> None:
        time.sleep(0.4)  # blocks every task of the runtime
        await asyncop.checkpoint()

    with caplog.at_level(logging.WARNING, logger="asyncop"), asyncop.Runtime(2) as runtime:
        runtime.run(careless)
    (record,) = [r for r in caplog.records if "without awaiting" in r.getMessage()]
    message = record.getMessage()
    assert ".careless' has run for " in message
    assert f"{__file__}:" in message
    assert "spawn_blocking" in message  # says what to do
