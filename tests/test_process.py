"""Child processes: run_process, open_process, the pipe streams, and reaping.

Every test runs real programs (``python -c``, ``sh -c``, ``cat``, ``sleep``)
on a fresh runtime, and the ``rt`` fixture checks afterwards that nothing is
left: no child process (not even a zombie), no descriptor, no thread and no
registration.
"""

from __future__ import annotations

import contextlib
import functools
import grp
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop import net
from asyncop.net import DelimiterNotFound, IncompleteRead, SocketStream
from asyncop.process import (
    DEVNULL,
    PIPE,
    STDOUT,
    PipeStream,
    Process,
    open_process,
    run_process,
)
from asyncop.runtime._proc import _process
from asyncop.testing import assert_checkpoints, wait_all_blocked
from tests._children import (
    child_pids,
    group_members,
    is_live,
    leak_checked_runtime,
    process_table,
    process_tree,
)

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[1]  # the checkout, for child interpreters

PY = sys.executable


@pytest.fixture
def rt() -> Iterator[asyncop.Runtime]:
    """A 2-worker runtime; afterwards no child, fd, thread or registration is left."""
    with leak_checked_runtime("proc") as runtime:
        yield runtime


def run(rt: asyncop.Runtime, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    return rt.run(fn, *args)


def python(code: str) -> list[str]:
    return [PY, "-c", code]


# -- run_process ------------------------------------------------------------------


def test_run_process_captures_stdout_and_stderr_separately(rt: asyncop.Runtime) -> None:
    async def main() -> subprocess.CompletedProcess[bytes]:
        return await run_process(["sh", "-c", "echo out; echo err >&2"])

    result = run(rt, main)
    assert isinstance(result, subprocess.CompletedProcess)
    assert result.args == ["sh", "-c", "echo out; echo err >&2"]
    assert (result.returncode, result.stdout, result.stderr) == (0, b"out\n", b"err\n")


def test_run_process_feeds_input_while_reading_output(rt: asyncop.Runtime) -> None:
    # Far more than a pipe buffer each way: feeding before reading would deadlock.
    data = os.urandom(1 << 20)

    async def main() -> subprocess.CompletedProcess[bytes]:
        return await run_process(["cat"], input=data)

    assert run(rt, main).stdout == data


def test_run_process_gives_an_empty_stdin_without_input(rt: asyncop.Runtime) -> None:
    async def main() -> bytes:
        result = await run_process(["cat"])  # would hang reading our stdin
        return result.stdout

    assert run(rt, main) == b""


def test_run_process_input_that_is_not_read_is_not_an_error(rt: asyncop.Runtime) -> None:
    async def main() -> int:
        result = await run_process(["true"], input=b"x" * (1 << 20))
        return result.returncode

    assert run(rt, main) == 0


def test_nonzero_status_raises_called_process_error_with_the_output(
    rt: asyncop.Runtime,
) -> None:
    async def main() -> None:
        await run_process(["sh", "-c", "echo partial; echo oops >&2; exit 3"])

    with pytest.raises(subprocess.CalledProcessError) as info:
        run(rt, main)
    error = info.value
    assert (error.returncode, error.output, error.stderr) == (3, b"partial\n", b"oops\n")
    assert error.cmd == ["sh", "-c", "echo partial; echo oops >&2; exit 3"]


def test_check_false_returns_the_nonzero_status(rt: asyncop.Runtime) -> None:
    async def main() -> int:
        return (await run_process(["sh", "-c", "exit 5"], check=False)).returncode

    assert run(rt, main) == 5


def test_uncaptured_streams_are_none_in_the_result(rt: asyncop.Runtime) -> None:
    async def main() -> subprocess.CompletedProcess[bytes]:
        return await run_process(["true"], capture_stdout=False, capture_stderr=False)

    result = run(rt, main)
    assert (result.stdout, result.stderr) == (None, None)


def test_cwd_and_env_reach_the_process(rt: asyncop.Runtime, tmp_path: Path) -> None:
    async def main() -> bytes:
        env = {"PATH": os.environ["PATH"], "GREETING": "hi"}
        result = await run_process(["sh", "-c", 'echo "$GREETING $(pwd)"'], cwd=tmp_path, env=env)
        return result.stdout

    assert run(rt, main).decode().strip() == f"hi {tmp_path.resolve()}"


def test_shell_true_runs_one_string_through_sh(rt: asyncop.Runtime) -> None:
    async def main() -> bytes:
        return (await run_process("printf 'a b' | wc -w", shell=True)).stdout

    assert run(rt, main).strip() == b"2"


@pytest.mark.parametrize(
    ("command", "options", "error", "words"),
    [
        ("ls -l", {}, TypeError, "shell=True"),
        (["ls", "-l"], {"shell": True}, TypeError, "one string"),
        ([], {}, ValueError, "empty command"),
        (42, {}, TypeError, "list of strings"),
        (["true"], {"kill_grace": math.nan}, ValueError, "NaN"),
        (["true"], {"kill_grace": "5"}, TypeError, "kill_grace"),
        (["true"], {"kill_grace": -1}, ValueError, r"kill_grace=\.\.\.\) got -1, a negative"),
        (["true"], {"kill_grace": -math.inf}, ValueError, "negative"),
        (["true"], {"start_new_session": "yes"}, TypeError, "start_new_session as True"),
        (["true"], {"process_group": -1}, ValueError, "process_group=-1"),
        (["true"], {"process_group": True}, TypeError, "process_group as an int"),
        (["true"], {"process_group": 0, "start_new_session": True}, ValueError, "one of the two"),
        (["true"], {"input": "text"}, TypeError, "encode"),
    ],
)
def test_misuse_raises_before_anything_starts(
    rt: asyncop.Runtime, command: Any, options: dict[str, Any], error: type, words: str
) -> None:
    before = child_pids()

    async def main() -> None:
        await run_process(command, **options)

    with pytest.raises(error, match=words):
        run(rt, main)
    assert child_pids() == before


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"kill_grace": -0.5}, ValueError, r"open_process\(kill_grace=\.\.\.\) got -0\.5"),
        ({"kill_grace": math.nan}, ValueError, "NaN"),
        ({"start_new_session": 1}, TypeError, "start_new_session"),
        ({"process_group": 0, "start_new_session": True}, ValueError, "one of the two"),
    ],
)
def test_open_process_refuses_bad_options_before_starting_anything(
    rt: asyncop.Runtime, options: dict[str, Any], error: type, words: str
) -> None:
    before = child_pids()
    with pytest.raises(error, match=words):
        open_process(["true"], **options)
    assert child_pids() == before


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"pass_fds": 3}, TypeError, "pass_fds as a sequence of descriptors, got int"),
        ({"pass_fds": ["3"]}, TypeError, "each of pass_fds to be an int descriptor, got str"),
        ({"pass_fds": [True]}, TypeError, "int descriptor, got bool"),
        ({"pass_fds": [-1]}, ValueError, "descriptor -1 in pass_fds"),
        ({"user": 1.5}, TypeError, "user as a user name or a uid, got float"),
        ({"user": -1}, ValueError, "user -1"),
        ({"user": "no-such-user-here"}, ValueError, "names no user here"),
        ({"group": "no-such-group-here"}, ValueError, "group 'no-such-group-here', which names"),
        ({"group": [0]}, TypeError, "group as a group name or a gid, got list"),
        ({"extra_groups": "wheel"}, TypeError, "extra_groups as a list of group names or ids"),
        ({"extra_groups": [-2]}, ValueError, "extra_groups -2"),
        ({"umask": "022"}, TypeError, "umask as an int or None, got str"),
        ({"umask": 0o1000}, ValueError, "umask=0o1000"),
        ({"umask": -1}, ValueError, "from 0 to 0o777"),
    ],
)
@pytest.mark.parametrize("call", ["open_process", "run_process"])
def test_bad_inheritance_and_identity_options_raise_before_anything_starts(
    rt: asyncop.Runtime, call: str, options: dict[str, Any], error: type, words: str
) -> None:
    before = child_pids()

    async def main() -> None:
        if call == "open_process":
            open_process(["true"], **options)
        else:
            await run_process(["true"], **options)

    with pytest.raises(error, match=rf"{call}\(\) .*{words}"):
        run(rt, main)
    assert child_pids() == before


