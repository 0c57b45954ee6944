"""Blocking calls in other threads: ``spawn_blocking`` and the pool it runs on.

Blocking calls must not occupy the workers, so they run on their own
threads. Threads are started on demand up to ``limit``, park on their own
wake event when idle (0 % CPU), and retire after ``IDLE_RETIRE`` seconds
without work. Jobs beyond ``limit`` wait in a FIFO queue.

``spawn_blocking(fn, *args)`` is the awaitable a task waits on: it first
borrows a token from a ``CapacityLimiter`` (``_limiter.py``), then submits
``fn`` to its runtime's pool, and the thread fires the task's subscription
with the outcome.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from types import AsyncGeneratorType, CoroutineType
from typing import Any, Never, final

from ...operations import R, Ts, keywords_refused, safe_repr
from ...platform import ThreadHandle, WakeEvent, join_by, start_thread
from .._kinds import code_of_call, describe_fn
from .._primitives._limiter import CapacityLimiter, arm_token, default_limiter, disarm_token
from ._waker import Subscription, WaitEvent, let_go

__all__ = ["Blocking", "BlockingPool", "spawn_blocking"]

IDLE_RETIRE = 10.0

logger = logging.getLogger("asyncop")


# Says what a job runs, for the warning of a second Ctrl-C; called only then.
Label = Callable[[], str]


def _unlabelled() -> str:
    return "a blocking call"


class _Thread:
    __slots__ = ("event", "handle", "label")

    def __init__(self) -> None:
        self.event = WakeEvent()
        self.handle: ThreadHandle | None = None
        # What the thread runs now; None while it has no job.
        self.label: Label | None = None


class BlockingPool:
    """Threads for blocking calls; ``submit(job)`` runs ``job()`` on one of them."""

    def __init__(self, name: str, limit: int = 64) -> None:
        self._name = name
        self._limit = limit
        self._lock = threading.Lock()
        self._jobs: deque[tuple[Callable[[], None], Label]] = deque()
        self._idle: list[_Thread] = []
        self._threads: list[_Thread] = []
        # Threads that left the pool and may not have ended yet: shutdown()
        # joins them too, so that none outlives it (pruned as they end).
        self._leaving: list[_Thread] = []
        self._seq = 0
        self._closed = False

    def thread_count(self) -> int:
        """The threads running or parked, for ``Runtime.dump()``."""
        return len(self._threads)

    def submit(self, job: Callable[[], None], label: Label = _unlabelled) -> None:
        """Queue ``job``; wake an idle thread or start one.

        ``label()`` says what the job runs, should the thread be abandoned.

        Raises:
            RuntimeError: the pool was shut down.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError(
                    f"the blocking-call threads of {self._name!r} are shut down; "
                    "run blocking calls before shutting the runtime down"
                )
            self._jobs.append((job, label))
            if self._idle:
                self._idle.pop().event.set()
            elif len(self._threads) < self._limit:
                self._seq += 1
                thread = _Thread()
                self._threads.append(thread)
                try:
                    thread.handle = start_thread(
                        self._main, thread, name=f"{self._name}-blocking-{self._seq}"
                    )
                except BaseException:
                    # The OS refused the thread: the call fails, and its job
                    # must not run later on a thread started for another.
                    self._threads.remove(thread)
                    self._jobs.remove((job, label))
                    raise

    def _main(self, thread: _Thread) -> None:
        while True:
            with self._lock:
                job: Callable[[], None] | None
                if self._jobs:
                    job, thread.label = self._jobs.popleft()
                else:
                    job = thread.label = None
                if job is None:
                    if self._closed:
                        self._leave_locked(thread)
                        return
                    self._idle.append(thread)
            if job is not None:
                try:
                    job()
                except BaseException:
                    # A job reports its own outcome; what escapes it is a bug,
                    # and must not end the thread with the pool still counting it.
                    try:
                        logger.error("asyncop: a blocking-call job failed", exc_info=True)
                    except BaseException:  # pragma: no cover - a broken log handler
                        pass
                continue
            if not thread.event.wait(IDLE_RETIRE):
                with self._lock:
                    if thread in self._idle and not self._jobs:
                        self._idle.remove(thread)
                        self._leave_locked(thread)
                        return
                    if thread in self._idle:
                        self._idle.remove(thread)

    def _leave_locked(self, thread: _Thread) -> None:
        """Take a thread about to return off the pool; ``shutdown()`` still joins it."""
        self._threads.remove(thread)
        self._leaving = [t for t in self._leaving if t.handle is not None and t.handle.is_alive()]
        self._leaving.append(thread)

    def busy(self) -> list[tuple[str, str]]:
        """The threads running a job now: (thread name, what the job runs)."""
        with self._lock:
            running = [
                (thread.handle, thread.label)
                for thread in self._threads
                if thread.handle is not None and thread.label is not None
            ]
        return [(handle.name, label()) for handle, label in running]

    def runs_on_current_thread(self) -> bool:
        """Tell whether the caller is one of this pool's threads."""
        me = threading.get_ident()
        with self._lock:
            return any(
                thread.handle is not None and thread.handle.ident == me for thread in self._threads
            )

    def shutdown(self, end: float | None) -> bool:
        """Stop taking jobs, let queued ones finish, join the threads.

        Args:
            end: the ``time.monotonic()`` reading by which to give up on the
                threads still running (None: wait for all of them). One
                bound for the whole pool, not one per thread: a call stuck
                in each thread must not multiply the wait.

        Returns:
            True if every thread ended.
        """
        with self._lock:
            self._closed = True
            threads = self._threads + self._leaving
            for thread in self._idle:
                thread.event.set()
            self._idle.clear()
        ended = True
        for thread in threads:
            if thread.handle is not None and not join_by(thread.handle, end):
                ended = False
        return ended


