"""An auto-reset wake event, the cross-thread wake-up of the runtime.

The event is either *signalled* or not. ``set()`` signals it from any thread;
``wait()`` blocks until it is signalled and resets it on the way out, so one
``set()`` releases exactly one ``wait()``. A ``set()`` that arrives while
nobody waits is remembered: the next ``wait()`` returns at once. Two
``set()`` calls with no ``wait()`` between them count as one.

Design: the signal is a plain lock used as a binary semaphore. It is held
while the event is not signalled; ``set()`` releases it and ``wait()``
acquires it. ``_guard`` makes the check-and-release in ``set()`` atomic, so a
second ``set()`` never releases an unlocked lock. The blocking part is a
single ``Lock.acquire`` with a timeout, which the OS implements as a futex
or condition wait: a parked thread uses no CPU.
"""

from __future__ import annotations

import threading

__all__ = ["WakeEvent", "acquire_for"]


class WakeEvent:
    """An auto-reset event: each ``set()`` releases one ``wait()``."""

    __slots__ = ("_guard", "_signal", "_signalled")

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._signal = threading.Lock()
        self._signal.acquire()
        # Invariant: _signalled is True exactly when _signal is unlocked.
        self._signalled = False

    def set(self) -> None:
        """Signal the event, waking one waiter now or the next one to wait."""
        # acquire()/release() rather than a with-statement, which costs twice
        # as much: every push to a parked worker comes through here.
        guard = self._guard
        guard.acquire()
        try:
            if not self._signalled:
                self._signalled = True
                self._signal.release()
        finally:
            guard.release()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the event is signalled, then reset it.

        Args:
            timeout: seconds to wait at most; ``None`` waits forever and a
                value of 0 or less only polls.

        Returns:
            True if the event was signalled, False if the timeout passed.
        """
        if timeout is None:
            got = self._signal.acquire()
        elif timeout <= 0:
            got = self._signal.acquire(blocking=False)
        else:
            got = self._signal.acquire(timeout=timeout)
        if got:
            guard = self._guard
            guard.acquire()
            self._signalled = False
            guard.release()
        return got

    def is_set(self) -> bool:
        """Tell whether the event is signalled, without resetting it."""
        return self._signalled

    def __repr__(self) -> str:
        state = "signalled" if self._signalled else "clear"
        return f"<WakeEvent {state}>"


def acquire_for(lock: threading.Lock, timeout: float | None) -> bool:
    """Acquire ``lock`` waiting ``timeout`` seconds at most (None: forever).

    The one-shot parking used for thread waiters: the waiter holds a fresh
    lock, publishes its ``release`` as the wake-up, and blocks here.
    """
    if timeout is None:
        return lock.acquire()
    return lock.acquire(timeout=max(0.0, timeout))