def test_pass_fds_user_group_and_umask_reach_the_process(
    rt: asyncop.Runtime, tmp_path: Path
) -> None:
    # Our own user and groups need no privilege; a passed descriptor is
    # open in the child, another one of ours is not.
    read_end, write_end = os.pipe()
    kept_out = os.open(os.devnull, os.O_RDONLY)
    code = (
        "import os, sys; fd, other = map(int, sys.argv[1:]);"
        "os.write(fd, b'through the pipe'); os.close(fd);"
        "closed = False\n"
        "try: os.fstat(other)\n"
        "except OSError: closed = True\n"
        "print(os.getuid(), os.getgid(), sorted(os.getgroups()), oct(os.umask(0)), closed)"
    )

    async def main() -> bytes:
        result = await run_process(
            [PY, "-c", code, str(write_end), str(kept_out)],
            pass_fds=[write_end],
            user=os.getuid(),
            group=grp_name(os.getgid()),
            extra_groups=sorted(os.getgroups()),
            umask=0o027,
        )
        return result.stdout

    try:
        out = run(rt, main)
        os.close(write_end)
        write_end = -1
        assert os.read(read_end, 100) == b"through the pipe"
    finally:
        for fd in (read_end, write_end, kept_out):
            if fd >= 0:
                os.close(fd)
    groups = sorted(os.getgroups())
    assert out.decode() == f"{os.getuid()} {os.getgid()} {groups} 0o27 True\n"


def grp_name(gid: int) -> str | int:
    """The name of group ``gid`` (to pass a name), or the gid where it has none."""
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return gid


def test_an_infinite_kill_grace_is_no_limit(rt: asyncop.Runtime) -> None:
    async def main() -> int:
        return (await run_process(["true"], kill_grace=math.inf)).returncode

    assert run(rt, main) == 0


