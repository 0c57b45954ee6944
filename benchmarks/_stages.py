"""Split a submit-and-wait round trip into its stages, for asyncop and the pool.

Usage: ``python -m benchmarks._stages [N]`` (default 20,000 round trips each).

``thread_callbacks_one`` times whole round trips: the main thread submits a
trivial call and waits for it, n times. A round trip has four stages, one
after the other:

1. the main thread, from being woken by the previous result to waking a
   worker for the next call;
2. the OS waking the worker (a cross-CPU wake);
3. the worker, from waking to waking the main thread with the result;
4. the OS waking the main thread.

Probes record a ``perf_counter_ns`` stamp at each border, for asyncop and for
``ThreadPoolExecutor`` alike, and the median of each stage is printed. The
probes wrap internal methods (asyncop's wake event and waiter list, the
pool's work queue and its futures' condition), so each adds about a
microsecond to the stages it borders: compare the two systems, not the
numbers with a plain run. A diagnostic, not a workload: it depends on
internals of both, and is not part of ``python -m benchmarks``.
"""

from __future__ import annotations

import _thread
import bisect
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, _base
from typing import Any

import asyncop
from asyncop.operations import _finalize, _node
from asyncop.platform import _event

__all__ = ["main"]

_ns = time.perf_counter_ns
_WARMUP = 200


class _Stamps:
    """The stamps of one run, each list in time order."""

    def __init__(self) -> None:
        self.back: list[int] = []  # the main thread has the previous result
        self.wake_worker: list[int] = []  # the main thread wakes a worker
        self.worker_up: list[int] = []  # the worker is awake
        self.wake_main: list[int] = []  # the worker wakes the main thread
        self.idle: list[int] = []  # the worker is about to sleep again

    def clear(self) -> None:
        for stamps in vars(self).values():
            stamps.clear()


def _after(stamps: list[int], t: int) -> int | None:
    i = bisect.bisect_right(stamps, t)
    return stamps[i] if i < len(stamps) else None


def _stages(s: _Stamps) -> dict[str, list[int]]:
    """Line the stamps up round trip by round trip."""
    out: dict[str, list[int]] = {
        "1. main: woken -> wakes worker": [],
        "2. OS: wake the worker": [],
        "3. worker: woken -> wakes main": [],
        "4. OS: wake the main thread": [],
        "   (worker: after waking main -> asleep)": [],
    }
    for i in range(1, len(s.back)):
        start = s.back[i - 1]
        wake = _after(s.wake_worker, start)
        if wake is None or wake > s.back[i]:
            continue  # no wake needed this round: the worker was still up
        up = _after(s.worker_up, wake)
        done = _after(s.wake_main, wake)
        asleep = _after(s.idle, done) if done is not None else None
        if up is None or done is None or asleep is None:
            continue
        values = (wake - start, up - wake, done - up, s.back[i] - done, asleep - done)
        for key, value in zip(out, values, strict=True):
            out[key].append(value)
    return out


def _asyncop(n: int) -> tuple[float, _Stamps]:
    s = _Stamps()
    main = threading.main_thread()
    original_set = _event.WakeEvent.set
    original_wait = _event.WakeEvent.wait
    original_add = _node.AsyncOperation._add_waiter_locked

    def set_(self: _event.WakeEvent) -> None:
        if threading.current_thread() is main:
            s.wake_worker.append(_ns())
        original_set(self)

    def wait_(self: _event.WakeEvent, timeout: float | None = None) -> bool:
        worker = "worker" in threading.current_thread().name
        if worker:
            s.idle.append(_ns())
        got = original_wait(self, timeout)
        if worker:
            s.worker_up.append(_ns())
        return got

    class StampedLock:
        """A thread waiter's lock, stamping its release (the runtime releases
        waiters of this type where it would release the lock itself)."""

        def __init__(self, lock: Any) -> None:
            self._lock = lock

        def release(self) -> None:
            s.wake_main.append(_ns())
            self._lock.release()

    def add_(self: _node.AsyncOperation, fn: Any) -> None:
        if isinstance(fn, _thread.LockType):
            original_add(self, StampedLock(fn))  # type: ignore[arg-type]
            return

        def wake() -> None:
            s.wake_main.append(_ns())
            fn()

        original_add(self, wake)

    patches: list[tuple[Any, str, Any]] = [
        (_event.WakeEvent, "set", set_),
        (_event.WakeEvent, "wait", wait_),
        (_node.AsyncOperation, "_add_waiter_locked", add_),
        (_finalize, "_LockType", StampedLock),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, fn in patches:
        setattr(owner, name, fn)
    try:
        with asyncop.Runtime(2, name="stages") as runtime:
            spawn = runtime.spawn
            return _round_trips(lambda: spawn(_noop).wait(), n, s), s
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


class _Queue:
    """The pool's work queue, stamping each put and each get."""

    def __init__(self, queue: Any, s: _Stamps) -> None:
        self._queue = queue
        self._s = s

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        self._s.wake_worker.append(_ns())
        self._queue.put(item)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        self._s.idle.append(_ns())
        item = self._queue.get(block, timeout)
        self._s.worker_up.append(_ns())
        return item

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


def _threadpool(n: int) -> tuple[float, _Stamps]:
    s = _Stamps()
    original = _base.Future.set_result

    def set_result(self: Any, result: Any) -> None:
        condition = self._condition
        notify_all = condition.notify_all

        def stamped() -> None:
            s.wake_main.append(_ns())
            notify_all()

        condition.notify_all = stamped
        original(self, result)

    _base.Future.set_result = set_result  # type: ignore[method-assign]
    try:
        with ThreadPoolExecutor(2) as pool:
            pool._work_queue = _Queue(pool._work_queue, s)  # type: ignore[assignment]
            submit = pool.submit
            return _round_trips(lambda: submit(_noop).result(), n, s), s
    finally:
        _base.Future.set_result = original  # type: ignore[method-assign]


def _noop() -> None:
    return None


def _round_trips(one: Callable[[], object], n: int, s: _Stamps) -> float:
    """Warm up, then time ``n`` calls of ``one``; µs per call, stamping each return."""
    for _ in range(_WARMUP):
        one()
    s.clear()
    t0 = time.perf_counter()
    for _ in range(n):
        one()
        s.back.append(_ns())
    return (time.perf_counter() - t0) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    """Print the median of each stage for both systems."""
    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args else 20_000
    results = {"asyncop": _asyncop(n), "threadpool": _threadpool(n)}
    stages = {name: _stages(s) for name, (_, s) in results.items()}
    print(f"{'stage (median, us)':<42} {'asyncop':>10} {'threadpool':>11}")
    for key in stages["asyncop"]:
        cells = [
            f"{statistics.median(stages[name][key]) / 1000:.2f}" if stages[name][key] else "-"
            for name in results
        ]
        print(f"{key:<42} {cells[0]:>10} {cells[1]:>11}")
    trips = [f"{results[name][0]:.1f}" for name in results]
    print(f"{'round trip (probed)':<42} {trips[0]:>10} {trips[1]:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
