"""Tests for the C-style async_* helpers and the default runtime."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import asyncop
from asyncop import (
    AsyncResult,
    OperationState,
    async_await,
    async_cancel,
    async_create,
    async_result,
    async_state,
    async_submit,
    async_worker_limit,
    default_runtime,
)

REPO = Path(__file__).resolve().parents[2]


def run_script(source: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run ``source`` in a fresh interpreter, so the default runtime starts anew."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# ----------------------------------------------------------------------
# The default runtime
# ----------------------------------------------------------------------


def test_default_runtime_is_one_shared_runtime() -> None:
    first = default_runtime()
    assert isinstance(first, asyncop.Runtime)
    assert default_runtime() is first


@pytest.mark.timeout(10)
def test_async_create_makes_a_created_operation_on_the_default_runtime() -> None:
    op = async_create(lambda o, ctx: None)
    try:
        assert op.runtime is default_runtime()
        assert async_state(op) is OperationState.CREATED
    finally:
        async_cancel(op)


# ----------------------------------------------------------------------
# create, submit, await
# ----------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_create_submit_await_returns_the_callbacks_value() -> None:
    seen: list[tuple[asyncop.AsyncOperation, object]] = []

    def callback(op: asyncop.AsyncOperation, context: object) -> int:
        seen.append((op, context))
        return 21 * 2

    context = {"page": 7}
    op = async_create(callback, context)
    assert async_submit(op) is op
    result = async_await(op, 5)
    assert result == AsyncResult(OperationState.COMPLETED, 42, None)
    assert seen == [(op, context)]
    assert async_state(op) is OperationState.COMPLETED


@pytest.mark.timeout(10)
def test_async_await_reports_a_failure_in_the_result() -> None:
    def fail(op: asyncop.AsyncOperation, context: object) -> None:
        raise ValueError(f"bad {context}")

    op = async_submit(async_create(fail, "input"))
    result = async_await(op, 5)
    assert result.state is OperationState.FAILED
    assert result.value is None
    assert isinstance(result.error, ValueError)
    assert str(result.error) == "bad input"


@pytest.mark.timeout(10)
def test_async_await_times_out_on_an_unfinished_operation() -> None:
    gate = threading.Event()
    op = async_submit(async_create(lambda o, ctx: gate.wait(5)))
    try:
        with pytest.raises(TimeoutError):
            async_await(op, 0.05)
        assert not op.done
    finally:
        gate.set()
    assert async_await(op, 5).state is OperationState.COMPLETED


@pytest.mark.timeout(10)
def test_async_create_with_parent_links_the_child() -> None:
    parent = async_create(lambda o, ctx: "parent")
    child = async_create(lambda o, ctx: "child", parent=parent)
    assert child.parent is parent
    assert parent.children() == [child]
    async_submit(child)
    async_submit(parent)
    assert async_await(parent, 5).value == "parent"
    assert async_result(child) == AsyncResult(OperationState.COMPLETED, "child", None)


@pytest.mark.timeout(10)
def test_async_submit_twice_is_refused_naming_the_operation() -> None:
    op = async_create(lambda o, ctx: None)
    async_submit(op)
    with pytest.raises(RuntimeError, match=op.name):
        async_submit(op)
    async_await(op, 5)


# ----------------------------------------------------------------------
# async_result and async_state
# ----------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_async_result_of_a_running_operation_is_a_snapshot() -> None:
    gate = threading.Event()
    started = threading.Event()

    def work(op: asyncop.AsyncOperation, context: object) -> str:
        started.set()
        gate.wait(5)
        return "late"

    op = async_submit(async_create(work))
    try:
        assert started.wait(5)
        assert async_result(op) == AsyncResult(OperationState.RUNNING, None, None)
        assert async_state(op) is OperationState.RUNNING
    finally:
        gate.set()
    assert async_await(op, 5).value == "late"
    assert async_result(op) == AsyncResult(OperationState.COMPLETED, "late", None)


@pytest.mark.timeout(10)
def test_async_result_of_a_created_operation_is_a_snapshot() -> None:
    op = async_create(lambda o, ctx: "never")
    try:
        assert async_result(op) == AsyncResult(OperationState.CREATED, None, None)
    finally:
        async_cancel(op)


# ----------------------------------------------------------------------
# async_cancel
# ----------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_async_cancel_of_a_created_operation_ends_it_without_running() -> None:
    ran: list[str] = []
    op = async_create(lambda o, ctx: ran.append("ran"))
    async_cancel(op)
    assert async_state(op) is OperationState.CANCELLED
    assert async_result(op) == AsyncResult(OperationState.CANCELLED, None, None)
    with pytest.raises(RuntimeError, match=op.name):
        async_submit(op)
    assert ran == []


@pytest.mark.timeout(10)
def test_async_cancel_stops_a_running_operation_through_its_token() -> None:
    started = threading.Event()

    def cooperative(op: asyncop.AsyncOperation, context: object) -> None:
        started.set()
        op.token.wait(5)
        op.token.check()

    op = async_submit(async_create(cooperative))
    assert started.wait(5)
    async_cancel(op)
    assert async_await(op, 5).state is OperationState.CANCELLED


@pytest.mark.timeout(10)
def test_async_cancel_of_a_parent_cancels_its_children() -> None:
    parent = async_create(lambda o, ctx: None)
    child = async_create(lambda o, ctx: None, parent=parent)
    async_cancel(parent)
    assert async_state(child) is OperationState.CANCELLED
    assert async_state(parent) is OperationState.CANCELLED
    assert child.token.cancelled


# ----------------------------------------------------------------------
# async_worker_limit
# ----------------------------------------------------------------------


def test_async_worker_limit_refuses_a_bad_number() -> None:
    with pytest.raises(ValueError):
        async_worker_limit(0)
    with pytest.raises(TypeError):
        async_worker_limit(2.0)  # type: ignore[arg-type]


@pytest.mark.timeout(40)
def test_async_worker_limit_before_first_use_sets_the_worker_count() -> None:
    proc = run_script(
        """
        import threading
        import asyncop

        asyncop.async_worker_limit(3)
        runtime = asyncop.default_runtime()
        op = asyncop.async_submit(asyncop.async_create(lambda o, ctx: ctx, "ok"))
        value = asyncop.async_await(op, 5).value
        prefix = runtime.name + "-worker-"
        threads = [t for t in threading.enumerate() if t.name.startswith(prefix)]
        print(runtime.workers, len(threads), value)
        """
    )
    assert proc.returncode == 0, proc.stderr
    limit, started, value = proc.stdout.split()
    assert (limit, value) == ("3", "ok")
    if os.environ.get("ASYNCOP_DYNAMIC_WORKERS") == "1":
        # Workers start on demand, up to the limit.
        assert 1 <= int(started) <= 3
    else:
        assert started == "3"


@pytest.mark.timeout(40)
def test_async_worker_limit_after_first_use_is_refused() -> None:
    proc = run_script(
        """
        import asyncop

        runtime = asyncop.default_runtime()
        before = runtime.workers
        try:
            asyncop.async_worker_limit(before + 1)
        except RuntimeError as exc:
            print("refused:", exc)
        else:
            print("accepted")
        print("unchanged", asyncop.default_runtime() is runtime and runtime.workers == before)
        """
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("refused:"), proc.stdout
    assert "async_worker_limit" in lines[0]
    assert lines[1] == "unchanged True"


# ----------------------------------------------------------------------
# Interpreter exit
# ----------------------------------------------------------------------


@pytest.mark.timeout(40)
def test_interpreter_exit_never_hangs_on_default_runtime_work() -> None:
    before = time.monotonic()
    proc = run_script(
        """
        import sys
        import threading
        import time
        import asyncop

        started = threading.Semaphore(0)

        def stubborn(op, context):
            started.release()
            while True:
                time.sleep(0.01)

        def cooperative(op, context):
            started.release()
            op.token.wait()
            sys.stdout.write("cooperative cancelled\\n")
            sys.stdout.flush()
            op.token.check()

        asyncop.async_submit(asyncop.async_create(stubborn))
        asyncop.async_submit(asyncop.async_create(cooperative))
        assert started.acquire(timeout=5) and started.acquire(timeout=5)
        print("leaving", flush=True)
        """,
        timeout=10,
    )
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - before < 10
    lines = proc.stdout.splitlines()
    assert lines[0] == "leaving"
    # The default runtime is shut down at exit: cooperative work sees its cancel.
    assert "cooperative cancelled" in lines


@pytest.mark.timeout(40)
def test_interpreter_exit_never_hangs_on_a_running_user_runtime() -> None:
    proc = run_script(
        """
        import threading
        import time
        import asyncop

        started = threading.Semaphore(0)

        def stubborn():
            started.release()
            while True:
                time.sleep(0.01)

        def cooperative():
            started.release()
            token = asyncop.current_operation().token
            token.wait()
            token.check()

        runtime = asyncop.Runtime(2, name="left-running")
        runtime.spawn(stubborn)
        runtime.spawn(cooperative)
        assert started.acquire(timeout=5) and started.acquire(timeout=5)
        print("leaving", flush=True)
        """,
        timeout=10,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["leaving"]


@pytest.mark.timeout(40)
def test_interpreter_exit_with_idle_default_runtime_is_clean() -> None:
    proc = run_script(
        """
        import asyncop

        op = asyncop.async_submit(asyncop.async_create(lambda o, ctx: "done"))
        print(asyncop.async_await(op, 5).value)
        """,
        timeout=10,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["done"]
    assert proc.stderr == ""


# ----------------------------------------------------------------------
# Bad arguments get a TypeError naming the call
# ----------------------------------------------------------------------

_HELPERS_ON_ONE_OP = {
    "async_submit": async_submit,
    "async_cancel": async_cancel,
    "async_await": async_await,
    "async_result": async_result,
    "async_state": async_state,
}


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "bad", [None, "op", 42, object(), AsyncResult(OperationState.COMPLETED, 1, None)]
)
@pytest.mark.parametrize("name", sorted(_HELPERS_ON_ONE_OP))
def test_helper_given_a_non_operation_raises_type_error_naming_the_call(
    name: str, bad: object
) -> None:
    with pytest.raises(TypeError, match=rf"{name}\(op\) needs an AsyncOperation, got "):
        _HELPERS_ON_ONE_OP[name](bad)  # type: ignore[operator]


@pytest.mark.timeout(10)
@pytest.mark.parametrize("bad", ["1", [1], object()])
def test_async_await_with_a_non_number_timeout_raises_type_error_and_leaves_op_alone(
    bad: object,
) -> None:
    gate = threading.Event()
    op = async_create(lambda o, ctx: gate.wait(10))
    async_submit(op)
    try:
        with pytest.raises(TypeError, match="timeout"):
            async_await(op, bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="NaN"):
            async_await(op, float("nan"))
        assert not op.done
    finally:
        gate.set()
        assert async_await(op, 10).state is OperationState.COMPLETED


@pytest.mark.timeout(10)
def test_async_await_with_an_infinite_timeout_waits_without_limit() -> None:
    op = async_create(lambda o, ctx: ctx * 2, 21)
    async_submit(op)
    assert async_await(op, float("inf")).value == 42
    assert async_await(op, 1e300).value == 42
