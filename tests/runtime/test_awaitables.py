"""The runtime's awaitables: checkpoint, sleeps, awaiting operations, select, spawn_blocking."""

from __future__ import annotations

import contextvars
import gc
import logging
import math
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import asyncop
from asyncop import CancellationError, Cancelled, OperationState
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(20)


class Boom(Exception):
    """The failure the tests raise on purpose."""


def _own_runtime(workers: int, clock: Any = None) -> Iterator[asyncop.Runtime]:
    rt = asyncop.Runtime(workers, name=f"art{id(object()):x}", clock=clock)
    try:
        yield rt
    finally:
        assert rt.shutdown(timeout=10), "runtime did not shut down in 10 s"
        prefix = f"{rt.name}-"
        assert [t for t in threading.enumerate() if t.name.startswith(prefix)] == []


@pytest.fixture
def vruntime1() -> Iterator[asyncop.Runtime]:
    """One worker on an autojumping virtual clock: a deterministic run order."""
    yield from _own_runtime(1, VirtualClock(autojump=True))


def me() -> asyncop.AsyncOperation:
    op = asyncop.current_operation()
    assert op is not None
    return op


# ----------------------------------------------------------------------
# checkpoint()
# ----------------------------------------------------------------------


def test_checkpoint_returns_none(vruntime: asyncop.Runtime) -> None:
    async def main() -> Any:
        return await asyncop.checkpoint()

    assert vruntime.run(main) is None


def test_checkpoint_lets_a_task_queued_behind_run_first(vruntime1: asyncop.Runtime) -> None:
    log: list[str] = []

    async def yielder() -> None:
        log.append("a1")
        await asyncop.checkpoint()
        log.append("a2")

    async def other() -> None:
        log.append("b")

    async def main() -> None:
        me().spawn(yielder)
        me().spawn(other)

    vruntime1.run(main)
    assert log == ["a1", "b", "a2"]


def test_checkpoint_loop_does_not_starve_a_timer(runtime: asyncop.Runtime) -> None:
    # Real clock: a spinning task keeps the workers busy, so a virtual
    # clock would (rightly) never autojump.
    async def sleeper() -> str:
        await asyncop.sleep(0.01)
        return "woke"

    async def main() -> Any:
        op = me().spawn(sleeper)
        give_up = time.monotonic() + 5
        while not op.done:
            await asyncop.checkpoint()
            assert time.monotonic() < give_up, "the timer never fired while a task spun"
        return await op

    assert runtime.run(main) == "woke"


def test_checkpoint_loop_does_not_starve_other_tasks(vruntime1: asyncop.Runtime) -> None:
    log: list[str] = []

    async def other() -> None:
        log.append("other ran")

    async def main() -> int:
        op = me().spawn(other)
        spins = 0
        while not op.done and spins < 10_000:
            await asyncop.checkpoint()
            spins += 1
        return spins

    assert vruntime1.run(main) < 10
    assert log == ["other ran"]


def test_checkpoint_in_a_cancelled_task_raises_cancelled(vruntime: asyncop.Runtime) -> None:
    log: list[str] = []

    async def main() -> None:
        me().cancel()
        try:
            await asyncop.checkpoint()
        except Cancelled:
            log.append("cancelled")
            raise
        log.append("went on")

    op = vruntime.spawn(main)
    assert op.wait(5).state is OperationState.CANCELLED
    assert log == ["cancelled"]


# ----------------------------------------------------------------------
# sleep(), sleep_until(), current_time()
# ----------------------------------------------------------------------


@pytest.mark.parametrize("point", ["checkpoint", "sleep(0)"])
@pytest.mark.parametrize("clock", ["virtual", "real"])
def test_a_deadline_that_passed_while_the_task_ran_counts_at_its_next_checkpoint(
    point: str, clock: str
) -> None:
    virtual = VirtualClock(autojump=False) if clock == "virtual" else None
    ran_on: list[str] = []

    async def main() -> None:
        async with asyncop.scope(timeout=0.01):
            if virtual is not None:
                virtual.advance(1)
            else:
                end = time.monotonic() + 0.05
                while time.monotonic() < end:
                    pass  # computes past its deadline without awaiting
            await (asyncop.checkpoint() if point == "checkpoint" else asyncop.sleep(0))
            ran_on.append("after the checkpoint")

    with asyncop.Runtime(1, clock=virtual) as rt, pytest.raises(TimeoutError):
        rt.run(main)
    assert ran_on == []


