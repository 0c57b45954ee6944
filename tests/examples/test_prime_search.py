"""Smoke test of examples/prime_search.py: processes, then a local Dask cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(90)
def test_search_finds_the_factor_on_processes_and_on_dask() -> None:
    pytest.importorskip("distributed")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "prime_search.py"),
            "--chunks",
            "16",
            "--width",
            "1000000",
        ],
        capture_output=True,
        text=True,
        timeout=80,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "processes: factor 12000017" in done.stdout
    assert "dask: factor 12000017" in done.stdout
    # The live tree was shown while each search ran.
    assert "search on processes [RUNNING]" in done.stdout
    assert "search on dask [RUNNING]" in done.stdout
