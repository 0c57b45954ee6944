"""Tests for VirtualClock and for deadlines on a runtime that uses it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import asyncop
from asyncop.testing import VirtualClock
from tests.conftest import runtime_threads

pytestmark = pytest.mark.timeout(15)

Manual = tuple[asyncop.Runtime, VirtualClock]


@pytest.fixture
def manual() -> Iterator[Manual]:
    """A 2-worker runtime on a virtual clock that moves only by advance()."""
    clock = VirtualClock(autojump=False)
    rt = asyncop.Runtime(2, name=f"mrt{id(object()):x}", clock=clock)
    try:
        yield rt, clock
    finally:
        assert rt.shutdown(timeout=10), "runtime did not shut down in 10 s"
        assert runtime_threads(rt) == []


def _idle(op: asyncop.AsyncOperation, context: object) -> None:
    """A callback for operations that are never submitted."""


# ----------------------------------------------------------------------
# The clock by itself
# ----------------------------------------------------------------------


def test_virtual_clock_starts_at_zero() -> None:
    assert VirtualClock().now() == 0.0


def test_virtual_clock_starts_at_start() -> None:
    assert VirtualClock(start=42.5).now() == 42.5


def test_virtual_clock_stands_still_without_advance() -> None:
    clock = VirtualClock(autojump=False)
    first = clock.now()
    time.sleep(0.01)
    assert clock.now() == first


def test_advance_moves_the_clock() -> None:
    clock = VirtualClock(autojump=False, start=10.0)
    clock.advance(2.5)
    assert clock.now() == 12.5
    clock.advance(0)
    assert clock.now() == 12.5


def test_negative_advance_raises_value_error() -> None:
    clock = VirtualClock(autojump=False, start=5.0)
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert clock.now() == 5.0


def test_nan_advance_raises_value_error() -> None:
    clock = VirtualClock(autojump=False)
    with pytest.raises(ValueError):
        clock.advance(float("nan"))
    assert clock.now() == 0.0


def test_autojump_flag_is_kept() -> None:
    assert VirtualClock().autojump is True
    assert VirtualClock(autojump=False).autojump is False


def test_io_grace_is_kept_and_shown() -> None:
    assert VirtualClock().io_grace is None
    assert VirtualClock(True, 2).io_grace == 2.0
    clock = VirtualClock(autojump=True, io_grace=0.05)
    assert clock.io_grace == 0.05
    assert "io_grace=0.05" in repr(clock)
    assert "io_grace" not in repr(VirtualClock())


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (0, ValueError),
        (-1, ValueError),
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        (10**400, ValueError),
        ("1", TypeError),
        (True, TypeError),
    ],
    ids=["zero", "negative", "nan", "inf", "huge-int", "str", "bool"],
)
def test_bad_io_grace_raises(bad: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"VirtualClock\(io_grace=\.\.\.\)"):
        VirtualClock(autojump=True, io_grace=bad)  # type: ignore[arg-type]


def test_io_grace_without_autojump_raises() -> None:
    with pytest.raises(ValueError, match="autojump=True"):
        VirtualClock(autojump=False, io_grace=0.1)


def test_advance_from_another_thread() -> None:
    clock = VirtualClock(autojump=False)
    thread = threading.Thread(target=clock.advance, args=(7.0,), daemon=True)
    thread.start()
    thread.join(5)
    assert clock.now() == 7.0


def test_concurrent_advances_all_count() -> None:
    clock = VirtualClock(autojump=False)
    threads_n, rounds = 4, 2000
    go = threading.Barrier(threads_n)

    def advancer() -> None:
        go.wait(5)
        for _ in range(rounds):
            clock.advance(0.5)

    threads = [threading.Thread(target=advancer, daemon=True) for _ in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert clock.now() == threads_n * rounds * 0.5


# ----------------------------------------------------------------------
# A runtime on the virtual clock
# ----------------------------------------------------------------------


def test_runtime_now_reads_the_virtual_clock() -> None:
    clock = VirtualClock(autojump=False, start=100.0)
    with asyncop.Runtime(1, clock=clock) as rt:
        assert rt.now() == 100.0
        clock.advance(5.0)
        assert rt.now() == 105.0


def test_manual_clock_fires_a_deadline_only_after_advance_past_it(manual: Manual) -> None:
    rt, clock = manual
    op = rt.create(_idle, name="waits-for-time")
    op.deadline = rt.now() + 10.0
    clock.advance(5.0)
    # Short of the deadline: nothing fires, however long we wait in real time.
    assert op.token.wait(0.2) is False
    assert op.state is asyncop.OperationState.CREATED
    assert op.expired is False
    clock.advance(6.0)
    result = op.wait(5)
    assert result.state is asyncop.OperationState.CANCELLED
    assert op.expired is True


def test_manual_clock_fires_a_deadline_advanced_exactly_onto(manual: Manual) -> None:
    rt, clock = manual
    op = rt.create(_idle)
    op.deadline = rt.now() + 3.0
    clock.advance(3.0)
    assert op.wait(5).state is asyncop.OperationState.CANCELLED
    assert op.expired is True


def test_manual_clock_advance_from_another_thread_fires_a_deadline(manual: Manual) -> None:
    rt, clock = manual
    op = rt.create(_idle)
    op.deadline = rt.now() + 1.0
    thread = threading.Thread(target=clock.advance, args=(2.0,), daemon=True)
    thread.start()
    thread.join(5)
    assert op.wait(5).state is asyncop.OperationState.CANCELLED
    assert op.expired is True


def test_manual_clock_scope_deadline_waits_for_advance(manual: Manual) -> None:
    rt, clock = manual
    started = threading.Event()
    with pytest.raises(TimeoutError), rt.scope(name="timed", timeout=10.0) as root:

        def child() -> None:
            started.set()
            assert root.token.wait(5), "the scope was never cancelled"
            root.token.check()

        kid = root.spawn(child, name="child")
        assert started.wait(5)
        clock.advance(9.0)
        assert root.token.wait(0.2) is False
        assert root.expired is False
        clock.advance(2.0)
        assert root.token.wait(5) is True
    assert root.expired is True
    assert kid.state is asyncop.OperationState.CANCELLED


def test_autojump_fires_a_far_deadline_quickly(vruntime: asyncop.Runtime) -> None:
    op = vruntime.create(_idle, name="an-hour-away")
    start = time.monotonic()
    op.deadline = vruntime.now() + 3600.0
    result = op.wait(5)
    assert result.state is asyncop.OperationState.CANCELLED
    assert op.expired is True
    assert time.monotonic() - start < 5.0
    assert vruntime.now() >= 3600.0


def test_autojump_lands_on_the_deadline_not_past_it(vruntime: asyncop.Runtime) -> None:
    op = vruntime.create(_idle)
    op.deadline = vruntime.now() + 3600.0
    op.wait(5)
    assert vruntime.now() == 3600.0


def test_autojump_fires_deadlines_one_by_one_in_order(vruntime: asyncop.Runtime) -> None:
    fired: list[tuple[str, float]] = []
    started = threading.Event()
    gate = threading.Event()

    def busy() -> None:
        started.set()
        gate.wait(5)

    # A busy worker holds time still while the deadlines are set, so that
    # the clock cannot jump to the first one set before the earlier ones.
    holder = vruntime.spawn(busy, name="holder")
    assert started.wait(5)
    ops = []
    try:
        for label, deadline in (("c", 30.0), ("a", 10.0), ("b", 20.0)):
            op = vruntime.create(_idle, name=label)
            op.token.on_cancel(lambda label=label: fired.append((label, vruntime.now())))
            op.deadline = deadline
            ops.append(op)
    finally:
        gate.set()
    assert holder.wait(5).state is asyncop.OperationState.COMPLETED
    for op in ops:
        assert op.wait(5).state is asyncop.OperationState.CANCELLED
        assert op.expired is True
    assert fired == [("a", 10.0), ("b", 20.0), ("c", 30.0)]
    assert vruntime.now() == 30.0


def test_autojump_waits_while_a_worker_is_busy(vruntime: asyncop.Runtime) -> None:
    # Time jumps only when every worker is idle: a callback still running
    # could set an earlier timer, so jumping past it would be wrong.
    started = threading.Event()
    gate = threading.Event()

    def busy() -> None:
        started.set()
        gate.wait(5)

    worker_op = vruntime.spawn(busy, name="busy")
    assert started.wait(5)
    op = vruntime.create(_idle, name="an-hour-away")
    op.deadline = vruntime.now() + 3600.0
    try:
        assert op.token.wait(0.2) is False
        assert vruntime.now() == 0.0
    finally:
        gate.set()
    assert worker_op.wait(5).state is asyncop.OperationState.COMPLETED
    assert op.wait(5).state is asyncop.OperationState.CANCELLED
    assert op.expired is True


# -- bad readings are refused ----------------------------------------------------

_BAD_START = [
    (float("nan"), ValueError),
    (float("inf"), ValueError),
    (float("-inf"), ValueError),
    (10**400, ValueError),
    ("0", TypeError),
    (None, TypeError),
    (True, TypeError),
]


@pytest.mark.parametrize(("start", "error"), _BAD_START, ids=lambda v: repr(v)[:12])
def test_a_virtual_clock_refuses_a_start_it_cannot_read(start: object, error: type) -> None:
    with pytest.raises(error, match=r"VirtualClock\(start=\.\.\.\)"):
        VirtualClock(start=start)  # type: ignore[arg-type]


_BAD_STEP = [*_BAD_START, (-1, ValueError), (-1e-9, ValueError)]


@pytest.mark.parametrize(("seconds", "error"), _BAD_STEP, ids=lambda v: repr(v)[:12])
def test_advance_refuses_a_step_it_cannot_take_and_leaves_time_alone(
    manual: Manual, seconds: object, error: type
) -> None:
    rt, clock = manual
    clock.advance(5)
    with pytest.raises(error, match=r"VirtualClock\.advance\(\)"):
        clock.advance(seconds)  # type: ignore[arg-type]
    assert clock.now() == 5.0

    async def sleeper() -> float:
        await asyncop.sleep(1)
        return asyncop.current_time()

    op = rt.spawn(sleeper)
    end = time.monotonic() + 5
    while rt.registrations() == 0:  # until the sleep's timer is set
        assert time.monotonic() < end
        time.sleep(0.001)
    clock.advance(1)
    assert op.wait(5).value == 6.0  # sleeps still work
