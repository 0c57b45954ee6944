"""The driver: run every repetition in a fresh process, report medians and checks.

For each workload and each size, the systems take turns (asyncop, peer,
asyncop, peer...) for ``repeat`` rounds, so that a slow phase of the machine
hits all of them alike. Each repetition is ``python -m benchmarks._run``
in its own process: no run inherits another's heap, GC generations, thread
pool or warmed caches.

Output, on stdout, one JSON object per line:

- ``{"meta": {...}}`` first: interpreter, machine, package versions;
- per measurement ``{"workload", "system", "n", "median_s", "per_item_us",
  "runs", ...}``, where ``runs`` lists each repetition's ``seconds`` and
  every other metric a workload returns is given as its median;
- per skipped system ``{"workload", "system", "skipped"}``, per failed one
  ``{"workload", "system", "n", "error"}``;
- per check ``{"ratio" | "limit", "workload", ..., "value", "target",
  "met"}``; a ratio also gives ``paired``, the median of the per-round
  ratios, which the machine's slow phases move less; a limit judged on the
  worst repetition instead of the median says ``"over": "worst run"``.

A human-readable table of the same goes to stderr at the end.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

from ._registry import Limit, Metrics, Ratio, Scaling, Workload
from ._run import RESULT_PREFIX

__all__ = ["Harness", "Measurement", "Options"]

_ROOT = Path(__file__).resolve().parent.parent
_PEERS = ("trio", "anyio", "uvloop")


@dataclass(frozen=True)
class Options:
    """What to run, and how many times."""

    workloads: tuple[Workload, ...]
    repeat: int
    quick: bool = False
    n: int | None = None
    systems: frozenset[str] | None = None  # None: every registered system
    timeout: float = 600.0


@dataclass
class Measurement:
    """The repetitions of one system on one workload at one size."""

    workload: Workload
    system: str
    n: int
    runs: list[Metrics] = field(default_factory=list)
    error: str | None = None

    def median(self, metric: str = "seconds") -> float:
        """The median of ``metric`` over the repetitions."""
        return float(statistics.median(run[metric] for run in self.runs))

    def worst(self, metric: str) -> float:
        """The largest value of ``metric`` over the repetitions."""
        return float(max(run[metric] for run in self.runs))

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.runs)

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return {
                "workload": self.workload.name,
                "system": self.system,
                "n": self.n,
                "error": self.error,
                "runs": [_round(run["seconds"]) for run in self.runs],
            }
        median = self.median()
        line: dict[str, Any] = {
            "workload": self.workload.name,
            "system": self.system,
            "n": self.n,
            "median_s": _round(median),
            "per_item_us": _round(median / self.n * 1e6) if self.workload.per_item else None,
            "min_s": _round(min(run["seconds"] for run in self.runs)),
            "runs": [_round(run["seconds"]) for run in self.runs],
        }
        for key in self.runs[0]:
            if key != "seconds":
                line[key] = _round(self.median(key))
        return line


def _paired_ratio(sides: list[Measurement], metric: str) -> float | None:
    """The median over rounds of one round's ratio, or None if the rounds differ.

    ``sides`` are two measurements (a ratio) or four (a ratio of ratios),
    whose k-th repetitions ran in the same round.

    The systems take turns round by round, and the machine's slow phases
    last longer than a round: a slow phase then lifts both sides of one
    round's ratio, and the median of those ratios moves less than the ratio
    of the two medians, which may take its top and its bottom from
    different phases. It is reported beside the check's value, not instead
    of it.
    """
    rounds = len(sides[0].runs)
    if any(len(side.runs) != rounds for side in sides):
        return None
    ratios = []
    for k in range(rounds):
        a, b, *rest = (side.runs[k][metric] for side in sides)
        if b <= 0 or (rest and (rest[0] <= 0 or rest[1] <= 0)):
            continue
        ratios.append(a / b if not rest else (a / b) / (rest[0] / rest[1]))
    return float(statistics.median(ratios)) if ratios else None


def _round(value: float) -> float:
    """Keep 4 significant digits: more is noise, and the lines stay short."""
    return float(f"{value:.4g}")


def _loadavg() -> list[float] | None:
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:  # not available on this platform
        return None


def _core_is_compiled() -> bool:
    """Whether the asyncop the repetitions import runs its compiled core.

    The repetitions inherit this process's environment, so they import the
    same form as this process would.
    """
    from asyncop.lowlevel import is_compiled

    return is_compiled()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


class Harness:
    """Runs the selected workloads; ``run()`` returns the exit status."""

    def __init__(self, options: Options, out: TextIO = sys.stdout, err: TextIO = sys.stderr):
        self.options = options
        self.out = out
        self.err = err
        self.measurements: list[Measurement] = []
        self.checks: list[dict[str, Any]] = []
        self.skipped: list[tuple[str, str, str]] = []
        self.failed = False

    # ------------------------------------------------------------------

    def run(self) -> int:
        started = time.perf_counter()
        self._emit({"meta": self._meta()})
        for item in self.options.workloads:
            self._run_workload(item)
        total = time.perf_counter() - started
        verdicts = [line["met"] for line in self.checks]
        self._emit(
            {
                "summary": {
                    "total_s": round(total, 1),
                    "checks_met": verdicts.count(True),
                    "checks_missed": verdicts.count(False),
                    "checks_na": verdicts.count(None),
                    "errors": sum(1 for m in self.measurements if m.error is not None),
                    "skipped": len(self.skipped),
                    "loadavg": _loadavg(),
                }
            }
        )
        self._print_table(total)
        return 1 if self.failed else 0

    def _meta(self) -> dict[str, Any]:
        return {
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "asyncop": _version("asyncop"),
            "compiled": _core_is_compiled(),
            "peers": {name: _version(name) for name in _PEERS},
            "repeat": self.options.repeat,
            "quick": self.options.quick,
            # Other processes skew every figure: compare with the summary's.
            "loadavg": _loadavg(),
            "env": {key: value for key, value in os.environ.items() if key.startswith("ASYNCOP_")},
        }

    def _emit(self, line: dict[str, Any]) -> None:
        self.out.write(json.dumps(line) + "\n")
        self.out.flush()

    def _progress(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()

    # ------------------------------------------------------------------

    def _run_workload(self, item: Workload) -> None:
        systems: list[str] = []
        for name, system in item.systems.items():
            if self.options.systems is not None and name not in self.options.systems:
                continue
            reason = system.missing()
            if reason is not None:
                self.skipped.append((item.name, name, reason))
                self._emit({"workload": item.name, "system": name, "skipped": reason})
            else:
                systems.append(name)
        if not systems:
            return
        results: dict[tuple[str, int], Measurement] = {}
        for n in item.sizes_for(quick=self.options.quick, n=self.options.n):
            self._progress(f"# {item.name} n={n}: {', '.join(systems)} x{self.options.repeat}")
            row = {name: Measurement(item, name, n) for name in systems}
            for _ in range(self.options.repeat):
                for name in systems:
                    measurement = row[name]
                    if measurement.error is None:
                        self._repeat_once(measurement)
            for name in systems:
                measurement = row[name]
                results[name, n] = measurement
                self.measurements.append(measurement)
                if measurement.error is not None:
                    self.failed = True
                self._emit(measurement.to_json())
        for check in item.checks:
            for line in self._evaluate(item, check, results):
                self.checks.append(line)
                self._emit(line)

    def _repeat_once(self, measurement: Measurement) -> None:
        command = [
            sys.executable,
            "-m",
            "benchmarks._run",
            measurement.workload.name,
            measurement.system,
            str(measurement.n),
        ]
        try:
            done = subprocess.run(
                command,
                cwd=_ROOT,
                capture_output=True,
                text=True,
                timeout=self.options.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            measurement.error = f"timed out after {self.options.timeout:g} s"
            return
        for text in reversed(done.stdout.splitlines()):
            if text.startswith(RESULT_PREFIX):
                if done.returncode == 0:
                    measurement.runs.append(json.loads(text[len(RESULT_PREFIX) :]))
                    return
                break
        tail = done.stderr.strip().splitlines()[-3:]
        measurement.error = f"exit status {done.returncode}: " + " | ".join(tail)

    # ------------------------------------------------------------------

    def _evaluate(
        self,
        item: Workload,
        check: Ratio | Scaling | Limit,
        results: dict[tuple[str, int], Measurement],
    ) -> list[dict[str, Any]]:
        sizes = sorted({n for _, n in results})
        if isinstance(check, Ratio):
            lines = [
                self._judge(
                    {
                        "ratio": f"{check.numerator}/{check.denominator}",
                        "workload": item.name,
                        "n": n,
                    },
                    check.metric,
                    "<=",
                    check.limit,
                    [results.get((check.numerator, n)), results.get((check.denominator, n))],
                )
                for n in sizes
            ]
            if check.compiled:
                for line in lines:
                    line["compiled"] = True
                    if not _core_is_compiled() and line["met"] is not None:
                        note = "a target of the compiled core, which runs as Python here"
                        line.update(met=None, note=note)
            return lines
        if isinstance(check, Scaling):
            if len(sizes) < 2:
                return []
            small, big = sizes[0], sizes[-1]
            sides = [results.get((check.system, big)), results.get((check.system, small))]
            label = f"n={big}/n={small}"
            if check.baseline is not None:
                sides += [results.get((check.baseline, big)), results.get((check.baseline, small))]
                label += f" over {check.baseline}'s"
            return [
                self._judge(
                    {"ratio": label, "workload": item.name, "system": check.system},
                    check.metric,
                    "<=",
                    check.limit,
                    sides,
                )
            ]
        return [
            self._judge(
                {"limit": check.metric, "workload": item.name, "system": check.system, "n": n},
                check.metric,
                "<",
                check.limit,
                [results.get((check.system, n))],
                worst=check.worst,
            )
            for n in sizes
        ]

    @staticmethod
    def _judge(
        line: dict[str, Any],
        metric: str,
        op: str,
        limit: float,
        sides: list[Measurement | None],
        *,
        worst: bool = False,
    ) -> dict[str, Any]:
        """Fill in ``value``, ``target`` and ``met``.

        ``sides`` is one measurement (its median is the value, or with
        ``worst`` its largest repetition), two (the value is their ratio) or
        four (the first ratio over the second: a scaling over a baseline's).
        When a side was skipped or failed, ``value`` and ``met`` are null.
        """
        if metric != "seconds" and "limit" not in line:
            line["metric"] = metric
        if worst:
            line["over"] = "worst run"
        target = f"{op} {limit:g}"
        present = [side for side in sides if side is not None and side.ok]
        if len(present) != len(sides):
            line.update(value=None, target=target, met=None, note="a side was skipped or failed")
            return line
        if worst:
            medians = [side.worst(metric) for side in present]
        else:
            medians = [side.median(metric) for side in present]
        value = medians[0]
        if len(medians) >= 2:
            value /= medians[1]
        if len(medians) == 4:
            value /= medians[2] / medians[3]
        met = value <= limit if op == "<=" else value < limit
        line.update(value=_round(value), target=target, met=met)
        if len(present) >= 2:
            paired = _paired_ratio(present, metric)
            if paired is not None:
                line["paired"] = _round(paired)
        return line

    # ------------------------------------------------------------------

    def _print_table(self, total: float) -> None:
        write = self._progress
        write("")
        write(f"{'workload':<24} {'system':<14} {'n':>8} {'median':>11} {'per item':>11}  extra")
        for m in self.measurements:
            head = f"{m.workload.name:<24} {m.system:<14} {m.n:>8}"
            if not m.ok:
                write(f"{head}  ERROR {m.error}")
                continue
            median = m.median()
            per_item = f"{median / m.n * 1e6:8.2f} us" if m.workload.per_item else ""
            extra = ", ".join(
                f"{key}={_round(m.median(key)):g}" for key in m.runs[0] if key != "seconds"
            )
            write(f"{head} {median:9.4f} s {per_item:>11}  {extra}")
        for workload_name, system, reason in self.skipped:
            write(f"{workload_name:<24} {system:<14} {'':>8}  skipped: {reason}")
        if self.checks:
            write("")
            write(f"{'check':<60} {'value':>9}  {'target':<8} result")
            for line in self.checks:
                label = line.get("ratio") or f"{line.get('limit')}"
                where = line["workload"]
                if "system" in line:
                    where += f" {line['system']}"
                if "n" in line:
                    where += f" n={line['n']}"
                if "metric" in line:
                    label += f" [{line['metric']}]"
                if "over" in line:
                    label += f" ({line['over']})"
                if line.get("compiled"):
                    label += " (compiled)"
                value = "-" if line["value"] is None else f"{line['value']:g}"
                verdict = {True: "met", False: "MISSED", None: "n/a"}[line["met"]]
                paired = f"  (paired {line['paired']:g})" if "paired" in line else ""
                write(
                    f"{where + ' ' + label:<60} {value:>9}  {line['target']:<8} {verdict}{paired}"
                )
        write("")
        load = _loadavg()
        write(f"total wall time: {total:.1f} s; load average now: {load}")
