"""Leaving a scope under a cancel from outside raises ``Cancelled``.

When the operation around ``async with asyncop.scope()`` (or a sync ``with
rt.scope()`` inside an operation) is cancelled by something outside the
scope, the exit waits for the children and then raises ``Cancelled``: the
code after the block never runs. A scope's own cancel still stops at the
scope, and from a plain thread the sync exit only waits.
"""

from __future__ import annotations

import _thread
import os
import random
import threading
import time
from typing import Any

import pytest

import asyncop
from asyncop import Cancelled, OperationState

pytestmark = pytest.mark.timeout(60)


async def park_forever(
    log: list[Any], label: str, started: threading.Semaphore | None = None
) -> None:
    """A child that waits until it is cancelled, and says so.

    It releases ``started`` first, if given: a child cancelled before its
    first step never runs, so a test that wants the cancel to reach a
    running child waits for that.
    """
    if started is not None:
        started.release()
    try:
        await asyncop.Event().wait_async()
    except Cancelled:
        log.append((label, "cancelled"))
        raise


def poll_token_until_cancelled(
    log: list[Any], label: str, started: threading.Semaphore | None = None
) -> None:
    """A sync child that ends when its token is cancelled (``started``: as above)."""
    if started is not None:
        started.release()
    op = asyncop.current_operation()
    assert op is not None
    op.token.wait(30)
    log.append((label, "cancelled" if op.token.cancelled else "timed out"))


# ----------------------------------------------------------------------
# async with: a cancel of the task from outside
# ----------------------------------------------------------------------


def test_task_cancelled_at_the_scope_exit_raises_and_skips_the_code_after(
    runtime: asyncop.Runtime,
) -> None:
    log: list[Any] = []
    at_exit = threading.Event()
    started = threading.Semaphore(0)

    async def worker() -> str:
        async with asyncop.scope() as g:
            g.spawn(park_forever, log, "a", started)
            g.spawn(park_forever, log, "b", started)
            at_exit.set()
        log.append("commit")  # must not run on half the work
        return "done"

    op = runtime.spawn(worker)
    assert at_exit.wait(10)
    assert started.acquire(timeout=10) and started.acquire(timeout=10)
    op.cancel("stop")
    result = op.wait(10)
    assert sorted(log) == [("a", "cancelled"), ("b", "cancelled")]
    assert result.state is OperationState.CANCELLED


def test_cancelled_scope_exit_raises_cancelled_into_the_task(runtime: asyncop.Runtime) -> None:
    seen: list[Any] = []
    at_exit = threading.Event()

    async def worker() -> None:
        try:
            async with asyncop.scope() as g:
                g.spawn(park_forever, [], "a")
                at_exit.set()
        except BaseException as exc:
            seen.append(exc)
            raise
        seen.append("after")

    op = runtime.spawn(worker)
    assert at_exit.wait(10)
    op.cancel("user pressed stop")
    assert op.wait(10).state is OperationState.CANCELLED
    assert len(seen) == 1 and isinstance(seen[0], Cancelled)
    assert "user pressed stop" in str(seen[0])


def test_cancel_while_the_exit_waits_for_sync_children(runtime: asyncop.Runtime) -> None:
    log: list[Any] = []
    at_exit = threading.Event()
    started = threading.Semaphore(0)

    async def worker() -> None:
        async with asyncop.scope() as g:
            g.spawn(poll_token_until_cancelled, log, "thread child", started)
            at_exit.set()
        log.append("after")

    op = runtime.spawn(worker)
    assert at_exit.wait(10)
    assert started.acquire(timeout=10)
    op.cancel()
    assert op.wait(10).state is OperationState.CANCELLED
    assert log == [("thread child", "cancelled")]


def test_parent_task_cancel_reaches_a_child_task_waiting_at_its_scope_exit(
    runtime: asyncop.Runtime,
) -> None:
    log: list[Any] = []
    at_exit = threading.Event()
    started = threading.Semaphore(0)

    async def child() -> None:
        async with asyncop.scope() as g:
            g.spawn(park_forever, log, "grandchild", started)
            at_exit.set()
        log.append("child after its block")

    async def parent() -> None:
        async with asyncop.scope() as g:
            g.spawn(child)
        log.append("parent after its block")

    op = runtime.spawn(parent)
    assert at_exit.wait(10)
    assert started.acquire(timeout=10)
    op.cancel()
    assert op.wait(10).state is OperationState.CANCELLED
    assert log == [("grandchild", "cancelled")]


