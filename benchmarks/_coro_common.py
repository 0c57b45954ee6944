"""Shared pieces of the coroutine workloads: runners per system, counters, checks.

Every coroutine workload is written once per library, as an ``async def``
taking ``n`` and returning the metrics, and registered on several systems
through the runners here:

- ``asyncop`` on ``Runtime()`` (one worker per CPU), ``asyncop_w1`` and
  ``asyncop_w2`` on one and two workers, ``asyncop_nogc`` with the
  collector off: the same code on other runtimes, to tell the design's cost
  from the machine's (``coro`` adds chunked spawn loops of its own);
- ``asyncio`` (the default loop), ``asyncio_nogc``, ``uvloop``;
- ``trio``; ``anyio_asyncio`` and ``anyio_trio``: the same anyio code on
  either backend.

Peers are imported inside the runners, so that a missing one is skipped
rather than a crash, and nothing starts at import time.
"""

from __future__ import annotations

import gc
import inspect
import itertools
import os
import resource
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import asyncop

from ._registry import Metrics, Workload

__all__ = [
    "ANYIO_BACKENDS",
    "BenchmarkError",
    "asyncop_all_parked",
    "Counter",
    "expect",
    "percentile",
    "peak_rss_bytes",
    "register_anyio",
    "register_asyncio",
    "register_asyncop",
    "rss_bytes",
    "run_asyncop",
    "runtime_lacks",
]

AsyncMain = Callable[[int], Coroutine[Any, Any, Metrics]]

# anyio's backends, asyncop's own included: one anyio program on each.
ANYIO_BACKENDS = ("asyncio", "trio", "asyncop")

# Untimed tasks run first on every system, so that worker start-up, first
# imports and cold caches stay out of the timed region.
WARMUP = 100


class BenchmarkError(AssertionError):
    """A run ended in a state that shows it did not do its job."""


def expect(condition: bool, message: str) -> None:
    """Fail the repetition (not just score it) when ``condition`` is false."""
    if not condition:
        raise BenchmarkError(message)


class Counter:
    """A tally that tasks on several threads can bump without a lock.

    ``next()`` on an ``itertools.count`` is one C call under the GIL, so no
    increment is lost even when asyncop's workers step tasks in parallel;
    ``x += 1`` on a shared int could lose some.
    """

    __slots__ = ("_count", "_reads", "bump")

    def __init__(self) -> None:
        self._count = itertools.count()
        self._reads = 0
        # Bind it once: ``bump = counter.bump`` in a task costs one C call.
        self.bump: Callable[[], int] = self._count.__next__

    def value(self) -> int:
        """How many bumps so far; a read takes a number too, which is subtracted."""
        seen = next(self._count) - self._reads
        self._reads += 1
        return seen


@contextmanager
def gc_disabled() -> Iterator[None]:
    """Turn the cyclic collector off for the block (a diagnostic, not a default)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def percentile(ordered: list[float], fraction: float) -> float:
    """The nearest-rank percentile of an already sorted, non-empty list."""
    return ordered[min(len(ordered) - 1, int(fraction * (len(ordered) - 1) + 0.5))]


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """The resident set size of this process now (Linux ``/proc``; else the peak)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except OSError:
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    """The largest resident set size this process has had, in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


async def asyncop_all_parked(parked: Counter, n: int) -> None:
    """Return once ``n`` asyncop tasks have bumped ``parked`` just before parking.

    A cancellation point. Checkpoints send the caller to the back of the
    ready queue, behind the tasks still to take their first step; one more
    after the count is complete lets the last of them reach its await.

    ``asyncop.testing.wait_all_blocked()`` would say it directly, but it can
    miss its wake-up when the last busy worker is an extra one that retires
    as it parks, and a spawn loop of this size runs long enough in one step
    for the watchdog to start such a worker.
    """
    checkpoint = asyncop.checkpoint
    while parked.value() < n:
        await checkpoint()
    await checkpoint()


# ----------------------------------------------------------------------
# Runners
# ----------------------------------------------------------------------


def run_asyncop(main: AsyncMain, n: int, workers: int | None = None, **options: Any) -> Metrics:
    """Run ``main(n)`` as the root coroutine operation of a fresh ``Runtime``.

    ``options`` go to ``Runtime`` as keywords (``parallel=True``...); a system
    that passes one declares ``unless=runtime_lacks(keyword)``.
    """
    with asyncop.Runtime(workers, **options) as runtime:
        result: Metrics = runtime.run(main, n)
    return result


def runtime_lacks(keyword: str) -> Callable[[], str | None]:
    """An ``unless`` for a system that needs ``asyncop.Runtime(..., keyword=...)``.

    The installed asyncop may not have the keyword yet: the system is then
    skipped, with this reason, and its checks are n/a.
    """

    def reason() -> str | None:
        if keyword in inspect.signature(asyncop.Runtime).parameters:
            return None
        return f"asyncop.Runtime has no {keyword}= keyword"

    return reason


def register_asyncop(
    item: Workload, main: AsyncMain, *, workers: tuple[int, ...] = (), nogc: bool = False
) -> None:
    """Register ``asyncop`` and, on request, ``asyncop_w<k>`` and ``asyncop_nogc``."""
    item.system("asyncop")(lambda n: run_asyncop(main, n))
    for count in workers:
        item.system(f"asyncop_w{count}")(
            lambda n, count=count: run_asyncop(main, n, workers=count)  # type: ignore[misc]
        )
    if nogc:

        @item.system("asyncop_nogc")
        def _nogc(n: int) -> Metrics:
            with gc_disabled():
                return run_asyncop(main, n)


def register_asyncio(item: Workload, main: AsyncMain, *, nogc: bool = False) -> None:
    """Register ``asyncio``, ``uvloop`` and, on request, ``asyncio_nogc``."""

    @item.system("asyncio")
    def _asyncio(n: int) -> Metrics:
        import asyncio

        return asyncio.run(main(n))

    if nogc:

        @item.system("asyncio_nogc")
        def _asyncio_nogc(n: int) -> Metrics:
            import asyncio

            with gc_disabled():
                return asyncio.run(main(n))

    @item.system("uvloop", requires=("uvloop",))
    def _uvloop(n: int) -> Metrics:
        import uvloop

        return uvloop.run(main(n))


def register_trio(item: Workload, main: AsyncMain) -> None:
    """Register ``trio``."""

    @item.system("trio", requires=("trio",))
    def _trio(n: int) -> Metrics:
        import trio

        return trio.run(main, n)


def register_anyio(item: Workload, main: AsyncMain) -> None:
    """Register ``anyio_asyncio``, ``anyio_trio`` and ``anyio_asyncop``: one anyio program each."""
    for backend in ANYIO_BACKENDS:
        requires = ("anyio",) if backend != "trio" else ("anyio", "trio")

        def run(n: int, backend: str = backend) -> Metrics:
            import anyio

            if backend == "asyncop":
                import asyncop  # noqa: F401  (lets anyio find the backend)
            result: Metrics = anyio.run(main, n, backend=backend)
            return result

        item.system(f"anyio_{backend}", requires=requires)(run)
