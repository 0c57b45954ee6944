"""Tests for the Runtime: its pipeline, workers, shutdown, timers, dump and contexts."""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import asyncop
from asyncop import CancellationError, OperationState, current_operation
from asyncop.runtime import _snapshot
from asyncop.runtime._core import _spawn
from asyncop.testing import VirtualClock
from tests._freethreading import FREE_THREADED
from tests.conftest import needs_default_mode

# ----------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------


def worker_threads(runtime: asyncop.Runtime) -> list[threading.Thread]:
    """The runtime's live worker threads, its monitor left out."""
    prefix = f"{runtime.name}-"
    return [
        t
        for t in threading.enumerate()
        if t.name.startswith(prefix) and not t.name.endswith("-monitor") and t.is_alive()
    ]


def all_threads(runtime: asyncop.Runtime) -> list[threading.Thread]:
    """Every live thread whose name says it belongs to the runtime."""
    prefix = f"{runtime.name}-"
    return [t for t in threading.enumerate() if t.name.startswith(prefix) and t.is_alive()]


def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` real seconds pass."""
    end = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)


def expected_cpu_count() -> int:
    getter = getattr(os, "process_cpu_count", None)
    if getter is not None:
        return max(1, getter() or 1)
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def wait_for_cancel() -> str:
    """Sync work that loops on its token until cancelled, then leaves CANCELLED."""
    token = current_operation().token
    while not token.wait(0.05):
        pass
    token.check()
    return "not reached"


def set_dynamic(monkeypatch: pytest.MonkeyPatch, dynamic: bool) -> None:
    """Run the test with ASYNCOP_DYNAMIC_WORKERS on or off."""
    if dynamic:
        monkeypatch.setenv("ASYNCOP_DYNAMIC_WORKERS", "1")
    else:
        monkeypatch.delenv("ASYNCOP_DYNAMIC_WORKERS", raising=False)


def fresh_name(label: str) -> str:
    return f"{label}{id(object()):x}"


# ----------------------------------------------------------------------
# Construction
# ----------------------------------------------------------------------


def test_default_worker_count_is_the_cpu_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCOP_DYNAMIC_WORKERS", raising=False)
    with asyncop.Runtime(name=fresh_name("default")) as rt:
        assert rt.workers == expected_cpu_count()
        assert len(worker_threads(rt)) == expected_cpu_count()


def test_explicit_worker_count_starts_that_many_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCOP_DYNAMIC_WORKERS", raising=False)
    with asyncop.Runtime(3, name=fresh_name("three")) as rt:
        assert rt.workers == 3
        assert len(worker_threads(rt)) == 3


@pytest.mark.parametrize("workers", [0, -1])
def test_fewer_than_one_worker_is_a_value_error(workers: int) -> None:
    with pytest.raises(ValueError, match="worker"):
        asyncop.Runtime(workers)


@pytest.mark.parametrize("workers", [1.5, "2", True])
def test_non_int_worker_count_is_a_type_error(workers: Any) -> None:
    with pytest.raises(TypeError, match="int"):
        asyncop.Runtime(workers)


# ----------------------------------------------------------------------
# The pipeline
# ----------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_many_submitted_callbacks_all_run_and_complete(runtime: asyncop.Runtime) -> None:
    ops = [runtime.spawn(lambda i: i * 2, i) for i in range(2000)]
    values = [op.wait(10).value for op in ops]
    assert values == [i * 2 for i in range(2000)]
    assert all(op.state is OperationState.COMPLETED for op in ops)


@pytest.mark.timeout(20)
def test_create_then_submit_runs_the_callback_with_operation_and_context(
    runtime: asyncop.Runtime,
) -> None:
    seen: list[tuple[asyncop.AsyncOperation, object]] = []
    op = runtime.create(lambda o, ctx: seen.append((o, ctx)) or "done", {"k": 1})
    assert op.state is OperationState.CREATED
    assert runtime.submit(op) is op
    assert op.wait(5).value == "done"
    assert seen == [(op, {"k": 1})]


@pytest.mark.timeout(20)
def test_one_worker_starts_operations_in_submission_order() -> None:
    log: list[int] = []
    with asyncop.Runtime(1, name=fresh_name("fifo")) as rt:
        ops = [rt.spawn(log.append, i) for i in range(300)]
        for op in ops:
            op.wait(10)
    assert log == list(range(300))


@pytest.mark.timeout(20)
@pytest.mark.xfail(
    FREE_THREADED,
    strict=False,
    reason="with the GIL off the woken worker may find the queue still empty and park "
    "again before the operation is built (the push then wakes it)",
)
def test_a_submit_from_a_thread_wakes_a_worker_before_building_the_operation() -> None:
    woken_before_build: list[bool] = []
    with asyncop.Runtime(1, name=fresh_name("early")) as rt:
        (worker,) = rt._workers
        assert eventually(lambda: worker.parked)
        original = _spawn.AsyncOperation

        def spy(*args: Any) -> Any:
            woken_before_build.append(not worker.parked)
            return original(*args)

        _spawn.AsyncOperation = spy  # type: ignore[misc]
        try:
            op = rt.spawn(time.monotonic)
        finally:
            _spawn.AsyncOperation = original  # type: ignore[misc]
        assert op.wait(10).state is OperationState.COMPLETED
    assert woken_before_build == [True]


@pytest.mark.timeout(20)
def test_an_item_for_an_early_woken_worker_that_went_back_to_sleep_still_runs() -> None:
    # A user thread's submit wakes a parked worker before it builds the
    # operation, and the push then wakes nobody else. Should that worker find
    # the queue still empty and park again first, the push must wake it.
    with asyncop.Runtime(1, name=fresh_name("repark")) as rt:
        (worker,) = rt._workers
        assert eventually(lambda: worker.parked)
        with rt._lock:
            woken = rt._idle[-1]
            rt._wake_one_locked()
        assert woken is worker
        # It wakes, finds nothing to run, and parks again.
        assert eventually(lambda: worker.parked)
        op = rt.create(lambda operation, context: None)
        with rt._lock:
            rt._roots[op] = None
            op._transition_to_pending()
            rt._push_locked(op, None, woken)
        assert op.wait(10).state is OperationState.COMPLETED


# ----------------------------------------------------------------------
# run()
# ----------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_run_returns_the_value(runtime: asyncop.Runtime) -> None:
    assert runtime.run(lambda a, b: a * b, 6, 7) == 42


@pytest.mark.timeout(10)
def test_run_raises_the_failure(runtime: asyncop.Runtime) -> None:
    def boom() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        runtime.run(boom)


@pytest.mark.timeout(10)
def test_run_raises_cancellation_error_when_cancelled(runtime: asyncop.Runtime) -> None:
    def cancel_self() -> None:
        op = current_operation()
        op.cancel("giving up")
        op.token.check()

    with pytest.raises(CancellationError):
        runtime.run(cancel_self)


@pytest.mark.timeout(10)
def test_run_waits_for_children(runtime: asyncop.Runtime) -> None:
    log: list[str] = []
    gate = threading.Event()

    def child() -> None:
        gate.wait(5)
        log.append("child")

    def parent() -> str:
        current_operation().spawn(child)
        threading.Timer(0.1, gate.set).start()
        return "parent"

    assert runtime.run(parent) == "parent"
    assert log == ["child"]


# ----------------------------------------------------------------------
# Idle workers park
# ----------------------------------------------------------------------


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@pytest.mark.timeout(15)
def test_idle_workers_use_almost_no_cpu() -> None:
    with asyncop.Runtime(2, name=fresh_name("idle")) as rt:
        # An armed timer a minute away: workers must park until it, not poll.
        sleeper = rt.create(lambda op, ctx: None)
        sleeper.deadline = rt.now() + 60
        assert rt.registrations() == 1
        time.sleep(0.2)  # let the workers settle into their park
        cpu_before = _cpu_seconds()
        wall_before = time.monotonic()
        time.sleep(1.0)
        cpu_used = _cpu_seconds() - cpu_before
        wall = time.monotonic() - wall_before
        sleeper.cancel()
    assert cpu_used < 0.05 * wall, f"idle runtime used {cpu_used:.3f} s CPU in {wall:.3f} s"


# ----------------------------------------------------------------------
# Stuck workers are replaced
# ----------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_worker_stuck_in_a_callback_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCOP_DYNAMIC_WORKERS", raising=False)
    gate = threading.Event()
    started = threading.Event()

    def stuck() -> str:
        started.set()
        gate.wait(15)
        return "released"

    async def quick() -> str:
        await asyncop.checkpoint()
        return "quick"

    with asyncop.Runtime(1, name=fresh_name("stuck")) as rt:
        try:
            blocker = rt.spawn(stuck)
            assert started.wait(5)
            # A task runs on a replacement worker meanwhile...
            assert rt.spawn(quick).wait(5).value == "quick"
            # ... but sync callbacks run at most `workers` at once, like a
            # thread pool: this one waits for the stuck one.
            second = rt.spawn(lambda: "second")
            time.sleep(0.3)
            assert not second.done
            assert not blocker.done
        finally:
            gate.set()
        assert blocker.wait(5).value == "released"
        assert second.wait(5).value == "second"


@pytest.mark.timeout(20)
@pytest.mark.parametrize("dynamic", [False, True])
def test_a_deadline_fires_while_every_worker_is_busy(
    monkeypatch: pytest.MonkeyPatch, dynamic: bool
) -> None:
    # The only worker (the only one started, in dynamic mode) runs a callback
    # that waits for its own cancel; the deadline set meanwhile must still fire.
    set_dynamic(monkeypatch, dynamic)
    started = threading.Event()

    def work() -> str:
        started.set()
        return wait_for_cancel()

    with asyncop.Runtime(2 if dynamic else 1, name=fresh_name("busy")) as rt:
        op = rt.spawn(work)
        assert started.wait(5)
        op.deadline = rt.now() + 0.05
        assert op.wait(10).state is OperationState.CANCELLED
        assert op.expired


async def _one_checkpoint() -> None:
    await asyncop.checkpoint()


@pytest.mark.timeout(20)
def test_extra_worker_retires_after_the_stuck_callback_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ASYNCOP_DYNAMIC_WORKERS", raising=False)
    gate = threading.Event()
    started = threading.Event()

    def stuck() -> None:
        started.set()
        gate.wait(15)

    with asyncop.Runtime(1, name=fresh_name("retire")) as rt:
        try:
            blocker = rt.spawn(stuck)
            assert started.wait(5)
            rt.spawn(_one_checkpoint).wait(5)
            assert len(worker_threads(rt)) == 2
        finally:
            gate.set()
        blocker.wait(5)
        assert eventually(lambda: len(worker_threads(rt)) == 1), [
            t.name for t in worker_threads(rt)
        ]
        # The pool still runs work after the extra left.
        assert rt.spawn(lambda: 7).wait(5).value == 7


async def _hold_both_workers() -> None:
    """Block both workers of a 2-worker runtime, so an extra one takes the task."""
    async with asyncop.scope() as s:
        for _ in range(3):
            s.spawn(time.sleep, 0.5)
        await asyncop.sleep(0.2)


async def _timed_sleep(seconds: float) -> float:
    start = time.monotonic()
    await asyncop.sleep(seconds)
    return time.monotonic() - start


async def _sleep_after_replacement(seconds: float) -> float:
    await _hold_both_workers()
    return await _timed_sleep(seconds)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("dynamic", [False, True])
def test_a_sleep_after_a_stuck_worker_was_replaced_wakes_on_time(
    monkeypatch: pytest.MonkeyPatch, dynamic: bool
) -> None:
    # The blocking callbacks hold both workers, an extra one is started for
    # the task, and retires once they return: the timer the task arms next
    # must not leave with it.
    set_dynamic(monkeypatch, dynamic)
    with asyncop.Runtime(2, name=fresh_name("replaced")) as rt:
        for _ in range(3):
            slept = rt.spawn(_sleep_after_replacement, 1.0).wait(15).value
            assert 0.95 <= slept < 4.0, slept


@pytest.mark.timeout(30)
def test_a_sleep_after_replacement_wakes_on_time_under_a_long_outer_deadline() -> None:
    async def main() -> float:
        async with asyncop.scope(timeout=20):
            await _hold_both_workers()
        return await _timed_sleep(1.0)

    with asyncop.Runtime(2, name=fresh_name("outer")) as rt:
        slept = rt.run(main)
        assert 0.95 <= slept < 4.0, slept


@pytest.mark.timeout(30)
def test_a_scope_timeout_after_a_stuck_worker_was_replaced_fires_on_time() -> None:
    async def main() -> float:
        await _hold_both_workers()
        start = time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncop.scope(timeout=1.0):
                await asyncop.sleep(math.inf)
        return time.monotonic() - start

    with asyncop.Runtime(2, name=fresh_name("scoped")) as rt:
        waited = rt.run(main)
        assert 0.95 <= waited < 4.0, waited


@pytest.mark.timeout(30)
def test_a_sleep_armed_by_a_retiring_extra_worker_is_handed_on() -> None:
    # Many rounds of replace-then-retire, each ending in a short sleep.
    async def round_trip() -> float:
        async with asyncop.scope() as s:
            for _ in range(3):
                s.spawn(time.sleep, 0.1)
            await asyncop.checkpoint()
        start = time.monotonic()
        await asyncop.sleep(0.3)
        return time.monotonic() - start

    with asyncop.Runtime(2, name=fresh_name("rounds")) as rt:
        for _ in range(8):
            slept = rt.run(round_trip)
            assert 0.29 <= slept < 3.0, slept
            time.sleep(0.6)  # let the extra worker retire between rounds


@pytest.mark.timeout(20)
def test_a_run_of_short_callbacks_is_not_taken_for_one_stuck_callback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The watchdog times an item by seeing the worker on the same item at
    # its looks: a worker busy without a break, but never long on one item,
    # must not count as stuck. 60 callbacks of 5 ms each keep the one
    # worker busy for 300 ms, with work always queued behind it.
    # (An extra worker would take some of the queued callbacks: they must
    # all run on the one worker.)
    monkeypatch.delenv("ASYNCOP_DYNAMIC_WORKERS", raising=False)
    threads: set[str] = set()

    def short() -> None:
        threads.add(threading.current_thread().name)
        time.sleep(0.005)

    with asyncop.Runtime(1, name=fresh_name("short")) as rt:
        settle(rt)
        ops = [rt.spawn(short) for _ in range(60)]
        for op in ops:
            assert op.wait(5).state is OperationState.COMPLETED
    assert len(threads) == 1, threads


# ----------------------------------------------------------------------
# Coroutine work stays with the worker that queued it
# ----------------------------------------------------------------------


def settle(runtime: asyncop.Runtime) -> None:
    """Let every worker of a new runtime reach its park.

    A worker that has not parked yet still looks at the queue, and takes
    whatever it finds there, whoever queued it.
    """
    runtime.run(lambda: None)
    time.sleep(0.1)


@pytest.mark.timeout(20)
def test_coroutines_a_step_spawns_run_on_its_own_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran_on: list[int] = []

    async def child() -> None:
        ran_on.append(threading.get_ident())
        await asyncop.checkpoint()
        ran_on.append(threading.get_ident())

    async def main() -> int:
        async with asyncop.scope() as s:
            for _ in range(50):
                s.spawn(child)
        return threading.get_ident()

    with asyncop.Runtime(2, name=fresh_name("local")) as rt:
        settle(rt)
        for _ in range(3):
            ran_on.clear()
            spawner = rt.run(main)
            # The other worker, parked, was never woken to take a share.
            assert set(ran_on) == {spawner}


@pytest.mark.timeout(20)
def test_a_sync_callback_a_coroutine_spawns_wakes_a_parked_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = threading.Event()

    def blocker() -> str:
        gate.wait(15)
        return "released"

    async def main() -> str:
        async with asyncop.scope() as s:
            held = s.spawn(blocker)
            # The blocker may hold one worker: the other must have been woken
            # for it or for this, or this await would wait for the gate.
            quick = await s.spawn(lambda: "quick")
            assert not held.done
            gate.set()
        return str(quick)

    with asyncop.Runtime(2, name=fresh_name("syncwake")) as rt:
        try:
            assert rt.run(main) == "quick"
        finally:
            gate.set()


@pytest.mark.timeout(20)
def test_work_queued_behind_a_blocked_coroutine_step_moves_to_a_parked_worker() -> None:
    child_done = threading.Event()

    async def child() -> None:
        child_done.set()

    async def main() -> bool:
        async with asyncop.scope() as s:
            s.spawn(child)
            # Blocking a worker inside a step is a bug, but the queue behind
            # it must not wait for it: the watchdog hands it to the other
            # worker. The step sleeps, so it uses no CPU.
            deadline = time.monotonic() + 10
            while not child_done.is_set() and time.monotonic() < deadline:
                time.sleep(0.01)
            return child_done.is_set()

    # In parallel mode only: by default the other tasks wait for the step,
    # as they would in any event loop (see test_execution_model.py).
    with asyncop.Runtime(2, name=fresh_name("blocked"), parallel=True) as rt:
        assert rt.run(main) is True


@pytest.mark.xfail(
    FREE_THREADED,
    strict=False,
    reason="with the GIL off the monitor may fire a due sleep first and wake the other worker",
)
@pytest.mark.timeout(20)
def test_sleeps_a_step_arms_wake_on_its_own_worker() -> None:
    woke_on: list[int] = []

    async def child(delay: float) -> None:
        await asyncop.sleep(delay)
        woke_on.append(threading.get_ident())

    async def main() -> int:
        async with asyncop.scope() as s:
            # Each sleep is the new earliest deadline when it is armed.
            for index in range(10):
                s.spawn(child, 0.05 - index * 0.004)
        return threading.get_ident()

    # The parked worker is not woken to fire them beside this one. (On a
    # loaded machine the spawner's thread may be held off the CPU past a
    # deadline, and the monitor then rightly fires it, waking the parked
    # worker: one clean run in three shows the rule.)
    runs = []
    for _ in range(3):
        woke_on.clear()
        with asyncop.Runtime(2, name=fresh_name("timers")) as rt:
            settle(rt)
            spawner = rt.run(main)
        runs.append(woke_on == [spawner] * 10)
        if runs[-1]:
            break
    assert any(runs), "every run woke a sleep on the parked worker"


@pytest.mark.timeout(20)
def test_a_timer_due_behind_a_blocked_coroutine_step_fires_on_a_parked_worker() -> None:
    slept = threading.Event()

    async def child() -> None:
        await asyncop.sleep(0.05)
        slept.set()

    async def main() -> bool:
        async with asyncop.scope() as s:
            s.spawn(child)
            await asyncop.checkpoint()  # the child arms its sleep on this worker
            # Then this step blocks the worker with nothing queued: the due
            # timer is the watchdog's to hand to the parked worker.
            deadline = time.monotonic() + 10
            while not slept.is_set() and time.monotonic() < deadline:
                time.sleep(0.01)
            return slept.is_set()

    with asyncop.Runtime(2, name=fresh_name("duetimer"), parallel=True) as rt:
        settle(rt)
        assert rt.run(main) is True


@needs_default_mode  # in parallel mode an idle worker takes the queue
@pytest.mark.skipif(not hasattr(time, "pthread_getcpuclockid"), reason="no per-thread CPU clock")
@pytest.mark.timeout(20)
def test_a_computing_coroutine_step_keeps_its_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCOP_DYNAMIC_WORKERS", raising=False)
    log: list[tuple[str, int]] = []

    async def child() -> None:
        log.append(("child", threading.get_ident()))

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(child)
            # A step that computes holds its worker, as it would hold any
            # event loop: another thread could only take turns with it for
            # the GIL. Long enough for the watchdog to look several times.
            end = time.perf_counter() + 0.4
            while time.perf_counter() < end:
                pass
            log.append(("spun", threading.get_ident()))

    with asyncop.Runtime(2, name=fresh_name("computing")) as rt:
        settle(rt)
        rt.run(main)
        assert len(worker_threads(rt)) == 2  # no extra worker either
    (first, spinner), (second, runner) = log
    assert (first, second) == ("spun", "child")
    assert runner == spinner


# ----------------------------------------------------------------------
# Dynamic workers
# ----------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_dynamic_workers_start_with_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCOP_DYNAMIC_WORKERS", "1")
    with asyncop.Runtime(3, name=fresh_name("dyn")) as rt:
        assert rt.workers == 3
        assert len(worker_threads(rt)) == 1


@pytest.mark.timeout(20)
def test_dynamic_workers_grow_to_the_limit_under_blocking_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASYNCOP_DYNAMIC_WORKERS", "1")
    gate = threading.Event()
    running = threading.Semaphore(0)

    def block() -> None:
        running.release()
        gate.wait(15)

    with asyncop.Runtime(3, name=fresh_name("grow")) as rt:
        try:
            ops = [rt.spawn(block) for _ in range(3)]
            for _ in range(3):
                assert running.acquire(timeout=5)
            assert len(worker_threads(rt)) == 3
        finally:
            gate.set()
        for op in ops:
            op.wait(5)


@pytest.mark.timeout(20)
def test_dynamic_idle_workers_retire_back_to_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCOP_DYNAMIC_WORKERS", "1")
    gate = threading.Event()
    running = threading.Semaphore(0)

    def block() -> None:
        running.release()
        gate.wait(15)

    with asyncop.Runtime(3, name=fresh_name("shrink")) as rt:
        rt.idle_retire = 0.2
        try:
            ops = [rt.spawn(block) for _ in range(3)]
            for _ in range(3):
                assert running.acquire(timeout=5)
        finally:
            gate.set()
        for op in ops:
            op.wait(5)
        assert eventually(lambda: len(worker_threads(rt)) <= 1)
        time.sleep(3 * rt.idle_retire)  # several retire periods: it must stay at one
        assert len(worker_threads(rt)) == 1
        assert rt.spawn(lambda: "still works").wait(5).value == "still works"


# ----------------------------------------------------------------------
# shutdown()
# ----------------------------------------------------------------------


@pytest.mark.timeout(15)
def test_shutdown_cancels_live_work_and_joins_every_thread() -> None:
    rt = asyncop.Runtime(2, name=fresh_name("down"))
    op = rt.spawn(wait_for_cancel)
    assert eventually(lambda: op.state is OperationState.RUNNING)
    assert rt.shutdown(timeout=10) is True
    assert op.state is OperationState.CANCELLED
    assert all_threads(rt) == []


@pytest.mark.timeout(15)
def test_shutdown_cancels_pending_and_created_children() -> None:
    rt = asyncop.Runtime(1, name=fresh_name("down"))
    ran: list[str] = []
    parent = rt.create(lambda op, ctx: None)
    child = rt.create(lambda op, ctx: ran.append("child"), parent=parent)
    running = rt.spawn(wait_for_cancel)
    assert rt.shutdown(timeout=10) is True
    assert running.state is OperationState.CANCELLED
    assert child.state is OperationState.CANCELLED
    assert parent.state is OperationState.CANCELLED
    assert ran == []


@pytest.mark.timeout(15)
def test_shutdown_with_timeout_returns_false_when_work_ignores_its_token() -> None:
    rt = asyncop.Runtime(1, name=fresh_name("stubborn"))
    gate = threading.Event()
    started = threading.Event()

    def ignore_token() -> None:
        started.set()
        gate.wait(15)

    try:
        op = rt.spawn(ignore_token)
        assert started.wait(5)
        before = time.monotonic()
        assert rt.shutdown(timeout=0.3) is False
        assert time.monotonic() - before < 2.0
        assert not op.done
    finally:
        gate.set()
    assert op.wait(5).state is OperationState.COMPLETED
    assert eventually(lambda: all_threads(rt) == []), [t.name for t in all_threads(rt)]


@pytest.mark.timeout(15)
def test_shutdown_is_idempotent() -> None:
    rt = asyncop.Runtime(2, name=fresh_name("twice"))
    rt.spawn(wait_for_cancel)
    assert rt.shutdown(timeout=10) is True
    assert rt.shutdown(timeout=10) is True
    assert all_threads(rt) == []


@pytest.mark.timeout(15)
def test_shutdown_from_a_worker_callback_raises_runtime_error(runtime: asyncop.Runtime) -> None:
    op = runtime.spawn(runtime.shutdown)
    assert op.wait(5).state is OperationState.FAILED
    assert isinstance(op.error, RuntimeError)
    assert runtime.name in str(op.error)
    # The refused call left the runtime working.
    assert runtime.spawn(lambda: 1).wait(5).value == 1


@pytest.mark.timeout(15)
def test_spawn_after_shutdown_raises_naming_the_runtime() -> None:
    rt = asyncop.Runtime(1, name=fresh_name("closed"))
    assert rt.shutdown(timeout=10)
    with pytest.raises(RuntimeError, match=rt.name):
        rt.spawn(lambda: None)


@pytest.mark.timeout(15)
def test_submit_after_shutdown_raises_naming_the_runtime() -> None:
    rt = asyncop.Runtime(1, name=fresh_name("closed"))
    op = rt.create(lambda o, ctx: None)
    assert rt.shutdown(timeout=10)
    with pytest.raises(RuntimeError, match=rt.name):
        rt.submit(op)


@pytest.mark.timeout(15)
def test_with_block_shuts_the_runtime_down_at_exit() -> None:
    with asyncop.Runtime(2, name=fresh_name("ctx")) as rt:
        op = rt.spawn(wait_for_cancel)
        assert eventually(lambda: op.state is OperationState.RUNNING)
    assert op.state is OperationState.CANCELLED
    assert all_threads(rt) == []
    with pytest.raises(RuntimeError, match=rt.name):
        rt.spawn(lambda: None)


@pytest.mark.timeout(15)
def test_shutdown_without_cancel_waits_for_work_to_finish() -> None:
    rt = asyncop.Runtime(2, name=fresh_name("drain"))
    gate = threading.Event()

    def slow() -> str:
        gate.wait(10)
        return "finished" if not current_operation().token.cancelled else "cancelled"

    op = rt.spawn(slow)
    timer = threading.Timer(0.2, gate.set)
    timer.start()
    try:
        assert rt.shutdown(cancel=False, timeout=10) is True
    finally:
        gate.set()
        timer.cancel()
    assert op.state is OperationState.COMPLETED
    assert op.result() == "finished"
    assert all_threads(rt) == []


# ----------------------------------------------------------------------
# registrations()
# ----------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_registrations_is_zero_at_rest(runtime: asyncop.Runtime) -> None:
    assert runtime.registrations() == 0
    runtime.spawn(lambda: None).wait(5)
    assert runtime.registrations() == 0


@pytest.mark.timeout(10)
def test_registrations_counts_one_per_armed_deadline(runtime: asyncop.Runtime) -> None:
    gate = threading.Event()
    ops = [runtime.spawn(gate.wait, 10) for _ in range(2)]
    created = runtime.create(lambda o, ctx: None)
    try:
        for count, op in enumerate([*ops, created], start=1):
            op.deadline = runtime.now() + 60
            assert runtime.registrations() == count
    finally:
        gate.set()
    for op in ops:
        op.wait(5)
    assert runtime.registrations() == 1
    created.cancel()
    assert runtime.registrations() == 0


@pytest.mark.timeout(10)
def test_registrations_drop_when_a_deadline_is_cleared(runtime: asyncop.Runtime) -> None:
    op = runtime.create(lambda o, ctx: None)
    op.deadline = runtime.now() + 60
    assert runtime.registrations() == 1
    op.deadline = None
    assert runtime.registrations() == 0
    op.cancel()


@pytest.mark.timeout(10)
def test_registrations_drop_when_a_deadline_fires() -> None:
    clock = VirtualClock(autojump=False)
    with asyncop.Runtime(1, name=fresh_name("fire"), clock=clock) as rt:
        op = rt.create(lambda o, ctx: None)
        op.deadline = rt.now() + 30
        assert rt.registrations() == 1
        clock.advance(30)
        assert op.wait(5).state is OperationState.CANCELLED
        assert op.expired
        assert rt.registrations() == 0


# ----------------------------------------------------------------------
# dump()
# ----------------------------------------------------------------------


def test_dump_says_no_live_operations_when_idle(runtime: asyncop.Runtime) -> None:
    assert "no live operations" in runtime.dump()
    runtime.spawn(lambda: None).wait(5)
    assert "no live operations" in runtime.dump()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


@pytest.mark.timeout(10)
def test_dump_shows_each_node_with_state_and_location_indented_under_its_parent(
    runtime: asyncop.Runtime,
) -> None:
    gate = threading.Event()
    try:
        with runtime.scope(name="page_root") as root:
            child_line = sys._getframe().f_lineno + 1
            child = root.spawn(gate.wait, 10, name="fetch_body")
            waiting = root.spawn(gate.wait, 10, name="fetch_header")
            assert eventually(lambda: child.state is OperationState.RUNNING)
            text = runtime.dump()
            gate.set()
    finally:
        gate.set()
    assert waiting.done
    lines = text.splitlines()
    root_line = next(line for line in lines if "page_root" in line)
    body_line = next(line for line in lines if "fetch_body" in line)
    header_line = next(line for line in lines if "fetch_header" in line)
    assert "RUNNING" in root_line
    assert "RUNNING" in body_line
    assert f"{__file__}:{child_line}" in body_line
    assert f"{root.filename}:{root.lineno}" in root_line
    assert root.filename == __file__
    assert _indent(body_line) > _indent(root_line)
    assert _indent(header_line) == _indent(body_line)
    assert lines.index(root_line) < lines.index(body_line) < lines.index(header_line)


@pytest.mark.timeout(10)
def test_dump_shows_a_created_operation_under_its_parent(runtime: asyncop.Runtime) -> None:
    parent = runtime.create(lambda o, ctx: None, name="outer_created")
    runtime.create(lambda o, ctx: None, parent=parent, name="inner_created")
    text = runtime.dump()
    parent.cancel()
    lines = text.splitlines()
    outer = next(line for line in lines if "outer_created" in line)
    inner = next(line for line in lines if "inner_created" in line)
    assert "CREATED" in outer and "CREATED" in inner
    assert _indent(inner) > _indent(outer)
    assert "no live operations" in runtime.dump()


def _chain(runtime: asyncop.Runtime, depth: int) -> asyncop.AsyncOperation:
    """A chain of CREATED operations ``depth`` deep; returns its root."""
    root = node = runtime.create(lambda o, ctx: None, name="link")
    for _ in range(depth - 1):
        node = runtime.create(lambda o, ctx: None, parent=node, name="link")
    return root


@pytest.mark.timeout(60)
def test_dump_of_a_very_deep_chain_is_linear_in_size(runtime: asyncop.Runtime) -> None:
    root = _chain(runtime, 100_000)
    try:
        text = runtime.dump()
    finally:
        root.cancel()
    lines = text.splitlines()
    assert lines[-1].lstrip().startswith("threads:")
    assert len(lines) == 100_002
    # Indented by depth, 100,000 levels would take about 10**10 characters.
    longest = max(len(line) for line in lines)
    assert longest < len(lines[1]) + 2 * _snapshot.DUMP_INDENT + 40
    assert len(text) < 300 * len(lines)


def test_dump_indents_up_to_a_limit_then_shows_the_depth(runtime: asyncop.Runtime) -> None:
    limit = _snapshot.DUMP_INDENT
    root = _chain(runtime, limit + 5)
    try:
        lines = runtime.dump().splitlines()[1:-1]
    finally:
        root.cancel()
    assert [_indent(line) for line in lines[: limit + 1]] == [2 + 2 * d for d in range(limit + 1)]
    deeper = lines[limit + 1 :]
    assert all(_indent(line) == 2 + 2 * limit for line in deeper)
    assert [f"(depth {limit + 1 + i}) link" in line for i, line in enumerate(deeper)] == [
        True
    ] * len(deeper)


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str for you")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


def test_dump_survives_a_cancel_reason_whose_str_and_repr_raise(
    runtime: asyncop.Runtime,
) -> None:
    started = threading.Event()

    def work() -> None:
        started.set()
        time.sleep(0.3)  # still running, cancelling, while dumped

    op = runtime.spawn(work, name="stubborn")
    assert started.wait(5)
    op.cancel(_Unprintable())
    text = runtime.dump()
    assert "stubborn [RUNNING]" in text
    assert "cancelling (<_Unprintable" in text  # named by its type, whatever it raised
    op.wait(5)


def test_an_infinite_deadline_means_none_and_dumps_as_none(runtime: asyncop.Runtime) -> None:
    parent = runtime.create(lambda o, ctx: None, name="parent")
    op = runtime.create(lambda o, ctx: None, parent=parent, name="patient")
    op.deadline = math.inf
    try:
        text = runtime.dump()
    finally:
        parent.cancel()
    assert op.deadline is None  # inf is "no limit", as for every timeout
    assert "patient [CREATED]" in text
    assert "deadline=" not in text


@pytest.mark.parametrize("error", [SystemExit, KeyboardInterrupt, ValueError])
def test_a_worker_firing_a_deadline_whose_on_cancel_raises_survives(
    error: type[BaseException], caplog: pytest.LogCaptureFixture
) -> None:
    def raising() -> None:
        raise error("from on_cancel")

    async def main() -> None:
        op = me_op()
        op.token.on_cancel(raising)
        op.deadline = asyncop.current_time() + 0.02
        await asyncop.sleep(math.inf)

    # The only worker is idle when the deadline is due, so it fires it.
    with asyncop.Runtime(1, name=fresh_name("deadline-raises")) as rt:
        for _ in range(3):
            op = rt.spawn(main)
            assert op.wait(10).state is OperationState.CANCELLED
            assert op.expired
            assert rt.spawn(lambda: "alive").wait(10).value == "alive"
        assert [t.name.rsplit("-", 1)[-1] for t in worker_threads(rt)] == ["1"]
    assert "from on_cancel" in caplog.text


class _FailingClock:
    """The real clock, except that its next ``fail`` readings on a worker raise.

    While ``held`` is set it reads ``held``: time stands still, so a sleep
    cannot come due while the test makes the worker meet the failures.
    """

    virtual = False

    def __init__(self) -> None:
        self.fail = 0
        self.held: float | None = None

    def now(self) -> float:
        if self.fail > 0 and "-worker-" in threading.current_thread().name:
            self.fail -= 1
            raise RuntimeError("the clock broke")
        held = self.held
        return time.monotonic() if held is None else held


def test_a_worker_survives_an_error_in_its_own_loop(caplog: pytest.LogCaptureFixture) -> None:
    clock = _FailingClock()

    async def nap() -> str:
        await asyncop.sleep(0.1)
        return "woke"

    with asyncop.Runtime(1, name=fresh_name("broken-clock"), clock=clock) as rt:
        # The clock stands still until the worker's loop has met every
        # failure: otherwise the sleep may come due first and the monitor,
        # not the worker, may fire it (under load, the test thread may not
        # run again for longer than the sleep).
        clock.held = time.monotonic()
        op = rt.spawn(nap)
        assert eventually(lambda: rt.registrations() == 1)
        clock.fail = 3  # the worker's next looks at the clock, while the sleep is pending
        assert rt.spawn(lambda: "first").wait(10).value == "first"  # wakes the worker
        assert eventually(lambda: clock.fail == 0)
        clock.held = None
        assert op.wait(10).value == "woke"
        assert rt.spawn(lambda: "alive").wait(10).value == "alive"
        assert [t.name.rsplit("-", 1)[-1] for t in worker_threads(rt)] == ["1"]
    assert "the clock broke" in caplog.text
    assert "it carries on" in caplog.text


def me_op() -> asyncop.AsyncOperation:
    op = current_operation()
    assert op is not None
    return op


# ----------------------------------------------------------------------
# Clocks
# ----------------------------------------------------------------------


def test_now_reads_the_real_monotonic_clock(runtime: asyncop.Runtime) -> None:
    before = time.monotonic()
    now = runtime.now()
    after = time.monotonic()
    assert before <= now <= after


@pytest.mark.timeout(10)
def test_now_reads_a_virtual_clock() -> None:
    clock = VirtualClock(autojump=False, start=5.0)
    with asyncop.Runtime(1, name=fresh_name("vclock"), clock=clock) as rt:
        assert rt.now() == 5.0
        clock.advance(2.5)
        assert rt.now() == 7.5


@pytest.mark.timeout(10)
def test_hour_long_scope_timeout_on_autojump_clock_takes_no_real_time(
    vruntime: asyncop.Runtime,
) -> None:
    # The child parks in a coroutine wait, so its worker is idle and the clock
    # may jump. (A sync callback blocked on its token keeps its worker busy:
    # virtual time does not pass while a worker runs code.)
    async def parked_forever() -> None:
        await asyncop.sleep(7200)

    before_real = time.monotonic()
    before_virtual = vruntime.now()
    with pytest.raises(TimeoutError), vruntime.scope(timeout=3600) as root:
        child = root.spawn(parked_forever)
    assert time.monotonic() - before_real < 1.0
    assert child.state is OperationState.CANCELLED
    assert root.expired
    assert vruntime.now() - before_virtual == pytest.approx(3600)


@pytest.mark.timeout(10)
def test_hour_long_deadline_on_autojump_clock_takes_no_real_time(
    vruntime: asyncop.Runtime,
) -> None:
    before_real = time.monotonic()
    op = vruntime.create(lambda o, ctx: None)
    op.deadline = vruntime.now() + 3600
    assert op.wait(5).state is OperationState.CANCELLED
    assert op.expired
    assert vruntime.now() == pytest.approx(3600)
    assert time.monotonic() - before_real < 1.0


@pytest.mark.timeout(10)
def test_hour_long_scope_timeout_over_the_blocked_body_takes_no_real_time(
    vruntime: asyncop.Runtime,
) -> None:
    before_real = time.monotonic()
    with pytest.raises(TimeoutError), vruntime.scope(timeout=3600) as root:
        assert root.token.wait(5)
        root.token.check()
    assert time.monotonic() - before_real < 1.0


@pytest.mark.timeout(10)
def test_due_timers_fire_in_deadline_order_and_equal_deadlines_in_set_order() -> None:
    clock = VirtualClock(autojump=False)
    log: list[str] = []
    with asyncop.Runtime(2, name=fresh_name("order"), clock=clock) as rt:
        labels = ["a", "b", "c", "d", "e", "f", "g"]
        ops = {label: rt.create(lambda o, ctx: None, name=label) for label in labels}
        for label, op in ops.items():
            op.token.on_cancel(lambda label=label: log.append(label))
        # Set order differs from creation order, so ties are told apart.
        for label, delay in [("e", 1), ("d", 3), ("a", 1), ("g", 2), ("c", 1), ("b", 2), ("f", 3)]:
            ops[label].deadline = rt.now() + delay
        assert log == []
        clock.advance(10)
        for op in ops.values():
            assert op.wait(5).state is OperationState.CANCELLED
    assert log == ["e", "a", "c", "g", "b", "d", "f"]


@pytest.mark.timeout(10)
def test_timers_do_not_fire_before_the_virtual_clock_reaches_them() -> None:
    clock = VirtualClock(autojump=False)
    log: list[str] = []
    with asyncop.Runtime(2, name=fresh_name("early"), clock=clock) as rt:
        early = rt.create(lambda o, ctx: None, name="early")
        late = rt.create(lambda o, ctx: None, name="late")
        early.token.on_cancel(lambda: log.append("early"))
        late.token.on_cancel(lambda: log.append("late"))
        early.deadline = 1.0
        late.deadline = 5.0
        clock.advance(2.0)
        assert early.wait(5).state is OperationState.CANCELLED
        assert not late.done
        assert log == ["early"]
        late.cancel()


# ----------------------------------------------------------------------
# Context variables
# ----------------------------------------------------------------------

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


@pytest.mark.timeout(10)
def test_top_level_operation_copies_the_calling_threads_context(
    runtime: asyncop.Runtime,
) -> None:
    def read_and_change() -> str:
        seen = request_id.get()
        request_id.set("changed inside")
        return seen

    token = request_id.set("from caller")
    try:
        op = runtime.spawn(read_and_change)
        assert op.wait(5).value == "from caller"
        assert request_id.get() == "from caller"
    finally:
        request_id.reset(token)


@pytest.mark.timeout(10)
def test_child_copies_its_parents_context(runtime: asyncop.Runtime) -> None:
    def child() -> str:
        seen = request_id.get()
        request_id.set("changed by child")
        return seen

    def parent() -> tuple[str, str]:
        request_id.set("from parent")
        kid = current_operation().spawn(child)
        seen = kid.wait(5).value
        return seen, request_id.get()

    caller = request_id.set("from caller")
    try:
        assert runtime.run(parent) == ("from parent", "from parent")
    finally:
        request_id.reset(caller)


@pytest.mark.timeout(10)
def test_coroutine_tasks_return_their_values_and_keep_their_context_changes(
    runtime: asyncop.Runtime,
) -> None:
    # Values a return could be mistaken for: None, a tuple, an exception, StopIteration.
    values: list[object] = [None, (1, 2), ("one",), (), ValueError("v"), StopIteration(3)]

    async def child(value: object) -> object:
        request_id.set("changed by child")
        await asyncop.checkpoint()
        assert request_id.get() == "changed by child"
        return value

    async def parent() -> tuple[list[object], str]:
        request_id.set("from parent")
        async with asyncop.scope() as scope:
            kids = [scope.spawn(child, value) for value in values]
            await asyncop.checkpoint()
        return [await kid for kid in kids], request_id.get()

    returned, seen = runtime.run(parent)
    assert seen == "from parent"
    assert len(returned) == len(values)
    assert all(got is value for got, value in zip(returned, values, strict=True))


@pytest.mark.timeout(10)
def test_child_spawned_from_outside_copies_the_parents_context(
    runtime: asyncop.Runtime,
) -> None:
    ready = threading.Event()
    gate = threading.Event()

    def parent() -> None:
        request_id.set("from parent")
        ready.set()
        gate.wait(5)

    caller = request_id.set("from caller")
    try:
        op = runtime.spawn(parent)
        assert ready.wait(5)
        kid = op.spawn(request_id.get)
        assert kid.wait(5).value == "from parent"
    finally:
        gate.set()
        request_id.reset(caller)
    op.wait(5)
