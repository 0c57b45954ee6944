"""The cancel walk: how a cancel reaches an operation's subtree.

``AsyncOperation.cancel()`` (``cancel`` below) takes the runtime lock and
calls ``_cancel_locked``, the walk, which the class binds as a method
like every function here (``cancel``, ``_cancel_locked``, ``_expire``,
``_expire_locked``, ``_cancel_token_locked``, ``_finish_token_cancel_locked``). With a grace,
``cancel()`` hands the operation to the runtime instead, which asks the
subtree to stop and calls ``cancel()`` again when the grace runs out (see
``_stop.py``).

The walk goes down the subtree with an explicit stack, however deep, and
leaves shielded subtrees alone. A CREATED or PENDING node ends its work
CANCELLED at once (``_transition_to_ended``, whose answer says whether this
walk ended it) and is finalized with the unstarted nodes below it; a
RUNNING one has its token cancelled, and the runtime wakes it where it
waits (``_on_cancel_running_locked``). On the main thread a Ctrl-C can cut
the walk short anywhere: the node it started from stays flagged
(``_cancel_unfinished``), and the next walk that meets it redoes it, as it
redoes a finalization a Ctrl-C cut short (see ``_finalize.py``).

A deadline's timer calls ``_expire_locked``, which cancels the subtree of
the outermost operation whose deadline is due and marks it expired. It
runs under the runtime lock in the same hold as the timer leaves the heap
(see ``Kernel._fire_due_timers``): no thread can then see the deadline gone
from the heap and the subtree not yet cancelled, so a checkpoint after a
deadline passed always raises. ``_expire`` does the same for a deadline set
in the past, taking the lock itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._hooks import run_after
from ._state import OperationState, OpKind, Outcome
from ._stop import check_cancel_grace

if TYPE_CHECKING:
    from ._hooks import After
    from ._node import AsyncOperation

__all__ = [
    "cancel",
    "cancel_locked",
    "cancel_token_locked",
    "expire",
    "expire_locked",
    "finish_token_cancel_locked",
]


def cancel(self: AsyncOperation, reason: object = None, *, grace: float | None = None) -> None:
    """Cancel this operation and its whole subtree; with ``grace``, ask it to stop first.

    CREATED and PENDING nodes end CANCELLED at once and never run;
    RUNNING nodes have their token cancelled and stop at their next
    cancellation point. Shielded subtrees below this node are left alone.
    Idempotent, callable from any thread, and it never kills a thread.

    With ``grace`` (seconds on the runtime's clock), nothing is cancelled
    yet: the subtree is *asked* to stop. Inside it, ``asyncop.stop_requested()``
    and ``token.stop_requested`` are True and ``await
    asyncop.wait_stop_requested()`` returns, while ``token.cancelled`` stays
    False, so work that returns within the grace ends COMPLETED with its
    value; servers (``asyncop.net.serve_tcp``...) close their listeners and
    let running handlers finish. Operations spawned into the subtree later
    are asked too. When the grace runs out, whatever still runs is cancelled
    as if ``cancel(reason)`` were called then. A later ``cancel()`` without
    grace cancels at once; a later grace can only bring the end nearer.
    A shielded subtree is neither asked nor cancelled from above (its own
    ``cancel(grace=...)`` works). On an operation that has ended, or is
    already cancelled, it does nothing.

    Args:
        reason: kept as ``cancel_reason`` and shown by ``dump()``.
        grace: seconds the subtree has to stop by itself; None (the
            default) or 0 cancel at once, ``math.inf`` only asks.

    Raises:
        TypeError: ``grace`` is not a number.
        ValueError: ``grace`` is NaN or negative.
    """
    if grace is not None:
        seconds = check_cancel_grace(grace, f"operation {self.name!r}.cancel(grace=...)")
        if seconds != 0.0:
            self.runtime._request_stop(self, reason, seconds)
            return
    after: After = []
    try:
        with self.runtime._lock:
            self._cancel_locked(reason, after)
    finally:
        # Also when a Ctrl-C cut the walk short: the wake-ups it queued
        # still run (the walk itself is redone by the next cancel).
        run_after(after)


def cancel_locked(
    self: AsyncOperation,
    reason: object,
    after: After,
    again: bool = False,
    _running: OperationState = OperationState.RUNNING,
    _cancelled: Outcome = Outcome.CANCELLED,
    _remote: OpKind = OpKind.REMOTE,
) -> None:
    """Walk the subtree iteratively and cancel every live node.

    A node whose token is already cancelled is skipped with its subtree:
    every non-shielded node below a cancelled one is cancelled too (a
    child born under a cancelled parent is born cancelled), so the walk
    would find nothing to do there. This makes a repeated cancel O(1).

    The exception is a walk that did not finish: on the main thread a
    Ctrl-C can land anywhere in it, after a token is marked but before
    the task parked under it is woken, or before its children are
    reached. ``_cancel_unfinished`` stays set on the walk's first node
    until the walk ends, and any later walk that meets such a node
    redoes its whole subtree; every step below is idempotent. With
    ``again`` (a Ctrl-C at a scope's exit) the walk redoes the whole
    subtree whatever its marks say.

    A redo also finishes the finalizations a Ctrl-C cut short (see
    ``_try_finalize_locked``): a node whose work has ended but which is
    not final, and a final node still flagged, which is still linked
    where the walk meets it, or is this node.
    """
    if self._final:
        if self._cancel_unfinished:
            self._try_finalize_locked(after)
        return
    if self._cancelled and not self._cancel_unfinished and not again:
        return
    redo = again or self._cancel_unfinished
    self._cancel_unfinished = True
    stack: list[AsyncOperation] = [self]
    unstarted: list[AsyncOperation] = []
    while stack:
        node = stack.pop()
        if node.cancel_reason is None:
            node.cancel_reason = reason
        # (The functions, not the node's methods: compiled, a C call.)
        if not cancel_token_locked(node, after) and redo:
            finish_token_cancel_locked(node, after)
        state = node._state
        if state is _running:
            if node._kind is _remote:
                # Its job (see OpKind.REMOTE) applies its executor's rule,
                # once the lock is released, like an on_cancel callback.
                job = node._task
                if job is not None:
                    after.append(job._on_cancel)
            else:
                node.runtime._on_cancel_running_locked(node, after)
            if redo and node._outcome is not None:
                unstarted.append(node)  # its work has ended: finalize it if it can
        elif state.final:
            # Final yet linked: a Ctrl-C cut its settling short.
            unstarted.append(node)
        elif node._transition_to_ended(_cancelled, None, None) or (
            redo and node._outcome is _cancelled
        ):
            # CREATED or PENDING: its work ends CANCELLED, and it never runs.
            unstarted.append(node)
            node.runtime._on_cancel_running_locked(node, after)
        child = node.first_child
        while child is not None:
            # Read first: a cancel of the child may unlink it.
            nxt = child.sibling_next
            if not child._shield:
                # Cancelled from outside, even if its own cancel came first.
                child._outside_cancel = True
                if not child._cancelled or redo:
                    stack.append(child)
                elif child._cancel_unfinished:
                    child._cancel_locked(reason, after)
            child = nxt
    # Deepest first, so that a CREATED parent whose children were all
    # unstarted becomes final in the same call. (A node that a climb
    # has finalized meanwhile returns at once.)
    for node in reversed(unstarted):
        node._try_finalize_locked(after)
    self._cancel_unfinished = False


def expire(self: AsyncOperation) -> None:
    """The deadline passed: cancel the subtree and mark it expired."""
    after: After = []
    with self.runtime._lock:
        self._expire_locked(after)
    run_after(after)


def expire_locked(self: AsyncOperation, after: After) -> None:
    """``expire`` under the runtime lock, leaving to ``after`` what runs outside it."""
    if self._final:
        return
    now = self.runtime.now()
    # When an outer deadline is due at the same instant, the outer
    # scope owns the timeout: it is the one that must raise
    # TimeoutError, and the inner one lets Cancelled pass.
    target = self
    node = self
    while not node._shield and node.parent is not None:
        node = node.parent
        if node._deadline is not None and node._deadline <= now and not node._cancelled:
            target = node
    if target._cancelled:
        return
    target._expired = True
    target._cancel_locked("deadline passed", after)


def cancel_token_locked(self: AsyncOperation, after: After) -> bool:
    """Mark this operation's token cancelled; False if it already was."""
    if self._cancelled:
        return False
    self._cancelled = True
    instruments = self.runtime._instruments
    if instruments is not None:
        instruments.note_cancelled_locked(self, after)
    rare = self._rare
    token = None if rare is None else rare.token
    if token is not None:
        token._about = (self.name, self.cancel_reason)
        token._cancel_locked(after)
    return True


def finish_token_cancel_locked(self: AsyncOperation, after: After) -> None:
    """Redo the token side of a cancel that a Ctrl-C cut short."""
    token = self._token
    if token is not None:
        if token._cancelled:
            token._release_waiters_locked()
        else:
            token._cancel_locked(after)
