"""Run one repetition in this process and print its metrics.

Usage: ``python -m benchmarks._run WORKLOAD SYSTEM N``. The harness starts
one such process per repetition, so that runs share no heap, GC or thread
state. The metrics come back as one JSON object on a stdout line that
starts with ``RESULT_PREFIX``; anything else the workload prints is ignored.
"""

from __future__ import annotations

import json
import sys

from ._registry import load_workloads

__all__ = ["RESULT_PREFIX", "main"]

RESULT_PREFIX = "benchmarks-result: "


def main(argv: list[str]) -> int:
    """Measure ``argv = [workload, system, n]`` once; returns the exit status."""
    if len(argv) != 3:
        print("usage: python -m benchmarks._run WORKLOAD SYSTEM N", file=sys.stderr)
        return 2
    name, system_name, size = argv
    registry = load_workloads()
    if name not in registry:
        print(f"unknown workload {name!r}; known: {', '.join(registry)}", file=sys.stderr)
        return 2
    systems = registry[name].systems
    if system_name not in systems:
        print(
            f"workload {name!r} has no system {system_name!r}; known: {', '.join(systems)}",
            file=sys.stderr,
        )
        return 2
    metrics = systems[system_name].fn(int(size))
    if "seconds" not in metrics:
        print(f"{name}/{system_name} returned no 'seconds' metric", file=sys.stderr)
        return 1
    print(RESULT_PREFIX + json.dumps(metrics), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
