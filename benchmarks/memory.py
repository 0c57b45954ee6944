"""Memory: what one parked coroutine task costs.

n tasks each await one event (``asyncop.Event``, ``asyncio.Event``,
``trio.Event``, ``anyio.Event``) that is set only at the end. Once every
task is parked, the collector runs (so that only live objects count) and
the resident set size is read; ``bytes_per_task`` is its growth since just
before the first spawn, over n. ``peak_bytes_per_task`` is the process's
peak resident size, read after the scope exits, over the same baseline: it
includes what spawning and waking allocated on the way. ``seconds`` is the
time from the first spawn until every task is parked.

RSS counts everything the process holds (thread stacks, allocator slack),
not only Python objects, which is what a user pays for; at n/10 the figure
is coarser. Target: asyncop's bytes per parked task at most asyncio's;
with the compiled core, at most 0.6 x asyncio's.
"""

from __future__ import annotations

import gc

import asyncop

from ._coro_common import (
    Counter,
    asyncop_all_parked,
    expect,
    peak_rss_bytes,
    register_anyio,
    register_asyncio,
    register_asyncop,
    register_trio,
    rss_bytes,
)
from ._registry import Metrics, Ratio, workload
from ._timing import Stopwatch

__all__ = ["MEMORY"]

MEMORY = workload(
    "memory",
    "n coroutine tasks parked on one event: resident bytes per parked task",
    sizes=(10_000, 100_000),
    quick_sizes=(1_000, 5_000),
    checks=[
        Ratio("asyncop", "asyncio", limit=1.0, metric="bytes_per_task"),
        Ratio("asyncop", "asyncio", limit=0.6, metric="bytes_per_task", compiled=True),
    ],
)


def _baseline() -> int:
    gc.collect()
    return rss_bytes()


def _metrics(n: int, watch: Stopwatch, rss0: int, parked: int) -> Metrics:
    return watch.metrics(
        bytes_per_task=(parked - rss0) / n,
        peak_bytes_per_task=(peak_rss_bytes() - rss0) / n,
    )


async def _memory_asyncop(n: int) -> Metrics:
    event = asyncop.Event()
    wait = event.wait_async
    waiting = Counter()
    woke = Counter()
    enter, bump = waiting.bump, woke.bump

    async def waiter() -> None:
        enter()
        await wait()
        bump()

    rss0 = _baseline()
    async with asyncop.scope() as scope:
        with Stopwatch() as watch:
            spawn = scope.spawn
            for _ in range(n):
                spawn(waiter)
            await asyncop_all_parked(waiting, n)
        parked = _baseline()
        event.set()
    expect(woke.value() == n, "not every waiter woke")
    return _metrics(n, watch, rss0, parked)


async def _memory_asyncio(n: int) -> Metrics:
    import asyncio

    event = asyncio.Event()
    wait = event.wait
    waiting = Counter()
    woke = Counter()
    enter, bump = waiting.bump, woke.bump

    async def waiter() -> None:
        enter()
        await wait()
        bump()

    rss0 = _baseline()
    async with asyncio.TaskGroup() as group:
        with Stopwatch() as watch:
            create_task = group.create_task
            for _ in range(n):
                create_task(waiter())
            # Each new task reaches its wait in the next pass of the ready
            # queue; a second pass makes sure.
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        expect(waiting.value() == n, "not every waiter was parked")
        parked = _baseline()
        event.set()
    expect(woke.value() == n, "not every waiter woke")
    return _metrics(n, watch, rss0, parked)


async def _memory_trio(n: int) -> Metrics:
    import trio
    import trio.testing

    event = trio.Event()
    wait = event.wait
    woke = Counter()
    bump = woke.bump

    async def waiter() -> None:
        await wait()
        bump()

    rss0 = _baseline()
    async with trio.open_nursery() as nursery:
        with Stopwatch() as watch:
            start_soon = nursery.start_soon
            for _ in range(n):
                start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
        parked = _baseline()
        event.set()
    expect(woke.value() == n, "not every waiter woke")
    return _metrics(n, watch, rss0, parked)


async def _memory_anyio(n: int) -> Metrics:
    import anyio

    event = anyio.Event()
    wait = event.wait
    waiting = Counter()
    woke = Counter()
    enter, bump = waiting.bump, woke.bump

    async def waiter() -> None:
        enter()
        await wait()
        bump()

    rss0 = _baseline()
    async with anyio.create_task_group() as group:
        with Stopwatch() as watch:
            start_soon = group.start_soon
            for _ in range(n):
                start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
        expect(waiting.value() == n, "not every waiter was parked")
        parked = _baseline()
        event.set()
    expect(woke.value() == n, "not every waiter woke")
    return _metrics(n, watch, rss0, parked)


register_asyncop(MEMORY, _memory_asyncop)
register_asyncio(MEMORY, _memory_asyncio)
register_trio(MEMORY, _memory_trio)
register_anyio(MEMORY, _memory_anyio)
