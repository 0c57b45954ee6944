"""Cancel with a grace period: ask a subtree to stop, cancel it when the grace runs out.

::

    server.cancel("deploying", grace=10)   # handlers see stop_requested(); 10 s later,
                                           # whatever still runs is cancelled

``op.cancel(reason, grace=G)`` (``operations/_cancel.py``) hands the
operation to :func:`request_stop`, which records a :class:`StopRequest` in
``runtime._stop_requests`` and arms a timer on the runtime's clock (so a
``VirtualClock`` drives it like any sleep). Who counts as asked is decided
by walking up the tree (``operations/_stop.py``); nothing in the subtree is
touched, and nothing is cancelled, until the timer fires and cancels the
subtree as ``op.cancel(reason)`` would (:meth:`StopRequest.expire_locked`).

What running work sees of a request:

- ``stop_requested()``: True in the operation's code (or its innermost
  scope's, in a task);
- ``await wait_stop_requested()``: an event (so it composes in ``select``),
  registered in ``runtime._stop_waiters`` until a request reaches its task,
  which :func:`wake_stop_waiters_locked` checks on every new request and
  whenever a shield is dropped;
- ``token.stop_requested`` for sync callbacks (``operations/_token.py``).

States of a request: *asked* (in ``_stop_requests``, its timer armed unless
the grace is infinite) -> *ended*, when the operation is final: the
operation's waiter list calls :meth:`StopRequest.on_end`, which drops the
request and its timer, so nothing stays registered past the operation.
The timer firing cancels the operation but leaves the request until then.
A second request on the same operation only ever brings the timer nearer.
The lock guards ``_stop_requests``, ``_stop_waiters`` and every field of
a request; readers that only walk the tree read the dict without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, final

from ..operations import (
    AsyncOperation,
    outside_advice,
    safe_str,
    stop_requested_of,
    thread_state,
)
from ._core._waker import Subscription, WaitEvent
from ._introspect import owner_of

if TYPE_CHECKING:
    from ..operations import After
    from ._core._kernel import Kernel
    from ._core._timers import Timer

__all__ = [
    "StopRequest",
    "describe_stop_locked",
    "request_stop",
    "stop_requested",
    "wait_stop_requested",
    "wake_stop_waiters_locked",
]

logger = logging.getLogger("asyncop")

_INF = float("inf")


@final
class StopRequest:
    """One ``cancel(grace=...)`` waiting for its grace to run out."""

    __slots__ = ("deadline", "on_expire", "op", "reason", "timer")

    def __init__(self, op: AsyncOperation, reason: object, deadline: float) -> None:
        self.op = op
        self.reason = reason
        # When the subtree is cancelled, on the runtime's clock (inf: never).
        self.deadline = deadline
        self.timer: Timer | None = None
        # Called (outside the lock) before the cancel at the grace's end,
        # if the operation still runs: a shutdown names what it cancels.
        self.on_expire: Callable[[AsyncOperation], object] | None = None

    def expire_locked(self, after: After) -> None:
        """The grace ran out: cancel the subtree, as ``cancel(reason)`` would.

        Called under the runtime lock as the timer leaves the heap, so that
        no checkpoint in the subtree sees the grace gone and the cancel not
        yet landed; the announcement, like the cancel's wake-ups, goes to
        ``after``.
        """
        op = self.op
        if op._state.final:
            return
        announce = self.on_expire
        if announce is not None:
            after.append(partial(announce, op))
        op._cancel_locked(self.reason, after)

    def on_end(self) -> None:
        """The operation is final: drop the request and its timer."""
        op = self.op
        runtime = owner_of(op)
        with runtime._lock:
            if runtime._stop_requests.get(op) is self:
                del runtime._stop_requests[op]
            timer, self.timer = self.timer, None
            if timer is not None:
                runtime._cancel_timer_locked(timer)

    def __repr__(self) -> str:
        return f"<StopRequest for {self.op.name!r} until {self.deadline:g}>"


def request_stop(
    runtime: Kernel, op: AsyncOperation, reason: object, grace: float | None
) -> StopRequest | None:
    """Ask ``op``'s subtree to stop, and cancel it ``grace`` seconds from now (None: never).

    Nothing happens to an operation that has ended or is cancelled already.
    A second request only brings the cancel nearer; the first reason given
    stays. Returns the request, or None when there was nothing to ask.
    """
    with runtime._lock:
        if op._state.final or op._cancelled:
            return None
        deadline = _INF if grace is None else runtime._now() + grace
        requests = runtime._stop_requests
        request = requests.get(op)
        if request is None:
            request = requests[op] = StopRequest(op, reason, deadline)
            op._add_waiter_locked(request.on_end)
            wake_stop_waiters_locked(runtime)
        else:
            if request.reason is None:
                request.reason = reason
            if not deadline < request.deadline:
                return request  # a grace never grows
            request.deadline = deadline
            timer, request.timer = request.timer, None
            if timer is not None:
                runtime._cancel_timer_locked(timer)
        if deadline < _INF:
            request.timer = runtime._add_timer_locked(deadline, request.expire_locked, inline=False)
        return request


def wake_stop_waiters_locked(runtime: Kernel) -> None:
    """Wake every task in ``wait_stop_requested()`` that a request reaches by now."""
    waiters = runtime._stop_waiters
    if not waiters:
        return
    for sub, node in list(waiters.items()):
        if stop_requested_of(node):
            del waiters[sub]
            sub.handle = None
            sub.fire(None)  # an internal wake-up: safe under the lock


def describe_stop_locked(runtime: Kernel, op: AsyncOperation) -> str:
    """What ``dump()`` adds for an operation asked to stop: the reason and the grace's end."""
    request = runtime._stop_requests.get(op)
    if request is None or op._cancelled:
        return ""
    reason = "" if request.reason is None else f" ({safe_str(request.reason)})"
    deadline = request.deadline
    end = "never cancelled" if deadline == _INF else f"cancelled at {deadline:.3f}"
    return f" asked to stop{reason}, {end}"


