"""DaskExecutor: remote work on a local Dask cluster as a node of the tree.

One two-process cluster serves the whole module, so the module stays well
under a minute.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop import OperationState
from asyncop.runtime._executors._remote import RemoteTraceback
from tests.runtime import _remote_jobs as jobs
from tests.runtime._remote_checks import (
    CANNOT_CROSS_IDS,
    assert_fails_saying,
    cancel_once_started,
)

distributed = pytest.importorskip("distributed")
import asyncop.dask as asyncop_dask  # noqa: E402
from asyncop.dask import DaskExecutor  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def wait_for(predicate: object, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.01)
    raise AssertionError("condition not met in time")


@pytest.fixture(scope="module")
def client() -> Iterator[distributed.Client]:
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


@pytest.fixture
def executor(client: distributed.Client) -> Iterator[DaskExecutor]:
    ex = DaskExecutor(client)
    yield ex
    ex.shutdown(timeout=20)
    # Nothing of ours is left running or queued on the cluster.
    wait_for(lambda: not any(client.processing().values()), timeout=20)


def test_value_comes_back_from_the_cluster(
    runtime: asyncop.Runtime, executor: DaskExecutor
) -> None:
    ops = [runtime.spawn(jobs.square, i, executor=executor) for i in range(8)]
    assert [op.wait(30).value for op in ops] == [i * i for i in range(8)]
    # cloudpickle carries lambdas, as Dask users expect.
    assert runtime.spawn(lambda x: x + 1, 41, executor=executor).wait(30).value == 42

    async def main() -> int:
        op = asyncop.current_operation()
        assert op is not None
        return await op.spawn(jobs.square, 6, executor=executor)  # type: ignore[no-any-return]

    assert runtime.run(main) == 36


def test_failure_keeps_the_remote_traceback_and_joins_the_group(
    runtime: asyncop.Runtime, executor: DaskExecutor
) -> None:
    with pytest.raises(ExceptionGroup) as info, runtime.scope() as root:
        sibling = root.spawn(jobs.poll_token, 30, executor=executor)
        root.spawn(jobs.fail, "cluster failure", executor=executor)
    (error,) = info.value.exceptions
    assert isinstance(error, ValueError) and str(error) == "cluster failure"
    assert isinstance(error.__cause__, RemoteTraceback)
    assert "in fail" in error.__cause__.text
    assert any("Dask task" in note for note in error.__notes__)
    assert sibling.state is OperationState.CANCELLED


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", jobs.CANNOT_CROSS, ids=CANNOT_CROSS_IDS)
def test_an_outcome_that_cannot_cross_fails_the_operation_saying_why(
    runtime: asyncop.Runtime, executor: DaskExecutor, case: tuple[Any, ...]
) -> None:
    # Rebuilt on the client's event loop: an error there would be logged by
    # the loop and leave the operation running for ever.
    error = assert_fails_saying(runtime, executor, *case)
    assert "Dask task" in str(error)


def test_unpicklable_argument_raises_before_sending(
    runtime: asyncop.Runtime, executor: DaskExecutor
) -> None:
    with pytest.raises(TypeError, match=r"argument 0 of 'square' \(lock\) cannot be pickled"):
        runtime.spawn(jobs.square, threading.Lock(), executor=executor)
    assert executor._jobs == set()


def test_cancel_of_a_pending_task_drops_it(
    runtime: asyncop.Runtime, executor: DaskExecutor, tmp_path: Path
) -> None:
    busy = [
        runtime.spawn(jobs.poll_token, 30, str(tmp_path / f"busy{i}"), executor=executor)
        for i in range(2)
    ]
    wait_for(lambda: all((tmp_path / f"busy{i}.started").exists() for i in range(2)))
    marker = tmp_path / "never"
    pending = runtime.spawn(jobs.touch, str(marker), executor=executor)
    time.sleep(0.2)
    start = time.monotonic()
    pending.cancel()
    assert pending.wait(10).state is OperationState.CANCELLED
    assert time.monotonic() - start < 5
    for op in busy:
        op.cancel()
        assert op.wait(10).state is OperationState.CANCELLED
    time.sleep(0.5)
    assert not marker.exists()


def test_running_task_sees_its_token_within_a_poll(
    runtime: asyncop.Runtime, executor: DaskExecutor, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    op = runtime.spawn(jobs.poll_token, 30, str(seen), executor=executor)
    wait_for(lambda: Path(str(seen) + ".started").exists())
    text = runtime.dump()
    assert "poll_token [RUNNING]" in text and "Dask task poll_token-" in text
    (row,) = runtime.snapshot()["operations"]
    assert row["kind"] == "cluster"
    cancelled_at = time.time()
    op.cancel()
    assert op.wait(10).state is OperationState.CANCELLED
    # 100 ms when the machine is quiet; the bound is generous for a loaded one.
    assert float(seen.read_text()) - cancelled_at < 1.0


@pytest.mark.timeout(30)
def test_cancel_is_pushed_to_the_worker_running_the_task(
    runtime: asyncop.Runtime, executor: DaskExecutor, client: distributed.Client, tmp_path: Path
) -> None:
    # With the fallback poll of the token turned off in the workers, only
    # the push from the client can deliver the cancel.
    client.run(_set_worker_poll, 3600.0)
    try:
        seen = tmp_path / "seen"
        op = runtime.spawn(jobs.poll_token, 20, str(seen), executor=executor)
        wait_for(lambda: Path(str(seen) + ".started").exists())
        cancelled_at = time.time()
        op.cancel()
        assert op.wait(15).state is OperationState.CANCELLED
        assert float(seen.read_text()) - cancelled_at < 5.0
    finally:
        client.run(_set_worker_poll, asyncop_dask.POLL)


def _set_worker_poll(period: float) -> None:
    import asyncop.dask

    asyncop.dask.POLL = period


def test_ignored_token_waits_for_the_task_by_default(
    runtime: asyncop.Runtime, executor: DaskExecutor, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    op = runtime.spawn(jobs.ignore_token, 1.0, str(pidfile), executor=executor)
    wait_for(pidfile.exists)
    start = time.monotonic()
    op.cancel()
    result = op.wait(20)
    # No orphan: the operation ended when the task did, keeping its value.
    assert time.monotonic() - start > 0.3
    assert result.state is OperationState.COMPLETED and result.value == "ignored"


def test_abandon_ends_at_once_and_drops_the_late_result(
    runtime: asyncop.Runtime, executor: DaskExecutor, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    op = runtime.spawn(jobs.ignore_token, 3.0, str(pidfile), executor=executor, abandon=True)
    wait_for(pidfile.exists)
    start = time.monotonic()
    op.cancel()
    assert op.wait(10).state is OperationState.CANCELLED
    # Well before the job's own 3 s, with room for a loaded machine.
    assert time.monotonic() - start < 2.0


def test_deadlines_on_the_node_and_on_a_scope_above(
    runtime: asyncop.Runtime, executor: DaskExecutor
) -> None:
    op = runtime.spawn(jobs.poll_token, 30, executor=executor)
    op.deadline = runtime.now() + 0.3
    assert op.wait(10).state is OperationState.CANCELLED
    assert op.expired
    with pytest.raises(TimeoutError), runtime.scope(timeout=0.3) as root:
        child = root.spawn(jobs.poll_token, 30, executor=executor)
    assert child.state is OperationState.CANCELLED


def test_sync_scope_of_a_remote_runtime_unwinds_as_a_local_one(
    runtime: asyncop.Runtime, executor: DaskExecutor, tmp_path: Path
) -> None:
    result = cancel_once_started(runtime, executor, jobs.remote_scope, str(tmp_path / "scope"))
    assert result.state is OperationState.CANCELLED


def test_remote_cancel_does_not_enter_a_shielded_scope_of_the_job(
    runtime: asyncop.Runtime, executor: DaskExecutor, tmp_path: Path
) -> None:
    path = str(tmp_path / "shielded")
    result = cancel_once_started(runtime, executor, jobs.remote_shielded_scope, path)
    assert result.state is OperationState.CANCELLED
    assert Path(path).read_text() == "leaf finished"


def test_cancel_reaches_a_runtime_inside_the_task(
    runtime: asyncop.Runtime, executor: DaskExecutor, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    op = runtime.spawn(jobs.remote_tree, str(log), executor=executor)
    wait_for(lambda: Path(str(log) + ".started").exists())
    time.sleep(0.2)
    op.cancel()
    assert op.wait(20).state is OperationState.CANCELLED
    lines = log.read_text().splitlines()
    assert lines.count("leaf ended") == 3 and lines[-1] == "root ended"


def test_leaving_the_runtime_cancels_tasks_in_flight(
    executor: DaskExecutor, tmp_path: Path
) -> None:
    start = time.monotonic()
    with asyncop.Runtime(2) as rt:
        ops = [
            rt.spawn(jobs.poll_token, 60, str(tmp_path / f"j{i}"), executor=executor)
            for i in range(3)
        ]
        wait_for(lambda: any(tmp_path.glob("j*.started")))
    assert all(op.state is OperationState.CANCELLED for op in ops)
    assert time.monotonic() - start < 20


def test_executor_shutdown_cancels_and_refuses_new_work(
    runtime: asyncop.Runtime, client: distributed.Client, tmp_path: Path
) -> None:
    ex = DaskExecutor(client)
    op = runtime.spawn(jobs.poll_token, 60, str(tmp_path / "j"), executor=ex)
    wait_for(lambda: (tmp_path / "j.started").exists())
    ex.shutdown(timeout=20)
    assert op.wait(10).state is OperationState.CANCELLED
    with pytest.raises(RuntimeError, match="shut down"):
        runtime.spawn(jobs.square, 1, executor=ex)


@pytest.fixture
def own_client(client: distributed.Client) -> Iterator[distributed.Client]:
    """A second client of the module's cluster, which a test may close."""
    with distributed.Client(client.scheduler.address) as second:
        yield second


