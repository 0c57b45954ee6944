"""Timers: do sleeps wake in deadline order, and how late?

n tasks each sleep until ``base + delay``, with delays drawn at random in
[0, 100 ms] (the same draws on every system), and record their place in
the wake order (a counter bumped right after the await) and their wake
time. Every timer is armed before the first one is due, so that what is
measured is the firing alone:

1. the tasks are spawned and park on a gate (an event);
2. once all are parked, ``base`` is set ahead of now by one and a half
   times what step 1 took, plus 50 ms, and the gate opens: each task arms
   its sleep in the time that is left (``armed_late`` counts the ones that
   were not armed before the first deadline, and should be 0);
3. over the next 100 ms the n timers come due.

Lateness is the wake time minus the deadline, both on the system's own
clock (``asyncop.current_time``, ``loop.time``, ``trio.current_time``...).
asyncio has no ``sleep_until``, so its sleepers do what ``asyncio.sleep``
does with ``loop.call_at`` in place of ``call_later``: a relative delay,
read a moment after the deadline was taken, would shift each deadline by
a different sub-microsecond amount and swap close ones. The metrics:

- ``out_of_order``: wakes that came after the wake of a later deadline;
  ``ordered`` is 1 when there are none, else 0;
- ``p50_ms``, ``p99_ms``, ``max_ms``: lateness percentiles;
- ``early``: wakes before their deadline; ``min_ms``, the least lateness;
- ``seconds``: from ``base`` to the scope's exit, on the system's clock
  (100 ms plus the tail of lateness); ``setup_s``: step 1.

Two workloads:

- ``timers`` at n and n/10: 1,000 timers due per millisecond at 100,000,
  so the firing itself is the load. ``asyncop_w1`` runs it on one worker,
  which tells the order of the timer heap from that of parallel stepping.
- ``timers_1k``: 1,000 timers, the unloaded case. Target: asyncop's p99
  lateness within 2 ms.

Target on both: asyncop wakes in deadline order and never early.

``timers_spawning`` (n = 1,000 and 10,000) is the same timers as a user
writes them, with no gate: a loop spawns n tasks, and each, at its first
step, takes its deadline as now plus its delay and sleeps until it at once.
The first timers come due while later tasks are still being spawned and
stepped, so arming and firing overlap. Order is judged on the deadline and,
for equal deadlines, on the order in which the tasks took them (FIFO):
``out_of_order`` counts the wakes that came after the wake of a later key,
and ``ties`` how many deadlines equal another one (a continuous clock makes
them rare). ``seconds`` runs from the first spawn to the scope's exit,
``spawn_s`` is the spawn loop and ``arm_s`` the time until the last task
armed its sleep. ``asyncop_w1`` runs it on one worker. The peers are
asyncio and uvloop (``loop.call_at``, as above), trio (``sleep_until``).
Targets: asyncop wakes in order at both sizes, and its p99 lateness is at
most asyncio's.
"""

from __future__ import annotations

import gc
import random
from typing import Any

import asyncop

from ._coro_common import (
    Counter,
    asyncop_all_parked,
    expect,
    percentile,
    register_anyio,
    register_asyncio,
    register_asyncop,
    register_trio,
)
from ._registry import Limit, Metrics, Ratio, workload
from ._timing import full_collections

__all__ = ["TIMERS", "TIMERS_1K", "TIMERS_SPAWNING"]

_SPREAD_S = 0.100
_MARGIN_S = 0.050
_MARGIN_FACTOR = 1.5
_UNLOADED_N = 1_000

TIMERS = workload(
    "timers",
    "n timers armed first, then due at random over 100 ms: wake order and lateness",
    sizes=(10_000, 100_000),
    quick_sizes=(1_000, 5_000),
    checks=[
        Limit("asyncop", metric="out_of_order", limit=1),
        Limit("asyncop", metric="early", limit=1),
    ],
)

