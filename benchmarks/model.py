"""The execution model as a user meets it: atomic steps, deadlines, starvation, threads.

All run on ``Runtime(2)``. A system named ``asyncop_parallel`` runs the same
code on ``Runtime(2, parallel=True)``, and ``asyncop_capped`` on
``Runtime(2, max_threads=...)``; each is skipped, and its checks are n/a,
when the installed ``Runtime`` has no such keyword.

- ``atomicity``: four tasks each do 20 times ``v = counter``, compute,
  ``counter = v + 1``, ``await asyncop.sleep(0.0005)``. When no two steps
  of a runtime overlap, no increment is lost and every run ends at 80.
  ``asyncop`` is exactly that, with 10 ms of pure-Python computation per
  step, run ``max(2, n // 40)`` times (0.8 s a run). ``asyncop_scaled``
  runs it n times at 1/40 of the time scale: 0.25 ms of computation, and
  the interpreter's thread switch interval (``sys.setswitchinterval``, 5 ms
  by default) cut by the same factor, so that two steps running at once
  would still trade the GIL about twice within one computation. Each
  reports ``trials`` (the runs made), ``exact`` (those ending at 80),
  ``inexact`` (the others) and the least, median and greatest final
  counter; ``seconds`` is the mean time of a run. Target: 80 in every run, in every repetition
  (judged on the worst one). With ``parallel=True`` steps may overlap and
  increments may be lost: those systems are reported, not judged. asyncio
  and trio step one task at a time on one thread, so they always reach 80
  and are not run.
- ``deadline_cpu``: ``with runtime.scope(timeout=0.2)`` around 8 plain
  functions spawned into it, each computing in pure Python and reading its
  token's ``cancelled`` every millisecond, returning once it is set. Each of
  n trials times the scope from entry to exit; ``p50_s``, ``p99_s`` and
  ``max_s`` over the trials, ``expired`` counts the trials whose deadline
  fired (all of them: nothing else stops the callbacks). The callbacks
  return when cancelled, so the scope ends without ``TimeoutError`` (it
  raises one only when the cancel interrupted something). Peers: ``trio``
  (``move_on_after(0.2)`` around 8 ``to_thread.run_sync`` calls polling
  ``from_thread.check_cancelled()``) and ``threadpool`` (8 threads of a
  ``ThreadPoolExecutor`` polling an event that the main thread sets after
  0.2 s). Target: asyncop's p99 at most 0.2 s + 30 ms.
- ``starvation``: one task computes for n ms (1.5 s) without awaiting;
  the task that spawned it then spawns another and sleeps 0.05 s.
  ``other_s`` is the time from the second spawn to that task's first step,
  ``sleep_late_s`` how late the sleep wakes; ``seconds`` the whole scope.
  Peers: asyncio, uvloop and trio, where both wait for the computation to
  end (trio runs a batch of ready tasks in a shuffled order, so its other
  task sometimes goes before the computing one). In the default mode
  asyncop may wait too (one step at a time, as in asyncio); with
  ``parallel=True`` neither may wait more than 50 ms (the target).
  ``warnings`` counts the WARNING records of the ``asyncop`` logger (a
  step that runs long is reported there).
- ``thread_growth``: n plain functions (100) spawned into one scope, each
  blocking in ``time.sleep(1)``. ``peak_threads`` is the most OS threads the
  process had at once (sampled from ``/proc`` every 5 ms, or
  ``threading.active_count()`` where there is no ``/proc``), with
  ``base_threads`` the count before the runtime started (the main thread
  and the sampler); ``peak_running`` is the most callbacks running at once;
  ``seconds`` runs until the scope exits. ``asyncop_capped`` passes
  ``max_threads=16``. Peer: ``trio`` (``to_thread.run_sync``, whose
  default limiter lends 40 threads). asyncio's default executor has
  ``min(32, CPUs + 4)`` threads, so it would take n / (CPUs + 4) seconds;
  it is not run. No target: the figures say how far threads grow.

Here ``n`` is the number of runs (atomicity), trials (deadline_cpu), the
computation in milliseconds (starvation) or the callbacks (thread_growth).
"""

from __future__ import annotations

import logging
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any

import asyncop

from ._coro_common import (
    expect,
    percentile,
    register_asyncio,
    register_trio,
    run_asyncop,
    runtime_lacks,
)
from ._registry import Limit, Metrics, workload

