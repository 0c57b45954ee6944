"""call_on_main_thread: calls another thread hands to the main thread while it waits."""

from __future__ import annotations

import _thread
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from asyncop.platform import acquire_for, call_on_main_thread, can_call_on_main_thread

pytestmark = pytest.mark.timeout(20)


def from_a_thread(fn: Callable[[], Any]) -> tuple[Any, BaseException | None, _thread.LockType]:
    """Run ``call_on_main_thread(fn)`` in a thread while the main thread waits in acquire_for.

    Returns the call's value, its error, and the lock the main thread waited
    on (released once the thread is done).
    """
    lock = _thread.allocate_lock()
    lock.acquire()
    outcome: dict[str, Any] = {"value": None, "error": None}

    def thread() -> None:
        try:
            while not can_call_on_main_thread():  # until the main thread waits below
                time.sleep(0.001)
            outcome["value"] = call_on_main_thread(fn, "refused: the main thread is busy")
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            lock.release()

    worker = threading.Thread(target=thread)
    worker.start()
    assert acquire_for(lock, 10.0)
    worker.join()
    return outcome["value"], outcome["error"], lock


def test_a_call_runs_on_the_main_thread_while_it_waits_and_returns_the_value() -> None:
    value, error, _ = from_a_thread(threading.current_thread)
    assert error is None
    assert value is threading.main_thread()


def test_the_error_of_a_call_is_raised_in_the_calling_thread() -> None:
    def fails() -> None:
        raise KeyError("from the main thread")

    _, error, _ = from_a_thread(fails)
    assert isinstance(error, KeyError)


def test_on_the_main_thread_it_is_a_plain_call() -> None:
    assert can_call_on_main_thread()
    assert call_on_main_thread(lambda: 42, "never refused here") == 42


def test_a_call_is_refused_at_once_while_the_main_thread_waits_elsewhere() -> None:
    outcome: list[Any] = []

    def thread() -> None:
        outcome.append(can_call_on_main_thread())
        start = time.monotonic()
        try:
            call_on_main_thread(lambda: None, "refused: the main thread is busy")
        except RuntimeError as exc:
            outcome.append((str(exc), time.monotonic() - start))

    worker = threading.Thread(target=thread)
    worker.start()
    worker.join()  # a wait outside asyncop: nothing is served here
    assert outcome[0] is False
    message, took = outcome[1]
    assert message == "refused: the main thread is busy"
    assert took < 1.0


def test_a_call_handed_over_just_before_the_wait_ends_still_runs() -> None:
    # The main thread's wait ends (the lock is released) while a call is
    # queued: it runs the call on its way out instead of stranding it.
    lock = _thread.allocate_lock()
    lock.acquire()
    ran = threading.Event()
    done: list[Any] = []

    def slow_main_side() -> str:
        ran.set()
        return "ran"

    def thread() -> None:
        while not can_call_on_main_thread():
            time.sleep(0.001)
        lock.release()  # the wait may end now, with the call still to hand over
        try:
            done.append(call_on_main_thread(slow_main_side, "refused"))
        except RuntimeError as exc:
            done.append(exc)

    worker = threading.Thread(target=thread)
    worker.start()
    assert acquire_for(lock, 10.0)
    worker.join()
    # Either the call got in before the wait ended and ran there, or it came
    # after and was refused: never a thread left waiting.
    if ran.is_set():
        assert done == ["ran"]
    else:
        assert isinstance(done[0], RuntimeError)
