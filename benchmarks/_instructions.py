"""Count the CPU instructions one item of a workload costs, under valgrind.

Usage: ``python -m benchmarks._instructions WORKLOAD SYSTEM [--sizes A,B] [--gc]``.

Wall-clock figures on a shared machine move by tens of percent between
runs, which hides a change worth a few percent. An instruction count does
not move: valgrind's cachegrind counts every instruction of every thread
(it runs them one at a time), so the same code gives the same count to a
few parts in ten thousand. The system runs once at each of two sizes, each
in a fresh process, and the difference divided by the difference in size
is the cost of one item, with start-up and warm-up cancelled out.

It measures work, not waiting: a count says nothing of wake-up latency or
of the GIL handing over, so read it beside the timed benchmarks, never
instead of them. The collector is off by default (``--gc`` turns it on),
since when it runs depends on everything else in the process. Needs
valgrind (Debian: ``apt install valgrind``); about 50 times slower than a
plain run, hence the small default sizes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

from ._registry import load_workloads

__all__ = ["COUNTING_ENV", "count_instructions", "main"]

# Set in the counted process (see count_instructions).
COUNTING_ENV = "ASYNCOP_BENCH_COUNTING"

# Runs one system once in the child process under valgrind.
_CHILD = """
import gc, sys
from benchmarks._registry import load_workloads
if sys.argv[3] == "nogc":
    gc.disable()
load_workloads()[sys.argv[1]].systems[sys.argv[2]].fn(int(sys.argv[4]))
"""


def count_instructions(workload: str, system: str, n: int, *, gc: bool) -> int:
    """Instructions, over every thread, of one run of ``system`` at size ``n``."""
    done = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            "-c",
            _CHILD,
            workload,
            system,
            "gc" if gc else "nogc",
            str(n),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        # Workloads that stop repeating after a time budget repeat a fixed
        # number of times instead: under valgrind, fifty times slower, the
        # budget would cut the two sizes at different round counts.
        env={**os.environ, COUNTING_ENV: "1"},
    )
    match = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or match is None:
        raise RuntimeError(
            f"valgrind run of {workload}/{system} at n={n} failed "
            f"(exit {done.returncode}): {done.stderr.strip()[-400:]}"
        )
    return int(match.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    """Print the instructions per item of ``WORKLOAD SYSTEM``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks._instructions")
    parser.add_argument("workload")
    parser.add_argument("system")
    parser.add_argument(
        "--sizes", default="2000,6000", help="the two sizes to run, small first (default 2000,6000)"
    )
    parser.add_argument("--gc", action="store_true", help="leave the garbage collector on")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed; on Debian: apt install valgrind")
    sizes = [int(size) for size in args.sizes.split(",") if size.isdigit()]
    if len(sizes) != 2 or not 0 < sizes[0] < sizes[1] or args.sizes.count(",") != 1:
        parser.error(f"--sizes takes two sizes, small first, as in 2000,6000; got {args.sizes!r}")
    small, large = sizes
    registry = load_workloads()
    if args.system not in getattr(registry.get(args.workload), "systems", {}):
        parser.error(
            f"no system {args.system!r} in workload {args.workload!r}; "
            "python -m benchmarks --list names them"
        )
    low = count_instructions(args.workload, args.system, small, gc=args.gc)
    high = count_instructions(args.workload, args.system, large, gc=args.gc)
    per_item = (high - low) / (large - small)
    print(
        f"{args.workload}/{args.system}: {per_item:,.0f} instructions per item "
        f"(n={small:,}: {low:,}; n={large:,}: {high:,}; collector {'on' if args.gc else 'off'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
