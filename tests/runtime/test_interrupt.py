"""Ctrl-C twice: the first cancels and waits, the second gets out at once.

Each scenario runs a small program in a fresh interpreter and presses
Ctrl-C for real (SIGINT with ``os.kill``) while its main thread waits in
asyncop. Where a callback ignores its cancel, the first press must not get
out (the tree is cancelled and waited for) and the second must: the
program ends within seconds with a KeyboardInterrupt traceback, after one
WARNING naming the abandoned thread and its operation. Where every
callback honours its cancel, one press is enough, and nothing is
abandoned.
"""

from __future__ import annotations

import _thread
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import asyncop
from tests.conftest import runtime_threads

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]

REPO = Path(__file__).resolve().parents[2]

# How long the program may take to end after the press that should end it.
# The promise is 1 s; the bound allows for a loaded machine.
EXIT_BOUND = 5.0
# A worker thread of the runtime named "rt" (not a blocking-call thread).
WORKER = r"rt-(?!blocking)[\w-]+"

PRELUDE = """
import logging, sys, threading, time
import asyncop

logging.basicConfig(format="%(levelname)s:%(name)s:%(message)s")

def say(what):
    print(what, flush=True)

# Set by the callbacks below as they start: a cancel before that would
# keep them from running at all.
started = threading.Event()

def ready():
    # Ready for Ctrl-C: the callback runs (the caller goes on to block).
    started.wait(10)
    say("ready")

def ready_soon():
    # The same, for a caller that is about to block before the callback runs.
    threading.Thread(target=ready, daemon=True).start()

def sleeper():
    # Ignores its cancel: a long sleep in one call.
    started.set()
    time.sleep(30)

def spinner():
    # Ignores its cancel, saying once that it saw it: a busy loop.
    started.set()
    op = asyncop.current_operation(require=True)
    said = False
    while True:
        if op.token.cancelled and not said:
            said = True
            say("cancelled")

def polite():
    # Honours its cancel, and cleans up.
    started.set()
    op = asyncop.current_operation(require=True)
    try:
        op.token.wait(30)
        op.token.check()
    finally:
        say("cleaned up")
"""


@dataclass
class Outcome:
    out: str
    err: str
    returncode: int
    after_last_press: float


class Program:
    """A scenario's interpreter, with its stdout read line by line."""

    def __init__(self, body: str) -> None:
        source = PRELUDE + textwrap.dedent(body)
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", source],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.err = ""
        self._out = threading.Thread(target=self._read_out, daemon=True)
        self._err = threading.Thread(target=self._read_err, daemon=True)
        self._out.start()
        self._err.start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.err = self.proc.stderr.read()

    def expect(self, line: str, timeout: float = 15.0) -> None:
        end = time.monotonic() + timeout
        while True:
            try:
                got = self.lines.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                self.proc.kill()
                self._err.join(5)
                raise AssertionError(
                    f"no {line!r} line; got {self.seen}; stderr:\n{self.err}"
                ) from None
            self.seen.append(got)
            if got == line:
                return

    def press_ctrl_c(self) -> float:
        os.kill(self.proc.pid, signal.SIGINT)
        return time.monotonic()

    def still_running_after(self, seconds: float) -> bool:
        try:
            self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            return True
        return False

    def finish(self, pressed: float) -> Outcome:
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._err.join(5)
            raise AssertionError(f"the program hung; stderr:\n{self.err}") from None
        elapsed = time.monotonic() - pressed
        self._out.join(5)
        self._err.join(5)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return Outcome("\n".join(self.seen), self.err, self.proc.returncode, elapsed)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def press_twice(
    body: str, *, ready: str = "ready", cancel_seen: str | None = "cancelled"
) -> Outcome:
    """Run ``body``; Ctrl-C once it says ready, and again once the cancel is under way."""
    program = Program(body)
    try:
        program.expect(ready)
        time.sleep(0.3)  # let the main thread block
        program.press_ctrl_c()
        if cancel_seen is not None:
            program.expect(cancel_seen)
        assert program.still_running_after(0.5), (
            f"the first Ctrl-C did not wait for the cancelled tree; stderr:\n{program.err}"
        )
        return program.finish(program.press_ctrl_c())
    finally:
        program.kill()


def press_once(body: str) -> Outcome:
    program = Program(body)
    try:
        program.expect("ready")
        time.sleep(0.3)
        return program.finish(program.press_ctrl_c())
    finally:
        program.kill()


