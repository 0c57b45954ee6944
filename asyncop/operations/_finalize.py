"""How an operation ends: its work's outcome, then the node made final.

``AsyncOperation`` (``_node.py``) binds the functions below as its methods,
under the same names with a leading underscore:

- ``_end_work`` (from any thread) and ``_end_work_on_worker`` (the worker
  that ran the work) take the runtime lock and call
  ``_transition_to_ended``, which records how the operation's own work
  ended and finalizes the node if no child is live.
- ``_try_finalize_locked`` makes the node final once its work has ended and
  its children are gone, wakes its waiters, hands its outcome to its parent,
  then climbs to the parent, iteratively; ``_transition_to_final``
  (``_state.py``) writes the final state in one call. A finalization that a
  Ctrl-C cut short is finished by the next call that meets the node (see
  ``try_finalize_locked``).

Outcome of the operation's own work
-----------------------------------
``_outcome`` is None while the work has not ended, then VALUE, ERROR or
CANCELLED, once. This module owns it: ``_transition_to_ended`` is the only
code that writes it (``OperationFields.__init__`` sets None), and says
whether it happened: the cancel walk, which ends the work of operations that
never started, and a scope's or a remote job's end, which may race with an
abandon or a cancel, act on that answer. The final state follows from the
outcome and from the failures the children handed up (``_failures``):

- any failure (own error or a child's) -> FAILED;
- otherwise VALUE -> COMPLETED, even if a cancel arrived after the work
  finished (a value already produced is kept);
- otherwise CANCELLED.

A KeyboardInterrupt or SystemExit among the failures is never grouped: the
operation fails with it bare, the other failures in its ``__context__``, and
it is handed to the parent even from a supervised child.

A failure that nobody observes is logged when its operation is collected
(:class:`_Unobserved`); an operation that ends well carries no finalizer.

The collector
-------------
Compiled, a coroutine task's node is off the cyclic collector's lists
from the moment the runtime links it (``link_new_locked``) until its work
ends: the collector then neither visits it nor counts it in a pass, nor
in the survivors that bring on a full one. No garbage cycle can pass
through it meanwhile, as the runtime reaches it (its parent's children,
or the runtime's roots) until it is final. ``_transition_to_ended`` puts
it back on the lists before it stores the outcome (a value, an error and
its traceback: user objects, which can lead back to the node), and before
anything unlinks it; whatever the node held before (its function and
arguments, a cancel reason, callbacks, its token) is then on a tracked
object again, which a garbage cycle through them is collected through.

A Ctrl-C while finalizing
-------------------------
On the main thread (a ``cancel()`` that ends unstarted nodes, a sync
scope's exit) a Ctrl-C can land at any call, so ``_try_finalize_locked``
takes each node through three steps that a cut leaves in a state the next
call finishes:

1. Deciding how the node ends only reads: cut, the node is as it was.
2. ``_transition_to_final`` writes every field in one call, which a Ctrl-C
   can stop only before it starts.
3. Settling: the runtime's bookkeeping, unlinking from the parent and
   handing it the outcome, in one step with no call inside, then waking the
   waiters (each one off the list before it is woken), which find the node
   settled. Until it is done the node is flagged (``_cancel_unfinished``)
   and still linked, where a later cancel walk meets it; given a flagged
   final node, ``_try_finalize_locked`` settles it again.

A climb that finalizes a node whose cancel walk has not ended (the walk's
own node, flagged) keeps the parent links from there up until the climb
ends: a later ``cancel()`` of that node then finds what is left to finish
above it.
Readers without the lock
------------------------
The same flag tells a reader that saw the node final without the lock
(``op.done``, ``op.state``, ``op.wait()``, a scope's exit: with the GIL
off it runs beside this code) that step 3 may not be done: its end stamp,
its unlinking, the failure handed to the parent and the parent's cancel,
the runtime's bookkeeping. It then takes the lock once before it reads on
(``_settled``, in ``_waiting.py``): the flag is cleared under the lock,
once the node is settled.
"""

from __future__ import annotations

import _thread
import logging
from types import CodeType
from typing import TYPE_CHECKING, Any, final

