"""The error cases of ``asyncop.asyncio_bridge`` and the runtime's host asyncio loop.

``tests/test_error_messages.py`` adds ``BRIDGE_CASES`` to its table: each row
is ``(id, trigger, error type, text the message names, kind)`` and each
trigger takes that module's ``Ctx`` (``c.rt`` is a runtime on the real
clock) and returns the exception it provoked.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncop
import asyncop.asyncio_bridge as bridge

__all__ = ["BRIDGE_CASES"]


def _raises(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> BaseException:
    try:
        fn(*args, **kwargs)
    except BaseException as exc:
        return exc
    raise AssertionError(f"{fn!r} raised nothing")


def _in_task(c: Any, fn: Callable[..., Any], *args: Any) -> BaseException:
    """Run ``fn(*args)`` as a root task of the real-clock runtime; return its error."""
    result = c.rt.spawn(fn, *args).wait(20)
    assert result.error is not None, f"{fn!r} raised nothing"
    return result.error  # type: ignore[no-any-return]


async def noop_coroutine() -> None:
    return None


async def numbers() -> AsyncIterator[int]:
    yield 1


def _fresh(name: str, **kwargs: Any) -> asyncop.Runtime:
    return asyncop.Runtime(1, name=name, **kwargs)


def t_async_generator(c: Any) -> BaseException:
    return _raises(bridge.run_sync, numbers, runtime=c.rt)


def t_coroutine_object(c: Any) -> BaseException:
    coroutine = noop_coroutine()
    return _raises(bridge.run_sync, coroutine, runtime=c.rt)


def t_asyncop_awaitable(c: Any) -> BaseException:
    return _raises(bridge.run_sync, asyncop.checkpoint(), runtime=c.rt)


def t_not_callable(c: Any) -> BaseException:
    return _raises(bridge.run_sync, 42, runtime=c.rt)


def t_returns_asyncop_awaitable(c: Any) -> BaseException:
    return _raises(bridge.run_sync, asyncop.checkpoint, runtime=c.rt)


def t_returns_no_awaitable(c: Any) -> BaseException:
    def plain_sum(a: int, b: int) -> int:
        return a + b

    return _raises(bridge.run_sync, plain_sum, 1, 2, runtime=c.rt)


def t_run_under_asyncio(c: Any) -> BaseException:
    return _raises(asyncio.run, bridge.run(noop_coroutine))


def t_run_outside_a_task(c: Any) -> BaseException:
    coroutine = bridge.run(noop_coroutine)
    return _raises(coroutine.send, None)


def t_run_sync_in_a_task(c: Any) -> BaseException:
    async def blocks_a_worker() -> None:
        bridge.run_sync(noop_coroutine)

    return _in_task(c, blocks_a_worker)


def t_run_sync_runtime_type(c: Any) -> BaseException:
    return _raises(bridge.run_sync, noop_coroutine, runtime="the default")


def t_run_sync_on_the_host_loop(c: Any) -> BaseException:
    async def nested() -> None:
        bridge.run_sync(noop_coroutine, runtime=c.rt)

    return _raises(bridge.run_sync, nested, runtime=c.rt)


def t_run_sync_on_another_loop(c: Any) -> BaseException:
    async def nested() -> None:
        bridge.run_sync(noop_coroutine, runtime=c.rt)

    return _raises(asyncio.run, nested())


def t_no_host_after_shutdown(c: Any) -> BaseException:
    runtime = _fresh("never_bridged")
    runtime.shutdown()
    return _raises(bridge.run_sync, noop_coroutine, runtime=runtime)


def t_host_shut_down(c: Any) -> BaseException:
    runtime = _fresh("bridged_then_shut")
    bridge.run_sync(noop_coroutine, runtime=runtime)
    runtime.shutdown()
    return _raises(bridge.run_sync, noop_coroutine, runtime=runtime)


def _factory_failure(name: str, factory: Callable[[], Any]) -> BaseException:
    runtime = _fresh(name, asyncio_loop_factory=factory)
    try:
        return _raises(bridge.run_sync, noop_coroutine, runtime=runtime)
    finally:
        runtime.shutdown()


def t_factory_raises(c: Any) -> BaseException:
    def broken_factory() -> asyncio.AbstractEventLoop:
        raise OSError("no more file descriptors")

    return _factory_failure("broken_factory_rt", broken_factory)


def t_factory_returns_no_loop(c: Any) -> BaseException:
    cause = _factory_failure("no_loop_rt", lambda: "a string").__cause__
    assert cause is not None
    return cause


def t_factory_returns_closed_loop(c: Any) -> BaseException:
    loop = asyncio.new_event_loop()
    loop.close()
    cause = _factory_failure("closed_loop_rt", lambda: loop).__cause__
    assert cause is not None
    return cause


def t_factory_not_callable(c: Any) -> BaseException:
    return _raises(asyncop.Runtime, 1, asyncio_loop_factory="uvloop")


def t_shutdown_on_the_host_loop(c: Any) -> BaseException:
    async def shuts_down() -> None:
        c.rt.shutdown()

    return _raises(bridge.run_sync, shuts_down, runtime=c.rt)


def _outcome_in_thread(runtime: asyncop.Runtime, during: Callable[[], object]) -> BaseException:
    """The error of a run_sync() in a plain thread while ``during()`` runs in this one."""
    started = threading.Event()
    box: list[BaseException] = []

    async def parked() -> None:
        started.set()
        await asyncio.sleep(30)

    def caller() -> None:
        box.append(_raises(bridge.run_sync, parked, runtime=runtime))

    thread = threading.Thread(target=caller)
    thread.start()
    assert started.wait(10)
    during()
    thread.join(10)
    return box[0]


def t_cancelled_by_the_shutdown(c: Any) -> BaseException:
    runtime = _fresh("shutting_rt")
    return _outcome_in_thread(runtime, runtime.shutdown)


class _BreakingLoop(asyncio.SelectorEventLoop):
    """A loop whose run_forever() fails once stopped by anything but the host."""

    def run_forever(self) -> None:
        super().run_forever()
        raise RuntimeError("the loop broke")


def t_loop_closed_under_a_call(c: Any) -> BaseException:
    runtime = _fresh("breaking_rt", asyncio_loop_factory=_BreakingLoop)

    async def stop_the_loop() -> None:
        asyncio.get_running_loop().stop()

    def stop() -> None:
        # (The loop stops before it can report this call's end: it fails too.)
        _raises(bridge.run_sync, stop_the_loop, runtime=runtime)

    try:
        return _outcome_in_thread(runtime, stop)
    finally:
        runtime.shutdown()


BRIDGE_CASES: list[tuple[Any, ...]] = [
    ("bridge-async-generator", t_async_generator, TypeError, "'numbers'"),
    ("bridge-coroutine-object", t_coroutine_object, TypeError, "noop_coroutine"),
    ("bridge-asyncop-awaitable", t_asyncop_awaitable, TypeError, "checkpoint"),
    ("bridge-not-callable", t_not_callable, TypeError, "42"),
    ("bridge-returns-asyncop-awaitable", t_returns_asyncop_awaitable, TypeError, "checkpoint"),
    ("bridge-returns-no-awaitable", t_returns_no_awaitable, TypeError, "plain_sum"),
    ("bridge-run-under-asyncio", t_run_under_asyncio, RuntimeError, "asyncio_bridge.run()"),
    ("bridge-run-outside-a-task", t_run_outside_a_task, RuntimeError, "asyncio_bridge.run()"),
    ("bridge-run-sync-in-a-task", t_run_sync_in_a_task, RuntimeError, "blocks_a_worker'"),
    ("bridge-run-sync-runtime-type", t_run_sync_runtime_type, TypeError, "str"),
    ("bridge-run-sync-on-host-loop", t_run_sync_on_the_host_loop, RuntimeError, "'errors_rt'"),
    ("bridge-run-sync-on-other-loop", t_run_sync_on_another_loop, RuntimeError, "run_sync()"),
    ("bridge-no-host-after-shutdown", t_no_host_after_shutdown, RuntimeError, "'never_bridged'"),
    ("bridge-host-shut-down", t_host_shut_down, RuntimeError, "'bridged_then_shut'"),
    ("bridge-factory-raises", t_factory_raises, RuntimeError, "broken_factory"),
    ("bridge-factory-no-loop", t_factory_returns_no_loop, TypeError, "'a string'"),
    ("bridge-factory-closed-loop", t_factory_returns_closed_loop, RuntimeError, "closed=True"),
    ("bridge-factory-not-callable", t_factory_not_callable, TypeError, "'uvloop'"),
    ("bridge-shutdown-on-host-loop", t_shutdown_on_the_host_loop, RuntimeError, "'errors_rt'"),
    (
        "bridge-cancelled-by-shutdown",
        t_cancelled_by_the_shutdown,
        RuntimeError,
        "'shutting_rt'",
        "outcome",
    ),
    (
        "bridge-loop-closed-under-call",
        t_loop_closed_under_a_call,
        RuntimeError,
        "'breaking_rt'",
        "outcome",
    ),
]