def warnings_in(err: str) -> list[str]:
    """The WARNINGs on the asyncop logger, the slow-step reports left out."""
    return [
        line
        for line in err.splitlines()
        if line.startswith("WARNING:asyncop:") and "without awaiting" not in line
    ]


def exception_line(err: str) -> str:
    """The last traceback's exception line, above the note a KeyboardInterrupt carries."""
    lines = err.rstrip().splitlines()
    for index in range(len(lines) - 1, 0, -1):
        if lines[index].startswith("asyncop: the tree when the KeyboardInterrupt arrived"):
            return lines[index - 1]
    return lines[-1]


def assert_got_out(outcome: Outcome, *, thread: str, running: str) -> None:
    """The program ended promptly with a KeyboardInterrupt, after one WARNING."""
    err = outcome.err
    assert outcome.after_last_press < EXIT_BOUND, (
        f"took {outcome.after_last_press:.2f} s after the second Ctrl-C; stderr:\n{err}"
    )
    assert exception_line(err) == "KeyboardInterrupt", err
    assert outcome.returncode in (-signal.SIGINT, 128 + signal.SIGINT, 1), err
    warnings = warnings_in(err)
    assert len(warnings) == 1, err
    assert re.search(rf"thread '{thread}' running {running}", warnings[0]), warnings[0]
    assert "Exception ignored" not in err, err


# ----------------------------------------------------------------------
# A callback that ignores its cancel: two presses, each wait point
# ----------------------------------------------------------------------


@pytest.mark.parametrize("stubborn", ["sleeper", "spinner"])
def test_second_ctrl_c_in_run_abandons_the_stuck_callback(stubborn: str) -> None:
    outcome = press_twice(
        f"""
        with asyncop.Runtime(2, name="rt") as rt:
            def main():
                asyncop.current_operation(require=True).spawn({stubborn})
                ready()
            rt.run(main)
        say("after the with-block")
        """,
        cancel_seen="cancelled" if stubborn == "spinner" else None,
    )
    assert_got_out(
        outcome, thread=WORKER, running=rf"operation '{stubborn}' \(spawned at <string>:\d+\)"
    )
    assert "after the with-block" not in outcome.out


def test_second_ctrl_c_at_a_sync_scope_exit_abandons_the_stuck_callback() -> None:
    outcome = press_twice(
        """
        with asyncop.Runtime(2, name="rt") as rt:
            with rt.scope() as root:
                root.spawn(spinner)
                ready()
        """
    )
    assert_got_out(outcome, thread=WORKER, running="operation 'spinner'")


def test_second_ctrl_c_in_the_exit_of_with_runtime_abandons_the_stuck_callback() -> None:
    # The first press lands in the block's own code; the exit then waits.
    outcome = press_twice(
        """
        with asyncop.Runtime(2, name="rt") as rt:
            rt.spawn(spinner)
            ready()
            time.sleep(60)
        """
    )
    assert_got_out(outcome, thread=WORKER, running="operation 'spinner'")


def test_second_ctrl_c_in_shutdown_abandons_the_stuck_callback() -> None:
    # shutdown() cancels by itself (the spinner says so once it waits):
    # the first press cancels again and goes on waiting.
    outcome = press_twice(
        """
        rt = asyncop.Runtime(2, name="rt")
        op = rt.spawn(spinner)
        while op.state is not asyncop.OperationState.RUNNING:
            time.sleep(0.01)
        print("shutdown returned", rt.shutdown())
        """,
        ready="cancelled",
        cancel_seen=None,
    )
    assert_got_out(outcome, thread=WORKER, running="operation 'spinner'")
    assert "shutdown returned" not in outcome.out


def test_second_ctrl_c_in_start_abandons_the_task_that_never_started() -> None:
    outcome = press_twice(
        """
        def never_ready(*, task_status):
            spinner()

        with asyncop.Runtime(2, name="rt") as rt:
            with rt.scope() as root:
                ready_soon()
                root.start(never_ready)
        """
    )
    assert_got_out(outcome, thread=WORKER, running="operation 'never_ready'")


def test_second_ctrl_c_names_a_stuck_spawn_blocking_thread() -> None:
    outcome = press_twice(
        """
        async def main():
            ready_soon()
            await asyncop.spawn_blocking(sleeper)

        with asyncop.Runtime(2, name="rt") as rt:
            rt.run(main)
        """,
        cancel_seen=None,
    )
    assert_got_out(
        outcome, thread=r"rt-blocking-\d", running=r"spawn_blocking\(sleeper\) for task 'main'"
    )