def test_jobs_lost_to_a_closed_client_fail_unless_cancelled(
    runtime: asyncop.Runtime, own_client: distributed.Client, tmp_path: Path
) -> None:
    ex = DaskExecutor(own_client)
    cancelled = runtime.spawn(jobs.ignore_token, 20, str(tmp_path / "pid"), executor=ex)
    wait_for((tmp_path / "pid").exists)
    cancelled.cancel()
    with pytest.raises(ExceptionGroup) as info, runtime.scope() as root:
        lost = root.spawn(jobs.poll_token, 30, str(tmp_path / "lost"), executor=ex)
        wait_for(lambda: (tmp_path / "lost.started").exists())
        own_client.close()
    # Lost work is a failure, not a cancel: the scope says so.
    (error,) = info.value.exceptions
    assert isinstance(error, asyncop.BrokenResourceError)
    assert re.fullmatch(
        r"Dask lost 'poll_token' before it finished \(its client was closed\).*", str(error)
    )
    assert lost.state is OperationState.FAILED
    # A job whose operation was cancelled ends CANCELLED all the same.
    assert cancelled.wait(10).state is OperationState.CANCELLED
    assert ex._jobs == set()


def test_jobs_lost_to_a_restart_fail(
    runtime: asyncop.Runtime, executor: DaskExecutor, client: distributed.Client, tmp_path: Path
) -> None:
    op = runtime.spawn(jobs.poll_token, 30, str(tmp_path / "lost"), executor=executor)
    wait_for(lambda: (tmp_path / "lost.started").exists())
    client.restart()
    result = op.wait(20)
    assert result.state is OperationState.FAILED
    assert isinstance(result.error, asyncop.BrokenResourceError)
    assert "Dask lost 'poll_token' before it finished (the cluster was restarted)" in str(
        result.error
    )


