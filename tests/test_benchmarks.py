"""How ``python -m benchmarks`` judges its targets, without running a workload.

A check compares the medians of two systems' repetitions. A target of the
compiled core (``Ratio(..., compiled=True)``) is judged only when the
compiled core runs: on the core as Python its ratio is still printed, and the
check is n/a rather than missed, since the target was never the pure form's.
"""

from __future__ import annotations

import io

import pytest

from benchmarks import _harness
from benchmarks._harness import Harness, Measurement, Options
from benchmarks._registry import Ratio, Workload


def _results(workload: Workload, ours: float, theirs: float) -> dict[tuple[str, int], Measurement]:
    runs = {"asyncop": ours, "uvloop": theirs}
    return {
        (name, 10): Measurement(workload, name, 10, runs=[{"seconds": s}] * 3)
        for name, s in runs.items()
    }


def _judge(check: Ratio, ours: float, theirs: float) -> dict[str, object]:
    item = Workload("w", "a workload", sizes=(10,), quick_sizes=(10,), checks=[check])
    harness = Harness(Options(workloads=(item,), repeat=3), out=io.StringIO(), err=io.StringIO())
    (line,) = harness._evaluate(item, check, _results(item, ours, theirs))
    return line


@pytest.mark.parametrize("compiled", [True, False])
def test_a_plain_ratio_is_judged_in_either_form(
    monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    monkeypatch.setattr(_harness, "_core_is_compiled", lambda: compiled)
    check = Ratio("asyncop", "uvloop", limit=0.7)
    assert _judge(check, 2.0, 4.0)["met"] is True
    assert _judge(check, 3.0, 4.0)["met"] is False


def test_a_compiled_target_is_judged_when_the_core_is_compiled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_harness, "_core_is_compiled", lambda: True)
    check = Ratio("asyncop", "uvloop", limit=0.7, compiled=True)
    met = _judge(check, 2.0, 4.0)
    assert (met["value"], met["met"], met["compiled"]) == (0.5, True, True)
    assert _judge(check, 3.0, 4.0)["met"] is False


def test_a_compiled_target_is_reported_but_not_judged_on_the_core_as_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_harness, "_core_is_compiled", lambda: False)
    line = _judge(Ratio("asyncop", "uvloop", limit=0.7, compiled=True), 3.0, 4.0)
    assert line["value"] == 0.75
    assert line["met"] is None
    assert "compiled core" in str(line["note"])


def test_the_harness_asks_the_installed_asyncop_which_form_runs() -> None:
    from asyncop.lowlevel import is_compiled

    assert _harness._core_is_compiled() is is_compiled()
