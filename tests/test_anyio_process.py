"""anyio's processes and signals on the asyncop backend, as anyio code sees them.

- ``anyio.run_process`` and ``anyio.open_process`` run real programs; their
  streams raise anyio's errors (``EndOfStream``, ``ClosedResourceError``,
  ``BrokenResourceError``, ``BusyResourceError``);
- the process stays in our process group unless ``start_new_session=True``,
  as on anyio's other backends;
- a cancelled ``wait()`` leaves the process running, while a cancelled
  ``aclose()`` (and so ``run_process``) kills it; nothing is left behind,
  not even by a program that forgot a process: the runtime's shutdown
  stops it, and ``to_process``'s pool is killed there;
- ``anyio.open_signal_receiver`` works in a task, under ``anyio.run`` and
  under anyio's pytest plugin.

The ``rt`` fixture checks that no child process, descriptor or thread is
left once the runtime is shut down.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

import asyncop
from tests._children import child_pids, is_live, leak_checked_runtime

pytestmark = pytest.mark.timeout(30)

PY = sys.executable


@pytest.fixture
def rt() -> Iterator[asyncop.Runtime]:
    with leak_checked_runtime("aproc") as runtime:
        yield runtime


def run(rt: asyncop.Runtime, main: Any, *args: Any) -> Any:
    return anyio.run(main, *args, backend="asyncop", backend_options={"runtime": rt})


def python(code: str) -> list[str]:
    return [PY, "-c", code]


# -- running and talking ---------------------------------------------------------


def test_run_process_feeds_input_and_captures_both_streams(rt: asyncop.Runtime) -> None:
    code = "import sys; data = sys.stdin.read(); print(data[::-1]); print('err', file=sys.stderr)"

    async def main() -> subprocess.CompletedProcess[bytes]:
        return await anyio.run_process(python(code), input=b"abc")

    result = run(rt, main)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"cba\n", b"err\n")


def test_run_process_raises_called_process_error_with_the_output(rt: asyncop.Runtime) -> None:
    async def main() -> None:
        await anyio.run_process(python("print('out'); raise SystemExit(3)"))

    with pytest.raises(subprocess.CalledProcessError) as info:
        run(rt, main)
    assert (info.value.returncode, info.value.stdout) == (3, b"out\n")


def test_a_string_or_a_path_runs_through_the_shell_and_a_list_does_not(
    rt: asyncop.Runtime, tmp_path: Path
) -> None:
    script = tmp_path / "hello.sh"
    script.write_text("echo from the script\n")
    script.chmod(0o755)

    async def main() -> list[bytes]:
        shell = await anyio.run_process("printf 'a b' | wc -w")
        path = await anyio.run_process(script)
        listed = await anyio.run_process([b"printf", Path("%s"), "a | b"])
        return [shell.stdout.strip(), path.stdout, listed.stdout]

    assert run(rt, main) == [b"2", b"from the script\n", b"a | b"]


def test_the_streams_raise_anyios_errors(rt: asyncop.Runtime) -> None:
    async def main() -> None:
        process = await anyio.open_process(python("import sys; sys.stdout.write('x')"))
        async with process:
            assert process.stdin is not None and process.stdout is not None
            with pytest.raises(ValueError, match="max_bytes must be a positive integer"):
                await process.stdout.receive(0)
            assert await process.stdout.receive() == b"x"
            with pytest.raises(anyio.EndOfStream):
                await process.stdout.receive()
            assert await process.wait() == 0
            with pytest.raises(anyio.BrokenResourceError):
                await process.stdin.send(b"nobody reads this")
        for stream in (process.stdout, process.stderr):
            with pytest.raises(anyio.ClosedResourceError):
                await stream.receive()  # type: ignore[union-attr]
        with pytest.raises(anyio.ClosedResourceError):
            await process.stdin.send(b"closed")

    run(rt, main)


def test_two_tasks_receiving_from_one_stream_get_busy_resource_error(
    rt: asyncop.Runtime,
) -> None:
    async def main() -> None:
        async with await anyio.open_process(["cat"]) as process:
            stdout = process.stdout
            assert stdout is not None
            async with anyio.create_task_group() as tg:
                tg.start_soon(stdout.receive)
                await anyio.wait_all_tasks_blocked()
                with pytest.raises(anyio.BusyResourceError, match="receiving from"):
                    await stdout.receive()
                tg.cancel_scope.cancel()
            assert process.stdin is not None
            await process.stdin.aclose()

    run(rt, main)


def test_terminate_reaches_a_handler_and_wait_gives_its_status(
    rt: asyncop.Runtime, tmp_path: Path
) -> None:
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(2))\n"
        "print('ready', flush=True)\n"
        "time.sleep(20)\n"
    )

    async def main() -> tuple[int, int | None]:
        async with await anyio.open_process(python(code)) as process:
            assert process.stdout is not None
            line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 100)
            assert line == b"ready"
            process.terminate()
            return await process.wait(), process.returncode

    assert run(rt, main) == (2, 2)


def test_misuse_of_the_backend_call_is_refused_before_anything_starts(
    rt: asyncop.Runtime,
) -> None:
    from anyio._core._eventloop import get_async_backend

    before = child_pids()

    async def main() -> None:
        backend = get_async_backend()
        with pytest.raises(ValueError, match="only Windows takes"):
            await backend.open_process(
                ["true"], stdin=None, stdout=None, stderr=None, creationflags=4
            )
        with pytest.raises(TypeError, match=r"\['close_fds'\], which it does not take"):
            await backend.open_process(
                ["true"], stdin=None, stdout=None, stderr=None, close_fds=False
            )
        with pytest.raises(ValueError, match="names no user here"):
            await anyio.open_process(["true"], user="no-such-user-here")

    run(rt, main)
    assert child_pids() == before


# -- process groups --------------------------------------------------------------


def test_the_process_stays_in_our_process_group_unless_a_new_session_is_asked(
    rt: asyncop.Runtime,
) -> None:
    code = "import os; print(os.getpgid(0), os.getsid(0))"

    async def main() -> tuple[list[int], list[int]]:
        default = await anyio.run_process(python(code))
        new = await anyio.run_process(python(code), start_new_session=True)
        return [int(n) for n in default.stdout.split()], [int(n) for n in new.stdout.split()]

    (pgid, sid), (new_pgid, new_sid) = run(rt, main)
    assert (pgid, sid) == (os.getpgid(0), os.getsid(0))  # as on trio and asyncio
    assert new_sid != os.getsid(0) and new_pgid == new_sid


# -- cancellation and clean-up ---------------------------------------------------


def test_a_cancelled_wait_leaves_the_process_running(rt: asyncop.Runtime) -> None:
    async def main() -> tuple[bool, int]:
        async with await anyio.open_process(["sleep", "20"]) as process:
            with anyio.move_on_after(0.2) as scope:
                await process.wait()
            assert scope.cancelled_caught
            alive = process.returncode is None and is_live(process.pid)
            process.kill()
            return alive, await process.wait()

    assert run(rt, main) == (True, -signal.SIGKILL)


def test_a_cancelled_run_process_kills_the_process_and_reaps_it(rt: asyncop.Runtime) -> None:
    async def main() -> bool:
        with anyio.move_on_after(0.5) as scope:
            await anyio.run_process(["sleep", "20"])
        return scope.cancelled_caught

    before = child_pids()
    begun = time.monotonic()
    assert run(rt, main)
    assert time.monotonic() - begun < 10  # killed, not waited for
    assert child_pids() == before


def test_aclose_cancelled_kills_the_process_and_leaves_no_orphan(rt: asyncop.Runtime) -> None:
    async def main() -> int | None:
        with anyio.CancelScope() as scope:
            async with await anyio.open_process(["sleep", "20"]) as process:
                scope.cancel()
        return process.returncode

    assert run(rt, main) == -signal.SIGKILL


def test_wait_returns_at_the_exit_while_a_grandchild_holds_stdout(rt: asyncop.Runtime) -> None:
    code = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', "
        "'import select, sys; select.select([sys.stdin], [], [], 10)'])\n"
    )

    async def main() -> int:
        process = await anyio.open_process(python(code))
        assert process.stdin is not None and process.stdout is not None
        async with process.stdin:  # closing it lets the grandchild go
            with anyio.fail_after(5):
                status = await process.wait()
        async for _ in process.stdout:  # until the grandchild has gone too
            pass
        await process.aclose()
        return status

    assert run(rt, main) == 0


def test_a_process_the_program_forgot_is_stopped_and_reaped_at_shutdown() -> None:
    before = child_pids()

    async def main() -> int:
        process = await anyio.open_process(["sleep", "20"])
        return process.pid

    begun = time.monotonic()
    pid = anyio.run(main, backend="asyncop", backend_options={"workers": 2})
    assert time.monotonic() - begun < 10  # SIGTERM ended it: no grace was needed
    assert not is_live(pid)
    assert child_pids() == before


@pytest.mark.timeout(30)
def test_a_process_is_stopped_at_shutdown_even_if_no_worker_got_to_watch_it() -> None:
    # The one worker is held by another task from just after the process
    # started until the shutdown's cancel has landed: had the process's
    # watcher not run by then, it would be cancelled unstarted.
    before = child_pids()
    gate = threading.Event()

    async def holds_the_worker(woken: asyncop.Event) -> None:
        await woken.wait_async()
        gate.wait(10)  # blocks the worker's thread, on purpose

    async def main() -> int:
        woken = asyncop.Event()
        asyncop.current_runtime().spawn(holds_the_worker, woken)
        process = await anyio.open_process(["sleep", "20"])
        woken.set()  # it runs next, before anything queued
        return process.pid

    def cancel_landed() -> bool:
        rows = [row for row in runtime.snapshot()["operations"] if "process" in row["name"]]
        return all(row["cancel_reason"] is not None for row in rows)

    runtime = asyncop.Runtime(1)
    stopper = threading.Thread(target=runtime.shutdown)
    try:
        pid = anyio.run(main, backend="asyncop", backend_options={"runtime": runtime})
        stopper.start()
        end = time.monotonic() + 10
        while not cancel_landed() and time.monotonic() < end:
            time.sleep(0.001)
    finally:
        gate.set()
        if stopper.is_alive():
            stopper.join(20)
        runtime.shutdown()
    assert not is_live(pid)
    assert child_pids() == before


def test_the_process_pool_of_to_process_is_killed_at_shutdown() -> None:
    from anyio._core._eventloop import get_async_backend

    before = child_pids()

    async def main() -> Process:
        worker = await anyio.open_process(["sleep", "20"])
        get_async_backend().setup_process_pool_exit_at_shutdown({worker})
        return worker

    with asyncop.Runtime(2) as runtime:
        worker = anyio.run(main, backend="asyncop", backend_options={"runtime": runtime})
        assert worker.returncode is None  # the pool lives as long as the runtime
    # Killed (SIGKILL) by the shutdown's callback, before the shutdown's
    # cancel could send SIGTERM, and reaped by its watcher.
    assert worker.returncode == -signal.SIGKILL
    assert child_pids() == before


# -- signals ---------------------------------------------------------------------


def test_a_task_receives_signals_as_signals_members_and_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGUSR1)

    async def main() -> list[signal.Signals]:
        got = []
        with anyio.open_signal_receiver(signal.SIGUSR1, signal.SIGUSR2) as received:
            os.kill(os.getpid(), signal.SIGUSR2)
            os.kill(os.getpid(), signal.SIGUSR1)
            with anyio.fail_after(5):
                async for signum in received:
                    got.append(signum)
                    if len(got) == 2:
                        break
        assert signal.getsignal(signal.SIGUSR1) == before
        return got

    got = anyio.run(main, backend="asyncop", backend_options={"workers": 2})
    assert sorted(got) == [signal.SIGUSR1, signal.SIGUSR2]
    assert all(isinstance(signum, signal.Signals) for signum in got)


def test_a_cancelled_iteration_of_a_receiver_ends_with_the_cancel() -> None:
    async def main() -> bool:
        with anyio.open_signal_receiver(signal.SIGUSR1) as received:
            with anyio.move_on_after(0.1) as scope:
                async for _ in received:
                    pass
        return scope.cancelled_caught

    assert anyio.run(main, backend="asyncop", backend_options={"workers": 2})
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL


@pytest.fixture
def anyio_backend() -> str:
    return "asyncop"


@pytest.mark.anyio
async def test_a_receiver_opened_in_a_test_of_anyios_pytest_plugin() -> None:
    # The plugin's thread (pytest's main thread) waits for the test in
    # asyncop's slices, and installs the handlers meanwhile.
    with anyio.open_signal_receiver(signal.SIGUSR1) as received:
        os.kill(os.getpid(), signal.SIGUSR1)
        with anyio.fail_after(5):
            assert await received.__anext__() == signal.SIGUSR1
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
