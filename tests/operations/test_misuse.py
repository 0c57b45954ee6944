"""Misuse raises at once, with a message that names the operation and what to do."""

from __future__ import annotations

import threading

import pytest

import asyncop
from asyncop import AsyncOperation, InvalidStateError, current_operation

pytestmark = pytest.mark.timeout(20)


def noop(op: AsyncOperation, context: object) -> None:
    return None


def me() -> AsyncOperation:
    op = current_operation()
    assert op is not None
    return op


# ----------------------------------------------------------------------
# Submitting
# ----------------------------------------------------------------------


def test_submitting_twice_raises_runtime_error_naming_the_operation(
    runtime: asyncop.Runtime,
) -> None:
    op = runtime.create(noop, name="load_header")
    runtime.submit(op)
    with pytest.raises(RuntimeError, match="load_header"):
        runtime.submit(op)
    op.wait(5)


def test_submitting_twice_while_still_running_raises(runtime: asyncop.Runtime) -> None:
    release = threading.Event()
    op = runtime.create(lambda op, ctx: release.wait(10), name="load_body")
    runtime.submit(op)
    try:
        with pytest.raises(RuntimeError, match="load_body"):
            runtime.submit(op)
    finally:
        release.set()
    assert op.wait(5).state is asyncop.OperationState.COMPLETED


def test_submitting_a_cancelled_operation_raises(runtime: asyncop.Runtime) -> None:
    op = runtime.create(noop, name="load_sidebar")
    op.cancel()
    with pytest.raises(RuntimeError, match="load_sidebar"):
        runtime.submit(op)


def test_submitting_a_cancelled_but_unfinished_operation_raises(
    runtime: asyncop.Runtime,
) -> None:
    release = threading.Event()
    parent = runtime.create(noop, name="load_page")
    child = parent.spawn(release.wait, 10, name="fetch")
    child.shield = True  # keeps the cancelled parent from ending
    parent.cancel()
    try:
        assert not parent.done
        with pytest.raises(RuntimeError, match="load_page"):
            runtime.submit(parent)
    finally:
        release.set()
    assert parent.wait(5).state is asyncop.OperationState.CANCELLED


def test_submitting_a_final_operation_raises(runtime: asyncop.Runtime) -> None:
    op = runtime.create(noop, name="load_comments")
    runtime.submit(op)
    op.wait(5)
    with pytest.raises(RuntimeError, match="load_comments"):
        runtime.submit(op)


def test_a_refused_submit_leaves_the_operation_as_it_was(runtime: asyncop.Runtime) -> None:
    op = runtime.create(lambda op, ctx: "first run", name="load_comments")
    runtime.submit(op)
    op.wait(5)
    with pytest.raises(RuntimeError):
        runtime.submit(op)
    assert op.wait(0) == asyncop.AsyncResult(asyncop.OperationState.COMPLETED, "first run", None)


# ----------------------------------------------------------------------
# Wrong types and numbers
# ----------------------------------------------------------------------


@pytest.mark.parametrize("callback", [None, 42, "load_page"])
def test_create_with_a_non_callable_callback_raises_type_error(
    runtime: asyncop.Runtime, callback: object
) -> None:
    with pytest.raises(TypeError):
        runtime.create(callback)  # type: ignore[arg-type]


@pytest.mark.parametrize("fn", [None, 42, "load_page"])
def test_spawn_with_a_non_callable_raises_type_error(runtime: asyncop.Runtime, fn: object) -> None:
    with pytest.raises(TypeError):
        runtime.spawn(fn)  # type: ignore[arg-type]


def test_child_spawn_with_a_non_callable_raises_type_error(runtime: asyncop.Runtime) -> None:
    parent = runtime.create(noop, name="load_page")
    with pytest.raises(TypeError):
        parent.spawn(None)  # type: ignore[arg-type]
    assert parent.children() == []


def test_non_callable_callback_message_names_the_operation(runtime: asyncop.Runtime) -> None:
    with pytest.raises(TypeError, match="load_page"):
        runtime.create(42, name="load_page")  # type: ignore[arg-type]


def test_non_callable_spawn_message_names_the_operation(runtime: asyncop.Runtime) -> None:
    with pytest.raises(TypeError, match="fetch_body"):
        runtime.spawn(None, name="fetch_body")  # type: ignore[arg-type]


def test_runtime_with_zero_workers_raises_value_error() -> None:
    with pytest.raises(ValueError, match="workers"):
        asyncop.Runtime(workers=0)


def test_runtime_with_negative_workers_raises_value_error() -> None:
    with pytest.raises(ValueError, match="workers"):
        asyncop.Runtime(workers=-3)


