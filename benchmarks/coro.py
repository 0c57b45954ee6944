"""Coroutine tasks: spawn and join n of them, cancel n sleepers.

- ``spawn_join``: one scope spawns n coroutine tasks, each of which awaits
  one checkpoint; timed from the first spawn to the scope's exit. The
  peers do the same with their own group and checkpoint: an asyncio
  ``TaskGroup`` and ``await asyncio.sleep(0)``, a trio nursery and
  ``trio.lowlevel.checkpoint()``, an anyio task group and
  ``anyio.lowlevel.checkpoint()``. Targets: asyncio's time over asyncop's
  at least 1, trio's at least 3; the checks state them the other way up,
  asyncop over the peer at most 1 and at most 1/3. The compiled core
  aims further: at most 0.7 x uvloop's time (a check marked
  ``(compiled)``, n/a when the core runs as Python), here and in
  ``cancel_sleepers`` and ``deep_tree``.

  Diagnostics run beside it. ``asyncop_w1`` and ``asyncop_w2`` step the
  same tasks on one and on two workers (``asyncop`` has one per CPU).
  ``asyncop_nogc`` and ``asyncio_nogc`` turn the collector off, which
  tells how much of each figure is garbage collection. The tight spawn
  loop is one step of seconds; it computes, so the watchdog leaves it
  alone, and the children it queues run on its worker once it ends
  (``threads`` counts the threads, to show that no extra worker joined).
  ``asyncop_chunk`` and ``asyncop_1thread`` (on one worker) checkpoint
  after every 1,000 spawns, so children run while the loop goes on.
  ``pyfloor`` and ``pyfloor_locked`` run the same children on the least
  scheduler Python allows (``_floor.py``: a task object, a context copy,
  a deque, one thread; the second adds a lock round trip per spawn, step
  and end): the part of every figure that no pure-Python design avoids.

- ``cancel_sleepers``: n tasks sleep for an hour (so that each holds a
  real timer, on every system), then the scope is cancelled; timed from
  the cancel to the scope's exit. The cancel happens once every task is
  parked: every task bumps a count just before it parks; asyncop
  checkpoints until the count is complete, trio and anyio ask their
  scheduler (``wait_all_tasks_blocked``), asyncio runs its ready queue
  twice, and each checks the count before the cancel. asyncio's ``TaskGroup``
  has no cancel, so its body raises and the group cancels the children, as
  it would for any failure. Target: asyncop's time at most asyncio's.
  ``asyncop_w1`` runs it on one worker.

Both run at n and n/10, and check that every task ran (and ended) so that a
fast but wrong run fails rather than scores.

- ``deep_tree``: n nested levels (1,000), each a coroutine task that opens
  its own scope and spawns the next level into it, down to a leaf that
  sleeps for an hour: ``async with asyncop.scope() as s:
  s.spawn(level, k - 1)``, an asyncio ``TaskGroup``, a trio nursery, an
  anyio task group. ``build_s`` runs from spawning the root until the leaf
  takes its first step; ``cancel_s`` from cancelling the root until it and
  every level below have exited (each level counts its exit, and all n must
  have). asyncop and asyncio cancel the root task; trio and anyio, which
  have no task handles, cancel the enclosing nursery, which holds only the
  root. Each process builds and cancels the tree up to ``_DEEP_ROUNDS``
  times (fewer once ``_DEEP_BUDGET_S`` has gone by, for the slow peers) and
  reports the medians; ``seconds`` is the median of build plus cancel.
  trio's cancel walks nested cancel scopes recursively, about five frames a
  level, so the trio and anyio runs raise the recursion limit to
  ``10 n + 1,000``; asyncop and asyncio run under the default limit.
  Target: asyncop's build and cancel each at most asyncio's.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import threading
import time
from collections.abc import Iterator

import asyncop

from ._coro_common import (
    WARMUP,
    Counter,
    asyncop_all_parked,
    expect,
    register_anyio,
    register_asyncio,
    register_asyncop,
    register_trio,
    run_asyncop,
)
from ._floor import run_floor
from ._instructions import COUNTING_ENV
from ._registry import Metrics, Ratio, workload
from ._timing import Stopwatch

__all__ = [
    "CANCEL_SLEEPERS",
    "DEEP_TREE",
    "SPAWN_JOIN",
    "spawn_join_main",
]

# The chunked variants checkpoint after this many spawns: no step then
# runs long enough (BLOCKED_AFTER, 50 ms) for the watchdog to add a worker.
_CHUNK = 1_000

# Long enough to be "forever" for the run, short enough that every system
# arms a plain timer for it (trio's sleep_forever, for one, arms none).
_SLEEP_S = 3600.0

SPAWN_JOIN = workload(
    "spawn_join",
    "one scope spawns n coroutine tasks that each await one checkpoint; until it exits",
    sizes=(10_000, 100_000),
    quick_sizes=(1_000, 5_000),
    checks=[
        Ratio("asyncop", "asyncio", limit=1.0),
        Ratio("asyncop", "uvloop", limit=0.7, compiled=True),
        Ratio("asyncop", "trio", limit=1 / 3),
        Ratio("anyio_asyncop", "anyio_asyncio", limit=1.0),
    ],
)

CANCEL_SLEEPERS = workload(
    "cancel_sleepers",
    "n coroutine tasks asleep in one scope, then cancel it; from the cancel to its exit",
    sizes=(10_000, 100_000),
    quick_sizes=(1_000, 5_000),
    checks=[
        Ratio("asyncop", "asyncio", limit=1.0),
        Ratio("asyncop", "uvloop", limit=0.7, compiled=True),
        Ratio("anyio_asyncop", "anyio_asyncio", limit=1.0),
    ],
)


DEEP_TREE = workload(
    "deep_tree",
    "n nested coroutine tasks, each opening a scope for the next, down to a sleeping leaf",
    sizes=(1_000,),
    quick_sizes=(1_000,),
    checks=[
        Ratio("asyncop", "asyncio", limit=1.0, metric="build_s"),
        Ratio("asyncop", "asyncio", limit=1.0, metric="cancel_s"),
        Ratio("asyncop", "uvloop", limit=0.7, compiled=True),
    ],
)

_DEEP_ROUNDS = 5
_DEEP_BUDGET_S = 2.0


class _Stop(Exception):
    """Raised from a TaskGroup's body to cancel the group (it has no cancel())."""