__all__ = ["ATOMICITY", "DEADLINE_CPU", "STARVATION", "THREAD_GROWTH", "WORKERS"]

WORKERS = 2

ATOMICITY = workload(
    "atomicity",
    "4 tasks x 20 of: v = counter; compute; counter = v + 1; sleep: n runs end at 80?",
    sizes=(200,),
    quick_sizes=(20,),
    checks=[
        Limit("asyncop", metric="inexact", limit=1, worst=True),
        Limit("asyncop_scaled", metric="inexact", limit=1, worst=True),
    ],
    per_item=False,
)

DEADLINE_CPU = workload(
    "deadline_cpu",
    "scope(timeout=0.2) around 8 CPU-bound sync callbacks polling their token; n trials",
    sizes=(20,),
    quick_sizes=(5,),
    checks=[Limit("asyncop", metric="p99_s", limit=0.230)],
    per_item=False,
)

STARVATION = workload(
    "starvation",
    "a task computes n ms without awaiting: when do a spawned task and a 50 ms sleep run?",
    sizes=(1_500,),
    quick_sizes=(500,),
    checks=[
        Limit("asyncop_parallel", metric="other_s", limit=0.050),
        Limit("asyncop_parallel", metric="sleep_late_s", limit=0.050),
    ],
    per_item=False,
)

THREAD_GROWTH = workload(
    "thread_growth",
    "n sync callbacks that each block in time.sleep(1): peak threads, peak running",
    sizes=(100,),
    quick_sizes=(20,),
    per_item=False,
)

_PARALLEL = runtime_lacks("parallel")
_MAX_THREADS = runtime_lacks("max_threads")


def _compute(seconds: float) -> None:
    """Pure-Python work for ``seconds`` (holding the GIL, never awaiting)."""
    clock = time.perf_counter
    end = clock() + seconds
    while clock() < end:
        pass


# ----------------------------------------------------------------------
# atomicity
# ----------------------------------------------------------------------

_ATOMIC_TASKS = 4
_ATOMIC_STEPS = 20
_ATOMIC_EXPECTED = _ATOMIC_TASKS * _ATOMIC_STEPS
_ATOMIC_COMPUTE_S = 0.010
_ATOMIC_SCALE = 40
_ATOMIC_EXACT_RUNS_PER = 40  # the exact configuration runs n / 40 times


def _atomicity(runs: int, compute_s: float, **options: Any) -> Metrics:
    finals: list[int] = []
    counter = 0

    async def task() -> None:
        nonlocal counter
        for _ in range(_ATOMIC_STEPS):
            v = counter
            _compute(compute_s)
            counter = v + 1
            await asyncop.sleep(0.0005)

    async def one_run() -> None:
        async with asyncop.scope() as scope:
            for _ in range(_ATOMIC_TASKS):
                scope.spawn(task)

    with asyncop.Runtime(WORKERS, **options) as runtime:
        started = time.perf_counter()
        for _ in range(runs):
            counter = 0
            runtime.run(one_run)
            finals.append(counter)
        seconds = time.perf_counter() - started
    exact = sum(1 for final in finals if final == _ATOMIC_EXPECTED)
    return {
        "seconds": seconds / runs,
        "trials": float(runs),
        "exact": float(exact),
        "inexact": float(runs - exact),
        "counter_min": float(min(finals)),
        "counter_median": float(statistics.median(finals)),
        "counter_max": float(max(finals)),
    }


def _atomicity_scaled(n: int, **options: Any) -> Metrics:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(interval / _ATOMIC_SCALE)
    try:
        return _atomicity(n, _ATOMIC_COMPUTE_S / _ATOMIC_SCALE, **options)
    finally:
        sys.setswitchinterval(interval)


