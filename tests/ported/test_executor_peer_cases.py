"""ProcessExecutor, from the cases of CPython's concurrent.futures process
pool tests: a worker that dies under a job, a job that raises SystemExit, a
chained failure, many small jobs, a large result, and nothing left running
after shutdown.

Deliberate differences from concurrent.futures, which these tests follow:
- a worker process that dies fails only the job it ran, with
  ``BrokenResourceError``; the pool replaces the process and stays usable
  (concurrent.futures breaks the whole pool with ``BrokenProcessPool``);
- a job's ``SystemExit`` or ``KeyboardInterrupt`` leaves a scope ungrouped,
  as a local callback's does (concurrent.futures re-raises it from
  ``result()``).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator

import pytest

import asyncop
from asyncop import OperationState
from asyncop.runtime._executors._remote import RemoteTraceback
from tests.ported import _executor_jobs as jobs
from tests.runtime import _remote_jobs as remote_jobs

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes"),
]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_for(predicate: object, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.01)
    raise AssertionError("condition not met in time")


def worker_pids(executor: asyncop.ProcessExecutor) -> set[int]:
    return set(executor._pool._pool_manager.worker_manager.workers)


def worker_pid(runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor) -> int:
    """The pid of the worker process that runs a job now."""
    op = runtime.spawn(jobs.pid, executor=executor)
    op.wait(30)
    return op.result()


@pytest.fixture(scope="module")
def executor() -> Iterator[asyncop.ProcessExecutor]:
    ex = asyncop.ProcessExecutor(2, kill_grace=0.5)
    try:
        yield ex
    finally:
        pids = worker_pids(ex)
        ex.shutdown()
        assert not any(alive(p) for p in pids)


# -- a worker that dies ------------------------------------------------------------


def test_a_worker_that_exits_fails_its_job_saying_the_exit_code(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    result = runtime.spawn(remote_jobs.die, 3, executor=executor).wait(30)
    assert result.state is OperationState.FAILED
    assert isinstance(result.error, asyncop.BrokenResourceError)
    assert re.fullmatch(
        r"the worker process \d+ running 'die' died with exit code 3; the job did not "
        r"finish; the pool has started another process",
        str(result.error),
    ), str(result.error)


def test_a_worker_killed_by_a_signal_names_the_signal(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    result = runtime.spawn(jobs.kill_self, executor=executor).wait(30)
    assert isinstance(result.error, asyncop.BrokenResourceError)
    assert re.fullmatch(
        r"the worker process \d+ running 'kill_self' was killed by SIGKILL; the job did "
        r"not finish; the pool has started another process",
        str(result.error),
    ), str(result.error)


def test_a_death_fails_only_its_job_and_the_next_jobs_run(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    died = runtime.spawn(jobs.kill_self, executor=executor)
    others = [runtime.spawn(jobs.add, i, i, executor=executor) for i in range(20)]
    assert died.wait(30).state is OperationState.FAILED
    assert [op.wait(30).value for op in others] == [2 * i for i in range(20)]
    after = runtime.spawn(jobs.pid, executor=executor).wait(30)
    assert after.state is OperationState.COMPLETED and alive(after.value or 0)


def test_a_death_in_a_scope_fails_the_scope_as_any_child_failure_does(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    with pytest.raises(ExceptionGroup) as info, runtime.scope() as root:
        root.spawn(jobs.kill_self, executor=executor)
        sibling = root.spawn(remote_jobs.poll_token, 30, executor=executor)
    assert [type(e) for e in info.value.exceptions] == [asyncop.BrokenResourceError]
    assert sibling.state is OperationState.CANCELLED


# -- failures ----------------------------------------------------------------------


def test_a_chained_failure_keeps_both_tracebacks(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    error = runtime.spawn(jobs.raise_chained, executor=executor).wait(30).error
    assert isinstance(error, ValueError) and str(error) == "could not look it up"
    assert isinstance(error.__cause__, RemoteTraceback)
    text = str(error.__cause__)
    assert "KeyError: 'missing'" in text and "direct cause" in text
    assert "in raise_chained" in text
    assert any(note.startswith("raised in worker process") for note in error.__notes__)


@pytest.mark.parametrize("code", [0, 3])
def test_system_exit_in_a_job_leaves_a_scope_ungrouped_as_a_local_one_does(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor, code: int
) -> None:
    with pytest.raises(SystemExit) as info, runtime.scope() as root:
        root.spawn(jobs.exit_with, code, executor=executor)
    assert info.value.code == code
    # The worker caught it: the process lives on and takes the next job.
    assert runtime.spawn(jobs.add, 1, 2, executor=executor).wait(30).value == 3


# -- volume ------------------------------------------------------------------------


def test_many_small_jobs_all_come_back_in_their_own_operations(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    with runtime.scope(timeout=60) as root:
        ops = [root.spawn(jobs.add, i, 1, executor=executor) for i in range(1000)]
    assert [op.result() for op in ops] == list(range(1, 1001))


def test_a_large_result_comes_back_whole(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    size = 32 * 1024 * 1024
    value = runtime.spawn(jobs.blob, size, executor=executor).wait(30).value
    assert value == bytes(range(256)) * (size // 256)


# -- nothing left behind -----------------------------------------------------------


def test_shutdown_with_jobs_queued_leaves_no_process_and_no_thread(
    runtime: asyncop.Runtime,
) -> None:
    before = set(threading.enumerate())
    ex = asyncop.ProcessExecutor(1, kill_grace=0.5)
    running = runtime.spawn(remote_jobs.poll_token, 60, executor=ex)
    queued = [runtime.spawn(jobs.add, i, i, executor=ex) for i in range(50)]
    wait_for(lambda: running.state is OperationState.RUNNING and worker_pids(ex))
    pids = worker_pids(ex)
    ex.shutdown()
    assert running.wait(10).state is OperationState.CANCELLED
    assert {op.wait(10).state for op in queued} <= {
        OperationState.CANCELLED,
        OperationState.COMPLETED,
    }
    assert not any(alive(p) for p in pids)
    wait_for(lambda: set(threading.enumerate()) <= before, timeout=10)
    ex.shutdown()  # a second shutdown is harmless


def test_a_worker_killed_from_outside_while_idle_is_replaced(
    runtime: asyncop.Runtime,
) -> None:
    with asyncop.ProcessExecutor(1) as ex:
        first = worker_pid(runtime, ex)
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: not alive(first))
        # pebble gives up on its whole pool when a worker dies while it runs
        # no job: the executor replaces the pool and resends the jobs that
        # never started.
        results = [runtime.spawn(jobs.pid, executor=ex).wait(30) for _ in range(3)]
        assert [r.state for r in results] == [OperationState.COMPLETED] * 3
        assert first not in {r.value for r in results}
        assert alive(results[-1].value or 0)
    assert not alive(results[-1].value or 0)


def test_jobs_sent_while_the_pool_breaks_all_run(runtime: asyncop.Runtime) -> None:
    before = set(threading.enumerate())
    with asyncop.ProcessExecutor(1) as ex:
        first = worker_pid(runtime, ex)
        os.kill(first, signal.SIGKILL)
        ops = [runtime.spawn(jobs.add, i, 0, executor=ex) for i in range(300)]
        # The jobs handed to the broken pool never started: they are sent to
        # the new one, and none is lost or left waiting.
        assert [op.wait(30).value for op in ops] == list(range(300))
        assert runtime.spawn(jobs.add, 1, 1, executor=ex).wait(30).value == 2
        pids = worker_pids(ex)
    assert not any(alive(p) for p in pids | {first})
    wait_for(lambda: set(threading.enumerate()) <= before, timeout=10)