TIMERS_1K = workload(
    "timers_1k",
    "1,000 timers armed first, then due at random over 100 ms (unloaded): order, lateness",
    sizes=(_UNLOADED_N,),
    quick_sizes=(_UNLOADED_N,),
    checks=[
        Limit("asyncop", metric="p99_ms", limit=2.0),
        Limit("asyncop", metric="out_of_order", limit=1),
        Limit("asyncop", metric="early", limit=1),
    ],
    per_item=False,
    scalable=False,
)

TIMERS_SPAWNING = workload(
    "timers_spawning",
    "n tasks spawned in a loop, each sleeping until now + random [0, 100 ms] at once",
    sizes=(1_000, 10_000),
    quick_sizes=(1_000, 10_000),
    checks=[
        Limit("asyncop", metric="out_of_order", limit=1),
        Ratio("asyncop", "asyncio", limit=1.0, metric="p99_ms"),
    ],
)


class _Record:
    """What the sleepers write: one slot each, so that threads never share one."""

    __slots__ = (
        "armed",
        "base",
        "deadlines",
        "delays",
        "gc0",
        "order",
        "setup",
        "start",
        "wakes",
    )

    def __init__(self, n: int, start: float) -> None:
        rng = random.Random(n)
        self.delays = [rng.uniform(0.0, _SPREAD_S) for _ in range(n)]
        self.deadlines = [0.0] * n
        self.armed = [0.0] * n
        self.wakes = [0.0] * n
        self.order = [0] * n
        self.start = start
        self.base = 0.0
        self.setup = 0.0
        self.gc0 = full_collections()

    def open_gate(self, now: float) -> None:
        """Everyone is parked at the gate: choose ``base`` and the deadlines."""
        self.setup = setup = now - self.start
        self.base = base = now + _MARGIN_FACTOR * setup + _MARGIN_S
        self.deadlines = [base + delay for delay in self.delays]

    def metrics(self, end: float) -> Metrics:
        deadlines = self.deadlines
        first_due = min(deadlines)
        return {
            "seconds": end - self.base,
            "gc_full": float(full_collections() - self.gc0),
            "setup_s": self.setup,
            **_wake_metrics(deadlines, deadlines, self.order, self.wakes),
            "armed_late": sum(1 for armed in self.armed if armed > first_due),
        }


def _wake_metrics(
    keys: list[Any], deadlines: list[float], order: list[int], wakes: list[float]
) -> Metrics:
    """Order and lateness of n wakes; ``order[i]`` is task i's place among them.

    A wake is out of order when an earlier wake had a greater ``keys`` entry.
    """
    by_wake: list[Any] = [None] * len(keys)
    for i, place in enumerate(order):
        by_wake[place] = keys[i]
    out_of_order = 0
    latest = by_wake[0]
    for key in by_wake:
        if key < latest:
            out_of_order += 1
        else:
            latest = key
    lateness = sorted(w - d for w, d in zip(wakes, deadlines, strict=True))
    return {
        "out_of_order": out_of_order,
        "ordered": float(out_of_order == 0),
        "p50_ms": percentile(lateness, 0.50) * 1e3,
        "p99_ms": percentile(lateness, 0.99) * 1e3,
        "max_ms": lateness[-1] * 1e3,
        "min_ms": lateness[0] * 1e3,
        "early": sum(1 for late in lateness if late < 0),
    }


class _Spawned:
    """What the spawned sleepers write, one slot each (see ``_Record``)."""

    __slots__ = ("armed", "deadlines", "delays", "gc0", "order", "seq", "start", "wakes")

    def __init__(self, n: int, start: float) -> None:
        rng = random.Random(n)
        self.delays = [rng.uniform(0.0, _SPREAD_S) for _ in range(n)]
        self.deadlines = [0.0] * n
        self.armed = [0.0] * n
        self.seq = [0] * n
        self.wakes = [0.0] * n
        self.order = [0] * n
        self.start = start
        self.gc0 = full_collections()

    def metrics(self, spawned: float, end: float) -> Metrics:
        deadlines = self.deadlines
        expect(all(deadlines), "a sleeper never took its deadline")
        keys = list(zip(deadlines, self.seq, strict=True))
        return {
            "seconds": end - self.start,
            "gc_full": float(full_collections() - self.gc0),
            "spawn_s": spawned - self.start,
            "arm_s": max(self.armed) - self.start,
            "ties": float(len(deadlines) - len(set(deadlines))),
            **_wake_metrics(keys, deadlines, self.order, self.wakes),
        }