# -- blocking calls in other threads ---------------------------------------------


@final
class Blocking(WaitEvent):
    """Run a blocking function in another OS thread; see ``spawn_blocking``."""

    __slots__ = ("abandon", "args", "fn", "limiter", "started_at", "waiting_token")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        abandon: bool,
        limiter: CapacityLimiter | None = None,
    ) -> None:
        self._awaited = True  # until it is checked: a refused one has nothing to warn about
        if not callable(fn):
            let_go((fn,))  # refused: it must not warn "never awaited" besides
            raise TypeError(
                f"spawn_blocking() needs a callable, got {type(fn).__name__}; pass a function"
            )
        body = code_of_call(fn)
        if inspect.iscoroutinefunction(body) or inspect.isasyncgenfunction(body):
            raise TypeError(
                f"spawn_blocking() runs plain functions in a thread, and "
                f"{describe_fn(fn)!r} is an async function, whose body would never run "
                "there; await it directly, or spawn it as a task with current_operation().spawn()"
            )
        if limiter is not None and not isinstance(limiter, CapacityLimiter):
            raise TypeError(
                f"spawn_blocking(limiter=...) needs a CapacityLimiter, got "
                f"{type(limiter).__name__}; pass asyncop.CapacityLimiter(n) or None"
            )
        self._awaited = False
        self.fn = fn
        self.args = args
        self.abandon = abandon
        self.limiter = limiter
        # True while the call waits for a token: that wait is interruptible.
        self.waiting_token = False
        # When the call was handed to a thread (time.monotonic()), for
        # snapshots; None until then.
        self.started_at: float | None = None

    @property
    def cancellable(self) -> bool:  # type: ignore[override]
        return self.abandon or self.waiting_token

    def _arm(self, sub: Subscription) -> None:
        waker = sub.waker
        runtime = waker.runtime
        source = waker.task._ctx
        ctx = source.copy() if source is not None else contextvars.copy_context()
        fn, args = self.fn, self.args
        limiter = self.limiter if self.limiter is not None else default_limiter(runtime)
        # The token is lent to this call, not to the task: a task may have
        # several calls in flight (in a select).
        borrower = self

        def job() -> None:
            try:
                value = ctx.run(fn, *args)
                if value is not None and isinstance(value, _NOT_RUN):
                    raise _returned_unrun(fn, value)
            except BaseException as exc:
                result: tuple[Any, BaseException | None] = (None, exc)
            else:
                result = (value, None)
            limiter.release_on_behalf_of(borrower)
            # One hold of the lock for both (fire() takes it again, re-entrant):
            # the call must not look ended before its task is queued, or a
            # virtual clock's jump or the deadlock watch could look between.
            # A late result of an abandoned call finds the waker claimed by
            # the cancel and is dropped here, silently.
            with runtime._lock:
                runtime._outside_work -= 1
                sub.fire(*result)

        def label() -> str:
            return f"spawn_blocking({describe_fn(fn)}) for task {waker.task.name!r}"

        def start() -> None:
            self.waiting_token = False
            self.started_at = time.monotonic()
            with runtime._lock:
                runtime._outside_work += 1
            try:
                runtime._blocking.submit(job, label)
            except BaseException:
                # No thread will run the call (the token wait hands its
                # token on and fails the task's wait with this error).
                with runtime._lock:
                    runtime._outside_work -= 1
                raise

        self.waiting_token = True
        arm_token(limiter, borrower, sub, start, keep_cancellable=self.abandon)

    def _disarm(self, sub: Subscription) -> None:
        limiter = self.limiter if self.limiter is not None else default_limiter(sub.waker.runtime)
        disarm_token(limiter, self, sub)

    def _describe(self) -> str:
        return f"spawn_blocking({describe_fn(self.fn)})"


