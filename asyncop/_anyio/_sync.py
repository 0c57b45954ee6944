"""anyio's synchronization primitives on asyncop's: Event, Lock, Semaphore, CapacityLimiter.

Each class here is the anyio class (a subclass of anyio's, so that
``isinstance`` holds) around one asyncop primitive, which does the work: its
FIFO hand-over, its cancellation rules (a cancelled acquire never leaves
the lock held or a token lost: the permit goes to the next waiter), and its
``statistics()``, read here instead of anyio's own bookkeeping. anyio's
``Condition`` and memory object streams are written over these, as on
every backend.

What anyio asks on top of asyncop's primitives:

- **A checkpoint on every acquire**, as trio's: an acquire that finds the
  permit free takes it at once, then yields to the other tasks without
  being cancellable (if the yield failed, the permit would be given back).
  With ``fast_acquire=True`` it does not yield: an asyncop wait that is
  ready at once does not suspend, yet it still raises ``Cancelled`` in a
  cancelled task.
- **anyio's exceptions**: ``acquire_nowait`` raises ``anyio.WouldBlock``,
  and the messages of the misuses anyio's users match on keep anyio's words.
- **TaskInfo owners**: ``LockStatistics.owner`` is the holding task's
  ``TaskInfo`` (anyio's ``Condition`` compares it with
  ``get_current_task()``); a lock held by a thread shows no owner.

One rule stays asyncop's: a task that ends holding a ``Lock`` breaks it,
and later acquirers get ``BrokenResourceError`` (on trio the lock would
stay held by nobody who can release it).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Awaitable, Callable
from functools import partial
from types import TracebackType
from typing import Any

from anyio import (
    CapacityLimiterStatistics,
    EventStatistics,
    LockStatistics,
    SemaphoreStatistics,
)
from anyio import WouldBlock as AnyioWouldBlock
from anyio._core._synchronization import CapacityLimiter as BaseCapacityLimiter
from anyio._core._synchronization import CapacityLimiterAdapter
from anyio._core._synchronization import Event as BaseEvent
from anyio._core._synchronization import Lock as BaseLock
from anyio._core._synchronization import Semaphore as BaseSemaphore

from .. import lowlevel
from ..operations import AsyncOperation, WouldBlock
from ..runtime import CapacityLimiter as _CapacityLimiter
from ..runtime import Event as _Event
from ..runtime import Lock as _Lock
from ..runtime import Runtime, current_default_limiter, current_runtime, sleep
from ..runtime import Semaphore as _Semaphore
from ._tasks import CancelScope, task_info

__all__ = [
    "CapacityLimiter",
    "Event",
    "Lock",
    "Semaphore",
    "SyncMethods",
    "asyncop_limiter",
    "default_thread_limiter",
]


async def _yield_shielded() -> None:
    """Let the other ready tasks run, without being a cancellation point."""
    with CancelScope(shield=True):
        await sleep(0)


async def _acquire(
    take_now: Callable[[], None],
    wait: Callable[[], Awaitable[Any]],
    give_back: Callable[[], None],
) -> None:
    """Acquire as trio does: a cancellation point, and a yield even when it need not wait.

    ``take_now()`` takes what is free or raises asyncop's ``WouldBlock``;
    ``wait()`` waits for it in FIFO order; ``give_back()`` undoes
    ``take_now()`` should the yield that follows it fail.
    """
    if lowlevel.cancel_pending():
        await sleep(0)  # raises Cancelled
    try:
        take_now()
    except WouldBlock:
        await wait()
        return
    try:
        await _yield_shielded()
    except BaseException:
        give_back()
        raise


class Event(BaseEvent):
    """anyio's ``Event`` on an ``asyncop.Event``."""

    __slots__ = ("_event",)

    def __new__(cls) -> Event:
        return object.__new__(cls)

    def __init__(self) -> None:
        self._event = _Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait_async()

    def statistics(self) -> EventStatistics:
        return EventStatistics(self._event.statistics().tasks_waiting)


def _already_held(lock: _Lock) -> RuntimeError:
    return RuntimeError(
        f"Attempted to acquire an already held Lock ({lock._label()}); release it first: "
        "a Lock is not re-entrant"
    )


