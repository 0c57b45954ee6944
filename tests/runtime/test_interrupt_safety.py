"""A Ctrl-C on the main thread never leaves the runtime lock held.

CPython runs a pending signal handler, and so raises KeyboardInterrupt, when
a call returns. Code that takes a lock with ``lock.acquire()`` and then
enters ``try:`` has such a return between the two: an interrupt landing
there skips the ``finally`` and the lock stays held for good, so every
worker then blocks on it and the program hangs at exit. A with-statement has
no such gap.

These tests raise KeyboardInterrupt from a profile hook as the k-th C call
made while the main thread holds the runtime lock returns: the first one is
the lock's own ``acquire()`` where the code calls it, else a call inside the
locked section. Whichever it is, the lock must be free once the interrupt
has propagated, and the runtime must still run work and shut down.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

import asyncop

pytestmark = pytest.mark.timeout(30)


def _noop() -> None:
    return None


def _interrupt_at(lock: Any, nth: int) -> Callable[[FrameType, str, Any], None]:
    """A profile hook raising KeyboardInterrupt at the nth C return while ``lock`` is held."""
    seen = 0

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal seen
        if event == "c_return" and lock.owned():
            seen += 1
            if seen == nth:
                sys.setprofile(None)
                raise KeyboardInterrupt

    return hook


def _spawn(rt: asyncop.Runtime) -> None:
    rt.spawn(_noop)


def _spawn_and_wait(rt: asyncop.Runtime) -> None:
    rt.spawn(_noop).wait()


def _sync_scope(rt: asyncop.Runtime) -> None:
    with rt.scope() as root:
        root.spawn(_noop)


def _set_event_a_task_waits_on(rt: asyncop.Runtime) -> None:
    event = asyncop.Event()
    parked = threading.Event()

    async def waiter() -> None:
        parked.set()
        await event.wait_async()

    op = rt.spawn(waiter)
    assert parked.wait(10)
    # Fired from this thread: the task's waker completes under the lock.
    event.set()
    op.wait()


ENTRY_POINTS = {
    "spawn": _spawn,
    "spawn_and_wait": _spawn_and_wait,
    "sync_scope": _sync_scope,
    "event_set": _set_event_a_task_waits_on,
}


@pytest.mark.parametrize("nth", [1, 2, 3, 5])
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_an_interrupt_inside_the_locked_section_leaves_the_lock_free(entry: str, nth: int) -> None:
    assert threading.current_thread() is threading.main_thread()
    rt = asyncop.Runtime(2, name=f"ki-{entry}-{nth}")
    try:
        lock = rt._lock
        hook = _interrupt_at(lock, nth)
        if entry == "event_set":
            # Only the set() is under test: arm the hook once the task waits.
            original = asyncop.Event.set

            def set_with_hook(self: asyncop.Event) -> None:
                sys.setprofile(hook)
                original(self)

            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(asyncop.Event, "set", set_with_hook)
                _run_interrupted(ENTRY_POINTS[entry], rt)
        else:
            sys.setprofile(hook)
            _run_interrupted(ENTRY_POINTS[entry], rt)
        assert not lock.owned(), "a KeyboardInterrupt left the runtime lock held"
        # Another thread can still take the lock and get work done.
        done: list[object] = []
        helper = threading.Thread(target=lambda: done.append(rt.spawn(_noop).wait(10)))
        helper.start()
        helper.join(15)
        assert done, "a spawn-and-wait from another thread did not finish"
    finally:
        sys.setprofile(None)
        assert rt.shutdown(timeout=10), "the runtime did not shut down"


def _run_interrupted(fn: Callable[[asyncop.Runtime], None], rt: asyncop.Runtime) -> None:
    try:
        fn(rt)
    except (KeyboardInterrupt, BaseExceptionGroup):
        pass
    finally:
        sys.setprofile(None)
