"""The operation node: its life, results, tree rules, failures, deadlines and shields."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
import logging
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

import asyncop
from asyncop import (
    AsyncOperation,
    AsyncResult,
    CancellationError,
    InvalidStateError,
    OperationState,
    current_operation,
)

pytestmark = pytest.mark.timeout(20)

CREATED = OperationState.CREATED
PENDING = OperationState.PENDING
RUNNING = OperationState.RUNNING
COMPLETED = OperationState.COMPLETED
FAILED = OperationState.FAILED
CANCELLED = OperationState.CANCELLED

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


def this_line() -> int:
    """The line number of the caller."""
    return sys._getframe(1).f_lineno


def me() -> AsyncOperation:
    """The operation whose code is running; fails the test outside one."""
    op = current_operation()
    assert op is not None
    return op


def wait_for_cancel() -> None:
    """Sync work that ends only through its token: it leaves CANCELLED."""
    token = me().token
    token.wait(10)
    token.check()


def fetch_header() -> str:
    return "header"


def load_page(op: AsyncOperation, context: object) -> None:
    return None


def fail_with_value_error() -> None:
    raise ValueError("unobserved boom")


@contextlib.contextmanager
def workers_busy(runtime: asyncop.Runtime, count: int = 2) -> Iterator[None]:
    """Hold ``count`` workers in blocked callbacks, so new work stays PENDING.

    Work submitted right after entering stays queued: the runtime replaces a
    stuck worker only after it has been busy for a while.
    """
    release = threading.Event()
    started = [threading.Event() for _ in range(count)]

    def block(event: threading.Event) -> None:
        event.set()
        release.wait(10)

    blockers = [runtime.spawn(block, event, name="blocker") for event in started]
    try:
        for event in started:
            assert event.wait(5)
        yield
    finally:
        release.set()
        for blocker in blockers:
            blocker.wait(5)


def wait_done(op: AsyncOperation, timeout: float = 5.0) -> None:
    """Poll until ``op`` is final, without observing its result."""
    end = time.monotonic() + timeout
    while not op.done:
        assert time.monotonic() < end, f"{op!r} did not end in {timeout} s"
        time.sleep(0.001)


# ----------------------------------------------------------------------
# Life: CREATED -> PENDING -> RUNNING -> final
# ----------------------------------------------------------------------


def test_create_makes_a_created_operation(runtime: asyncop.Runtime) -> None:
    op = runtime.create(lambda op, ctx: None)
    assert op.state is CREATED
    assert op.done is False


def test_submit_moves_created_to_pending(runtime: asyncop.Runtime) -> None:
    op = runtime.create(lambda op, ctx: None)
    with workers_busy(runtime):
        runtime.submit(op)
        assert op.state is PENDING
    op.wait(5)


def test_operation_is_running_while_its_callback_runs(runtime: asyncop.Runtime) -> None:
    seen: list[OperationState] = []
    op = runtime.create(lambda op, ctx: seen.append(op.state))
    runtime.submit(op)
    op.wait(5)
    assert seen == [RUNNING]


def test_operation_goes_through_every_state_in_order(runtime: asyncop.Runtime) -> None:
    seen: list[OperationState] = []
    op = runtime.create(lambda op, ctx: seen.append(op.state))
    seen.append(op.state)
    with workers_busy(runtime):
        runtime.submit(op)
        seen.append(op.state)
    seen.append(op.wait(5).state)
    assert seen == [CREATED, PENDING, RUNNING, COMPLETED]


def test_submit_returns_the_operation(runtime: asyncop.Runtime) -> None:
    op = runtime.create(lambda op, ctx: None)
    assert runtime.submit(op) is op
    op.wait(5)


def test_operation_that_returns_ends_completed(runtime: asyncop.Runtime) -> None:
    op = runtime.spawn(lambda: 7)
    assert op.wait(5).state is COMPLETED


def test_operation_that_raises_ends_failed(runtime: asyncop.Runtime) -> None:
    def fail() -> None:
        raise ValueError("boom")

    op = runtime.spawn(fail)
    assert op.wait(5).state is FAILED


def test_a_late_cancel_does_not_change_the_final_state(runtime: asyncop.Runtime) -> None:
    op = runtime.spawn(lambda: "kept")
    op.wait(5)
    op.cancel("too late")
    assert op.state is COMPLETED
    assert op.result() == "kept"


def test_final_state_of_a_failed_operation_is_not_changed_by_cancel(
    runtime: asyncop.Runtime,
) -> None:
    def fail() -> None:
        raise ValueError("boom")

    op = runtime.spawn(fail)
    error = op.wait(5).error
    op.cancel()
    assert op.state is FAILED
    assert op.error is error


def test_done_is_a_property() -> None:
    assert isinstance(AsyncOperation.__dict__.get("done"), property)


def test_an_operations_fields_are_its_bases_alone(runtime: asyncop.Runtime) -> None:
    # A slot declared again on AsyncOperation would hide its base's field,
    # which the compiled core reads as a C member: the two would part ways.
    assert AsyncOperation.__dict__.get("__slots__") == ()
    base = AsyncOperation.__mro__[1]
    slots = set(base.__dict__["__slots__"])
    assert {"runtime", "name", "parent", "first_child", "_state", "_outcome"} <= slots
    assert not slots & set(AsyncOperation.__dict__)
    op = runtime.spawn(time.sleep, 0)
    op.wait(5)
    assert not hasattr(op, "__dict__")
    assert weakref.ref(op)() is op
    assert AsyncOperation[int] is not AsyncOperation  # (Generic stays)


def test_done_is_false_until_the_operation_ends(runtime: asyncop.Runtime) -> None:
    release = threading.Event()
    op = runtime.spawn(release.wait, 10)
    assert op.done is False
    release.set()
    op.wait(5)
    assert op.done is True


# ----------------------------------------------------------------------
# result() and wait()
# ----------------------------------------------------------------------


def test_result_returns_the_value(runtime: asyncop.Runtime) -> None:
    op = runtime.spawn(lambda a, b: a * b, 6, 7)
    op.wait(5)
    assert op.result() == 42


def test_result_raises_the_failure(runtime: asyncop.Runtime) -> None:
    error = KeyError("missing")

    def fail() -> None:
        raise error

    op = runtime.spawn(fail)
    op.wait(5)
    with pytest.raises(KeyError) as caught:
        op.result()
    assert caught.value is error


def test_result_raises_cancellation_error_when_cancelled(runtime: asyncop.Runtime) -> None:
    op = runtime.create(lambda op, ctx: None)
    op.cancel()
    with pytest.raises(CancellationError):
        op.result()


def test_result_raises_invalid_state_error_before_the_end(runtime: asyncop.Runtime) -> None:
    op = runtime.create(lambda op, ctx: None)
    with pytest.raises(InvalidStateError):
        op.result()


def test_result_raises_invalid_state_error_while_running(runtime: asyncop.Runtime) -> None:
    release = threading.Event()
    op = runtime.spawn(release.wait, 10)
    try:
        with pytest.raises(InvalidStateError):
            op.result()
    finally:
        release.set()
    op.wait(5)


def test_wait_returns_the_async_result(runtime: asyncop.Runtime) -> None:
    result = runtime.spawn(lambda: "v").wait(5)
    assert result == AsyncResult(COMPLETED, "v", None)


def test_wait_on_an_ended_operation_returns_at_once(runtime: asyncop.Runtime) -> None:
    op = runtime.spawn(lambda: "v")
    op.wait(5)
    assert op.wait(0).value == "v"


def test_wait_raises_timeout_error_when_not_ended(runtime: asyncop.Runtime) -> None:
    op = runtime.create(lambda op, ctx: None)
    with pytest.raises(TimeoutError):
        op.wait(0.05)
    assert op.state is CREATED


def test_wait_on_a_running_operation_raises_timeout_error(runtime: asyncop.Runtime) -> None:
    release = threading.Event()
    op = runtime.spawn(release.wait, 10)
    try:
        with pytest.raises(TimeoutError):
            op.wait(0.05)
    finally:
        release.set()
    assert op.wait(5).state is COMPLETED


# ----------------------------------------------------------------------
# Structured completion and unlinking
# ----------------------------------------------------------------------


def test_parent_stays_running_until_its_children_end(runtime: asyncop.Runtime) -> None:
    release = threading.Event()
    returning = threading.Event()

    def parent() -> str:
        me().spawn(release.wait, 10, name="child")
        returning.set()
        return "parent value"

    op = runtime.spawn(parent)
    try:
        assert returning.wait(5)
        with pytest.raises(TimeoutError):
            op.wait(0.1)
        assert op.state is RUNNING
        assert [child.name for child in op.children()] == ["child"]
    finally:
        release.set()
    assert op.wait(5) == AsyncResult(COMPLETED, "parent value", None)


def test_children_have_ended_when_the_parent_ends(runtime: asyncop.Runtime) -> None:
    children: list[AsyncOperation] = []

    def parent() -> None:
        op = me()
        children.extend(op.spawn(time.sleep, 0.01 * i) for i in range(4))

    runtime.spawn(parent).wait(5)
    assert len(children) == 4
    assert all(child.state is COMPLETED for child in children)


def test_an_ended_child_is_no_longer_listed_by_its_parent(runtime: asyncop.Runtime) -> None:
    parent = runtime.create(lambda op, ctx: None, name="parent")
    child = runtime.create(lambda op, ctx: "c", parent=parent, name="child")
    assert parent.children() == [child]
    runtime.submit(child)
    child.wait(5)
    assert parent.children() == []
    assert parent.first_child is None
    parent.cancel()


def test_an_ended_child_clears_its_parent_and_sibling_links(runtime: asyncop.Runtime) -> None:
    parent = runtime.create(lambda op, ctx: None, name="parent")
    first = runtime.create(lambda op, ctx: None, parent=parent, name="first")
    second = runtime.create(lambda op, ctx: None, parent=parent, name="second")
    assert first.parent is parent
    assert first.sibling_next is second
    runtime.submit(first)
    first.wait(5)
    assert first.parent is None
    assert first.sibling_next is None
    assert parent.children() == [second]
    assert parent.first_child is second
    parent.cancel()


def test_a_middle_child_that_ends_leaves_its_siblings_linked(runtime: asyncop.Runtime) -> None:
    parent = runtime.create(lambda op, ctx: None, name="parent")
    a, b, c = (runtime.create(lambda op, ctx: None, parent=parent, name=n) for n in "abc")
    runtime.submit(b)
    b.wait(5)
    assert parent.children() == [a, c]
    assert a.sibling_next is c
    parent.cancel()


def test_children_lists_live_children_in_spawn_order(runtime: asyncop.Runtime) -> None:
    parent = runtime.create(lambda op, ctx: None, name="parent")
    kids = [runtime.create(lambda op, ctx: None, parent=parent, name=f"k{i}") for i in range(5)]
    assert parent.children() == kids
    parent.cancel()


def test_children_of_a_running_operation_in_spawn_order(runtime: asyncop.Runtime) -> None:
    release = threading.Event()
    listed: list[list[str]] = []

    def parent() -> None:
        op = me()
        for name in ("one", "two", "three"):
            op.spawn(release.wait, 10, name=name)
        listed.append([child.name for child in op.children()])
        release.set()

    runtime.spawn(parent).wait(5)
    assert listed == [["one", "two", "three"]]


def test_a_created_operation_can_be_a_parent(runtime: asyncop.Runtime) -> None:
    release = threading.Event()

    def child_work() -> str:
        release.wait(10)
        return "child done"

    parent = runtime.create(lambda op, ctx: "parent done", name="parent")
    child = parent.spawn(child_work, name="child")
    assert child.parent is parent
    assert parent.children() == [child]
    release.set()
    assert child.wait(5).value == "child done"
    assert parent.state is CREATED
    runtime.submit(parent)
    assert parent.wait(5) == AsyncResult(COMPLETED, "parent done", None)


def test_a_created_parent_waits_for_a_child_submitted_before_it(
    runtime: asyncop.Runtime,
) -> None:
    release = threading.Event()
    parent = runtime.create(lambda op, ctx: "p", name="parent")
    child = runtime.create(lambda op, ctx: release.wait(10), parent=parent, name="child")
    runtime.submit(child)
    runtime.submit(parent)
    try:
        with pytest.raises(TimeoutError):
            parent.wait(0.1)
        assert parent.state is RUNNING
    finally:
        release.set()
    assert parent.wait(5).state is COMPLETED
    assert child.state is COMPLETED


# ----------------------------------------------------------------------
# Failure propagation
# ----------------------------------------------------------------------


def test_failing_child_cancels_its_running_siblings(runtime: asyncop.Runtime) -> None:
    sibling_started = threading.Event()
    saw_cancel: list[bool] = []

    def sibling() -> None:
        token = me().token
        sibling_started.set()
        saw_cancel.append(token.wait(10))
        token.check()

    def failing() -> None:
        assert sibling_started.wait(5)
        raise ValueError("boom")

    def parent() -> None:
        op = me()
        op.spawn(sibling, name="sibling")
        op.spawn(failing, name="failing")

    op = runtime.spawn(parent)
    op.wait(5)
    assert saw_cancel == [True]


def test_failing_child_cancels_sibling_tokens(runtime: asyncop.Runtime) -> None:
    siblings: list[AsyncOperation] = []

    def parent() -> None:
        op = me()
        siblings.append(op.spawn(wait_for_cancel, name="sibling-1"))
        siblings.append(op.spawn(wait_for_cancel, name="sibling-2"))
        op.spawn(fail_with_value_error, name="failing")

    runtime.spawn(parent).wait(5)
    assert [s.token.cancelled for s in siblings] == [True, True]
    assert [s.state for s in siblings] == [CANCELLED, CANCELLED]


def test_failing_child_fails_its_parent_with_an_exception_group(
    runtime: asyncop.Runtime,
) -> None:
    error = ValueError("boom")

    def failing() -> None:
        raise error

    def parent() -> str:
        me().spawn(failing, name="failing")
        return "parent value"

    result = runtime.spawn(parent).wait(5)
    assert result.state is FAILED
    assert result.value is None
    assert isinstance(result.error, ExceptionGroup)
    assert list(result.error.exceptions) == [error]


def test_failing_child_keeps_its_own_failure(runtime: asyncop.Runtime) -> None:
    children: list[AsyncOperation] = []

    def parent() -> None:
        children.append(me().spawn(fail_with_value_error, name="failing"))

    runtime.spawn(parent).wait(5)
    assert children[0].state is FAILED
    assert isinstance(children[0].error, ValueError)


def test_parent_group_holds_its_own_error_and_the_childs(runtime: asyncop.Runtime) -> None:
    child_error = ValueError("child")
    own_error = KeyError("own")

    def failing() -> None:
        raise child_error

    def parent() -> None:
        op = me()
        op.spawn(failing, name="failing")
        op.token.wait(10)  # the child's failure cancels the parent
        raise own_error

    result = runtime.spawn(parent).wait(5)
    assert result.state is FAILED
    assert isinstance(result.error, ExceptionGroup)
    found = list(result.error.exceptions)
    assert len(found) == 2
    assert {id(e) for e in found} == {id(child_error), id(own_error)}


def test_cancellations_never_appear_in_the_failure_group(runtime: asyncop.Runtime) -> None:
    sibling_started = threading.Event()
    error = ValueError("boom")

    def sibling() -> None:
        sibling_started.set()
        wait_for_cancel()

    def failing() -> None:
        assert sibling_started.wait(5)
        raise error

    def parent() -> None:
        op = me()
        op.spawn(sibling, name="sibling")
        op.spawn(failing, name="failing")
        op.token.wait(10)
        op.token.check()  # the parent's own Cancelled is not a failure either

    result = runtime.spawn(parent).wait(5)
    assert result.state is FAILED
    assert isinstance(result.error, BaseExceptionGroup)
    assert list(result.error.exceptions) == [error]


def test_two_failing_children_both_appear_in_the_group(runtime: asyncop.Runtime) -> None:
    both_started = threading.Barrier(2, timeout=5)
    errors = [ValueError("one"), ValueError("two")]

    def failing(error: ValueError) -> None:
        both_started.wait()
        raise error

    def parent() -> None:
        op = me()
        for error in errors:
            op.spawn(failing, error)

    result = runtime.spawn(parent).wait(5)
    assert isinstance(result.error, ExceptionGroup)
    assert {id(e) for e in result.error.exceptions} == {id(e) for e in errors}


def test_supervised_child_failure_stays_on_the_child(runtime: asyncop.Runtime) -> None:
    children: list[AsyncOperation] = []

    def parent() -> str:
        children.append(me().spawn(fail_with_value_error, supervise=True))
        return "parent value"

    result = runtime.spawn(parent).wait(5)
    assert result == AsyncResult(COMPLETED, "parent value", None)
    child = children[0]
    assert child.state is FAILED
    assert isinstance(child.error, ValueError)


def test_supervised_child_failure_does_not_cancel_its_siblings(
    runtime: asyncop.Runtime,
) -> None:
    failed = threading.Event()
    siblings: list[AsyncOperation] = []

    def sibling() -> bool:
        assert failed.wait(5)
        return me().token.cancelled

    def failing() -> None:
        failed.set()
        raise ValueError("boom")

    def parent() -> None:
        op = me()
        siblings.append(op.spawn(sibling))
        siblings.append(op.spawn(failing, supervise=True))

    runtime.spawn(parent).wait(5)
    assert siblings[0].wait(5) == AsyncResult(COMPLETED, False, None)
    assert isinstance(siblings[1].error, ValueError)


# ----------------------------------------------------------------------
# Unobserved failures
# ----------------------------------------------------------------------


def asyncop_errors(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [
        record
        for record in caplog.records
        if record.name.startswith("asyncop")
        and record.levelno >= logging.ERROR
        and name in record.getMessage()
    ]


def test_unobserved_failure_is_logged_when_the_operation_is_collected(
    runtime: asyncop.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncop")
    op = runtime.spawn(fail_with_value_error, name="lost-failure")
    wait_done(op)
    assert op.state is FAILED
    assert asyncop_errors(caplog, "lost-failure") == []
    del op
    gc.collect()
    assert len(asyncop_errors(caplog, "lost-failure")) == 1


def test_unobserved_failure_is_logged_once_its_runtime_is_gone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncop")
    with asyncop.Runtime(1, name="unobserved") as rt:
        op = rt.spawn(fail_with_value_error, name="lost-after-shutdown")
        wait_done(op)
    ref = weakref.ref(op)
    del op
    gc.collect()
    assert ref() is None
    records = asyncop_errors(caplog, "lost-after-shutdown")
    assert len(records) == 1
    assert records[0].exc_info is not None
    assert isinstance(records[0].exc_info[1], ValueError)


def test_unobserved_failure_log_names_where_the_operation_was_made(
    runtime: asyncop.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncop")
    line = sys._getframe().f_lineno + 1
    op = runtime.spawn(fail_with_value_error, name="lost-with-line")
    wait_done(op)
    del op
    gc.collect()
    [record] = asyncop_errors(caplog, "lost-with-line")
    assert f"{__file__}:{line}" in record.getMessage()


def read_result(op: AsyncOperation) -> None:
    with pytest.raises(ValueError):
        op.result()


@pytest.mark.parametrize(
    "observe",
    [
        pytest.param(read_result, id="result"),
        pytest.param(lambda op: op.error, id="error"),
        pytest.param(lambda op: op.wait(5), id="wait"),
    ],
)
def test_observed_failure_is_not_logged(caplog: pytest.LogCaptureFixture, observe: Any) -> None:
    caplog.set_level(logging.ERROR, logger="asyncop")
    with asyncop.Runtime(1, name="observed") as rt:
        op = rt.spawn(fail_with_value_error, name="seen-failure")
        wait_done(op)
        observe(op)
    ref = weakref.ref(op)
    del op
    gc.collect()
    assert ref() is None  # it was collected, so a log would have happened by now
    assert asyncop_errors(caplog, "seen-failure") == []


def test_failure_handed_to_the_parent_is_not_logged_on_the_child(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncop")
    children: list[AsyncOperation] = []

    def parent() -> None:
        children.append(me().spawn(fail_with_value_error, name="child-failure"))

    with asyncop.Runtime(1, name="handed") as rt:
        op = rt.spawn(parent, name="the-parent")
        assert op.wait(5).state is FAILED
    ref = weakref.ref(children[0])
    children.clear()
    del op
    gc.collect()
    assert ref() is None
    assert asyncop_errors(caplog, "child-failure") == []
    assert asyncop_errors(caplog, "the-parent") == []


# ----------------------------------------------------------------------
# Where it was made, and its name
# ----------------------------------------------------------------------


def test_spawn_records_the_callers_file_and_line(runtime: asyncop.Runtime) -> None:
    line = this_line() + 1
    op = runtime.spawn(fetch_header)
    assert op.filename == __file__
    assert op.lineno == line
    op.wait(5)


def test_create_records_the_callers_file_and_line(runtime: asyncop.Runtime) -> None:
    line = this_line() + 1
    op = runtime.create(lambda op, ctx: None)
    assert (op.filename, op.lineno) == (__file__, line)


def test_child_spawn_records_the_callers_file_and_line(runtime: asyncop.Runtime) -> None:
    where: list[tuple[str, int, int]] = []

    def parent() -> None:
        line = this_line() + 1
        child = me().spawn(fetch_header)
        where.append((child.filename, child.lineno, line))

    runtime.spawn(parent).wait(5)
    [(filename, lineno, line)] = where
    assert (filename, lineno) == (__file__, line)


def test_scopes_and_spawns_record_each_callers_line_in_turn(runtime: asyncop.Runtime) -> None:
    # Makers of operations take turns, so the place each is made is found afresh.
    where: list[tuple[str, int, int]] = []

    async def inner() -> None:
        line = this_line() + 1
        async with asyncop.scope() as scope:
            where.append((scope.filename, scope.lineno, line))
            line = this_line() + 1
            child = scope.spawn(fetch_header)
            where.append((child.filename, child.lineno, line))

    async def outer() -> None:
        for _ in range(2):
            line = this_line() + 1
            async with asyncop.scope() as scope:
                where.append((scope.filename, scope.lineno, line))
                await inner()

    runtime.spawn(outer).wait(5)
    assert len(where) == 6
    assert [(filename, lineno) for filename, lineno, _ in where] == [
        (__file__, line) for _, _, line in where
    ]


def test_name_defaults_to_the_function_name(runtime: asyncop.Runtime) -> None:
    op = runtime.spawn(fetch_header)
    assert op.name == "fetch_header"
    op.wait(5)


def test_create_name_defaults_to_the_callback_name(runtime: asyncop.Runtime) -> None:
    op = runtime.create(load_page)
    assert op.name == "load_page"


def test_name_can_be_given(runtime: asyncop.Runtime) -> None:
    op = runtime.spawn(fetch_header, name="header")
    assert op.name == "header"
    op.wait(5)


class Client:
    def get(self, page: int) -> str:
        return f"page {page}"

    async def get_async(self, page: int) -> str:
        return f"page {page}"


class Fetcher:
    """A callable object: named after its class, as trio names a task."""

    def __call__(self, page: int) -> str:
        return f"page {page}"


class AsyncFetcher:
    """An object whose ``__call__`` is an ``async def``: it runs as a task."""

    async def __call__(self, page: int) -> str:
        await asyncio_free_checkpoint()
        return f"page {page}"


async def asyncio_free_checkpoint() -> None:
    await asyncop.checkpoint()


def fetch_page(page: int, *, verbose: bool = False) -> str:
    return f"page {page}"


# fn -> the name dump() shows for it: no repr with an address, whatever fn is.
NAMED: dict[str, tuple[Any, str]] = {
    "partial": (functools.partial(fetch_page, verbose=True), "fetch_page"),
    "partial-of-partial": (
        functools.partial(functools.partial(fetch_page), verbose=True),
        "fetch_page",
    ),
    "bound-method": (Client().get, "Client.get"),
    "async-bound-method": (Client().get_async, "Client.get_async"),
    "partial-of-a-method": (functools.partial(Client().get), "Client.get"),
    "lambda": (lambda page: f"page {page}", "<lambda>"),
    "callable-object": (Fetcher(), "Fetcher"),
    "async-callable-object": (AsyncFetcher(), "AsyncFetcher"),
    "partial-of-an-async-callable-object": (functools.partial(AsyncFetcher()), "AsyncFetcher"),
    "builtin": (str, "str"),
}


@pytest.mark.parametrize("kind", sorted(NAMED))
def test_the_default_name_is_readable_whatever_the_callable(
    runtime: asyncop.Runtime, kind: str
) -> None:
    fn, name = NAMED[kind]
    holder = runtime.create(lambda op, ctx: None, name="holder")
    op = runtime.create(fn, parent=holder)  # made, never run: dump() shows it for sure
    text = runtime.dump()
    holder.cancel()
    assert op.name.endswith(name)
    assert "0x" not in op.name
    assert f" {op.name} [CREATED]" in text
    assert runtime.run(fn, 7) in ("page 7", "7")  # an async __call__ runs as a task


def test_operations_asyncop_makes_are_placed_at_the_line_that_caused_them(
    runtime: asyncop.Runtime,
) -> None:
    from asyncop import net

    async def handler(stream: Any) -> None:
        await stream.receive_some()  # held open until the client leaves

    def subtree(op: AsyncOperation) -> list[AsyncOperation]:
        found = [op]
        for child in op.children():
            found += subtree(child)
        return found

    async def main() -> tuple[int, list[tuple[str, str, int]]]:
        async with asyncop.scope() as s:
            serve = functools.partial(net.serve_tcp, host="127.0.0.1")
            line = this_line() + 1
            listeners = await s.start(serve, handler, 0)
            [server] = s.children()
            port = listeners[0].socket.getsockname()[1]
            async with await net.open_tcp_stream("127.0.0.1", port):
                while not any(op.name.startswith("connection") for op in subtree(server)):
                    await asyncop.sleep(0.01)
                made = [(op.name, op.filename, op.lineno) for op in subtree(server)]
            s.cancel()
        return line, made

    line, made = runtime.run(main)
    # The server, its scope, its accept loop and the connection: all asyncop's
    # own code, all placed at the user's start() call (never at threading.py).
    assert len(made) >= 4, made
    assert [(filename, lineno) for _, filename, lineno in made] == [(__file__, line)] * len(made)


# ----------------------------------------------------------------------
# Deadlines
# ----------------------------------------------------------------------


def test_deadline_is_none_by_default(runtime: asyncop.Runtime) -> None:
    assert runtime.create(lambda op, ctx: None).deadline is None


def test_deadline_can_be_set_and_read(runtime: asyncop.Runtime) -> None:
    op = runtime.create(lambda op, ctx: None)
    deadline = runtime.now() + 3600
    op.deadline = deadline
    assert op.deadline == deadline
    op.deadline = None
    assert op.deadline is None


def test_passed_deadline_of_a_created_op_ends_it_cancelled_and_expired(
    vruntime: asyncop.Runtime,
) -> None:
    op = vruntime.create(lambda op, ctx: None)
    op.deadline = vruntime.now() + 10
    assert op.wait(5).state is CANCELLED
    assert op.expired is True
    assert vruntime.now() >= 10


def test_deadline_already_passed_cancels_at_once(vruntime: asyncop.Runtime) -> None:
    op = vruntime.create(lambda op, ctx: None)
    op.deadline = vruntime.now() - 1
    assert op.state is CANCELLED
    assert op.expired is True


def test_deadline_cancels_the_whole_subtree(vruntime: asyncop.Runtime) -> None:
    parent = vruntime.create(lambda op, ctx: None, name="parent")
    child = vruntime.create(lambda op, ctx: None, parent=parent, name="child")
    grandchild = vruntime.create(lambda op, ctx: None, parent=child, name="grandchild")
    parent.deadline = vruntime.now() + 5
    assert parent.wait(5).state is CANCELLED
    assert parent.expired is True
    assert [child.state, grandchild.state] == [CANCELLED, CANCELLED]
    assert child.token.cancelled and grandchild.token.cancelled


@contextlib.contextmanager
def clock_held(runtime: asyncop.Runtime) -> Iterator[None]:
    """Keep one worker busy, so an autojumping clock stands still meanwhile."""
    release = threading.Event()
    started = threading.Event()

    def hold() -> None:
        started.set()
        release.wait(10)

    holder = runtime.spawn(hold, name="holder")
    try:
        assert started.wait(5)
        yield
    finally:
        release.set()
        holder.wait(5)


def test_moved_deadline_is_the_one_that_fires(vruntime: asyncop.Runtime) -> None:
    op = vruntime.create(lambda op, ctx: None)
    with clock_held(vruntime):
        op.deadline = vruntime.now() + 10
        op.deadline = vruntime.now() + 100
    assert op.wait(5).state is CANCELLED
    assert op.expired is True
    assert vruntime.now() >= 100


def test_cleared_deadline_never_fires(vruntime: asyncop.Runtime) -> None:
    op = vruntime.create(lambda op, ctx: None)
    with clock_held(vruntime):
        op.deadline = vruntime.now() + 10
        op.deadline = None
    with pytest.raises(TimeoutError):
        op.wait(0.1)
    assert op.state is CREATED
    assert op.expired is False


def test_running_sync_op_whose_deadline_passes_ends_cancelled(
    runtime: asyncop.Runtime,
) -> None:
    started = threading.Event()

    def work() -> None:
        started.set()
        wait_for_cancel()

    op = runtime.spawn(work)
    assert started.wait(5)
    op.deadline = runtime.now() + 0.05
    assert op.wait(5).state is CANCELLED
    assert op.expired is True


def test_plain_cancel_does_not_mark_expired(runtime: asyncop.Runtime) -> None:
    op = runtime.create(lambda op, ctx: None)
    op.cancel()
    assert op.expired is False


# ----------------------------------------------------------------------
# Shield
# ----------------------------------------------------------------------


def test_shield_is_false_by_default(runtime: asyncop.Runtime) -> None:
    assert runtime.create(lambda op, ctx: None).shield is False


def test_cancel_of_the_parent_does_not_enter_a_shielded_child(
    runtime: asyncop.Runtime,
) -> None:
    parent = runtime.create(lambda op, ctx: None, name="parent")
    child = runtime.create(lambda op, ctx: None, parent=parent, name="shielded")
    grandchild = runtime.create(lambda op, ctx: None, parent=child, name="inside")
    child.shield = True
    assert child.shield is True
    parent.cancel()
    assert parent.token.cancelled is True
    assert child.token.cancelled is False
    assert grandchild.token.cancelled is False
    assert (child.state, grandchild.state) == (CREATED, CREATED)
    assert parent.done is False  # it still waits for its shielded child
    child.cancel()
    assert parent.wait(5).state is CANCELLED


def test_own_cancel_of_a_shielded_child_enters_it(runtime: asyncop.Runtime) -> None:
    parent = runtime.create(lambda op, ctx: None, name="parent")
    child = runtime.create(lambda op, ctx: None, parent=parent, name="shielded")
    grandchild = runtime.create(lambda op, ctx: None, parent=child, name="inside")
    child.shield = True
    child.cancel()
    assert child.state is CANCELLED
    assert grandchild.state is CANCELLED
    assert parent.token.cancelled is False
    parent.cancel()


def test_shielded_running_child_keeps_running_when_the_parent_is_cancelled(
    runtime: asyncop.Runtime,
) -> None:
    release = threading.Event()
    child_started = threading.Event()
    shielded = threading.Event()
    children: list[AsyncOperation] = []

    def child() -> bool:
        child_started.set()
        release.wait(10)
        return me().token.cancelled

    def parent() -> None:
        op = me()
        kid = op.spawn(child)
        kid.shield = True
        children.append(kid)
        shielded.set()
        op.token.wait(10)

    op = runtime.spawn(parent)
    assert shielded.wait(5)
    assert child_started.wait(5)
    op.cancel()
    assert children[0].token.cancelled is False
    release.set()
    assert children[0].wait(5) == AsyncResult(COMPLETED, False, None)
    op.wait(5)


def test_own_deadline_of_a_shielded_child_still_fires(vruntime: asyncop.Runtime) -> None:
    parent = vruntime.create(lambda op, ctx: None, name="parent")
    child = vruntime.create(lambda op, ctx: None, parent=parent, name="shielded")
    child.shield = True
    child.deadline = vruntime.now() + 5
    assert child.wait(5).state is CANCELLED
    assert child.expired is True
    parent.cancel()


# ----------------------------------------------------------------------
# Context variables and current_operation()
# ----------------------------------------------------------------------


def test_context_variables_are_copied_into_the_operation(runtime: asyncop.Runtime) -> None:
    reset = request_id.set("req-1")
    try:
        op = runtime.spawn(request_id.get)
    finally:
        request_id.reset(reset)
    assert op.wait(5).value == "req-1"


def test_context_change_in_the_callback_does_not_leak_back(runtime: asyncop.Runtime) -> None:
    def change() -> str:
        request_id.set("changed inside")
        return request_id.get()

    reset = request_id.set("outer")
    try:
        assert runtime.spawn(change).wait(5).value == "changed inside"
        assert request_id.get() == "outer"
    finally:
        request_id.reset(reset)


def test_context_change_in_one_operation_does_not_reach_another(
    runtime: asyncop.Runtime,
) -> None:
    def change() -> None:
        request_id.set("changed")

    runtime.spawn(change).wait(5)
    assert runtime.spawn(request_id.get).wait(5).value == "unset"


def test_child_sees_the_context_of_its_parent(runtime: asyncop.Runtime) -> None:
    def parent() -> AsyncOperation:
        request_id.set("from parent")
        return me().spawn(request_id.get)

    child = runtime.spawn(parent).wait(5).value
    assert child.wait(5).value == "from parent"


def test_context_is_copied_when_the_operation_is_made(runtime: asyncop.Runtime) -> None:
    reset = request_id.set("at create")
    try:
        op = runtime.create(lambda op, ctx: request_id.get())
        request_id.set("after create")
        runtime.submit(op)
        assert op.wait(5).value == "at create"
    finally:
        request_id.reset(reset)


def test_current_operation_inside_a_callback_is_the_operation(
    runtime: asyncop.Runtime,
) -> None:
    op = runtime.create(lambda op, ctx: current_operation() is op)
    runtime.submit(op)
    assert op.wait(5).value is True


def test_current_operation_inside_spawned_work_is_the_operation(
    runtime: asyncop.Runtime,
) -> None:
    op = runtime.spawn(current_operation)
    assert op.wait(5).value is op


def test_current_operation_outside_any_operation_is_none(runtime: asyncop.Runtime) -> None:
    runtime.spawn(lambda: None).wait(5)
    assert current_operation() is None


def test_current_operation_in_a_child_is_the_child(runtime: asyncop.Runtime) -> None:
    def parent() -> AsyncOperation:
        return me().spawn(current_operation)

    child = runtime.spawn(parent).wait(5).value
    assert child.wait(5).value is child


# ----------------------------------------------------------------------
# The two shapes of work
# ----------------------------------------------------------------------


def test_create_calls_the_callback_with_the_operation_and_context(
    runtime: asyncop.Runtime,
) -> None:
    calls: list[tuple[Any, ...]] = []
    context = {"page": 7}

    def callback(*args: Any) -> str:
        calls.append(args)
        return "ok"

    op = runtime.create(callback, context)
    runtime.submit(op)
    assert op.wait(5).value == "ok"
    assert len(calls) == 1
    assert calls[0][0] is op
    assert calls[0][1] is context


def test_create_context_defaults_to_none(runtime: asyncop.Runtime) -> None:
    op = runtime.create(lambda op, ctx: ctx)
    runtime.submit(op)
    assert op.wait(5) == AsyncResult(COMPLETED, None, None)


def test_spawn_calls_the_function_with_its_arguments(runtime: asyncop.Runtime) -> None:
    calls: list[tuple[Any, ...]] = []

    def fn(*args: Any) -> str:
        calls.append(args)
        return "ok"

    assert runtime.spawn(fn, 1, "two", None).wait(5).value == "ok"
    assert calls == [(1, "two", None)]


def test_op_spawn_calls_the_function_with_its_arguments(runtime: asyncop.Runtime) -> None:
    def parent() -> AsyncOperation:
        return me().spawn(lambda a, b: a - b, 10, 3)

    child = runtime.spawn(parent).wait(5).value
    assert child.wait(5).value == 7


def test_op_spawn_links_the_child_under_the_operation(runtime: asyncop.Runtime) -> None:
    parent = runtime.create(lambda op, ctx: None, name="parent")
    release = threading.Event()
    child = parent.spawn(release.wait, 10, name="child")
    try:
        assert child.parent is parent
        assert parent.children() == [child]
    finally:
        release.set()
    child.wait(5)
    parent.cancel()


def test_create_with_parent_links_the_operation_under_it(runtime: asyncop.Runtime) -> None:
    parent = runtime.create(lambda op, ctx: None, name="parent")
    child = runtime.create(lambda op, ctx: None, parent=parent, name="child")
    assert child.parent is parent
    assert parent.first_child is child
    assert child.runtime is runtime
    parent.cancel()


def test_an_operation_is_neither_pickled_nor_copied(runtime: asyncop.Runtime) -> None:
    import copy
    import pickle

    async def work() -> int:
        return 1

    op = runtime.spawn(work, name="shipped")
    op.wait(10)
    for attempt in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="operation 'shipped' cannot be pickled or copied"):
            attempt(op)
    assert op.result() == 1  # untouched