# ----------------------------------------------------------------------
# Waiting on oneself
# ----------------------------------------------------------------------


def test_wait_from_its_own_callback_raises_runtime_error(runtime: asyncop.Runtime) -> None:
    def callback(op: AsyncOperation, context: object) -> BaseException | None:
        try:
            op.wait(2)
        except BaseException as exc:
            return exc
        return None

    op = runtime.create(callback, name="load_page")
    runtime.submit(op)
    error = op.wait(5).value
    assert isinstance(error, RuntimeError)
    assert "load_page" in str(error)


def test_wait_from_its_own_spawned_work_raises_runtime_error(
    runtime: asyncop.Runtime,
) -> None:
    def work() -> BaseException | None:
        try:
            me().wait(2)
        except BaseException as exc:
            return exc
        return None

    error = runtime.spawn(work, name="load_page").wait(5).value
    assert isinstance(error, RuntimeError)
    assert "load_page" in str(error)


def test_wait_from_a_descendant_raises_runtime_error(runtime: asyncop.Runtime) -> None:
    def grandchild(top: AsyncOperation) -> BaseException | None:
        try:
            top.wait(2)
        except BaseException as exc:
            return exc
        return None

    def child(top: AsyncOperation) -> AsyncOperation:
        return me().spawn(grandchild, top, name="grandchild")

    def parent() -> AsyncOperation:
        top = me()
        return top.spawn(child, top, name="child")

    top = runtime.spawn(parent, name="load_page")
    top.wait(5)
    grand = top.result().result()
    error = grand.wait(5).value
    assert isinstance(error, RuntimeError)
    assert "load_page" in str(error)


def test_result_from_its_own_callback_raises_invalid_state_error(
    runtime: asyncop.Runtime,
) -> None:
    def work() -> BaseException | None:
        try:
            me().result()
        except BaseException as exc:
            return exc
        return None

    error = runtime.spawn(work, name="load_page").wait(5).value
    assert isinstance(error, InvalidStateError)
    assert "load_page" in str(error)


# ----------------------------------------------------------------------
# Adding children where they cannot go
# ----------------------------------------------------------------------


def test_spawning_into_an_exited_scope_raises_runtime_error(runtime: asyncop.Runtime) -> None:
    with runtime.scope(name="load_page") as root:
        pass
    with pytest.raises(RuntimeError, match="load_page"):
        root.spawn(lambda: None)


def test_spawning_into_an_exited_scope_after_its_children_raises(
    runtime: asyncop.Runtime,
) -> None:
    with runtime.scope(name="load_page") as root:
        root.spawn(lambda: None)
    with pytest.raises(RuntimeError, match="load_page"):
        root.spawn(lambda: None)
    assert root.children() == []


def test_spawning_a_child_of_a_completed_operation_raises(runtime: asyncop.Runtime) -> None:
    op = runtime.spawn(lambda: None, name="load_header")
    op.wait(5)
    with pytest.raises(RuntimeError, match="load_header"):
        op.spawn(lambda: None)


def test_creating_a_child_of_a_cancelled_operation_raises(runtime: asyncop.Runtime) -> None:
    op = runtime.create(noop, name="load_sidebar")
    op.cancel()
    with pytest.raises(RuntimeError, match="load_sidebar"):
        runtime.create(noop, parent=op)


def test_creating_a_child_of_a_failed_operation_raises(runtime: asyncop.Runtime) -> None:
    def fail() -> None:
        raise ValueError("boom")

    op = runtime.spawn(fail, name="load_body")
    assert op.wait(5).state is asyncop.OperationState.FAILED
    with pytest.raises(RuntimeError, match="load_body"):
        runtime.create(noop, parent=op)


# ----------------------------------------------------------------------
# Asking for a result too early
# ----------------------------------------------------------------------


def test_result_of_a_created_operation_raises_invalid_state_error(
    runtime: asyncop.Runtime,
) -> None:
    op = runtime.create(noop, name="load_comments")
    with pytest.raises(InvalidStateError, match="load_comments"):
        op.result()


def test_result_of_a_running_operation_raises_invalid_state_error(
    runtime: asyncop.Runtime,
) -> None:
    release = threading.Event()
    op = runtime.spawn(release.wait, 10, name="load_comments")
    try:
        with pytest.raises(InvalidStateError, match="load_comments"):
            op.result()
    finally:
        release.set()
    op.wait(5)


def test_invalid_state_error_is_an_exception() -> None:
    assert issubclass(InvalidStateError, Exception)
