"""Benchmarks: asyncop measured beside its peers, in one run.

Run ``python -m benchmarks`` (``--help`` for the options). Each workload is
run by asyncop and by the peers that do the same job (``ThreadPoolExecutor``,
asyncio, uvloop, trio, anyio), every repetition in a fresh process with the
systems interleaved. The output is one JSON line per measurement and per
check against asyncop's targets, then a table on stderr; ``--list`` names
every workload and its systems.

Workloads live in one module per family (``threads``, ``tree``, ``idle``,
``coro``, ``timers``, ``model``...) and register themselves in
``_registry``; ``_harness`` drives the runs and ``_run`` is the
per-repetition entry point. To see where a workload spends
its time, on every thread: ``python -m benchmarks._profile WORKLOAD SYSTEM N``.
To compare two versions of the code on a noisy machine, count instructions
per item instead of timing them: ``python -m benchmarks._instructions
WORKLOAD SYSTEM`` (needs valgrind). This package is not part of the test
suite.
"""

from __future__ import annotations
