"""Rules a user of trio's, anyio's and asyncio's subprocess support expects of ``asyncop.process``.

Each test states, from the user's side, a rule those libraries promise that
asyncop promises too, in the cases the other process tests leave out: input
for a process that never reads it, output still in the pipe after the exit,
a return code that updates without ``wait()``, signals sent after the
process was reaped, and large output on both pipes at once.

Where asyncop differs by design, the test holds asyncop's rule: trio refuses
``run_process(stdin=PIPE)``; asyncop closes that pipe at once, so the
process reads an empty input.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

import asyncop
from asyncop.process import DEVNULL, PIPE, open_process, run_process

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes"),
]

PY = sys.executable
T = TypeVar("T")


def run(fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    with asyncop.Runtime(2) as rt:
        return rt.run(fn)


def test_input_for_a_process_that_never_reads_it_is_no_error() -> None:
    async def main() -> int:
        result = await run_process(["true"], input=b"x" * 2_000_000)
        return result.returncode

    assert run(main) == 0


def test_output_left_in_the_pipe_is_read_after_the_exit() -> None:
    async def main() -> bytes:
        async with open_process([PY, "-c", "print('hello')"]) as process:
            assert await process.wait() == 0
            return await process.stdout.receive_exactly(6)  # type: ignore[union-attr]

    assert run(main) == b"hello\n"


def test_the_return_code_updates_without_wait() -> None:
    async def main() -> int | None:
        process = open_process(["true"], stdin=DEVNULL, stdout=DEVNULL, stderr=DEVNULL)
        try:
            while process.returncode is None:
                await asyncop.sleep(0.01)
            return process.returncode
        finally:
            await process.aclose()

    assert run(main) == 0


def test_signals_after_the_process_was_reaped_are_harmless() -> None:
    async def main() -> int | None:
        async with open_process(["true"]) as process:
            await process.wait()
            process.terminate()
            process.kill()
            process.send_signal(signal.SIGTERM)
        return process.returncode

    assert run(main) == 0


def test_two_tasks_waiting_for_one_process_both_get_its_code() -> None:
    async def main() -> list[int]:
        codes: list[int] = []
        process = open_process(
            [PY, "-c", "import sys, time; time.sleep(0.2); sys.exit(5)"],
            stdin=DEVNULL,
            stdout=DEVNULL,
            stderr=DEVNULL,
        )

        async def waiter() -> None:
            codes.append(await process.wait())

        async with asyncop.scope() as s:
            s.spawn(waiter)
            s.spawn(waiter)
        return codes

    assert run(main) == [5, 5]


def test_large_output_on_both_pipes_with_input_does_not_deadlock() -> None:
    code = (
        "import sys; data = sys.stdin.buffer.read(); "
        "sys.stdout.buffer.write(data); sys.stderr.buffer.write(data[::-1])"
    )
    data = os.urandom(3_000_000)

    async def main() -> subprocess.CompletedProcess[bytes]:
        return await run_process([PY, "-c", code], input=data)

    result = run(main)
    assert result.stdout == data
    assert result.stderr == data[::-1]


def test_the_check_error_carries_the_command_and_both_outputs() -> None:
    command = [PY, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"]

    async def main() -> None:
        await run_process(command)

    with pytest.raises(subprocess.CalledProcessError) as info:
        run(main)
    assert info.value.returncode == 3
    assert info.value.cmd == command
    assert info.value.stdout.strip() == b"out"
    assert info.value.stderr.strip() == b"err"


def test_cwd_may_be_a_path(tmp_path: pathlib.Path) -> None:
    async def main() -> str:
        result = await run_process([PY, "-c", "import os; print(os.getcwd())"], cwd=tmp_path)
        return result.stdout.decode().strip()

    assert os.path.samefile(run(main), tmp_path)


def test_run_process_with_stdin_pipe_reads_an_empty_input() -> None:
    async def main() -> bytes:
        result = await run_process(["cat"], stdin=PIPE)
        return result.stdout

    assert run(main) == b""
