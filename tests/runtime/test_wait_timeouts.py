"""Every thread wait takes any timeout: inf and huge values mean no limit.

``None``, ``math.inf`` and values past what the OS can wait for wait without
a limit; 0 or less polls; NaN or a non-number raises ValueError/TypeError
before anything changes state (no item sent, no waiter queued, no lock
taken). The same rules for ``op.deadline``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import asyncop
from asyncop import OperationState, WouldBlock, async_await

pytestmark = pytest.mark.timeout(60)

NO_LIMIT = [None, math.inf, 1e300, 1e10, float(threading.TIMEOUT_MAX) * 2]
BAD = [
    (math.nan, ValueError),
    ("1", TypeError),
    ([1], TypeError),
    (object(), TypeError),
    (True, TypeError),
]


def _later(delay: float, fn: Callable[[], object]) -> threading.Thread:
    thread = threading.Timer(delay, fn)
    thread.start()
    return thread


# ----------------------------------------------------------------------
# No limit: the wait waits, then works
# ----------------------------------------------------------------------


@pytest.mark.parametrize("timeout", NO_LIMIT)
def test_channel_send_and_recv_with_no_limit_wait_then_hand_over_once(timeout: Any) -> None:
    ch: asyncop.Channel[str] = asyncop.Channel(0)
    got: list[str] = []
    _later(0.05, lambda: got.append(ch.recv(5)))
    ch.send("x", timeout=timeout)  # returns once received
    time.sleep(0.02)
    assert got == ["x"]
    _later(0.05, lambda: ch.send("y", timeout=5))
    assert ch.recv(timeout=timeout) == "y"
    # No ghost: nothing queued, and the next item reaches the next receiver.
    assert not ch.statistics().tasks_waiting_receive and not ch.statistics().tasks_waiting_send
    ch2: asyncop.Channel[int] = asyncop.Channel(1)
    ch2.send(1, timeout=timeout)
    assert ch2.recv(timeout=timeout) == 1


@pytest.mark.parametrize("timeout", NO_LIMIT)
def test_contended_lock_acquire_with_no_limit_waits_and_leaks_nothing(timeout: Any) -> None:
    lock = asyncop.Lock("inf")
    held = threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            time.sleep(0.05)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(5)
    assert lock.acquire(timeout=timeout) is True
    lock.release()
    holder.join(5)
    assert lock.statistics() == asyncop.LockStatistics(False, None, 0)


@pytest.mark.parametrize("timeout", NO_LIMIT)
def test_semaphore_and_event_waits_with_no_limit(timeout: Any) -> None:
    sem = asyncop.Semaphore(0)
    _later(0.05, sem.release)
    assert sem.acquire(timeout=timeout) is True
    assert sem.value == 0
    event = asyncop.Event()
    _later(0.05, event.set)
    assert event.wait(timeout) is True


@pytest.mark.parametrize("timeout", NO_LIMIT)
def test_op_wait_async_await_and_token_wait_with_no_limit(timeout: Any) -> None:
    with asyncop.Runtime(2) as rt:
        op = rt.spawn(time.sleep, 0.05)
        assert op.wait(timeout).state is OperationState.COMPLETED
        op2 = rt.spawn(time.sleep, 0.05)
        assert async_await(op2, timeout).state is OperationState.COMPLETED
        gate = threading.Event()
        op3 = rt.spawn(gate.wait, 10)
        _later(0.05, op3.cancel)
        assert op3.token.wait(timeout) is True
        gate.set()


# ----------------------------------------------------------------------
# Zero or negative: a poll
# ----------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [0, 0.0, -1, -math.inf, -1e300])
def test_a_negative_timeout_polls(timeout: float) -> None:
    ch: asyncop.Channel[int] = asyncop.Channel(0)
    with pytest.raises(TimeoutError):
        ch.send(1, timeout=timeout)
    with pytest.raises(TimeoutError):
        ch.recv(timeout=timeout)
    assert not ch.statistics().tasks_waiting_send and not ch.statistics().tasks_waiting_receive
    lock = asyncop.Lock()
    assert lock.acquire(timeout=timeout) is True
    other: list[bool] = []
    thread = threading.Thread(target=lambda: other.append(lock.acquire(timeout=timeout)))
    thread.start()
    thread.join(5)
    assert other == [False] and not lock.statistics().tasks_waiting
    lock.release()
    sem = asyncop.Semaphore(0)
    assert sem.acquire(timeout=timeout) is False and not sem.statistics().tasks_waiting
    assert asyncop.Event().wait(timeout) is False
    with asyncop.Runtime(1) as rt:
        gate = threading.Event()
        op = rt.spawn(gate.wait, 10)
        with pytest.raises(TimeoutError):
            op.wait(timeout)
        with pytest.raises(TimeoutError):
            async_await(op, timeout)
        assert op.token.wait(timeout) is False
        gate.set()
        assert op.wait(5).state is OperationState.COMPLETED
        assert op.wait(timeout).state is OperationState.COMPLETED


# ----------------------------------------------------------------------
# Bad values raise before anything changes
# ----------------------------------------------------------------------


@pytest.mark.parametrize(("bad", "error"), BAD)
def test_a_bad_timeout_raises_before_the_channel_changes(bad: Any, error: type) -> None:
    ch: asyncop.Channel[str] = asyncop.Channel(1)
    with pytest.raises(error, match=r"Channel\.send\(timeout=\.\.\.\)"):
        ch.send("never", timeout=bad)
    with pytest.raises(WouldBlock):
        ch.try_recv()  # not sent, not even into the free buffer
    ch.try_send("kept")
    with pytest.raises(error, match=r"Channel\.recv\(timeout=\.\.\.\)"):
        ch.recv(timeout=bad)
    assert ch.try_recv() == "kept"  # not taken
    rendezvous: asyncop.Channel[str] = asyncop.Channel(0)
    with pytest.raises(error):
        rendezvous.recv(timeout=bad)
    assert not rendezvous.statistics().tasks_waiting_receive  # no ghost receiver


@pytest.mark.parametrize(("bad", "error"), BAD)
def test_a_bad_timeout_raises_before_a_lock_or_semaphore_changes(bad: Any, error: type) -> None:
    lock = asyncop.Lock()
    with pytest.raises(error, match=r"Lock\.acquire\(timeout=\.\.\.\)"):
        lock.acquire(timeout=bad)
    assert not lock.locked()
    sem = asyncop.Semaphore(1)
    with pytest.raises(error, match=r"Semaphore\.acquire\(timeout=\.\.\.\)"):
        sem.acquire(timeout=bad)
    assert sem.value == 1
    event = asyncop.Event()
    event.set()
    with pytest.raises(error, match=r"Event\.wait\(timeout=\.\.\.\)"):
        event.wait(bad)


@pytest.mark.parametrize(("bad", "error"), BAD)
def test_a_bad_timeout_raises_from_every_operation_wait(bad: Any, error: type) -> None:
    with asyncop.Runtime(1) as rt:
        op = rt.spawn(lambda: 1)
        assert op.wait(5).value == 1
        # Even on an operation that has ended: the argument is wrong either way.
        with pytest.raises(error, match=r"wait\(timeout=\.\.\.\)"):
            op.wait(bad)
        with pytest.raises(error):
            async_await(op, bad)
        with pytest.raises(error, match=r"CancelToken\.wait\(timeout=\.\.\.\)"):
            op.token.wait(bad)


# ----------------------------------------------------------------------
# The deadline setter
# ----------------------------------------------------------------------


def test_an_infinite_deadline_is_no_deadline() -> None:
    with asyncop.Runtime(2) as rt:
        gate = threading.Event()
        op = rt.spawn(gate.wait, 10)
        op.deadline = rt.now() + 10
        op.deadline = math.inf
        assert op.deadline is None
        gate.set()
        assert op.wait(5).state is OperationState.COMPLETED


@pytest.mark.parametrize("far", [1e12, 1e300])
def test_a_far_deadline_never_fires_and_the_runtime_keeps_working(far: float) -> None:
    with asyncop.Runtime(2) as rt:
        gate = threading.Event()
        op = rt.spawn(gate.wait, 10)
        op.deadline = far
        assert op.deadline == far
        assert rt.spawn(lambda: 5).wait(5).value == 5
        time.sleep(0.05)
        assert not op.done
        gate.set()
        assert op.wait(5).state is OperationState.COMPLETED


@pytest.mark.parametrize(("bad", "error"), BAD)
def test_a_bad_deadline_raises_and_keeps_the_old_one(bad: Any, error: type) -> None:
    with asyncop.Runtime(1) as rt:
        gate = threading.Event()
        op = rt.spawn(gate.wait, 10)
        before = rt.now() + 100
        op.deadline = before
        with pytest.raises(error, match="deadline"):
            op.deadline = bad
        assert op.deadline == before
        gate.set()
        assert op.wait(5).state is OperationState.COMPLETED


# ----------------------------------------------------------------------
# Any value at all: a clear error or the right behaviour
# ----------------------------------------------------------------------

_any_timeout = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.text(max_size=3),
    st.booleans(),
    st.just(object()),
)


def _calls(rt: asyncop.Runtime) -> list[tuple[str, Callable[[Any], object]]]:
    """Each wait that takes a timeout, on a thing that is ready (so it returns)."""
    ready_op = rt.spawn(lambda: 1)
    ready_op.wait(5)
    # A cancelled token: its op blocks in a wait that the cancel ends.
    cancelled = rt.spawn(asyncop.Event().wait)
    cancelled.cancel()
    ch: asyncop.Channel[int] = asyncop.Channel(1)
    event = asyncop.Event()
    event.set()
    sem = asyncop.Semaphore(1)
    lock = asyncop.Lock()

    def send_recv(t: Any) -> object:
        ch.send(1, timeout=t)
        return ch.recv(timeout=t)

    def lock_cycle(t: Any) -> object:
        got = lock.acquire(timeout=t)
        lock.release()
        return got

    def sem_cycle(t: Any) -> object:
        got = sem.acquire(timeout=t)
        sem.release()
        return got

    return [
        ("op.wait", lambda t: ready_op.wait(t)),
        ("async_await", lambda t: async_await(ready_op, t)),
        ("token.wait", lambda t: cancelled.token.wait(t)),
        ("event.wait", lambda t: event.wait(t)),
        ("channel", send_recv),
        ("lock", lock_cycle),
        ("semaphore", sem_cycle),
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(timeout=_any_timeout)
def test_any_timeout_gives_a_clear_error_or_works(timeout: Any) -> None:
    with asyncop.Runtime(1, name="fuzz") as rt:
        for name, call in _calls(rt):
            try:
                call(timeout)
            except (TypeError, ValueError) as exc:
                assert "timeout" in str(exc), f"{name}: unclear error {exc!r}"
                is_number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
                assert not is_number or math.isnan(timeout), f"{name} refused {timeout!r}"
        # The runtime still runs new work.
        assert rt.spawn(lambda: 2).wait(5).value == 2
