"""Idle CPU: what a parked runtime costs while it waits for a far timer.

A ``Runtime(2)`` holds one operation whose deadline is 60 s away (a sync
scope opened with ``timeout=60``), and the main thread sleeps inside it.
The process CPU time (every thread, user and system) over that wall time,
as a percentage of one core, must stay under 1 %: parked workers wait on a
condition until the deadline, they do not poll.

Here ``n`` is the wall time in milliseconds, not a count of items.
"""

from __future__ import annotations

import time

import asyncop

from ._registry import Limit, Metrics, workload

__all__ = ["IDLE_CPU"]

IDLE_CPU = workload(
    "idle_cpu",
    "a Runtime(2) with one operation whose deadline is 60 s away; CPU over n ms of wall time",
    sizes=(2_000,),
    quick_sizes=(500,),
    checks=[Limit("asyncop", metric="cpu_percent", limit=1.0)],
    per_item=False,
    scalable=False,
)


@IDLE_CPU.system("asyncop")
def _idle_asyncop(n: int) -> Metrics:
    with asyncop.Runtime(2) as runtime, runtime.scope(name="idle", timeout=60):
        # Let the workers reach their park before measuring.
        time.sleep(0.05)
        registrations = runtime.registrations()
        wall0 = time.perf_counter()
        cpu0 = time.process_time()
        time.sleep(n / 1000)
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
    return {
        "seconds": cpu,
        "wall_s": wall,
        "cpu_percent": 100.0 * cpu / wall,
        "registrations": float(registrations),
    }
