"""Condition: wait until notified, holding a Lock before and after, in tasks and threads.

::

    cond = asyncop.Condition()
    async with cond:                      # hold the lock
        while not ready():
            await cond.wait_async()       # release, wait for notify(), re-acquire

It is composed of asyncop's own primitives: the ``Lock`` it guards, and
one ``Event`` per waiter (a :class:`_Waiter`) in a FIFO queue. ``notify(n)``
moves the ``n`` oldest waiters from that queue to the end of the lock's
queue, and the release that hands one the lock sets its event: a notified
waiter wakes holding the lock, so neither the notifier nor a newcomer can
take the lock before it (FIFO, as trio's Condition), and the lock's
``statistics()`` counts it among the lock's waiters. The waits keep those
primitives' rules: a task's wait is a cancellation point, a thread's wait
honours its timeout.

A waiter always holds the lock again when it leaves ``wait``, however it
leaves (notified, timed out, cancelled, interrupted): not yet notified, a
task re-acquires it in a shielded scope when it is cancelled, and a thread
re-acquires it without being a cancellation point, retrying after a
KeyboardInterrupt and raising it once the lock is held; already notified,
it waits the same way for the lock to be handed to it. A waiter that was
notified but leaves with an error passes its notification on to the next
waiter, so no notify is lost.

Lock order: the condition's mutex, then the lock's (``notify`` queues
waiters on the lock under both), then a waiter event's.
"""

from __future__ import annotations

import threading
from collections import deque
from types import TracebackType
from typing import Any, final

from ...operations import Cancelled, blocking_in_task_error, thread_state
from ...platform import check_timeout
from .._core._scope import scope
from .._core._waker import WaitEvent
from ._names import check_name, label, made_at, short_label
from ._statistics import ConditionStatistics
from ._sync import Event, Lock, LockGuard, _owner_key
from ._waiters import waiter_is_live

__all__ = ["Condition"]


def _refuse_in_task(call: str, cond: Condition) -> None:
    # Refused here, not by the Lock: the message names what the user wrote.
    if thread_state().task is not None:
        raise blocking_in_task_error(
            f"{call} on {cond._label()}", "'async with cond:' or 'await cond.acquire_async()'"
        )


@final
class _Waiter:
    """One wait on a ``Condition``: queued for ``notify()``, then for the lock.

    ``event`` is set when the lock is handed to the waiter (or found
    broken: ``error``). ``owner`` is who will hold the lock, the task or
    the thread, as ``Lock`` records it; ``notified`` turns True, under the
    condition's mutex, when ``notify()`` moves the waiter to the lock.
    """

    __slots__ = ("cond", "error", "event", "notified", "owner")

    def __init__(self, cond: Condition, owner: object) -> None:
        self.cond = cond
        self.owner = owner
        self.notified = False
        self.error: BaseException | None = None
        self.event = Event(name="")  # (named: no frame lookup; shown as this wait)
        self.event._purpose = self

    def fire(self, value: Any = None, error: BaseException | None = None) -> bool:
        """The lock is this waiter's now, or broken: wake it. Under the lock's mutex.

        Always taken: a waiter that gave up waiting still waits for the
        lock, so that it holds it when it leaves.
        """
        self.error = error
        self.event.set()
        return True

    def waiting(self) -> bool:
        """Still waiting for ``notify()``: not given up (cancelled, timed out) meanwhile.

        A snapshot, read under the condition's mutex: a task or thread
        about to wait for the event counts as waiting.
        """
        event = self.event
        with event._mutex:
            queued = event._waiters
            return not queued or any(waiter_is_live(entry) for entry in queued)

    def _describe(self) -> str:
        """What the waiter waits on, for ``dump()`` and reports (``Event._purpose``)."""
        cond = self.cond
        if self.notified:
            return f"{cond._lock._wait_text()}, notified by {cond._label()}"
        return f"notify() of {cond._label()}"