def test_sleep_returns_after_that_much_virtual_time(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[float, float]:
        start = asyncop.current_time()
        await asyncop.sleep(5)
        return start, asyncop.current_time()

    start, end = vruntime.run(main)
    assert end - start == pytest.approx(5)


def test_sleep_until_returns_at_the_deadline(vruntime: asyncop.Runtime) -> None:
    async def main() -> float:
        await asyncop.sleep_until(asyncop.current_time() + 42.5)
        return asyncop.current_time()

    assert vruntime.run(main) == pytest.approx(42.5)


def test_sleep_returns_none(vruntime: asyncop.Runtime) -> None:
    async def main() -> Any:
        return await asyncop.sleep(1)

    assert vruntime.run(main) is None


@pytest.mark.parametrize("seconds", [0, -1, -0.5, 0.0, -math.inf])
def test_sleep_of_zero_or_less_yields_to_the_back_of_the_queue(
    vruntime1: asyncop.Runtime, seconds: float
) -> None:
    # On one worker: like checkpoint(), the sleeper lets the task queued
    # behind it run first, as asyncio.sleep(0) and trio.sleep(0) do.
    log: list[str] = []

    async def sleeper() -> None:
        log.append("a1")
        await asyncop.sleep(seconds)
        log.append("a2")

    async def other() -> None:
        log.append("b")

    async def main() -> None:
        me().spawn(sleeper)
        me().spawn(other)

    vruntime1.run(main)
    assert log == ["a1", "b", "a2"]


def test_sleep_until_a_past_deadline_lets_ready_tasks_run_first(
    vruntime1: asyncop.Runtime,
) -> None:
    # As asyncio's call_at() and trio's sleep_until(): the task wakes from
    # the timer heap, in deadline order, not inline ahead of tasks (and
    # sleeps already due) that were queued first; the clock does not move.
    log: list[str] = []

    async def sleeper() -> None:
        log.append("a1")
        await asyncop.sleep_until(asyncop.current_time() - 10)
        log.append("a2")

    async def other() -> None:
        log.append("b")

    async def main() -> float:
        await asyncop.sleep(100)
        me().spawn(sleeper)
        me().spawn(other)
        return asyncop.current_time()

    assert vruntime1.run(main) == pytest.approx(100)
    assert log == ["a1", "b", "a2"]


def test_negative_sleep_does_not_move_the_clock(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[float, float]:
        start = asyncop.current_time()
        await asyncop.sleep(-3)
        return start, asyncop.current_time()

    start, end = vruntime.run(main)
    assert end == start


def test_sleep_zero_is_still_a_cancellation_point(vruntime: asyncop.Runtime) -> None:
    async def main() -> None:
        me().cancel()
        await asyncop.sleep(0)

    op = vruntime.spawn(main)
    assert op.wait(5).state is OperationState.CANCELLED


def test_cancel_wakes_a_sleeping_task_at_once(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def sleeper() -> None:
        try:
            await asyncop.sleep(1000)
        except Cancelled:
            log.append(("cancelled at", asyncop.current_time()))
            raise

    async def main() -> None:
        op = me().spawn(sleeper)
        await asyncop.sleep(3)
        op.cancel()
        await asyncop.race(op)
        assert op.state is OperationState.CANCELLED

    vruntime.run(main)
    assert log == [("cancelled at", pytest.approx(3))]


def test_sleep_forever_waits_until_cancelled(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def sleeper() -> None:
        try:
            await asyncop.sleep_forever()
        except Cancelled:
            log.append(("cancelled at", asyncop.current_time()))
            raise
        log.append("returned")  # pragma: no cover - it never returns

    async def main() -> None:
        op = me().spawn(sleeper)
        await wait_all_blocked()
        assert "sleep_forever()" in vruntime.dump()
        assert vruntime.registrations() == 0  # no timer: nothing can end it but a cancel
        await asyncop.sleep(3)
        op.cancel()
        await asyncop.race(op)
        assert op.state is OperationState.CANCELLED

    vruntime.run(main)
    assert log == [("cancelled at", 3)]


def test_sleep_forever_in_a_cancelled_task_raises_at_once(vruntime: asyncop.Runtime) -> None:
    async def main() -> None:
        me().cancel()
        with pytest.raises(Cancelled):
            await asyncop.sleep_forever()

    op = vruntime.spawn(main)
    assert op.wait(5).state is OperationState.CANCELLED
    assert vruntime.now() == 0


def test_sleep_forever_never_wins_a_select(vruntime: asyncop.Runtime) -> None:
    async def main() -> list[tuple[int, Any]]:
        inbox: asyncop.Channel[str] = asyncop.Channel(1)
        inbox.try_send("mail")
        got = [await asyncop.select(asyncop.sleep_forever(), inbox.recv_async())]
        got.append(await asyncop.select(asyncop.sleep_forever(), asyncop.sleep(2)))
        return got

    assert vruntime.run(main) == [(1, "mail"), (1, None)]
    assert vruntime.now() == 2
    assert vruntime.registrations() == 0


def test_current_time_in_a_task_equals_runtime_now(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[float, float]:
        await asyncop.sleep(7.25)
        return asyncop.current_time(), vruntime.now()

    inside, now = vruntime.run(main)
    assert inside == now == pytest.approx(7.25)


def test_current_time_in_a_sync_operation_reads_its_runtime(runtime: asyncop.Runtime) -> None:
    def work() -> tuple[float, float, float]:
        return runtime.now(), asyncop.current_time(), runtime.now()

    before, inside, after = runtime.run(work)
    assert before <= inside <= after


def test_current_time_outside_an_operation_raises_runtime_error() -> None:
    with pytest.raises(RuntimeError):
        asyncop.current_time()


def test_current_time_is_a_plain_function_not_an_awaitable(vruntime: asyncop.Runtime) -> None:
    async def main() -> Any:
        return asyncop.current_time()

    assert isinstance(vruntime.run(main), float)


# ----------------------------------------------------------------------
# await op
# ----------------------------------------------------------------------


def test_await_op_gives_its_value(vruntime: asyncop.Runtime) -> None:
    async def child() -> str:
        await asyncop.sleep(1)
        return "value"

    async def main() -> Any:
        return await me().spawn(child)

    assert vruntime.run(main) == "value"


def test_await_op_gives_the_value_of_a_sync_operation(runtime: asyncop.Runtime) -> None:
    def child() -> int:
        return 41 + 1

    async def main() -> Any:
        return await me().spawn(child)

    assert runtime.run(main) == 42


def test_await_op_that_already_ended_gives_its_value(vruntime: asyncop.Runtime) -> None:
    async def child() -> int:
        return 7

    async def main() -> Any:
        op = me().spawn(child)
        await asyncop.sleep(1)
        assert op.state is OperationState.COMPLETED
        return await op

    assert vruntime.run(main) == 7


def test_await_op_raises_its_failure(vruntime: asyncop.Runtime) -> None:
    error = Boom("child failed")

    async def child() -> None:
        await asyncop.sleep(1)
        raise error

    async def main() -> Any:
        op = vruntime.spawn(child)  # a separate root: its failure stays on it
        try:
            await op
        except Boom as exc:
            return exc
        return None

    assert vruntime.run(main) is error


def test_await_cancelled_op_raises_cancellation_error(vruntime: asyncop.Runtime) -> None:
    async def child() -> None:
        await asyncop.sleep(100)

    async def main() -> str:
        op = me().spawn(child)
        await asyncop.sleep(1)
        op.cancel()
        try:
            await op
        except CancellationError:
            return "cancellation error"
        return "no error"

    assert vruntime.run(main) == "cancellation error"


def test_awaiting_own_operation_raises_runtime_error(vruntime: asyncop.Runtime) -> None:
    async def main() -> None:
        await me()

    with pytest.raises(RuntimeError):
        vruntime.run(main)


# ----------------------------------------------------------------------
# timeout(seconds, op)
# ----------------------------------------------------------------------


def test_timeout_gives_the_value_when_op_ends_in_time(vruntime: asyncop.Runtime) -> None:
    async def child() -> str:
        await asyncop.sleep(1)
        return "in time"

    async def main() -> tuple[Any, float]:
        value = await asyncop.timeout(5, me().spawn(child))
        return value, asyncop.current_time()

    value, when = vruntime.run(main)
    assert value == "in time"
    assert when == pytest.approx(1)


def test_timeout_raises_timeout_error_when_the_time_passes(vruntime: asyncop.Runtime) -> None:
    async def child() -> None:
        await asyncop.sleep(100)

    async def main() -> float:
        op = me().spawn(child)
        with pytest.raises(TimeoutError):
            await asyncop.timeout(5, op)
        op.cancel()
        return asyncop.current_time()

    assert vruntime.run(main) == pytest.approx(5)


def test_op_keeps_running_after_a_timeout(vruntime: asyncop.Runtime) -> None:
    async def child() -> str:
        await asyncop.sleep(10)
        return "finished"

    async def main() -> tuple[OperationState, Any, float]:
        op = me().spawn(child)
        with pytest.raises(TimeoutError):
            await asyncop.timeout(2, op)
        state_after_timeout = op.state
        value = await op
        return state_after_timeout, value, asyncop.current_time()

    state, value, when = vruntime.run(main)
    assert state is OperationState.RUNNING
    assert value == "finished"
    assert when == pytest.approx(10)


def test_timeout_raises_the_failure_of_op(vruntime: asyncop.Runtime) -> None:
    async def child() -> None:
        await asyncop.sleep(1)
        raise Boom

    async def main() -> str:
        op = vruntime.spawn(child)
        try:
            await asyncop.timeout(5, op)
        except Boom:
            return "boom"
        return "nothing"

    assert vruntime.run(main) == "boom"


def test_timeout_releases_its_timer_when_op_ends_first(vruntime: asyncop.Runtime) -> None:
    async def child() -> None:
        await asyncop.sleep(1)

    async def main() -> int:
        await asyncop.timeout(1000, me().spawn(child))
        return vruntime.registrations()

    assert vruntime.run(main) == 0


# ----------------------------------------------------------------------
# race(*ops)
# ----------------------------------------------------------------------


def test_race_gives_the_first_op_to_end(vruntime: asyncop.Runtime) -> None:
    async def child(seconds: float) -> float:
        await asyncop.sleep(seconds)
        return seconds

    async def main() -> tuple[bool, float]:
        slow = me().spawn(child, 9, name="slow")
        fast = me().spawn(child, 2, name="fast")
        first = await asyncop.race(slow, fast)
        return first is fast, asyncop.current_time()

    is_fast, when = vruntime.run(main)
    assert is_fast
    assert when == pytest.approx(2)


def test_race_leaves_the_other_ops_running(vruntime: asyncop.Runtime) -> None:
    log: list[str] = []

    async def child(seconds: float, label: str) -> str:
        await asyncop.sleep(seconds)
        log.append(label)
        return label

    async def main() -> list[Any]:
        a = me().spawn(child, 3, "a")
        b = me().spawn(child, 1, "b")
        c = me().spawn(child, 5, "c")
        await asyncop.race(a, b, c)
        states = [a.state, c.state]
        return [states, await a, await c]

    states, a_value, c_value = vruntime.run(main)
    assert states == [OperationState.RUNNING, OperationState.RUNNING]
    assert (a_value, c_value) == ("a", "c")
    assert log == ["b", "a", "c"]


def test_race_gives_a_failed_op_without_raising(vruntime: asyncop.Runtime) -> None:
    async def failing() -> None:
        await asyncop.sleep(1)
        raise Boom

    async def slow() -> None:
        await asyncop.sleep(10)

    async def main() -> OperationState:
        bad = vruntime.spawn(failing)
        other = me().spawn(slow)
        first = await asyncop.race(bad, other)
        assert first is bad
        with pytest.raises(Boom):
            bad.result()
        return other.state

    assert vruntime.run(main) is OperationState.RUNNING


# ----------------------------------------------------------------------
# select(*awaitables)
# ----------------------------------------------------------------------


def test_select_returns_index_and_value_of_the_first(vruntime: asyncop.Runtime) -> None:
    async def child() -> str:
        await asyncop.sleep(3)
        return "op"

    async def main() -> tuple[Any, float]:
        result = await asyncop.select(asyncop.sleep(10), me().spawn(child), asyncop.sleep(20))
        return result, asyncop.current_time()

    result, when = vruntime.run(main)
    assert result == (1, "op")
    assert when == pytest.approx(3)


def test_select_gives_the_value_of_a_channel_receive(vruntime: asyncop.Runtime) -> None:
    channel: asyncop.Channel[str] = asyncop.Channel(1)

    async def sender() -> None:
        await asyncop.sleep(2)
        await channel.send_async("item")

    async def main() -> Any:
        me().spawn(sender)
        return await asyncop.select(asyncop.sleep(10), channel.recv_async())

    assert vruntime.run(main) == (1, "item")


def test_select_spawns_nothing(vruntime: asyncop.Runtime) -> None:
    event = asyncop.Event()

    async def selector() -> Any:
        return await asyncop.select(asyncop.sleep(100), event.wait_async())

    async def main() -> tuple[list[Any], Any]:
        op = me().spawn(selector)
        await wait_all_blocked()
        children_while_waiting = op.children()
        event.set()
        return children_while_waiting, await op

    children, result = vruntime.run(main)
    assert children == []
    assert result == (1, None)


def test_select_cancels_the_losing_sleeps(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[Any, int]:
        result = await asyncop.select(asyncop.sleep(1), asyncop.sleep(100), asyncop.sleep(200))
        return result, vruntime.registrations()

    result, registrations = vruntime.run(main)
    assert result == (0, None)
    assert registrations == 0


def test_select_stops_waiting_for_the_losing_operation(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    async def slow() -> str:
        await asyncop.sleep(50)
        return "slow"

    async def main() -> None:
        op = me().spawn(slow)
        index, _ = await asyncop.select(op, asyncop.sleep(1))
        log.append(("selected", index, asyncop.current_time()))
        # The losing operation is not awaited any more: a later wait ends
        # on its own event, not on the op's end.
        await asyncop.sleep(5)
        log.append(("slept", asyncop.current_time()))

    vruntime.run(main)
    assert log == [("selected", 1, pytest.approx(1)), ("slept", pytest.approx(6))]


def test_select_raises_the_error_of_the_first_to_fire(vruntime: asyncop.Runtime) -> None:
    async def failing() -> None:
        await asyncop.sleep(1)
        raise Boom

    async def main() -> str:
        op = vruntime.spawn(failing)
        try:
            await asyncop.select(asyncop.sleep(10), op)
        except Boom:
            return "boom"
        return "no error"

    assert vruntime.run(main) == "boom"


def test_losing_recv_does_not_take_a_waiting_item(vruntime: asyncop.Runtime) -> None:
    channel: asyncop.Channel[str] = asyncop.Channel(1)

    async def main() -> tuple[Any, Any]:
        await channel.send_async("kept")
        # sleep(0) is ready when armed, before the receive is even tried.
        result = await asyncop.select(asyncop.sleep(0), channel.recv_async())
        return result, channel.try_recv()

    result, left = vruntime.run(main)
    assert result == (0, None)
    assert left == "kept"


def test_losing_recv_leaves_a_later_item_for_the_next_receiver(vruntime: asyncop.Runtime) -> None:
    channel: asyncop.Channel[str] = asyncop.Channel(0)
    log: list[Any] = []

    async def selector() -> None:
        log.append(("selector", await asyncop.select(channel.recv_async(), asyncop.sleep(1))))

    async def receiver() -> None:
        await asyncop.sleep(2)
        log.append(("receiver", await channel.recv_async()))

    async def sender() -> None:
        await asyncop.sleep(3)
        await channel.send_async("item")
        log.append(("sent", asyncop.current_time()))

    async def main() -> None:
        me().spawn(selector)
        me().spawn(receiver)
        me().spawn(sender)

    vruntime.run(main)
    assert dict(log) == {"selector": (1, None), "receiver": "item", "sent": pytest.approx(3)}


@pytest.mark.timeout(15)
def test_losing_recv_never_loses_an_item_under_a_race(runtime: asyncop.Runtime) -> None:
    # A thread sends while the task keeps racing each receive against a
    # short sleep: every item must arrive exactly once, in order.
    count = 300
    channel: asyncop.Channel[int] = asyncop.Channel(0)
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    gaps = [rng.random() * 0.0005 for _ in range(count)]

    def send_all() -> None:
        for i, gap in enumerate(gaps):
            if gap > 0.0003:
                time.sleep(gap)
            channel.send(i, timeout=5)

    async def main() -> tuple[list[int], int]:
        got: list[int] = []
        lost_races = 0
        while len(got) < count:
            index, value = await asyncop.select(channel.recv_async(), asyncop.sleep(0.0002))
            if index == 0:
                got.append(value)
            else:
                lost_races += 1
        return got, lost_races

    sender = threading.Thread(target=send_all)
    sender.start()
    try:
        got, _lost = runtime.run(main)
    finally:
        sender.join(10)
    assert got == list(range(count)), f"seed={seed}"
    with pytest.raises(asyncop.WouldBlock):
        channel.try_recv()


def test_losing_lock_acquisition_does_not_keep_the_lock(vruntime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()
    log: list[Any] = []

    async def holder() -> None:
        async with lock:
            await asyncop.sleep(5)
        log.append(("released", asyncop.current_time()))

    async def selector() -> None:
        await asyncop.sleep(1)
        log.append(("selector", await asyncop.select(lock.lock_async(), asyncop.sleep(1))))

    async def later() -> None:
        await asyncop.sleep(10)
        log.append(("locked before", lock.locked()))
        async with lock:
            log.append(("acquired", asyncop.current_time()))

    async def main() -> None:
        me().spawn(holder)
        me().spawn(selector)
        me().spawn(later)

    vruntime.run(main)
    assert log == [
        ("selector", (1, None)),
        ("released", pytest.approx(5)),
        ("locked before", False),
        ("acquired", pytest.approx(10)),
    ]


def test_free_lock_losing_to_a_ready_event_stays_free(vruntime: asyncop.Runtime) -> None:
    lock = asyncop.Lock()

    async def main() -> tuple[Any, bool]:
        result = await asyncop.select(asyncop.sleep(0), lock.lock_async())
        return result, lock.locked()

    assert vruntime.run(main) == ((0, None), False)


def test_select_in_a_cancelled_task_raises_cancelled(vruntime: asyncop.Runtime) -> None:
    event = asyncop.Event()
    event.set()

    async def main() -> None:
        me().cancel()
        await asyncop.select(event.wait_async(), asyncop.sleep(1))

    op = vruntime.spawn(main)
    assert op.wait(5).state is OperationState.CANCELLED


# ----------------------------------------------------------------------
# spawn_blocking(fn, *args)
# ----------------------------------------------------------------------


def test_spawn_blocking_runs_in_another_thread(runtime: asyncop.Runtime) -> None:
    async def main() -> tuple[int, int]:
        worker = threading.get_ident()
        other = await asyncop.spawn_blocking(threading.get_ident)
        return worker, other

    worker, other = runtime.run(main)
    assert worker != other


def test_spawn_blocking_passes_args_and_returns_the_value(runtime: asyncop.Runtime) -> None:
    def add(a: int, b: int) -> int:
        return a + b

    async def main() -> Any:
        return await asyncop.spawn_blocking(add, 40, 2)

    assert runtime.run(main) == 42


def test_spawn_blocking_raises_the_error_of_fn(runtime: asyncop.Runtime) -> None:
    error = Boom("in the thread")

    def fail() -> None:
        raise error

    async def main() -> Any:
        try:
            await asyncop.spawn_blocking(fail)
        except Boom as exc:
            return exc
        return None

    assert runtime.run(main) is error


def test_spawn_blocking_copies_context_variables(runtime: asyncop.Runtime) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="default")

    def read_and_write() -> str:
        seen = var.get()
        var.set("written in the thread")
        return seen

    async def main() -> tuple[str, str]:
        var.set("set in the task")
        seen = await asyncop.spawn_blocking(read_and_write)
        return seen, var.get()

    seen, after = runtime.run(main)
    assert seen == "set in the task"
    assert after == "set in the task"


def test_cancel_during_spawn_blocking_waits_and_keeps_the_value(runtime: asyncop.Runtime) -> None:
    started = threading.Event()
    release = threading.Event()
    log: list[Any] = []

    def blocking() -> str:
        started.set()
        release.wait(5)
        return "value"

    async def task() -> None:
        value = await asyncop.spawn_blocking(blocking)
        log.append(("got", value))
        try:
            await asyncop.checkpoint()
        except Cancelled:
            log.append("cancelled at next await")
            raise
        log.append("went on")

    op = runtime.spawn(task)
    assert started.wait(5)
    op.cancel()
    with pytest.raises(TimeoutError):
        op.wait(0.2)  # still waiting for the thread
    assert log == []
    release.set()
    assert op.wait(5).state is OperationState.CANCELLED
    assert log == [("got", "value"), "cancelled at next await"]


def test_abandoned_spawn_blocking_wakes_the_task_at_once(runtime: asyncop.Runtime) -> None:
    started = threading.Event()
    release = threading.Event()
    log: list[Any] = []

    def blocking() -> str:
        started.set()
        release.wait(5)
        return "late"

    async def task() -> None:
        try:
            await asyncop.spawn_blocking(blocking, abandon=True)
        except Cancelled:
            log.append("cancelled")
            raise
        log.append("got the value")

    op = runtime.spawn(task)
    try:
        assert started.wait(5)
        op.cancel()
        assert op.wait(5).state is OperationState.CANCELLED
        assert not release.is_set()
        assert log == ["cancelled"]
    finally:
        release.set()


@pytest.mark.parametrize("late", ["value", "error"])
def test_abandoned_late_result_is_dropped_silently(
    caplog: pytest.LogCaptureFixture, late: str
) -> None:
    started = threading.Event()
    release = threading.Event()
    finished = threading.Event()
    hook_calls: list[Any] = []
    old_hook = threading.excepthook
    threading.excepthook = hook_calls.append

    def blocking() -> str:
        started.set()
        release.wait(5)
        finished.set()
        if late == "error":
            raise Boom("late")
        return "late"

    async def task() -> None:
        await asyncop.spawn_blocking(blocking, abandon=True)

    caplog.set_level(logging.DEBUG)
    try:
        rt = asyncop.Runtime(2, name=f"ab{id(object()):x}")
        try:
            op = rt.spawn(task)
            assert started.wait(5)
            op.cancel()
            assert op.wait(5).state is OperationState.CANCELLED
            release.set()
            assert finished.wait(5)
        finally:
            release.set()
            # Shutting down joins the blocking-call threads, so the late
            # result has been handed in (and dropped) by the time it returns.
            assert rt.shutdown(timeout=10)
        del op
        gc.collect()
    finally:
        threading.excepthook = old_hook
    assert hook_calls == []
    assert [r for r in caplog.records if r.name.startswith("asyncop")] == []


def test_spawn_blocking_does_not_hold_a_worker(runtime: asyncop.Runtime) -> None:
    # Two workers, three tasks blocked in threads: a fourth task still runs.
    release = threading.Event()

    async def blocker() -> None:
        await asyncop.spawn_blocking(release.wait, 5)

    async def quick() -> str:
        return "ran"

    async def main() -> str:
        for _ in range(3):
            me().spawn(blocker)
        value = await me().spawn(quick)
        release.set()
        return value

    try:
        assert runtime.run(main) == "ran"
    finally:
        release.set()


# ----------------------------------------------------------------------
# Timer order and the timer heap under churn
# ----------------------------------------------------------------------


def test_sleeps_wake_in_deadline_order_with_ties_in_the_order_set(
    vruntime1: asyncop.Runtime,
) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    # Few distinct deadlines, so that many are equal.
    deadlines = [float(rng.randrange(1, 20)) for _ in range(300)]
    log: list[int] = []

    async def sleeper(i: int) -> None:
        await asyncop.sleep_until(deadlines[i])
        log.append(i)

    async def main() -> None:
        for i in range(len(deadlines)):
            me().spawn(sleeper, i)

    vruntime1.run(main)
    expected = sorted(range(len(deadlines)), key=lambda i: (deadlines[i], i))
    assert log == expected, f"seed={seed}"


def test_relative_sleeps_wake_in_deadline_order(vruntime: asyncop.Runtime) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    durations = [rng.uniform(0.001, 100.0) for _ in range(300)]
    log: list[int] = []
    lock = threading.Lock()

    async def sleeper(i: int) -> None:
        await asyncop.sleep(durations[i])
        with lock:
            log.append(i)

    async def main() -> None:
        for i in range(len(durations)):
            me().spawn(sleeper, i)

    vruntime.run(main)
    # Each task is woken at its own virtual instant, once the previous wake
    # has finished: the log follows the deadlines (durations set at time 0).
    assert log == sorted(range(len(durations)), key=lambda i: durations[i]), f"seed={seed}"


@pytest.mark.timeout(15)
def test_timer_heap_stays_bounded_under_select_churn(vruntime: asyncop.Runtime) -> None:
    tasks, rounds = 20, 500
    ready = asyncop.Event()
    ready.set()
    biggest: list[int] = []

    async def churn() -> None:
        peak = 0
        for _ in range(rounds):
            # The sleep loses every time: its timer is cancelled at once.
            index, _ = await asyncop.select(asyncop.sleep(100), ready.wait_async())
            assert index == 1
            peak = max(peak, vruntime._timers.heap_size)
        biggest.append(peak)

    async def main() -> int:
        for _ in range(tasks):
            me().spawn(churn)
        return 0

    vruntime.run(main)
    assert len(biggest) == tasks
    # 10,000 timers were armed and cancelled; the heap never holds more
    # than a small multiple of the live ones plus the clean-up threshold.
    assert max(biggest) < 500, max(biggest)
    assert vruntime.registrations() == 0


# ----------------------------------------------------------------------
# sleep(0) yields; infinite and bad lengths
# ----------------------------------------------------------------------


@pytest.mark.parametrize("seconds", [0, -1])
def test_two_tasks_alternating_on_sleep_zero_interleave(
    vruntime1: asyncop.Runtime, seconds: float
) -> None:
    log: list[str] = []

    async def looper(name: str) -> None:
        for i in range(40):
            log.append(f"{name}{i}")
            await asyncop.sleep(seconds)

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(looper, "a")
            s.spawn(looper, "b")

    vruntime1.run(main)
    assert log == [f"{name}{i}" for i in range(40) for name in "ab"]


INFINITE = [math.inf, 1e300, 10**400]


@pytest.mark.parametrize("seconds", INFINITE, ids=["inf", "1e300", "huge-int"])
def test_an_infinite_sleep_arms_no_timer_and_ends_only_by_cancel(
    vruntime: asyncop.Runtime, seconds: float
) -> None:
    async def sleeper() -> None:
        await asyncop.sleep(seconds)

    async def main() -> tuple[int, OperationState]:
        op = me().spawn(sleeper)
        await wait_all_blocked()
        armed = vruntime.registrations()
        op.cancel()
        await asyncop.race(op)
        return armed, op.state

    assert vruntime.run(main) == (0, OperationState.CANCELLED)


def test_sleep_until_inf_and_timeout_inf_arm_no_timer(vruntime: asyncop.Runtime) -> None:
    gate = asyncop.Event()

    async def slow() -> str:
        await gate.wait_async()
        return "done"

    async def main() -> tuple[int, str, int]:
        sleeper = me().spawn(lambda: None)
        until = me().spawn(_sleep_until_forever)
        waited = me().spawn(slow)
        result: list[str] = []

        async def times_out_never() -> None:
            result.append(await asyncop.timeout(math.inf, waited))

        async def selects() -> None:
            index, _ = await asyncop.select(asyncop.sleep(math.inf), gate.wait_async())
            result.append(f"select {index}")

        me().spawn(times_out_never)
        me().spawn(selects)
        await wait_all_blocked()
        armed = vruntime.registrations()
        until.cancel()
        gate.set()
        await asyncop.race(until)
        while len(result) < 2:
            await asyncop.sleep(1)
        await asyncop.race(sleeper)
        return armed, " ".join(sorted(result)), vruntime.registrations()

    assert vruntime.run(main) == (0, "done select 1", 0)


async def _sleep_until_forever() -> None:
    await asyncop.sleep_until(math.inf)
