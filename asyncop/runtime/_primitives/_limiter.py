"""CapacityLimiter: a semaphore whose tokens know who borrowed them.

::

    limiter = asyncop.CapacityLimiter(10)
    async with limiter:              # one token, borrowed by this task
        await fetch(url)

A ``CapacityLimiter(total_tokens)`` lends at most ``total_tokens`` tokens at
a time. Unlike a ``Semaphore`` it records the *borrower* of each token (the
current task, else the current sync operation, else the current thread, or
an object given to ``acquire_on_behalf_of``), so that:

- a borrower that asks for a second token gets RuntimeError at once instead
  of deadlocking itself;
- the borrower is recorded when the token is handed over, before the
  waiting task runs again, so ``statistics()`` never shows a token lent to
  nobody;
- only a borrower can give its token back;
- ``total_tokens`` can be changed while tokens are out: raising it lets
  waiters in at once; lowering it retires tokens as they come back. It may
  be 0, which lends nothing until it is raised.

Built on a ``Semaphore`` that holds the free tokens, so waiting inherits its
FIFO hand-over, cancellation and timeout rules, from tasks and threads. The
limiter adds the borrower table and ``_debt``: tokens to retire as they come
back after ``total_tokens`` was lowered below what was lent.

Invariant (under ``_lock``, between calls): ``free + borrowed - debt ==
total_tokens`` where ``free`` is the semaphore's value.

Lock order: the semaphore's mutex, then ``_lock`` (a token handed to a
``spawn_blocking`` call is recorded from inside the semaphore's hand-over).
``_lock`` is never held while calling into the semaphore.

``spawn_blocking`` takes a token for each call from its ``limiter=`` (by
default the runtime's :func:`current_default_limiter`, 40 tokens, as trio
and anyio do) before the call gets a thread; see :func:`arm_token`.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, final

from ...operations import WouldBlock, blocking_in_task_error, safe_repr, thread_state
from ...platform import check_timeout
from .._core._waker import CallbackSubscription, Subscription, WaitEvent, WakerStatus, resolve
from .._introspect import runtime_of_caller
from ._names import check_name, label, made_at, short_label
from ._semaphore import Semaphore
from ._statistics import CapacityLimiterStatistics
from ._waiters import live_waiters

if TYPE_CHECKING:
    from .._core._kernel import Kernel
    from .._core._waker import Waker

__all__ = [
    "DEFAULT_BLOCKING_TOKENS",
    "CapacityLimiter",
    "arm_token",
    "current_default_limiter",
    "default_limiter",
    "disarm_token",
]

#: Tokens of each runtime's default limiter for ``spawn_blocking`` calls.
DEFAULT_BLOCKING_TOKENS = 40


# The free tokens the semaphore holds for ``total_tokens=math.inf``: more
# than can ever be lent, so that nobody waits.
_UNLIMITED = 1 << 62


def _check_total(value: object) -> int | float:
    if type(value) is float and value == math.inf:
        return value  # no limit
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"CapacityLimiter needs an int number of tokens, got {type(value).__name__}; "
            "pass an int such as CapacityLimiter(10), or math.inf for no limit"
        )
    if value < 0:
        raise ValueError(
            f"CapacityLimiter total_tokens={value} is negative; pass 0 or more tokens "
            "(0 lends none until it is raised)"
        )
    return value


def _tokens(total: int | float) -> int:
    """The semaphore tokens that ``total_tokens`` stands for."""
    return _UNLIMITED if total == math.inf else int(total)


def _borrower_text(borrower: object) -> str:
    """A borrower, for the texts: ``operation 'fetch'``, ``thread 'T'``."""
    if isinstance(borrower, threading.Thread):
        return f"thread {borrower.name!r}"
    name = getattr(borrower, "name", None)
    if isinstance(name, str) and type(borrower).__name__ == "AsyncOperation":
        return f"operation {name!r}"
    return safe_repr(borrower)


def _current_borrower() -> object:
    """The current task's operation, else the sync operation, else the thread."""
    state = thread_state()
    task = state.task
    if task is not None:
        op: object = task.task
        return op
    if state.op is not None:
        return state.op
    return threading.current_thread()


