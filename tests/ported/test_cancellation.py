"""Cancellation rules, ported from trio's cancel-scope cases, anyio's
cancellation cases and asyncio's task-cancel cases.

asyncop cancellation is level-triggered, like trio and anyio (unlike asyncio's
edge-triggered ``Task.cancel()``): once cancelled, every later await in the
subtree raises ``Cancelled`` again. A task cancelled before its first step
never runs (trio would run it to its first checkpoint).
"""

from __future__ import annotations

import threading
import time

import pytest

import asyncop
from asyncop import CancellationError, Cancelled, OperationState
from asyncop.testing import VirtualClock, assert_checkpoints, wait_all_blocked
from tests._freethreading import steps_may_overlap

pytestmark = pytest.mark.timeout(30)


async def sleep_forever() -> None:
    await asyncop.sleep(float("inf"))


def test_cancelled_is_a_base_exception() -> None:
    assert issubclass(Cancelled, BaseException)
    assert not issubclass(Cancelled, Exception)


@pytest.mark.asyncop
async def test_every_await_in_a_cancelled_scope_raises(autojump_clock: VirtualClock) -> None:
    raised: list[str] = []
    async with asyncop.scope() as s:
        s.cancel()
        for name, aw in [
            ("checkpoint", lambda: asyncop.checkpoint()),
            ("sleep0", lambda: asyncop.sleep(0)),
            ("sleep", lambda: asyncop.sleep(1)),
            ("event", lambda: asyncop.Event().wait_async()),
        ]:
            try:
                await aw()
            except Cancelled:
                raised.append(name)
    assert raised == ["checkpoint", "sleep0", "sleep", "event"]


@pytest.mark.asyncop
async def test_cancellation_is_level_triggered(autojump_clock: VirtualClock) -> None:
    count = 0
    async with asyncop.scope() as s:
        s.cancel()
        for _ in range(3):
            try:
                await asyncop.sleep(1)
            except Cancelled:
                count += 1
    assert count == 3
    assert asyncop.current_time() == 0


@pytest.mark.asyncop
async def test_ready_primitive_still_raises_when_cancelled(autojump_clock: VirtualClock) -> None:
    # trio: an operation that could complete at once still checks for cancellation
    ev = asyncop.Event()
    ev.set()
    lock = asyncop.Lock()
    sem = asyncop.Semaphore(1)
    ch: asyncop.Channel[int] = asyncop.Channel(1)
    ch.try_send(1)
    raised: list[str] = []
    async with asyncop.scope() as s:
        s.cancel()
        for name, make in [
            ("event", ev.wait_async),
            ("lock", lock.lock_async),
            ("sem", sem.acquire_async),
            ("recv", ch.recv_async),
        ]:
            try:
                await make()
            except Cancelled:
                raised.append(name)
    assert raised == ["event", "lock", "sem", "recv"]
    assert not lock.locked()
    assert sem.value == 1
    assert ch.try_recv() == 1


@pytest.mark.asyncop
async def test_entering_a_scope_is_not_a_cancellation_point(autojump_clock: VirtualClock) -> None:
    # Entering does not raise; but leaving a scope whose enclosing operation was
    # cancelled from outside raises Cancelled (asyncop's rule), so "left" is skipped.
    log: list[str] = []
    async with asyncop.scope() as outer:
        outer.cancel()
        try:
            async with asyncop.scope():
                log.append("entered")
            log.append("left")
        except Cancelled:
            log.append("cancelled at exit")
    assert log == ["entered", "cancelled at exit"]