# ----------------------------------------------------------------------
# spawn_join
# ----------------------------------------------------------------------


async def _spawn_join_asyncop_in(n: int, chunk: int) -> Metrics:
    """Spawn n children from one scope; with ``chunk``, checkpoint every ``chunk`` spawns."""
    ran = Counter()
    bump = ran.bump
    checkpoint = asyncop.checkpoint

    async def child() -> None:
        await checkpoint()
        bump()

    async with asyncop.scope() as warm:
        for _ in range(WARMUP):
            warm.spawn(child)
    with Stopwatch() as watch:
        async with asyncop.scope() as scope:
            spawn = scope.spawn
            if chunk:
                for start in range(0, n, chunk):
                    for _ in range(min(chunk, n - start)):
                        spawn(child)
                    await checkpoint()
            else:
                for _ in range(n):
                    spawn(child)
            spawned = watch.elapsed()
            # A spawn loop this long is one long step, so the watchdog may
            # have added workers beside the Runtime's own: count the threads.
            threads = threading.active_count()
    expect(ran.value() == n + WARMUP, "not every child ran to its end")
    return watch.metrics(spawn_s=spawned, threads=threads)


async def _spawn_join_asyncop(n: int) -> Metrics:
    return await _spawn_join_asyncop_in(n, 0)


spawn_join_main = _spawn_join_asyncop


async def _spawn_join_asyncop_chunked(n: int) -> Metrics:
    return await _spawn_join_asyncop_in(n, _CHUNK)


