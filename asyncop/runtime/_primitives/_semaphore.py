"""Semaphore: a counting semaphore, FIFO-fair, for coroutines and threads.

It follows the waiter protocol and the hand-over rules of ``_sync.py``: a
released permit goes straight to the first live waiter, so a newcomer never
barges past a queued one, and a waiter cancelled meanwhile refuses it
(the permit goes on to the next waiter, or back to the pool). A thread's
``acquire`` is a cancellation point inside an operation, and a
KeyboardInterrupt while it waits takes no permit. ``CapacityLimiter``
(``_limiter.py``) keeps its free tokens in one.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, final

from ...operations import WouldBlock, blocking_in_task_error, thread_state
from ...platform import check_timeout
from .._core._waker import Subscription, WaitEvent
from ._names import check_name, label, made_at, short_label
from ._statistics import SemaphoreStatistics
from ._waiters import ThreadWaiter, live_waiters, remove_waiter

__all__ = ["Semaphore"]


@final
class _SemaphoreAcquire(WaitEvent):
    __slots__ = ("sem",)

    def __init__(self, sem: Semaphore) -> None:
        self.sem = sem

    def _arm(self, sub: Subscription) -> None:
        sem = self.sem
        with sem._mutex:
            if sem._value > 0 and not sem._waiters:
                if sub.fire(None):
                    sem._value -= 1
            else:
                sem._waiters.append(sub)

    def _disarm(self, sub: Subscription) -> None:
        sem = self.sem
        with sem._mutex:
            remove_waiter(sem._waiters, sub)

    def _describe(self) -> str:
        return self.sem._wait_text()


class Semaphore:
    """A counting semaphore, FIFO-fair, for coroutines and threads.

    Args:
        value: the initial number of permits; 0 is valid.
        max_value: if given, a ``release()`` that would raise the permits
            above it raises ValueError (a bounded semaphore).
        name: shown in ``dump()``, deadlock reports and ``repr``; without
            one, those show where the semaphore was made.
    """

    # The CapacityLimiter whose free tokens it holds, for the texts.
    _purpose: Any = None

    def __init__(
        self, value: int = 1, max_value: int | None = None, *, name: str | None = None
    ) -> None:
        self.name = check_name(name, "Semaphore")
        self._site = made_at(1) if name is None else (None, 0)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"Semaphore() needs an int number of permits, got {type(value).__name__}; "
                "pass an int such as Semaphore(3)"
            )
        if value < 0:
            raise ValueError(
                f"Semaphore({value}) needs a non-negative number of permits; pass 0 or more"
            )
        if max_value is not None:
            if isinstance(max_value, bool) or not isinstance(max_value, int):
                raise TypeError(
                    f"Semaphore(max_value=...) needs an int or None, got "
                    f"{type(max_value).__name__}; pass an int such as max_value=3"
                )
            if max_value < value:
                raise ValueError(
                    f"Semaphore({value}, max_value={max_value}) starts above its maximum; "
                    "pass a max_value of at least the initial value"
                )
        self._max_value = max_value
        self._mutex = threading.Lock()
        self._value = value
        self._waiters: deque[Any] = deque()

    @property
    def value(self) -> int:
        """The permits available now."""
        return self._value

    @property
    def max_value(self) -> int | None:
        """The most permits a release may bring the semaphore to, or None for no bound."""
        return self._max_value

    def _label(self) -> str:
        return label("semaphore", self.name, self._site)

    def _wait_text(self) -> str:
        """What a waiter for a permit waits on, for ``dump()`` and reports."""
        purpose = self._purpose
        if purpose is not None:
            text: str = purpose._wait_text()
            return text
        return label("semaphore", self.name, self._site, f"value {self._value}")

    def acquire_async(self) -> WaitEvent[None]:
        """Take a permit in a coroutine, waiting for one. A cancellation point."""
        return _SemaphoreAcquire(self)

    def acquire(self, timeout: float | None = None) -> bool:
        """Take a permit in a thread, waiting ``timeout`` seconds at most.

        Called from inside an operation (a plain function running as one,
        or the block of a sync scope), it is a cancellation point: it raises
        ``Cancelled`` within milliseconds when that operation is cancelled
        while the call waits, or at once if it would have to wait, taking no permit. A
        permit handed over just before the cancel is kept (returns True).
        From any other thread it only blocks. A KeyboardInterrupt while
        waiting takes no permit.

        Args:
            timeout: seconds to wait at most; None, ``math.inf`` or a huge
                value wait without limit, and 0 or less only tries.

        Returns:
            True once a permit is taken, False if the timeout passed first.

        Raises:
            Cancelled: the calling operation is cancelled.
            RuntimeError: called from a coroutine (use ``acquire_async``).
            TypeError: ``timeout`` is not a number.
            ValueError: ``timeout`` is NaN.
        """
        state = thread_state()
        if state.task is not None:
            raise blocking_in_task_error(
                f"Semaphore.acquire() on {self._label()}",
                "'await sem.acquire_async()' or 'async with sem'",
            )
        limit = (
            None if timeout is None else check_timeout(timeout, "Semaphore.acquire(timeout=...)")
        )
        op = state.op  # the operation whose cancel ends the wait, if any
        waiter: ThreadWaiter | None = None
        taken = False
        try:
            with self._mutex:
                if self._value > 0 and not self._waiters:
                    self._value -= 1
                    taken = True
                elif limit == 0.0:
                    return False
                else:
                    waiter = ThreadWaiter(self)
                    self._waiters.append(waiter)
            if taken:
                return True
            assert waiter is not None
            return waiter.wait(self._mutex, self._waiters, limit, op)
        except BaseException:
            # A Ctrl-C landing anywhere above: the permit goes back.
            if taken or (waiter is not None and waiter.abandon(self._mutex, self._waiters)):
                self.release()
            raise

    def acquire_nowait(self) -> None:
        """Take a permit if one is free and nobody waits for one, without waiting.

        Usable from a coroutine and from a thread alike. Not a cancellation
        point.

        Raises:
            WouldBlock: no permit is free, or others are queued for one.
        """
        with self._mutex:
            if self._value > 0 and not self._waiters:
                self._value -= 1
                return
        raise WouldBlock(
            f"{self._label()} has no free permit; acquire later, or wait for one with "
            "'await sem.acquire_async()' or acquire()"
        )

    def statistics(self) -> SemaphoreStatistics:
        """A snapshot of the semaphore: how many tasks and threads wait for a permit.

        Not a cancellation point.
        """
        with self._mutex:
            return SemaphoreStatistics(live_waiters(self._waiters))

    def release(self) -> None:
        """Return a permit: to the first live waiter, or to the pool.

        Raises:
            ValueError: the permits would go above ``max_value``.
        """
        with self._mutex:
            while self._waiters:
                if self._waiters.popleft().fire(None):
                    return
            if self._max_value is not None and self._value >= self._max_value:
                raise ValueError(
                    f"release() on {self._label()}, already at its max_value="
                    f"{self._max_value}; release only permits that were acquired"
                )
            self._value += 1

    def __enter__(self) -> Semaphore:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    async def __aenter__(self) -> Semaphore:
        await self.acquire_async()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        bound = "" if self._max_value is None else f" max_value={self._max_value}"
        where = short_label(self.name, self._site)
        return f"<Semaphore value={self._value}{bound} waiters={len(self._waiters)} {where}>"
