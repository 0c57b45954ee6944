"""Another event loop's objects in asyncop, and asyncop's under another loop.

Both raise one TypeError that names the object, the loop it belongs to, and
``asyncop.anyio`` as the way across, instead of each loop's own puzzle
("no running event loop", "Task got bad yield"...). anyio's calls are no
foreign objects: asyncop is an anyio backend, and they work in its tasks.
Also: plain functions and async generators that would leave work unrun are
refused.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
import trio

import asyncop
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def rt() -> Iterator[asyncop.Runtime]:
    runtime = asyncop.Runtime(2, name=f"for{id(object()):x}", clock=VirtualClock(autojump=True))
    try:
        yield runtime
    finally:
        assert runtime.shutdown(timeout=10)


def _error_of(run: Callable[[], object]) -> BaseException:
    try:
        run()
    except BaseException as exc:
        return exc
    raise AssertionError("nothing was raised")


# -- other loops' objects inside an asyncop task ---------------------------------


async def _asyncio_sleep() -> None:
    await asyncio.sleep(1)


async def _asyncio_sleep_zero() -> None:
    await asyncio.sleep(0)


async def _asyncio_event() -> None:
    await asyncio.Event().wait()


async def _asyncio_future() -> None:
    loop = asyncio.new_event_loop()
    try:
        await loop.create_future()
    finally:
        loop.close()


async def _asyncio_task() -> None:
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(asyncio.sleep(1))
        try:
            await task
        finally:
            task.cancel()
            loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
    finally:
        loop.close()


async def _trio_sleep() -> None:
    await trio.sleep(1)


async def _trio_checkpoint() -> None:
    await trio.lowlevel.checkpoint()


async def _anyio_sleep() -> None:
    await anyio.sleep(0.01)


async def _anyio_event() -> None:
    await anyio.Event().wait()


async def _asyncio_get_running_loop() -> None:
    asyncio.get_running_loop()  # a C function: no asyncio frame in the traceback


async def _httpx_get() -> None:
    httpx = pytest.importorskip("httpx")
    # httpcore asks sniffio for the running library and refuses "asyncop".
    async with httpx.AsyncClient(trust_env=False, verify=False) as client:
        await client.get("http://127.0.0.1:9/")


FOREIGN_IN_ASYNCOP = {
    "asyncio.sleep": (_asyncio_sleep, "asyncio", "asyncio.sleep()"),
    "asyncio.sleep(0)": (_asyncio_sleep_zero, "asyncio", "asyncio.sleep(0)"),
    "asyncio.Event": (_asyncio_event, "asyncio", "asyncio.Event.wait()"),
    "asyncio.Future": (_asyncio_future, "asyncio", "Future"),
    "asyncio.Task": (_asyncio_task, "asyncio", "Task"),
    "asyncio.get_running_loop": (
        _asyncio_get_running_loop,
        "asyncio",
        "asyncio.get_running_loop()",
    ),
    "httpx": (_httpx_get, "asyncio", "httpx's transport (httpcore)"),
    "trio.sleep": (_trio_sleep, "trio", "trio.sleep()"),
    "trio.checkpoint": (_trio_checkpoint, "trio", "CancelShieldedCheckpoint"),
}


@pytest.mark.parametrize("body", [_anyio_sleep, _anyio_event], ids=["sleep", "Event"])
def test_anyio_calls_in_an_asyncop_task_run_on_asyncop(rt: asyncop.Runtime, body: Any) -> None:
    async def main() -> str:
        async with asyncop.move_on_after(0.05) as scope:
            await body()
        return "moved on" if scope.cancelled_caught else "ended"

    expected = "ended" if body is _anyio_sleep else "moved on"
    assert rt.run(main) == expected


@pytest.mark.parametrize("case", sorted(FOREIGN_IN_ASYNCOP))
def test_another_loops_object_in_an_asyncop_task_is_a_clear_type_error(
    rt: asyncop.Runtime, case: str
) -> None:
    body, loop, names = FOREIGN_IN_ASYNCOP[case]
    error = _error_of(lambda: rt.run(body))
    assert isinstance(error, TypeError), repr(error)
    message = str(error)
    assert names in message
    assert loop in message
    assert "asyncop.anyio" in message


@pytest.mark.parametrize("case", ["asyncio.Future", "asyncio.sleep(0)"])
def test_a_yielded_foreign_object_is_thrown_into_the_task_where_it_can_be_caught(
    rt: asyncop.Runtime, case: str
) -> None:
    body = FOREIGN_IN_ASYNCOP[case][0]

    async def main() -> str:
        try:
            await body()
        except TypeError as exc:
            await asyncop.sleep(1)  # the task goes on normally
            return str(exc)
        return "nothing raised"

    assert "asyncop.anyio" in rt.run(main)


def test_the_runtime_runs_new_work_after_foreign_objects(rt: asyncop.Runtime) -> None:
    for body, _, _ in FOREIGN_IN_ASYNCOP.values():
        with pytest.raises(TypeError):
            rt.run(body)

    async def fine() -> int:
        await asyncop.sleep(1)
        return 5

    assert rt.run(fine) == 5


# -- asyncop awaitables under other loops ---------------------------------------


def _asyncop_awaitables() -> dict[str, Callable[[], Any]]:
    return {
        "sleep(1)": lambda: asyncop.sleep(1),
        "checkpoint()": asyncop.checkpoint,
        "sleep(0)": lambda: asyncop.sleep(0),
        "channel": lambda: asyncop.Channel(1).recv_async(),
        "lock": lambda: asyncop.Lock().lock_async(),
        "event": lambda: asyncop.Event().wait_async(),
        "semaphore": lambda: asyncop.Semaphore(0).acquire_async(),
        "select": lambda: asyncop.select(asyncop.sleep(1)),
        "spawn_blocking": lambda: asyncop.spawn_blocking(int),
    }


def _under(loop: str, make: Callable[[], Any]) -> BaseException:
    async def main() -> None:
        await make()

    runner: dict[str, Callable[[], Any]] = {
        "asyncio": lambda: asyncio.run(main()),
        "trio": lambda: trio.run(main),
        "anyio-asyncio": lambda: anyio.run(main, backend="asyncio"),
        "anyio-trio": lambda: anyio.run(main, backend="trio"),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "never awaited" either
        return _error_of(runner[loop])


@pytest.mark.parametrize("loop", ["asyncio", "trio", "anyio-asyncio", "anyio-trio"])
@pytest.mark.parametrize("what", sorted(_asyncop_awaitables()))
def test_an_asyncop_awaitable_under_another_loop_is_a_clear_type_error(
    loop: str, what: str
) -> None:
    error = _under(loop, _asyncop_awaitables()[what])
    assert isinstance(error, TypeError), repr(error)
    message = str(error)
    assert "asyncop awaitable" in message
    assert loop.rpartition("-")[2] in message  # the loop it was awaited under
    assert "asyncop.anyio" in message


@pytest.mark.parametrize("what", sorted(_asyncop_awaitables()))
def test_an_asyncop_awaitable_made_an_asyncio_task_is_refused_not_completed(what: str) -> None:
    # Handed to asyncio.create_task() itself rather than awaited in a
    # coroutine: never a task that ends at once as if the wait were over.
    async def main() -> object:
        return await asyncio.create_task(_asyncop_awaitables()[what]())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the refused object, never awaited
        error = _error_of(lambda: asyncio.run(main()))
        # The error's traceback holds the refused object: let both go here,
        # while its "never awaited" warning is still ignored.
        refused, what = isinstance(error, TypeError), repr(error)
        del error
        gc.collect()
    assert refused, what


def test_an_operation_awaited_under_asyncio_is_a_clear_type_error(rt: asyncop.Runtime) -> None:
    op = rt.create(lambda o, c: None, name="foreign_awaited")

    async def main() -> None:
        await op

    error = _error_of(lambda: asyncio.run(main()))
    assert isinstance(error, TypeError)
    assert "'foreign_awaited'" in str(error) and "asyncio" in str(error)


def _asyncop_blocks(rt: asyncop.Runtime) -> dict[str, Callable[[], Any]]:
    async def in_block(block: Any) -> None:
        async with block:
            pass

    return {
        "asyncop.scope()": lambda: in_block(asyncop.scope()),
        "runtime.scope()": lambda: in_block(rt.scope()),
        "move_on_after()": lambda: in_block(asyncop.move_on_after(1)),
        "fail_after()": lambda: in_block(asyncop.fail_after(1)),
        "current_time()": lambda: asyncio.sleep(asyncop.current_time()),
        "current_runtime()": lambda: asyncio.sleep(0, asyncop.current_runtime()),
        "stop_requested()": lambda: asyncio.sleep(0, asyncop.stop_requested()),
    }


@pytest.mark.parametrize("loop", ["asyncio", "trio", "anyio-asyncio", "anyio-trio"])
@pytest.mark.parametrize(
    "what",
    [
        "asyncop.scope()",
        "runtime.scope()",
        "move_on_after()",
        "fail_after()",
        "current_time()",
        "current_runtime()",
        "stop_requested()",
    ],
)
def test_a_block_or_call_that_needs_an_operation_names_the_loop_it_met(
    rt: asyncop.Runtime, loop: str, what: str
) -> None:
    # What to write outside an operation ("with runtime.scope()", "call it
    # from an operation's code") would block or fail the other loop's task:
    # the error names that loop and asyncop.anyio as the way across.
    error = _under(loop, _asyncop_blocks(rt)[what])
    assert isinstance(error, RuntimeError), repr(error)
    message = str(error)
    assert f"in a task of {loop.rpartition('-')[2]}," in message
    assert "asyncop.anyio" in message
    assert "runtime.scope()" not in message.partition(";")[2]


def test_a_block_outside_any_loop_still_says_what_to_write_there() -> None:
    with pytest.raises(RuntimeError, match=r"outside an operation, write 'with runtime.scope\(\)'"):
        asyncop.scope()
    with pytest.raises(RuntimeError, match="call it from inside an operation's code"):
        asyncop.move_on_after(1)


# -- work that would never run ---------------------------------------------------


async def _agen() -> Any:
    yield 1


def test_spawning_an_async_generator_function_is_refused(rt: asyncop.Runtime) -> None:
    import functools

    for fn in (_agen, functools.partial(_agen)):
        with pytest.raises(TypeError, match="async generator"):
            rt.spawn(fn)
        with pytest.raises(TypeError, match="async generator"):
            rt.create(fn)

    async def main() -> None:
        me = asyncop.current_operation()
        assert me is not None
        with pytest.raises(TypeError, match="async generator"):
            me.spawn(_agen)
        async with asyncop.scope() as s:
            with pytest.raises(TypeError, match="async generator"):
                s.spawn(_agen)

    rt.run(main)
    assert rt.dump().splitlines()[0].endswith("no live operations")


RETURNS_UNRUN: dict[str, Callable[[], Any]] = {
    "asyncop.sleep": lambda: asyncop.sleep(10),
    "lock_async": asyncop.Lock().lock_async,
    "send_async": lambda: asyncop.Channel(1).send_async(1),
    "coroutine": lambda: _asyncio_sleep(),
    "async generator": lambda: _agen(),
}


@pytest.mark.parametrize("what", sorted(RETURNS_UNRUN))
def test_a_plain_function_returning_unrun_work_is_refused(rt: asyncop.Runtime, what: str) -> None:
    make = RETURNS_UNRUN[what]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "never awaited" besides
        error = _error_of(lambda: rt.run(make))
        op = rt.spawn(make, name="returns_unrun")
        op.wait(10)
    assert isinstance(error, TypeError), repr(error)
    assert "would never run" in str(error)
    assert op.state is asyncop.OperationState.FAILED
    assert isinstance(op.error, TypeError)


def test_spawn_of_a_function_returning_a_sleep_is_refused_not_completed(
    rt: asyncop.Runtime,
) -> None:
    op = rt.spawn(lambda: asyncop.sleep(10))
    op.wait(10)
    assert op.state is asyncop.OperationState.FAILED
    assert "sleep(10)" in str(op.error)


async def _async_fn() -> int:
    return 1


@pytest.mark.parametrize("fn", [_async_fn, _agen], ids=["async-def", "async-generator"])
def test_spawn_blocking_of_an_async_function_is_refused(rt: asyncop.Runtime, fn: Any) -> None:
    with pytest.raises(TypeError, match="spawn_blocking"):
        asyncop.spawn_blocking(fn)


@pytest.mark.parametrize("what", sorted(RETURNS_UNRUN))
def test_spawn_blocking_of_a_function_returning_unrun_work_fails_the_await(
    rt: asyncop.Runtime, what: str
) -> None:
    make = RETURNS_UNRUN[what]

    async def main() -> str:
        try:
            await asyncop.spawn_blocking(make)
        except TypeError as exc:
            return str(exc)
        return "nothing raised"

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert "never runs in a thread" in rt.run(main)
