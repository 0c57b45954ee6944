"""Ending the blocks of scopes that nobody will leave the usual way.

A scope's block is its operation's own work: until the block ends, the
operation stays RUNNING, and so does everything above it. When the code
that would leave the block never gets to, the block is *abandoned*: its
tree is cancelled and the block ended as if it had raised ``Cancelled``,
without waiting for the children (they end by themselves, once cancelled).

- :func:`abandon_scope`: a block whose entry was interrupted, or whose task
  ended with the scope still open.
- :func:`unwind_to`: scopes an async generator held open across a ``yield``,
  exited out of order; the inner ones are abandoned.
- :func:`close_open_scopes`: the scopes a finished task left open (an async
  generator holding one across its last ``yield``).
- :func:`abandon_open_blocks`: at interpreter exit, the sync scopes the
  main thread entered and never left.
- :class:`ExitAttribute`: ``Scope.__exit__``, watched so that a Ctrl-C
  landing as the exit is called, before its first line, still ends the
  block.
"""

from __future__ import annotations

import functools
import weakref
from typing import TYPE_CHECKING, Any

from ...operations import AsyncOperation, OpKind, Outcome, run_after

if TYPE_CHECKING:
    from types import CodeType, TracebackType

    from ...operations import After, ThreadState
    from ._scope import Scope
    from ._task import TaskState

__all__ = [
    "ExitAttribute",
    "abandon_open_blocks",
    "abandon_scope",
    "close_open_scopes",
    "made_before",
    "unwind_to",
]


def abandon_scope(op: AsyncOperation, reason: str) -> bool:
    """End the block of a scope nobody will exit, so it can become final.

    Returns False when the block had ended already (its tree is cancelled
    all the same).
    """
    after: After = []
    try:
        with op.runtime._lock:
            op._cancel_locked(reason, after, again=True)
            return op._transition_to_ended(Outcome.CANCELLED, None, None, after)
    finally:
        run_after(after)


def abandon_open_blocks(state: ThreadState, reason: str) -> list[AsyncOperation]:
    """End the blocks of the sync scopes a thread is inside, innermost first.

    For interpreter exit: the main thread may have entered a scope
    (``rt.scope().__enter__()``) and never left it. Each block is ended
    cancelled, as if the thread had left it, so that shutdown can cancel
    the tree and wait for it. Returns the scope operations ended.
    """
    ended: list[AsyncOperation] = []
    op = state.op
    state.op = None
    # A sync scope entered inside another one is its child: the parents
    # up to the first operation that is no open scope are this thread's.
    while op is not None and op._kind is OpKind.SCOPE and op._outcome is None:
        # Read first: a scope with no child left becomes final as its block
        # ends, and a final node no longer names its parent.
        parent = op.parent
        abandon_scope(op, reason)
        ended.append(op)
        op = parent
    return ended


def unwind_to(task: Any, op: AsyncOperation) -> RuntimeError:
    """Close the scopes opened inside ``op`` that are still open; make the error.

    An async generator that holds a scope open across a ``yield`` lets its
    caller exit an enclosing scope first. The inner scopes are closed
    (cancelled, their blocks ended) so that every operation can still end.
    """
    stack: list[AsyncOperation] = [*(task.outer or ()), task.current]
    # Still in the stack: a scope closed earlier has its block ended.
    index = stack.index(op)
    inner = stack[index + 1 :]
    for scope_op in reversed(inner):
        abandon_scope(scope_op, f"scope {op.name!r} was exited before this scope")
    task.current = stack[index - 1]
    del task.outer[index - 1 :]
    names = ", ".join(repr(node.name) for node in inner)
    return RuntimeError(
        f"scope {op.name!r} was exited while scope {names} inside it was still open "
        "(an async generator holding a scope across a yield?); the inner scope was "
        "cancelled and closed; close scopes in the reverse order of opening them"
    )


def close_open_scopes(task: TaskState, error: BaseException | None) -> RuntimeError:
    """Close the async scopes a finished task left open; make the task's error."""
    outer = task.outer
    assert outer
    scopes = [*outer[1:], task.current]
    for scope_op in reversed(scopes):
        abandon_scope(scope_op, f"task {task.task.name!r} ended with this scope open")
    task.current = task.task
    task.outer = None
    names = ", ".join(repr(node.name) for node in scopes)
    failure = RuntimeError(
        f"task {task.task.name!r} ended while scope {names} it entered was still open "
        "(an async generator holding a scope across a yield?); the scope was cancelled "
        "and closed; close every 'async with scope()' before the task returns"
    )
    failure.__context__ = error
    return failure


def _exit_unbound(
    scope: Scope,
    exc_type: type[BaseException] | None,
    exc: BaseException | None,
    tb: TracebackType | None,
) -> bool:
    """``Scope.__exit__(scope, ...)`` called through the class (``contextlib.ExitStack``)."""
    return scope._leave(exc)


class ExitAttribute:
    """``Scope.__exit__``: the exit, watched until it has ended the block.

    A signal handler (a Ctrl-C) runs at the entry of any Python function,
    so a KeyboardInterrupt may land as the exit is called, before any line
    of it runs, and no ``try`` inside it can catch that one. ``with`` looks
    ``__exit__`` up before it calls ``__enter__`` and holds what it got on
    the frame's stack until the statement ends, however it ends: here that
    is a ``partial`` (calling it runs no Python code where a signal could
    land) under a weak reference whose callback ends the block should the
    partial be freed before the exit has (``Scope._left_unseen``). An exit
    that ends the block drops the weak reference, and with it the callback.
    """

    def __get__(self, scope: Scope | None, owner: type | None = None) -> Any:
        if scope is None:
            return _exit_unbound
        leave = functools.partial(_exit_unbound, scope)
        if scope._op is None and scope._watch is None:
            # (Only the with-statement's own lookup, before the entry.)
            scope._watch = weakref.ref(leave, scope._exit_freed)
        return leave


def made_before(exc: BaseException, code: CodeType) -> AsyncOperation | None:
    """The scope operation that the call running ``code`` made before ``exc`` stopped it.

    ``code`` is that of ``new_operation``. A Ctrl-C can land inside the call
    after the operation was linked into the tree, before it was returned.
    The call's frame is in the exception's traceback, and its locals still
    hold the operation: no other thread's scope can be mistaken for it.
    """
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code is code:
            op = frame.f_locals.get("op")
            if type(op) is AsyncOperation and op._kind is OpKind.SCOPE:
                return op
            return None
        tb = tb.tb_next
    return None
