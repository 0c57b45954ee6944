"""Tests for RecursiveLock: re-entry, matching releases, ownership, exclusion."""

from __future__ import annotations

import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

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


def test_blocking_acquire_without_timeout_wakes_when_the_holder_releases() -> None:
    lock = RecursiveLock()
    lock.acquire()
    waiting = threading.Event()

    def contender() -> bool:
        waiting.set()
        got = lock.acquire()  # no timeout: waits until released
        owned = lock.owned()
        lock.release()
        return bool(got) and owned

    results: queue.Queue[bool] = queue.Queue()
    thread = threading.Thread(target=lambda: results.put(contender()), daemon=True)
    thread.start()
    assert waiting.wait(5)
    with pytest.raises(queue.Empty):
        results.get(timeout=0.05)
    lock.release()
    assert results.get(timeout=5) is True
    thread.join(5)


def test_zero_timeout_only_tries() -> None:
    lock = RecursiveLock()
    assert lock.acquire(timeout=0) is True
    assert lock.acquire(True, 0) is True  # the owner re-enters
    assert _try_acquire_elsewhere(lock, 0) is False
    lock.release()
    lock.release()
    assert _try_acquire_elsewhere(lock, 0) is True


def test_non_blocking_acquire_fails_at_once_when_held_elsewhere() -> None:
    lock = RecursiveLock()
    with lock:
        assert _in_thread(lambda: lock.acquire(blocking=False)) is False
        assert _in_thread(lambda: lock.acquire(False)) is False
    assert not lock.owned()


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((False, 1.0), {}),  # a timeout given to a non-blocking call
        ((), {"blocking": False, "timeout": 0}),
        ((), {"timeout": -2.0}),  # negative, and not -1
        ((), {"timeout": float("nan")}),
        ((), {"timeout": 1e300}),  # longer than the OS lock can wait
        ((), {"timeout": "1"}),
    ],
)
def test_bad_acquire_arguments_raise_as_threading_rlock_does(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    with pytest.raises(Exception) as expected:
        threading.RLock().acquire(*args, **kwargs)
    lock = RecursiveLock()
    with pytest.raises(type(expected.value)) as raised:
        lock.acquire(*args, **kwargs)
    if not isinstance(expected.value, TypeError):  # (a wrong type's message may differ)
        assert str(raised.value) == str(expected.value)
    assert not lock.owned()
    assert _try_acquire_elsewhere(lock, 5) is True


def test_exiting_a_with_block_by_an_error_releases_once() -> None:
    lock = RecursiveLock()
    with lock:
        with pytest.raises(KeyError), lock:
            raise KeyError("x")
        assert lock.owned()
    assert not lock.owned()
    assert _try_acquire_elsewhere(lock, 5) is True


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs pthread_kill")
def test_a_signal_handler_runs_while_the_main_thread_waits() -> None:
    assert threading.current_thread() is threading.main_thread()
    main = threading.main_thread().ident
    assert main is not None
    lock = RecursiveLock()
    held = threading.Event()
    done = threading.Event()

    def holder() -> None:
        with lock:
            held.set()
            time.sleep(0.05)  # the main thread is waiting by now
            signal.pthread_kill(main, signal.SIGUSR1)
            done.wait(5)

    class Interrupted(Exception):
        pass

    def handler(signum: int, frame: object) -> None:
        raise Interrupted

    old = signal.signal(signal.SIGUSR1, handler)
    thread = threading.Thread(target=holder, daemon=True)
    try:
        thread.start()
        assert held.wait(5)
        with pytest.raises(Interrupted):
            lock.acquire(timeout=5)
    finally:
        done.set()
        thread.join(5)
        signal.signal(signal.SIGUSR1, old)
    assert not lock.owned()
    assert lock.acquire(timeout=5) is True
    lock.release()


def test_waiters_that_block_all_get_in_and_counts_stay_right() -> None:
    # Holders keep the lock across a sleep, so that the others really wait
    # (blocked in the OS lock, not just retrying), with and without a timeout.
    lock = RecursiveLock()
    threads_n, rounds = 4, 20
    counter = [0]
    inside = [0]
    overlaps: list[int] = []
    go = threading.Barrier(threads_n)

    def worker(index: int) -> None:
        go.wait(5)
        for _ in range(rounds):
            assert lock.acquire() if index % 2 else lock.acquire(timeout=30)
            try:
                inside[0] += 1
                if inside[0] != 1:
                    overlaps.append(inside[0])
                value = counter[0]
                time.sleep(0.0005)
                counter[0] = value + 1
                inside[0] -= 1
            finally:
                lock.release()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(8)
    assert not any(thread.is_alive() for thread in threads)
    assert overlaps == []
    assert counter[0] == threads_n * rounds
    assert _try_acquire_elsewhere(lock, 5) is True
