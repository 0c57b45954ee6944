"""Scope blocks a task enters and leaves without an await, and what a task can ask of its tree.

``async with scope()`` never awaits on its way in: its entry is
:func:`enter_in_task`, which makes the scope's operation, links it under the
task's innermost scope and makes it the task's current one (the operation
every await checks for a cancel). Its way out waits for the children.

A library whose own cancel scopes are entered with a plain ``with`` inside
a task (anyio's, as trio's are) builds them on asyncop scopes with the same
entry and :func:`leave_in_task`, a way out that does not wait: the block
ends, the task's current scope goes back to the enclosing one, and the
scope's operation ends once its children have (a cancel scope has none of
its own, unless something spawned into ``current_operation()`` inside it).
What the ``with`` statement raises is the caller's to decide, with the
rule trio and anyio follow, whose condition :func:`leave_in_task` answers:
a ``Cancelled`` stops at a scope that was cancelled itself (``cancel()``,
its deadline) and that no cancel from outside reached.

For the same libraries, :func:`spawn_shielded` spawns a task that runs
its first step whatever happens above it meanwhile, as trio's tasks do.
The questions a task can ask of its place in the tree: which task runs
(:func:`current_task`), which tasks a runtime has (:func:`running_tasks`),
the earliest deadline that can cancel the running code
(:func:`effective_deadline`), and whether it is cancelled now
(:func:`cancel_pending`). A call that checks for a cancel on entry and goes
on at once when there is none, as asyncop's streams do, passes its
cancellation point in place with :func:`pass_checkpoint`, which counts it
as an await for ``testing.assert_checkpoints``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ...operations import (
    AsyncOperation,
    OpKind,
    Outcome,
    _current,
    _thread_local,
    only_cancelled,
    outside_advice,
    thread_state,
    walk,
)
from .._introspect import owner_of
from ._abandon import unwind_to

try:
    import cython  # pyright: ignore[reportMissingImports]
except ImportError:  # run as Python, without Cython installed
    from ...platform import pure_cython as cython

if TYPE_CHECKING:
    from .._scheduler import Runtime
    from ._scope import Scope

__all__ = [
    "cancel_pending",
    "current_task",
    "effective_deadline",
    "enter_in_task",
    "leave_in_task",
    "pass_checkpoint",
    "running_tasks",
    "spawn_shielded",
    "task_coroutine",
]

_INF = float("inf")


_IN_TASK = "call it from an async def function that asyncop runs"


def _running_task(what: str) -> Any:
    """The task state of the task the calling thread steps; RuntimeError if none."""
    if cython.compiled:
        # (A C lookup, compiled only: a function of _current.pxd.)
        task = _current.state_here().task  # type: ignore[attr-defined]
    else:
        try:
            task = _thread_local.state.task  # (thread_state(), inline)
        except AttributeError:
            task = thread_state().task
    if task is None:
        raise RuntimeError(
            f"{what} needs a coroutine operation of asyncop; {outside_advice(_IN_TASK)}"
        )
    return task


def enter_in_task(scope: Scope) -> AsyncOperation[None]:
    """Open ``scope``'s block in the running task: the entry of ``async with``.

    Not a cancellation point, and it never suspends.

    Raises:
        RuntimeError: the calling thread steps no task, or the task belongs
            to another runtime than the scope, or the scope was entered before.
    """
    task = _running_task("'async with scope()'")
    parent = task.current
    runtime = scope._runtime
    if parent.runtime is not runtime:  # (owner_of(parent), inline)
        raise RuntimeError(
            f"scope of runtime {runtime.name!r} entered from an operation of "
            f"runtime {parent.runtime.name!r}; use asyncop.scope() in that operation"
        )
    # The task's scope from birth, so that a cancel that finds it wakes the task.
    op = scope._open(parent, task)
    outer = task.outer
    if outer is None:
        task.outer = [parent]
    else:
        outer.append(parent)
    task.current = op  # current_operation() is now the scope
    return op


def leave_in_task(scope: Scope, exc: BaseException | None) -> bool:
    """Leave ``scope``'s block now, without waiting for its children.

    The block ends as if it had been cancelled when ``exc`` is set (its
    children, if any, are cancelled when ``exc`` is an error), and as
    having run through otherwise; the scope's operation ends once its
    children have. ``exc`` leaves through the ``with`` statement, not as
    the scope's failure. Not a cancellation point.

    Returns:
        Whether a ``Cancelled`` that the scope's own cancel caused stops
        here: the scope was cancelled (its ``cancel()`` or its deadline),
        and no cancel from outside reached it (a shield kept it out, or
        there was none). What to do with ``exc`` is the caller's.

    Raises:
        RuntimeError: the scope was not entered, or scopes were left out of
            the order they were entered in (those inside it are closed
            first, so that the task still ends).
    """
    op = scope._op
    if op is None:
        raise RuntimeError(
            "scope left without being entered; use it in a with statement, or enter it "
            "with enter_in_task() first"
        )
    if op._outcome is not None:
        return False  # closed already, by an out-of-order exit of an enclosing scope
    task = op._task
    misuse: RuntimeError | None = None
    if task.current is not op:
        misuse = unwind_to(task, op)
    else:
        task.current = task.outer.pop()
    own = bool(op._cancelled and not op._outside_cancel)
    if exc is not None and not only_cancelled(exc) and op.first_child is not None:
        op.cancel(f"the block of scope {op.name!r} raised {type(exc).__name__}")
    op._end_work_on_worker(Outcome.CANCELLED if exc is not None else Outcome.VALUE, None, None)
    if misuse is not None:
        raise misuse
    return own


def spawn_shielded(
    parent: AsyncOperation[Any], fn: Callable[..., Any], *args: Any, name: str | None = None
) -> AsyncOperation[Any]:
    """Spawn ``fn(*args)`` under ``parent``, shielded: a cancel from above does not enter it.

    For tasks that must run their first step even when ``parent`` is
    cancelled before then, as trio's and anyio's do (an asyncop task
    cancelled before its first step never runs): the task drops the shield
    (``current_task().shield = False``) as it starts, which lets in a cancel
    already pending above, at its next await.

    Raises:
        RuntimeError: ``parent`` has ended.
        TypeError: ``fn`` is not callable.
    """
    runtime = owner_of(parent)
    return runtime._new_operation(fn, args, parent=parent, name=name, submit=True, shield=True)


def current_task() -> AsyncOperation[Any] | None:
    """The coroutine operation the calling thread steps, or None outside one."""
    try:
        task = _thread_local.state.task  # (thread_state(), inline)
    except AttributeError:
        task = thread_state().task
    if task is None:
        return None
    op: AsyncOperation[Any] = task.task
    return op


def running_tasks(runtime: Runtime) -> list[AsyncOperation[Any]]:
    """The live coroutine operations of ``runtime``, parents before their children."""
    with runtime._lock:
        return [
            op for op, _ in walk(list(runtime._roots)) if op._kind is OpKind.CORO and not op._final
        ]


def task_coroutine(op: AsyncOperation[Any]) -> Coroutine[Any, Any, Any] | None:
    """The coroutine a task operation runs, once it has started; else None."""
    task = op._task
    coro = task.coro if task is not None and task.task is op else None
    return coro


def effective_deadline() -> float:
    """The earliest deadline that can cancel the running task's code, on its runtime's clock.

    ``-inf`` when that code is cancelled already, ``inf`` when no deadline
    applies. Deadlines above a shielded scope do not count.

    Raises:
        RuntimeError: the calling thread steps no task.
    """
    node: AsyncOperation[Any] | None = _running_task("effective_deadline()").current
    deadline = _INF
    while node is not None:
        if node._cancelled:
            return -_INF
        own = node._deadline
        if own is not None and own < deadline:
            deadline = own
        if node._shield:
            break
        node = node.parent
    return deadline


def cancel_pending(task: AsyncOperation[Any] | None = None) -> bool:
    """Whether a task's next cancellation point would raise ``Cancelled``.

    ``task`` is a coroutine operation (the running task when None); an
    operation that has ended, or not started, has no cancel pending.

    Raises:
        RuntimeError: ``task`` is None and the calling thread steps no task.
    """
    if task is None:
        return bool(_running_task("cancel_pending()").current._cancelled)
    state = task._task
    return state is not None and state.task is task and bool(state.current._cancelled)


def pass_checkpoint() -> bool:
    """Pass a cancellation point in place, without a trip through the scheduler.

    For a call that must be a cancellation point but need not yield: it
    reads the running task's cancel flag and, when there is no cancel,
    counts the checkpoint (``testing.assert_checkpoints`` sees it) and lets
    the call go on at once.

    Returns:
        True when the task may go on; False when it is cancelled: then
        ``await checkpoint()``, which raises ``Cancelled``.

    Raises:
        RuntimeError: the calling thread steps no task.
    """
    task = _running_task("pass_checkpoint()")
    if task.current._cancelled:
        return False
    task.count_checkpoint()
    return True
