"""An auto-reset wake event, the cross-thread wake-up of the runtime.

The event is either *signalled* or not. ``set()`` signals it from any thread;
``wait()`` blocks until it is signalled and resets it on the way out, so one
``set()`` releases exactly one ``wait()``. A ``set()`` that arrives while
nobody waits is remembered: the next ``wait()`` returns at once. Two
``set()`` calls with no ``wait()`` between them count as one.

Design: the event is one plain lock used as a binary semaphore, held while
the event is not signalled. ``set()`` releases it and ``wait()`` acquires it;
releasing a lock that is already free raises, and ``set()`` takes that to
mean the event was signalled already. Each step is one atomic operation on
the lock, so no second lock guards a flag, and an exception (a Ctrl-C on the
main thread) can never leave the event half-set. The blocking part is a
single ``Lock.acquire`` with a timeout, which the OS implements as a futex
or condition wait: a parked thread uses no CPU.
"""

from __future__ import annotations

import threading

from ._timeout import acquire_for

__all__ = ["WakeEvent"]


class WakeEvent:
    """An auto-reset event: each ``set()`` releases one ``wait()``."""

    __slots__ = ("_signal",)

    def __init__(self) -> None:
        # Free exactly when the event is signalled.
        self._signal = threading.Lock()
        self._signal.acquire()

    def set(self) -> None:
        """Signal the event, waking one waiter now or the next one to wait."""
        try:
            self._signal.release()
        except RuntimeError:
            pass  # already signalled: two set() calls in a row count as one

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the event is signalled, then reset it.

        Args:
            timeout: seconds to wait at most; ``None`` waits forever and a
                value of 0 or less only polls. Any length works: long waits
                are made of slices (see ``_timeout.py``).

        Returns:
            True if the event was signalled, False if the timeout passed.
        """
        return acquire_for(self._signal, timeout)

    def is_set(self) -> bool:
        """Tell whether the event is signalled, without resetting it."""
        return not self._signal.locked()

    def __repr__(self) -> str:
        state = "signalled" if self.is_set() else "clear"
        return f"<WakeEvent {state}>"