@pytest.mark.asyncop
async def test_nested_scope_inherits_cancel(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as outer:
        outer.cancel()
        async with asyncop.scope():
            with pytest.raises(Cancelled):
                await asyncop.sleep(1)


@pytest.mark.asyncop
async def test_shield_keeps_outer_cancel_out(autojump_clock: VirtualClock) -> None:
    log: list[str] = []
    async with asyncop.scope() as outer:
        outer.cancel()
        async with asyncop.scope(shield=True):
            await asyncop.sleep(1)
            log.append("shielded sleep done")
        with pytest.raises(Cancelled):
            await asyncop.sleep(1)
    assert log == ["shielded sleep done"]
    assert asyncop.current_time() == 1


@pytest.mark.asyncop
async def test_shielded_scope_still_obeys_its_own_cancel(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope(shield=True) as s:
        s.cancel()
        with pytest.raises(Cancelled):
            await asyncop.sleep(1)


@pytest.mark.asyncop
async def test_shielded_scope_still_obeys_its_own_deadline(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as outer:
        outer.cancel()
        with pytest.raises(TimeoutError):
            async with asyncop.scope(shield=True, timeout=2):
                await asyncop.sleep(10)
    assert asyncop.current_time() == 2


@pytest.mark.asyncop
async def test_shield_protects_children_too(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as outer, asyncop.scope(shield=True) as inner:
        child = inner.spawn(asyncop_sleep, 2)
        outer.cancel()
    assert child.state is OperationState.COMPLETED


async def asyncop_sleep(seconds: float) -> None:
    await asyncop.sleep(seconds)


@pytest.mark.asyncop
async def test_removing_shield_lets_pending_cancel_in(autojump_clock: VirtualClock) -> None:
    # trio test_cancel_shield_abort / test_unshield_while_cancel_propagating
    log: list[str] = []
    shields: list[asyncop.AsyncOperation] = []
    mids: list[asyncop.AsyncOperation] = []

    async def sleeper() -> None:
        async with asyncop.scope() as mid:
            mids.append(mid)
            async with asyncop.scope(shield=True) as sh:
                shields.append(sh)
                try:
                    await sleep_forever()
                except Cancelled:
                    log.append("cancelled")
                    raise

    async with asyncop.scope() as top:
        top.spawn(sleeper)
        await wait_all_blocked()
        mids[0].cancel()
        await asyncop.sleep(1)  # shielded: still asleep
        assert log == []
        shields[0].shield = False
    assert log == ["cancelled"]
    assert asyncop.current_time() == 1


@pytest.mark.asyncop
async def test_setting_shield_keeps_later_cancel_out(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as outer, asyncop.scope() as inner:
        inner.shield = True
        outer.cancel()
        await asyncop.sleep(1)
    assert asyncop.current_time() == 1


@pytest.mark.parametrize("bad", ["hello", 1, 0, None])
@pytest.mark.asyncop
async def test_shield_and_supervise_take_only_a_bool(
    autojump_clock: VirtualClock, bad: object
) -> None:
    # As trio's CancelScope.shield: a truthy string or a None must not pass
    # for a flag, and a refused value leaves the flag as it was.
    async with asyncop.scope() as s:
        with pytest.raises(TypeError, match="True or False"):
            s.shield = bad  # type: ignore[assignment]
        assert s.shield is False
        s.shield = True
        with pytest.raises(TypeError, match="True or False"):
            s.shield = bad  # type: ignore[assignment]
        assert s.shield is True
        s.shield = False
        with pytest.raises(TypeError, match="True or False"):
            s.spawn(asyncop.checkpoint, supervise=bad)  # type: ignore[arg-type]
        assert s.children() == []
    with pytest.raises(TypeError, match="shield"):
        asyncop.scope(shield=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="supervise"):
        asyncop.scope(supervise=bad)  # type: ignore[arg-type]
    for timeout_scope in (
        asyncop.move_on_after,
        asyncop.move_on_at,
        asyncop.fail_after,
        asyncop.fail_at,
    ):
        with pytest.raises(TypeError, match="shield"):
            timeout_scope(1, shield=bad)  # type: ignore[arg-type]
    rt = asyncop.current_runtime()
    with pytest.raises(TypeError, match="shield"):
        rt.scope(shield=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="supervise"):
        rt.spawn(asyncop.checkpoint, supervise=bad)  # type: ignore[arg-type]


@pytest.mark.asyncop
async def test_shielded_cleanup_in_finally(autojump_clock: VirtualClock) -> None:
    log: list[str] = []

    async def worker() -> None:
        try:
            await sleep_forever()
        finally:
            async with asyncop.scope(shield=True):
                await asyncop.sleep(1)
                log.append("cleanup done")

    async with asyncop.scope() as s:
        op = s.spawn(worker)
        await wait_all_blocked()
        op.cancel()
    assert log == ["cleanup done"]
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_unshielded_await_in_finally_raises_again(autojump_clock: VirtualClock) -> None:
    log: list[str] = []

    async def worker() -> None:
        try:
            await sleep_forever()
        finally:
            try:
                await asyncop.sleep(1)
            except Cancelled:
                log.append("again")
                raise

    async with asyncop.scope() as s:
        op = s.spawn(worker)
        await wait_all_blocked()
        op.cancel()
    assert log == ["again"]


@steps_may_overlap
@pytest.mark.asyncop
async def test_task_cancelled_before_first_step_never_runs(autojump_clock: VirtualClock) -> None:
    # Deliberate difference from trio, where it would run up to its first checkpoint.
    ran: list[str] = []

    async def child() -> None:
        ran.append("ran")

    async with asyncop.scope() as s:
        op = s.spawn(child)
        op.cancel()
    assert ran == []
    assert op.state is OperationState.CANCELLED
    with pytest.raises(CancellationError):
        op.result()


@pytest.mark.asyncop
async def test_child_spawned_into_cancelled_scope_never_runs(autojump_clock: VirtualClock) -> None:
    ran: list[str] = []

    async def child() -> None:
        ran.append("ran")

    async with asyncop.scope() as s:
        s.cancel()
        op = s.spawn(child)
        assert op.token.cancelled
    assert ran == []
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_catching_cancelled_and_returning_ends_cancelled(
    autojump_clock: VirtualClock,
) -> None:
    async def stubborn() -> str:
        try:
            await sleep_forever()
        except Cancelled:
            pass
        return "value"

    async with asyncop.scope() as s:
        op = s.spawn(stubborn)
        await wait_all_blocked()
        op.cancel()
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_cancel_after_last_checkpoint_keeps_the_result(autojump_clock: VirtualClock) -> None:
    async def child(gate: list[asyncop.AsyncOperation]) -> str:
        await asyncop.sleep(1)
        gate[0].cancel()  # cancel ourselves after our last await
        return "kept"

    gate: list[asyncop.AsyncOperation] = []
    async with asyncop.scope() as s:
        op = s.spawn(child, gate)
        gate.append(op)
    assert op.state is OperationState.COMPLETED
    assert op.result() == "kept"


@pytest.mark.asyncop
async def test_finally_blocks_run_innermost_first(autojump_clock: VirtualClock) -> None:
    log: list[str] = []

    async def inner() -> None:
        try:
            await sleep_forever()
        finally:
            log.append("inner")

    async def outer() -> None:
        try:
            await inner()
        finally:
            log.append("outer")

    async with asyncop.scope() as s:
        op = s.spawn(outer)
        await wait_all_blocked()
        op.cancel()
    assert log == ["inner", "outer"]


@pytest.mark.asyncop
async def test_except_exception_does_not_catch_cancel(autojump_clock: VirtualClock) -> None:
    log: list[str] = []

    async def child() -> None:
        try:
            await sleep_forever()
        except Exception:
            log.append("wrongly caught")

    async with asyncop.scope() as s:
        op = s.spawn(child)
        await wait_all_blocked()
        op.cancel()
    assert log == []
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_cancel_reason_shows_in_cancelled(autojump_clock: VirtualClock) -> None:
    seen: list[str] = []

    async def child() -> None:
        try:
            await sleep_forever()
        except Cancelled as exc:
            seen.append(str(exc))
            raise

    async with asyncop.scope() as s:
        op = s.spawn(child)
        await wait_all_blocked()
        op.cancel("user pressed stop")
    assert op.cancel_reason == "user pressed stop"
    assert "user pressed stop" in seen[0]


@pytest.mark.asyncop
async def test_cancel_is_idempotent(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        op = s.spawn(sleep_forever)
        await wait_all_blocked()
        op.cancel()
        op.cancel()
    op.cancel()
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_cancel_from_another_thread_wakes_a_sleeper(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        op = s.spawn(sleep_forever)
        await wait_all_blocked()
        t = threading.Thread(target=op.cancel)
        t.start()
        t.join()
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_self_cancel_raises_at_next_await(autojump_clock: VirtualClock) -> None:
    async def child() -> list[str]:
        log = ["before"]
        me = asyncop.current_operation()
        assert me is not None
        me.cancel()
        log.append("still running")
        await asyncop.sleep(0)
        log.append("not reached")
        return log

    async with asyncop.scope() as s:
        op = s.spawn(child)
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_cancelled_subtree_of_a_deep_chain(autojump_clock: VirtualClock) -> None:
    depth = 200
    reached: list[int] = []

    async def level(n: int) -> None:
        if n == depth:
            reached.append(n)
            await sleep_forever()
        async with asyncop.scope() as s:
            s.spawn(level, n + 1)

    async with asyncop.scope() as s:
        top = s.spawn(level, 0)
        await wait_all_blocked()
        top.cancel()
    assert reached == [depth]
    assert top.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_cancelled_awaiter_of_an_operation_leaves(autojump_clock: VirtualClock) -> None:
    async def waiter(target: asyncop.AsyncOperation) -> None:
        await target

    async with asyncop.scope() as s:
        target = s.spawn(asyncop_sleep, 5)
        w = s.spawn(waiter, target)
        await wait_all_blocked()
        w.cancel()
    assert w.state is OperationState.CANCELLED
    assert target.state is OperationState.COMPLETED


@pytest.mark.asyncop
async def test_assert_checkpoints_on_sleep0(autojump_clock: VirtualClock) -> None:
    with assert_checkpoints():
        await asyncop.sleep(0)
    with assert_checkpoints():
        await asyncop.checkpoint()
    with pytest.raises(AssertionError), assert_checkpoints():
        pass


@pytest.mark.asyncop
async def test_checkpoint_lets_other_tasks_run(autojump_clock: VirtualClock) -> None:
    log: list[str] = []

    async def other() -> None:
        log.append("other")

    async with asyncop.scope() as s:
        s.spawn(other)
        for _ in range(5):
            await asyncop.checkpoint()
            if log:
                break
        assert log == ["other"]


def test_busy_loop_on_checkpoint_does_not_starve_timers(runtime: asyncop.Runtime) -> None:
    # Real clock: a virtual clock never jumps while a task keeps a worker busy.
    async def main() -> bool:
        async with asyncop.scope(timeout=0.05) as s:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                await asyncop.checkpoint()
        return s.expired

    with pytest.raises(TimeoutError):
        runtime.run(main)


def test_sync_operation_token_check(vruntime: asyncop.Runtime) -> None:
    started = threading.Event()

    def worker() -> str:
        op = asyncop.current_operation()
        assert op is not None
        started.set()
        while True:
            op.token.check()
            time.sleep(0.001)

    op = vruntime.spawn(worker)
    assert started.wait(5)
    op.cancel()
    assert op.wait(5).state is OperationState.CANCELLED


def test_sync_blocking_calls_are_cancellation_points(vruntime: asyncop.Runtime) -> None:
    started = threading.Event()
    ev = asyncop.Event()

    def worker() -> None:
        started.set()
        ev.wait()

    op = vruntime.spawn(worker)
    assert started.wait(5)
    time.sleep(0.05)
    op.cancel()
    assert op.wait(5).state is OperationState.CANCELLED


def test_on_cancel_runs_once(vruntime: asyncop.Runtime) -> None:
    calls: list[int] = []

    async def main() -> None:
        async with asyncop.scope() as s:
            op = s.spawn(sleep_forever)
            op.token.on_cancel(lambda: calls.append(1))
            await wait_all_blocked()
            op.cancel()
            op.cancel()

    vruntime.run(main)
    assert calls == [1]


def test_on_cancel_on_cancelled_token_runs_at_once(vruntime: asyncop.Runtime) -> None:
    calls: list[int] = []

    async def main() -> None:
        async with asyncop.scope() as s:
            s.cancel()
            s.token.on_cancel(lambda: calls.append(1))
            assert calls == [1]

    vruntime.run(main)


def test_on_cancel_handle_remove(vruntime: asyncop.Runtime) -> None:
    calls: list[int] = []

    async def main() -> None:
        async with asyncop.scope() as s:
            h = s.token.on_cancel(lambda: calls.append(1))
            h.remove()
            s.cancel()

    vruntime.run(main)
    assert calls == []


def _sync_blockers() -> list[tuple[str, object]]:
    lock = asyncop.Lock()
    lock.acquire()  # held by the test thread
    sem = asyncop.Semaphore(0)
    ev = asyncop.Event()
    ch: asyncop.Channel[int] = asyncop.Channel(0)
    lim = asyncop.CapacityLimiter(1)
    lim.acquire_on_behalf_of(object())
    cond = asyncop.Condition()
    tx, rx = ch.sender(), ch.receiver()

    def cond_wait() -> None:
        with cond:
            cond.wait()

    return [
        ("Lock.acquire", lock.acquire),
        ("Semaphore.acquire", sem.acquire),
        ("Event.wait", ev.wait),
        ("Channel.send", lambda: ch.send(1)),
        ("Channel.recv", ch.recv),
        ("ChannelSender.send", lambda: tx.send(1)),
        ("ChannelReceiver.recv", rx.recv),
        ("CapacityLimiter.acquire", lim.acquire),
        ("Condition.wait", cond_wait),
    ]


@pytest.mark.parametrize("index", range(9), ids=[n for n, _ in _sync_blockers()])
def test_blocking_call_in_a_sync_operation_is_a_cancellation_point(
    runtime: asyncop.Runtime, index: int
) -> None:
    # asyncop's rule for sync operations: its own blocking calls raise Cancelled
    # promptly when the operation is cancelled.
    name, call = _sync_blockers()[index]
    started = threading.Event()

    def worker() -> None:
        started.set()
        call()  # type: ignore[operator]

    op = runtime.spawn(worker)
    assert started.wait(5)
    time.sleep(0.05)
    t0 = time.monotonic()
    op.cancel()
    result = op.wait(10)
    assert result.state is OperationState.CANCELLED, f"{name}: {result}"
    assert time.monotonic() - t0 < 5


@pytest.mark.asyncop
async def test_already_ready_awaitables_still_check_cancel(autojump_clock: VirtualClock) -> None:
    # trio test_cancel_points: each await checks for cancellation even when it
    # could complete at once.
    async def value() -> int:
        return 1

    async with asyncop.scope() as outer:
        done = outer.spawn(value)
        await done
        ready: asyncop.Channel[int] = asyncop.Channel(1)
        ready.try_send(1)
        makers = {
            "sleep_until(past)": lambda: asyncop.sleep_until(-1),
            "await done op": lambda: done,
            "timeout(done op)": lambda: asyncop.timeout(5, done),
            "race(done op)": lambda: asyncop.race(done),
            "select(ready)": lambda: asyncop.select(ready.recv_async()),
            "spawn_blocking": lambda: asyncop.spawn_blocking(int),
            "wait_all_blocked": lambda: wait_all_blocked(),
        }
        raised: list[str] = []
        async with asyncop.scope() as s:
            s.cancel()
            for name, make in makers.items():
                try:
                    await make()  # type: ignore[no-untyped-call]
                except Cancelled:
                    raised.append(name)
        assert raised == list(makers)
        assert ready.try_recv() == 1
