"""The cancellation token: how running work learns it was cancelled.

Every operation owns one token. ``Operation.cancel()`` sets the token of
every node in the subtree while holding the runtime lock, then runs the
``on_cancel`` callbacks in the cancelling thread after releasing it, so a
callback may call back into the runtime.

States: a token is *live* until it is cancelled, and then *cancelled*
forever. Only the cancel walk (``_cancel_locked``) writes ``_cancelled``;
user code reads it through ``cancelled`` and ``check()``.

Reading ``cancelled`` or calling ``check()`` first delivers a deadline of
the runtime that has passed, on the calling thread, if no other thread has
yet: polling work sees its scope's timeout on time even while every thread
of the runtime is busy with CPU-bound work, and the monitor thread has to
wait its turn for the interpreter lock. Not on the main thread, where a
Ctrl-C landing inside the delivery could cut it short; the monitor delivers
it there.

A cancel with a grace first only *asks* the operation to stop: the token
stays live, and ``stop_requested`` tells (see ``_stop.py``); the token is
cancelled when the grace runs out.

Threads parked in ``wait()`` (or in any blocking call of asyncop inside the
token's operation, see ``_park.py``) queue a held lock on ``_waiters``; the
cancel walk releases them under the runtime lock, one at a time, so a walk
cut short by a Ctrl-C and redone later wakes every one of them.
"""

from __future__ import annotations

import _thread
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, final

from ..platform import check_timeout, is_main_thread
from ._current import thread_state
from ._errors import Cancelled, cancelled_for
from ._guard import run_isolated
from ._park import cancelled_error, park, release_quietly
from ._stop import stop_requested_of

if TYPE_CHECKING:
    from ..platform import RecursiveLock
    from ._hooks import RuntimeHooks
    from ._node import AsyncOperation

__all__ = ["CancelHandle", "CancelToken"]


@final
class CancelHandle:
    """A registration made by ``CancelToken.on_cancel``; ``remove()`` undoes it."""

    __slots__ = ("_fn", "_token")

    def __init__(self, token: CancelToken | None, fn: Callable[[], object]) -> None:
        self._token = token
        self._fn = fn

    def remove(self) -> bool:
        """Take the callback back, if it has not run yet.

        Returns:
            True if the callback was removed before it ran; False if it has
            already run (or is running) or was removed before.
        """
        token = self._token
        if token is None:
            return False
        self._token = None
        with token._lock:
            callbacks = token._callbacks
            if callbacks is None or self not in callbacks:
                return False
            del callbacks[self]
            return True

    def __repr__(self) -> str:
        state = "armed" if self._token is not None else "inactive"
        return f"<CancelHandle {state} for {self._fn!r}>"


