"""Tests for check_timeout and acquire_for: what a timeout means, and waits of any length."""

from __future__ import annotations

import _thread
import decimal
import fractions
import math
import signal
import threading
import time

import pytest

from asyncop.platform import MAIN_SLICE, acquire_for, check_timeout

pytestmark = pytest.mark.timeout(20)


@pytest.mark.parametrize("value", [None, math.inf, 1e10, 1e300, 2**70, threading.TIMEOUT_MAX * 2])
def test_no_limit_values_mean_none(value: object) -> None:
    assert check_timeout(value, "f(timeout=...)") is None


@pytest.mark.parametrize("value", [-1, -math.inf, 0, 0.0, -1e300])
def test_zero_or_negative_means_poll(value: object) -> None:
    assert check_timeout(value, "f(timeout=...)") == 0.0


@pytest.mark.parametrize("value", [0.5, 2, fractions.Fraction(1, 4), 1e6])
def test_real_numbers_are_kept_as_floats(value: object) -> None:
    got = check_timeout(value, "f(timeout=...)")
    assert isinstance(got, float)
    assert got == float(value)  # type: ignore[arg-type]


def test_nan_is_a_value_error_naming_the_call() -> None:
    with pytest.raises(ValueError, match=r"f\(timeout=\.\.\.\) got NaN"):
        check_timeout(math.nan, "f(timeout=...)")


@pytest.mark.parametrize("value", ["1", b"1", True, [], complex(1, 0), decimal.Decimal("1")])
def test_non_numbers_are_a_type_error_naming_the_call_and_type(value: object) -> None:
    with pytest.raises(TypeError, match=r"f\(timeout=\.\.\.\) needs a number.*got "):
        check_timeout(value, "f(timeout=...)")


def test_acquire_for_polls_when_timeout_is_zero() -> None:
    lock = _thread.allocate_lock()
    assert acquire_for(lock, 0.0) is True
    assert acquire_for(lock, 0.0) is False


def test_acquire_for_times_out_after_several_main_thread_slices() -> None:
    lock = _thread.allocate_lock()
    lock.acquire()
    start = time.monotonic()
    assert acquire_for(lock, MAIN_SLICE * 4) is False
    assert time.monotonic() - start >= MAIN_SLICE * 4 - 0.005


def test_acquire_for_without_limit_returns_when_released_from_another_thread() -> None:
    lock = _thread.allocate_lock()
    lock.acquire()
    threading.Timer(0.2, lock.release).start()
    assert acquire_for(lock, None) is True


def test_acquire_for_a_huge_timeout_waits_instead_of_overflowing() -> None:
    lock = _thread.allocate_lock()
    lock.acquire()
    threading.Timer(0.1, lock.release).start()
    # A raw lock.acquire(timeout=1e12) raises OverflowError.
    assert acquire_for(lock, 1e12) is True


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs pthread_kill")
def test_main_thread_notices_a_signal_handled_while_it_waits() -> None:
    # The handler runs on the main thread only between slices; the wait must
    # not sleep through it.
    lock = _thread.allocate_lock()
    lock.acquire()
    seen: list[float] = []

    def handler(signum: int, frame: object) -> None:
        seen.append(time.monotonic())
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        sent = time.monotonic()
        threading.Timer(0.1, signal.raise_signal, (signal.SIGUSR1,)).start()
        with pytest.raises(KeyboardInterrupt):
            acquire_for(lock, None)
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert seen and seen[0] - sent < 1.0
    assert lock.locked()  # the interrupted wait acquired nothing