def test_a_start_that_fails_after_the_spawn_leaves_no_process_and_no_pipe(
    rt: asyncop.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = []
    wrap = PipeStream.__init__

    def fail_on_the_second(self: PipeStream, fd: int, **kwargs: Any) -> None:
        if made:
            raise MemoryError("no memory for the stdout stream")
        made.append(fd)
        wrap(self, fd, **kwargs)

    monkeypatch.setattr(PipeStream, "__init__", fail_on_the_second)
    before = child_pids()
    with pytest.raises(MemoryError):
        open_process(["sleep", "60"])
    assert child_pids() == before  # killed and reaped; the rt fixture checks the pipes


def test_missing_program_raises_file_not_found_and_closes_the_pipes(
    rt: asyncop.Runtime,
) -> None:
    async def main() -> None:
        await run_process(["/nonexistent/program"])

    with pytest.raises(FileNotFoundError):
        run(rt, main)  # the rt fixture checks that no pipe was left open


# -- open_process and its streams ---------------------------------------------------


def test_open_process_talks_over_pipes(rt: asyncop.Runtime) -> None:
    async def main() -> tuple[bytes, bytes, int | None]:
        async with open_process(["cat"]) as process:
            assert isinstance(process, Process)
            assert isinstance(process.stdin, PipeStream)
            assert process.stdout is not None
            await process.stdin.send_all(b"hello\nworld\n")
            first = await process.stdout.receive_until(b"\n", 100)
            await process.stdin.send_eof()
            rest = b"".join([chunk async for chunk in process.stdout])
        return first, rest, process.returncode

    assert run(rt, main) == (b"hello", b"world\n", 0)


def test_streams_not_piped_are_none_and_stderr_can_join_stdout(rt: asyncop.Runtime) -> None:
    async def main() -> tuple[Any, Any, bytes]:
        code = "import sys; print('out', flush=True); print('err', file=sys.stderr)"
        async with open_process(python(code), stdin=DEVNULL, stderr=STDOUT) as process:
            assert process.stdout is not None
            out = b"".join([chunk async for chunk in process.stdout])
        return process.stdin, process.stderr, out

    stdin, stderr, out = run(rt, main)
    assert (stdin, stderr) == (None, None)
    assert out.split() == [b"out", b"err"]


def test_pid_and_returncode_follow_the_process(rt: asyncop.Runtime) -> None:
    async def main() -> tuple[int | None, int, int | None, int]:
        process = await open_process(
            ["sh", "-c", "read line; exit 4"], stdout=DEVNULL, stderr=DEVNULL
        )
        assert process.stdin is not None
        running = process.returncode
        await process.stdin.send_all(b"go\n")
        code = await process.wait()
        await process.aclose()
        return running, code, process.returncode, process.pid

    running, code, after, pid = run(rt, main)
    assert (running, code, after) == (None, 4, 4)
    assert pid > 0


def test_receive_exactly_and_receive_until_keep_what_they_do_not_return(
    rt: asyncop.Runtime,
) -> None:
    async def main() -> list[Any]:
        seen: list[Any] = []
        async with open_process(["printf", "abcdef\nrest"], stdin=DEVNULL) as process:
            out = process.stdout
            assert out is not None
            seen.append(await out.receive_exactly(2))
            seen.append(await out.receive_until(b"\n", 100))
            seen.append(await out.receive_exactly(1))
            # The socket streams' error, with what did arrive in .partial.
            with pytest.raises(IncompleteRead, match="after 3 of the 10 bytes") as info:
                await out.receive_exactly(10)
            seen.append(info.value.partial)
            seen.append(await out.receive_some(None))  # trio's "whatever is there"
        return seen

    assert run(rt, main) == [b"ab", b"cdef", b"r", b"est", b""]


def test_receive_until_raises_at_the_limit_and_at_end_of_stream(rt: asyncop.Runtime) -> None:
    async def main() -> bytes:
        async with open_process(["printf", "0123456789"], stdin=DEVNULL) as process:
            out = process.stdout
            assert out is not None
            with pytest.raises(DelimiterNotFound, match="max_bytes=4"):
                await out.receive_until(b"\n", 4)
            assert await out.receive_exactly(2) == b"01"  # what it read stayed buffered
            with pytest.raises(IncompleteRead, match=r"before b'\\n' arrived") as info:
                await out.receive_until(b"\n", 100)
            assert await out.receive_some() == b""
            return info.value.partial

    assert run(rt, main) == b"23456789"


def test_send_to_a_process_that_exited_raises_broken_resource_error(
    rt: asyncop.Runtime,
) -> None:
    async def main() -> None:
        async with open_process(["true"], stdout=DEVNULL, stderr=DEVNULL) as process:
            assert process.stdin is not None
            await process.wait()
            broken = r"the pipe \(stdin of .*\) is broken"
            with pytest.raises(asyncop.BrokenResourceError, match=broken):
                await process.stdin.send_all(b"x" * (1 << 20))

    run(rt, main)


def test_two_tasks_receiving_from_one_stream_is_refused(rt: asyncop.Runtime) -> None:
    async def main() -> None:
        async with open_process(["cat"]) as process:
            out = process.stdout
            assert out is not None and process.stdin is not None
            async with asyncop.scope() as s:
                first = s.spawn(out.receive_some)
                await wait_all_blocked()
                with pytest.raises(asyncop.BusyResourceError, match="already receiving"):
                    await out.receive_some()
                await process.stdin.send_all(b"x")
            assert first.result() == b"x"

    run(rt, main)


def test_closing_a_stream_wakes_its_parked_receiver(rt: asyncop.Runtime) -> None:
    async def main() -> None:
        async with open_process(["cat"]) as process:
            out = process.stdout
            assert out is not None
            async with asyncop.scope() as s:
                reader = s.spawn(out.receive_some, supervise=True)
                await wait_all_blocked()
                await out.aclose()
            assert isinstance(reader.error, asyncop.ClosedResourceError)
            with pytest.raises(asyncop.ClosedResourceError, match=r"pipe .* was closed"):
                await out.receive_some()
            await out.aclose()  # twice is harmless

    run(rt, main)


def test_a_stream_refuses_the_direction_it_does_not_have(rt: asyncop.Runtime) -> None:
    async def main() -> None:
        async with open_process(["cat"]) as process:
            assert process.stdin is not None and process.stdout is not None
            with pytest.raises(RuntimeError, match="write end"):
                await process.stdin.receive_some()
            with pytest.raises(RuntimeError, match="read end"):
                await process.stdout.send_all(b"x")
            with pytest.raises(RuntimeError, match="read end"):
                await process.stdout.send_eof()
            with pytest.raises(ValueError, match="max_bytes"):
                await process.stdout.receive_some(0)

    run(rt, main)


def test_signals_reach_the_process_and_show_in_the_status(rt: asyncop.Runtime) -> None:
    async def main() -> list[int]:
        codes = []
        for stop in (Process.terminate, Process.kill, lambda p: p.send_signal(signal.SIGUSR1)):
            async with open_process(["sleep", "30"], stdin=DEVNULL) as process:
                stop(process)
                codes.append(await process.wait())
                stop(process)  # after the reap: nothing, no error
        return codes

    assert run(rt, main) == [-signal.SIGTERM, -signal.SIGKILL, -signal.SIGUSR1]


def test_repr_shows_the_signal_that_ended_the_process(rt: asyncop.Runtime) -> None:
    async def main() -> str:
        async with open_process(["sleep", "30"], stdin=DEVNULL) as process:
            process.kill()
        return repr(process)

    assert run(rt, main) == "<Process ['sleep', '30']: exited with signal 9>"


def test_several_tasks_wait_for_one_process(rt: asyncop.Runtime) -> None:
    async def main() -> list[int]:
        process = await open_process(["sh", "-c", "read x; exit 9"], stdout=DEVNULL, stderr=DEVNULL)
        assert process.stdin is not None
        async with asyncop.scope() as s:
            waits = [s.spawn(process.wait) for _ in range(3)]
            await wait_all_blocked()
            await process.stdin.send_all(b"\n")
        await process.aclose()
        return [op.result() for op in waits]

    assert run(rt, main) == [9, 9, 9]


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this system")
def test_waiting_for_processes_costs_no_thread_with_pidfd(rt: asyncop.Runtime) -> None:
    assert _process.use_pidfd
    threads = _threads_while_waiting(rt, 4)
    assert threads[4] == threads[1]


def test_without_pidfd_a_thread_waits_for_each_process(
    rt: asyncop.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_process, "use_pidfd", False)
    threads = _threads_while_waiting(rt, 4)
    assert threads[4] == threads[1] + 3


def _threads_while_waiting(rt: asyncop.Runtime, most: int) -> dict[int, int]:
    """The number of threads while 1, then ``most``, processes are waited for."""

    async def main() -> dict[int, int]:
        counts = {}
        for n in (1, most):
            processes = [
                await open_process(["cat"], stdout=DEVNULL, stderr=DEVNULL) for _ in range(n)
            ]
            async with asyncop.scope() as s:
                for process in processes:
                    s.spawn(process.wait)
                # Not wait_all_blocked(): a blocking-call thread is work in progress.
                await asyncop.sleep(0.3)
                counts[n] = threading.active_count()
                for process in processes:
                    assert process.stdin is not None
                    await process.stdin.aclose()  # cat exits at end of input
            for process in processes:
                await process.aclose()
        return counts

    counts: dict[int, int] = run(rt, main)
    return counts


def test_fallback_wait_returns_the_status(
    rt: asyncop.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_process, "use_pidfd", False)

    async def main() -> subprocess.CompletedProcess[bytes]:
        return await run_process(["sh", "-c", "echo done; exit 2"], check=False)

    result = run(rt, main)
    assert (result.returncode, result.stdout) == (2, b"done\n")


def test_open_process_starts_at_once_and_may_be_awaited_as_trio_and_anyio_write_it(
    rt: asyncop.Runtime,
) -> None:
    before = child_pids()
    process = open_process(["sh", "-c", "read x; exit 6"], stdout=DEVNULL, stderr=DEVNULL)
    assert isinstance(process, Process)
    assert child_pids() - before == {process.pid}  # started by the call, from a plain thread

    async def main() -> int:
        assert await process is process  # not a wait for the exit
        async with await process:  # anyio's spelling
            assert process.stdin is not None
            await process.stdin.send_all(b"\n")
        assert isinstance(await open_process(["true"]), Process)  # trio's (left unwaited)
        return await process.wait()

    assert run(rt, main) == 6
    reap_strays(before)


def reap_strays(before: set[int]) -> None:
    """Reap the processes a test started on purpose and never waited for."""
    for pid in child_pids() - before:
        os.waitpid(pid, 0)


def test_a_cancelled_task_starts_no_process_in_run_process(rt: asyncop.Runtime) -> None:
    before = child_pids()

    async def main() -> None:
        asyncop.current_operation().cancel()  # type: ignore[union-attr]
        await run_process(["sleep", "60"])

    with pytest.raises(asyncop.CancellationError):
        run(rt, main)
    assert child_pids() == before


def test_start_run_process_gives_the_running_process_as_trio_does(rt: asyncop.Runtime) -> None:
    results: list[subprocess.CompletedProcess[bytes]] = []

    async def keep(*args: Any, **kwargs: Any) -> None:
        results.append(await run_process(*args, **kwargs))

    async def main() -> tuple[Any, ...]:
        command = python("import sys; sys.stdout.write(sys.stdin.read() or 'no input')")
        async with asyncop.scope() as s:
            process = await s.start(functools.partial(keep, ["sleep", "30"], check=False))
            running = process.returncode
            process.terminate()
            echoed = await s.start(keep, command)
        return running, process, echoed

    running, process, echoed = run(rt, main)
    assert isinstance(process, Process) and isinstance(echoed, Process)
    assert running is None
    assert process.returncode == -signal.SIGTERM
    # run_process went on after started(): it captured the output as usual.
    assert sorted((r.returncode, r.stdout) for r in results) == [
        (-signal.SIGTERM, b""),
        (0, b"no input"),
    ]


def test_start_run_process_reports_a_failed_spawn_to_the_caller(rt: asyncop.Runtime) -> None:
    async def main() -> list[Any]:
        async with asyncop.scope() as s:
            with pytest.raises(FileNotFoundError):
                await s.start(run_process, ["/no/such/program"])
            return s.children()

    assert run(rt, main) == []


def test_run_process_takes_trio_and_anyio_stream_arguments(rt: asyncop.Runtime) -> None:
    async def main() -> list[Any]:
        merged = await run_process(["sh", "-c", "echo out; echo err >&2"], stderr=STDOUT)
        fed = await run_process(["cat"], stdin=b"fed")  # trio's name for input
        quiet = await run_process(["sh", "-c", "echo out"], stdout=DEVNULL)
        piped = await run_process(["cat"], stdin=PIPE)  # nothing to feed: end of input
        return [merged.stdout.split(), merged.stderr, fed.stdout, quiet.stdout, piped.stdout]

    assert run(rt, main) == [[b"out", b"err"], None, b"fed", None, b""]


def test_input_and_stdin_together_are_refused(rt: asyncop.Runtime) -> None:
    async def main() -> None:
        await run_process(["cat"], input=b"a", stdin=DEVNULL)

    with pytest.raises(ValueError, match="both input= and stdin="):
        run(rt, main)


def test_repr_names_the_process_and_its_streams(rt: asyncop.Runtime) -> None:
    async def main() -> tuple[str, str, str]:
        async with open_process(["cat"]) as process:
            running = repr(process)
            stream = repr(process.stdout)
        return running, repr(process), stream

    running, ended, stream = run(rt, main)
    assert re.fullmatch(r"<Process \['cat'\]: running with PID \d+>", running)
    assert ended == "<Process ['cat']: exited with status 0>"
    assert "stdout of" in stream and "read end" in stream


def test_a_slow_start_is_not_mistaken_for_an_exit(rt: asyncop.Runtime) -> None:
    async def main() -> tuple[float, int]:
        start = time.monotonic()
        result = await run_process(python("import time; time.sleep(0.3)"))
        return time.monotonic() - start, result.returncode

    elapsed, code = run(rt, main)
    assert code == 0 and elapsed >= 0.3


# -- cancellation: terminate, grace, kill, reap ---------------------------------------

IGNORE_SIGTERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)
EXIT_7_ON_SIGTERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