# ----------------------------------------------------------------------
# One program per library, used by both workloads
# ----------------------------------------------------------------------


async def _timers_asyncop(n: int) -> Metrics:
    gc.collect()
    now = asyncop.current_time
    sleep_until = asyncop.sleep_until
    record = _Record(n, now())
    gate = asyncop.Event()
    gate_wait = gate.wait_async
    at_gate = Counter()
    enter, wake_order = at_gate.bump, Counter().bump
    armed, wakes, order = record.armed, record.wakes, record.order

    async def sleeper(i: int) -> None:
        enter()
        await gate_wait()
        deadline = record.deadlines[i]
        armed[i] = now()
        await sleep_until(deadline)
        order[i] = wake_order()
        wakes[i] = now()

    async with asyncop.scope() as scope:
        spawn = scope.spawn
        for i in range(n):
            spawn(sleeper, i)
        await asyncop_all_parked(at_gate, n)
        record.open_gate(now())
        gate.set()
    return record.metrics(now())


async def _timers_asyncio(n: int) -> Metrics:
    import asyncio

    gc.collect()
    loop = asyncio.get_running_loop()
    now = loop.time
    call_at = loop.call_at
    create_future = loop.create_future
    record = _Record(n, now())
    gate = asyncio.Event()
    gate_wait = gate.wait
    at_gate = Counter()
    enter, wake_order = at_gate.bump, Counter().bump
    armed, wakes, order = record.armed, record.wakes, record.order

    def wake(future: asyncio.Future[Any]) -> None:
        if not future.done():
            future.set_result(None)

    async def sleeper(i: int) -> None:
        enter()
        await gate_wait()
        deadline = record.deadlines[i]
        armed[i] = now()
        # asyncio.sleep, with call_at in place of call_later.
        future = create_future()
        handle = call_at(deadline, wake, future)
        try:
            await future
        finally:
            handle.cancel()
        order[i] = wake_order()
        wakes[i] = now()

    async with asyncio.TaskGroup() as group:
        create_task = group.create_task
        for i in range(n):
            create_task(sleeper(i))
        # Each new task reaches the gate in the next pass of the ready
        # queue; a second pass makes sure.
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        expect(at_gate.value() == n, "not every sleeper reached the gate")
        record.open_gate(now())
        gate.set()
    return record.metrics(now())


async def _timers_trio(n: int) -> Metrics:
    import trio
    import trio.testing

    gc.collect()
    now = trio.current_time
    sleep_until = trio.sleep_until
    record = _Record(n, now())
    gate = trio.Event()
    gate_wait = gate.wait
    at_gate = Counter()
    enter, wake_order = at_gate.bump, Counter().bump
    armed, wakes, order = record.armed, record.wakes, record.order

    async def sleeper(i: int) -> None:
        enter()
        await gate_wait()
        deadline = record.deadlines[i]
        armed[i] = now()
        await sleep_until(deadline)
        order[i] = wake_order()
        wakes[i] = now()

    async with trio.open_nursery() as nursery:
        start_soon = nursery.start_soon
        for i in range(n):
            start_soon(sleeper, i)
        await trio.testing.wait_all_tasks_blocked()
        expect(at_gate.value() == n, "not every sleeper reached the gate")
        record.open_gate(now())
        gate.set()
    return record.metrics(now())


