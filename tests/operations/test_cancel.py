"""cancel(): unstarted nodes end at once, running ones learn through their token."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import pytest

import asyncop
from asyncop import AsyncOperation, AsyncResult, Cancelled, OperationState, current_operation

pytestmark = pytest.mark.timeout(30)

CREATED = OperationState.CREATED
PENDING = OperationState.PENDING
RUNNING = OperationState.RUNNING
COMPLETED = OperationState.COMPLETED
CANCELLED = OperationState.CANCELLED


def me() -> AsyncOperation:
    op = current_operation()
    assert op is not None
    return op


def noop(op: AsyncOperation, context: object) -> None:
    return None


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


def running_until_cancelled(
    spawn: Callable[..., AsyncOperation], name: str
) -> tuple[AsyncOperation, threading.Event]:
    """Spawn work that runs until its token is cancelled, then raises Cancelled."""
    started = threading.Event()

    def work() -> None:
        token = me().token
        started.set()
        token.wait(10)
        token.check()

    op = spawn(work, name=name)
    return op, started


# ----------------------------------------------------------------------
# CREATED and PENDING: cancelled at once, never run
# ----------------------------------------------------------------------


def test_cancel_of_a_created_operation_ends_it_cancelled_at_once(
    runtime: asyncop.Runtime,
) -> None:
    op = runtime.create(noop)
    op.cancel()
    assert op.state is CANCELLED
    assert op.done is True


def test_cancelled_created_operation_never_runs() -> None:
    ran: list[bool] = []
    with asyncop.Runtime(2, name="created-never-runs") as rt:
        parent = rt.create(noop, name="parent")
        child = rt.create(lambda op, ctx: ran.append(True), parent=parent, name="child")
        child.cancel()
        rt.submit(parent)
        parent.wait(5)
    assert ran == []
    assert child.state is CANCELLED


def test_cancel_of_a_pending_operation_ends_it_cancelled_at_once(
    runtime: asyncop.Runtime,
) -> None:
    op = runtime.create(noop)
    with workers_busy(runtime):
        runtime.submit(op)
        assert op.state is PENDING
        op.cancel()
        assert op.state is CANCELLED
    assert op.wait(5).state is CANCELLED


def test_cancelled_pending_operation_never_runs() -> None:
    ran: list[str] = []
    with asyncop.Runtime(2, name="pending-never-runs") as rt:
        with workers_busy(rt):
            op = rt.spawn(ran.append, "cancelled", name="queued")
            assert op.state is PENDING
            op.cancel()
        rt.spawn(ran.append, "later", name="later").wait(5)
    # The runtime has shut down and joined its workers: whatever was queued
    # has been popped by now.
    assert op.state is CANCELLED
    assert ran == ["later"]


def test_cancelled_created_child_unlinks_at_once(runtime: asyncop.Runtime) -> None:
    parent = runtime.create(noop, name="parent")
    first = runtime.create(noop, parent=parent, name="first")
    second = runtime.create(noop, parent=parent, name="second")
    first.cancel()
    assert parent.children() == [second]
    assert first.parent is None
    assert first.sibling_next is None
    parent.cancel()


def test_cancelled_pending_child_unlinks_at_once(runtime: asyncop.Runtime) -> None:
    parent = runtime.create(noop, name="parent")
    child = runtime.create(noop, parent=parent, name="child")
    with workers_busy(runtime):
        runtime.submit(child)
        assert child.state is PENDING
        child.cancel()
        assert parent.children() == []
        assert child.parent is None
    parent.cancel()


def test_cancel_of_a_created_parent_ends_it_and_its_unstarted_children_at_once(
    runtime: asyncop.Runtime,
) -> None:
    parent = runtime.create(noop, name="parent")
    kids = [runtime.create(noop, parent=parent, name=f"kid{i}") for i in range(3)]
    parent.cancel()
    assert parent.state is CANCELLED
    assert [kid.state for kid in kids] == [CANCELLED] * 3


# ----------------------------------------------------------------------
# RUNNING: the token is cancelled, the work decides how it ends
# ----------------------------------------------------------------------


def test_cancel_of_a_running_operation_cancels_its_token(runtime: asyncop.Runtime) -> None:
    op, started = running_until_cancelled(runtime.spawn, "worker")
    assert started.wait(5)
    assert op.token.cancelled is False
    op.cancel()
    assert op.token.cancelled is True
    op.wait(5)


def test_running_callback_that_lets_cancelled_escape_ends_cancelled(
    runtime: asyncop.Runtime,
) -> None:
    op, started = running_until_cancelled(runtime.spawn, "worker")
    assert started.wait(5)
    op.cancel()
    assert op.wait(5) == AsyncResult(CANCELLED, None, None)


def test_running_callback_that_returns_after_cancel_ends_completed_with_its_value(
    runtime: asyncop.Runtime,
) -> None:
    started = threading.Event()

    def work() -> str:
        started.set()
        me().token.wait(10)
        return "finished anyway"

    op = runtime.spawn(work)
    assert started.wait(5)
    op.cancel()
    assert op.wait(5) == AsyncResult(COMPLETED, "finished anyway", None)


def test_running_callback_can_catch_cancelled_from_check(runtime: asyncop.Runtime) -> None:
    started = threading.Event()

    def work() -> str:
        token = me().token
        started.set()
        token.wait(10)
        try:
            token.check()
        except Cancelled:
            return "caught"
        return "not cancelled"

    op = runtime.spawn(work)
    assert started.wait(5)
    op.cancel()
    assert op.wait(5).value == "caught"


def test_cancel_of_a_running_operation_does_not_end_it_at_once(
    runtime: asyncop.Runtime,
) -> None:
    release = threading.Event()
    started = threading.Event()

    def work() -> None:
        started.set()
        release.wait(10)

    op = runtime.spawn(work)
    assert started.wait(5)
    op.cancel()
    assert op.state is RUNNING
    release.set()
    op.wait(5)


# ----------------------------------------------------------------------
# Reason, idempotence, threads
# ----------------------------------------------------------------------


def test_cancel_reason_is_kept(runtime: asyncop.Runtime) -> None:
    op = runtime.create(noop)
    op.cancel("user pressed stop")
    assert op.cancel_reason == "user pressed stop"


def test_cancel_reason_is_none_by_default(runtime: asyncop.Runtime) -> None:
    op = runtime.create(noop)
    assert op.cancel_reason is None
    op.cancel()
    assert op.cancel_reason is None


def test_result_of_a_cancelled_operation_names_its_reason(runtime: asyncop.Runtime) -> None:
    op = runtime.create(noop, name="download")
    op.cancel("user pressed stop")
    with pytest.raises(asyncop.CancellationError, match=r"'download'.*user pressed stop") as info:
        op.result()
    assert info.value.reason == "user pressed stop"


def test_result_of_an_operation_cancelled_without_reason_says_none(
    runtime: asyncop.Runtime,
) -> None:
    op = runtime.create(noop, name="download")
    op.cancel()
    with pytest.raises(asyncop.CancellationError) as info:
        op.result()
    assert info.value.reason is None
    assert "None" not in str(info.value) and "()" not in str(info.value)


def test_awaiting_a_cancelled_operation_names_its_reason(runtime: asyncop.Runtime) -> None:
    async def sleeper() -> None:
        await asyncop.sleep_forever()

    async def main() -> str:
        victim = me().spawn(sleeper, name="victim")
        await asyncop.sleep(0)
        victim.cancel("shutting down")
        try:
            await victim
        except asyncop.CancellationError as exc:
            assert exc.reason == "shutting down"
            return str(exc)
        raise AssertionError("await of a cancelled operation returned")

    assert "shutting down" in runtime.run(main)


def test_a_deadline_shows_as_the_reason_of_the_no_result_error() -> None:
    with asyncop.Runtime(workers=1) as rt:

        async def slow() -> None:
            await asyncop.sleep_forever()

        op = rt.spawn(slow, name="slow")
        op.deadline = time.monotonic() + 0.01
        op.wait()
        with pytest.raises(asyncop.CancellationError, match="deadline passed"):
            op.result()


def test_a_reason_whose_str_raises_does_not_break_the_no_result_error(
    runtime: asyncop.Runtime,
) -> None:
    class Sulky:
        def __str__(self) -> str:
            raise RuntimeError("no")

    op = runtime.create(noop, name="download")
    op.cancel(Sulky())
    with pytest.raises(asyncop.CancellationError, match="Sulky reason"):
        op.result()


def test_dump_shows_the_cancel_reason_of_a_running_operation(
    runtime: asyncop.Runtime,
) -> None:
    op, started = running_until_cancelled(runtime.spawn, "slow-fetch")
    assert started.wait(5)
    release = threading.Event()

    def slow_cleanup() -> None:
        release.wait(10)

    # A shielded child keeps the operation live after the cancel, so that
    # dump() still shows it.
    child = op.spawn(slow_cleanup, name="cleanup")
    child.shield = True
    try:
        op.cancel("switched page")
        text = runtime.dump()
        assert "slow-fetch" in text
        assert "switched page" in text
    finally:
        release.set()
    op.wait(5)


def test_cancel_is_idempotent(runtime: asyncop.Runtime) -> None:
    calls: list[int] = []
    op, started = running_until_cancelled(runtime.spawn, "worker")
    assert started.wait(5)
    op.token.on_cancel(lambda: calls.append(1))
    op.cancel("first")
    op.cancel("second")
    assert op.wait(5).state is CANCELLED
    op.cancel("third")
    assert op.state is CANCELLED
    assert op.cancel_reason == "first"
    assert calls == [1]


def test_cancel_twice_of_a_created_operation_keeps_it_cancelled(
    runtime: asyncop.Runtime,
) -> None:
    op = runtime.create(noop)
    op.cancel()
    op.cancel()
    assert op.state is CANCELLED


def test_cancel_of_a_completed_operation_keeps_its_value(runtime: asyncop.Runtime) -> None:
    op = runtime.spawn(lambda: "value")
    op.wait(5)
    op.cancel()
    assert op.wait(0) == AsyncResult(COMPLETED, "value", None)


def test_cancel_from_another_thread_ends_a_created_operation(
    runtime: asyncop.Runtime,
) -> None:
    op = runtime.create(noop)
    thread = threading.Thread(target=op.cancel, args=("from thread",))
    thread.start()
    thread.join(5)
    assert op.state is CANCELLED
    assert op.cancel_reason == "from thread"


def test_cancel_from_another_thread_stops_a_running_operation(
    runtime: asyncop.Runtime,
) -> None:
    op, started = running_until_cancelled(runtime.spawn, "worker")
    assert started.wait(5)
    thread = threading.Thread(target=op.cancel)
    thread.start()
    thread.join(5)
    assert op.wait(5).state is CANCELLED


def test_cancel_from_inside_the_operation_sets_its_own_token(
    runtime: asyncop.Runtime,
) -> None:
    def work() -> None:
        op = me()
        op.cancel("self")
        op.token.check()

    assert runtime.spawn(work).wait(5).state is CANCELLED


def test_every_token_in_the_subtree_is_set_when_cancel_returns(
    runtime: asyncop.Runtime,
) -> None:
    root = runtime.create(noop, name="root")
    running_child, child_started = running_until_cancelled(root.spawn, "running-child")
    created_child = runtime.create(noop, parent=root, name="created-child")
    grandchild, grandchild_started = running_until_cancelled(created_child.spawn, "grandchild")
    unstarted = runtime.create(noop, parent=grandchild, name="unstarted")
    assert child_started.wait(5)
    assert grandchild_started.wait(5)
    nodes = [root, running_child, created_child, grandchild, unstarted]
    root.cancel()
    assert [node.token.cancelled for node in nodes] == [True] * 5
    assert root.wait(5).state is CANCELLED
    assert all(node.state is CANCELLED for node in nodes)


# ----------------------------------------------------------------------
# Born cancelled
# ----------------------------------------------------------------------


def test_child_spawned_into_a_cancelled_running_parent_is_born_cancelled() -> None:
    ran: list[bool] = []
    seen: list[tuple[OperationState, bool]] = []
    started = threading.Event()

    def parent() -> None:
        op = me()
        started.set()
        op.token.wait(10)
        child = op.spawn(ran.append, True, name="late-child")
        seen.append((child.state, child.token.cancelled))

    with asyncop.Runtime(2, name="born-cancelled") as rt:
        op = rt.spawn(parent)
        assert started.wait(5)
        op.cancel()
        assert op.wait(5).state is COMPLETED
    assert seen == [(CANCELLED, True)]
    assert ran == []


def test_child_created_under_a_cancelled_running_parent_is_born_cancelled(
    runtime: asyncop.Runtime,
) -> None:
    op, started = running_until_cancelled(runtime.spawn, "parent")
    assert started.wait(5)
    release = threading.Event()
    keep_live = op.spawn(release.wait, 10, name="keeper")
    keep_live.shield = True
    try:
        op.cancel()
        child = runtime.create(noop, parent=op, name="late-child")
        assert child.state is CANCELLED
        assert child.token.cancelled is True
        assert child not in op.children()
    finally:
        release.set()
    op.wait(5)


# ----------------------------------------------------------------------
# Scale: deep chains and wide fans
# ----------------------------------------------------------------------


def build_chain(runtime: asyncop.Runtime, depth: int) -> list[AsyncOperation]:
    chain = [runtime.create(noop, name="link")]
    for _ in range(depth - 1):
        chain.append(runtime.create(noop, parent=chain[-1], name="link"))
    return chain


def test_cancel_of_a_100000_deep_chain_ends_every_node_cancelled(
    runtime: asyncop.Runtime,
) -> None:
    chain = build_chain(runtime, 100_000)
    chain[0].cancel()
    assert all(op.state is CANCELLED for op in chain)
    assert all(op.token.cancelled for op in chain)


def test_cancel_of_the_leaf_of_a_deep_chain_leaves_its_ancestors(
    runtime: asyncop.Runtime,
) -> None:
    chain = build_chain(runtime, 1_000)
    chain[-1].cancel()
    assert chain[-1].state is CANCELLED
    assert chain[-2].first_child is None
    assert chain[-2].state is CREATED
    chain[0].cancel()
    assert all(op.state is CANCELLED for op in chain)


def test_cancel_of_100000_created_siblings_is_fast(runtime: asyncop.Runtime) -> None:
    parent = runtime.create(noop, name="parent")
    kids = [runtime.create(noop, parent=parent, name="kid") for _ in range(100_000)]
    start = time.perf_counter()
    parent.cancel()
    elapsed = time.perf_counter() - start
    assert elapsed < 10.0, f"cancelling 100k siblings took {elapsed:.2f} s"
    assert parent.state is CANCELLED
    assert all(kid.state is CANCELLED for kid in kids)


def time_children_ending(runtime: asyncop.Runtime, count: int) -> float:
    """Seconds for ``count`` children of one parent to end, last-spawned first.

    Ending from the tail is the worst case for an unlink that walks the
    sibling list from the head: it would make the whole run quadratic.
    """
    parent = runtime.create(noop, name="parent")
    kids = [runtime.create(noop, parent=parent, name="kid") for _ in range(count)]
    start = time.perf_counter()
    for kid in reversed(kids):
        kid.cancel()
    elapsed = time.perf_counter() - start
    assert parent.first_child is None
    parent.cancel()
    return elapsed


def test_children_ending_under_one_parent_cost_linear_time(runtime: asyncop.Runtime) -> None:
    small = min(time_children_ending(runtime, 10_000) for _ in range(3))
    large = min(time_children_ending(runtime, 100_000) for _ in range(2))
    # 10x the children: linear is ~10x, quadratic ~100x.
    assert large <= 30 * max(small, 0.002), f"10k: {small:.4f} s, 100k: {large:.4f} s"