@final
class CapacityLimiter:
    """Lend at most ``total_tokens`` tokens at once, one per borrower.

    In a coroutine: ``async with limiter:`` or ``await limiter.acquire_async()``
    then ``limiter.release()``. In a thread: ``with limiter:`` or
    ``limiter.acquire(timeout=None)`` then ``release()``. Waiters are served
    in FIFO order.

    Args:
        total_tokens: how many tokens may be out at once; an int, 0 or
            more (0 lends none until it is raised), or ``math.inf`` for no
            limit.

    Raises:
        TypeError: ``total_tokens`` is not an int or ``math.inf``.
        ValueError: ``total_tokens`` is negative.
    """

    __slots__ = (
        "__weakref__",
        "_borrowers",
        "_debt",
        "_lock",
        "_pending",
        "_sem",
        "_site",
        "_total",
        "name",
    )

    def __init__(self, total_tokens: int | float, *, name: str | None = None) -> None:
        self._total = _check_total(total_tokens)
        self.name = check_name(name, "CapacityLimiter")
        self._site = made_at(1) if name is None else (None, 0)
        # (Named, so that making it skips the frame lookup: it is shown as the limiter.)
        self._sem: Semaphore = Semaphore(_tokens(self._total), name="")
        self._sem._purpose = self
        self._lock = threading.Lock()
        # Who holds a token, and who waits for one (so that a second
        # acquire by the same borrower is refused even while it waits).
        self._borrowers: set[object] = set()
        self._pending: set[object] = set()
        self._debt = 0

    # -- reading -------------------------------------------------------------

    def _wait_text(self) -> str:
        """What a waiter for a token waits on, for ``dump()`` and reports (a snapshot)."""
        borrowers = list(self._borrowers)
        who = ", ".join(_borrower_text(b) for b in borrowers[:3])
        more = f" and {len(borrowers) - 3} more" if len(borrowers) > 3 else ""
        lent = f"{len(borrowers)} of {self._total:g} tokens borrowed"
        if borrowers:
            lent += f" by {who}{more}"
        return "a token of " + label("capacity limiter", self.name, self._site, lent)

    @property
    def total_tokens(self) -> int | float:
        """How many tokens may be out at once (``math.inf``: no limit). Settable.

        Raising it lets waiters in at once; lowering it below the tokens
        lent retires tokens as their borrowers give them back.

        Raises:
            TypeError: the new value is not an int or ``math.inf``.
            ValueError: the new value is negative.
        """
        return self._total

    @total_tokens.setter
    def total_tokens(self, value: int | float) -> None:
        value = _check_total(value)
        sem = self._sem
        # The semaphore's mutex first (the lock order): no hand-over runs
        # while free tokens are taken away.
        with sem._mutex, self._lock:
            delta = _tokens(value) - _tokens(self._total)
            self._total = value
            if delta < 0:
                taken = min(sem._value, -delta)
                sem._value -= taken
                self._debt += -delta - taken
                to_release = 0
            else:
                repaid = min(self._debt, delta)
                self._debt -= repaid
                to_release = delta - repaid
        # One release per waiter (each hands its token over), the rest to
        # the pool at once: raising the total to math.inf adds 2**62.
        while to_release > 0:
            with sem._mutex:
                if not sem._waiters:
                    sem._value += to_release
                    return
            sem.release()
            to_release -= 1

    @property
    def borrowed_tokens(self) -> int:
        """How many tokens are lent now."""
        return len(self._borrowers)

    @property
    def available_tokens(self) -> int | float:
        """How many tokens could be lent now without waiting (0 when over the total)."""
        return max(0, self._total - len(self._borrowers))

    # -- acquiring -----------------------------------------------------------

    def _claim(self, borrower: object) -> None:
        with self._lock:
            if borrower in self._borrowers:
                what = "holding one of this CapacityLimiter's tokens"
            elif borrower in self._pending:
                what = "waiting for one of this CapacityLimiter's tokens"
            else:
                self._pending.add(borrower)
                return
        raise RuntimeError(
            f"this borrower is already {what} ({borrower!r}, {self!r}); "
            "release its token before acquiring another"
        )

    def _settle(self, borrower: object, got: bool) -> None:
        with self._lock:
            self._pending.discard(borrower)
            if got:
                self._borrowers.add(borrower)

    async def acquire_on_behalf_of_async(self, borrower: object) -> None:
        """Borrow a token for ``borrower``, waiting in FIFO order. A cancellation point.

        A token already handed over when a cancel arrives is kept (the
        borrower holds it); otherwise none is taken.

        Raises:
            RuntimeError: ``borrower`` already holds or waits for a token.
            Cancelled: the task is cancelled while waiting.
        """
        await _TokenWait(self, borrower)

    async def acquire_async(self) -> None:
        """Borrow a token for the current task, waiting in FIFO order. A cancellation point.

        Raises:
            RuntimeError: the task already holds a token of this limiter.
            Cancelled: the task is cancelled while waiting; no token was taken.
        """
        await self.acquire_on_behalf_of_async(_current_borrower())

    def acquire_on_behalf_of(self, borrower: object, timeout: float | None = None) -> bool:
        """Borrow a token for ``borrower`` from a thread, waiting ``timeout`` s at most.

        Returns:
            True once the token is lent; False if the timeout passed first.

        Raises:
            RuntimeError: ``borrower`` already holds or waits for a token, or
                the call is made inside a coroutine (use the async form).
            TypeError, ValueError: ``timeout`` is not a number of seconds.
        """
        return self._acquire(
            borrower,
            timeout,
            "acquire_on_behalf_of",
            "'await limiter.acquire_on_behalf_of_async(borrower)'",
        )

    def _acquire(self, borrower: object, timeout: float | None, method: str, instead: str) -> bool:
        seconds = check_timeout(timeout, f"CapacityLimiter.{method}(timeout=...)")
        if thread_state().task is not None:
            raise blocking_in_task_error(f"CapacityLimiter.{method}() on {self!r}", instead)
        self._claim(borrower)
        got = False
        try:
            got = self._sem.acquire(seconds)
        finally:
            self._settle(borrower, got)
        return got

    def acquire(self, timeout: float | None = None) -> bool:
        """Borrow a token for the current thread (or sync operation); see ``acquire_on_behalf_of``.

        Returns:
            True once the token is lent; False if the timeout passed first.

        Raises:
            RuntimeError: the thread already holds or waits for a token, or
                the call is made inside a coroutine (use ``acquire_async``
                or ``async with``).
            TypeError, ValueError: ``timeout`` is not a number of seconds.
        """
        return self._acquire(
            _current_borrower(),
            timeout,
            "acquire",
            "'await limiter.acquire_async()' or 'async with limiter'",
        )

    def acquire_on_behalf_of_nowait(self, borrower: object) -> None:
        """Borrow a token for ``borrower`` if one is free and nobody waits, without waiting.

        Usable from a coroutine and from a thread alike. Not a cancellation
        point.

        Raises:
            WouldBlock: no token is free, or others wait for one.
            RuntimeError: ``borrower`` already holds or waits for a token.
        """
        self._claim(borrower)
        got = False
        try:
            self._sem.acquire_nowait()
            got = True
        except WouldBlock:
            raise WouldBlock(
                f"{self!r} has no free token; acquire later, or wait for one with "
                "the async or blocking acquire"
            ) from None
        finally:
            self._settle(borrower, got)

    def acquire_nowait(self) -> None:
        """Borrow a token for the current task (or thread) without waiting.

        See ``acquire_on_behalf_of_nowait``. Not a cancellation point.

        Raises:
            WouldBlock: no token is free, or others wait for one.
            RuntimeError: the caller already holds or waits for a token.
        """
        self.acquire_on_behalf_of_nowait(_current_borrower())

    # -- releasing -----------------------------------------------------------

    def release_on_behalf_of(self, borrower: object) -> None:
        """Give back the token lent to ``borrower``: to the first waiter, or to the pool.

        Raises:
            RuntimeError: ``borrower`` holds no token of this limiter.
        """
        with self._lock:
            if borrower not in self._borrowers:
                raise RuntimeError(
                    f"this borrower isn't holding any of this CapacityLimiter's tokens "
                    f"({borrower!r}, {self!r}); release only a token that was acquired, "
                    "by the same task or thread"
                )
            self._borrowers.remove(borrower)
            if self._debt:
                self._debt -= 1  # total_tokens was lowered: retire this token
                return
        self._sem.release()

    def release(self) -> None:
        """Give back the current task's (or thread's) token.

        Raises:
            RuntimeError: the current task or thread holds no token.
        """
        self.release_on_behalf_of(_current_borrower())

    def statistics(self) -> CapacityLimiterStatistics:
        """A snapshot: tokens lent, the total, who holds them, and how many wait.

        Not a cancellation point.
        """
        sem = self._sem
        with sem._mutex, self._lock:  # (the lock order)
            borrowers = tuple(self._borrowers)
            return CapacityLimiterStatistics(
                len(borrowers), self._total, borrowers, live_waiters(sem._waiters)
            )

    # -- context managers ----------------------------------------------------

    def __enter__(self) -> CapacityLimiter:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    async def __aenter__(self) -> CapacityLimiter:
        await self.acquire_async()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return (
            f"<CapacityLimiter {len(self._borrowers)}/{self._total} borrowed, "
            f"waiters={len(self._sem._waiters)} {short_label(self.name, self._site)}>"
        )


