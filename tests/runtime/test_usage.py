"""``op.stats``: what each operation has cost, counted by the workers.

- a task counts its steps (resumptions) and its wakes from a park, and its
  timestamps are on the runtime's clock;
- a sync callback counts one step; its busy and CPU time tell a callback
  that computes from one that blocks, and so do a task's long steps;
- the counts are complete by the time the operation ends;
- unstarted operations and scopes have what applies to them;
- a user's clock that raises gives NaN timestamps and breaks nothing.
"""

from __future__ import annotations

import math
import threading
import time

import attrs
import pytest

import asyncop
from asyncop import OperationState, OperationStatistics
from asyncop.testing import VirtualClock


def _compute(seconds: float) -> float:
    """Spin for ``seconds`` of wall time; return the CPU time this thread used meanwhile."""
    cpu = time.thread_time()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return time.thread_time() - cpu


@pytest.mark.timeout(10)
def test_a_task_counts_its_steps_wakes_and_times_on_the_runtime_clock() -> None:
    clock = VirtualClock(autojump=True)

    async def task() -> None:
        await asyncop.checkpoint()  # a yield, not a park: step 2
        await asyncop.sleep(5)  # a park and a wake: step 3
        await asyncop.checkpoint()  # step 4

    with asyncop.Runtime(2, clock=clock) as rt:
        start = rt.now()
        op = rt.spawn(task)
        assert op.wait(5).state is OperationState.COMPLETED
        stats = op.stats
    assert (stats.steps, stats.wakes) == (4, 1)
    assert stats.created_at == start
    assert stats.started_at == start
    assert stats.ended_at == start + 5
    assert 0.0 < stats.cpu_s <= stats.busy_s < 1.0


@pytest.mark.timeout(10)
def test_a_cancel_that_wakes_a_parked_task_counts_as_a_wake(vruntime: asyncop.Runtime) -> None:
    async def task() -> None:
        await asyncop.sleep(100)

    async def main() -> OperationStatistics:
        async with asyncop.scope() as s:
            op = s.spawn(task)
            await asyncop.sleep(1)
            op.cancel()
        return op.stats

    stats = vruntime.run(main)
    assert (stats.steps, stats.wakes) == (2, 1)


@pytest.mark.timeout(30)
def test_stats_are_complete_once_the_operation_has_ended(runtime: asyncop.Runtime) -> None:
    async def task() -> None:
        await asyncop.checkpoint()

    def callback() -> None:
        pass

    # Read from another thread as soon as each one ends: its last step must
    # already be counted, and its end stamped.
    for _ in range(200):
        ops = [runtime.spawn(task), runtime.spawn(callback)]
        for op, steps in zip(ops, (2, 1), strict=True):
            op.wait(10)
            stats = op.stats
            assert stats.steps == steps
            assert stats.ended_at is not None
            assert stats.started_at is not None
            assert stats.created_at <= stats.started_at <= stats.ended_at


@pytest.mark.timeout(30)
def test_on_the_real_clock_the_times_bracket_the_work(runtime: asyncop.Runtime) -> None:
    async def child() -> None:
        await asyncop.sleep(0.02)

    async def parent() -> asyncop.AsyncOperation[None]:
        async with asyncop.scope() as s:
            kid = s.spawn(child)
        return kid

    before = runtime.now()
    op = runtime.spawn(parent)
    kid = op.wait(10).value
    after = runtime.now()
    assert kid is not None
    outer, inner = op.stats, kid.stats
    assert outer.started_at is not None and outer.ended_at is not None
    assert inner.started_at is not None and inner.ended_at is not None
    assert before <= outer.created_at <= outer.started_at <= inner.created_at
    assert inner.created_at <= inner.started_at
    assert inner.ended_at - inner.started_at >= 0.02
    assert inner.ended_at <= outer.ended_at <= after


