"""Cancellation of coroutine tasks, one test per rule of the cancellation docs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import asyncop
from asyncop import CancellationError, Cancelled, OperationState, WakerStatus
from asyncop.lowlevel import WaitEvent, pass_checkpoint
from asyncop.testing import assert_checkpoints, wait_all_blocked
from tests._freethreading import steps_may_overlap

pytestmark = pytest.mark.timeout(15)


@pytest.fixture
def rt1() -> Iterator[asyncop.Runtime]:
    """A 1-worker runtime: while one task runs, no other task can."""
    rt = asyncop.Runtime(1, name=f"rt1{id(object()):x}")
    try:
        yield rt
    finally:
        assert rt.shutdown(timeout=10), "runtime did not shut down in 10 s"
        prefix = f"{rt.name}-"
        assert [t for t in threading.enumerate() if t.name.startswith(prefix)] == []


def me() -> asyncop.AsyncOperation:
    op = asyncop.current_operation()
    assert op is not None
    return op


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``predicate`` from the test thread until it holds."""
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.001)


def parked(op: asyncop.AsyncOperation) -> bool:
    task = op._task
    return task is not None and task.waker.status is WakerStatus.WAITING


async def leave_at_next_await(log: list[Any]) -> None:
    """Log whether the next await raises ``Cancelled``, and re-raise it."""
    try:
        await asyncop.sleep(0)
    except Cancelled:
        log.append("cancelled at next await")
        raise
    log.append("next await passed")


# -- every await is a cancellation point: checked on entry ----------------------


def test_ready_sleep_raises_cancelled_in_an_already_cancelled_task(
    runtime: asyncop.Runtime,
) -> None:
    log: list[str] = []

    async def body() -> None:
        me().cancel()
        try:
            await asyncop.sleep(0)
        except Cancelled:
            log.append("cancelled")
            raise
        log.append("slept")

    op = runtime.spawn(body)
    op.wait(5)
    assert log == ["cancelled"]
    assert op.state is OperationState.CANCELLED


def test_acquiring_a_free_lock_raises_cancelled_in_an_already_cancelled_task(
    runtime: asyncop.Runtime,
) -> None:
    lock = asyncop.Lock()
    log: list[str] = []

    async def body() -> None:
        me().cancel()
        try:
            await lock.lock_async()
        except Cancelled:
            log.append(f"cancelled, locked={lock.locked()}")
            raise
        log.append("acquired")

    op = runtime.spawn(body)
    op.wait(5)
    assert log == ["cancelled, locked=False"]
    assert not lock.locked()
    assert lock.acquire(timeout=1)  # neither held nor broken
    lock.release()


def test_receiving_a_buffered_item_in_an_already_cancelled_task_takes_no_item(
    runtime: asyncop.Runtime,
) -> None:
    channel: asyncop.Channel[str] = asyncop.Channel(1)
    channel.try_send("kept")
    log: list[str] = []

    async def body() -> None:
        me().cancel()
        try:
            log.append(await channel.recv_async())
        except Cancelled:
            log.append("cancelled")
            raise

    runtime.spawn(body).wait(5)
    assert log == ["cancelled"]
    assert channel.try_recv() == "kept"


def test_a_cancel_landing_while_the_task_arms_its_wait_is_seen_before_suspending(
    runtime: asyncop.Runtime,
) -> None:
    log: list[str] = []

    class CancelWhileArming(WaitEvent):
        """Never fires; its arming is where a cancel from elsewhere lands."""

        def _arm(self, sub: Any) -> None:
            sub.waker.task.cancel()

    async def body() -> None:
        try:
            await CancelWhileArming()
        except Cancelled:
            log.append("cancelled before suspending")
            raise

    op = runtime.spawn(body)
    assert op.wait(5).state is OperationState.CANCELLED  # a missed check parks forever
    assert log == ["cancelled before suspending"]


# -- a value already handed over is kept; the task leaves at its next await -----