async def _spawn_join_asyncio(n: int) -> Metrics:
    import asyncio

    ran = Counter()
    bump = ran.bump
    sleep = asyncio.sleep

    async def child() -> None:
        await sleep(0)
        bump()

    async with asyncio.TaskGroup() as warm:
        for _ in range(WARMUP):
            warm.create_task(child())
    with Stopwatch() as watch:
        async with asyncio.TaskGroup() as group:
            create_task = group.create_task
            for _ in range(n):
                create_task(child())
            spawned = watch.elapsed()
    expect(ran.value() == n + WARMUP, "not every child ran to its end")
    return watch.metrics(spawn_s=spawned)


async def _spawn_join_trio(n: int) -> Metrics:
    import trio

    ran = Counter()
    bump = ran.bump
    checkpoint = trio.lowlevel.checkpoint

    async def child() -> None:
        await checkpoint()
        bump()

    async with trio.open_nursery() as warm:
        for _ in range(WARMUP):
            warm.start_soon(child)
    with Stopwatch() as watch:
        async with trio.open_nursery() as nursery:
            start_soon = nursery.start_soon
            for _ in range(n):
                start_soon(child)
            spawned = watch.elapsed()
    expect(ran.value() == n + WARMUP, "not every child ran to its end")
    return watch.metrics(spawn_s=spawned)


async def _spawn_join_anyio(n: int) -> Metrics:
    import anyio
    import anyio.lowlevel

    ran = Counter()
    bump = ran.bump
    checkpoint = anyio.lowlevel.checkpoint

    async def child() -> None:
        await checkpoint()
        bump()

    async with anyio.create_task_group() as warm:
        for _ in range(WARMUP):
            warm.start_soon(child)
    with Stopwatch() as watch:
        async with anyio.create_task_group() as group:
            start_soon = group.start_soon
            for _ in range(n):
                start_soon(child)
            spawned = watch.elapsed()
    expect(ran.value() == n + WARMUP, "not every child ran to its end")
    return watch.metrics(spawn_s=spawned)


register_asyncop(SPAWN_JOIN, _spawn_join_asyncop, workers=(1, 2), nogc=True)


@SPAWN_JOIN.system("asyncop_chunk")
def _spawn_join_chunked(n: int) -> Metrics:
    return run_asyncop(_spawn_join_asyncop_chunked, n)


@SPAWN_JOIN.system("asyncop_1thread")
def _spawn_join_w1_chunked(n: int) -> Metrics:
    return run_asyncop(_spawn_join_asyncop_chunked, n, workers=1)


@SPAWN_JOIN.system("pyfloor")
def _spawn_join_floor(n: int) -> Metrics:
    return run_floor(n)


@SPAWN_JOIN.system("pyfloor_locked")
def _spawn_join_floor_locked(n: int) -> Metrics:
    return run_floor(n, locked=True)


register_asyncio(SPAWN_JOIN, _spawn_join_asyncio, nogc=True)
register_trio(SPAWN_JOIN, _spawn_join_trio)
register_anyio(SPAWN_JOIN, _spawn_join_anyio)


# ----------------------------------------------------------------------
# cancel_sleepers
# ----------------------------------------------------------------------


async def _cancel_sleepers_asyncop(n: int) -> Metrics:
    parked = Counter()
    ended = Counter()
    park, end = parked.bump, ended.bump
    sleep = asyncop.sleep

    async def sleeper() -> None:
        park()
        try:
            await sleep(_SLEEP_S)
        finally:
            end()

    watch = Stopwatch()
    async with asyncop.scope() as scope:
        spawn = scope.spawn
        for _ in range(n):
            spawn(sleeper)
        await asyncop_all_parked(parked, n)
        watch.start()
        scope.cancel()
    watch.stop()
    expect(ended.value() == n, "not every sleeper ended")
    return watch.metrics()