from ..platform import _gc
from ._errors import Cancelled
from ._hooks import run_after
from ._state import OperationState, OpKind, Outcome, transition_to_final

if TYPE_CHECKING:  # (the stand-in's signatures, for cython.compiled below)
    from ..platform import pure_cython as cython
else:
    try:
        import cython
    except ImportError:  # run as Python, without Cython installed
        from ..platform import pure_cython as cython

if TYPE_CHECKING:
    from ._hooks import After
    from ._node import AsyncOperation

__all__ = [
    "end_work",
    "end_work_on_worker",
    "line_of",
    "transition_to_ended",
    "try_finalize_locked",
]

logger = logging.getLogger("asyncop")

_LockType = _thread.LockType


def end_work(
    self: AsyncOperation, outcome: Outcome, value: Any, error: BaseException | None
) -> None:
    """Record how the own work ended; finalize if no child is live.

    From any thread (a sync scope's exit comes here on the user's).
    """
    after: After = []
    # A with-statement, not acquire() then try, wherever a user thread
    # may take the lock: on the main thread, a Ctrl-C raised as acquire()
    # returns would land before the try and leave the lock held for good.
    with self.runtime._lock:
        ended = transition_to_ended(self, outcome, value, error, after)
        assert ended, f"{self.name!r} ended its work twice"
    if after:
        run_after(after)


def end_work_on_worker(
    self: AsyncOperation,
    outcome: Outcome,
    value: Any,
    error: BaseException | None,
    at: float | None = None,
) -> None:
    """``_end_work`` for the worker that ran the work: every operation ends here.

    A worker thread never runs signal handlers, so it may take the lock
    with acquire() then try, which costs half a with-statement. ``at``: the
    worker's reading of the runtime's clock as the work ended, if it has one
    (see ``try_finalize_locked``).
    """
    after: After = []
    lock = self.runtime._lock
    lock.acquire()
    try:
        ended = transition_to_ended(self, outcome, value, error, after, at)
        assert ended, f"{self.name!r} ended its work twice"
    finally:
        lock.release()
    if after:
        run_after(after)


def transition_to_ended(
    self: AsyncOperation,
    outcome: Outcome,
    value: Any,
    error: BaseException | None,
    after: After | None = None,
    at: float | None = None,
    _cancelled: Outcome = Outcome.CANCELLED,
    _error: Outcome = Outcome.ERROR,
) -> bool:
    """No outcome -> ``outcome``: the operation's own work has ended.

    Drops the work's function and arguments, then, with ``after``,
    finalizes the node if no child is live (the cancel walk, which passes
    none, finalizes the nodes it ended itself, deepest first). Returns
    False, and changes nothing, when the work had ended already. Under the
    runtime lock.
    """
    # Invariant: the work ends once; what ended it first decides.
    if self._outcome is not None:
        return False
    if cython.compiled:
        # A task's node is off the collector's lists while it runs (see
        # "The collector" above): from here on it holds an outcome, a user
        # object, and it is soon unlinked, so a garbage cycle can pass it.
        _gc.track(self)
    self._outcome = outcome
    self._value = value
    self._error = error
    self._fn = None
    self._args = ()
    if outcome is _cancelled:
        self._interrupted = True
    elif outcome is _error and self._failures and not isinstance(error, Cancelled):
        # Children failed before the work did: the group lists the failures
        # in the order they happened, as trio's and asyncio's do.
        self._failures.append(error)  # type: ignore[arg-type]
    if after is not None:
        try_finalize_locked(self, after, at)
    return True