def test_second_ctrl_c_names_a_coroutine_step_that_blocks() -> None:
    outcome = press_twice(
        """
        async def hog():
            spinner()

        with asyncop.Runtime(2, name="rt") as rt:
            with rt.scope() as root:
                root.spawn(hog)
                ready()
        """
    )
    assert_got_out(outcome, thread=WORKER, running="a step of task 'hog'")


def test_after_giving_up_the_runtime_takes_no_work_and_shutdown_does_not_wait() -> None:
    outcome = press_twice(
        """
        rt = asyncop.Runtime(2, name="rt")
        try:
            with rt.scope() as root:
                root.spawn(spinner)
                ready()
        except KeyboardInterrupt:
            began = time.monotonic()
            print("shutdown", rt.shutdown(), round(time.monotonic() - began), flush=True)
            try:
                rt.spawn(polite)
            except RuntimeError as exc:
                print("refused:", exc, flush=True)
            raise
        """
    )
    assert_got_out(outcome, thread=WORKER, running="operation 'spinner'")
    assert "shutdown False 0" in outcome.out.splitlines(), outcome.out
    assert "refused: Runtime 'rt' is shut down" in outcome.out, outcome.out


# ----------------------------------------------------------------------
# Every callback honours its cancel: one press is enough
# ----------------------------------------------------------------------

ONE_PRESS = {
    "run": """
        with asyncop.Runtime(2, name="rt") as rt:
            def main():
                asyncop.current_operation(require=True).spawn(polite)
                ready()
            rt.run(main)
    """,
    "scope_exit": """
        with asyncop.Runtime(2, name="rt") as rt:
            with rt.scope() as root:
                root.spawn(polite)
                ready()
    """,
    "with_runtime_exit": """
        with asyncop.Runtime(2, name="rt") as rt:
            rt.spawn(polite)
            ready()
            time.sleep(60)
    """,
    "shutdown": """
        rt = asyncop.Runtime(2, name="rt")
        rt.spawn(polite)
        ready()
        try:
            time.sleep(60)
        finally:
            assert rt.shutdown(), "threads left behind"
    """,
}


@pytest.mark.parametrize("where", sorted(ONE_PRESS))
def test_one_ctrl_c_is_enough_when_every_callback_honours_its_cancel(where: str) -> None:
    outcome = press_once(ONE_PRESS[where])
    err = outcome.err
    assert outcome.after_last_press < EXIT_BOUND, err
    assert exception_line(err) == "KeyboardInterrupt", err
    assert "cleaned up" in outcome.out.splitlines(), (outcome.out, err)
    assert warnings_in(err) == [], err
    assert "Exception ignored" not in err, err


# ----------------------------------------------------------------------
# In this interpreter: what giving up leaves, and when a press is a first
# ----------------------------------------------------------------------


def _ctrl_c_at(*delays: float) -> list[threading.Timer]:
    timers = [threading.Timer(delay, _thread.interrupt_main) for delay in delays]
    for timer in timers:
        timer.start()
    return timers


def test_after_giving_up_an_explicit_shutdown_timeout_still_waits_for_the_abandoned_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert threading.current_thread() is threading.main_thread()
    rt = asyncop.Runtime(2, name="gaveup")
    began = time.monotonic()

    def slow_to_notice() -> None:
        time.sleep(1.0)  # ignores the cancel for a second

    timers = _ctrl_c_at(0.1, 0.3)
    with caplog.at_level(logging.WARNING, logger="asyncop"), pytest.raises(KeyboardInterrupt):
        rt.run(slow_to_notice)
    assert time.monotonic() - began < 0.9, "the second Ctrl-C did not stop the wait"
    for timer in timers:
        timer.join()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "running operation 'test_after_giving_up" in warnings[0].getMessage()
    with pytest.raises(RuntimeError, match="is shut down"):
        rt.spawn(slow_to_notice)
    assert rt.shutdown(timeout=10), "the abandoned work ended, and the threads with it"
    assert runtime_threads(rt) == []


def test_a_ctrl_c_after_one_was_fully_handled_is_a_first_one_again(
    runtime: asyncop.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    assert threading.current_thread() is threading.main_thread()

    def slow_to_notice() -> str:
        time.sleep(0.4)
        return "done"

    with caplog.at_level(logging.WARNING, logger="asyncop"):
        for _ in range(2):
            timers = _ctrl_c_at(0.1)
            began = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                runtime.run(slow_to_notice)
            assert time.monotonic() - began >= 0.35, "the first Ctrl-C did not wait"
            for timer in timers:
                timer.join()
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert runtime.run(slow_to_notice) == "done"  # nothing was given up
