"""The asyncio bridge: one trivial coroutine run on a host asyncio loop, n times in a row.

``bridge_call`` measures the round trip of ``asyncop.asyncio_bridge.run``:
an asyncop task hands a coroutine to its runtime's host loop thread and
waits for it without holding a worker; the coroutine's end wakes the task.
That is two cross-thread wakes per call, and the bookkeeping around them.

The peer is what asyncio itself offers for the same trip,
``asyncio.run_coroutine_threadsafe(coro, loop).result()`` from a plain
thread to a thread running the loop (the ``_uvloop`` systems run uvloop's
loop on both sides). asyncio is imported inside the functions: the other
workloads' processes do not load it. ``asyncop_run_sync`` is the bridge's blocking form,
``run_sync``, from a plain thread, for context.

Each system makes 100 untimed calls first, so that starting the loop's
thread stays out of the timed region. Target: asyncop's call costs no more
than the peer's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import asyncop
import asyncop.asyncio_bridge as bridge

from ._registry import Metrics, Ratio, workload
from ._timing import Stopwatch

if TYPE_CHECKING:
    import asyncio

__all__ = ["CALL"]

_WARMUP = 100
WORKERS = 2

CALL = workload(
    "bridge_call",
    "run a trivial coroutine on an asyncio loop in another thread and wait for it, n times",
    sizes=(20_000,),
    quick_sizes=(1_000,),
    checks=[Ratio("asyncop", "asyncio_threadsafe", limit=1.0)],
)


async def _trivial() -> int:
    return 1


# ----------------------------------------------------------------------
# asyncop: from a task, and from a plain thread
# ----------------------------------------------------------------------


def _bridge_from_task(n: int, factory: Callable[[], asyncio.AbstractEventLoop] | None) -> Metrics:
    async def main() -> Metrics:
        run = bridge.run
        for _ in range(_WARMUP):
            await run(_trivial)
        with Stopwatch() as watch:
            for _ in range(n):
                await run(_trivial)
        return watch.metrics()

    with asyncop.Runtime(WORKERS, asyncio_loop_factory=factory) as runtime:
        return runtime.run(main)


@CALL.system("asyncop")
def _call_asyncop(n: int) -> Metrics:
    return _bridge_from_task(n, None)


@CALL.system("asyncop_uvloop", requires=("uvloop",))
def _call_asyncop_uvloop(n: int) -> Metrics:
    import uvloop

    return _bridge_from_task(n, uvloop.new_event_loop)


@CALL.system("asyncop_run_sync")
def _call_asyncop_run_sync(n: int) -> Metrics:
    with asyncop.Runtime(WORKERS) as runtime:
        run_sync = bridge.run_sync
        for _ in range(_WARMUP):
            run_sync(_trivial, runtime=runtime)
        with Stopwatch() as watch:
            for _ in range(n):
                run_sync(_trivial, runtime=runtime)
    return watch.metrics()


# ----------------------------------------------------------------------
# The peer: run_coroutine_threadsafe from a plain thread to a loop thread
# ----------------------------------------------------------------------


@contextmanager
def _loop_thread(loop: asyncio.AbstractEventLoop) -> Iterator[asyncio.AbstractEventLoop]:
    """``loop`` run forever by a thread of its own, for the block's length."""
    thread = threading.Thread(target=loop.run_forever, name="bench-loop", daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def _threadsafe(n: int, loop: asyncio.AbstractEventLoop) -> Metrics:
    import asyncio

    submit = asyncio.run_coroutine_threadsafe
    with _loop_thread(loop):
        for _ in range(_WARMUP):
            submit(_trivial(), loop).result()
        with Stopwatch() as watch:
            for _ in range(n):
                submit(_trivial(), loop).result()
    return watch.metrics()


@CALL.system("asyncio_threadsafe")
def _call_asyncio_threadsafe(n: int) -> Metrics:
    import asyncio

    return _threadsafe(n, asyncio.new_event_loop())


@CALL.system("uvloop_threadsafe", requires=("uvloop",))
def _call_uvloop_threadsafe(n: int) -> Metrics:
    import uvloop

    return _threadsafe(n, uvloop.new_event_loop())