def try_finalize_locked(
    self: AsyncOperation,
    after: After,
    at: float | None = None,
    _value: Outcome = Outcome.VALUE,
    _error: Outcome = Outcome.ERROR,
    _scope: OpKind = OpKind.SCOPE,
    _completed: OperationState = OperationState.COMPLETED,
    _failed: OperationState = OperationState.FAILED,
    _cancelled: OperationState = OperationState.CANCELLED,
) -> None:
    """Make this node final if its work and children have ended; climb up.

    Iterative: a chain of nodes each waiting only for its last child
    finalizes bottom-up in one loop, however deep. Finalizing one node
    happens in the loop, in the three steps that a Ctrl-C cannot tear
    (see "A Ctrl-C while finalizing" in the module docstring); only
    waking its waiters, a failure's ending (``_failed_ending``) and the
    links a climb kept (``_drop_kept_links``) call out. Every node that
    becomes final in one climb ends at one reading of the runtime's clock:
    ``at`` if the caller has one, else the first node's.
    """
    node: AsyncOperation | None = self
    kept: AsyncOperation | None = None  # first node of the climb whose links stay
    while node is not None and node._outcome is not None and node.first_child is None:
        state = node._state
        parent = node.parent
        if state.final:
            if not node._cancel_unfinished:
                break  # final and settled
            # A Ctrl-C cut its settling short: settle it again.
            taken_over = (
                state is _failed and parent is not None and _taken_over(node, parent, node._error)
            )
            if kept is None:
                kept = node
        else:
            if node._outcome is _error or (node._rare is not None and node._rare.failures):
                state, error, taken_over, report = _failed_ending(node, parent)
            else:
                error = report = None
                taken_over = False
                if node._outcome is _value and not (
                    # A scope's block has no value worth keeping: a scope whose cancel
                    # interrupted its children ended CANCELLED, however its block left.
                    node._kind is _scope and node._cancelled and node._interrupted
                ):
                    state = _completed
                else:
                    state = _cancelled
            if node._cancel_unfinished and kept is None:
                kept = node  # its cancel walk is still under way
            ended = transition_to_final(node, state, error, taken_over, report)
            assert ended, f"{node.name!r} was final already"
        node.runtime._on_final_locked(node, after, at)
        at = node._ended_at
        if parent is not None:
            prev = node._sibling_prev
            if prev is not None:  # still linked
                # Unlink from the parent's child list, in O(1), and hand
                # it the outcome: no call before the last line. (The first
                # child's back link is the last child.)
                nxt = node.sibling_next
                first = parent.first_child
                if first is node:
                    parent.first_child = nxt
                else:
                    prev.sibling_next = nxt
                if nxt is not None:
                    nxt._sibling_prev = prev
                elif first is not node:
                    first._sibling_prev = prev  # type: ignore[union-attr]  # (linked)
                node.sibling_next = None
                node._sibling_prev = None
                if state is _cancelled:
                    parent._interrupted = True
                elif taken_over:
                    if parent._failures is None:
                        parent._failures = [node._error]  # type: ignore[list-item]
                    else:
                        parent._failures.append(node._error)  # type: ignore[arg-type]
            if taken_over:
                parent._cancel_locked(f"child {node.name!r} failed", after)
        if kept is None:
            node.parent = None
            node._cancel_unfinished = False
        # Last: a thread woken now may read the node at once, without the
        # lock (with the GIL off, while this thread goes on), and must find
        # it settled, unlinked from its parent.
        if node._waiters is not None:
            _wake_waiters_locked(node, after)
        node = parent
    if kept is not None:
        _drop_kept_links(kept, node)


def _wake_waiters_locked(node: AsyncOperation, after: After) -> None:
    """Wake what waits for final ``node``: threads now, callbacks in ``after``."""
    waiters = node._waiters
    assert waiters is not None
    # In reverse order since the transition: the last is the first to wake.
    # Each leaves the list before it is woken.
    while waiters:
        waiter = waiters[-1]
        if type(waiter) is _LockType:
            del waiters[-1]
            # A thread blocked in wait(): release it now, under the lock
            # (one C call), so that its OS wake-up starts before this
            # worker's remaining bookkeeping.
            waiter.release()  # pyright: ignore[reportFunctionMemberAccess]
        else:
            del waiters[-1]
            after.append(waiter)  # type: ignore[arg-type]
    node._waiters = None


