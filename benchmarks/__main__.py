"""Command line: ``python -m benchmarks [--list] [--only A,B] [--repeat K] [--quick] [--n N]``."""

from __future__ import annotations

import argparse
import sys

from ._harness import Harness, Options
from ._registry import Workload, load_workloads

_QUICK_REPEAT = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=(
            "Measure asyncop beside its peers. Prints one JSON line per measurement and "
            "per target check on stdout, and a table on stderr."
        ),
    )
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    parser.add_argument(
        "--only", metavar="NAME[,NAME]", help="run only these workloads (see --list)"
    )
    parser.add_argument(
        "--systems",
        metavar="NAME[,NAME]",
        help="run only these systems, e.g. asyncop,threadpool (checks needing others are n/a)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        metavar="K",
        help=f"repetitions per system, each in a fresh process (default 5, {_QUICK_REPEAT} "
        "with --quick); the median is reported",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller n and fewer repeats: a smoke run"
    )
    parser.add_argument(
        "--n",
        type=int,
        metavar="N",
        help="override n (workloads measured at two sizes run at N/10 and N; "
        "idle_cpu keeps its duration)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds before one repetition is killed and reported as an error (default 600)",
    )
    return parser


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _describe(registry: dict[str, Workload]) -> str:
    lines = []
    for item in registry.values():
        sizes = "/".join(f"{n:,}" for n in item.sizes)
        quick = "/".join(f"{n:,}" for n in item.quick_sizes)
        systems = []
        for name, system in item.systems.items():
            missing = system.missing()
            systems.append(name if missing is None else f"{name} (skipped: {missing})")
        lines.append(f"{item.name}: {item.description}")
        lines.append(f"    n={sizes} (quick {quick}); systems: {', '.join(systems)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run; returns the exit status (1 if a repetition failed)."""
    parser = _parser()
    args = parser.parse_args(argv)
    registry = load_workloads()
    if args.list:
        print(_describe(registry))
        return 0
    names = list(registry) if args.only is None else _split(args.only)
    unknown = [name for name in names if name not in registry]
    if unknown:
        parser.error(f"unknown workload {', '.join(unknown)}; known: {', '.join(registry)}")
    systems = None if args.systems is None else frozenset(_split(args.systems))
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat needs at least 1")
    if args.n is not None and args.n < 1:
        parser.error("--n needs a positive number")
    repeat = args.repeat if args.repeat is not None else (_QUICK_REPEAT if args.quick else 5)
    options = Options(
        workloads=tuple(registry[name] for name in names),
        repeat=repeat,
        quick=args.quick,
        n=args.n,
        systems=systems,
        timeout=args.timeout,
    )
    return Harness(options).run()


if __name__ == "__main__":
    sys.exit(main())