def test_spawn_after_the_client_closed_raises_runtime_error(
    runtime: asyncop.Runtime, own_client: distributed.Client
) -> None:
    ex = DaskExecutor(own_client)
    address = own_client.scheduler.address
    assert repr(ex) == f"<DaskExecutor open scheduler={address}>"
    own_client.close()
    assert repr(ex) == f"<DaskExecutor client closed scheduler={address}>"
    with pytest.raises(RuntimeError, match=r"cannot run 'square': its client is closed"):
        runtime.spawn(jobs.square, 1, executor=ex)
    ex.shutdown()
    assert repr(ex) == f"<DaskExecutor shut down scheduler={address}>"
    with pytest.raises(RuntimeError, match=r"is shut down and takes no new jobs"):
        runtime.spawn(jobs.square, 1, executor=ex)
    half_made = DaskExecutor.__new__(DaskExecutor)
    assert repr(half_made).startswith("<DaskExecutor")


def test_misuse_raises_at_once(runtime: asyncop.Runtime) -> None:
    with pytest.raises(TypeError, match=r"needs a distributed\.Client"):
        DaskExecutor(object())  # type: ignore[arg-type]


def test_import_without_dask_says_how_to_install_it() -> None:
    code = "import sys; sys.modules['distributed'] = None; import asyncop.dask"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=str(Path(__file__).resolve().parents[1]),
    )
    assert result.returncode != 0
    assert "pip install 'asyncop[dask]'" in result.stderr