# What a function run by spawn_blocking may not return: work that never ran.
_NOT_RUN = (CoroutineType, AsyncGeneratorType, WaitEvent)


def _returned_unrun(fn: object, value: object) -> TypeError:
    if isinstance(value, CoroutineType):
        value.close()
    elif isinstance(value, WaitEvent):
        value._awaited = True  # refused here: no second warning when collected
    return TypeError(
        f"spawn_blocking() ran {describe_fn(fn)!r}, which returned {safe_repr(value)}: work "
        "that never runs in a thread; await it in the task instead, or pass a function "
        "that does the work itself"
    )


def spawn_blocking(
    fn: Callable[[*Ts], R],
    *args: *Ts,
    abandon: bool = False,
    limiter: CapacityLimiter | None = None,
    **keywords: Never,
) -> WaitEvent[R]:
    """Run ``fn(*args)`` in another OS thread and wait for its result.

    The thread gets a copy of the task's context variables. The call first
    borrows a token from ``limiter`` (by default the runtime's shared one,
    ``current_default_limiter()``, of 40 tokens) and gives it back when
    ``fn`` returns: waiting for the token is a cancellation point. Once the
    thread runs, the wait is not a cancellation point by default: on cancel
    the task waits for the thread, keeps its value, and leaves at its next
    await. With ``abandon=True`` the task is woken at once with
    ``Cancelled`` and the thread's late result is dropped silently (the
    thread keeps its token until it ends).

    Returns:
        When awaited, ``fn``'s return value.

    Keyword arguments for ``fn`` go through ``functools.partial(fn,
    key=value)``: the call's own keywords are ``abandon`` and ``limiter``.

    Raises:
        TypeError: ``fn`` is not callable or is an async function,
            ``limiter`` is not a ``CapacityLimiter``, or a keyword argument is
            meant for ``fn`` (raised by the call itself).
        BaseException: what ``fn`` raised.
        RuntimeError: the OS refused to start a thread for the call; ``fn``
            never runs, and the token is given back.
        Cancelled: with ``abandon=True``, when the task is cancelled.
    """
    if keywords:
        let_go((fn,))  # refused: it must not warn "never awaited" besides
        raise keywords_refused("spawn_blocking", fn, keywords, ("abandon", "limiter"))
    return Blocking(fn, args, bool(abandon), limiter)
