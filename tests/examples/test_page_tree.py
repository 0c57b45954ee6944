"""Smoke test of the thread-only demo, examples/page_tree.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / "page_tree.py"), *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
    )


@pytest.mark.timeout(40)
def test_normal_load_completes_every_node() -> None:
    done = run()
    assert done.returncode == 0, done.stderr
    assert "load_page(1) [COMPLETED]" in done.stdout
    assert "page: <header of page 1>" in done.stdout
    assert "threads left running: none" in done.stdout


@pytest.mark.timeout(40)
def test_cancel_after_cancels_the_unfinished_nodes() -> None:
    done = run("--cancel-after", "0.1")
    assert done.returncode == 0, done.stderr
    assert "load_page(1) [CANCELLED]" in done.stdout
    assert "fetch_body [CANCELLED]" in done.stdout
    assert "threads left running: none" in done.stdout


@pytest.mark.timeout(40)
def test_a_failing_resource_is_reported_in_one_line() -> None:
    done = run("--fail", "header")
    assert done.returncode == 0, done.stderr
    assert "failed: header of page 1: server answered 503" in done.stdout
    assert "load_page(1) [FAILED]" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
