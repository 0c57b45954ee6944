"""The ``async with scope()`` side of scopes that runs on every entry and exit.

- ``open_in_task``: the entry of an ``async with`` with no deadline, the
  commonest one, written out for the worker stepping the task;
- ``ScopeDone``: the exit's wait for the children, which can also record
  that the block ended.

See ``_scope.py`` for the rules of scopes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, final

from ..operations import AsyncOperation, OperationState, OpKind, Outcome, _user_frame, run_after
from ._awaitables import forget_end_waiter
from ._waker import Subscription, WaitEvent, WakerStatus, resolve

if TYPE_CHECKING:
    from ..operations import After
    from ._kernel import Kernel
    from ._task import TaskState

__all__ = ["ScopeDone", "open_in_task"]

_RUNNING = OperationState.RUNNING
_COMPLETED = OperationState.COMPLETED
_FAILED = OperationState.FAILED
_CANCELLED = OperationState.CANCELLED
_SCOPE = OpKind.SCOPE
_WAITING = WakerStatus.WAITING
# (An enum member read through its class costs a lookup: hot paths use these.)
_NO_OUTCOME, _VALUE = Outcome.NONE, Outcome.VALUE


def open_in_task(
    runtime: Kernel, parent: AsyncOperation, task: Any, name: str, shield: bool, supervise: bool
) -> AsyncOperation:
    """``Scope._open`` and ``_new_scope`` for an ``async with`` with no deadline, written out.

    It runs on the worker stepping ``task``, which never runs signal
    handlers: the lock is taken with acquire() then try. The operation is
    the task's scope before it is linked, so a cancel that finds it can
    wake the task.
    """
    # __aenter__ -> here: the user's frame is 3 up.
    code, lasti = _user_frame(3)
    op: AsyncOperation = AsyncOperation(parent.runtime, _SCOPE, None, (), name, None, code, lasti)
    op._propagates = False  # its error leaves through the block, not to the parent
    if shield:
        op._shield = True
    if supervise:
        op._supervise = True
    op._task = task
    after: After | None = None
    lock = runtime._lock
    lock.acquire()
    try:
        if parent._state is _RUNNING:
            parent._append_child_locked(op)  # (a running parent takes the child)
        else:
            parent._link_child_locked(op)  # (raises for a final parent)
        op._state = _RUNNING  # (the transition of a new scope: nothing can be in the way)
        op._started_at = op._created_at
        if parent._cancelled and not shield:
            after = []
            op.cancel_reason = parent.cancel_reason
            op._cancel_token_locked(after)
            # Born cancelled: only a cancel of the enclosing operation does that.
            op._outside_cancel = True
    finally:
        lock.release()
    if after:
        run_after(after)
    instruments = runtime._instruments
    if instruments is not None:
        instruments.emit(runtime, instruments.spawned, op)
    return op


@final
class ScopeDone(WaitEvent):
    """Wait, without being interruptible, until a scope operation is final.

    With ``end_block``, the wait first records that the scope's block ended
    with no error (unless its block has ended already).
    """

    __slots__ = ("end_block", "op")
    cancellable = False
    entry_checked = False

    def __init__(self, op: AsyncOperation, end_block: bool = False) -> None:
        self.op = op
        self.end_block = end_block

    def _arm(self, sub: Subscription) -> None:
        # when_ended, written out for the worker that steps the task (which
        # never runs signal handlers): the lock is taken with acquire() then try.
        op = self.op
        after: After | None = None
        lock = op.runtime._lock
        lock.acquire()
        try:
            after = self._end_block_locked()
            state = op._state
            if not (state is _COMPLETED or state is _FAILED or state is _CANCELLED):
                self._add_waiter_locked(sub)
                return  # (nothing was made final: nothing to run after)
        finally:
            lock.release()
        if after:
            run_after(after)
        sub.fire()

    def _add_waiter_locked(self, sub: Subscription) -> None:
        """Have the scope's end fire ``sub``; the scope is not final yet."""
        op = self.op
        deliver = sub.handle = sub.fire
        waiters = op._waiters
        if waiters is None:
            op._waiters = [deliver]
        else:
            waiters.append(deliver)

    def _end_block_locked(self) -> After | None:
        """Record the end of the scope's block, once; what to run after, if it became final.

        ``_end_work_locked(VALUE)``, written out: a scope's block has no
        value, function or arguments to record or drop, and only a scope
        with no child left can become final here.
        """
        if not self.end_block:
            return None
        self.end_block = False
        op = self.op
        if op._outcome is not _NO_OUTCOME:
            return None
        op._outcome = _VALUE
        if op.first_child is not None:
            return None
        after: After = []
        op._try_finalize_locked(after)
        return after

    def _suspend(self, task: TaskState) -> bool:
        """Suspend ``task`` on this wait, if the scope is not final; True if it did.

        ``_wait_on`` for this event, written out by the worker stepping the
        task, in one locked step: end the block (``end_block``), subscribe
        and suspend. The wait is not cancellable, and has no entry check.
        When the scope is final already, it returns False having changed
        nothing but the block's end: ``_wait_on`` then goes on as for any
        event, and finds it ready.
        """
        op = self.op
        waker = task
        after: After | None = None
        lock = op.runtime._lock
        lock.acquire()  # (worker thread only: it never runs signal handlers)
        try:
            after = self._end_block_locked()
            state = op._state
            if not (state is _COMPLETED or state is _FAILED or state is _CANCELLED):
                self._add_waiter_locked(waker._new_wait(self, resolve))
                waker.status = _WAITING
                task.cancellable = False
                return True  # (nothing was made final: nothing to run after)
        finally:
            lock.release()
        if after:
            run_after(after)
        return False

    def _disarm(self, sub: Subscription) -> None:
        forget_end_waiter(self.op, sub)

    def _describe(self) -> str:
        return f"the children of scope {self.op.name!r}"