def _exact_runs(n: int) -> int:
    return max(2, n // _ATOMIC_EXACT_RUNS_PER)


@ATOMICITY.system("asyncop")
def _atomicity_asyncop(n: int) -> Metrics:
    return _atomicity(_exact_runs(n), _ATOMIC_COMPUTE_S)


@ATOMICITY.system("asyncop_scaled")
def _atomicity_asyncop_scaled(n: int) -> Metrics:
    return _atomicity_scaled(n)


@ATOMICITY.system("asyncop_parallel", unless=_PARALLEL)
def _atomicity_parallel(n: int) -> Metrics:
    return _atomicity(_exact_runs(n), _ATOMIC_COMPUTE_S, parallel=True)


@ATOMICITY.system("asyncop_parallel_scaled", unless=_PARALLEL)
def _atomicity_parallel_scaled(n: int) -> Metrics:
    return _atomicity_scaled(n, parallel=True)


# ----------------------------------------------------------------------
# deadline_cpu
# ----------------------------------------------------------------------

_DEADLINE_S = 0.200
_DEADLINE_CALLBACKS = 8
_POLL_S = 0.001


def _deadline_metrics(exits: list[float], expired: int) -> Metrics:
    ordered = sorted(exits)
    return {
        "seconds": percentile(ordered, 0.50),
        "p50_s": percentile(ordered, 0.50),
        "p99_s": percentile(ordered, 0.99),
        "max_s": ordered[-1],
        "expired": float(expired),
    }


def _poll_token() -> None:
    operation = asyncop.current_operation()
    assert operation is not None
    token = operation.token
    while not token.cancelled:
        _compute(_POLL_S)


@DEADLINE_CPU.system("asyncop")
def _deadline_asyncop(n: int) -> Metrics:
    exits: list[float] = []
    expired = 0
    with asyncop.Runtime(WORKERS) as runtime:
        for _ in range(n):
            started = time.perf_counter()
            try:
                with runtime.scope(timeout=_DEADLINE_S) as scope:
                    for _ in range(_DEADLINE_CALLBACKS):
                        scope.spawn(_poll_token)
            except TimeoutError:
                pass
            exits.append(time.perf_counter() - started)
            expired += scope.expired
    return _deadline_metrics(exits, expired)


@DEADLINE_CPU.system("trio", requires=("trio",))
def _deadline_trio(n: int) -> Metrics:
    import trio

    def poll() -> None:
        while True:
            _compute(_POLL_S)
            try:
                trio.from_thread.check_cancelled()
            except trio.Cancelled:
                return

    async def main() -> Metrics:
        exits: list[float] = []
        expired = 0
        for _ in range(n):
            started = time.perf_counter()
            with trio.move_on_after(_DEADLINE_S) as cancel_scope:
                async with trio.open_nursery() as nursery:
                    for _ in range(_DEADLINE_CALLBACKS):
                        nursery.start_soon(trio.to_thread.run_sync, poll)
            exits.append(time.perf_counter() - started)
            expired += cancel_scope.cancel_called
        return _deadline_metrics(exits, expired)

    return trio.run(main)


@DEADLINE_CPU.system("threadpool")
def _deadline_threadpool(n: int) -> Metrics:
    def poll(stop: threading.Event) -> None:
        while not stop.is_set():
            _compute(_POLL_S)

    exits: list[float] = []
    expired = 0
    with ThreadPoolExecutor(_DEADLINE_CALLBACKS) as pool:
        for _ in range(n):
            started = time.perf_counter()
            stop = threading.Event()
            futures = [pool.submit(poll, stop) for _ in range(_DEADLINE_CALLBACKS)]
            _, running = wait_futures(futures, timeout=_DEADLINE_S)
            stop.set()
            wait_futures(futures)
            exits.append(time.perf_counter() - started)
            expired += bool(running)
    return _deadline_metrics(exits, expired)


# ----------------------------------------------------------------------
# starvation
# ----------------------------------------------------------------------

_NAP_S = 0.050


class _WarningCount(logging.Handler):
    """Counts the WARNING (and worse) records of a logger while attached."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def _starvation_metrics(started: float, times: dict[str, float], **extra: float) -> Metrics:
    expect(set(times) == {"spawned", "other", "armed", "woke"}, "a task did not run")
    return {
        "seconds": time.perf_counter() - started,
        "other_s": times["other"] - times["spawned"],
        "sleep_late_s": times["woke"] - times["armed"] - _NAP_S,
        **extra,
    }


async def _starvation_asyncop(n: int) -> Metrics:
    times: dict[str, float] = {}
    clock = time.perf_counter

    async def hog() -> None:
        _compute(n / 1000)

    async def other() -> None:
        times["other"] = clock()

    started = clock()
    async with asyncop.scope() as scope:
        scope.spawn(hog)
        times["spawned"] = clock()
        scope.spawn(other)
        times["armed"] = clock()
        await asyncop.sleep(_NAP_S)
        times["woke"] = clock()
    return _starvation_metrics(started, times)


def _starvation_run(n: int, **options: Any) -> Metrics:
    logger = logging.getLogger("asyncop")
    counter = _WarningCount()
    logger.addHandler(counter)
    try:
        metrics = run_asyncop(_starvation_asyncop, n, WORKERS, **options)
    finally:
        logger.removeHandler(counter)
    return {**metrics, "warnings": float(counter.count)}


@STARVATION.system("asyncop")
def _starvation_default(n: int) -> Metrics:
    return _starvation_run(n)


@STARVATION.system("asyncop_parallel", unless=_PARALLEL)
def _starvation_parallel(n: int) -> Metrics:
    return _starvation_run(n, parallel=True)


async def _starvation_asyncio(n: int) -> Metrics:
    import asyncio

    times: dict[str, float] = {}
    clock = time.perf_counter

    async def hog() -> None:
        _compute(n / 1000)

    async def other() -> None:
        times["other"] = clock()

    started = clock()
    async with asyncio.TaskGroup() as group:
        group.create_task(hog())
        times["spawned"] = clock()
        group.create_task(other())
        times["armed"] = clock()
        await asyncio.sleep(_NAP_S)
        times["woke"] = clock()
    return _starvation_metrics(started, times)


async def _starvation_trio(n: int) -> Metrics:
    import trio

    times: dict[str, float] = {}
    clock = time.perf_counter

    async def hog() -> None:
        _compute(n / 1000)

    async def other() -> None:
        times["other"] = clock()

    started = clock()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hog)
        times["spawned"] = clock()
        nursery.start_soon(other)
        times["armed"] = clock()
        await trio.sleep(_NAP_S)
        times["woke"] = clock()
    return _starvation_metrics(started, times)


register_asyncio(STARVATION, _starvation_asyncio)
register_trio(STARVATION, _starvation_trio)


# ----------------------------------------------------------------------
# thread_growth
# ----------------------------------------------------------------------

_BLOCK_S = 1.0
_CAP = 16
_SAMPLE_S = 0.005


def _os_threads() -> int:
    """The OS threads of this process (``/proc``), else the Python threads."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return threading.active_count()


class _Growth:
    """Samples the thread count and tracks how many callbacks run at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self.peak_running = 0
        self.done = 0
        self.peak_threads = 0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, name="thread-sampler")
        self._sampler.start()
        self.base_threads = _os_threads()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_threads = max(self.peak_threads, _os_threads())
            self._stop.wait(_SAMPLE_S)

    def block(self) -> None:
        """The callback: count itself in, block, count itself out."""
        with self._lock:
            self._running += 1
            self.peak_running = max(self.peak_running, self._running)
        time.sleep(_BLOCK_S)
        with self._lock:
            self._running -= 1
            self.done += 1

    def metrics(self, n: int, seconds: float) -> Metrics:
        self._stop.set()
        self._sampler.join()
        expect(self.done == n, f"{self.done} of {n} callbacks ran")
        return {
            "seconds": seconds,
            "peak_threads": float(self.peak_threads),
            "base_threads": float(self.base_threads),
            "peak_running": float(self.peak_running),
        }


def _growth_asyncop(n: int, **options: Any) -> Metrics:
    growth = _Growth()
    started = time.perf_counter()
    with asyncop.Runtime(WORKERS, **options) as runtime:
        with runtime.scope() as scope:
            for _ in range(n):
                scope.spawn(growth.block)
        seconds = time.perf_counter() - started
    return growth.metrics(n, seconds)


@THREAD_GROWTH.system("asyncop")
def _growth_default(n: int) -> Metrics:
    return _growth_asyncop(n)


@THREAD_GROWTH.system("asyncop_capped", unless=_MAX_THREADS)
def _growth_capped(n: int) -> Metrics:
    return _growth_asyncop(n, max_threads=_CAP)


@THREAD_GROWTH.system("trio", requires=("trio",))
def _growth_trio(n: int) -> Metrics:
    import trio

    growth = _Growth()

    async def main() -> float:
        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(trio.to_thread.run_sync, growth.block)
        return time.perf_counter() - started

    return growth.metrics(n, trio.run(main))