async def _started(process: Process) -> None:
    """Wait for the child's 'ready' line: its signal handlers are in place."""
    assert process.stdout is not None
    assert await process.stdout.receive_until(b"\n", 100) == b"ready"


def _cancel_wait(
    rt: asyncop.Runtime, code: str, command: Any = None, **options: Any
) -> tuple[float, int | None]:
    """Start ``code`` (or ``command``), cancel a wait for it once it is ready.

    Returns the seconds the wait took and the exit status.
    """

    async def main() -> tuple[float, int | None]:
        argv = python(code) if command is None else command
        async with open_process(argv, stdin=DEVNULL, **options) as process:
            await _started(process)
            start = time.monotonic()
            with pytest.raises(TimeoutError):
                async with asyncop.scope(timeout=0.1):
                    await process.wait()
            elapsed = time.monotonic() - start
            # The operation ended only after the reap: the pid is gone already,
            # and so is every process of its group.
            assert process.pid not in child_pids()
            assert group_members(process.pid) == set()
        return elapsed, process.returncode

    result: tuple[float, int | None] = run(rt, main)
    return result


def test_cancelled_run_process_stops_the_process_and_reaps_it(rt: asyncop.Runtime) -> None:
    async def main() -> float:
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=0.2):
                await run_process(["sleep", "60"])
        return time.monotonic() - start

    assert run(rt, main) < 5.0  # SIGTERM ended sleep: no grace period was needed