def test_a_received_item_handed_over_before_the_cancel_is_kept(rt1: asyncop.Runtime) -> None:
    channel: asyncop.Channel[str] = asyncop.Channel(0)
    log: list[Any] = []

    async def receiver() -> None:
        log.append(("got", await channel.recv_async()))
        await leave_at_next_await(log)

    async def main() -> None:
        r = me().spawn(receiver)
        await wait_all_blocked()
        # One worker: the receiver cannot run between these two lines.
        channel.try_send("item")
        r.cancel()
        with pytest.raises(CancellationError):
            await r

    rt1.run(main)
    assert log == [("got", "item"), "cancelled at next await"]


def test_a_lock_guard_handed_over_before_the_cancel_is_kept(rt1: asyncop.Runtime) -> None:
    lock = asyncop.Lock()
    log: list[Any] = []

    async def waiter() -> None:
        async with lock:
            log.append(("holding", lock.locked()))
            await leave_at_next_await(log)

    async def main() -> None:
        await lock.lock_async()
        w = me().spawn(waiter)
        await wait_all_blocked()
        lock.release()  # hands the lock to the waiter
        w.cancel()
        with pytest.raises(CancellationError):
            await w
        log.append(("after", lock.locked()))
        guard = await lock.lock_async()  # released by the exit, not broken
        guard.release()

    rt1.run(main)
    assert log == [("holding", True), "cancelled at next await", ("after", False)]


def test_a_finished_blocking_call_keeps_its_value_when_cancelled_during_it(
    runtime: asyncop.Runtime,
) -> None:
    log: list[Any] = []

    async def body() -> None:
        task = me()

        def work() -> int:
            task.cancel()  # the cancel lands while the call runs
            return 42

        log.append(("value", await asyncop.spawn_blocking(work)))
        await leave_at_next_await(log)

    op = runtime.spawn(body)
    assert op.wait(5).state is OperationState.CANCELLED
    assert log == [("value", 42), "cancelled at next await"]


# -- a cancel removes the task from the waiter list at once ----------------------


def test_a_lock_released_right_after_its_first_waiter_is_cancelled_goes_to_the_second(
    runtime: asyncop.Runtime,
) -> None:
    lock = asyncop.Lock()
    log: list[str] = []

    async def waiter(name: str) -> None:
        try:
            guard = await lock.lock_async()
        except Cancelled:
            log.append(f"{name} cancelled")
            raise
        log.append(f"{name} acquired")
        guard.release()

    assert lock.acquire(timeout=1)
    first = runtime.spawn(waiter, "first")
    wait_until(lambda: parked(first))
    second = runtime.spawn(waiter, "second")
    wait_until(lambda: parked(second))
    first.cancel()
    lock.release()  # in the same instant: must skip the cancelled waiter
    first.wait(5)
    second.wait(5)
    assert log.count("first acquired") == 0
    assert set(log) == {"first cancelled", "second acquired"}
    assert second.state is OperationState.COMPLETED
    assert not lock.locked()
    assert lock.acquire(timeout=1)  # not broken
    lock.release()


def test_an_item_sent_right_after_a_receiver_is_cancelled_goes_to_a_live_receiver(
    runtime: asyncop.Runtime,
) -> None:
    channel: asyncop.Channel[str] = asyncop.Channel(0)
    log: list[str] = []

    async def receiver(name: str) -> None:
        try:
            item = await channel.recv_async()
        except Cancelled:
            log.append(f"{name} cancelled")
            raise
        log.append(f"{name} got {item}")

    first = runtime.spawn(receiver, "first")
    wait_until(lambda: parked(first))
    second = runtime.spawn(receiver, "second")
    wait_until(lambda: parked(second))
    first.cancel()
    channel.try_send("item")  # a rendezvous: succeeds only with a live receiver
    first.wait(5)
    second.wait(5)
    assert set(log) == {"first cancelled", "second got item"}


