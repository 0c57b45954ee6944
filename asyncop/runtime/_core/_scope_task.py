"""``ScopeDone``: the wait of a scope's exit for its children.

An ``async with scope()`` exit whose block ended with no error takes one of
two roads, both through the same transitions:

- no child left: it ends the block (``_end_work_on_worker``), which makes
  the scope final at once, and returns without a wait;
- children still running: it awaits ``ScopeDone(op, end_block=True)``, and
  the worker stepping the task ends the block, subscribes the task to the
  scope's end and suspends it, in one locked step (``suspend_for_children``,
  which ``_wait_on`` in ``_task.py`` calls for this event alone).

Every other exit ends the block first (``Scope._end_block``), then waits on
a plain ``ScopeDone`` until the scope's operation is final. The wait is not
interrupted by a cancel (the cancel reaches the children instead), and is
not a cancellation point on entry: it must happen. A scope that turns out
final already when the wait starts (its last child ended meanwhile) is a
ready event: ``suspend_for_children`` declines, and ``_wait_on``'s general path arms it
(``_arm_locked`` fires at once) and the task goes on without suspending.

Once the wait is over, the exit raises what the block came to without a
misleading ``__context__`` (``raised_clean``, ``throw_clean``). See
``_scope.py`` for the rules of scopes, and ``_block.py`` for the entry.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, NoReturn

from ...operations import AsyncOperation, Outcome, run_after, transition_to_ended
from ._waker import Subscription, resolve

try:
    import cython  # pyright: ignore[reportMissingImports]
except ImportError:  # run as Python, without Cython installed
    from ...platform import pure_cython as cython
if (
    TYPE_CHECKING or not cython.compiled
):  # (compiled, _scope_task.pxd cimports it: ScopeDone's C base)
    from ._event import WaitEvent

if TYPE_CHECKING:
    from ...operations import After
    from ._task import TaskState

__all__ = ["ScopeDone", "raised_clean", "scope_done", "suspend_for_children", "throw_clean"]


# Final: an extension type when compiled (see _scope_task.pxd), which no class extends.
class ScopeDone(WaitEvent):
    """Wait, without being interruptible, until a scope operation is final.

    With ``end_block``, the wait first records that the scope's block ended
    with no error, in the same locked step as it subscribes.
    """

    # The mark typing.final leaves, which an extension type cannot take as a decorator.
    __final__ = True

    __slots__ = ("end_block", "op")
    cancellable = False
    entry_checked = False
    arms_locked = True

    def __init__(self, op: AsyncOperation, end_block: bool = False) -> None:
        self.op = op
        self.end_block = end_block

    def _arm_locked(self, sub: Subscription) -> None:
        # (After suspend_for_children declined: the scope is final, and
        # the task goes on without suspending.)
        op = self.op
        if op._final:
            sub.fire()
        else:
            op._add_waiter_locked(sub.fire)

    def _disarm(self, sub: Subscription) -> None:
        # The waiter is the subscription's fire, told by equality: nothing
        # in the subscription points back at it (no cycle for the collector
        # to find). The usual end, the scope becoming final, drops every
        # waiter for good: nothing is left to take back then.
        op = self.op
        if op._waiters is not None:
            op._remove_waiter(sub.fire)

    def _describe(self) -> str:
        return f"the children of scope {self.op.name!r}"


def scope_done(op: AsyncOperation, end_block: bool = False) -> ScopeDone:
    """``ScopeDone(op, end_block)``, as a scope's exit makes it: compiled, with no class call."""
    ev = ScopeDone.__new__(ScopeDone)
    ev.op = op
    ev.end_block = end_block
    return ev


def suspend_for_children(ev: ScopeDone, task: TaskState, _value: Outcome = Outcome.VALUE) -> bool:
    """Suspend ``task`` until ``ev``'s scope is final, in one locked step; True if it did.

    Called by the worker stepping ``task`` (which never runs signal
    handlers: the lock is taken with acquire() then try), for a
    ``ScopeDone`` alone. With ``end_block`` it first ends the block, which
    finalizes the scope if no child is left (what that wakes runs once the
    lock is free). False when the scope is final: nothing is subscribed,
    and the general path finds the event ready.
    """
    op = ev.op
    waker = task  # (a Waker: typed so in _scope_task.pxd)
    after: After | None = None
    runtime = op.runtime  # (a kernel: typed so in _scope_task.pxd)
    lock = runtime._lock
    lock.acquire()
    try:
        if ev.end_block:
            ev.end_block = False
            # With a child left nothing can become final here: no climb
            # to try, nothing to run after.
            if op.first_child is None:
                after = []
            if not transition_to_ended(op, _value, None, None, after):
                after = None  # ended already, abandoned: a plain wait
        if not op._final:
            sub = waker._new_wait(ev, resolve)
            # (op._add_waiter_locked(sub.fire), in C: the waiter list is
            # the node's field.)
            waiters = op._waiters
            if waiters is None:
                op._waiters = [sub.fire]
            else:
                waiters.append(sub.fire)
            if waker._transition_to_waiting():
                task.cancellable = False
                return True
    finally:
        lock.release()
    if after:
        run_after(after)
    return False


def raised_clean(error: BaseException) -> bool:
    """Whether a plain ``raise error`` gives it no misleading context.

    It does unless the context it would get (the exception being handled,
    else the one it has) is ``error`` or one of its members: then the exit
    raises through :func:`throw_clean`. The common case, a ``Cancelled`` made
    for the exit, takes no detour: compiled, each function an exception
    leaves adds to its traceback, at a cost.
    """
    context = sys.exception()
    if context is None:
        context = error.__context__
    return context is None or not _contains(error, context)


def throw_clean(error: BaseException) -> NoReturn:
    """Raise ``error`` with no reference cycle and no misleading context.

    A group raised where one of its members is being handled (the block's
    own error, at the exit) would get that member as ``__context__``; the
    context is dropped then. The frame forgets ``error`` as it unwinds, so
    the traceback does not keep the exception alive through it.
    """
    try:
        raise error
    except BaseException as raised:
        if raised.__context__ is not None and _contains(raised, raised.__context__):
            raised.__context__ = None
        raise
    finally:
        del error


def _contains(error: BaseException, inner: BaseException) -> bool:
    if error is inner:
        return True
    if isinstance(error, BaseExceptionGroup):
        return any(_contains(member, inner) for member in error.exceptions)
    return False