def test_cancelled_wait_terminates_first(rt: asyncop.Runtime) -> None:
    elapsed, code = _cancel_wait(rt, EXIT_7_ON_SIGTERM)
    assert code == 7  # its SIGTERM handler ran: it was asked, not killed
    assert elapsed < 4.0


def test_a_process_ignoring_sigterm_is_killed_after_kill_grace(rt: asyncop.Runtime) -> None:
    with pytest.warns(RuntimeWarning, match=r"ignored SIGTERM for 0\.5 s"):
        elapsed, code = _cancel_wait(rt, IGNORE_SIGTERM, kill_grace=0.5)
    assert code == -signal.SIGKILL
    assert 0.55 <= elapsed < 4.5


def test_kill_grace_zero_kills_at_once(rt: asyncop.Runtime) -> None:
    elapsed, code = _cancel_wait(rt, EXIT_7_ON_SIGTERM, kill_grace=0)
    assert code == -signal.SIGKILL  # never got the SIGTERM it would have handled
    assert elapsed < 4.0


def test_kill_grace_none_waits_as_long_as_the_process_takes(rt: asyncop.Runtime) -> None:
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1.0), sys.exit(3)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    elapsed, status = _cancel_wait(rt, code, kill_grace=None)
    assert status == 3
    assert elapsed >= 1.0


def test_a_second_cancel_does_not_cut_the_grace_period_short(rt: asyncop.Runtime) -> None:
    async def main() -> tuple[float, int | None, asyncop.OperationState]:
        process = await open_process(python(IGNORE_SIGTERM), stdin=DEVNULL, kill_grace=0.5)
        await _started(process)
        start = time.monotonic()
        async with asyncop.scope() as s:
            waiter = s.spawn(process.wait)
            await wait_all_blocked()
            waiter.cancel("first")
            await asyncop.sleep(0.1)
            s.cancel("second, from above")
        elapsed = time.monotonic() - start
        assert process.pid not in child_pids()
        await process.aclose()
        return elapsed, process.returncode, waiter.state

    with pytest.warns(RuntimeWarning, match="ignored SIGTERM"):
        elapsed, code, state = run(rt, main)
    assert state is asyncop.OperationState.CANCELLED
    assert code == -signal.SIGKILL
    assert elapsed >= 0.5


def test_cancel_while_feeding_input_stops_the_process(rt: asyncop.Runtime) -> None:
    async def main() -> None:
        # sleep never reads: feeding blocks once the pipe is full.
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=0.2):
                await run_process(["sleep", "60"], input=b"x" * (1 << 22))

    run(rt, main)


def test_leaving_async_with_under_a_cancel_stops_the_process(rt: asyncop.Runtime) -> None:
    async def main() -> int | None:
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=0.2), open_process(["sleep", "60"]) as process:
                pass  # the exit closes the pipes and waits, and is cancelled there
        assert process.pid not in child_pids()
        return process.returncode

    assert run(rt, main) == -signal.SIGTERM


def test_an_error_in_the_async_with_body_closes_the_pipes_and_waits(
    rt: asyncop.Runtime,
) -> None:
    async def main() -> Process:
        with pytest.raises(ZeroDivisionError):
            async with open_process(["cat"]) as process:
                1 / 0  # noqa: B018 - the error under test
        return process

    process = run(rt, main)
    assert process.returncode == 0  # cat saw the end of its input and exited
    assert process.stdin is not None and process.stdin.fileno() == -1


def test_without_pidfd_a_cancel_still_kills_and_reaps(
    rt: asyncop.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_process, "use_pidfd", False)
    with pytest.warns(RuntimeWarning, match="ignored SIGTERM"):
        elapsed, code = _cancel_wait(rt, IGNORE_SIGTERM, kill_grace=0.3)
    assert code == -signal.SIGKILL  # the rt fixture checks the waiter thread ended
    assert 0.35 <= elapsed < 4.5


def _refuse_sigterm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every SIGTERM to a process or a group fail with EPERM ("whoops")."""

    def refusing(send: Callable[[int, int], None]) -> Callable[[int, int], None]:
        def call(pid: int, sig: int) -> None:
            if sig == signal.SIGTERM:
                raise PermissionError(1, "whoops")
            send(pid, sig)

        return call

    monkeypatch.setattr(os, "kill", refusing(os.kill))
    monkeypatch.setattr(os, "killpg", refusing(os.killpg))


@pytest.mark.parametrize("own_group", [True, False])
def test_a_failing_terminate_is_a_warning_and_the_process_is_killed(
    rt: asyncop.Runtime, monkeypatch: pytest.MonkeyPatch, own_group: bool
) -> None:
    _refuse_sigterm(monkeypatch)
    target = "the process group of <Process" if own_group else "<Process"
    with pytest.warns(RuntimeWarning, match=f"SIGTERM to {target}.*whoops.*killing it instead"):
        elapsed, code = _cancel_wait(
            rt, EXIT_7_ON_SIGTERM, start_new_session=None if own_group else False
        )
    assert code == -signal.SIGKILL
    assert elapsed < 4.0


def test_poll_is_returncode_and_notices_a_reap_elsewhere(rt: asyncop.Runtime) -> None:
    async def main() -> tuple[int | None, int]:
        async with open_process(["sleep", "30"], stdin=DEVNULL) as process, asyncop.scope() as s:
            waiter = s.spawn(process.wait)
            await wait_all_blocked()
            running = process.poll()
            process.terminate()
            process._popen.wait()  # reaped behind the waiter's back
            assert process.poll() == -signal.SIGTERM
        return running, waiter.result()

    assert run(rt, main) == (None, -signal.SIGTERM)


def test_wait_works_when_sigchld_is_ignored(rt: asyncop.Runtime) -> None:
    # The kernel then reaps children itself, and waitpid() fails with ECHILD;
    # the status cannot be known, and subprocess reports 0.
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:

        async def main() -> int:
            async with open_process(["sleep", "30"], stdin=DEVNULL) as process:
                process.kill()
                return await process.wait()

        assert run(rt, main) == 0
    finally:
        signal.signal(signal.SIGCHLD, previous)


def test_many_cancelled_processes_leave_no_zombie(rt: asyncop.Runtime) -> None:
    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=0.3) as s:
                for _ in range(20):
                    s.spawn(run_process, ["sleep", "60"])

    run(rt, main)


CTRL_C_SCRIPT = """
import sys