def test_outer_deadline_while_inner_scope_waits_at_exit(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def main() -> str:
        try:
            async with asyncop.scope(timeout=5):
                async with asyncop.scope() as inner:
                    inner.spawn(park_forever, log, "child")
                log.append("between the blocks")
                await asyncop.sleep(100)
        except TimeoutError as exc:
            log.append("timeout")
            assert isinstance(exc.__cause__, Cancelled)
            assert "deadline" in str(exc.__cause__)
        return "finished"

    assert vruntime.run(main) == "finished"
    assert log == [("child", "cancelled"), "timeout"]


def test_shield_switched_on_while_an_outer_cancel_unwinds_does_not_swallow_it(
    runtime: asyncop.Runtime,
) -> None:
    log: list[Any] = []
    inside = threading.Event()

    async def worker() -> None:
        async with asyncop.scope() as s:
            try:
                inside.set()
                await asyncop.Event().wait_async()
            finally:
                s.shield = True  # too late: the cancel came from outside already
        log.append("after the block")

    op = runtime.spawn(worker)
    assert inside.wait(10)
    op.cancel()
    assert op.wait(10).state is OperationState.CANCELLED
    assert log == []


def test_scope_opened_in_a_cancelled_task_raises_at_its_exit(runtime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def worker() -> None:
        me = asyncop.current_operation()
        assert me is not None
        me.cancel()
        async with asyncop.scope() as g:  # entering is not a cancellation point
            log.append(("body", g.token.cancelled))
            kid = g.spawn(park_forever, log, "kid")
        log.append(("after", kid.state))

    assert runtime.spawn(worker).wait(10).state is OperationState.CANCELLED
    assert log == [("body", True)]


# ----------------------------------------------------------------------
# Unchanged: the scope's own cancel and deadline stop at the scope
# ----------------------------------------------------------------------


def test_own_cancel_stops_at_the_scope_and_the_task_goes_on(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def main() -> str:
        async with asyncop.scope() as s:
            s.spawn(park_forever, log, "child")
            await asyncop.sleep(1)
            s.cancel("enough")
            await asyncop.sleep(1)
            log.append("not reached")
        log.append("after")
        await asyncop.sleep(1)
        return "value"

    assert vruntime.run(main) == "value"
    assert log == [("child", "cancelled"), "after"]


def test_own_deadline_raises_timeout_and_the_task_goes_on(vruntime: asyncop.Runtime) -> None:
    async def main() -> str:
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=1) as s:
                s.spawn(park_forever, [], "child")
        await asyncop.sleep(1)
        return "value"

    assert vruntime.run(main) == "value"


def test_shielded_scope_keeps_the_outside_cancel_out_until_its_exit(
    runtime: asyncop.Runtime,
) -> None:
    log: list[Any] = []
    inside = threading.Event()
    release = asyncop.Event()

    async def worker() -> None:
        async with asyncop.scope(shield=True):
            inside.set()
            await release.wait_async()
            log.append("shielded body finished")
        log.append("after the shielded block")
        await asyncop.checkpoint()
        log.append("not reached")

    op = runtime.spawn(worker)
    assert inside.wait(10)
    op.cancel()
    release.set()
    assert op.wait(10).state is OperationState.CANCELLED
    assert log == ["shielded body finished", "after the shielded block"]


# ----------------------------------------------------------------------
# with rt.scope() inside a sync operation: the exit is a cancellation point
# ----------------------------------------------------------------------


def test_sync_scope_exit_in_a_callback_raises_cancelled_soon_after_the_cancel(
    runtime: asyncop.Runtime,
) -> None:
    log: list[Any] = []
    at_exit = threading.Event()
    raised_at: list[float] = []

    async def task_child() -> None:
        started.release()
        await park_forever(log, "task child")

    def sync_child() -> None:
        started.release()
        poll_token_until_cancelled(log, "sync child")

    started = threading.Semaphore(0)

    def callback() -> None:
        with runtime.scope() as s:
            s.spawn(sync_child)
            s.spawn(task_child)
            assert started.acquire(timeout=10) and started.acquire(timeout=10)
            at_exit.set()
        log.append("after the block")

    op = runtime.spawn(callback)
    assert at_exit.wait(10)
    time.sleep(0.05)  # let the exit start waiting
    cancelled_at = time.monotonic()
    op.cancel()
    result = op.wait(10)
    raised_at.append(time.monotonic())
    assert result.state is OperationState.CANCELLED
    assert sorted(log) == [("sync child", "cancelled"), ("task child", "cancelled")]
    # 10 ms on an idle machine; generous here, the machine is shared.
    assert raised_at[0] - cancelled_at < 2.0


def test_sync_scope_exit_in_a_callback_raises_when_its_deadline_passes(
    runtime: asyncop.Runtime,
) -> None:
    log: list[Any] = []

    def callback() -> None:
        with runtime.scope() as s:
            s.spawn(poll_token_until_cancelled, log, "child")
        log.append("after the inner block")

    with pytest.raises(TimeoutError), runtime.scope(timeout=0.2) as outer:
        outer.spawn(callback)
    assert log == [("child", "cancelled")]


def test_sync_scope_exit_in_a_callback_with_a_deadline_of_its_own_op(
    runtime: asyncop.Runtime,
) -> None:
    log: list[Any] = []

    def callback() -> None:
        me = asyncop.current_operation()
        assert me is not None
        me.deadline = runtime.now() + 0.2
        with runtime.scope() as s:
            s.spawn(poll_token_until_cancelled, log, "child")
        log.append("after the block")

    result = runtime.spawn(callback).wait(10)
    assert result.state is OperationState.CANCELLED
    assert log == [("child", "cancelled")]


@pytest.mark.timeout(120)
def test_a_deadline_fires_when_the_worker_woken_for_it_takes_a_blocking_callback() -> None:
    # Setting the deadline wakes the parked worker to park again on it; when
    # that worker then takes the child, which blocks, every worker is inside
    # a sync callback and the deadline must still fire. The window is narrow
    # (two threads must run side by side, as with the GIL off): repeat.
    # Under load the deadline may come before the child's first step; the
    # child then never runs (a task cancelled before its first step never
    # does), which is right but tries nothing: count the attempts it ran.
    ran = 0
    for attempt in range(20):
        rt = asyncop.Runtime(2, name=f"woken{attempt}-{id(object()):x}")
        log: list[Any] = []

        def child(log: list[Any] = log) -> None:
            log.append("ran")
            poll_token_until_cancelled(log, "child")

        def callback(rt: asyncop.Runtime = rt) -> None:
            me = asyncop.current_operation(require=True)
            me.deadline = rt.now() + 0.1
            with rt.scope() as s:
                s.spawn(child)

        try:
            result = rt.spawn(callback).wait(5)
            assert result.state is OperationState.CANCELLED, f"attempt {attempt}"
            assert log in ([], ["ran", ("child", "cancelled")]), f"attempt {attempt}: {log}"
            ran += bool(log)
        finally:
            rt.shutdown(cancel=True, timeout=10)
    assert ran > 0


def test_sync_scope_in_a_plain_thread_only_waits(runtime: asyncop.Runtime) -> None:
    log: list[Any] = []
    done = threading.Event()

    def plain_thread() -> None:
        with runtime.scope() as s:
            kid = s.spawn(poll_token_until_cancelled, log, "child")
            threading.Timer(0.1, s.cancel).start()
        log.append(("after", kid.state))
        done.set()

    threading.Thread(target=plain_thread).start()
    assert done.wait(10)
    assert log == [("child", "cancelled"), ("after", OperationState.COMPLETED)]


def test_sync_scope_own_cancel_in_a_callback_stops_at_the_scope(
    runtime: asyncop.Runtime,
) -> None:
    log: list[Any] = []

    started = threading.Event()

    def child() -> None:
        started.set()
        poll_token_until_cancelled(log, "child")

    def callback() -> str:
        with runtime.scope() as s:
            s.spawn(child)
            assert started.wait(10)
            s.cancel()
        log.append("after")
        return "value"

    assert runtime.spawn(callback).wait(10).value == "value"
    assert log == [("child", "cancelled"), "after"]


def test_sync_scope_exit_on_the_main_thread_notices_ctrl_c_promptly(
    runtime: asyncop.Runtime,
) -> None:
    assert threading.current_thread() is threading.main_thread()
    log: list[Any] = []
    # interrupt_main() raises KeyboardInterrupt the next time the main thread
    # runs Python code: a wait that never wakes up would not notice it.
    timer = threading.Timer(0.2, _thread.interrupt_main)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), runtime.scope() as s:
        s.spawn(poll_token_until_cancelled, log, "child")
        timer.start()
    elapsed = time.monotonic() - started
    timer.join()
    assert log == [("child", "cancelled")]
    assert elapsed < 0.2 + 1.5


# ----------------------------------------------------------------------
# Random timing: cancels landing anywhere around scope exits
# ----------------------------------------------------------------------


def _stress_seed() -> int:
    return int(os.environ.get("ASYNCOP_STRESS_SEED", random.randrange(2**32)))


async def _logged_sleep(log: list[Any], label: str, delay: float) -> None:
    try:
        await asyncop.sleep(delay)
    except Cancelled:
        log.append((label, "cancelled"))
        raise


async def _nested_scopes(log: list[Any], delays: list[float], nested: bool) -> str:
    async with asyncop.scope() as outer:
        outer.spawn(_logged_sleep, log, "o", delays[0])
        if nested:
            async with asyncop.scope() as inner:
                inner.spawn(_logged_sleep, log, "i", delays[1])
                await asyncop.sleep(delays[2])
            log.append("between")
        await asyncop.sleep(delays[3] / 4)
    log.append("after")
    return "value"


def test_cancels_at_random_points_around_async_scope_exits(runtime: asyncop.Runtime) -> None:
    seed = _stress_seed()
    rng = random.Random(seed)
    for round_no in range(60):
        log: list[Any] = []
        delays = [rng.random() * 0.004 for _ in range(4)]
        op = runtime.spawn(_nested_scopes, log, delays, rng.random() < 0.5)
        time.sleep(rng.random() * 0.008)
        op.cancel()
        result = op.wait(10)
        context = f"seed={seed} round={round_no} log={log} state={result.state}"
        assert result.state in (OperationState.COMPLETED, OperationState.CANCELLED), context
        if any(isinstance(entry, tuple) for entry in log):
            # A child saw the cancel, so it landed before the exit finished
            # waiting: the exit must raise, and no code after it runs.
            assert "after" not in log, context
            assert result.state is OperationState.CANCELLED, context
        if ("i", "cancelled") in log:
            assert "between" not in log, context
        if "after" in log:
            assert result.state is OperationState.COMPLETED, context
            assert result.value == "value", context


def _token_child(log: list[Any], label: str, seconds: float) -> None:
    op = asyncop.current_operation()
    assert op is not None
    if op.token.wait(seconds):
        log.append((label, "cancelled"))
        op.token.check()


def _sync_scope_callback(runtime: asyncop.Runtime, log: list[Any], seconds: float) -> str:
    with runtime.scope() as s:
        s.spawn(_token_child, log, "a", seconds)
        s.spawn(_token_child, log, "b", seconds)
    log.append("after")
    return "value"


def test_cancels_at_random_points_around_sync_scope_exits(runtime: asyncop.Runtime) -> None:
    seed = _stress_seed()
    rng = random.Random(seed)
    for round_no in range(40):
        log: list[Any] = []
        op = runtime.spawn(_sync_scope_callback, runtime, log, rng.random() * 0.006)
        time.sleep(rng.random() * 0.01)
        op.cancel()
        result = op.wait(10)
        context = f"seed={seed} round={round_no} log={log} state={result.state}"
        if any(isinstance(entry, tuple) for entry in log):
            assert "after" not in log, context
            assert result.state is OperationState.CANCELLED, context
        if "after" in log:
            assert result.state is OperationState.COMPLETED, context
