"""ProcessExecutor: remote work as an ordinary node of the tree.

Values, failures with remote tracebacks, pending and running cancels, remote
tokens, ignored tokens killed after the grace, deadlines, a remote subtree,
shutdown with work in flight, and no process left behind.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop import OperationState
from asyncop.runtime._executors._remote import RemoteTraceback
from asyncop.testing import wait_all_blocked
from tests.runtime import _remote_jobs as jobs
from tests.runtime._remote_checks import (
    CANNOT_CROSS_IDS,
    assert_fails_saying,
    cancel_once_started,
)

pytestmark = pytest.mark.timeout(60)

ROOT = str(Path(__file__).resolve().parents[2])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it has exited, which is what counts.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        # Reaped between the two checks.
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


@pytest.fixture(scope="module")
def executor() -> Iterator[asyncop.ProcessExecutor]:
    ex = asyncop.ProcessExecutor(2, kill_grace=0.5)
    try:
        yield ex
    finally:
        pids = worker_pids(ex)
        ex.shutdown()
        assert not any(alive(p) for p in pids)


# -- values and failures --------------------------------------------------------


def test_value_comes_back_from_a_worker_process(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    ops = [runtime.spawn(jobs.square, i, executor=executor) for i in range(6)]
    assert [op.wait(30).value for op in ops] == [i * i for i in range(6)]
    assert all(op.state is OperationState.COMPLETED for op in ops)
    assert runtime.spawn(jobs.pid, executor=executor).wait(30).value != os.getpid()


def test_child_of_an_operation_and_of_a_scope_runs_remotely(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    with runtime.scope() as root:
        # A job that lasts: a finished child is unlinked from its parent.
        child = root.spawn(jobs.ignore_token, 0.5, executor=executor, name="slow")
        assert child.parent is root and child.name == "slow"
        square = root.spawn(jobs.square, 7, executor=executor)
    assert child.result() == "ignored" and square.result() == 49

    async def main() -> int:
        op = asyncop.current_operation()
        assert op is not None
        return await op.spawn(jobs.square, 5, executor=executor)  # type: ignore[no-any-return]

    assert runtime.run(main) == 25


def test_values_of_every_kind_come_back_as_they_were(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    values = [None, True, 7, 2**100, 1.5, 2j, "text", b"\x00bytes", [1, "a"], {"k": (1, 2)}]
    values.append(OperationState.CANCELLED)  # an int-like enum: pickled by reference
    ops = [runtime.spawn(jobs.echo, value, executor=executor) for value in values]
    back = [op.wait(30).value for op in ops]
    assert back == values
    assert [type(value) for value in back] == [type(value) for value in values]


def test_each_job_gets_its_own_copy_of_a_callable_object(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    # Plain functions are looked up once per process; an object with state
    # is unpickled afresh for every job, as the caller pickled it.
    tally = jobs.Tally()
    ops = [runtime.spawn(tally, executor=executor) for _ in range(6)]
    assert [op.wait(30).value for op in ops] == [1] * 6
    squares = [runtime.spawn(jobs.square, i, executor=executor) for i in (2, 3)]
    assert [op.wait(30).value for op in squares] == [4, 9]


def test_failure_keeps_the_remote_traceback(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    op = runtime.spawn(jobs.fail, "bad input", executor=executor)
    result = op.wait(30)
    assert result.state is OperationState.FAILED
    error = result.error
    assert isinstance(error, ValueError) and str(error) == "bad input"
    assert isinstance(error.__cause__, RemoteTraceback)
    assert "in fail" in error.__cause__.text and "_remote_jobs.py" in error.__cause__.text
    assert any("process" in note for note in error.__notes__)


def test_failure_joins_the_parent_group_and_cancels_siblings(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    with pytest.raises(ExceptionGroup) as info, runtime.scope() as root:
        sibling = root.spawn(jobs.poll_token, 30, executor=executor)
        root.spawn(jobs.fail, "child failed", executor=executor)
    (error,) = info.value.exceptions
    assert isinstance(error, ValueError) and str(error) == "child failed"
    assert isinstance(error.__cause__, RemoteTraceback)
    assert sibling.state is OperationState.CANCELLED


def test_finished_remote_operations_leave_no_reference_cycle(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    gc.collect()
    gc.disable()
    try:
        ops = [runtime.spawn(jobs.square, i, executor=executor) for i in range(5)]
        assert [op.wait(30).value for op in ops] == [0, 1, 4, 9, 16]
        ref = weakref.ref(ops[0])
        del ops
        wait_for(lambda: not executor._jobs)
        time.sleep(0.1)  # the pool's thread returns from the last job's callback
        # Freed by reference counting alone: the collector finds nothing.
        assert ref() is None
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        cyclic = [o for o in gc.garbage if isinstance(o, asyncop.AsyncOperation)]
        assert cyclic == [], "a finished operation or its job is in a reference cycle"
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


# -- pickling ---------------------------------------------------------------------------


def test_unpicklable_function_and_argument_raise_before_sending(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    with pytest.raises(TypeError, match=r"function '.*<lambda>' cannot be pickled"):
        runtime.spawn(lambda: 1, executor=executor)
    with pytest.raises(TypeError, match=r"argument 1 of 'square' \(lock\) cannot be pickled"):
        runtime.spawn(jobs.square, 1, threading.Lock(), executor=executor)
    assert executor._jobs == set()
    assert "no live operations" in runtime.dump()


def test_unpicklable_result_is_a_type_error_naming_it(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    error = runtime.spawn(jobs.make_generator, executor=executor).wait(30).error
    assert isinstance(error, TypeError)
    assert "result of 'make_generator' (a generator) cannot be pickled" in str(error)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", jobs.CANNOT_CROSS, ids=CANNOT_CROSS_IDS)
def test_an_outcome_that_cannot_cross_fails_the_operation_saying_why(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor, case: tuple[Any, ...]
) -> None:
    # A value or an exception that does not pickle in the worker, or cannot
    # be rebuilt in the client, or a call the worker cannot rebuild: the
    # operation ends FAILED, never left running by an error in pebble's
    # callback.
    assert_fails_saying(runtime, executor, *case)
    # The executor is whole: the next job runs.
    assert runtime.spawn(jobs.square, 3, executor=executor).wait(30).value == 9


# -- cancellation ------------------------------------------------------------------------


def test_cancel_of_a_pending_job_drops_it(runtime: asyncop.Runtime, tmp_path: Path) -> None:
    with asyncop.ProcessExecutor(1, kill_grace=5) as ex:
        busy = runtime.spawn(jobs.poll_token, 30, str(tmp_path / "busy"), executor=ex)
        wait_for(lambda: (tmp_path / "busy.started").exists())
        marker = tmp_path / "never"
        pending = runtime.spawn(jobs.touch, str(marker), executor=ex)
        time.sleep(0.1)
        pending.cancel()
        assert pending.wait(5).state is OperationState.CANCELLED
        busy.cancel()
        assert busy.wait(10).state is OperationState.CANCELLED
        # The one worker is free again: had the dropped job run, it would be now.
        assert runtime.spawn(jobs.square, 2, executor=ex).wait(30).value == 4
    assert not marker.exists()


def test_jobs_beyond_the_slots_wait_their_turn_and_a_cancel_drops_them(
    runtime: asyncop.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asyncop.runtime._executors import _executors

    monkeypatch.setattr(_executors, "SLOTS", 2)
    marker = tmp_path / "never"
    with asyncop.ProcessExecutor(1, kill_grace=5) as ex:
        busy = runtime.spawn(jobs.poll_token, 30, str(tmp_path / "busy"), executor=ex)
        wait_for(lambda: (tmp_path / "busy.started").exists())
        queued = [runtime.spawn(jobs.square, i, executor=ex) for i in range(4)]
        dropped = runtime.spawn(jobs.touch, str(marker), executor=ex)
        # One slot holds the busy job, the other the first queued one.
        assert len(ex._waiting) == 4
        dropped.cancel()
        assert dropped.wait(5).state is OperationState.CANCELLED
        busy.cancel()
        assert [op.wait(30).value for op in queued] == [0, 1, 4, 9]
    # A job's slot is freed just after its operation ends, by the thread that
    # ended it; the executor's exit waits for that, a wait() does not.
    assert sorted(ex._free) == [0, 1]
    assert not marker.exists()


def test_a_cancel_racing_the_spawns_never_runs_a_job_it_reports_unstarted(
    runtime: asyncop.Runtime, tmp_path: Path
) -> None:
    # A cancel that lands while spawn() sends the job must either take the
    # job back before a worker starts it, or let it run and keep its value.
    with asyncop.ProcessExecutor(2, kill_grace=30) as ex:
        ops: list[asyncop.AsyncOperation[str]] = []
        for round_ in range(15):
            with runtime.scope() as root:
                canceller = threading.Timer(0.002 * (round_ % 4), root.cancel)
                canceller.start()
                for i in range(30):
                    marker = tmp_path / f"{round_}-{i}"
                    ops.append(root.spawn(jobs.touch, str(marker), executor=ex, name=marker.name))
                canceller.join()
        assert all(op.wait(30).state is not OperationState.FAILED for op in ops)
        wait_for(lambda: not ex._jobs)
    ran = {path.name for path in tmp_path.iterdir()}
    for op in ops:
        if op.state is OperationState.COMPLETED:
            assert op.name in ran
        else:
            assert op.name not in ran, f"{op.name} ran although its operation was cancelled"
    assert any(op.state is OperationState.CANCELLED for op in ops)


def test_a_cancel_landing_while_the_job_is_sent_takes_it_back(
    runtime: asyncop.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cancel comes (from another thread, in real life) after spawn()
    # started the operation and before the job has its slot.
    from asyncop.runtime._executors import _executors

    send = _executors._ProcessJob._send

    def cancelled_first(job: _executors._ProcessJob) -> None:
        assert job.op is not None
        job.op.cancel("too late")
        send(job)

    monkeypatch.setattr(_executors._ProcessJob, "_send", cancelled_first)
    marker = tmp_path / "never"
    with asyncop.ProcessExecutor(1) as ex:
        op = runtime.spawn(jobs.touch, str(marker), executor=ex)
        assert op.wait(5).state is OperationState.CANCELLED
        assert ex._jobs == set() and len(ex._free) == _executors.SLOTS
        monkeypatch.setattr(_executors._ProcessJob, "_send", send)
        assert runtime.spawn(jobs.square, 3, executor=ex).wait(30).value == 9
    assert not marker.exists()


def test_cancel_before_the_first_step_never_sends(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor, tmp_path: Path
) -> None:
    with runtime.scope() as root:
        root.cancel()
        op = root.spawn(jobs.touch, str(tmp_path / "x"), executor=executor)
    assert op.state is OperationState.CANCELLED
    assert executor._jobs == set()
    assert not (tmp_path / "x").exists()


def test_running_job_sees_its_token_promptly(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    op = runtime.spawn(jobs.poll_token, 30, str(seen), executor=executor)
    wait_for(lambda: Path(str(seen) + ".started").exists())
    cancelled_at = time.time()
    op.cancel("stop now")
    assert op.wait(10).state is OperationState.CANCELLED
    assert op.cancel_reason == "stop now"
    # 50 ms when the machine is quiet; the bound is generous for a loaded one.
    assert float(seen.read_text()) - cancelled_at < 0.5


def test_job_that_stops_as_the_kill_is_ordered_ends_promptly(runtime: asyncop.Runtime) -> None:
    # With no grace, the kill is ordered at once, while the job stops by
    # itself through its token: pebble then kills nothing, and the operation
    # must not wait for a process that stays.
    with asyncop.ProcessExecutor(1, kill_grace=0) as ex:
        for _ in range(3):
            op = runtime.spawn(jobs.poll_token, 30, executor=ex)
            time.sleep(0.3)
            start = time.monotonic()
            op.cancel()
            assert op.wait(10).state is OperationState.CANCELLED
            assert time.monotonic() - start < 3


def test_token_wait_returns_true_on_cancel_and_false_on_timeout(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    assert runtime.spawn(jobs.wait_token, 0.05, executor=executor).wait(30).value is False
    op = runtime.spawn(jobs.wait_token, 30, executor=executor)
    time.sleep(0.3)
    start = time.monotonic()
    op.cancel()
    # The job returns True after the cancel: a value it produced is kept.
    result = op.wait(10)
    assert time.monotonic() - start < 5
    assert result.state is OperationState.COMPLETED and result.value is True


def test_remote_token_outside_remote_work_raises(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    with pytest.raises(RuntimeError, match="outside remote work"):
        asyncop.remote_token()
    with pytest.raises(RuntimeError, match="outside remote work"):
        runtime.run(asyncop.remote_token)


def test_ignored_token_kills_and_replaces_only_that_process(
    runtime: asyncop.Runtime, tmp_path: Path
) -> None:
    with asyncop.ProcessExecutor(2, kill_grace=0.3) as ex:
        neighbour = runtime.spawn(jobs.ignore_token, 1.5, executor=ex)
        pidfile = tmp_path / "pid"
        stubborn = runtime.spawn(jobs.ignore_token, 60, str(pidfile), executor=ex)
        wait_for(pidfile.exists)
        pid = int(pidfile.read_text())
        start = time.monotonic()
        stubborn.cancel()
        assert stubborn.wait(20).state is OperationState.CANCELLED
        assert time.monotonic() - start >= 0.3
        assert not alive(pid)
        # The other job was left alone, and a replacement process takes work.
        assert neighbour.wait(30).value == "ignored"
        assert runtime.spawn(jobs.square, 3, executor=ex).wait(30).value == 9
        # The pool's manager thread replaces the killed process in its own time.
        wait_for(lambda: len(worker_pids(ex)) == 2 and pid not in worker_pids(ex))


def test_abandon_ends_at_once_and_still_kills_after_the_grace(
    runtime: asyncop.Runtime, tmp_path: Path
) -> None:
    with asyncop.ProcessExecutor(1, kill_grace=0.5) as ex:
        pidfile = tmp_path / "pid"
        op = runtime.spawn(jobs.ignore_token, 60, str(pidfile), executor=ex, abandon=True)
        wait_for(pidfile.exists)
        pid = int(pidfile.read_text())
        start = time.monotonic()
        op.cancel()
        assert op.wait(5).state is OperationState.CANCELLED
        assert time.monotonic() - start < 0.4
        wait_for(lambda: not alive(pid))


def test_deadline_on_a_remote_operation_cancels_it(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    op = runtime.spawn(jobs.poll_token, 30, executor=executor)
    op.deadline = runtime.now() + 0.3
    assert op.wait(10).state is OperationState.CANCELLED
    assert op.expired


def test_autojump_waits_for_remote_work_in_flight(
    vruntime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    # Nothing local runs while the job computes: the virtual clock must not
    # jump to the deadline meanwhile.
    op = vruntime.spawn(jobs.ignore_token, 0.3, executor=executor)
    op.deadline = vruntime.now() + 100
    assert op.wait(30).value == "ignored"
    assert vruntime.now() < 100


def test_autojump_resumes_once_remote_work_has_ended(
    vruntime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    # The job ends while every task is parked on the virtual clock: the
    # clock must then jump, with nothing local left to wake a worker.
    async def main() -> int:
        op = asyncop.current_operation()
        assert op is not None
        child = op.spawn(jobs.ignore_token, 0.3, executor=executor)
        await asyncop.sleep(50)
        assert child.done
        return await child  # type: ignore[no-any-return]

    assert vruntime.run(main) == "ignored"
    assert vruntime.now() >= 50


def test_wait_all_blocked_returns_once_remote_work_has_ended(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    async def main() -> bool:
        op = asyncop.current_operation()
        assert op is not None
        child = op.spawn(jobs.ignore_token, 0.3, executor=executor)
        await wait_all_blocked()
        return child.done

    assert runtime.run(main)


def test_scope_timeout_above_remote_work_raises_timeout_error(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor
) -> None:
    start = time.monotonic()
    with pytest.raises(TimeoutError), runtime.scope(timeout=0.3) as root:
        child = root.spawn(jobs.poll_token, 30, executor=executor)
    assert child.state is OperationState.CANCELLED
    assert time.monotonic() - start < 10


def test_cancel_reaches_a_runtime_inside_the_remote_job(
    runtime: asyncop.Runtime, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    # A long grace: the job must stop by itself, through its own runtime.
    with asyncop.ProcessExecutor(1, kill_grace=60) as ex:
        op = runtime.spawn(jobs.remote_tree, str(log), executor=ex)
        wait_for(lambda: Path(str(log) + ".started").exists())
        time.sleep(0.2)
        start = time.monotonic()
        op.cancel()
        assert op.wait(20).state is OperationState.CANCELLED
        assert time.monotonic() - start < 10
    lines = log.read_text().splitlines()
    assert lines.count("leaf ended") == 3 and lines[-1] == "root ended"


def test_sync_scope_of_a_remote_runtime_unwinds_as_a_local_one(
    runtime: asyncop.Runtime, tmp_path: Path
) -> None:
    # The job's scope is a root of the job's runtime: the remote cancel
    # reaches it from outside, as a parent's cancel reaches a local scope,
    # so its exit raises Cancelled and the code after it never runs.
    path = str(tmp_path / "scope")
    with asyncop.ProcessExecutor(1, kill_grace=60) as ex:
        result = cancel_once_started(runtime, ex, jobs.remote_scope, path)
    assert result.state is OperationState.CANCELLED, result

    # The same code on a local operation, in its runtime, ends the same way.
    async def sleeper() -> None:
        await asyncop.sleep(30)

    def local_scope(path: str) -> str:
        with runtime.scope() as scope:
            scope.spawn(sleeper)
            Path(path + ".started").write_text("started")
        return "built after the interrupted scope"

    result = cancel_once_started(runtime, None, local_scope, path + "-local")
    assert result.state is OperationState.CANCELLED


def test_remote_cancel_does_not_enter_a_shielded_scope_of_the_job(
    runtime: asyncop.Runtime, tmp_path: Path
) -> None:
    path = str(tmp_path / "shielded")
    with asyncop.ProcessExecutor(1, kill_grace=60) as ex:
        result = cancel_once_started(runtime, ex, jobs.remote_shielded_scope, path)
    assert result.state is OperationState.CANCELLED
    assert Path(path).read_text() == "leaf finished"


# -- dump and misuse ----------------------------------------------------------------------


def test_dump_shows_where_remote_work_runs(
    runtime: asyncop.Runtime, executor: asyncop.ProcessExecutor, tmp_path: Path
) -> None:
    path = tmp_path / "p"
    op = runtime.spawn(jobs.poll_token, 30, str(path), executor=executor)
    wait_for(lambda: Path(str(path) + ".started").exists())
    pid = Path(str(path) + ".started").read_text()
    text = runtime.dump()
    assert "poll_token [RUNNING]" in text and f"in worker process {pid}" in text
    (row,) = runtime.snapshot()["operations"]
    assert row["kind"] == "process" and row["waiting_on"].endswith(f"in worker process {pid}")
    op.cancel()
    op.wait(10)


def test_misuse_raises_at_once(runtime: asyncop.Runtime) -> None:
    with pytest.raises(TypeError, match=r"ProcessExecutor or asyncop\.dask\.DaskExecutor"):
        runtime.spawn(jobs.square, 1, executor=object())
    with pytest.raises(TypeError, match="abandon=True"):
        runtime.spawn(jobs.square, 1, abandon=True)
    with pytest.raises(ValueError, match="at least one process"):
        asyncop.ProcessExecutor(0)
    with pytest.raises(TypeError, match="needs an int"):
        asyncop.ProcessExecutor(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        asyncop.ProcessExecutor(1, kill_grace=float("nan"))
    with pytest.raises(ValueError, match=r"kill_grace=\.\.\.\) got -1, a negative number"):
        asyncop.ProcessExecutor(1, kill_grace=-1)
    ex = asyncop.ProcessExecutor(1)

    async def coro() -> None:
        pass

    with pytest.raises(TypeError, match="executors run plain functions"):
        runtime.spawn(coro, executor=ex)
    ex.shutdown()
    ex.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        runtime.spawn(jobs.square, 1, executor=ex)


def test_repr_is_safe_in_every_state() -> None:
    half_made = asyncop.ProcessExecutor.__new__(asyncop.ProcessExecutor)
    assert repr(half_made).startswith("<ProcessExecutor")
    ex = asyncop.ProcessExecutor(1)
    assert repr(ex) == "<ProcessExecutor open max_workers=1>"
    ex.shutdown()
    assert repr(ex) == "<ProcessExecutor shut down max_workers=1>"


def test_spawn_on_a_shut_down_runtime_raises_and_sends_nothing(
    executor: asyncop.ProcessExecutor, tmp_path: Path
) -> None:
    rt = asyncop.Runtime(1)
    rt.shutdown()
    with pytest.raises(RuntimeError, match="shut down and takes no new operations"):
        rt.spawn(jobs.touch, str(tmp_path / "never"), executor=executor)
    assert executor._jobs == set()
    assert rt.dump().splitlines()[0].endswith("no live operations")
    time.sleep(0.2)
    assert not (tmp_path / "never").exists()


# -- shutdown ------------------------------------------------------------------------------


def test_leaving_the_runtime_cancels_remote_work(tmp_path: Path) -> None:
    with asyncop.ProcessExecutor(2, kill_grace=0.5) as ex:
        start = time.monotonic()
        with asyncop.Runtime(2) as rt:
            polite = rt.spawn(jobs.poll_token, 60, executor=ex)
            stubborn = rt.spawn(jobs.ignore_token, 60, str(tmp_path / "pid"), executor=ex)
            wait_for((tmp_path / "pid").exists)
        assert polite.state is OperationState.CANCELLED
        assert stubborn.state is OperationState.CANCELLED
        assert time.monotonic() - start < 15
        assert not alive(int((tmp_path / "pid").read_text()))


def test_executor_shutdown_with_work_in_flight_leaves_no_process(
    runtime: asyncop.Runtime, tmp_path: Path
) -> None:
    ex = asyncop.ProcessExecutor(2, kill_grace=0.3)
    polite = runtime.spawn(jobs.poll_token, 60, str(tmp_path / "polite"), executor=ex)
    stubborn = runtime.spawn(jobs.ignore_token, 60, str(tmp_path / "pid"), executor=ex)
    wait_for(lambda: (tmp_path / "pid").exists() and (tmp_path / "polite.started").exists())
    queued = runtime.spawn(jobs.touch, str(tmp_path / "never"), executor=ex)
    time.sleep(0.1)
    pids = worker_pids(ex)
    ex.shutdown()
    assert polite.wait(10).state is OperationState.CANCELLED
    assert stubborn.wait(10).state is OperationState.CANCELLED
    assert queued.wait(10).state is OperationState.CANCELLED
    assert "shut down" in str(polite.cancel_reason)
    assert not any(alive(p) for p in pids)
    assert not (tmp_path / "never").exists()


@pytest.mark.timeout(60)
def test_every_job_a_shutdown_ends_says_so_even_when_the_job_stops_first(
    runtime: asyncop.Runtime, tmp_path: Path
) -> None:
    # Running jobs see the shutdown through their token at once, and the
    # workers drop the queued ones: either may end before shutdown() gets to
    # its operation. Each operation must still tell why it was cancelled.
    ex = asyncop.ProcessExecutor(2, kill_grace=5)
    paths = [str(tmp_path / f"spin{i}") for i in range(2)]
    running = [runtime.spawn(jobs.spin_token, 60, path, executor=ex) for path in paths]
    wait_for(lambda: all(Path(path + ".started").exists() for path in paths))
    queued = [runtime.spawn(jobs.square, i, executor=ex) for i in range(300)]
    ex.shutdown()
    ops = running + queued
    assert all(op.wait(10).state is OperationState.CANCELLED for op in ops)
    unexplained = [op.name for op in ops if "shut down" not in str(op.cancel_reason)]
    assert unexplained == []


def test_interpreter_exit_does_not_hang_on_a_stuck_job(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {ROOT!r})
        import asyncop
        from tests.runtime import _remote_jobs as jobs
        if __name__ == "__main__":
            ex = asyncop.ProcessExecutor(1, kill_grace=30)
            rt = asyncop.Runtime(1)
            rt.spawn(jobs.ignore_token, 600, {str(tmp_path / "pid")!r}, executor=ex)
            while True:
                try:
                    open({str(tmp_path / "pid")!r}).read()
                    break
                except OSError:
                    time.sleep(0.01)
            print("leaving", flush=True)
        """
    )
    (tmp_path / "main.py").write_text(script)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(tmp_path / "main.py")], capture_output=True, text=True, timeout=40
    )
    assert "leaving" in done.stdout, done.stderr
    assert time.monotonic() - start < 30
    wait_for(lambda: not alive(int((tmp_path / "pid").read_text())), timeout=10)