import asyncop
from asyncop.process import DEVNULL, open_process

started = []


async def main():
    # The command says "ready" once it has started what it means to.
    async with open_process(sys.argv[1], shell=True, stdin=DEVNULL) as process:
        started.append(process)
        await process.stdout.receive_until(b"\\n", 100)
        print(process.pid, flush=True)
        await process.wait()


with asyncop.Runtime(2) as runtime:
    try:
        runtime.run(main)
    except KeyboardInterrupt:
        print("interrupted", started[0].returncode, flush=True)
"""


@contextlib.contextmanager
def _ctrl_c_script(command: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Run ``CTRL_C_SCRIPT`` in a process group of its own; give it and its child's pid."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        [PY, "-c", CTRL_C_SCRIPT, command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        process_group=0,
    ) as script:
        assert script.stdout is not None
        yield script, int(script.stdout.readline())


def test_ctrl_c_in_runtime_run_stops_and_reaps_the_process() -> None:
    with _ctrl_c_script("echo ready; exec sleep 60") as (script, grandchild):
        script.send_signal(signal.SIGINT)
        out, err = script.communicate(timeout=30)
    assert out.decode().split() == ["interrupted", str(-signal.SIGTERM)], err.decode()
    with pytest.raises(ProcessLookupError):
        os.kill(grandchild, 0)  # stopped and reaped before the script went on


# -- process groups: a cancel stops every process the command started ------------------


async def _until(what: str, condition: Callable[[], bool]) -> None:
    """Poll ``condition`` on the real clock for at most 10 s."""
    for _ in range(1000):
        if condition():
            return
        await asyncop.sleep(0.01)
    raise AssertionError(f"never saw {what}")


def _sleeps(tree: dict[int, Any]) -> set[int]:
    return {pid for pid, info in tree.items() if info.name == "sleep"}


TWO_SLEEPS = [
    pytest.param("sleep 60 | sleep 60", {"shell": True}, id="shell-pipe"),
    pytest.param(["sh", "-c", "sleep 60 & sleep 60"], {}, id="background-child"),
    pytest.param(["sh", "-c", "sleep 60 & sleep 60"], {"start_new_session": True}, id="session"),
    pytest.param(["sh", "-c", "sleep 60 & sleep 60"], {"process_group": 0}, id="group-0"),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("command", "options"), TWO_SLEEPS)
def test_a_cancelled_run_process_leaves_no_process_of_its_tree(
    rt: asyncop.Runtime, command: Any, options: dict[str, Any]
) -> None:
    async def main() -> tuple[set[int], int, int | None]:
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=10) as s:
                process = await s.start(functools.partial(run_process, command, **options))
                await _until("both sleeps", lambda: len(_sleeps(process_tree(process.pid))) == 2)
                tree = set(process_tree(process.pid))
                s.deadline = 0  # the scope's timeout, now
        # The operation ended only once the whole group was gone.
        return {pid for pid in tree if is_live(pid)}, process.pid, process.returncode

    left, pid, code = run(rt, main)
    assert left == set()
    assert group_members(pid) == set()
    assert code == -signal.SIGTERM


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "options",
    [{"start_new_session": False}, {"process_group": os.getpgrp()}],
    ids=["start_new_session=False", "an-existing-group"],
)
def test_a_process_outside_a_group_of_its_own_is_stopped_alone(
    rt: asyncop.Runtime, options: dict[str, Any]
) -> None:
    async def main() -> tuple[set[int], int | None]:
        process = await open_process(["sh", "-c", "sleep 60 & exec sleep 61"], **options)
        await _until("the background sleep", lambda: len(_sleeps(process_tree(process.pid))) == 2)
        children = set(process_tree(process.pid)) - {process.pid}
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=0.2):
                await process.aclose()
        return children, process.returncode

    children, code = run(rt, main)
    try:
        assert code == -signal.SIGTERM
        assert {pid for pid in children if is_live(pid)} == children  # as before groups
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(30)
def test_a_cancel_after_the_leader_exited_still_stops_the_child_holding_the_pipes(
    rt: asyncop.Runtime,
) -> None:
    async def main() -> tuple[set[int], int, int | None]:
        # The leader exits at once; its child keeps stdout open, so
        # run_process goes on reading until the cancel.
        seconds = _unique_seconds()
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=10) as s:
                process = await s.start(run_process, ["sh", "-c", f"sleep {seconds} & exec true"])
                await _until("the child alone", lambda: _alone(process.pid, seconds))
                s.deadline = 0
        return _sleeping(seconds), process.pid, process.returncode

    left, pid, code = run(rt, main)
    assert left == set()
    assert group_members(pid) == set()
    assert code == 0  # the leader's own status: it exited before the cancel


@pytest.mark.timeout(30)
def test_leaving_async_with_under_a_cancel_stops_the_child_of_an_exited_leader(
    rt: asyncop.Runtime,
) -> None:
    async def main() -> tuple[set[int], int]:
        seconds = _unique_seconds()
        with pytest.raises(TimeoutError):
            command = ["sh", "-c", f"sleep {seconds} & exec true"]
            async with asyncop.scope(timeout=10) as s, open_process(command) as process:
                assert process.stdout is not None
                await _until("the child alone", lambda: _alone(process.pid, seconds))
                s.deadline = 0
                await process.stdout.receive_some()  # the child holds it: no EOF
        return _sleeping(seconds), process.pid

    left, pid = run(rt, main)
    assert left == set()
    assert group_members(pid) == set()


def _unique_seconds() -> str:
    """A sleep's argument no other process on the machine has: ``60.<random>``."""
    return f"60.{int.from_bytes(os.urandom(4), 'big'):010d}1"


def _sleeping(seconds: str) -> set[int]:
    """The live processes running ``sleep seconds``."""
    found = set()
    for pid in process_table():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", seconds.encode()] and is_live(pid):
            found.add(pid)
    return found


def _alone(leader: int, seconds: str) -> bool:
    """Whether ``leader`` has exited and left its ``sleep seconds`` child running."""
    return _process_state(leader) == "Z" and len(_sleeping(seconds)) == 1


