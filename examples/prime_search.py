"""Find a factor of a large number on worker processes, then on a Dask cluster.

    python examples/prime_search.py [--chunks 8] [--width 4000000] [--deadline 30] [--no-dask]

Trial division is pure-Python CPU work: on asyncop's worker threads the
chunks would take turns under the GIL. Here each chunk of candidate
divisors is one remote operation, first on a ``ProcessExecutor``, then on a
two-process local Dask cluster. Each search runs in a scope with a deadline;
as soon as one chunk finds the factor, the scope is cancelled: chunks still
queued are dropped without running, and running ones stop through their
remote token. The live tree is printed while the search runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import asyncop
from asyncop import OperationState

# 12_000_017 and 1_000_000_007 are prime.
NUMBER = 12_000_017 * 1_000_000_007


def search(n: int, lo: int, hi: int) -> int | None:
    """Return the smallest divisor of ``n`` in [lo, hi), or None."""
    token = asyncop.remote_token()
    start = max(3, lo | 1)
    for d in range(start, hi, 2):
        if d & 0xFFFF == 1:
            token.check()  # a cancel from the client stops the chunk here
        if n % d == 0:
            return d
    return None


def fan_out(
    runtime: asyncop.Runtime, executor: Any, label: str, chunks: int, width: int, deadline: float
) -> int | None:
    """Search every chunk on ``executor``; cancel the rest once one finds a factor."""
    found: int | None = None
    shown = False
    started = time.monotonic()
    try:
        with runtime.scope(name=f"search on {label}", timeout=deadline) as root:
            ops = [
                root.spawn(
                    search,
                    NUMBER,
                    i * width,
                    (i + 1) * width,
                    executor=executor,
                    name=f"chunk[{i * width:,}:{(i + 1) * width:,}]",
                )
                for i in range(chunks)
            ]
            while found is None and not all(op.done for op in ops):
                time.sleep(0.02)
                winner = next(
                    (op for op in ops if op.state is OperationState.COMPLETED and op.result()),
                    None,
                )
                if not shown and (winner is not None or time.monotonic() - started > 0.5):
                    shown = True
                    print(runtime.dump(), flush=True)
                if winner is not None:
                    found = winner.result()
                    root.cancel(f"factor found by {winner.name}")
    except TimeoutError:
        print(f"{label}: the deadline of {deadline:g} s passed first", flush=True)
    elapsed = time.monotonic() - started
    states: dict[str, int] = {}
    for op in ops:
        states[op.state.name] = states.get(op.state.name, 0) + 1
    print(f"{label}: factor {found} in {elapsed:.2f} s; chunks {states}", flush=True)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--width", type=int, default=4_000_000)
    parser.add_argument("--deadline", type=float, default=30.0)
    parser.add_argument("--no-dask", action="store_true")
    args = parser.parse_args(argv)

    print(f"searching a factor of {NUMBER:,}", flush=True)
    with asyncop.Runtime(2, name="prime-search") as runtime:
        with asyncop.ProcessExecutor(2, kill_grace=2.0) as processes:
            fan_out(runtime, processes, "processes", args.chunks, args.width, args.deadline)
        if args.no_dask:
            return 0
        try:
            import distributed

            from asyncop.dask import DaskExecutor
        except ImportError:
            print("Dask is not installed (pip install 'asyncop[dask]'); skipped", flush=True)
            return 0
        with (
            distributed.LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            fan_out(runtime, DaskExecutor(client), "dask", args.chunks, args.width, args.deadline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
