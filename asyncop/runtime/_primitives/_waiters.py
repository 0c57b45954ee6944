"""The waiter protocol that the primitives and channels share, and the thread waiter.

Every primitive keeps one FIFO queue of waiters, which may be coroutine
tasks (a waker subscription) or blocked threads (a :class:`ThreadWaiter`).
Both offer ``fire(value, error) -> bool``: True if the waiter took what was
offered, False if it had given up (a cancelled task's waker already
claimed, a thread that timed out), and then the offer goes to the next
waiter or back into the primitive. ``_sync.py`` says what the primitives
build on it; ``_channel.py`` does the same for items.

A queue entry is the waiter itself, or a tuple whose first element is the
waiter (a lock keeps the acquirer beside it, a channel the item):
:func:`remove_waiter` finds either.

A cancelled task's waiter stays queued until the task runs and takes it
out, but it has given up at once: ``fire`` refuses it, and
:func:`live_waiters`, which ``statistics()`` counts with, leaves it out.
"""

from __future__ import annotations

import _thread
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, final

from ...operations import cancelled_error, park
from .._core._waker import WakerStatus

if TYPE_CHECKING:
    from ...operations import AsyncOperation

__all__ = ["ThreadWaiter", "live_waiters", "remove_waiter", "waiter_is_live"]


@final
class ThreadWaiter:
    """A thread blocked on a primitive: a one-shot lock and a result slot.

    States, written only under the primitive's mutex: *waiting* (``done``
    False), then either *fired* (``done`` and ``fired``: the result is the
    waiter's, whatever happens to the thread next) or *abandoned* (``done``
    only: it timed out, was cancelled or interrupted, and ``fire`` refuses).

    ``what`` is the primitive it waits on (with ``receiving`` for a
    channel: which side), for ``dump()``, the deadlock report and the
    lock-cycle check, which read it through the thread's
    ``ThreadState.waits_on``.
    """

    __slots__ = ("_park", "done", "error", "fired", "receiving", "value", "what")

    def __init__(self, what: Any = None, *, receiving: bool | None = None) -> None:
        self.what = what
        self.receiving = receiving
        self._park = _thread.allocate_lock()
        self._park.acquire()
        self.done = False
        self.fired = False
        self.value: Any = None
        self.error: BaseException | None = None

    def fire(self, value: Any = None, error: BaseException | None = None) -> bool:
        """Hand the waiter a result; False if it already gave up. Under the mutex."""
        if self.done:
            return False
        self.done = True
        self.fired = True
        self.value = value
        self.error = error
        # The release comes last: on the main thread a Ctrl-C can land as a
        # call returns, and the waiter must be complete by then. It may be
        # free already: a cancel of the waiting operation releases it too.
        try:
            self._park.release()
        except RuntimeError:
            pass
        return True

    def wait(
        self,
        mutex: threading.Lock,
        queue: deque[Any],
        timeout: float | None,
        op: AsyncOperation | None,
    ) -> bool:
        """Wait to be fired; on timeout or cancel, give up under ``mutex``.

        ``op`` is the operation the thread runs (None: none), whose cancel
        ends the wait. A waiter fired before it could give up keeps what it
        was given (the value-kept rule).

        Returns:
            True if fired; False if the timeout passed.

        Raises:
            Cancelled: ``op`` was cancelled and nothing was handed over.
        """
        park(self._park, timeout, op, self)
        with mutex:
            if self.done:
                return True
            self.done = True
            remove_waiter(queue, self)
        if op is not None and op._cancelled:
            raise cancelled_error(op)
        return False

    def _describe(self) -> str:
        what = self.what
        if what is None:
            return "a primitive"
        if self.receiving is None:
            text: str = what._wait_text()
        else:
            text = what._wait_text(receiving=self.receiving)
        return text

    def abandon(self, mutex: threading.Lock, queue: deque[Any]) -> bool:
        """Give up after an interrupt: leave the queue, or report a hand-over.

        Returns:
            True if a value was handed over (no error) that the caller must
            now give back, since it will not return it.
        """
        with mutex:
            if not self.done:
                self.done = True
                remove_waiter(queue, self)
                return False
        return self.fired and self.error is None


def remove_waiter(queue: deque[Any], waiter: object) -> None:
    """Take ``waiter`` (or the tuple it heads) out of ``queue``, if it is there."""
    for index, entry in enumerate(queue):
        if entry is waiter or (type(entry) is tuple and entry[0] is waiter):
            del queue[index]
            return


def waiter_is_live(entry: object) -> bool:
    """Whether a queue entry's waiter would still take what is offered (a snapshot).

    A thread's waiter until it timed out, was cancelled or interrupted; a
    task's until its wait was won by something else (a cancel, a timeout,
    another event of a ``select``); any other waiter (a ``Condition``
    waiter queued on its lock) always.
    """
    waiter: Any = entry[0] if type(entry) is tuple else entry
    if type(waiter) is ThreadWaiter:
        return not waiter.done
    waker = getattr(waiter, "waker", None)
    if waker is None:
        return True
    status = waker.status
    return bool(waiter.generation == waker.generation) and (
        status is WakerStatus.NO_STATUS or status is WakerStatus.WAITING
    )


def live_waiters(queue: deque[Any]) -> int:
    """How many entries of ``queue`` are live waiters (see :func:`waiter_is_live`)."""
    return sum(1 for entry in queue if waiter_is_live(entry))