def _process_state(pid: int) -> str | None:
    info = process_table().get(pid)
    return None if info is None else info.state


HANDLES_SIGTERM_SLOWLY = (
    "import signal, sys, time\n"
    "def bye(*_):\n"
    "    time.sleep(0.3)\n"
    "    open(sys.argv[1], 'w').write('cleaned up')\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, bye)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.mark.timeout(30)
def test_the_group_gets_the_grace_period_after_its_leader_exited(
    rt: asyncop.Runtime, tmp_path: Path
) -> None:
    # sh dies of the SIGTERM at once; its child cleans up for 0.3 s, and is
    # not killed meanwhile: the stop waits for the group, not just the leader.
    marker = tmp_path / "marker"
    command = f"{PY} -c {_quote(HANDLES_SIGTERM_SLOWLY)} {marker}; echo unreachable"
    elapsed, code = _cancel_wait(rt, "", command, shell=True, kill_grace=10)
    assert marker.read_text() == "cleaned up"
    assert code == -signal.SIGTERM
    assert 0.3 <= elapsed < 8.0


def _quote(code: str) -> str:
    import shlex

    return shlex.quote(code)


@pytest.mark.timeout(30)
def test_another_waiter_does_not_reap_the_leader_while_the_stop_needs_its_group(
    rt: asyncop.Runtime,
) -> None:
    # The leader (sh) dies of SIGTERM at once, the other waiter wakes up to
    # reap it, and the group's SIGKILL must still reach the member that
    # ignores SIGTERM: the zombie leader keeps the group id ours until then.
    command = f"{PY} -c {_quote(IGNORE_SIGTERM)} & wait"

    async def main() -> tuple[int | None, set[int], asyncop.OperationState]:
        process = await open_process(command, shell=True, stdin=DEVNULL, kill_grace=0.3)
        await _started(process)
        async with asyncop.scope() as s:
            patient = s.spawn(process.wait)
            cancelled = s.spawn(process.wait)
            await wait_all_blocked()
            cancelled.cancel()
        await process.aclose()
        return patient.result(), group_members(process.pid), cancelled.state

    with pytest.warns(RuntimeWarning, match="process group of .* ignored SIGTERM for 0.3 s"):
        code, left, state = run(rt, main)
    assert left == set()
    assert code == -signal.SIGTERM
    assert state is asyncop.OperationState.CANCELLED


@pytest.mark.timeout(60)
def test_ctrl_c_at_a_terminal_stops_the_whole_group_of_the_process() -> None:
    # A terminal sends SIGINT to its foreground group: here the script's
    # own group, which the process (in a group of its own) is not part of.
    with _ctrl_c_script("sleep 60 | sleep 60 & echo ready; wait") as (script, group):
        assert len(group_members(group)) == 3  # sh and its two sleeps
        os.killpg(script.pid, signal.SIGINT)
        out, err = script.communicate(timeout=30)
    # Not -SIGINT: the Ctrl-C did not reach the process; the cancel did.
    assert out.decode().split() == ["interrupted", str(-signal.SIGTERM)], err.decode()
    assert group_members(group) == set()


# -- warnings point at the user's line -------------------------------------------------


@pytest.mark.parametrize("cause", ["ignored SIGTERM", "whoops"])
def test_a_stop_warning_points_at_the_line_that_waited(
    rt: asyncop.Runtime, monkeypatch: pytest.MonkeyPatch, cause: str
) -> None:
    line = 0

    async def main() -> None:
        nonlocal line
        async with open_process(python(IGNORE_SIGTERM), stdin=DEVNULL, kill_grace=0.2) as process:
            await _started(process)
            if cause == "whoops":
                _refuse_sigterm(monkeypatch)  # the warning that sending SIGTERM failed
            with pytest.raises(TimeoutError):
                async with asyncop.scope(timeout=0.1):
                    line = sys._getframe().f_lineno + 1
                    await process.wait()

    with pytest.warns(RuntimeWarning, match=cause) as record:
        run(rt, main)
    assert [(w.filename, w.lineno) for w in record] == [(__file__, line)]


@pytest.mark.timeout(20)
def test_a_stop_warning_made_an_error_comes_after_the_kill_and_the_reap(
    rt: asyncop.Runtime,
) -> None:
    async def main() -> tuple[list[str], int | None]:
        raised: list[str] = []
        async with open_process(python(IGNORE_SIGTERM), stdin=DEVNULL, kill_grace=0.2) as process:
            await _started(process)
            try:
                async with asyncop.scope(timeout=0.1):
                    await process.wait()
            except* RuntimeWarning as group:  # raised by the stop, in the scope's group
                raised += [str(error) for error in group.exceptions]
        return raised, process.returncode

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        raised, code = run(rt, main)
    assert len(raised) == 1 and "ignored SIGTERM" in raised[0]
    assert code == -signal.SIGKILL  # killed and reaped all the same


def test_the_kill_grace_warning_of_a_spawned_run_process_points_at_the_spawn(
    rt: asyncop.Runtime,
) -> None:
    line = 0

    async def main() -> None:
        nonlocal line
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=10) as s:
                start = functools.partial(run_process, python(IGNORE_SIGTERM), kill_grace=0.2)
                line = sys._getframe().f_lineno + 1
                process = await s.start(start)
                await _until("the handler", lambda: _has_handler(process.pid))
                s.deadline = 0

    with pytest.warns(RuntimeWarning, match="ignored SIGTERM") as record:
        run(rt, main)
    assert [(w.filename, w.lineno) for w in record] == [(__file__, line)]