def _failed_ending(
    node: AsyncOperation, parent: AsyncOperation | None
) -> tuple[OperationState, BaseException | None, bool, _Unobserved | None]:
    """How a node ends whose own work raised, or to which children handed failures.

    Returns its final state, the error it keeps, whether ``parent`` takes
    that error over, and the report that logs the error if nobody observes
    it. An own error that is only a ``Cancelled``, with no child's failure
    beside it, ends the node CANCELLED. Only reads the node (step 1 of
    ``try_finalize_locked``).
    """
    failures = node._failures
    own = node._error if node._outcome is Outcome.ERROR else None
    if own is not None and isinstance(own, Cancelled):
        own = None
    if own is None and not failures:
        return OperationState.CANCELLED, None, False, None
    report = None if node._observed else _Unobserved(node)
    if own is None or (failures and any(failure is own for failure in failures)):
        errors = list(failures)  # type: ignore[arg-type]
    else:
        # (Children that failed after the work did come after its error.)
        errors = [own, *failures] if failures else [own]
    error = _failure(node, errors, bool(failures))
    taken_over = parent is not None and _taken_over(node, parent, error)
    return OperationState.FAILED, error, taken_over, report


def _drop_kept_links(kept: AsyncOperation | None, end: AsyncOperation | None) -> None:
    """Clear the parent links a climb kept, from ``kept`` up to ``end`` (excluded)."""
    while kept is not None and kept is not end:
        above = kept.parent
        kept.parent = None
        kept._cancel_unfinished = False
        kept = above


_INTERRUPTS = (KeyboardInterrupt, SystemExit)


def _taken_over(node: AsyncOperation, parent: AsyncOperation, error: BaseException | None) -> bool:
    """Whether ``parent`` takes over ``error``, the failure ``node`` ends with."""
    return node._propagates and (
        not (node._supervised or parent._supervise)
        # Ctrl-C and SystemExit are never kept on a supervised child.
        or isinstance(error, _INTERRUPTS)
    )


def _failure(node: AsyncOperation, errors: list[BaseException], grouped: bool) -> BaseException:
    """The error a node that failed with ``errors`` ends with.

    One error of a plain operation's own work stays bare; otherwise (and
    always for a scope, whose block's error is wrapped even alone) they are
    grouped. A KeyboardInterrupt or SystemExit is never grouped: the first
    one wins over the rest, which it carries as its ``__context__``, as
    asyncio's TaskGroup re-raises it bare.
    """
    for exc in errors:
        if isinstance(exc, _INTERRUPTS):
            rest = [other for other in errors if other is not exc]
            context = exc.__context__
            if (
                rest
                and isinstance(context, BaseExceptionGroup)
                and list(context.exceptions) == rest
            ):
                # Carried already: a Ctrl-C cut the node's finalization short
                # after this, and the node is finalized again.
                return exc
            if rest:
                group = BaseExceptionGroup(f"operation {node.name!r} failed", rest)
                if (
                    context is not None
                    and context not in rest
                    and not isinstance(context, Cancelled)
                ):
                    # Keep what the interrupt was raised over, one link further.
                    group.__context__ = context
                exc.__context__ = group
            return exc
    if len(errors) == 1 and not grouped and node._kind is not OpKind.SCOPE:
        return errors[0]
    return BaseExceptionGroup(f"operation {node.name!r} failed", errors)


def line_of(code: CodeType | None, lasti: int) -> int:
    """The line of instruction offset ``lasti`` in ``code`` (0 if unknown)."""
    if code is None:
        return 0
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line if line is not None else code.co_firstlineno
    return code.co_firstlineno


@final
class _Unobserved:
    """Logs a failure nobody observed, when its operation is collected.

    Only a failed operation has one, so the operations that end well carry
    no finalizer: collecting them runs no Python code.
    """

    __slots__ = ("code", "error", "lasti", "name")

    def __init__(self, op: AsyncOperation) -> None:
        self.name = op.name
        self.code = op._code
        self.lasti = op._lasti
        # Set by the transition to FAILED; None again once observed.
        self.error: BaseException | None = None

    def __del__(self) -> None:
        try:
            error = self.error
        except AttributeError:  # a Ctrl-C stopped __init__: it was never armed
            return
        if error is not None:
            code = self.code
            logger.error(
                "asyncop: operation %r failed and nobody observed the failure (made at %s:%d)",
                self.name,
                "<unknown>" if code is None else code.co_filename,
                line_of(code, self.lasti),
                exc_info=error,
            )
