"""Thread callbacks: trivial sync calls run on a pool of 2 worker threads.

``thread_callbacks_one`` submits one call and waits for it, n times: it
measures the round trip (a cross-thread wake each way). The peers that
offload from an event loop (``asyncio.to_thread``, ``trio.to_thread``,
``anyio.to_thread``) do the same round trip from a coroutine and are shown
for context; the target is against ``ThreadPoolExecutor``.

``thread_callbacks_batch`` submits n calls, then waits for each: it
measures the per-item cost of the queue and the bookkeeping.

Every system gets the same number of worker threads, and 100 untimed calls
first so that thread start-up stays out of the timed region.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

import asyncop

from ._registry import Metrics, Ratio, workload
from ._timing import Stopwatch

__all__ = ["BATCH", "ONE", "WORKERS"]

WORKERS = 2
_WARMUP = 100


def _noop() -> None:
    return None


ONE = workload(
    "thread_callbacks_one",
    "submit one trivial sync callback to 2 worker threads and wait for it, n times",
    sizes=(20_000,),
    quick_sizes=(1_000,),
    checks=[Ratio("asyncop", "threadpool", limit=1.0)],
)

BATCH = workload(
    "thread_callbacks_batch",
    "submit n trivial sync callbacks to 2 worker threads, then wait for each",
    sizes=(100_000,),
    quick_sizes=(5_000,),
    checks=[Ratio("asyncop", "threadpool", limit=1.0)],
)


# ----------------------------------------------------------------------
# asyncop and ThreadPoolExecutor
# ----------------------------------------------------------------------


@ONE.system("asyncop")
def _one_asyncop(n: int) -> Metrics:
    with asyncop.Runtime(WORKERS) as runtime:
        spawn = runtime.spawn
        for _ in range(_WARMUP):
            spawn(_noop).wait()
        with Stopwatch() as watch:
            for _ in range(n):
                spawn(_noop).wait()
    return watch.metrics()


@ONE.system("threadpool")
def _one_threadpool(n: int) -> Metrics:
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        submit = pool.submit
        for _ in range(_WARMUP):
            submit(_noop).result()
        with Stopwatch() as watch:
            for _ in range(n):
                submit(_noop).result()
    return watch.metrics()


@BATCH.system("asyncop")
def _batch_asyncop(n: int) -> Metrics:
    with asyncop.Runtime(WORKERS) as runtime:
        spawn = runtime.spawn
        for op in [spawn(_noop) for _ in range(_WARMUP)]:
            op.wait()
        with Stopwatch() as watch:
            ops = [spawn(_noop) for _ in range(n)]
            for op in ops:
                op.wait()
    return watch.metrics()


@BATCH.system("threadpool")
def _batch_threadpool(n: int) -> Metrics:
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        submit = pool.submit
        for future in [submit(_noop) for _ in range(_WARMUP)]:
            future.result()
        with Stopwatch() as watch:
            futures = [submit(_noop) for _ in range(n)]
            for future in futures:
                future.result()
    return watch.metrics()


# ----------------------------------------------------------------------
# Event-loop peers: offload one call at a time from a coroutine
# ----------------------------------------------------------------------


async def _offload_loop(n: int, offload: Callable[[], Awaitable[object]]) -> Metrics:
    for _ in range(_WARMUP):
        await offload()
    with Stopwatch() as watch:
        for _ in range(n):
            await offload()
    return watch.metrics()


async def _asyncio_offload(n: int) -> Metrics:
    import asyncio

    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        loop.set_default_executor(pool)
        return await _offload_loop(n, lambda: asyncio.to_thread(_noop))


@ONE.system("asyncio")
def _one_asyncio(n: int) -> Metrics:
    import asyncio

    return asyncio.run(_asyncio_offload(n))


@ONE.system("uvloop", requires=("uvloop",))
def _one_uvloop(n: int) -> Metrics:
    import uvloop

    return uvloop.run(_asyncio_offload(n))


@ONE.system("trio", requires=("trio",))
def _one_trio(n: int) -> Metrics:
    import trio

    async def main() -> Metrics:
        limiter = trio.CapacityLimiter(WORKERS)
        return await _offload_loop(n, lambda: trio.to_thread.run_sync(_noop, limiter=limiter))

    return trio.run(main)


def _anyio_offload(n: int, backend: str) -> Metrics:
    import anyio
    import anyio.to_thread

    async def main() -> Metrics:
        limiter = anyio.CapacityLimiter(WORKERS)
        return await _offload_loop(n, lambda: anyio.to_thread.run_sync(_noop, limiter=limiter))

    result: Metrics = anyio.run(main, backend=backend)
    return result


@ONE.system("anyio_asyncio", requires=("anyio",))
def _one_anyio_asyncio(n: int) -> Metrics:
    return _anyio_offload(n, "asyncio")


@ONE.system("anyio_trio", requires=("anyio", "trio"))
def _one_anyio_trio(n: int) -> Metrics:
    return _anyio_offload(n, "trio")