class Lock(BaseLock):
    """anyio's ``Lock`` on an ``asyncop.Lock``; see the module docstring."""

    __slots__ = ("_fast_acquire", "_lock")

    def __new__(cls, *, fast_acquire: bool = False) -> Lock:
        return object.__new__(cls)

    def __init__(self, *, fast_acquire: bool = False) -> None:
        self._fast_acquire = fast_acquire
        self._lock = _Lock()

    async def acquire(self) -> None:
        lock = self._lock
        try:
            if self._fast_acquire:
                await lock.lock_async()
            else:
                await _acquire(lock.acquire_nowait, lock.lock_async, lock.release)
        except RuntimeError:
            if lock.statistics().owner is lowlevel.current_task():
                raise _already_held(lock) from None
            raise

    def acquire_nowait(self) -> None:
        lock = self._lock
        try:
            lock.acquire_nowait()
        except WouldBlock:
            raise AnyioWouldBlock from None
        except RuntimeError:
            if lock.statistics().owner is lowlevel.current_task():
                raise _already_held(lock) from None
            raise

    def locked(self) -> bool:
        return self._lock.locked()

    def release(self) -> None:
        self._lock.release()

    def statistics(self) -> LockStatistics:
        stats = self._lock.statistics()
        owner = stats.owner
        # A lock held by a thread (acquire_nowait() from one) has no task to show.
        info = task_info(owner) if isinstance(owner, AsyncOperation) else None
        return LockStatistics(stats.locked, info, stats.tasks_waiting)


class Semaphore(BaseSemaphore):
    """anyio's ``Semaphore`` on an ``asyncop.Semaphore``; see the module docstring."""

    __slots__ = ("_sem",)

    def __new__(
        cls,
        initial_value: int,
        *,
        max_value: int | None = None,
        fast_acquire: bool = False,
    ) -> Semaphore:
        return object.__new__(cls)

    def __init__(
        self,
        initial_value: int,
        *,
        max_value: int | None = None,
        fast_acquire: bool = False,
    ) -> None:
        super().__init__(initial_value, max_value=max_value, fast_acquire=fast_acquire)
        self._sem = _Semaphore(initial_value, max_value=max_value)

    async def acquire(self) -> None:
        sem = self._sem
        if self._fast_acquire:
            await sem.acquire_async()
        else:
            await _acquire(sem.acquire_nowait, sem.acquire_async, sem.release)

    def acquire_nowait(self) -> None:
        try:
            self._sem.acquire_nowait()
        except WouldBlock:
            raise AnyioWouldBlock from None

    def release(self) -> None:
        self._sem.release()

    @property
    def value(self) -> int:
        return self._sem.value

    @property
    def max_value(self) -> int | None:
        return self._sem.max_value

    def statistics(self) -> SemaphoreStatistics:
        return SemaphoreStatistics(self._sem.statistics().tasks_waiting)


def _check_total(value: object) -> float:
    """``total_tokens`` as anyio takes it: an int or infinity, 0 or more."""
    if (isinstance(value, bool) or not isinstance(value, int)) and not (
        isinstance(value, float) and math.isinf(value)
    ):
        raise TypeError(
            f"total_tokens must be an int or math.inf, got {type(value).__name__}; "
            "pass an int such as CapacityLimiter(10), or math.inf for no limit"
        )
    if value < 0:
        raise ValueError(f"total_tokens must be >= 0, got {value}; pass 0 or more tokens")
    return value


def _current_borrower() -> object:
    """What anyio's ``acquire()`` borrows for: the running task's operation."""
    task = lowlevel.current_task()
    if task is None:
        raise RuntimeError(
            "CapacityLimiter.acquire() needs an asyncop task to borrow for; call it in an "
            "async def function, or pass a borrower to acquire_on_behalf_of()"
        )
    return task


