"""Tests for RecursiveLock: re-entry, matching releases, ownership, exclusion."""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from asyncop.platform import RecursiveLock

pytestmark = pytest.mark.timeout(10)


def _in_thread(fn: Callable[[], object]) -> object:
    """Run ``fn`` on another thread and return its result or raised exception."""
    results: queue.Queue[object] = queue.Queue()

    def body() -> None:
        try:
            results.put(fn())
        except BaseException as exc:
            results.put(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    result = results.get(timeout=5)
    thread.join(5)
    return result


def _try_acquire_elsewhere(lock: RecursiveLock, timeout: float) -> bool:
    """Try to take ``lock`` from another thread; release it again if taken."""

    def attempt() -> bool:
        got = lock.acquire(timeout=timeout)
        if got:
            lock.release()
        return bool(got)

    result = _in_thread(attempt)
    assert isinstance(result, bool), result
    return result


def _switch_point() -> None:
    """A call: the interpreter may switch threads on entering it."""


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads often, so that a race in unprotected code shows up."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def test_owner_can_reenter_without_blocking() -> None:
    lock = RecursiveLock()
    assert lock.acquire(blocking=False)
    assert lock.acquire(blocking=False)
    assert lock.acquire(timeout=0.01)
    for _ in range(3):
        lock.release()
    assert not lock.owned()


def test_with_statement_reenters() -> None:
    lock = RecursiveLock()
    with lock:
        with lock:
            assert lock.owned()
        assert lock.owned()
    assert not lock.owned()


def test_lock_held_until_matching_number_of_releases() -> None:
    lock = RecursiveLock()
    lock.acquire()
    lock.acquire()
    lock.acquire()
    lock.release()
    lock.release()
    # One acquire still outstanding: another thread cannot enter.
    assert _try_acquire_elsewhere(lock, 0.05) is False
    lock.release()
    assert _try_acquire_elsewhere(lock, 5) is True


def test_other_thread_cannot_acquire_while_owner_holds_it() -> None:
    lock = RecursiveLock()
    with lock:
        assert _try_acquire_elsewhere(lock, 0.05) is False
    assert _try_acquire_elsewhere(lock, 5) is True


def test_release_from_non_owner_raises_runtime_error() -> None:
    lock = RecursiveLock()
    lock.acquire()
    try:
        result = _in_thread(lock.release)
        assert isinstance(result, RuntimeError)
        # The failed release did not drop the owner's hold.
        assert lock.owned()
        assert _try_acquire_elsewhere(lock, 0.05) is False
    finally:
        lock.release()


def test_release_of_unheld_lock_raises_runtime_error() -> None:
    lock = RecursiveLock()
    with pytest.raises(RuntimeError):
        lock.release()


def test_extra_release_by_owner_raises_runtime_error() -> None:
    lock = RecursiveLock()
    lock.acquire()
    lock.release()
    with pytest.raises(RuntimeError):
        lock.release()


def test_owned_is_true_only_in_the_owning_thread() -> None:
    lock = RecursiveLock()
    assert lock.owned() is False
    with lock:
        assert lock.owned() is True
        assert _in_thread(lock.owned) is False
    assert lock.owned() is False


def test_owned_stays_true_until_last_release() -> None:
    lock = RecursiveLock()
    lock.acquire()
    lock.acquire()
    lock.release()
    assert lock.owned() is True
    lock.release()
    assert lock.owned() is False


def test_waiting_thread_gets_the_lock_after_last_release() -> None:
    lock = RecursiveLock()
    lock.acquire()
    lock.acquire()
    got: queue.Queue[bool] = queue.Queue()
    started = threading.Event()

    def contender() -> None:
        started.set()
        ok = lock.acquire(timeout=5)
        got.put(bool(ok))
        if ok:
            lock.release()

    thread = threading.Thread(target=contender, daemon=True)
    thread.start()
    assert started.wait(5)
    lock.release()
    with pytest.raises(queue.Empty):
        got.get(timeout=0.1)
    lock.release()
    assert got.get(timeout=5) is True
    thread.join(5)


@pytest.mark.usefixtures("fast_switching")
def test_mutual_exclusion_under_contention() -> None:
    lock = RecursiveLock()
    threads_n, rounds = 4, 5000
    counter = [0]
    inside = [0]
    overlaps: list[int] = []
    go = threading.Barrier(threads_n)

    def worker() -> None:
        go.wait(5)
        for _ in range(rounds):
            with lock:
                inside[0] += 1
                if inside[0] != 1:
                    overlaps.append(inside[0])
                with lock:  # re-entry inside the critical section
                    value = counter[0]
                    _switch_point()  # invites a switch between read and write
                    counter[0] = value + 1
                inside[0] -= 1

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(8)
    assert not any(thread.is_alive() for thread in threads)
    assert overlaps == []
    assert counter[0] == threads_n * rounds
    assert not lock.owned()
    assert _try_acquire_elsewhere(lock, 5) is True