def _has_handler(pid: int) -> bool:
    """Whether ``pid`` ignores SIGTERM yet (SigIgn in /proc/PID/status)."""
    for text in Path(f"/proc/{pid}/status").read_text().splitlines():
        if text.startswith("SigIgn:"):
            return bool(int(text.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mixed_receives_give_back_exactly_the_bytes_sent(rt: asyncop.Runtime, seed: int) -> None:
    """Delimiters split across reads, partial reads kept: the stream stays exact."""
    import random

    rng = random.Random(seed)
    data = b"".join(
        rng.choice([b"\r\n", b"x", b"yz", os.urandom(rng.randrange(1, 300))]) for _ in range(3000)
    )

    async def write(process: Process) -> None:
        assert process.stdin is not None
        view = memoryview(data)
        while view:
            size = rng.randrange(1, 4000)
            split = bytes(view[:8000]).find(b"\r\n")
            cut = split >= 0 and rng.random() < 0.5
            if cut:
                size = split + 1  # between \r and \n
            await process.stdin.send_all(view[:size])
            view = view[size:]
            if cut:
                await asyncop.sleep(0.001)  # the reader sees the \r alone
        await process.stdin.send_eof()

    async def main() -> bytes:
        got = bytearray()
        async with open_process(["cat"]) as process, asyncop.scope() as s:
            s.spawn(write, process)
            out = process.stdout
            assert out is not None
            while True:
                kind = rng.randrange(3)
                try:
                    if kind == 0:
                        line = await out.receive_until(b"\r\n", 100_000)
                        assert b"\r\n" not in line, f"seed {seed}: a delimiter was skipped"
                        got += line + b"\r\n"
                    elif kind == 1:
                        got += await out.receive_exactly(rng.randrange(0, 5000))
                    elif not (chunk := await out.receive_some(rng.randrange(1, 5000))):
                        break
                    else:
                        got += chunk
                except IncompleteRead as exc:
                    got += exc.partial  # what came before the end
        return bytes(got)

    got = run(rt, main)
    assert got == data, f"seed {seed}: the bytes differ from offset {_first_difference(got, data)}"


def _first_difference(a: bytes, b: bytes) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


# -- pipes and sockets are one kind of stream ------------------------------------------


class _Peer:
    """The raw far end of a stream under test: a socket or a pipe descriptor."""

    def __init__(self, write: Callable[[bytes], object], close: Callable[[], None]) -> None:
        self.write = write
        self.close = close


def _stream(kind: str, *, sending: bool = False) -> tuple[Any, _Peer]:
    """A stream under test and the raw far end that feeds it (or reads it)."""
    if kind == "socket":
        a, b = socket.socketpair()
        return SocketStream(a), _Peer(b.sendall, b.close)
    read_end, write_end = os.pipe()
    ours, theirs = (write_end, read_end) if sending else (read_end, write_end)
    stream = PipeStream(ours, writable=sending, name="test pipe")
    return stream, _Peer(functools.partial(os.write, theirs), functools.partial(os.close, theirs))


def _receiving(kind: str) -> tuple[Any, _Peer]:
    return _stream(kind)


def _sending(kind: str) -> tuple[Any, _Peer]:
    return _stream(kind, sending=True)


# The one thing that differs: what the messages call the stream.
_THIS = r"this (stream|pipe \(test pipe\))"
KINDS = pytest.mark.parametrize("kind", ["socket", "pipe"])


@KINDS
def test_every_stream_is_a_net_stream(rt: asyncop.Runtime, kind: str) -> None:
    stream, peer = _receiving(kind)
    with contextlib.closing(stream):
        assert isinstance(stream, net.Stream)
        assert isinstance(stream, net.ReceiveStream) and isinstance(stream, net.SendStream)
        peer.close()


@KINDS
def test_framing_errors_are_the_same_for_pipes_and_sockets(rt: asyncop.Runtime, kind: str) -> None:
    async def main() -> list[Any]:
        stream, peer = _receiving(kind)
        async with stream:
            peer.write(b"0123456789")
            with pytest.raises(DelimiterNotFound, match=r"no b'\\n' within max_bytes=4"):
                await stream.receive_until(b"\n", 4)
            first = await stream.receive_exactly(2)  # the bytes stayed buffered
            peer.close()
            with pytest.raises(IncompleteRead, match="after 8 of the 9 bytes") as exactly:
                await stream.receive_exactly(9)
            with pytest.raises(IncompleteRead, match=r"before b'\\n' arrived \(0 bytes"):
                await stream.receive_until(b"\n", 100)
            return [first, exactly.value.partial, await stream.receive_some(None)]

    assert run(rt, main) == [b"01", b"23456789", b""]


@KINDS
def test_closed_busy_and_eof_errors_are_the_same_for_pipes_and_sockets(
    rt: asyncop.Runtime, kind: str
) -> None:
    async def main() -> None:
        stream, peer = _receiving(kind)
        async with asyncop.scope() as s:
            first = s.spawn(stream.receive_some, supervise=True)
            await wait_all_blocked()
            with pytest.raises(asyncop.BusyResourceError, match="already receiving on " + _THIS):
                await stream.receive_some()
            await stream.aclose()  # wakes the parked receiver
        assert isinstance(first.error, asyncop.ClosedResourceError)
        assert re.search(_THIS + " was closed while a task used it", str(first.error))
        with pytest.raises(asyncop.ClosedResourceError, match=_THIS + " was closed; open a new"):
            await stream.receive_some()
        await stream.aclose()  # twice is harmless
        peer.close()

        sender, reader = _sending(kind)
        async with sender:
            await sender.send_eof()
            await sender.send_eof()  # twice is harmless
            with pytest.raises(asyncop.ClosedResourceError, match=_THIS + " already sent end"):
                await sender.send_all(b"late")
        with pytest.raises(asyncop.ClosedResourceError, match=_THIS + " was closed"):
            await sender.send_eof()
        reader.close()

    run(rt, main)


@KINDS
def test_a_vanished_reader_breaks_pipes_and_sockets_alike(rt: asyncop.Runtime, kind: str) -> None:
    async def main() -> BaseException:
        sender, reader = _sending(kind)
        reader.close()
        async with sender:
            with pytest.raises(asyncop.BrokenResourceError, match=" is broken ") as info:
                await sender.send_all(b"x" * (1 << 20))
        return info.value.__cause__  # type: ignore[return-value]

    assert isinstance(run(rt, main), BrokenPipeError | ConnectionResetError)


@KINDS
def test_a_cancelled_receive_keeps_its_bytes_and_a_ready_one_is_a_cheap_checkpoint(
    rt: asyncop.Runtime, kind: str
) -> None:
    async def main() -> list[bytes]:
        stream, peer = _receiving(kind)
        async with stream:
            peer.write(b"half a li")
            with pytest.raises(TimeoutError):
                async with asyncop.scope(timeout=0.05):
                    await stream.receive_until(b"\n", 100)
            peer.write(b"ne\nmore")
            with assert_checkpoints():
                line = await stream.receive_until(b"\n", 100)
            peer.close()
            return [line, *[chunk async for chunk in stream]]

    assert run(rt, main) == [b"half a line", b"more"]
