"""The cancel walk: how a cancel reaches an operation's subtree.

``AsyncOperation.cancel()`` (in ``_node.py``) takes the runtime lock and
calls ``_cancel_locked``, the walk below, which the class binds as a method
like every function here (``_cancel_locked``, ``_expire``,
``_cancel_token_locked``, ``_finish_token_cancel_locked``).

The walk goes down the subtree with an explicit stack, however deep, and
leaves shielded subtrees alone. A CREATED or PENDING node ends its work
CANCELLED at once and is finalized with the unstarted nodes below it; a
RUNNING one has its token cancelled, and the runtime wakes it where it
waits (``_on_cancel_running_locked``). On the main thread a Ctrl-C can cut
the walk short anywhere: the node it started from stays flagged
(``_cancel_unfinished``), and the next walk that meets it redoes it, as it
redoes a finalization a Ctrl-C cut short (see ``_finalize.py``).

A deadline's timer calls ``_expire``, which cancels the subtree of the
outermost operation whose deadline is due and marks it expired.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._hooks import run_after
from ._state import OperationState, OpKind, Outcome, _is_final

if TYPE_CHECKING:
    from ._hooks import After
    from ._node import AsyncOperation

__all__ = ["cancel_locked", "cancel_token_locked", "expire", "finish_token_cancel_locked"]

_CREATED = OperationState.CREATED
_PENDING = OperationState.PENDING
_RUNNING = OperationState.RUNNING
# (An enum member read through its class costs a lookup: hot paths use these.)
_NO_OUTCOME, _VALUE, _ERROR = Outcome.NONE, Outcome.VALUE, Outcome.ERROR
_CANCELLED_OUTCOME, _SCOPE, _REMOTE = Outcome.CANCELLED, OpKind.SCOPE, OpKind.REMOTE


def cancel_locked(
    self: AsyncOperation, reason: object, after: After, *, again: bool = False
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
    if _is_final(self._state):
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
        if not node._cancel_token_locked(after) and redo:
            node._finish_token_cancel_locked(after)
        state = node._state
        if state is _CREATED or state is _PENDING:
            if node._outcome is _NO_OUTCOME:
                node._outcome = _CANCELLED_OUTCOME
                node._fn = None
                node._args = ()
                unstarted.append(node)
                node.runtime._on_cancel_running_locked(node, after)
            elif redo and node._outcome is _CANCELLED_OUTCOME:
                unstarted.append(node)
                node.runtime._on_cancel_running_locked(node, after)
        elif state is _RUNNING:
            if node._kind is _REMOTE:
                # Its job (see OpKind.REMOTE) applies its executor's rule,
                # once the lock is released, like an on_cancel callback.
                job = node._task
                if job is not None:
                    after.append(job._on_cancel)
            else:
                node.runtime._on_cancel_running_locked(node, after)
            if redo and node._outcome is not _NO_OUTCOME:
                unstarted.append(node)  # its work has ended: finalize it if it can
        else:
            # Final yet linked: a Ctrl-C cut its settling short.
            unstarted.append(node)
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
    """The deadline timer fired: cancel the subtree and mark it expired."""
    after: After = []
    runtime = self.runtime
    with runtime._lock:
        if _is_final(self._state):
            return
        now = runtime.now()
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
    run_after(after)


def cancel_token_locked(self: AsyncOperation, after: After) -> bool:
    """Mark this operation's token cancelled; False if it already was."""
    if self._cancelled:
        return False
    self._cancelled = True
    instruments = self.runtime._instruments
    if instruments is not None:
        instruments.note_cancelled_locked(self, after)
    token = self._token
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
