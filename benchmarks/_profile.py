"""Profile one repetition across every thread, and print the hot spots.

Usage: ``python -m benchmarks._profile WORKLOAD SYSTEM N [--top K] [--sort KEY]``.

``cProfile`` sees only the thread that enables it, and most of asyncop's
work runs on worker threads. So each ``threading.Thread`` started while
profiling runs its target under its own ``cProfile.Profile``, and the
stats of every thread are merged before printing. Profiling slows the run
down several times and changes where time goes (it taxes each call), so
read the output for *where* time is spent, not for totals.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import threading
from collections.abc import Callable
from typing import Any

from ._registry import load_workloads

__all__ = ["main", "profile_threads"]


def profile_threads(fn: Callable[[], Any]) -> tuple[Any, pstats.Stats]:
    """Call ``fn()`` with every thread it starts profiled; return its result and stats."""
    profiles: list[cProfile.Profile] = []
    guard = threading.Lock()
    original_run = threading.Thread.run

    def profiled_run(thread: threading.Thread) -> None:
        profile = cProfile.Profile()
        with guard:
            profiles.append(profile)
        profile.enable()
        try:
            original_run(thread)
        finally:
            profile.disable()

    main = cProfile.Profile()
    setattr(threading.Thread, "run", profiled_run)  # noqa: B010 - patching a method
    try:
        main.enable()
        try:
            result = fn()
        finally:
            main.disable()
    finally:
        setattr(threading.Thread, "run", original_run)  # noqa: B010
    stats = pstats.Stats(main)
    with guard:
        for profile in profiles:
            # A thread still running has not disabled its profiler; its
            # stats so far are still worth merging.
            stats.add(profile)
    return result, stats


def main(argv: list[str] | None = None) -> int:
    """Profile ``WORKLOAD SYSTEM N`` once and print the top functions."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks._profile")
    parser.add_argument("workload")
    parser.add_argument("system")
    parser.add_argument("n", type=int)
    parser.add_argument("--top", type=int, default=25, help="how many functions to print")
    parser.add_argument(
        "--sort", default="tottime", help="pstats sort key: tottime, cumulative, ncalls..."
    )
    args = parser.parse_args(argv)
    registry = load_workloads()
    try:
        system = registry[args.workload].systems[args.system]
    except KeyError:
        parser.error(f"no system {args.system!r} in workload {args.workload!r}")
    metrics, stats = profile_threads(lambda: system.fn(args.n))
    print(f"{args.workload}/{args.system} n={args.n} (profiled): {metrics}")
    stats.strip_dirs().sort_stats(args.sort).print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