def test_an_item_sent_right_after_the_only_receiver_is_cancelled_stays_buffered(
    runtime: asyncop.Runtime,
) -> None:
    channel: asyncop.Channel[str] = asyncop.Channel(1)
    log: list[str] = []

    async def receiver() -> None:
        try:
            log.append(await channel.recv_async())
        except Cancelled:
            log.append("cancelled")
            raise

    op = runtime.spawn(receiver)
    wait_until(lambda: parked(op))
    op.cancel()
    channel.try_send("item")
    op.wait(5)
    assert log == ["cancelled"]
    assert len(channel) == 1
    assert channel.try_recv() == "item"


def test_a_permit_released_right_after_the_only_waiter_is_cancelled_stays_in_the_semaphore(
    runtime: asyncop.Runtime,
) -> None:
    sem = asyncop.Semaphore(0)

    async def waiter() -> None:
        await sem.acquire_async()

    op = runtime.spawn(waiter)
    wait_until(lambda: parked(op))
    op.cancel()
    sem.release()
    assert op.wait(5).state is OperationState.CANCELLED
    assert sem.value == 1


# -- a cancelled task leaves its body like a return ------------------------------


class Logged:
    """A context manager, sync and async, that logs its exit."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        self.log.append(f"{self.name} exit")

    async def __aenter__(self) -> None:
        pass

    async def __aexit__(self, *exc: object) -> None:
        self.log.append(f"{self.name} aexit")


def test_finally_blocks_and_with_exits_run_innermost_first(runtime: asyncop.Runtime) -> None:
    log: list[str] = []
    gate = asyncop.Event()

    async def body() -> None:
        try:
            async with Logged("outer", log):
                try:
                    with Logged("inner", log):
                        await gate.wait_async()
                        log.append("passed the await")
                finally:
                    log.append("inner finally")
        finally:
            log.append("outer finally")

    op = runtime.spawn(body)
    wait_until(lambda: parked(op))
    op.cancel()
    op.wait(5)
    assert log == ["inner exit", "inner finally", "outer aexit", "outer finally"]


def test_nested_async_calls_unwind_innermost_first(runtime: asyncop.Runtime) -> None:
    log: list[str] = []
    gate = asyncop.Event()

    async def level(depth: int) -> None:
        try:
            if depth == 3:
                await gate.wait_async()
            else:
                await level(depth + 1)
            log.append(f"level {depth} continued")
        finally:
            log.append(f"level {depth} unwound")

    op = runtime.spawn(level, 1)
    wait_until(lambda: parked(op))
    op.cancel()
    op.wait(5)
    assert log == ["level 3 unwound", "level 2 unwound", "level 1 unwound"]


def test_a_cancelled_task_result_is_discarded(
    runtime: asyncop.Runtime,
) -> None:
    gate = asyncop.Event()

    async def body() -> str:
        await gate.wait_async()
        return "never"

    op = runtime.spawn(body)
    wait_until(lambda: parked(op))
    op.cancel()
    result = op.wait(5)
    assert (result.state, result.value, result.error) == (OperationState.CANCELLED, None, None)
    with pytest.raises(CancellationError):
        op.result()


# -- level-triggered -----------------------------------------------------------


def test_every_await_after_a_caught_cancelled_raises_again(runtime: asyncop.Runtime) -> None:
    log: list[str] = []
    ready_event = asyncop.Event()
    ready_event.set()
    free_lock = asyncop.Lock()
    done_op = runtime.spawn(lambda: 1)
    done_op.wait(5)

    async def body() -> None:
        me().cancel()
        attempts: list[tuple[str, Callable[[], Any]]] = [
            ("sleep", lambda: asyncop.sleep(0)),
            ("checkpoint", asyncop.checkpoint),
            ("event", ready_event.wait_async),
            ("lock", free_lock.lock_async),
            ("operation", lambda: done_op),
            ("sleep again", lambda: asyncop.sleep(0)),
        ]
        for name, make in attempts:
            try:
                await make()
                log.append(f"{name} passed")
            except Cancelled:
                log.append(f"{name} cancelled")
        raise Cancelled()

    runtime.spawn(body).wait(5)
    assert log == [
        "sleep cancelled",
        "checkpoint cancelled",
        "event cancelled",
        "lock cancelled",
        "operation cancelled",
        "sleep again cancelled",
    ]


def test_cleanup_that_awaits_works_inside_a_shielded_scope(runtime: asyncop.Runtime) -> None:
    log: list[str] = []
    gate = asyncop.Event()

    async def body() -> None:
        try:
            await gate.wait_async()
        finally:
            async with asyncop.scope(shield=True):
                await asyncop.sleep(0.01)
                log.append("cleanup slept")
                child = me().spawn(asyncio_free_child)
                log.append(f"cleanup awaited child: {await child}")
            try:
                await asyncop.sleep(0)
            except Cancelled:
                log.append("cancelled again after the shield")
                raise

    async def asyncio_free_child() -> str:
        await asyncop.sleep(0.01)
        return "done"

    op = runtime.spawn(body)
    wait_until(lambda: parked(op))
    op.cancel()
    assert op.wait(5).state is OperationState.CANCELLED
    assert log == [
        "cleanup slept",
        "cleanup awaited child: done",
        "cancelled again after the shield",
    ]


# -- cancelled after the last cancellation point -----------------------------------


def test_a_task_cancelled_after_its_last_await_completes_with_its_result(
    runtime: asyncop.Runtime,
) -> None:
    async def body() -> int:
        await asyncop.sleep(0)
        me().cancel()
        return 7

    op = runtime.spawn(body)
    result = op.wait(5)
    assert (result.state, result.value) == (OperationState.COMPLETED, 7)
    assert op.token.cancelled
    assert op.result() == 7


def test_awaiting_an_operation_that_ended_cancelled_raises_cancellation_error(
    runtime: asyncop.Runtime,
) -> None:
    log: list[str] = []
    gate = asyncop.Event()

    async def child() -> None:
        await gate.wait_async()

    async def parent() -> str:
        c = me().spawn(child)
        await asyncop.sleep(0.01)
        c.cancel()
        try:
            await c
        except CancellationError:
            log.append("CancellationError")
        except Cancelled:
            log.append("Cancelled")
        await asyncop.sleep(0)  # the parent itself was not cancelled
        return "parent carried on"

    assert runtime.run(parent) == "parent carried on"
    assert log == ["CancellationError"]


# -- cancelled before the first step ----------------------------------------------


def test_a_created_task_cancelled_before_submit_never_runs(runtime: asyncop.Runtime) -> None:
    ran: list[str] = []

    async def body(op: asyncop.AsyncOperation, context: object) -> None:
        ran.append("ran")

    op = runtime.create(body)
    op.cancel()
    assert op.state is OperationState.CANCELLED
    with pytest.raises(RuntimeError):
        runtime.submit(op)
    time.sleep(0.02)
    assert ran == []


def test_a_queued_task_cancelled_before_its_first_step_never_runs(rt1: asyncop.Runtime) -> None:
    ran: list[str] = []

    async def child() -> None:
        ran.append("ran")

    async def main() -> OperationState:
        c = me().spawn(child)  # queued behind main on the only worker
        c.cancel()
        await asyncop.checkpoint()  # the worker pops the child before main again
        await asyncop.sleep(0.01)
        return c.state

    assert rt1.run(main) is OperationState.CANCELLED
    assert ran == []


# -- blocking calls are not cancellation points -----------------------------------


def test_a_blocking_call_in_the_body_is_not_interrupted_by_a_cancel(
    runtime: asyncop.Runtime,
) -> None:
    log: list[Any] = []
    started = threading.Event()
    gate = threading.Event()

    async def body() -> None:
        started.set()
        log.append(("blocking call returned", gate.wait(5)))
        log.append(("token cancelled", me().token.cancelled))
        time.sleep(0.01)
        log.append("time.sleep returned")
        await leave_at_next_await(log)

    op = runtime.spawn(body)
    assert started.wait(5)
    op.cancel()
    gate.set()
    assert op.wait(5).state is OperationState.CANCELLED
    assert log == [
        ("blocking call returned", True),
        ("token cancelled", True),
        "time.sleep returned",
        "cancelled at next await",
    ]


def test_a_cancel_does_not_wake_a_task_waiting_for_spawn_blocking(
    runtime: asyncop.Runtime,
) -> None:
    log: list[Any] = []
    started = threading.Event()
    gate = threading.Event()

    def work() -> str:
        started.set()
        gate.wait(5)
        return "finished"

    async def body() -> None:
        log.append(await asyncop.spawn_blocking(work))
        await leave_at_next_await(log)

    op = runtime.spawn(body)
    assert started.wait(5)
    op.cancel()
    time.sleep(0.05)
    assert not op.done and log == []  # still waiting for the thread
    gate.set()
    assert op.wait(5).state is OperationState.CANCELLED
    assert log == ["finished", "cancelled at next await"]


# -- every registration is released when a task ends -------------------------------


def test_parked_timers_are_counted_and_released_when_their_tasks_are_cancelled(
    runtime: asyncop.Runtime,
) -> None:
    counts: list[int] = []

    async def sleeper() -> None:
        await asyncop.sleep(100)

    async def main() -> None:
        children = [me().spawn(sleeper) for _ in range(5)]
        await wait_all_blocked()
        counts.append(runtime.registrations())
        for c in children:
            c.cancel()
        for c in children:
            with pytest.raises(CancellationError):
                await c
        counts.append(runtime.registrations())

    runtime.run(main)
    assert counts[0] >= 5
    assert counts[1] == 0
    assert runtime.registrations() == 0


def test_losing_waits_of_a_select_are_released_when_the_task_ends(
    runtime: asyncop.Runtime,
) -> None:
    won = asyncop.Event()
    lost = asyncop.Event()

    async def body() -> Any:
        return await asyncop.select(asyncop.sleep(100), lost.wait_async(), won.wait_async())

    op = runtime.spawn(body)
    wait_until(lambda: parked(op))
    assert runtime.registrations() >= 1
    won.set()
    assert op.wait(5).value == (2, None)
    assert runtime.registrations() == 0
    assert "waiters=0" in repr(lost)


def test_a_cancelled_task_leaves_no_waiter_behind_in_event_lock_or_channel(
    runtime: asyncop.Runtime,
) -> None:
    event = asyncop.Event()
    lock = asyncop.Lock()
    channel: asyncop.Channel[int] = asyncop.Channel(0)
    assert lock.acquire(timeout=1)

    async def body() -> Any:
        return await asyncop.select(
            event.wait_async(), lock.lock_async(), channel.recv_async(), asyncop.sleep(100)
        )

    op = runtime.spawn(body)
    wait_until(lambda: parked(op))
    op.cancel()
    assert op.wait(5).state is OperationState.CANCELLED
    assert "waiters=0" in repr(event)
    assert "waiters=0" in repr(lock)
    assert "receive_waiters=0" in repr(channel)
    assert runtime.registrations() == 0
    lock.release()
    assert not lock.locked()


# -- checkpoint() goes to the back of the ready queue -------------------------------


def test_tasks_looping_on_checkpoint_take_turns(rt1: asyncop.Runtime) -> None:
    log: list[str] = []

    async def looper(name: str) -> None:
        for _ in range(4):
            log.append(name)
            await asyncop.checkpoint()

    async def main() -> None:
        a = me().spawn(looper, "a")
        b = me().spawn(looper, "b")
        await a
        await b

    rt1.run(main)
    assert log == ["a", "b"] * 4


def test_a_task_looping_on_checkpoint_does_not_starve_timers(rt1: asyncop.Runtime) -> None:
    stop = threading.Event()
    loops: list[int] = [0]

    async def spinner() -> None:
        while not stop.is_set():
            loops[0] += 1
            await asyncop.checkpoint()

    async def sleeper() -> str:
        await asyncop.sleep(0.02)
        stop.set()
        return "timer fired"

    async def main() -> str:
        me().spawn(spinner)
        return await me().spawn(sleeper)

    start = time.monotonic()
    assert rt1.run(main) == "timer fired"
    assert time.monotonic() - start < 5
    assert loops[0] > 0


# -- misuse inside coroutines -------------------------------------------------------


def test_blocking_wait_on_an_operation_inside_a_coroutine_raises_mentioning_await(
    runtime: asyncop.Runtime,
) -> None:
    async def other() -> None:
        await asyncop.sleep(0)

    async def body() -> str:
        op = me().spawn(other, name="other")
        try:
            op.wait(1)
        except RuntimeError as exc:
            await op
            return str(exc)
        return "no error"

    message = runtime.run(body)
    assert "await" in message
    assert "other" in message


def test_awaiting_an_operation_from_its_own_code_raises_runtime_error(
    runtime: asyncop.Runtime,
) -> None:
    async def body() -> str:
        try:
            await me()
        except RuntimeError as exc:
            return f"refused: {exc}"
        return "no error"

    assert runtime.run(body).startswith("refused: ")


def test_awaiting_an_ancestor_from_a_descendant_raises_runtime_error(
    runtime: asyncop.Runtime,
) -> None:
    async def grandchild(root: asyncop.AsyncOperation) -> str:
        try:
            await root
        except RuntimeError:
            return "refused"
        return "no error"

    async def child(root: asyncop.AsyncOperation) -> str:
        return await me().spawn(grandchild, root)

    async def root() -> str:
        return await me().spawn(child, me())

    assert runtime.run(root) == "refused"


@steps_may_overlap
def test_a_cancel_walk_over_parked_tasks_makes_no_exception_per_task(
    rt1: asyncop.Runtime,
) -> None:
    # Each woken task gets its Cancelled when it is stepped, not during the
    # walk: a walk over many tasks must not allocate (and hand the collector)
    # one exception per task while it holds the runtime lock.
    import gc

    n = 300

    async def sleeper() -> None:
        await asyncop.sleep(3600)

    async def main() -> tuple[int, int]:
        async with asyncop.scope() as scope:
            for _ in range(n):
                scope.spawn(sleeper)
            await wait_all_blocked()
            before = sum(type(o) is Cancelled for o in gc.get_objects())
            # The only worker is running this step: no woken task runs yet.
            scope.cancel()
            made = sum(type(o) is Cancelled for o in gc.get_objects()) - before
            queued = sum(
                1
                for child in _children(scope)
                if child._task is not None and child._task.status is WakerStatus.QUEUED
            )
        return made, queued

    made, queued = rt1.run(main)
    assert queued == n  # every sleeper was woken by the walk...
    assert made < n // 10  # ...without an exception made for each


def _children(op: asyncop.AsyncOperation) -> list[asyncop.AsyncOperation]:
    found = []
    child = op.first_child
    while child is not None:
        found.append(child)
        child = child.sibling_next
    return found


def test_pass_checkpoint_counts_in_place_and_defers_a_cancel_to_an_await(
    rt1: asyncop.Runtime,
) -> None:
    async def main() -> list[str]:
        log: list[str] = []
        with assert_checkpoints():  # counted, without leaving the worker
            log.append(f"go on {pass_checkpoint()}")
        async with asyncop.scope() as scope:
            scope.cancel()
            log.append(f"go on {pass_checkpoint()}")  # cancelled: await to raise
            try:
                await asyncop.checkpoint()
            except Cancelled:
                log.append("cancelled at the await")
                raise
        return log

    assert rt1.run(main) == ["go on True", "go on False", "cancelled at the await"]
    with pytest.raises(RuntimeError, match=r"pass_checkpoint\(\) needs a coroutine operation"):
        pass_checkpoint()
