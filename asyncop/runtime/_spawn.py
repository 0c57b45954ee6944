"""``AsyncOperation.spawn``: a child made, linked and queued in one locked step.

The commonest spawn, an ``async def`` function spawned by a coroutine task
into its own scope, is written out here (``spawn_child``); every other
spawn goes through ``Kernel._new_operation``, which handles each kind, a
user thread's submit and a parent that is cancelled or not running.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from inspect import CO_ASYNC_GENERATOR, CO_COROUTINE
from types import FunctionType
from typing import TYPE_CHECKING, Any

from ..operations import (
    AsyncOperation,
    OperationState,
    OpKind,
    _thread_local,
    _user_frame,
    run_after,
    thread_state,
)
from ._task import TaskState
from ._worker import WorkerState

if TYPE_CHECKING:
    from ..operations import After
    from ._kernel import Kernel

__all__ = ["spawn_child"]

_PENDING = OperationState.PENDING
_RUNNING = OperationState.RUNNING
_CORO = OpKind.CORO
_BUSY = WorkerState.BUSY
_ASYNC_FLAGS = CO_COROUTINE | CO_ASYNC_GENERATOR
_copy_context = contextvars.copy_context


def spawn_child(
    self: Kernel,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    parent: AsyncOperation,
    name: str | None,
    supervise: bool,
) -> AsyncOperation:
    """Make a child of ``parent`` that runs ``fn(*args)``, link it and queue it.

    Bound as ``Kernel._spawn``, and called by ``parent.spawn`` only: the
    parent is an operation of this runtime. The path written out is a
    worker's spawn of an ``async def`` function under a running parent that
    is not cancelled: a worker never runs signal handlers, so the lock is
    taken with acquire() then try, and a worker runs the ready queue
    itself, so nobody is woken early. With instruments installed, only a
    task's spawn in the default mode takes it: the child cannot run before
    the task's step ends, so ``spawned`` still comes before its first step.
    """
    try:
        state = _thread_local.state  # (thread_state(), inline)
    except AttributeError:
        state = thread_state()
    if (
        type(fn) is not FunctionType
        or fn.__code__.co_flags & _ASYNC_FLAGS != CO_COROUTINE
        or state.worker is None
        or not (name is None or type(name) is str)
        or (self._instruments is not None and (self._parallel or state.task is None))
    ):
        return self._new_operation(
            fn, args, parent=parent, name=name, submit=True, supervise=supervise
        )
    # spawn() -> here: the user's frame is 3 up.
    code, lasti = _user_frame(3)
    parent_ctx = parent._ctx
    if parent_ctx is None:
        ctx = _copy_context()  # a scope: the spawner's context, copied
    else:
        # The live context in the parent's own code, else a copy of the parent's.
        task = state.task
        running = state.op if task is None else task.current
        ctx = _copy_context() if running is parent else parent_ctx.copy()
    owner: Any = self  # (the node's runtime: the Runtime this kernel is the core of)
    op: AsyncOperation = AsyncOperation(
        owner, _CORO, fn, args, fn.__qualname__ if name is None else name, ctx, code, lasti
    )
    if supervise:
        op._supervised = True
    op._task = waker = TaskState(op, self)
    after: After | None = None
    lock = self._lock
    lock.acquire()
    try:
        if parent._state is _RUNNING and not parent._cancelled:
            parent._append_child_locked(op)
            op._state = _PENDING  # (_transition_to_pending, inline)
            worker = state.worker
            if (
                state.op is None
                and not state.keep_next_push
                and worker.runtime is self
                and worker.state is _BUSY
            ):
                # _push_locked, inline: a task queued by this worker's own
                # step, which runs the queue when the step ends.
                self._queue_seq = waker.queued_at = self._queue_seq + 1
                self._ready.append(op)
            else:
                self._push_locked(op, state)
        else:
            # Final (refused), cancelled (born cancelled) or not started yet.
            after = []
            self._link_new_locked(op, parent, shield=False, submit=True, state=state, after=after)
    finally:
        lock.release()
    if after:
        run_after(after)
    instruments = self._instruments
    if instruments is not None:
        # Queued already, but no other worker steps it before this task's
        # step ends: this worker holds the lane (see the check above).
        instruments.emit(self, instruments.spawned, op)
    return op
