"""Child processes and blocking calls, from the cases of trio's subprocess
and thread tests, mapped to asyncop.process and spawn_blocking.

Deliberate differences from trio, which these tests follow:
- a blocking-call thread runs no operation, so ``current_runtime()`` there
  raises; code in it reaches the runtime through the runtime object it was
  given (``runtime.run`` / ``runtime.spawn(...).wait()``), as trio's
  ``from_thread`` reaches it through a token;
- the thread sees a cancel of the task that called it through that task's
  token, passed in (trio: ``from_thread.check_cancelled()``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

import asyncop
from asyncop import OperationState
from asyncop.process import STDOUT, open_process, run_process
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes"),
]

PY = sys.executable


async def in_a_thread(fn: object, *args: object) -> object:
    return await asyncop.spawn_blocking(fn, *args)  # type: ignore[arg-type]


def python(code: str) -> list[str]:
    return [PY, "-c", code]


# -- processes ---------------------------------------------------------------------


@pytest.mark.asyncop
async def test_pipes_both_ways_and_the_exit_status() -> None:
    code = (
        "import sys; sys.stdout.write(sys.stdin.read().upper()); "
        "sys.stderr.write('note'); sys.exit(3)"
    )
    process = open_process(python(code))
    assert process.returncode is None and process.pid > 0
    async with process:
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        await process.stdin.send_all(b"abc")
        await process.stdin.aclose()
        assert await process.stdout.receive_exactly(3) == b"ABC"
        assert await process.stderr.receive_exactly(4) == b"note"
    assert process.returncode == 3
    assert process.poll() == 3


@pytest.mark.asyncop
async def test_several_tasks_wait_for_one_process() -> None:
    process = open_process(
        python("import time; time.sleep(0.2)"), stdin=None, stdout=None, stderr=None
    )
    statuses: list[int] = []

    async def wait_for_it() -> None:
        statuses.append(await process.wait())

    async with asyncop.scope() as s:
        for _ in range(3):
            s.spawn(wait_for_it)
    assert statuses == [0, 0, 0]


@pytest.mark.asyncop
@pytest.mark.parametrize(
    ("how", "status"),
    [("terminate", -signal.SIGTERM), ("kill", -signal.SIGKILL), ("sigint", -signal.SIGINT)],
)
async def test_signals_end_a_process(how: str, status: int) -> None:
    process = open_process(
        python("import time; time.sleep(100)"), stdin=None, stdout=None, stderr=None
    )
    if how == "sigint":
        process.send_signal(signal.SIGINT)
    else:
        getattr(process, how)()
    assert await process.wait() == status
    process.kill()  # once reaped, nothing happens
    assert process.returncode == status


@pytest.mark.asyncop
async def test_await_open_process_as_trio_writes_it() -> None:
    process = await open_process(python("print(1)"), stdin=None, stderr=None)
    assert process.stdout is not None
    output = b""
    while chunk := await process.stdout.receive_some():
        output += chunk
    assert output == b"1\n"
    assert await process.wait() == 0
    await process.aclose()


@pytest.mark.asyncop
async def test_run_process_check_output_and_stderr() -> None:
    failing = python("import sys; print('out'); print('err', file=sys.stderr); sys.exit(2)")
    with pytest.raises(subprocess.CalledProcessError) as info:
        await run_process(failing)
    assert (info.value.returncode, info.value.output, info.value.stderr) == (2, b"out\n", b"err\n")
    unchecked = await run_process(failing, check=False)
    assert unchecked.returncode == 2
    merged = await run_process(
        python("import sys; print('x', flush=True); print('y', file=sys.stderr)"), stderr=STDOUT
    )
    assert merged.stdout == b"x\ny\n" and merged.stderr is None


@pytest.mark.asyncop
async def test_input_the_process_never_reads_is_no_error() -> None:
    result = await run_process(python("import os; os.close(0)"), input=b"x" * 5_000_000)
    assert result.returncode == 0


@pytest.mark.asyncop
async def test_a_cancelled_run_process_stops_and_reaps_the_process() -> None:
    started = time.monotonic()
    async with asyncop.move_on_after(0.2) as cs:
        await run_process(python("import time; time.sleep(100)"))
    assert cs.cancelled_caught
    assert time.monotonic() - started < 20


@pytest.mark.asyncop
async def test_a_process_ignoring_sigterm_is_killed_after_the_grace() -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(100)"
    )
    async with asyncop.scope() as s:
        process = await s.start(run_process, python(code))
        assert process.returncode is None
        s.cancel()
    assert process.returncode == -signal.SIGKILL or process.returncode == -signal.SIGTERM


@pytest.mark.asyncop
async def test_start_gives_the_running_process() -> None:
    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as s:
            process = await s.start(run_process, python("import time; time.sleep(100)"))
            assert process.returncode is None
            process.terminate()
    (error,) = info.value.exceptions
    assert isinstance(error, subprocess.CalledProcessError)
    assert error.returncode == -signal.SIGTERM


# -- blocking calls ------------------------------------------------------------------


@pytest.mark.asyncop
async def test_a_limiter_caps_the_calls_running_at_once() -> None:
    limiter = asyncop.CapacityLimiter(2)
    running = 0
    peak = 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1

    async def one() -> None:
        await asyncop.spawn_blocking(work, limiter=limiter)

    async with asyncop.scope() as s:
        for _ in range(6):
            s.spawn(one)
    assert peak == 2
    assert limiter.statistics().borrowed_tokens == 0


@pytest.mark.asyncop
async def test_cancel_while_waiting_for_a_token_never_runs_the_call() -> None:
    limiter = asyncop.CapacityLimiter(1)
    gate = threading.Event()
    ran: list[int] = []

    async def holder() -> None:
        await asyncop.spawn_blocking(gate.wait, 10, limiter=limiter)

    async def queued() -> None:
        await asyncop.spawn_blocking(ran.append, 1, limiter=limiter)

    async with asyncop.scope() as s:
        s.spawn(holder)
        while limiter.statistics().borrowed_tokens == 0:
            await asyncop.sleep(0.01)
        waiter = s.spawn(queued)
        while limiter.statistics().tasks_waiting == 0:
            await asyncop.sleep(0.01)
        waiter.cancel()
        await asyncop.sleep(0.05)
        assert waiter.state is OperationState.CANCELLED
        gate.set()
    assert ran == []
    assert limiter.statistics().tasks_waiting == 0


@pytest.mark.asyncop
async def test_the_thread_calls_back_into_the_runtime() -> None:
    runtime = asyncop.current_runtime()

    async def double(x: int) -> int:
        await asyncop.checkpoint()
        return 2 * x

    def in_thread() -> tuple[int, int]:
        with pytest.raises(RuntimeError):
            asyncop.current_runtime()
        assert asyncop.current_operation() is None
        return runtime.run(double, 21), runtime.spawn(double, 5).wait().value

    assert await asyncop.spawn_blocking(in_thread) == (42, 10)


@pytest.mark.asyncop
async def test_the_thread_hands_values_to_tasks() -> None:
    event = asyncop.Event()
    channel: asyncop.Channel[str] = asyncop.Channel(0)

    def in_thread() -> str:
        event.set()
        channel.send("from the thread")
        return "done"

    async with asyncop.scope() as s:
        call = s.spawn(in_a_thread, in_thread)
        await event.wait_async()
        assert await channel.recv_async() == "from the thread"
    assert call.result() == "done"


@pytest.mark.asyncop
async def test_the_thread_sees_the_callers_cancel_through_its_token() -> None:
    started = threading.Event()
    token: asyncop.CancelToken | None = None

    def polite() -> str:
        started.set()
        while token is not None and not token.cancelled:
            time.sleep(0.005)
        return "stopped"

    async with asyncop.move_on_after(30) as cs:
        me = asyncop.current_operation()
        assert me is not None
        token = me.token
        call = me.spawn(in_a_thread, polite)
        await asyncop.spawn_blocking(started.wait, 10)
        cs.cancel()
    assert call.state is OperationState.COMPLETED
    assert call.result() == "stopped"


@pytest.mark.asyncop
async def test_an_error_in_the_thread_keeps_its_traceback() -> None:
    def fails_in_thread() -> None:
        raise ValueError("in the thread")

    with pytest.raises(ValueError) as info:
        await asyncop.spawn_blocking(fails_in_thread)
    assert any(entry.name == "fails_in_thread" for entry in info.traceback)


def test_the_virtual_clock_waits_for_a_blocking_call() -> None:
    async def nap() -> None:
        await asyncop.sleep(100)

    async def main() -> tuple[float, float]:
        async with asyncop.scope() as s:
            s.spawn(nap)
            await asyncop.spawn_blocking(time.sleep, 0.05)
            during = asyncop.current_time()
        return during, asyncop.current_time()

    with asyncop.Runtime(2, clock=VirtualClock(autojump=True)) as rt:
        assert rt.run(main) == (0, 100)


@pytest.mark.asyncop
async def test_wait_all_blocked_can_ignore_thread_calls() -> None:
    gate = threading.Event()

    async def waits_on_a_thread() -> None:
        await asyncop.spawn_blocking(gate.wait, 10)

    async with asyncop.scope() as s:
        s.spawn(waits_on_a_thread)
        await asyncop.sleep(0)
        await wait_all_blocked(threads=False)
        assert not gate.is_set()
        gate.set()
