"""Ctrl-C on a hang: the KeyboardInterrupt carries the tree as it was when it arrived.

A real SIGINT goes to a fresh interpreter whose main thread waits in
``run()`` or at a sync scope's exit for a task that hangs. The
KeyboardInterrupt that leaves has a note (PEP 678) with ``dump()`` taken
before the tree was cancelled: it names the task, what it waited on and the
user's line where it waited.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]

REPO = Path(__file__).resolve().parents[2]

HANG = """
import asyncop

gate = asyncop.Event(name="gate")

async def hangs():
    print("ready", flush=True)
    await gate.wait_async()  # the-wait

"""

PROGRAMS = {
    "run": """
with asyncop.Runtime(2, name="hung", deadlock="off") as rt:
    try:
        rt.run(hangs)
    except KeyboardInterrupt as exc:
        print("NOTES:", *getattr(exc, "__notes__", ["(none)"]), sep="\\n", flush=True)
""",
    "scope_exit": """
with asyncop.Runtime(2, name="hung", deadlock="off") as rt:
    try:
        with rt.scope(name="block") as s:
            s.spawn(hangs, name="hangs")
    except KeyboardInterrupt as exc:
        print("NOTES:", *getattr(exc, "__notes__", ["(none)"]), sep="\\n", flush=True)
""",
    "uncaught": """
asyncop.Runtime(2, name="hung", deadlock="off").run(hangs)
""",
}


def run_and_interrupt(tmp_path: Path, body: str) -> tuple[str, str, int]:
    """Run ``body`` as a script, press Ctrl-C once it hangs; its output and the wait's line."""
    script = tmp_path / "hang.py"
    source = HANG + body
    script.write_text(source)
    line = next(n for n, text in enumerate(source.splitlines(), 1) if "# the-wait" in text)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3)  # the task is parked, the main thread waits
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    return out, err, line


@pytest.mark.parametrize("where", ["run", "scope_exit"])
def test_the_interrupt_leaving_a_wait_carries_the_tree_as_it_hung(
    tmp_path: Path, where: str
) -> None:
    out, err, line = run_and_interrupt(tmp_path, PROGRAMS[where])
    assert "NOTES:" in out, (out, err)
    notes = out.split("NOTES:", 1)[1]
    assert "the tree when the KeyboardInterrupt arrived" in notes, notes
    hangs = [text for text in notes.splitlines() if "hangs [RUNNING]" in text]
    assert hangs, notes
    # What it waited on, and where: before the cancel, not "cancelling".
    assert f"waiting on event 'gate' at {tmp_path / 'hang.py'}:{line}" in hangs[0]
    assert "cancelling" not in hangs[0]


def test_an_uncaught_interrupt_prints_the_note_below_its_traceback(tmp_path: Path) -> None:
    _, err, line = run_and_interrupt(tmp_path, PROGRAMS["uncaught"])
    lines = err.rstrip().splitlines()
    assert "KeyboardInterrupt" in lines, err
    below = "\n".join(lines[lines.index("KeyboardInterrupt") :])
    assert "the tree when the KeyboardInterrupt arrived" in below, err
    assert f"waiting on event 'gate' at {tmp_path / 'hang.py'}:{line}" in below, err
