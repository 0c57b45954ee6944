"""The waker: one per task, five states, first event wins, no lost or double wake."""

from __future__ import annotations

import inspect
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import asyncop
from asyncop import (
    CancellationError,
    Cancelled,
    EndOfChannel,
    OperationState,
    WakerStatus,
    lowlevel,
)
from asyncop.lowlevel import Subscription, WaitEvent

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


def waker_of(op: asyncop.AsyncOperation) -> lowlevel.Waker:
    assert op._task is not None
    waker: lowlevel.Waker = op._task.waker
    return waker


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``predicate`` from the test thread until it holds."""
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.001)


def parked(op: asyncop.AsyncOperation) -> bool:
    task = op._task  # dropped once the operation is final
    return task is not None and task.waker.status is WakerStatus.WAITING


class Manual(WaitEvent):
    """An event fired by hand: keeps its subscriptions and logs disarms."""

    def __init__(self) -> None:
        self.subs: list[Subscription] = []
        self.disarmed: list[Subscription] = []

    def _arm(self, sub: Subscription) -> None:
        self.subs.append(sub)

    def _disarm(self, sub: Subscription) -> None:
        self.disarmed.append(sub)


# -- states ------------------------------------------------------------------------


def test_waker_status_has_exactly_the_five_states() -> None:
    assert {status.name for status in WakerStatus} == {
        "NO_STATUS",
        "WAITING",
        "QUEUED",
        "IGNORED",
        "RESULT",
    }
    assert lowlevel.WakerStatus is asyncop.WakerStatus
    assert "QUEUED" in repr(WakerStatus.QUEUED)


def test_a_task_keeps_one_waker_across_all_its_waits(runtime: asyncop.Runtime) -> None:
    event = asyncop.Event()
    event.set()
    channel: asyncop.Channel[int] = asyncop.Channel(1)
    channel.try_send(1)

    async def body(op: asyncop.AsyncOperation, context: object) -> list[int]:
        ids = [id(waker_of(me()))]
        await asyncop.sleep(0)
        ids.append(id(waker_of(me())))
        await asyncop.sleep(0.01)
        ids.append(id(waker_of(me())))
        await event.wait_async()
        ids.append(id(waker_of(me())))
        await channel.recv_async()
        ids.append(id(waker_of(me())))
        await asyncop.checkpoint()
        ids.append(id(waker_of(me())))
        return ids

    op = runtime.create(body)
    waker = waker_of(op)  # made with the task, before it runs
    runtime.submit(op)
    ids = op.wait(5).value
    assert ids == [id(waker)] * 6


def test_each_task_owns_its_own_waker(runtime: asyncop.Runtime) -> None:
    gate = asyncop.Event()

    async def body() -> None:
        await gate.wait_async()

    ops = [runtime.spawn(body) for _ in range(3)]
    wakers = [waker_of(op) for op in ops]
    gate.set()
    for op in ops:
        op.wait(5)
    assert len({id(w) for w in wakers}) == 3
    assert [w.task for w in wakers] == ops


def test_waker_runs_no_status_waiting_queued_result(rt1: asyncop.Runtime) -> None:
    log: list[tuple[str, WakerStatus]] = []
    event = asyncop.Event()

    async def sleeper() -> None:
        log.append(("running", waker_of(me()).status))
        await event.wait_async()
        log.append(("resumed", waker_of(me()).status))

    async def main() -> None:
        s = me().spawn(sleeper)
        await asyncop.sleep(0.01)
        log.append(("parked", waker_of(s).status))
        event.set()
        # One worker, and it is running this task: the sleeper is queued.
        log.append(("fired", waker_of(s).status))
        await s

    rt1.run(main)
    assert log == [
        ("running", WakerStatus.NO_STATUS),
        ("parked", WakerStatus.WAITING),
        ("fired", WakerStatus.QUEUED),
        ("resumed", WakerStatus.RESULT),
    ]


def test_a_custom_event_firing_queues_the_task_with_its_result(
    runtime: asyncop.Runtime,
) -> None:
    event = Manual()
    seen: list[Any] = []

    async def body() -> Any:
        value = await event
        waker = waker_of(me())
        seen.append((waker.status, waker.triggered is event))
        return value

    op = runtime.spawn(body)
    wait_until(lambda: parked(op))
    (sub,) = event.subs
    waker = waker_of(op)
    # Hold the runtime lock so that no worker can resume the task yet.
    with runtime._lock:
        assert sub.fire("value") is True
        assert waker.status is WakerStatus.QUEUED
    assert op.wait(5).value == "value"
    assert seen == [(WakerStatus.RESULT, True)]
    assert event.disarmed == [sub]


# -- first event wins ------------------------------------------------------------------


class Pair(WaitEvent):
    """Subscribes the waiting task to itself and, through resume_when, to ``other``."""

    def __init__(self, other: WaitEvent) -> None:
        self.other = other
        self.subs: list[Subscription] = []
        self.disarmed: list[Subscription] = []

    def _arm(self, sub: Subscription) -> None:
        self.subs.append(sub)
        lowlevel.resume_when(sub.waker.task, self.other, lowlevel.resolve)

    def _disarm(self, sub: Subscription) -> None:
        self.disarmed.append(sub)


def test_second_event_after_queued_is_ignored(runtime: asyncop.Runtime) -> None:
    other = Manual()
    pair = Pair(other)
    resumes: list[Any] = []

    async def body() -> None:
        value = await pair
        resumes.append((value, waker_of(me()).triggered is other))
        start = time.monotonic()
        await asyncop.sleep(0.05)  # a late firing must not cut this wait short
        resumes.append(("slept", time.monotonic() - start >= 0.04))

    op = runtime.spawn(body)
    wait_until(lambda: parked(op))
    with runtime._lock:
        assert other.subs[0].fire("other") is True
        assert pair.subs[0].fire("pair") is False
    wait_until(lambda: len(resumes) == 1)
    assert pair.subs[0].fire("late") is False  # a firing of a finished wait
    op.wait(5)
    assert resumes == [("other", True), ("slept", True)]
    assert pair.disarmed == pair.subs and other.disarmed == other.subs


def test_select_fired_from_two_threads_at_once_resumes_once_with_one_result(
    runtime: asyncop.Runtime,
) -> None:
    rounds = 100
    events = [(asyncop.Event(), asyncop.Event()) for _ in range(rounds)]
    results: list[tuple[int, int]] = []
    barrier = threading.Barrier(3)

    async def body() -> None:
        for r, (a, b) in enumerate(events):
            index, _ = await asyncop.select(a.wait_async(), b.wait_async())
            results.append((r, index))

    def firer(which: int) -> None:
        for pair in events:
            barrier.wait(5)
            pair[which].set()

    op = runtime.spawn(body)
    threads = [threading.Thread(target=firer, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    try:
        for r in range(rounds):
            wait_until(lambda: len(results) == r and parked(op))  # noqa: B023
            barrier.wait(5)
    finally:
        for t in threads:
            t.join(5)
    assert op.wait(5).state is OperationState.COMPLETED
    assert [r for r, _ in results] == list(range(rounds))
    assert {index for _, index in results} <= {0, 1}


# -- IGNORED: cancelled while queued for the first step -----------------------------------


def test_a_task_cancelled_while_queued_for_its_first_step_never_runs(
    runtime: asyncop.Runtime,
) -> None:
    release = threading.Event()
    busy = threading.Semaphore(0)
    ran: list[str] = []

    def occupy() -> None:
        busy.release()
        release.wait(5)

    blockers = [runtime.spawn(occupy) for _ in range(2)]
    assert busy.acquire(timeout=5) and busy.acquire(timeout=5)

    async def body() -> None:
        ran.append("ran")

    op = runtime.spawn(body)  # both workers are busy: it stays PENDING
    op.cancel()
    release.set()
    for b in blockers:
        b.wait(5)
    assert op.wait(5).state is OperationState.CANCELLED
    time.sleep(0.05)
    assert ran == []


def test_a_task_cancelled_while_queued_is_ignored_by_the_worker_that_pops_it(
    rt1: asyncop.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncop")
    ran: list[str] = []

    async def child() -> None:
        ran.append("ran")

    async def main() -> WakerStatus:
        c = me().spawn(child)  # queued behind this task on the only worker
        waker = waker_of(c)
        c.cancel()
        await asyncop.checkpoint()  # the worker pops the child first
        return waker.status

    status = rt1.run(main)
    assert ran == []
    assert [r.getMessage() for r in caplog.records if r.name == "asyncop"] == []
    assert status is WakerStatus.IGNORED


# -- waker_new and resume_when from a custom event -------------------------------------


class GateWithTimeout(WaitEvent):
    """Wait for ``gate`` for at most ``seconds``, built on waker_new/resume_when."""

    def __init__(self, gate: asyncop.Event, seconds: float) -> None:
        self.gate = gate
        self.seconds = seconds

    def _arm(self, sub: Subscription) -> None:
        task = sub.waker.task
        lowlevel.waker_new(task, timeout=self.seconds)
        lowlevel.resume_when(task, self.gate.wait_async(), lowlevel.resolve)


def test_waker_new_timeout_ends_a_custom_wait_with_timeout_error(
    vruntime: asyncop.Runtime,
) -> None:
    gate = asyncop.Event()

    async def body() -> tuple[str, float]:
        start = asyncop.current_time()
        try:
            await GateWithTimeout(gate, 5)
        except TimeoutError:
            return "timed out", asyncop.current_time() - start
        return "gate", asyncop.current_time() - start

    outcome, elapsed = vruntime.run(body)
    assert outcome == "timed out"
    assert elapsed == pytest.approx(5, abs=0.01)
    assert "waiters=0" in repr(gate)
    assert vruntime.registrations() == 0


def test_waker_new_timeout_is_released_when_the_custom_event_fires_first(
    vruntime: asyncop.Runtime,
) -> None:
    gate = asyncop.Event()

    async def opener() -> None:
        await asyncop.sleep(1)
        gate.set()

    async def main() -> tuple[Any, float, int]:
        start = asyncop.current_time()
        me().spawn(opener)
        value = await GateWithTimeout(gate, 5)
        return value, asyncop.current_time() - start, vruntime.registrations()

    value, elapsed, registrations = vruntime.run(main)
    assert value is None
    assert elapsed == pytest.approx(1, abs=0.01)
    assert registrations == 0


def test_waker_new_cancellation_event_ends_a_custom_wait_with_cancelled(
    runtime: asyncop.Runtime,
) -> None:
    stop = asyncop.Event()
    log: list[str] = []

    class UntilStopped(WaitEvent):
        def _arm(self, sub: Subscription) -> None:
            lowlevel.waker_new(sub.waker.task, cancellation=stop.wait_async())

    async def body() -> None:
        try:
            await UntilStopped()
        except Cancelled:
            log.append("cancelled by the event")
            raise

    op = runtime.spawn(body)
    wait_until(lambda: parked(op))
    stop.set()
    assert op.wait(5).state is OperationState.CANCELLED
    assert log == ["cancelled by the event"]


def test_resume_when_with_the_timeout_callback_raises_timeout_error(
    vruntime: asyncop.Runtime,
) -> None:
    class Deadline(WaitEvent):
        def _arm(self, sub: Subscription) -> None:
            lowlevel.resume_when(sub.waker.task, asyncop.sleep(2), lowlevel.timeout)

    async def body() -> str:
        try:
            await Deadline()
        except TimeoutError:
            return "timeout"
        return "no timeout"

    assert vruntime.run(body) == "timeout"


def test_resume_when_and_waker_new_reject_what_they_cannot_use(
    runtime: asyncop.Runtime,
) -> None:
    async def body() -> str:
        with pytest.raises(TypeError):
            lowlevel.resume_when(me(), object())
        return "checked"

    assert runtime.run(body) == "checked"
    sync_op = runtime.create(lambda op, ctx: None)
    with pytest.raises(TypeError):
        lowlevel.waker_new(sync_op)
    sync_op.cancel()


@pytest.mark.parametrize("held", ["parked", "queued"])
def test_waker_new_refuses_a_task_that_is_not_running_and_leaves_its_wait_alone(
    runtime: asyncop.Runtime, held: str
) -> None:
    event = Manual()

    async def body() -> Any:
        return await event

    op = runtime.spawn(body)
    wait_until(lambda: parked(op))
    (sub,) = event.subs
    waker = waker_of(op)
    with runtime._lock:  # (held: no worker resumes the task meanwhile)
        if held == "queued":
            assert sub.fire("value") is True
        status = waker.status
        with pytest.raises(
            RuntimeError, match=r"waker_new\(\) was called for task '.*body', which is not running"
        ):
            lowlevel.waker_new(op, timeout=1)
        assert waker.status is status and event.disarmed == []
    if held == "parked":
        assert sub.fire("value") is True
    assert op.wait(5).value == "value"


# -- dump() ----------------------------------------------------------------------------


def test_dump_shows_what_a_parked_task_waits_on_and_where(runtime: asyncop.Runtime) -> None:
    gate = asyncop.Event()
    lines: list[int] = []

    async def parked_task() -> None:
        lines.append(inspect.currentframe().f_lineno + 1)  # type: ignore[union-attr]
        await gate.wait_async()

    op = runtime.spawn(parked_task, name="parked-task")
    wait_until(lambda: parked(op))
    (line,) = [text for text in runtime.dump().splitlines() if "parked-task" in text]
    gate.set()
    op.wait(5)
    assert "RUNNING" in line
    assert "event" in line
    assert f"{parked_task.__code__.co_filename}:{lines[0]}" in line


def test_dump_points_at_the_innermost_await_of_nested_calls(runtime: asyncop.Runtime) -> None:
    lines: list[int] = []

    async def helper() -> None:
        lines.append(inspect.currentframe().f_lineno + 1)  # type: ignore[union-attr]
        await asyncop.sleep(100)

    async def outer() -> None:
        await helper()

    op = runtime.spawn(outer, name="nested-task")
    wait_until(lambda: parked(op))
    (line,) = [text for text in runtime.dump().splitlines() if "nested-task" in text]
    op.cancel()
    op.wait(5)
    assert "sleep(" in line
    assert f"at {helper.__code__.co_filename}:{lines[0]}" in line


# -- stress: no lost wake, no double resume -------------------------------------------


class Record:
    """What one stress task saw; written only by that task."""

    def __init__(self) -> None:
        self.entered = 0
        self.resumed = 0
        self.got: list[tuple[str, int, Any, bool]] = []
        self.outcome = "running"


@pytest.mark.timeout(40)
def test_threaded_fires_and_cancels_lose_no_wake_and_resume_no_task_twice(
    runtime: asyncop.Runtime,
) -> None:
    seed = int(os.environ.get("ASYNCOP_STRESS_SEED", random.randrange(2**32)))
    try:
        run_stress(runtime, seed)
    except BaseException:
        print(f"stress seed: {seed} (rerun with ASYNCOP_STRESS_SEED={seed})")
        raise


def run_stress(runtime: asyncop.Runtime, seed: int) -> None:
    rng = random.Random(seed)
    n_tasks, n_rounds, n_items = 200, 10, 800
    kinds = [
        [rng.choice(("event", "recv", "select", "timed")) for _ in range(n_rounds)]
        for _ in range(n_tasks)
    ]
    sleeps = [[rng.uniform(0, 0.01) for _ in range(n_rounds)] for _ in range(n_tasks)]
    events = [[asyncop.Event() for _ in range(n_rounds)] for _ in range(n_tasks)]
    channel: asyncop.Channel[int] = asyncop.Channel(4)
    records = [Record() for _ in range(n_tasks)]

    async def body(i: int) -> str:
        rec = records[i]
        for k in range(n_rounds):
            kind = kinds[i][k]
            event = events[i][k]
            rec.entered += 1
            try:
                if kind == "event":
                    value = await event.wait_async()
                    rec.got.append(("event", k, value, event.is_set()))
                elif kind == "recv":
                    value = await channel.recv_async()
                    rec.got.append(("item", k, value, True))
                elif kind == "select":
                    index, value = await asyncop.select(event.wait_async(), channel.recv_async())
                    if index == 0:
                        rec.got.append(("event", k, value, event.is_set()))
                    else:
                        rec.got.append(("item", k, value, True))
                else:
                    index, value = await asyncop.select(
                        event.wait_async(), asyncop.sleep(sleeps[i][k])
                    )
                    if index == 0:
                        rec.got.append(("event", k, value, event.is_set()))
                    else:
                        rec.got.append(("timer", k, value, True))
            except Cancelled:
                rec.resumed += 1
                rec.outcome = "cancelled"
                raise
            except EndOfChannel:
                rec.resumed += 1
                rec.outcome = "closed"
                return "closed"
            rec.resumed += 1
        rec.outcome = "done"
        return "done"

    ops = [runtime.spawn(body, i, name=f"stress-{i}") for i in range(n_tasks)]

    sent: list[int] = []
    cancelled: set[int] = set()
    pairs = [(i, k) for i in range(n_tasks) for k in range(n_rounds)]
    thread_seeds = [rng.randrange(2**32) for _ in range(3)]
    failures: list[BaseException] = []

    def guarded(fn: Callable[[random.Random], None], tseed: int) -> Callable[[], None]:
        def run() -> None:
            try:
                fn(random.Random(tseed))
            except BaseException as exc:  # reported by the test thread
                failures.append(exc)

        return run

    def setter(r: random.Random) -> None:
        order = pairs[:]
        r.shuffle(order)
        for n, (i, k) in enumerate(order):
            events[i][k].set()
            if n % 8 == 0:
                time.sleep(r.uniform(0, 0.002))

    def sender(r: random.Random) -> None:
        for x in range(n_items):
            try:
                channel.send(x, timeout=0.01)
            except TimeoutError:
                continue
            sent.append(x)
            if r.random() < 0.1:
                time.sleep(r.uniform(0, 0.002))

    def canceller(r: random.Random) -> None:
        # Spread over about as long as the setter runs.
        victims = r.sample(range(n_tasks), n_tasks // 2)
        for i in victims:
            time.sleep(r.uniform(0, 0.005))
            cancelled.add(i)
            ops[i].cancel()

    threads = [
        threading.Thread(target=guarded(fn, s), name=f"stress-{fn.__name__}")
        for fn, s in zip((setter, sender, canceller), thread_seeds, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not any(t.is_alive() for t in threads), f"seed {seed}: a firing thread hung"
    assert failures == [], f"seed {seed}"
    # Whatever still waits can now end: every event is set, and receives
    # see the end of the channel once its buffer is drained.
    channel.close()

    # No lost wake: every task ends within a bound.
    end = time.monotonic() + 10
    for op in ops:
        op.wait(max(0.0, end - time.monotonic()))
    drained = []
    while True:
        try:
            drained.append(channel.try_recv())
        except EndOfChannel:
            break

    received: list[int] = []
    for i, (op, rec) in enumerate(zip(ops, records, strict=True)):
        where = f"seed {seed}, task {i}"
        # Each await resumed exactly once.
        assert rec.entered == rec.resumed, where
        for kind, _k, value, fired in rec.got:
            if kind == "event":
                # An event wait resumed only by its own event.
                assert value is None and fired, where
            elif kind == "item":
                assert isinstance(value, int), where
                received.append(value)
            else:
                assert value is None, where
        if i not in cancelled:
            assert op.state is OperationState.COMPLETED, where
        if op.state is OperationState.CANCELLED:
            assert i in cancelled, where
            # Cancelled at an await, or before its first step (never ran).
            assert rec.outcome == "cancelled" or rec.entered == 0, where
            with pytest.raises(CancellationError):
                op.result()
        else:
            assert op.state is OperationState.COMPLETED, where
            assert op.result() == rec.outcome, where
    # No item lost or delivered twice: a cancelled receiver eats nothing.
    assert sorted(received + drained) == sorted(sent), f"seed {seed}"
    assert runtime.registrations() == 0, f"seed {seed}"


# -- custom events written to the documented protocol, and what they get wrong ----


class ProtocolEvent:
    """An event with only the documented protocol: _arm, _disarm, cancellable."""

    cancellable = True

    def __init__(self) -> None:
        self.subs: list[Subscription] = []
        self.disarmed = 0

    def fire(self, value: Any) -> None:
        for sub in list(self.subs):
            sub.fire(value)

    def _arm(self, sub: Subscription) -> None:
        self.subs.append(sub)

    def _disarm(self, sub: Subscription) -> None:
        self.disarmed += 1
        if sub in self.subs:
            self.subs.remove(sub)

    def __await__(self) -> Any:
        return (yield self)


def _wait_parked(op: asyncop.AsyncOperation) -> None:
    end = time.monotonic() + 5
    while op._task is None or op._task.status is not WakerStatus.WAITING:
        assert time.monotonic() < end, "the task never parked"
        time.sleep(0.001)


def test_a_protocol_event_without_undocumented_attributes_works(rt1: asyncop.Runtime) -> None:
    event = ProtocolEvent()

    async def main() -> Any:
        return await event

    op = rt1.spawn(main)
    _wait_parked(op)
    assert "ProtocolEvent" in rt1.dump()  # described without a _describe()
    event.fire("fired")
    assert op.wait(5).value == "fired"
    assert event.disarmed == 1


def test_a_protocol_event_works_in_select_and_under_cancel(rt1: asyncop.Runtime) -> None:
    event = ProtocolEvent()

    async def selects() -> Any:
        return await asyncop.select(asyncop.Event().wait_async(), event)

    op = rt1.spawn(selects)
    _wait_parked(op)
    event.fire(5)
    assert op.wait(5).value == (1, 5)

    async def waits() -> Any:
        return await ProtocolEvent()

    victim = rt1.spawn(waits)
    _wait_parked(victim)
    victim.cancel()
    victim.wait(5)
    assert victim.state is OperationState.CANCELLED


class FailingDisarm(ProtocolEvent):
    def _disarm(self, sub: Subscription) -> None:
        raise RuntimeError("disarm failed")


class FailingCancellable(ProtocolEvent):
    @property
    def cancellable(self) -> bool:  # type: ignore[override]
        raise RuntimeError("cancellable failed")


def test_an_event_whose_disarm_raises_does_not_wedge_its_task(
    rt1: asyncop.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    event = FailingDisarm()

    async def main() -> Any:
        value = await event
        await asyncop.sleep(0.001)
        return value

    op = rt1.spawn(main)
    _wait_parked(op)
    event.fire("kept")
    assert op.wait(5).value == "kept"
    assert any("disarm failed" in r.getMessage() for r in caplog.records if r.name == "asyncop")


def test_an_event_whose_cancellable_raises_fails_its_await(rt1: asyncop.Runtime) -> None:
    async def main() -> str:
        try:
            await FailingCancellable()
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    assert rt1.spawn(main).wait(5).value == "cancellable failed"


class RaisingRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr failed")


class RaisingGetattr:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no attribute {name} either")


class RaisingGetattribute:
    def __getattribute__(self, name: str) -> Any:
        raise ValueError(name)


class Yielder:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Any:
        return (yield self.value)


@pytest.mark.parametrize(
    "make",
    [RaisingRepr, RaisingGetattr, RaisingGetattribute, lambda: 42, lambda: "text", object],
    ids=["repr", "getattr", "getattribute", "int", "str", "object"],
)
def test_yielding_an_unknown_object_throws_a_type_error_into_the_task(
    rt1: asyncop.Runtime, make: Callable[[], Any]
) -> None:
    value = make()

    async def main() -> str:
        try:
            await Yielder(value)
        except TypeError as exc:
            await asyncop.sleep(0.001)  # still a working task afterwards
            return "caught TypeError" if "asyncop" in str(exc) else str(exc)
        return "nothing raised"

    assert rt1.spawn(main).wait(5).value == "caught TypeError"

    async def uncaught() -> None:
        await Yielder(value)

    op = rt1.spawn(uncaught)
    op.wait(5)
    assert op.state is OperationState.FAILED and isinstance(op.error, TypeError)


def test_a_resume_when_callback_that_raises_resumes_the_task_with_it(
    rt1: asyncop.Runtime,
) -> None:
    def broken(waker: Any, sub: Any, result: Any, error: Any) -> bool:
        raise LookupError("broken callback")

    class ViaBrokenCallback(WaitEvent):
        def _arm(self, sub: Subscription) -> None:
            lowlevel.resume_when(sub.waker.task, asyncop.sleep(0.01), broken)

    async def main() -> str:
        try:
            await ViaBrokenCallback()
        except LookupError as exc:
            return str(exc)
        return "nothing raised"

    assert rt1.spawn(main).wait(5).value == "broken callback"

    async def later() -> int:
        await asyncop.sleep(0.001)
        return 1

    assert rt1.run(later) == 1  # the worker that fired the timer lives on


@pytest.mark.parametrize("bad", [None, "task", 42])
def test_lowlevel_calls_name_a_bad_task_argument(rt1: asyncop.Runtime, bad: Any) -> None:
    with pytest.raises(TypeError, match="'task'"):
        lowlevel.waker_new(bad)
    with pytest.raises(TypeError, match="'task'"):
        lowlevel.resume_when(bad, asyncop.Event().wait_async())


def test_lowlevel_calls_name_bad_event_callback_and_timeout(rt1: asyncop.Runtime) -> None:
    import math

    task = rt1.create(_never, name="a_task")
    with pytest.raises(TypeError, match="'event'"):
        lowlevel.resume_when(task, None)
    with pytest.raises(TypeError, match="'callback'"):
        lowlevel.resume_when(task, asyncop.Event().wait_async(), None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'cancellation'"):
        lowlevel.waker_new(task, cancellation="event")
    with pytest.raises(TypeError, match="timeout"):
        lowlevel.waker_new(task, timeout="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        lowlevel.waker_new(task, timeout=math.nan)


async def _never() -> None:
    await asyncop.Event().wait_async()


def test_waker_new_with_an_infinite_timeout_arms_no_timer(rt1: asyncop.Runtime) -> None:
    import math

    gate = asyncop.Event()

    class Gated(WaitEvent):
        def _arm(self, sub: Subscription) -> None:
            task = sub.waker.task
            lowlevel.waker_new(task, timeout=math.inf)
            lowlevel.resume_when(task, gate.wait_async(), lowlevel.resolve)

    async def main() -> str:
        await Gated()
        return "opened"

    op = rt1.spawn(main)
    _wait_parked(op)
    assert rt1.registrations() == 0
    gate.set()
    assert op.wait(5).value == "opened"