@final
class _TokenWait(WaitEvent[None]):
    """A task's wait for a token, which records the borrower as the token is handed over.

    The limiter's semaphore wait, composed under the task's subscription:
    the hand-over (under the semaphore's mutex) first records the borrower,
    then wakes the task. A task that gave up meanwhile (cancelled) refuses
    the token, whose record is undone, and the token goes to the next
    waiter, as a semaphore's permit does. ``sub.handle`` holds the
    semaphore wait until the token is handed over, for ``_disarm``.
    """

    __slots__ = ("borrower", "limiter")

    def __init__(self, limiter: CapacityLimiter, borrower: object) -> None:
        self.limiter = limiter
        self.borrower = borrower

    def _arm(self, sub: Subscription) -> None:
        limiter, borrower = self.limiter, self.borrower
        limiter._claim(borrower)
        event = limiter._sem.acquire_async()
        event._awaited = True  # composed into this wait: never awaited on its own

        def granted(
            _waker: Waker, child: Subscription, result: Any, error: BaseException | None
        ) -> bool:
            # Recorded before the task can run again (and give the token
            # back); no _disarm may take the record back from here on.
            sub.handle = None
            limiter._settle(borrower, True)
            if sub.fire(None):
                return True
            with limiter._lock:
                limiter._borrowers.discard(borrower)
            return False  # the permit goes on to the next waiter

        child = CallbackSubscription(sub.waker, event, granted)
        sub.handle = child
        event._arm(child)

    def _disarm(self, sub: Subscription) -> None:
        child = sub.handle
        if child is not None:
            sub.handle = None
            child.event._disarm(child)
            self.limiter._settle(self.borrower, False)

    def _describe(self) -> str:
        return self.limiter._wait_text()