@final
class CancelToken:
    """Tells running work that it was cancelled.

    A sync callback polls ``cancelled`` or calls ``check()`` between steps
    of its work; a coroutine does not need to, because every await checks
    the token. Only the runtime makes tokens.
    """

    __slots__ = (
        "__weakref__",
        "_about",
        "_callbacks",
        "_cancelled",
        "_lock",
        "_op",
        "_runtime",
        "_waiters",
    )

    # A thread in wait() waits for a cancel and nothing else: the runtime's
    # deadlock watch does not count it as stuck (see runtime/_waitgraph.py).
    ends_by_cancel = True

    def __init__(
        self,
        lock: RecursiveLock,
        runtime: RuntimeHooks | None = None,
        op: AsyncOperation | None = None,
    ) -> None:
        self._lock = lock
        # Whose deadlines a poll delivers (see the module docstring).
        self._runtime = runtime
        # The operation, for stop_requested; weak, as the operation holds the
        # token: a cycle would keep finished operations for the collector.
        self._op: weakref.ref[AsyncOperation] | None = None if op is None else weakref.ref(op)
        self._cancelled = False
        # The cancelled operation's name and cancel_reason, for Cancelled's message.
        self._about: tuple[str, object] | None = None
        # Both lazily allocated: most tokens never get a callback or waiter.
        self._callbacks: dict[CancelHandle, Callable[[], object]] | None = None
        self._waiters: list[_thread.LockType] | None = None

    @property
    def cancelled(self) -> bool:
        """True once the operation (or an ancestor) was cancelled.

        A deadline that has passed (a scope's timeout, say) counts at once,
        even while every worker is busy.
        """
        if not self._cancelled:
            runtime = self._runtime
            if (
                runtime is not None
                and runtime._next_deadline <= runtime._now()
                and not is_main_thread()
            ):
                runtime._fire_due_timers()
        return self._cancelled

    @property
    def stop_requested(self) -> bool:
        """True once the operation was asked to stop, or cancelled.

        Asked to stop: ``cancel(grace=...)`` was called on the operation or
        an ancestor (not past a shield), and the grace has not run out yet,
        so ``cancelled`` is still False. A callback that polls this and
        returns ends COMPLETED with its value; one that does not is
        cancelled when the grace runs out. A cancel counts too, so polling
        this one flag stops the work either way.
        """
        if self.cancelled:
            return True
        ref = self._op
        op = None if ref is None else ref()
        return op is not None and stop_requested_of(op)

    def check(self) -> None:
        """Raise ``Cancelled`` if the token is cancelled; otherwise do nothing.

        A deadline that has passed counts at once, as for ``cancelled``.

        Raises:
            Cancelled: when the token is cancelled. Let it escape to end the
                operation CANCELLED.
        """
        if self.cancelled:
            about = self._about
            raise Cancelled() if about is None else cancelled_for(*about)

    def on_cancel(self, fn: Callable[[], object]) -> CancelHandle:
        """Run ``fn()`` once, in the cancelling thread, when the token is cancelled.

        On a token that is already cancelled, ``fn()`` runs at once in the
        calling thread. An exception from ``fn`` (even SystemExit) is logged
        on the ``asyncop`` logger, never raised into the cancel or lost
        with the callbacks after it; on the main thread a KeyboardInterrupt
        is raised again once every pending callback has run.

        Args:
            fn: called with no arguments.

        Returns:
            A handle whose ``remove()`` takes the callback back.

        Raises:
            TypeError: if ``fn`` is not callable.
        """
        if not callable(fn):
            raise TypeError(
                f"CancelToken.on_cancel() needs a callable, got {type(fn).__name__}; "
                "pass a function that takes no arguments"
            )
        with self._lock:
            if not self._cancelled:
                handle = CancelHandle(self, fn)
                if self._callbacks is None:
                    self._callbacks = {}
                self._callbacks[handle] = fn
                return handle
        # Already cancelled: the same rule as for a callback the cancel runs.
        run_isolated((fn,), "an on_cancel callback")
        return CancelHandle(None, fn)

    def wait(self, timeout: float | None = None) -> bool:
        """Block the calling thread until the token is cancelled.

        Not for coroutines (they learn of a cancel at every await). Called
        from inside an operation (a plain function running as one, or the
        block of a sync scope), it is a cancellation point: if that
        operation is cancelled while this token is not, it raises
        ``Cancelled``. Waiting on the operation's own token, or an
        ancestor's, returns True as the cancel arrives.

        Args:
            timeout: seconds to wait at most; None, ``math.inf`` or a huge
                value wait without limit, and 0 or less only looks.

        Returns:
            True if the token is cancelled, False if the timeout passed first.

        Raises:
            TypeError: ``timeout`` is not a number.
            ValueError: ``timeout`` is NaN.
            Cancelled: the calling operation was cancelled while this token
                was not.
            RuntimeError: called from a coroutine task, whose worker it
                would block.
        """
        state = thread_state()
        if state.task is not None:
            # Steps of a runtime's tasks never overlap: blocking one blocks them all.
            raise RuntimeError(
                "CancelToken.wait() would block a worker inside a coroutine; a task "
                "learns of its cancel at its next await, so await asyncop.sleep() or "
                "another asyncop awaitable instead, or check token.cancelled"
            )
        limit = None if timeout is None else check_timeout(timeout, "CancelToken.wait(timeout=...)")
        if self._cancelled:
            return True
        op = state.op  # the operation whose cancel ends the wait, if any
        if op is not None and op._token is self:
            op = None  # its cancel is what we wait for: no second waker needed
        waiter = _thread.allocate_lock()
        waiter.acquire()
        try:
            with self._lock:
                if self._cancelled:
                    return True
                if self._waiters is None:
                    self._waiters = [waiter]
                else:
                    self._waiters.append(waiter)
            park(waiter, limit, op, self)
        finally:
            # Also on a Ctrl-C: no released-for-nobody lock stays queued.
            with self._lock:
                waiters = self._waiters
                if waiters is not None and waiter in waiters:
                    waiters.remove(waiter)
        if self._cancelled:
            return True
        if op is not None and op._cancelled:
            raise cancelled_error(op)
        return False

    def _release_waiters_locked(self) -> None:
        """Wake every thread parked on the token. Under the runtime lock.

        One at a time, each released before it leaves the list: a Ctrl-C
        landing in between leaves the rest queued for the next cancel walk
        to wake. A parked thread may have been woken already by what it
        waits for (or by a walk that was cut short), hence the quiet release.
        """
        waiters = self._waiters
        if waiters is not None:
            while waiters:
                release_quietly(waiters[-1])
                waiters.pop()
            self._waiters = None

    def _cancel_locked(self, after: list[Callable[[], object]]) -> bool:
        """Mark the token cancelled; queue its callbacks on ``after``.

        The caller holds the runtime lock and runs ``after`` once it has
        released it. Returns False if the token was already cancelled.
        """
        if self._cancelled:
            return False
        self._cancelled = True
        self._release_waiters_locked()
        if self._callbacks is not None:
            after.extend(self._callbacks.values())
            self._callbacks = None
        return True

    def _describe(self) -> str:
        """What a thread in ``wait()`` waits on, for the deadlock report."""
        return "a cancel (CancelToken.wait())"

    def __repr__(self) -> str:
        return f"<CancelToken {'cancelled' if self._cancelled else 'live'}>"
