"""Reference: how a cancelled task unwinds, on trio and on asyncop."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ._adapters import Adapter, Log, per_task, run_asyncop, run_both, run_trio

pytestmark = pytest.mark.timeout(30)


def test_cancel_unwinds_finally_and_with_innermost_first() -> None:
    """Nested ``async def`` calls, ``finally`` blocks and ``with`` exits unwind innermost first."""

    async def scenario(ad: Adapter, log: Log) -> None:
        @contextmanager
        def resource(name: str) -> Iterator[None]:
            try:
                yield
            finally:
                log("worker", f"exit {name}")

        async def innermost() -> None:
            with resource("inner cm"):
                try:
                    log("worker", "sleeping")
                    await ad.sleep(10)
                    log("worker", "woke")  # never reached
                finally:
                    log("worker", "finally innermost")

        async def middle() -> None:
            try:
                await innermost()
                log("worker", "after innermost")  # never reached
            finally:
                log("worker", "finally middle")

        async def outer() -> None:
            with resource("outer cm"):
                try:
                    await middle()
                except ad.Cancelled:
                    log("worker", "outer saw Cancelled")
                    raise

        async with ad.scope() as s:
            s.spawn(outer)
            await ad.sleep(1)
            s.cancel()
        log("main", "scope exited")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio["worker"] == [
        (0.0, "sleeping"),
        (1.0, "finally innermost"),
        (1.0, "exit inner cm"),
        (1.0, "finally middle"),
        (1.0, "outer saw Cancelled"),
        (1.0, "exit outer cm"),
    ]
    assert on_asyncop == on_trio


def test_cancellation_is_level_triggered() -> None:
    """Catching ``Cancelled`` does not end the cancel: every later await raises again."""

    async def scenario(ad: Adapter, log: Log) -> None:
        async def stubborn() -> None:
            for attempt in range(3):
                try:
                    await ad.sleep(10)
                    log("worker", f"slept {attempt}")
                except ad.Cancelled:
                    log("worker", f"caught Cancelled {attempt}")
            log("worker", "gave up")  # falls off the end normally

        async with ad.scope() as s:
            s.spawn(stubborn)
            await ad.sleep(1)
            s.cancel()
        log("main", "scope exited")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "worker": [
            (1.0, "caught Cancelled 0"),
            (1.0, "caught Cancelled 1"),
            (1.0, "caught Cancelled 2"),
            (1.0, "gave up"),
        ],
        "main": [(1.0, "scope exited")],
    }
    assert on_asyncop == on_trio


def test_shielded_cleanup_awaits_inside_a_cancelled_task() -> None:
    """Cleanup in a shielded scope runs its awaits to the end; the next await raises again."""

    async def scenario(ad: Adapter, log: Log) -> None:
        async def worker() -> None:
            try:
                await ad.sleep(10)
            except ad.Cancelled:
                log("worker", "cancelled")
                async with ad.scope(shield=True):
                    await ad.sleep(2)
                    log("worker", "cleanup slept")
                    await ad.checkpoint()
                    log("worker", "cleanup done")
                try:
                    await ad.checkpoint()
                    log("worker", "checkpoint passed")  # never reached
                except ad.Cancelled:
                    log("worker", "cancelled again after the shield")
                raise

        async with ad.scope() as s:
            s.spawn(worker)
            await ad.sleep(1)
            s.cancel()
        log("main", "scope exited")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "worker": [
            (1.0, "cancelled"),
            (3.0, "cleanup slept"),
            (3.0, "cleanup done"),
            (3.0, "cancelled again after the shield"),
        ],
        "main": [(3.0, "scope exited")],
    }
    assert on_asyncop == on_trio


def test_cancel_after_the_last_await_lets_the_task_finish() -> None:
    """A cancel that arrives after the task's last await does not interrupt it."""

    async def scenario(ad: Adapter, log: Log) -> None:
        async with ad.scope() as s:

            async def worker() -> None:
                await ad.sleep(1)
                s.cancel()  # cancels this task too, but it awaits no more
                log("worker", "after cancel")
                log("worker", "returned")

            s.spawn(worker)
            try:
                await ad.sleep(10)
            except ad.Cancelled:
                log("main", "body cancelled")
                raise
        log("main", "scope exited")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "worker": [(1.0, "after cancel"), (1.0, "returned")],
        "main": [(1.0, "body cancelled"), (1.0, "scope exited")],
    }
    assert on_asyncop == on_trio


def test_received_item_handed_over_before_the_cancel_is_kept() -> None:
    """A receive already handed its item before the cancel returns it; the task leaves later.

    asyncop's rule: "A value already handed over ... is returned, and the task
    leaves at its next await." trio agrees here: its blocked
    ``MemoryReceiveChannel.receive`` is rescheduled with the item by the
    sender, and a cancel that arrives after that is only seen at the next
    checkpoint. (Where trio does differ is ``checkpoint()``, see
    ``test_checkpoint_passed_before_the_cancel_returns_on_asyncop_only``,
    and racing receives, see ``test_select_loser_consumes_no_item_unlike_trio_race``.)

    One asyncop worker makes "right after" exact: the send and the cancel
    happen in one step of the body. With two, the receiver may already be
    running on the other worker and past its checkpoint when the cancel
    lands, and it then leaves at the await after that one.
    """

    async def scenario(ad: Adapter, log: Log) -> None:
        channel = ad.channel(0)

        async def receiver() -> None:
            try:
                item = await channel.recv()
                log("receiver", ("received", item))
                await ad.checkpoint()
                log("receiver", "checkpoint passed")  # never reached
            except ad.Cancelled:
                log("receiver", "cancelled")
                raise

        async with ad.scope() as s:
            task = s.spawn(receiver)
            await ad.sleep(1)
            channel.send_nowait("item")  # the receiver is parked: handed over now
            task.cancel()  # ...and cancelled in the same instant
            log("main", "sent, then cancelled")
        log("main", "scope exited")

    on_trio, on_asyncop = run_both(scenario, workers=1)
    assert on_trio["receiver"] == [(1.0, ("received", "item")), (1.0, "cancelled")]
    assert on_asyncop == on_trio