@pytest.mark.timeout(20)
def test_a_callback_that_computes_is_charged_its_cpu_time(runtime: asyncop.Runtime) -> None:
    op = runtime.spawn(_compute, 0.05)
    used = op.wait(10).value
    stats = op.stats
    assert stats.steps == 1
    assert stats.busy_s >= 0.05
    # What the callback's thread itself measured, give or take the
    # worker's own bookkeeping around it.
    assert used * 0.9 <= stats.cpu_s <= stats.busy_s
    assert stats.cpu_s <= used + 0.01


@pytest.mark.timeout(20)
def test_a_callback_that_blocks_is_charged_little_cpu_time(runtime: asyncop.Runtime) -> None:
    op = runtime.spawn(time.sleep, 0.1)
    op.wait(10)
    stats = op.stats
    assert stats.busy_s >= 0.1
    assert stats.cpu_s < 0.02


@pytest.mark.timeout(20)
def test_a_long_task_step_is_charged_what_it_used(runtime: asyncop.Runtime) -> None:
    async def task() -> tuple[float, float]:
        await asyncop.checkpoint()
        computed = _compute(0.05)
        await asyncop.checkpoint()
        time.sleep(0.05)  # blocks its worker: a step that waits, not computes
        return computed, 0.05

    async def main() -> tuple[OperationStatistics, float]:
        async with asyncop.scope() as s:
            op = s.spawn(task)
        computed, _ = op.result()
        return op.stats, computed

    stats, computed = runtime.run(main)
    assert stats.busy_s >= 0.1
    assert computed * 0.9 <= stats.cpu_s <= computed + 0.02


@pytest.mark.timeout(10)
def test_what_has_not_happened_yet_reads_none(runtime: asyncop.Runtime) -> None:
    made = runtime.create(lambda op, ctx: None)
    stats = made.stats
    assert (stats.steps, stats.wakes, stats.busy_s, stats.cpu_s) == (0, 0, 0.0, 0.0)
    assert stats.started_at is None
    assert stats.ended_at is None
    made.cancel()
    cancelled = made.stats
    assert cancelled.started_at is None  # it never ran
    assert cancelled.ended_at is not None
    assert cancelled.steps == 0


@pytest.mark.timeout(10)
def test_a_scope_runs_no_steps_of_its_own(vruntime: asyncop.Runtime) -> None:
    async def main() -> OperationStatistics:
        async with asyncop.scope() as s:
            await asyncop.sleep(3)
        return s.stats

    stats = vruntime.run(main)
    assert (stats.steps, stats.busy_s) == (0, 0.0)
    assert stats.started_at == stats.created_at
    assert stats.ended_at == stats.created_at + 3


@pytest.mark.timeout(10)
def test_stats_is_a_frozen_snapshot(runtime: asyncop.Runtime) -> None:
    gate = threading.Event()
    op = runtime.spawn(gate.wait, 10)
    before = op.stats
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        before.steps = 5  # type: ignore[misc]
    gate.set()
    op.wait(10)
    assert before.ended_at is None
    assert op.stats.ended_at is not None
    assert op.stats == op.stats
    assert op.stats is not op.stats


class _RaisingClock:
    """The real clock, which raises once ``broken`` is set."""

    virtual = False
    broken = False

    def now(self) -> float:
        if self.broken:
            raise RuntimeError("the clock broke")
        return time.monotonic()


@pytest.mark.timeout(10)
def test_a_clock_that_raises_gives_nan_timestamps_and_breaks_nothing() -> None:
    clock = _RaisingClock()
    with asyncop.Runtime(1, clock=clock) as rt:
        gate = threading.Event()
        op = rt.spawn(gate.wait, 10)
        assert op.stats.created_at > 0
        clock.broken = True
        gate.set()
        assert op.wait(10).state is OperationState.COMPLETED
        assert math.isnan(op.stats.ended_at)  # type: ignore[arg-type]
        assert rt.spawn(lambda: "alive").wait(10).value == "alive"
        clock.broken = False
