"""``python -m asyncop ps|tree|top|dump PATH``: the console's client, run as users run it."""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import asyncop
from asyncop._console_client import deadline, seconds
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[1]


def asyncop_cli(*args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m asyncop ARGS`` (or ``python -c CODE ARGS``) from the checkout."""
    command = ["-m", "asyncop"] if code is None else ["-c", code]
    return subprocess.run(
        [sys.executable, *command, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        env={k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")},
    )


async def sleeper() -> None:
    await asyncop.sleep(1000)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """A console on a runtime with a small tree: ``service`` > ``fetch_a``, ``fetch_b``."""
    path = str(tmp_path / "c.sock")
    with (
        asyncop.Runtime(1, console=path, name="shop", clock=VirtualClock(autojump=False)) as rt,
        rt.scope(name="service") as service,
    ):
        service.spawn(sleeper, name="fetch_a")
        timed = service.spawn(sleeper, name="fetch_b")
        timed.deadline = rt.now() + 30
        yield path
        service.cancel()


def test_ps_prints_a_table_of_the_operations(served: str) -> None:
    result = asyncop_cli("ps", served)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("runtime shop (pid ")
    assert lines[0].endswith(", running, virtual clock at 0.000): 3 operations")
    heading = next(line for line in lines if "OPERATION" in line)
    assert heading.split() == [
        *("#", "PARENT", "OPERATION", "KIND", "STATE", "AGE", "STEPS", "BUSY", "CPU"),
        *("WAITS", "ON", "DEADLINE", "CANCEL", "WHERE"),
    ]
    rows = {line.split()[2]: line.split() for line in lines if re.match(r"^ *\d+ ", line)}
    assert set(rows) == {"service", "fetch_a", "fetch_b"}
    assert rows["service"][:5] == ["1", "-", "service", "scope", "RUNNING"]
    assert rows["fetch_a"][:7] == ["2", "1", "fetch_a", "task", "RUNNING", "0s", "1"]
    assert "sleep(1000)" in rows["fetch_b"] and "in" in rows["fetch_b"]
    assert "30.0s" in rows["fetch_b"]  # its deadline
    assert lines[-1].startswith("threads: 1 workers")


def test_tree_prints_the_tree(served: str) -> None:
    result = asyncop_cli("tree", served)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("runtime shop (pid ")
    assert lines[1] == "└── service [RUNNING] scope · age 0s"
    assert re.fullmatch(
        r"    ├── fetch_a \[RUNNING\] task · age 0s · 1 step, busy [0-9.]+(µs|ms|s), "
        r"cpu [0-9.]+(µs|ms|s) · sleep\(1000\) at test_console_cli\.py:\d+",
        lines[2],
    ), lines[2]
    assert lines[3].startswith("    └── fetch_b [RUNNING] task · age 0s · 1 step, busy ")
    assert lines[3].endswith(" · deadline in 30.0s")


def test_dump_prints_the_runtimes_dump(served: str) -> None:
    result = asyncop_cli("dump", served)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "shop:"
    assert lines[1].startswith(f"  service [RUNNING] {__file__}:")
    assert lines[2].startswith(f"    fetch_a [RUNNING] {__file__}:")
    assert " waiting on sleep(1000) at " in lines[2]
    assert lines[-1].startswith("  threads: 1 workers")


def test_a_missing_console_says_how_to_make_one(tmp_path: Path) -> None:
    path = str(tmp_path / "none.sock")
    result = asyncop_cli("ps", path)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        f"python -m asyncop ps: no console at {path}: nothing is there; start the program "
        f"with Runtime(console={path!r}) or ASYNCOP_CONSOLE={path}\n"
    )


def test_a_stale_console_says_the_program_has_ended(tmp_path: Path) -> None:
    path = str(tmp_path / "stale.sock")
    gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    gone.bind(path)
    gone.close()
    result = asyncop_cli("tree", path)
    assert result.returncode == 1
    assert "refused the connection: the program that made it has ended" in result.stderr


def test_a_missing_rich_is_named_with_the_extra_to_install(served: str) -> None:
    code = (
        "import sys\n"
        "sys.modules['rich'] = None  # as if it were not installed\n"
        "from asyncop.__main__ import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    result = asyncop_cli("top", served, code=code)
    assert result.returncode == 1
    assert result.stderr == (
        "python -m asyncop top draws with the rich package, which is not installed; "
        "install it with: pip install 'asyncop[console]'\n"
    )
    assert asyncop_cli("dump", served, code=code).returncode == 0  # needs no rich


def test_a_bad_command_line_is_a_usage_error() -> None:
    result = asyncop_cli("kill", "/tmp/x")
    assert result.returncode == 2 and "invalid choice: 'kill'" in result.stderr


def test_top_into_a_pipe_prints_each_view_below_the_last_until_ctrl_c(served: str) -> None:
    # Not a terminal: a live display would draw nothing until top ends.
    top = subprocess.Popen(
        [sys.executable, "-m", "asyncop", "top", served],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")},
    )
    try:
        assert top.stdout is not None
        seen: list[str] = []
        end = time.monotonic() + 20
        while sum("· refresh #" in line for line in seen) < 2:
            ready, _, _ = select.select([top.stdout], [], [], max(0.0, end - time.monotonic()))
            assert ready, f"top printed no second view into a pipe:\n{''.join(seen)}"
            line = top.stdout.readline()
            assert line, f"top ended early: {top.wait(10)}, {top.stderr and top.stderr.read()}"
            seen.append(line)
        top.send_signal(signal.SIGINT)
        _, err = top.communicate(timeout=20)
    finally:
        if top.poll() is None:
            top.kill()
            top.communicate()
    assert top.returncode == 0, err
    assert err == ""
    views = [line for line in seen if "· refresh #" in line]
    assert views[0].startswith(f"asyncop top {served} · refresh #1 at ")
    assert views[1].startswith(f"asyncop top {served} · refresh #2 at ")
    assert any(" fetch_a " in line for line in seen)


# -- top, in a real terminal -----------------------------------------------------------

TMUX = shutil.which("tmux")


class Pane:
    """A tmux session of its own server, 160x40, running one command."""

    def __init__(self, command: str) -> None:
        assert TMUX is not None
        self.server = f"asyncop-test-{uuid.uuid4().hex[:8]}"
        self._tmux("new-session", "-d", "-x", "160", "-y", "40", command)

    def _tmux(self, *args: str) -> str:
        assert TMUX is not None
        result = subprocess.run(
            [TMUX, "-L", self.server, *args], capture_output=True, text=True, timeout=10
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def text(self) -> str:
        return self._tmux("capture-pane", "-p")

    def wait_for(self, predicate: Callable[[str], bool], what: str, timeout: float = 15) -> str:
        end = time.monotonic() + timeout
        while True:
            text = self.text()
            if predicate(text):
                return text
            assert time.monotonic() < end, f"the pane never showed {what}:\n{text}"
            time.sleep(0.1)

    def send(self, *keys: str) -> None:
        self._tmux("send-keys", *keys)

    def close(self) -> None:
        subprocess.run([TMUX or "tmux", "-L", self.server, "kill-server"], timeout=10)


def _refresh(text: str) -> int:
    found = re.search(r"refresh #(\d+)", text)
    return int(found.group(1)) if found else 0


@pytest.mark.skipif(TMUX is None, reason="top is tested in a real terminal, which needs tmux")
@pytest.mark.parametrize("key", ["q", "C-c"])
def test_top_shows_the_tree_live_until_q_or_ctrl_c(served: str, key: str) -> None:
    # COLUMNS and LINES, if the test run has them, would override the pane's
    # size; the shell traps Ctrl-C (top still gets it) to say how top ended.
    command = (
        f"trap true INT; cd {ROOT} && env -u COLUMNS -u LINES {sys.executable} -m asyncop "
        f"top {served}; echo top ended $?"
    )
    pane = Pane(f"sh -c '{command}; sleep 30'")
    try:
        first = pane.wait_for(lambda text: "fetch_b" in text, "the operations")
        lines = first.splitlines()
        assert lines[0].startswith(f"asyncop top {served} · refresh #")
        assert lines[0].endswith("· q or Ctrl-C quits")
        assert "runtime shop (pid " in first
        service = next(line for line in lines if " service " in line)
        fetch_a = next(line for line in lines if " fetch_a " in line)
        assert service.split()[:5] == ["1", "-", "service", "scope", "RUNNING"]
        assert fetch_a.split()[:5] == ["2", "1", "fetch_a", "task", "RUNNING"]
        assert fetch_a.index("fetch_a") > service.index("service")  # indented under it
        assert "sleep(1000) at test_console_cli.py:" in fetch_a
        count = _refresh(first)
        pane.wait_for(lambda text: _refresh(text) > count, "a redraw", timeout=10)
        pane.send(key)
        pane.wait_for(lambda text: "top ended 0" in text, f"top ending on {key}")
    finally:
        pane.close()


def test_durations_are_short_and_deadlines_say_which_way() -> None:
    assert [seconds(v) for v in (None, 0, 4e-5, 0.0123, 2.345, 61.25, 7200)] == [
        *("-", "0s", "40µs", "12.3ms", "2.35s", "61.2s", "120m"),
    ]
    assert deadline({"deadline_in_s": 2.5}) == "in 2.50s"
    assert deadline({"deadline_in_s": -0.25}) == "250.0ms ago"
    assert deadline({"deadline_in_s": None}) == "-"


def test_the_heading_counts_blocking_calls_apart_from_operations(tmp_path: Path) -> None:
    path, release, started = str(tmp_path / "c.sock"), threading.Event(), threading.Event()

    def wait_for_release() -> None:
        started.set()
        release.wait(20)

    async def worker() -> None:
        await asyncop.spawn_blocking(wait_for_release)

    with asyncop.Runtime(1, console=path, name="shop") as rt, rt.scope(name="service") as service:
        service.spawn(worker, name="worker")
        assert started.wait(10)
        try:
            result = asyncop_cli("ps", path)
        finally:
            release.set()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("): 2 operations, 1 blocking call")
    kinds = [line.split()[3] for line in lines if re.match(r"^ *\d+ ", line)]
    assert kinds == ["scope", "task", "blocking"]  # three rows: the heading says what they are