async def _cancel_sleepers_asyncio(n: int) -> Metrics:
    import asyncio

    parked = Counter()
    ended = Counter()
    park, end = parked.bump, ended.bump
    sleep = asyncio.sleep

    async def sleeper() -> None:
        park()
        try:
            await sleep(_SLEEP_S)
        finally:
            end()

    watch = Stopwatch()
    try:
        async with asyncio.TaskGroup() as group:
            create_task = group.create_task
            for _ in range(n):
                create_task(sleeper())
            # Each new task takes its first step, up to its sleep, in the
            # next pass of the ready queue; a second pass makes sure.
            await sleep(0)
            await sleep(0)
            expect(parked.value() == n, "not every sleeper was parked at the cancel")
            watch.start()
            raise _Stop
    except* _Stop:
        watch.stop()
    expect(ended.value() == n, "not every sleeper ended")
    return watch.metrics()


async def _cancel_sleepers_trio(n: int) -> Metrics:
    import trio
    import trio.testing

    parked = Counter()
    ended = Counter()
    park, end = parked.bump, ended.bump
    sleep = trio.sleep

    async def sleeper() -> None:
        park()
        try:
            await sleep(_SLEEP_S)
        finally:
            end()

    watch = Stopwatch()
    async with trio.open_nursery() as nursery:
        start_soon = nursery.start_soon
        for _ in range(n):
            start_soon(sleeper)
        await trio.testing.wait_all_tasks_blocked()
        expect(parked.value() == n, "not every sleeper was parked at the cancel")
        watch.start()
        nursery.cancel_scope.cancel()
    watch.stop()
    expect(ended.value() == n, "not every sleeper ended")
    return watch.metrics()


async def _cancel_sleepers_anyio(n: int) -> Metrics:
    import anyio

    parked = Counter()
    ended = Counter()
    park, end = parked.bump, ended.bump
    sleep = anyio.sleep

    async def sleeper() -> None:
        park()
        try:
            await sleep(_SLEEP_S)
        finally:
            end()

    watch = Stopwatch()
    async with anyio.create_task_group() as group:
        start_soon = group.start_soon
        for _ in range(n):
            start_soon(sleeper)
        await anyio.wait_all_tasks_blocked()
        expect(parked.value() == n, "not every sleeper was parked at the cancel")
        watch.start()
        group.cancel_scope.cancel()
    watch.stop()
    expect(ended.value() == n, "not every sleeper ended")
    return watch.metrics()


register_asyncop(CANCEL_SLEEPERS, _cancel_sleepers_asyncop, workers=(1,))
register_asyncio(CANCEL_SLEEPERS, _cancel_sleepers_asyncio)
register_trio(CANCEL_SLEEPERS, _cancel_sleepers_trio)
register_anyio(CANCEL_SLEEPERS, _cancel_sleepers_anyio)


# ----------------------------------------------------------------------
# deep_tree
# ----------------------------------------------------------------------


class _Tree:
    """Times of one build and cancel, over ``_DEEP_ROUNDS`` rounds."""

    __slots__ = ("builds", "cancels", "exited", "leaf_at", "n")

    def __init__(self, n: int) -> None:
        self.n = n
        self.builds: list[float] = []
        self.cancels: list[float] = []
        self.exited = Counter()
        self.leaf_at = 0.0

    def rounds(self) -> Iterator[int]:
        """Up to ``_DEEP_ROUNDS`` rounds, none started after ``_DEEP_BUDGET_S``.

        Every one of them when instructions are counted (``_instructions``).
        """
        budget = math.inf if os.environ.get(COUNTING_ENV) else _DEEP_BUDGET_S
        spent = 0.0
        for k in range(_DEEP_ROUNDS):
            if k and spent > budget:
                return
            yield k
            spent += self.builds[-1] + self.cancels[-1]

    def begin(self) -> float:
        self.exited = Counter()
        self.leaf_at = 0.0
        return time.perf_counter()

    def built(self, started: float) -> float:
        """The leaf is running: record the build; returns when the cancel starts."""
        expect(self.leaf_at > 0.0, "the leaf did not run")
        self.builds.append(self.leaf_at - started)
        return time.perf_counter()

    def cancelled(self, started: float) -> None:
        self.cancels.append(time.perf_counter() - started)
        expect(self.exited.value() == self.n, "not every level exited")

    def metrics(self) -> Metrics:
        total = [b + c for b, c in zip(self.builds, self.cancels, strict=True)]
        return {
            "seconds": statistics.median(total),
            "build_s": statistics.median(self.builds),
            "cancel_s": statistics.median(self.cancels),
            "rounds": float(len(total)),
        }