# -- what running work sees ----------------------------------------------------


_FROM_CODE = "call it from an operation's code, or read op.token.stop_requested"


def stop_requested() -> bool:
    """Whether the calling operation was asked to stop (or is cancelled).

    True once ``cancel(grace=...)`` was called on the operation running
    this code or on one of its ancestors, not past a shielded scope (in a
    task, the innermost scope it is in decides), and stays True until the
    operation ends; the grace's end cancels it. Operations spawned into the
    subtree after the request are asked too. A cancel counts as well, so a
    loop that tests this one flag stops either way. Not a cancellation point.

    Raises:
        RuntimeError: the calling thread runs no asyncop operation.
    """
    op = thread_state().running()
    if op is None:
        raise RuntimeError(
            "asyncop.stop_requested() needs a running asyncop operation, and this thread "
            f"runs none; {outside_advice(_FROM_CODE)}"
        )
    return stop_requested_of(op)


@final
class StopRequestedWait(WaitEvent[None]):
    """Wait until the task is asked to stop; ``wait_stop_requested()`` makes one."""

    __slots__ = ()

    arms_locked = True
    # Only a stop request or a cancel ends it: a tree waiting on nothing else
    # is not stuck but waiting to be stopped (the deadlock watch, _waitgraph.py).
    ends_by_cancel = True

    def _arm(self, sub: Subscription) -> None:
        with sub.waker.runtime._lock:
            self._arm_locked(sub)

    def _arm_locked(self, sub: Subscription) -> None:
        waker = sub.waker
        task = waker.task._task
        node: AsyncOperation = task.current if task is not None else waker.task
        if node._cancelled:
            return  # the stepper's check before suspending raises Cancelled
        if stop_requested_of(node):
            sub.fire(None)
            return
        waker.runtime._stop_waiters[sub] = node
        sub.handle = node

    def _disarm(self, sub: Subscription) -> None:
        if sub.handle is not None:
            sub.handle = None
            runtime = sub.waker.runtime
            with runtime._lock:
                runtime._stop_waiters.pop(sub, None)

    def _describe(self) -> str:
        return "wait_stop_requested()"


def wait_stop_requested() -> WaitEvent[None]:
    """Wait until the task is asked to stop by a ``cancel(grace=...)``.

    ``await asyncop.wait_stop_requested()`` returns at once if
    ``stop_requested()`` is already True, else when a request reaches the
    task (see ``stop_requested``). An event, not a coroutine: it composes
    in ``asyncop.select``. A cancellation point: a cancelled task raises
    ``Cancelled`` here as at any await, so the wait also ends when the
    grace runs out.

    Raises:
        Cancelled: the task is cancelled, before or during the wait.
    """
    return StopRequestedWait()