class CapacityLimiter(BaseCapacityLimiter):
    """anyio's ``CapacityLimiter`` on an ``asyncop.CapacityLimiter``; see the module docstring.

    ``original=`` wraps an existing asyncop limiter: the runtime's default
    one, for ``current_default_thread_limiter()``.
    """

    __slots__ = ("_limiter",)

    def __new__(
        cls, total_tokens: float | None = None, *, original: _CapacityLimiter | None = None
    ) -> CapacityLimiter:
        return object.__new__(cls)

    def __init__(
        self, total_tokens: float | None = None, *, original: _CapacityLimiter | None = None
    ) -> None:
        if original is None:
            original = _CapacityLimiter(_check_total(total_tokens))
        self._limiter = original

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.release()

    @property
    def total_tokens(self) -> float:
        return self._limiter.total_tokens

    @total_tokens.setter
    def total_tokens(self, value: float) -> None:
        self._limiter.total_tokens = _check_total(value)

    @property
    def borrowed_tokens(self) -> int:
        return self._limiter.borrowed_tokens

    @property
    def available_tokens(self) -> float:
        return self._limiter.available_tokens

    def acquire_nowait(self) -> None:
        self.acquire_on_behalf_of_nowait(_current_borrower())

    def acquire_on_behalf_of_nowait(self, borrower: object) -> None:
        try:
            self._limiter.acquire_on_behalf_of_nowait(borrower)
        except WouldBlock:
            raise AnyioWouldBlock from None

    async def acquire(self) -> None:
        await self.acquire_on_behalf_of(_current_borrower())

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        limiter = self._limiter
        await _acquire(
            partial(limiter.acquire_on_behalf_of_nowait, borrower),
            partial(limiter.acquire_on_behalf_of_async, borrower),
            partial(limiter.release_on_behalf_of, borrower),
        )

    def release(self) -> None:
        self._limiter.release_on_behalf_of(_current_borrower())

    def release_on_behalf_of(self, borrower: object) -> None:
        self._limiter.release_on_behalf_of(borrower)

    def statistics(self) -> CapacityLimiterStatistics:
        stats = self._limiter.statistics()
        return CapacityLimiterStatistics(
            borrowed_tokens=stats.borrowed_tokens,
            total_tokens=stats.total_tokens,
            borrowers=stats.borrowers,
            tasks_waiting=stats.tasks_waiting,
        )


def asyncop_limiter(limiter: object) -> _CapacityLimiter:
    """The asyncop ``CapacityLimiter`` under an anyio one, for ``to_thread.run_sync(limiter=)``.

    Raises:
        TypeError: ``limiter`` is not an anyio ``CapacityLimiter``.
    """
    if isinstance(limiter, CapacityLimiterAdapter):
        limiter = limiter._limiter  # (made outside an event loop: its backend's, made now)
    if isinstance(limiter, CapacityLimiter):
        return limiter._limiter
    raise TypeError(
        f"to_thread.run_sync(limiter=...) needs an anyio.CapacityLimiter, got "
        f"{type(limiter).__name__}; pass anyio.CapacityLimiter(n), or None for the default"
    )


# One wrapper of each runtime's default limiter, so that
# current_default_thread_limiter() gives the same object every time.
_defaults: weakref.WeakKeyDictionary[Runtime, CapacityLimiter] = weakref.WeakKeyDictionary()


def default_thread_limiter() -> CapacityLimiter:
    """The running task's runtime's default limiter (40 tokens), as an anyio one.

    It is the limiter ``spawn_blocking`` calls share by default, so that
    anyio's ``to_thread`` and asyncop's blocking calls count against one
    bound. Not a cancellation point.
    """
    runtime = current_runtime()
    limiter = _defaults.get(runtime)
    if limiter is None:
        limiter = _defaults[runtime] = CapacityLimiter(original=current_default_limiter())
    return limiter


class SyncMethods:
    """The backend's calls that make synchronization primitives; mixed into ``AsyncopBackend``."""

    @classmethod
    def create_event(cls) -> Any:
        return Event()

    @classmethod
    def create_lock(cls, *, fast_acquire: bool) -> Any:
        return Lock(fast_acquire=fast_acquire)

    @classmethod
    def create_semaphore(
        cls, initial_value: int, *, max_value: int | None = None, fast_acquire: bool = False
    ) -> Any:
        return Semaphore(initial_value, max_value=max_value, fast_acquire=fast_acquire)

    @classmethod
    def create_capacity_limiter(cls, total_tokens: float) -> Any:
        return CapacityLimiter(total_tokens)
