"""Tests for the auto-reset WakeEvent and acquire_for."""

from __future__ import annotations

import queue
import sys
import threading
import time
from types import FrameType
from typing import Any

import pytest

from asyncop.platform import WakeEvent, acquire_for

pytestmark = pytest.mark.timeout(10)


def _wait_in_thread(
    event: WakeEvent, timeout: float | None
) -> tuple[threading.Thread, queue.Queue[bool]]:
    """Start a thread that calls ``event.wait(timeout)`` and reports the result."""
    results: queue.Queue[bool] = queue.Queue()
    about_to_wait = threading.Event()

    def waiter() -> None:
        about_to_wait.set()
        results.put(event.wait(timeout))

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    assert about_to_wait.wait(5)
    return thread, results


# ----------------------------------------------------------------------
# WakeEvent
# ----------------------------------------------------------------------


def test_new_event_is_not_set() -> None:
    event = WakeEvent()
    assert not event.is_set()


def test_wait_returns_true_when_signalled() -> None:
    event = WakeEvent()
    event.set()
    assert event.wait(5) is True


def test_wait_returns_false_on_timeout() -> None:
    event = WakeEvent()
    start = time.monotonic()
    assert event.wait(0.05) is False
    # It really waited: a timeout that returns early would spin a parked worker.
    assert time.monotonic() - start >= 0.04


def test_set_before_wait_is_not_lost() -> None:
    event = WakeEvent()
    event.set()
    assert event.is_set()
    assert event.wait(0) is True


def test_wait_resets_the_event() -> None:
    event = WakeEvent()
    event.set()
    assert event.wait(5) is True
    assert not event.is_set()
    assert event.wait(0) is False


def test_two_sets_before_one_wait_release_only_one_wait() -> None:
    event = WakeEvent()
    event.set()
    event.set()
    assert event.wait(0) is True
    assert event.wait(0) is False
    assert not event.is_set()


def test_zero_timeout_polls_without_blocking() -> None:
    event = WakeEvent()
    start = time.monotonic()
    assert event.wait(0) is False
    assert time.monotonic() - start < 1.0


def test_negative_timeout_polls_without_blocking() -> None:
    event = WakeEvent()
    start = time.monotonic()
    assert event.wait(-1) is False
    assert time.monotonic() - start < 1.0
    event.set()
    assert event.wait(-1) is True


def test_wait_none_returns_when_set_before() -> None:
    event = WakeEvent()
    event.set()
    assert event.wait(None) is True


def test_wait_none_blocks_until_set_from_another_thread() -> None:
    event = WakeEvent()
    thread, results = _wait_in_thread(event, None)
    # Not released by anything but set(): no spurious return.
    with pytest.raises(queue.Empty):
        results.get(timeout=0.1)
    event.set()
    assert results.get(timeout=5) is True
    thread.join(5)
    assert not thread.is_alive()


def test_set_from_another_thread_wakes_a_blocked_waiter() -> None:
    # Thread A waits, thread B sets, A returns True.
    event = WakeEvent()
    results: queue.Queue[bool] = queue.Queue()
    a_waiting = threading.Event()

    def thread_a() -> None:
        a_waiting.set()
        results.put(event.wait(5))

    def thread_b() -> None:
        assert a_waiting.wait(5)
        time.sleep(0.05)  # let A block in wait(); the result is the same if not
        event.set()

    a = threading.Thread(target=thread_a, daemon=True)
    b = threading.Thread(target=thread_b, daemon=True)
    a.start()
    b.start()
    start = time.monotonic()
    assert results.get(timeout=5) is True
    # Woken by the set, not by its own 5 s timeout.
    assert time.monotonic() - start < 4.0
    a.join(5)
    b.join(5)
    assert not event.is_set()


def test_one_set_releases_one_of_two_waiters() -> None:
    event = WakeEvent()
    first, results = _wait_in_thread(event, 5)
    second = threading.Thread(target=lambda: results.put(event.wait(5)), daemon=True)
    second.start()
    time.sleep(0.05)  # let both block in wait()
    event.set()
    assert results.get(timeout=5) is True
    # The event auto-reset: the other waiter stays blocked.
    with pytest.raises(queue.Empty):
        results.get(timeout=0.2)
    event.set()
    assert results.get(timeout=5) is True
    first.join(5)
    second.join(5)
    assert not event.is_set()


def test_set_is_idempotent_while_signalled() -> None:
    event = WakeEvent()
    for _ in range(10):
        event.set()
    assert event.is_set()
    assert event.wait(0) is True
    assert not event.is_set()


def test_every_set_after_a_wait_is_seen() -> None:
    # Alternating set/wait from two threads: no set is lost after a reset.
    event = WakeEvent()
    back = WakeEvent()
    rounds = 2000
    seen: list[bool] = []

    def consumer() -> None:
        for _ in range(rounds):
            seen.append(event.wait(5))
            back.set()

    thread = threading.Thread(target=consumer, daemon=True)
    thread.start()
    for _ in range(rounds):
        event.set()
        assert back.wait(5)
    thread.join(5)
    assert seen == [True] * rounds


def test_repr_shows_the_state() -> None:
    event = WakeEvent()
    assert "clear" in repr(event)
    event.set()
    assert "signalled" in repr(event)


# ----------------------------------------------------------------------
# acquire_for
# ----------------------------------------------------------------------


def test_acquire_for_takes_a_free_lock() -> None:
    lock = threading.Lock()
    assert acquire_for(lock, 5) is True
    assert lock.locked()


def test_acquire_for_times_out_on_a_held_lock() -> None:
    lock = threading.Lock()
    lock.acquire()
    start = time.monotonic()
    assert acquire_for(lock, 0.05) is False
    assert time.monotonic() - start >= 0.04


def test_acquire_for_zero_timeout_polls() -> None:
    lock = threading.Lock()
    lock.acquire()
    assert acquire_for(lock, 0) is False


def test_acquire_for_negative_timeout_polls_instead_of_blocking_forever() -> None:
    # lock.acquire(timeout=-1) would mean "forever"; a deadline already past
    # must only poll.
    lock = threading.Lock()
    lock.acquire()
    start = time.monotonic()
    assert acquire_for(lock, -1) is False
    assert time.monotonic() - start < 1.0


def test_acquire_for_none_waits_until_released_from_another_thread() -> None:
    # The one-shot parking pattern: the waiter holds a fresh lock and another
    # thread releases it as the wake-up.
    lock = threading.Lock()
    lock.acquire()
    timer = threading.Timer(0.05, lock.release)
    timer.start()
    try:
        assert acquire_for(lock, None) is True
    finally:
        timer.cancel()


def test_an_interrupt_as_set_returns_leaves_the_event_signalled() -> None:
    # A Ctrl-C on the main thread is raised as a call returns: here, as the
    # release inside set() returns (simulated with a profile hook).
    event = WakeEvent()
    raised = False

    def hook(frame: FrameType, event_name: str, arg: Any) -> None:
        nonlocal raised
        if event_name == "c_return":
            raised = True
            sys.setprofile(None)
            raise KeyboardInterrupt

    sys.setprofile(hook)
    try:
        event.set()
    except KeyboardInterrupt:
        pass
    finally:
        sys.setprofile(None)
    assert raised
    # Interrupted or not, the set() happened: the next wait() takes it, and
    # the event then works as before.
    assert event.wait(0)
    assert not event.wait(0)
    event.set()
    event.set()
    assert event.wait(0)
    assert not event.is_set()