async def _timers_anyio(n: int) -> Metrics:
    import anyio

    gc.collect()
    now = anyio.current_time
    sleep_until = anyio.sleep_until
    record = _Record(n, now())
    gate = anyio.Event()
    gate_wait = gate.wait
    at_gate = Counter()
    enter, wake_order = at_gate.bump, Counter().bump
    armed, wakes, order = record.armed, record.wakes, record.order

    async def sleeper(i: int) -> None:
        enter()
        await gate_wait()
        deadline = record.deadlines[i]
        armed[i] = now()
        await sleep_until(deadline)
        order[i] = wake_order()
        wakes[i] = now()

    async with anyio.create_task_group() as group:
        start_soon = group.start_soon
        for i in range(n):
            start_soon(sleeper, i)
        await anyio.wait_all_tasks_blocked()
        expect(at_gate.value() == n, "not every sleeper reached the gate")
        record.open_gate(now())
        gate.set()
    return record.metrics(now())


# ----------------------------------------------------------------------
# timers_spawning: each task takes its deadline and sleeps at its first step
# ----------------------------------------------------------------------


async def _spawning_asyncop(n: int) -> Metrics:
    gc.collect()
    now = asyncop.current_time
    sleep_until = asyncop.sleep_until
    record = _Spawned(n, now())
    arm, wake_order = Counter().bump, Counter().bump
    delays, deadlines, armed, seq = record.delays, record.deadlines, record.armed, record.seq
    wakes, order = record.wakes, record.order

    async def sleeper(i: int) -> None:
        armed[i] = t = now()
        deadlines[i] = deadline = t + delays[i]
        seq[i] = arm()
        await sleep_until(deadline)
        order[i] = wake_order()
        wakes[i] = now()

    async with asyncop.scope() as scope:
        spawn = scope.spawn
        for i in range(n):
            spawn(sleeper, i)
        spawned = now()
    return record.metrics(spawned, now())


async def _spawning_asyncio(n: int) -> Metrics:
    import asyncio

    gc.collect()
    loop = asyncio.get_running_loop()
    now = loop.time
    call_at = loop.call_at
    create_future = loop.create_future
    record = _Spawned(n, now())
    arm, wake_order = Counter().bump, Counter().bump
    delays, deadlines, armed, seq = record.delays, record.deadlines, record.armed, record.seq
    wakes, order = record.wakes, record.order

    def wake(future: asyncio.Future[Any]) -> None:
        if not future.done():
            future.set_result(None)

    async def sleeper(i: int) -> None:
        armed[i] = t = now()
        deadlines[i] = deadline = t + delays[i]
        seq[i] = arm()
        # asyncio.sleep, with call_at in place of call_later (see above).
        future = create_future()
        handle = call_at(deadline, wake, future)
        try:
            await future
        finally:
            handle.cancel()
        order[i] = wake_order()
        wakes[i] = now()

    async with asyncio.TaskGroup() as group:
        create_task = group.create_task
        for i in range(n):
            create_task(sleeper(i))
        spawned = now()
    return record.metrics(spawned, now())


async def _spawning_trio(n: int) -> Metrics:
    import trio

    gc.collect()
    now = trio.current_time
    sleep_until = trio.sleep_until
    record = _Spawned(n, now())
    arm, wake_order = Counter().bump, Counter().bump
    delays, deadlines, armed, seq = record.delays, record.deadlines, record.armed, record.seq
    wakes, order = record.wakes, record.order

    async def sleeper(i: int) -> None:
        armed[i] = t = now()
        deadlines[i] = deadline = t + delays[i]
        seq[i] = arm()
        await sleep_until(deadline)
        order[i] = wake_order()
        wakes[i] = now()

    async with trio.open_nursery() as nursery:
        start_soon = nursery.start_soon
        for i in range(n):
            start_soon(sleeper, i)
        spawned = now()
    return record.metrics(spawned, now())


register_asyncop(TIMERS_SPAWNING, _spawning_asyncop, workers=(1,))
register_asyncio(TIMERS_SPAWNING, _spawning_asyncio)
register_trio(TIMERS_SPAWNING, _spawning_trio)


for _item in (TIMERS, TIMERS_1K):
    register_asyncop(_item, _timers_asyncop, workers=(1,))
    register_asyncio(_item, _timers_asyncio)
    register_trio(_item, _timers_trio)
    register_anyio(_item, _timers_anyio)