@final
class Condition:
    """A condition variable over an asyncop ``Lock``, for coroutines and threads.

    Args:
        lock: the ``Lock`` to guard; a new one when None. Several conditions
            may share one lock.
        name: shown in ``dump()``, deadlock reports and ``repr`` (a new
            lock is named after it); without one, those show where the
            condition was made.

    Raises:
        TypeError: ``lock`` is not an asyncop ``Lock``.
    """

    __slots__ = ("_lock", "_mutex", "_site", "_waiters", "name")

    def __init__(self, lock: Lock | None = None, *, name: str | None = None) -> None:
        self.name = check_name(name, "Condition")
        self._site = made_at(1) if name is None else (None, 0)
        if lock is None:
            lock = Lock(None if name is None else f"{name}.lock")
        elif not isinstance(lock, Lock):
            raise TypeError(
                f"Condition() needs an asyncop.Lock, got {type(lock).__name__}; "
                "pass asyncop.Lock() or nothing"
            )
        self._lock = lock
        self._mutex = threading.Lock()
        # The waiters not yet notified, oldest first; notify() moves them
        # to the lock's queue.
        self._waiters: deque[_Waiter] = deque()

    @property
    def lock(self) -> Lock:
        """The ``Lock`` this condition guards."""
        return self._lock

    def locked(self) -> bool:
        """True while someone holds the lock."""
        return self._lock.locked()

    def statistics(self) -> ConditionStatistics:
        """A snapshot: how many tasks and threads wait to be notified, and the lock's own.

        Not a cancellation point.
        """
        with self._mutex:
            waiting = sum(1 for waiter in self._waiters if waiter.waiting())
        return ConditionStatistics(waiting, self._lock.statistics())

    # -- the lock ----------------------------------------------------------------

    def acquire_async(self) -> WaitEvent[LockGuard]:
        """Acquire the lock in a coroutine (``Lock.lock_async``): a cancellation point."""
        return self._lock.lock_async()

    def acquire(self, timeout: float | None = None) -> bool:
        """Acquire the lock in a thread (``Lock.acquire``); False on timeout.

        Raises:
            RuntimeError: the call is made inside a coroutine (use
                ``acquire_async`` or ``async with``).
        """
        _refuse_in_task("Condition.acquire()", self)
        return self._lock.acquire(timeout)

    def release(self) -> None:
        """Release the lock (``Lock.release``)."""
        self._lock.release()

    def __enter__(self) -> Condition:
        _refuse_in_task("'with cond:'", self)
        self._lock.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()

    async def __aenter__(self) -> Condition:
        guard: LockGuard = await self._lock.lock_async()
        del guard
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()

    # -- waiting -----------------------------------------------------------------

    def _check_held(self, what: str) -> None:
        owner = self._lock._owner
        if owner is None or owner is not _owner_key():
            raise RuntimeError(
                f"{what} on {self._label()} without holding its lock; use 'async with cond:' "
                "or 'with cond:' to hold it first"
            )

    def _label(self) -> str:
        return label("condition", self.name, self._site)

    def _enqueue(self) -> _Waiter:
        waiter = _Waiter(self, _owner_key())
        with self._mutex:
            self._waiters.append(waiter)
        return waiter

    def _withdraw(self, waiter: _Waiter) -> bool:
        """Leave the queue; True if ``waiter`` had been notified already."""
        with self._mutex:
            if waiter.notified:
                return True
            self._waiters.remove(waiter)
            return False

    async def _reacquire_async(self) -> None:
        try:
            await self._lock.lock_async()
        except Cancelled:
            # A cancelled waiter must still hold the lock when it leaves:
            # take it where the cancel cannot reach, then let it go on.
            async with scope(shield=True, name="Condition.wait_async() re-acquiring its lock"):
                await self._lock.lock_async()
            raise

    async def _handed_async(self, waiter: _Waiter) -> None:
        # Notified, then cancelled: the lock comes in its turn; wait for it
        # where the cancel cannot reach.
        if not waiter.event.is_set():
            async with scope(shield=True, name="Condition.wait_async() re-acquiring its lock"):
                await waiter.event.wait_async()

    async def wait_async(self) -> None:
        """Release the lock, wait for ``notify``, and hold the lock again. A cancellation point.

        Whatever happens, the task holds the lock when this returns or
        raises (unless the lock was broken meanwhile). A notified waiter
        gets the lock before anyone who asks for it after the notify.

        Raises:
            RuntimeError: the task does not hold the lock.
            BrokenResourceError: the lock was broken while the task waited.
            Cancelled: the task was cancelled while waiting (it holds the
                lock again; a notification it had received goes to the next
                waiter).
        """
        self._check_held("wait_async()")
        waiter = self._enqueue()
        self._lock.release()
        try:
            await waiter.event.wait_async()
        except BaseException:
            if self._withdraw(waiter):
                # Notified, but this task leaves without acting on it, so
                # another waiter must get it or it is lost.
                await self._handed_async(waiter)
                self._notify(1)
            else:
                await self._reacquire_async()
            raise
        if waiter.error is not None:
            raise waiter.error

    def _blocking_uninterrupted(self, call: Any) -> None:
        # Not a cancellation point: the caller must hold the lock when it
        # leaves, so the thread waits as a plain thread would.
        state = thread_state()
        saved = state.op
        state.op = None
        interrupt: KeyboardInterrupt | None = None
        try:
            while True:
                try:
                    call()
                    break
                except KeyboardInterrupt as exc:
                    interrupt = exc
        finally:
            state.op = saved
        if interrupt is not None:
            raise interrupt

    def _reacquire_blocking(self) -> None:
        self._blocking_uninterrupted(self._lock.acquire)

    def _handed_blocking(self, waiter: _Waiter) -> None:
        self._blocking_uninterrupted(waiter.event.wait)

    def wait(self, timeout: float | None = None) -> bool:
        """Release the lock, wait in a thread for ``notify``, and hold the lock again.

        Whatever happens, the thread holds the lock when this returns or
        raises (unless the lock was broken meanwhile). ``timeout`` is in
        seconds; None or ``inf`` mean no limit.

        Returns:
            True if notified, False if the timeout passed first.

        Raises:
            RuntimeError: the thread does not hold the lock, or the call is
                made inside a coroutine (use ``wait_async``).
            BrokenResourceError: the lock was broken while the thread waited.
            TypeError, ValueError: ``timeout`` is not a number of seconds.
        """
        seconds = check_timeout(timeout, "Condition.wait(timeout=...)")
        if thread_state().task is not None:
            raise blocking_in_task_error(
                f"Condition.wait() on {self._label()}", "'await cond.wait_async()'"
            )
        self._check_held("wait()")
        waiter = self._enqueue()
        self._lock.release()
        try:
            notified = waiter.event.wait(seconds)
        except BaseException:
            if self._withdraw(waiter):
                self._handed_blocking(waiter)
                self._notify(1)
            else:
                self._reacquire_blocking()
            raise
        # A notify that landed as the timeout passed still counts.
        if not notified and not self._withdraw(waiter):
            self._reacquire_blocking()
            return False
        self._handed_blocking(waiter)
        if waiter.error is not None:
            raise waiter.error
        return True

    # -- notifying ---------------------------------------------------------------

    def _notify(self, n: int | None) -> None:
        """Move the ``n`` oldest waiters (None: every one) to the lock's queue, in order."""
        lock = self._lock
        with self._mutex:
            waiters = self._waiters
            count = len(waiters) if n is None else min(n, len(waiters))
            for _ in range(count):
                waiter = waiters.popleft()
                waiter.notified = True
                lock._queue_notified(waiter, waiter.owner)

    def notify(self, n: int = 1) -> None:
        """Wake the ``n`` oldest waiters (fewer if fewer wait). Not a cancellation point.

        ``n`` is an int, as for ``threading.Condition.notify``: 0 wakes
        nobody, and ``notify_all()`` wakes every waiter. It is checked before
        anything else, so a bad one fails at the call rather than later.

        Raises:
            TypeError: ``n`` is not an int (a float, a str, None or a bool).
            ValueError: ``n`` is negative (``threading.Condition`` refuses
                it too).
            RuntimeError: the caller does not hold the lock.
        """
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(
                f"Condition.notify(n) needs an int number of waiters, got {type(n).__name__}; "
                "pass an int such as notify(2), or call notify_all()"
            )
        if n < 0:
            raise ValueError(
                f"Condition.notify({n}) needs a number of waiters of 0 or more; pass 0 or more, "
                "or call notify_all() to wake every waiter"
            )
        self._check_held("notify()")
        self._notify(n)

    def notify_all(self) -> None:
        """Wake every waiter. Not a cancellation point.

        Raises:
            RuntimeError: the caller does not hold the lock.
        """
        self._check_held("notify_all()")
        self._notify(None)

    def __repr__(self) -> str:
        where = short_label(self.name, self._site)
        return f"<Condition over {self._lock!r} waiters={len(self._waiters)} {where}>"
