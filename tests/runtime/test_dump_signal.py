"""``asyncop.dump_on_signal()``: a signal prints the dump of every live runtime."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import asyncop
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(30)

REPO = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent(
    """
    import sys
    import asyncop
    from asyncop.testing import wait_all_blocked

    async def parked_forever():
        await asyncop.sleep_forever()

    async def main():
        async with asyncop.scope(name="service") as s:
            s.spawn(parked_forever, name="stuck_fetch")
            await wait_all_blocked()
            print("ready", flush=True)
            await asyncop.spawn_blocking(sys.stdin.read)  # until the test closes stdin
            s.cancel()

    asyncop.dump_on_signal()
    with asyncop.Runtime(2, name="signalled") as rt:
        rt.run(main)
    """
)


async def parked_forever() -> None:
    await asyncop.sleep_forever()


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, f"never {what}"
        time.sleep(0.01)


def test_sigusr1_prints_every_live_runtimes_dump_on_stderr(tmp_path: Path) -> None:
    stderr = tmp_path / "stderr"
    with stderr.open("w") as err:
        child = subprocess.Popen(
            [sys.executable, "-c", PROGRAM],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        try:
            assert child.stdout is not None and child.stdin is not None
            assert child.stdout.readline() == "ready\n"
            os.kill(child.pid, signal.SIGUSR1)
            wait_until(lambda: "threads:" in stderr.read_text(), "printed the dump")
            child.stdin.close()
            assert child.wait(20) == 0  # the program goes on as before
        finally:
            child.kill()
            child.wait()
    lines = stderr.read_text().splitlines()
    assert lines[0] == f"asyncop: SIGUSR1 received by process {child.pid}: 1 live runtime"
    assert lines[1] == "signalled:"
    assert lines[2].startswith("  main [RUNNING] <string>:")
    assert any(
        line.startswith("      stuck_fetch [RUNNING] ") and "sleep_forever()" in line
        for line in lines
    )
    assert lines[-1].startswith("  threads: 2 workers")


def test_the_dump_goes_to_the_file_given_and_undo_puts_the_old_handler_back() -> None:
    out = io.StringIO()
    previous = signal.getsignal(signal.SIGUSR2)
    with asyncop.Runtime(1, name="filed", clock=VirtualClock(autojump=False)) as rt:
        made = rt.spawn(parked_forever, name="parked")
        wait_until(lambda: "waiting on" in rt.dump(), "parked")
        undo = asyncop.dump_on_signal(signal.SIGUSR2, file=out)
        try:
            assert signal.getsignal(signal.SIGUSR2) is not previous
            os.kill(os.getpid(), signal.SIGUSR2)
            wait_until(lambda: "threads:" in out.getvalue(), "printed the dump")
        finally:
            undo()
            undo()  # a second call does nothing
        assert signal.getsignal(signal.SIGUSR2) is previous
        made.cancel()
    text = out.getvalue()
    assert text.startswith(f"asyncop: SIGUSR2 received by process {os.getpid()}: ")
    assert "filed:\n  parked [RUNNING] " in text


def test_only_the_main_thread_may_install_or_undo_it() -> None:
    errors: list[BaseException] = []
    undo = asyncop.dump_on_signal(signal.SIGUSR2, file=io.StringIO())

    def elsewhere() -> None:
        for call in (lambda: asyncop.dump_on_signal(signal.SIGUSR2), undo):
            try:
                call()
            except RuntimeError as exc:
                errors.append(exc)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(10)
    undo()
    install, undoing = errors
    assert "dump_on_signal() was called from another thread than the main thread" in str(install)
    assert "the undo() of dump_on_signal() was called from another thread" in str(undoing)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"signum": "SIGUSR1"}, TypeError, "got str"),
        ({"signum": signal.SIGKILL}, ValueError, f"signum={int(signal.SIGKILL)}"),
        ({"signum": 100_000}, ValueError, "names no signal"),
        ({"file": "dump.txt"}, TypeError, "'dump.txt'"),
    ],
)
def test_a_bad_argument_is_refused_at_once(
    kwargs: dict[str, object], error: type[Exception], words: str
) -> None:
    before = signal.getsignal(signal.SIGUSR1)
    with pytest.raises(error, match=words):
        asyncop.dump_on_signal(**kwargs)  # type: ignore[arg-type]
    assert signal.getsignal(signal.SIGUSR1) is before