def _deep_recursion(n: int) -> None:
    """Let trio's recursive cancel walk through n nested cancel scopes."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * n + 1_000))


async def _deep_tree_asyncop(n: int) -> Metrics:
    tree = _Tree(n)
    sleep = asyncop.sleep

    async def level(k: int, reached: asyncop.Event) -> None:
        try:
            if k == 1:
                tree.leaf_at = time.perf_counter()
                reached.set()
                await sleep(_SLEEP_S)
                return
            async with asyncop.scope() as scope:
                scope.spawn(level, k - 1, reached)
        finally:
            tree.exited.bump()

    for _ in tree.rounds():
        reached = asyncop.Event()
        started = tree.begin()
        async with asyncop.scope() as outer:
            root = outer.spawn(level, n, reached)
            await reached.wait_async()
            started = tree.built(started)
            root.cancel()
        tree.cancelled(started)
    return tree.metrics()


async def _deep_tree_asyncio(n: int) -> Metrics:
    import asyncio

    tree = _Tree(n)
    sleep = asyncio.sleep

    async def level(k: int, reached: asyncio.Event) -> None:
        try:
            if k == 1:
                tree.leaf_at = time.perf_counter()
                reached.set()
                await sleep(_SLEEP_S)
                return
            async with asyncio.TaskGroup() as group:
                group.create_task(level(k - 1, reached))
        finally:
            tree.exited.bump()

    for _ in tree.rounds():
        reached = asyncio.Event()
        started = tree.begin()
        root = asyncio.create_task(level(n, reached))
        await reached.wait()
        started = tree.built(started)
        root.cancel()
        await asyncio.wait([root])
        tree.cancelled(started)
        expect(root.cancelled(), "the root was not cancelled")
    return tree.metrics()


async def _deep_tree_trio(n: int) -> Metrics:
    import trio

    _deep_recursion(n)
    tree = _Tree(n)
    sleep = trio.sleep

    async def level(k: int, reached: trio.Event) -> None:
        try:
            if k == 1:
                tree.leaf_at = time.perf_counter()
                reached.set()
                await sleep(_SLEEP_S)
                return
            async with trio.open_nursery() as nursery:
                nursery.start_soon(level, k - 1, reached)
        finally:
            tree.exited.bump()

    for _ in tree.rounds():
        reached = trio.Event()
        started = tree.begin()
        async with trio.open_nursery() as outer:
            outer.start_soon(level, n, reached)
            await reached.wait()
            started = tree.built(started)
            outer.cancel_scope.cancel()
        tree.cancelled(started)
    return tree.metrics()


async def _deep_tree_anyio(n: int) -> Metrics:
    import anyio

    _deep_recursion(n)
    tree = _Tree(n)
    sleep = anyio.sleep

    async def level(k: int, reached: anyio.Event) -> None:
        try:
            if k == 1:
                tree.leaf_at = time.perf_counter()
                reached.set()
                await sleep(_SLEEP_S)
                return
            async with anyio.create_task_group() as group:
                group.start_soon(level, k - 1, reached)
        finally:
            tree.exited.bump()

    for _ in tree.rounds():
        reached = anyio.Event()
        started = tree.begin()
        async with anyio.create_task_group() as outer:
            outer.start_soon(level, n, reached)
            await reached.wait()
            started = tree.built(started)
            outer.cancel_scope.cancel()
        tree.cancelled(started)
    return tree.metrics()


register_asyncop(DEEP_TREE, _deep_tree_asyncop, workers=(1,))
register_asyncio(DEEP_TREE, _deep_tree_asyncio)
register_trio(DEEP_TREE, _deep_tree_trio)
register_anyio(DEEP_TREE, _deep_tree_anyio)
