"""Lock and Event, for coroutines and threads alike (Semaphore: ``_semaphore.py``).

Every primitive keeps one FIFO queue of waiters, coroutine tasks or
blocked threads, which follow the waiter protocol of ``_waiters.py``. A
release hands its permit *directly* to the first waiter that takes it, so
a newcomer can never barge past a queued waiter (FIFO fairness), and a
waiter that was cancelled in the meantime (its waker already claimed)
refuses the permit, which then goes to the next waiter or back into the
primitive. That is how a cancelled waiter never leaves a lock held and a
cancelled receive never eats an item. ``acquire_nowait()`` takes a permit
only when no waiter is queued, for the same reason.

A thread waiter parks through ``operations._park.park``: inside an operation
(a sync callback, or a sync scope's block) the operation's cancel wakes it
too, and the waiter then settles under the mutex (``ThreadWaiter.wait``):
fired means the value is kept, otherwise it gives up and raises
``Cancelled``. Every thread-side call is written so that a KeyboardInterrupt
landing anywhere in it (on the main thread) removes its waiter or gives back
what it was handed (``ThreadWaiter.abandon``). A holder acquiring its own
``Lock`` again raises at once instead of waiting for itself. A lock's holder
is the coroutine task (its ``TaskState``) or the thread (its
``threading.Thread``) that acquired it.

An acquire about to wait, and only then, first queues its waiter, then asks
``_lock_cycles.py`` whether the wait would close a cycle of holders and
waiters; if so it takes the waiter back and raises ``DeadlockError`` (a
thread's acquire sets ``ThreadState.waits_on`` before that check, which other
threads' checks read). An uncontended acquire does none of it.

Every primitive has a ``name`` (None: unnamed) and a ``_site``, where an
unnamed one was made (``_names.py``), and a ``_wait_text()``: what a waiter
on it waits on, for ``dump()`` and the deadlock report; a blocked thread's
waiter keeps the primitive for that (``ThreadWaiter.what``).

``statistics()`` reads a primitive under its mutex, into one of the frozen
values of ``_statistics.py``; ``_wait_text()`` reads it without (the runtime
lock may be held then), as a snapshot.

Lock order: a primitive's own mutex, then the runtime lock of a waiter
(taken inside ``fire``). The runtime never takes a primitive's mutex while
holding its own lock, so the order cannot invert.
"""

from __future__ import annotations

import threading
from collections import deque
from types import TracebackType
from typing import Any, final

from ...operations import (
    BrokenResourceError,
    WouldBlock,
    blocking_in_task_error,
    thread_state,
)
from ...platform import check_timeout
from .._core._awaitables import task_maker
from .._core._task import TaskState
from .._core._waker import SelfSuspendedEvent, Subscription, WaitEvent
from ._lock_cycles import cycle_error, holder_text
from ._names import check_name, label, made_at, short_label
from ._statistics import EventStatistics, LockStatistics
from ._waiters import ThreadWaiter, live_waiters, remove_waiter

__all__ = ["Event", "Lock", "LockGuard"]


def _owner_key() -> object:
    """Who is acquiring: the coroutine task, or else the calling thread."""
    task = thread_state().task
    return task if task is not None else threading.current_thread()


# -- Lock -----------------------------------------------------------------------


@final
class LockGuard:
    """Proof of holding a ``Lock``: ``release()`` it, or use it as a context manager.

    A guard stands for one acquisition and releases it once: a second
    ``release()`` raises, even when the same task holds the lock again
    through a later acquire (that one has its own guard).
    """

    __slots__ = ("_held", "_lock")

    def __init__(self, lock: Lock) -> None:
        self._lock = lock
        self._held = True

    def release(self) -> None:
        """Release the lock this guard holds.

        Raises:
            RuntimeError: this guard released it already, or the caller does
                not hold the lock.
        """
        if not self._held:
            raise RuntimeError(
                f"this guard of {self._lock._label()} released it already; a later "
                "acquire has its own guard: release that one, or call lock.release()"
            )
        self._lock.release()
        self._held = False

    def __enter__(self) -> LockGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    async def __aenter__(self) -> LockGuard:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()


@final
class _LockAcquire(WaitEvent):
    __slots__ = ("lock",)

    def __init__(self, lock: Lock) -> None:
        self.lock = lock

    def _arm(self, sub: Subscription) -> None:
        self.lock._arm_task(sub)

    def _disarm(self, sub: Subscription) -> None:
        lock = self.lock
        with lock._mutex:
            remove_waiter(lock._waiters, sub)

    def _describe(self) -> str:
        return self.lock._wait_text()


