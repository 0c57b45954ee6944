"""Tests for cpu_count: the CPUs this process may run on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from asyncop.platform import cpu_count

pytestmark = pytest.mark.timeout(30)

_REPO = Path(__file__).resolve().parents[2]


def test_cpu_count_is_a_positive_int() -> None:
    count = cpu_count()
    assert isinstance(count, int)
    assert count >= 1


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no affinity mask here")
def test_cpu_count_matches_the_affinity_mask() -> None:
    assert cpu_count() == len(os.sched_getaffinity(0))


def test_cpu_count_is_at_least_one_when_the_os_cannot_tell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(os, "process_cpu_count", raising=False)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert cpu_count() == 1


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="cannot restrict affinity here")
def test_cpu_count_respects_a_restricted_affinity() -> None:
    cpu = min(os.sched_getaffinity(0))
    script = textwrap.dedent(
        f"""
        import os, sys
        try:
            os.sched_setaffinity(0, {{{cpu}}})
        except OSError as exc:
            print("skip", exc)
            sys.exit(0)
        from asyncop.platform import cpu_count
        print("count", cpu_count())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=_REPO,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    word, _, value = done.stdout.strip().partition(" ")
    if word == "skip":
        pytest.skip(f"sched_setaffinity refused: {value}")
    assert word == "count", done.stdout
    assert int(value) == 1