def test_checkpoint_passed_before_the_cancel_returns_on_asyncop_only() -> None:
    """A ``checkpoint()`` that queued the task before a cancel returns; trio raises there.

    Deliberate difference. asyncop checks the cancel flag when the task
    enters ``checkpoint()`` (and before suspending); once the task is back in
    the ready queue its turn is already handed over, like a received value,
    so the cancel that arrives while it waits for a worker is seen at the
    *next* await. trio's ``checkpoint()`` checks again after its
    yield and raises ``Cancelled`` at that checkpoint.

    One asyncop worker makes the interleaving exact: the child is queued
    behind the body by its checkpoint, and the body cancels it before it runs.
    """

    async def scenario(ad: Adapter, log: Log) -> None:
        async def child() -> None:
            log("child", "started")
            try:
                await ad.checkpoint()
                log("child", "first checkpoint returned")
                await ad.checkpoint()
                log("child", "second checkpoint returned")  # never reached
            except ad.Cancelled:
                log("child", "cancelled")
                raise

        async with ad.scope() as s:
            task = s.spawn(child)
            await ad.checkpoint()  # the child runs to its first checkpoint
            task.cancel()
            log("main", "cancelled the child")
        log("main", "scope exited")

    on_trio = per_task(run_trio(scenario))
    on_asyncop = per_task(run_asyncop(scenario, workers=1))
    assert on_trio["child"] == [(0.0, "started"), (0.0, "cancelled")]
    assert on_asyncop["child"] == [
        (0.0, "started"),
        (0.0, "first checkpoint returned"),
        (0.0, "cancelled"),
    ]
    assert on_asyncop["main"] == on_trio["main"]


def test_child_cancelled_before_its_first_step_never_runs_on_asyncop_only() -> None:
    """A child cancelled while PENDING runs none of its body; trio starts it anyway.

    Deliberate difference. asyncop: "A task cancelled before its first
    step never runs" (CREATED and PENDING nodes become CANCELLED at once). In
    trio a task always starts: the code before its first checkpoint runs and
    the checkpoint raises ``Cancelled``.

    One asyncop worker keeps the child PENDING until the body's cancel: with
    two, the other worker may start the child between ``spawn`` and
    ``cancel``.
    """

    async def scenario(ad: Adapter, log: Log) -> None:
        async def child() -> None:
            log("child", "started")
            try:
                await ad.checkpoint()
                log("child", "checkpoint passed")
            except ad.Cancelled:
                log("child", "cancelled")
                raise

        async with ad.scope() as s:
            task = s.spawn(child)
            task.cancel()
            log("main", "spawned and cancelled")
        log("main", "scope exited")
        # Give the worker a turn at the queue entry of the cancelled child
        # before the scenario ends: that is when it must be dropped unrun.
        await ad.checkpoint()

    on_trio = per_task(run_trio(scenario))
    on_asyncop = per_task(run_asyncop(scenario, workers=1))
    assert on_trio["child"] == [(0.0, "started"), (0.0, "cancelled")]
    assert "child" not in on_asyncop
    assert on_asyncop["main"] == on_trio["main"]


def test_child_spawned_into_a_cancelled_scope_never_runs_on_asyncop_only() -> None:
    """A child spawned into a cancelled, still open scope is born cancelled on asyncop.

    Deliberate difference. asyncop: "A child added to a cancelled but still
    running operation is born CANCELLED and never runs." In trio,
    ``start_soon`` into a cancelled nursery starts the task, which runs up to
    its first checkpoint and gets ``Cancelled`` there.
    """

    async def scenario(ad: Adapter, log: Log) -> None:
        async def child() -> None:
            log("child", "started")
            try:
                await ad.sleep(1)
                log("child", "slept")
            except ad.Cancelled:
                log("child", "cancelled")
                raise

        async with ad.scope() as s:
            s.cancel()
            s.spawn(child)  # the scope is cancelled but its block still runs
            log("main", "spawned into the cancelled scope")
            try:
                await ad.checkpoint()
            except ad.Cancelled:
                log("main", "body cancelled")
                raise
        log("main", "scope exited")

    on_trio = per_task(run_trio(scenario))
    on_asyncop = per_task(run_asyncop(scenario))
    assert on_trio["child"] == [(0.0, "started"), (0.0, "cancelled")]
    assert "child" not in on_asyncop
    assert on_trio["main"] == [
        (0.0, "spawned into the cancelled scope"),
        (0.0, "body cancelled"),
        (0.0, "scope exited"),
    ]
    assert on_asyncop["main"] == on_trio["main"]