class Lock:
    """A FIFO-fair mutual-exclusion lock for coroutines and threads.

    In a coroutine: ``async with lock:`` or ``guard = await
    lock.lock_async()``. In a thread: ``with lock:`` or
    ``acquire(timeout)``/``release()``. If a coroutine task ends while
    holding the lock, the lock is broken: queued and later acquirers get
    ``BrokenResourceError``.

    An acquire that would close a cycle of holders and waiters (this task
    holds lock a and waits for b, whose holder waits for a) raises
    ``DeadlockError`` at once instead of waiting forever; see
    ``Runtime(deadlock=...)``.

    Args:
        name: shown in ``dump()``, deadlock reports, errors and ``repr``;
            without one, those show where the lock was made.
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = check_name(name, "Lock")
        self._site = made_at(1) if name is None else (None, 0)
        self._mutex = threading.Lock()
        self._owner: object = None
        self._waiters: deque[tuple[Any, object]] = deque()
        self._broken = False
        self._broken_by = ""  # who ended holding it (holder_text), once broken

    def locked(self) -> bool:
        """True while someone holds the lock."""
        return self._owner is not None

    # A wait for it is a link of a lock cycle (_lock_cycles.py).
    _cycle_link = True

    def _label(self, *details: str) -> str:
        return label("lock", self.name, self._site, *details)

    def _wait_text(self) -> str:
        """What an acquire waits on, for ``dump()`` and reports (a snapshot)."""
        owner = self._owner
        if self._broken:
            return self._label("broken")
        return self._label("free" if owner is None else f"held by {holder_text(owner)}")

    def _broken_error(self) -> BrokenResourceError:
        return BrokenResourceError(
            f"{self._label()} is broken: {self._broken_by or 'a task'} ended while holding "
            "it; make a new Lock, and release locks before a task ends"
        )

    def _reentry_error(self) -> RuntimeError:
        return RuntimeError(
            f"{self._label()} is already held by the task or thread acquiring it, "
            "which would wait for itself forever; release it first (a Lock is not "
            "re-entrant)"
        )

    def _refuse_locked(self, me: object) -> None:
        # Under the mutex: the acquires that must not wait at all.
        if self._broken:
            raise self._broken_error()
        if self._owner is me:
            raise self._reentry_error()

    def lock_async(self) -> WaitEvent[LockGuard]:
        """Acquire the lock from a coroutine; ``await`` it for a ``LockGuard``.

        A cancellation point. A guard already handed over when a cancel
        arrives is kept: the task holds the lock and leaves at its next await.

        Raises:
            BrokenResourceError: the lock is broken.
            RuntimeError: the task holds the lock already.
            Cancelled: the task is cancelled while waiting.
            DeadlockError: the wait would close a lock cycle.
        """
        return _LockAcquire(self)

    def _arm_task(self, sub: Subscription) -> None:
        task = sub.waker.task._task
        with self._mutex:
            if self._broken:
                sub.fire(None, self._broken_error())
            elif self._owner is task:
                sub.fire(None, self._reentry_error())
            elif self._owner is None and not self._waiters:
                if sub.fire(LockGuard(self)):
                    self._take(task)
            else:
                self._waiters.append((sub, task))
                # Queued first, then the check: see _lock_cycles.py.
                error = cycle_error(self, task, sub.waker.runtime)
                if error is not None:
                    self._waiters.pop()  # ours, last: the mutex is held throughout
                    sub.fire(None, error)

    def _take(self, owner: object) -> None:
        # Under the mutex. A task remembers the locks it holds (with its
        # operation's rare fields), so that ending while holding one breaks it.
        self._owner = owner
        if isinstance(owner, TaskState):
            op = owner.task
            held = op._held
            if held is None:
                op._held = [self]
            else:
                held.append(self)

    def acquire(self, timeout: float | None = None) -> bool:
        """Acquire the lock from a thread, waiting ``timeout`` seconds at most.

        Called from inside an operation (a plain function running as one,
        or the block of a sync scope), it is a cancellation point: it raises
        ``Cancelled`` within milliseconds when that operation is cancelled
        while the call waits, or at once if it would have to wait, never leaving the lock
        held. A lock handed over just before the cancel is kept (returns
        True). From any other thread it only blocks. A KeyboardInterrupt
        while waiting leaves the lock as if the call never happened.

        Args:
            timeout: seconds to wait at most; None, ``math.inf`` or a huge
                value wait without limit, and 0 or less only tries.

        Returns:
            True once acquired; False if the timeout passed first.

        Raises:
            BrokenResourceError: the lock is broken.
            DeadlockError: the wait would close a lock cycle (the lock is
                not taken, and no waiter is left queued).
            RuntimeError: the calling thread holds the lock already, or the
                call comes from a coroutine (use ``lock_async``).
            Cancelled: the calling operation is cancelled.
            TypeError: ``timeout`` is not a number.
            ValueError: ``timeout`` is NaN.
        """
        state = thread_state()
        if state.task is not None:
            raise blocking_in_task_error(
                f"Lock.acquire() on {self._label()}",
                "'await lock.lock_async()' or 'async with lock'",
            )
        limit = None if timeout is None else check_timeout(timeout, "Lock.acquire(timeout=...)")
        op = state.op  # the operation whose cancel ends the wait, if any
        me = threading.current_thread()
        waiter: ThreadWaiter | None = None
        taken = False
        try:
            with self._mutex:
                self._refuse_locked(me)
                if self._owner is None and not self._waiters:
                    self._owner = me
                    taken = True
                elif limit == 0.0:
                    return False
                else:
                    waiter = ThreadWaiter(self)
                    self._waiters.append((waiter, me))
                    # Set before the check, which other threads' checks read.
                    state.waits_on = waiter
                    error = cycle_error(self, me, None if op is None else op.runtime)
                    if error is not None:
                        raise error  # the handler below takes the waiter back
            if taken:
                return True
            assert waiter is not None
            if not waiter.wait(self._mutex, self._waiters, limit, op):
                return False
            if waiter.error is not None:
                raise waiter.error
            return True
        except BaseException:
            # A Ctrl-C landing anywhere above: undo, so nothing stays held
            # or queued (errors raised on purpose have nothing to undo).
            if state.waits_on is waiter is not None:
                state.waits_on = None
            if taken or (waiter is not None and waiter.abandon(self._mutex, self._waiters)):
                self.release()
            raise

    def release(self) -> None:
        """Release the lock, handing it to the first live waiter.

        Raises:
            RuntimeError: the lock is not held, or is held by someone else.
        """
        with self._mutex:
            owner = self._owner
            if owner is None:
                raise RuntimeError(
                    f"release() on {self._label()}, which nobody holds; "
                    "release only a lock you acquired"
                )
            if owner is not _owner_key():
                raise RuntimeError(
                    f"release() on {self._label()}, which another task or thread holds; "
                    "only the holder may release it"
                )
            self._drop_owner(owner)
            self._hand_over()

    def acquire_nowait(self) -> None:
        """Acquire the lock if nobody holds it or waits for it, without waiting.

        Usable from a coroutine and from a thread alike: the holder is the
        calling task, or else the calling thread. Not a cancellation point.

        Raises:
            WouldBlock: the lock is held, or others are queued for it.
            BrokenResourceError: the lock is broken.
            RuntimeError: the caller holds the lock already.
        """
        me = _owner_key()
        with self._mutex:
            self._refuse_locked(me)
            if self._owner is not None or self._waiters:
                raise WouldBlock(
                    f"{self._label()} is held; acquire it later, or wait for it "
                    "with 'await lock.lock_async()' or acquire()"
                )
            self._take(me)

    def statistics(self) -> LockStatistics:
        """A snapshot of the lock: whether it is held, by whom, and how many wait for it.

        The owner is the holding task's ``AsyncOperation``, or the holding
        ``threading.Thread``. Not a cancellation point.
        """
        with self._mutex:
            owner = self._owner
            holder: Any = owner.task if isinstance(owner, TaskState) else owner
            return LockStatistics(holder is not None, holder, live_waiters(self._waiters))

    def _drop_owner(self, owner: object) -> None:
        held = owner.task._held if isinstance(owner, TaskState) else None
        if held and self in held:
            held.remove(self)
        self._owner = None

    def _queue_notified(self, waiter: Any, owner: object) -> None:
        """Queue a notified ``Condition`` waiter for the lock, behind those queued already.

        The waiter wakes holding the lock (``waiter.fire`` sets its event),
        so that neither the notifier nor a newcomer can take the lock first.
        """
        with self._mutex:
            if self._broken:
                waiter.fire(None, self._broken_error())
            elif self._owner is None and not self._waiters:
                waiter.fire(LockGuard(self))
                self._take(owner)
            else:
                self._waiters.append((waiter, owner))

    def _hand_over(self) -> None:
        # Under the mutex: give the lock to the first waiter that takes it.
        while self._waiters:
            waiter, owner = self._waiters.popleft()
            if waiter.fire(LockGuard(self)):
                self._take(owner)
                return

    def _break(self, owner: object) -> None:
        """The holding task ended: break the lock and fail every waiter."""
        with self._mutex:
            if self._owner is not owner:
                return
            self._owner = None
            self._broken = True
            self._broken_by = holder_text(owner)
            while self._waiters:
                waiter, _ = self._waiters.popleft()
                waiter.fire(None, self._broken_error())

    def __enter__(self) -> Lock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    async def __aenter__(self) -> LockGuard:
        guard: LockGuard = await self.lock_async()
        return guard

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "broken" if self._broken else "locked" if self._owner is not None else "unlocked"
        where = short_label(self.name, self._site)
        return f"<Lock {state} waiters={len(self._waiters)} {where}>"


# -- Event ----------------------------------------------------------------------


@final
class _EventWait(SelfSuspendedEvent):
    # Compiled, its own suspension: a task parked on an event keeps this
    # one object for its wait.
    __slots__ = ("event",)

    def __init__(self, event: Event) -> None:
        self.event = event

    def _arm(self, sub: Subscription) -> None:
        event = self.event
        with event._mutex:
            if event._set:
                sub.fire(None)
            else:
                event._waiters.append(sub)

    def _disarm(self, sub: Subscription) -> None:
        event = self.event
        with event._mutex:
            remove_waiter(event._waiters, sub)

    def _describe(self) -> str:
        return self.event._wait_text()


class Event:
    """A flag that, once set, releases every waiter, coroutine or thread.

    Args:
        name: shown in ``dump()``, deadlock reports and ``repr``; without
            one, those show where the event was made.
    """

    # What the event stands for inside a composite (the Condition whose
    # notify() sets it; the start() whose caller waits, a TreeWait), with
    # a _describe() for the texts; None for a user's own event.
    _purpose: Any = None

    def __init__(self, *, name: str | None = None) -> None:
        self.name = check_name(name, "Event")
        self._site = made_at(1) if name is None else (None, 0)
        self._mutex = threading.Lock()
        self._set = False
        self._waiters: deque[Any] = deque()

    def is_set(self) -> bool:
        """True once ``set()`` was called."""
        return self._set

    def set(self) -> None:
        """Set the flag and wake every waiter. Idempotent."""
        with self._mutex:
            if self._set:
                return
            self._set = True
            waiters = self._waiters
            self._waiters = deque()
            for waiter in waiters:
                waiter.fire(None)

    def _wait_text(self) -> str:
        """What a waiter on this event waits on, for ``dump()`` and reports."""
        purpose = self._purpose
        if purpose is not None:
            text: str = purpose._describe()
            return text
        return label("event", self.name, self._site, *(("set",) if self._set else ()))

    def statistics(self) -> EventStatistics:
        """A snapshot of the event: how many tasks and threads wait for it.

        Not a cancellation point.
        """
        with self._mutex:
            return EventStatistics(live_waiters(self._waiters))

    @task_maker
    def wait_async(self) -> WaitEvent[None]:
        """Wait in a coroutine until the flag is set. A cancellation point."""
        return _EventWait(self)

    def wait(self, timeout: float | None = None) -> bool:
        """Block a thread until the flag is set.

        Called from inside an operation (a plain function running as one,
        or the block of a sync scope), it is a cancellation point: it raises
        ``Cancelled`` within milliseconds when that operation is cancelled
        while the call waits, or at once if it would have to wait (unless the flag was
        set first). From any other thread it only blocks.

        Args:
            timeout: seconds to wait at most; None, ``math.inf`` or a huge
                value wait without limit, and 0 or less only looks.

        Returns:
            True if the flag is set, False if the timeout passed first.

        Raises:
            Cancelled: the calling operation is cancelled.
            RuntimeError: called from a coroutine (use ``wait_async``).
            TypeError: ``timeout`` is not a number.
            ValueError: ``timeout`` is NaN.
        """
        state = thread_state()
        if state.task is not None:
            raise blocking_in_task_error(
                f"Event.wait() on {label('event', self.name, self._site)}",
                "'await event.wait_async()'",
            )
        limit = None if timeout is None else check_timeout(timeout, "Event.wait(timeout=...)")
        op = state.op  # the operation whose cancel ends the wait, if any
        if self._set:
            return True
        if limit == 0.0:
            return False
        waiter: ThreadWaiter | None = None
        try:
            with self._mutex:
                if self._set:
                    return True
                waiter = ThreadWaiter(self)
                self._waiters.append(waiter)
            return waiter.wait(self._mutex, self._waiters, limit, op) or self._set
        except BaseException:
            if waiter is not None:
                waiter.abandon(self._mutex, self._waiters)
            raise

    def __repr__(self) -> str:
        where = short_label(self.name, self._site)
        return f"<Event {'set' if self._set else 'clear'} waiters={len(self._waiters)} {where}>"
