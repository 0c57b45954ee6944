"""Tests for cpu_count and thread_cpu_clock."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from asyncop.platform import cpu_count, thread_cpu_clock

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


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.skipif(not hasattr(time, "pthread_getcpuclockid"), reason="no per-thread CPU clock")
def test_thread_cpu_clock_reads_another_threads_cpu_time() -> None:
    readers: list[object] = []
    made = threading.Event()
    go = threading.Event()

    def target() -> None:
        readers.append(thread_cpu_clock())
        made.set()
        go.wait(10)
        # Spin for 0.2 s of this thread's own CPU time, not wall time: on a
        # loaded machine a wall-clock spin may get much less CPU than that.
        end = time.thread_time() + 0.2
        while time.thread_time() < end:
            pass

    thread = threading.Thread(target=target)
    thread.start()
    try:
        assert made.wait(10)
        reader = readers[0]
        assert callable(reader)
        before = reader()
        # Parked in a wait, the thread uses no CPU, however long this one spins.
        _spin(0.1)
        assert reader() - before < 0.05
        go.set()
        thread.join(10)
    finally:
        go.set()
        thread.join(10)
    # The reader still answers the thread's total once it has ended... or
    # fails, as the clock went with the thread: either way it spun 0.2 s.
    try:
        spent = reader() - before
    except OSError:
        return
    assert spent >= 0.1


def test_thread_cpu_clock_is_none_without_per_thread_clocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(time, "pthread_getcpuclockid", raising=False)
    assert thread_cpu_clock() is None