# -- spawn_blocking's tokens ----------------------------------------------------

_defaults: weakref.WeakKeyDictionary[Kernel, CapacityLimiter] = weakref.WeakKeyDictionary()
_defaults_lock = threading.Lock()


def default_limiter(runtime: Kernel) -> CapacityLimiter:
    """The limiter that ``spawn_blocking`` calls of ``runtime`` share by default."""
    limiter = _defaults.get(runtime)
    if limiter is None:
        with _defaults_lock:
            limiter = _defaults.get(runtime)
            if limiter is None:
                limiter = _defaults[runtime] = CapacityLimiter(
                    DEFAULT_BLOCKING_TOKENS, name="spawn_blocking"
                )
    return limiter


def current_default_limiter() -> CapacityLimiter:
    """Return the limiter that ``spawn_blocking`` calls share unless given another.

    Each runtime has its own, of 40 tokens: at most 40 blocking calls of the
    runtime run at once, and later ones wait for a token. Set its
    ``total_tokens`` to change that. Not a cancellation point.

    Raises:
        RuntimeError: the calling thread is not running an operation.
    """
    return default_limiter(runtime_of_caller("current_default_limiter()"))


def _still_waiting(waker: Waker, sub: Subscription) -> bool:
    # Under the runtime lock: the wait ``sub`` belongs to can still be won.
    status = waker.status
    return sub.generation == waker.generation and (
        status is WakerStatus.NO_STATUS or status is WakerStatus.WAITING
    )


def arm_token(
    limiter: CapacityLimiter,
    borrower: object,
    sub: Subscription,
    start: Callable[[], None],
    keep_cancellable: bool,
) -> None:
    """Wait for a token for ``sub``'s wait, then call ``start()`` (from ``_arm``).

    The wait for the token is the limiter's semaphore wait, composed under
    ``sub``: it is cancellable, and a wait that was cancelled (or lost its
    ``select``) before the token came refuses it, so it goes to the next
    waiter. Once the token is taken, a directly awaited wait becomes
    uninterruptible unless ``keep_cancellable``: the call then runs to its
    end, as ``spawn_blocking`` promises. ``sub.handle`` keeps the token wait
    for :func:`disarm_token`.
    """
    limiter._claim(borrower)
    event = limiter._sem.acquire_async()
    event._awaited = True  # composed into this wait: never awaited on its own
    waker = sub.waker

    def granted(
        _waker: Waker, child: Subscription, result: Any, error: BaseException | None
    ) -> bool:
        if error is not None:  # pragma: no cover - a semaphore wait has no error
            limiter._settle(borrower, False)
            return sub.fire(None, error)
        with waker.runtime._lock:
            if not _still_waiting(waker, sub):
                return False  # the permit goes on to the next waiter
            if not keep_cancellable and sub.callback is resolve:
                waker.cancellable = False  # type: ignore[attr-defined]
            sub.handle = None
        limiter._settle(borrower, True)
        try:
            start()
        except BaseException as exc:
            # The work cannot start (the OS refused a thread): the token
            # goes on to the next waiter (refused here, where the permit's
            # lock is held: no release) and the wait fails with the error.
            with limiter._lock:
                limiter._borrowers.discard(borrower)
            sub.fire(None, exc)
            return False
        return True

    child = CallbackSubscription(waker, event, granted)
    sub.handle = child
    event._arm(child)


def disarm_token(limiter: CapacityLimiter, borrower: object, sub: Subscription) -> None:
    """Take back a token wait that has not been granted (from ``_disarm``)."""
    child = sub.handle
    if child is not None:
        sub.handle = None
        child.event._disarm(child)
        limiter._settle(borrower, False)
