"""anyio's cancel scopes, task groups and tasks, as asyncop scopes and operations.

An anyio ``CancelScope`` is an asyncop scope entered with a plain ``with``
inside a task (``lowlevel.enter_in_task``): a node of the tree, under the
task's innermost scope, whose token every await of its block checks. Its
``cancel()`` and deadline are the node's; a cancel of any operation above it
reaches it as any asyncop cancel does, unless it is shielded. Its exit does
not wait (``lowlevel.leave_in_task``) and follows trio's rule: a
``Cancelled`` stops at a scope that was cancelled itself and that no cancel
from outside reached; ``cancelled_caught`` then reads True.

A ``TaskGroup`` is ``async with asyncop.scope()``: ``start_soon`` spawns
into it, its exit waits for every task, a failing task cancels the others
and the group raises an ``ExceptionGroup``. Its ``cancel_scope`` is the
group's scope seen as a cancel scope: its own cancel, or its deadline,
stops at the group (where ``scope(timeout=)`` would raise ``TimeoutError``).
Each anyio task is an asyncop operation, which ``dump()`` shows.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Coroutine
from contextvars import Context
from types import TracebackType
from typing import Any, Literal, NoReturn

from anyio import TaskInfo, abc
from anyio._core._tasks import CancelScope as BaseCancelScope
from anyio._core._tasks import TaskHandle
from anyio.abc._tasks import call_for_coroutine, get_callable_name, get_coro_name

from .. import lowlevel
from ..operations import AsyncOperation, Cancelled, OperationState
from ..runtime import Scope, current_runtime, scope, sleep

__all__ = ["AsyncopTaskInfo", "CancelScope", "TaskGroup", "running_task_infos", "task_info"]


class CancelScope(BaseCancelScope):
    """anyio's ``CancelScope`` on an asyncop scope; see the module docstring."""

    __slots__ = (
        "_cancel_called",
        "_caught",
        "_deadline",
        "_host",
        "_reason",
        "_scope",
        "_shield",
    )

    def __new__(cls, *, deadline: float = math.inf, shield: bool = False) -> CancelScope:
        return object.__new__(cls)

    def __init__(self, *, deadline: float = math.inf, shield: bool = False) -> None:
        self._deadline = _checked_deadline(deadline)
        self._shield = shield
        self._scope: Scope | None = None
        self._host: AsyncOperation[Any] | None = None
        self._cancel_called = False
        self._reason: str | None = None
        self._caught = False

    @property
    def _op(self) -> AsyncOperation[Any] | None:
        scope = self._scope
        return None if scope is None else scope._op

    def __enter__(self) -> CancelScope:
        if self._scope is not None:
            raise RuntimeError(
                "Each CancelScope may only be used for a single 'with' block; make a new "
                "CancelScope for the next block"
            )
        host = lowlevel.current_task()
        if host is None:
            raise RuntimeError(
                "an anyio CancelScope was entered outside an asyncop task; use it in an "
                "async function that asyncop runs"
            )
        deadline = self._deadline
        self._scope = made = scope(
            name=f"cancel scope of {host.name}",
            deadline=None if math.isinf(deadline) else deadline,
            shield=self._shield,
        )
        self._host = host
        lowlevel.enter_in_task(made)
        if self._cancel_called:
            op = made._op
            assert op is not None
            op.cancel(self._reason or "the cancel scope was cancelled before it was entered")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool:
        made = self._scope
        if made is None or made._op is None:
            raise RuntimeError(
                "this CancelScope was left without being entered; use it in a 'with' statement"
            )
        if lowlevel.current_task() is not self._host:
            raise RuntimeError(
                "Attempted to exit cancel scope in a different task than it was entered in; "
                "use it within one task, leaving it where it was entered"
            )
        try:
            if not lowlevel.leave_in_task(made, exc_val) or exc_val is None:
                return False
            if isinstance(exc_val, Cancelled):
                self._caught = True
                return True
            if not isinstance(exc_val, BaseExceptionGroup):
                return False
            # The scope's own Cancelled stops here, also inside a group.
            matched, rest = exc_val.split(Cancelled)
            if matched is None:
                return False
            self._caught = True
            if rest is None:
                return True
            _raise_keeping_context(rest)
        finally:
            del exc_val, exc_tb

    def cancel(self, reason: str | None = None) -> None:
        if reason is not None and not isinstance(reason, str):
            raise TypeError(
                f"CancelScope.cancel() needs a str reason or None, got {type(reason).__name__}; "
                "pass a message describing why"
            )
        self._cancel_called = True
        op = self._op
        if op is None:
            self._reason = reason
        else:
            op.cancel(reason if reason is not None else "the cancel scope was cancelled")

    @property
    def deadline(self) -> float:
        op = self._op
        if op is None:
            return self._deadline
        deadline = op.deadline
        return math.inf if deadline is None else deadline

    @deadline.setter
    def deadline(self, value: float) -> None:
        value = _checked_deadline(value)
        self._deadline = value
        op = self._op
        if op is not None:
            op.deadline = None if math.isinf(value) and value > 0 else value

    @property
    def cancel_called(self) -> bool:
        if self._cancel_called:
            return True
        op = self._op
        return op is not None and op.expired

    @property
    def cancelled_caught(self) -> bool:
        return self._caught

    @property
    def shield(self) -> bool:
        op = self._op
        return self._shield if op is None else op.shield

    @shield.setter
    def shield(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(
                f"CancelScope.shield must be True or False, got {type(value).__name__}; pass a bool"
            )
        self._shield = value
        op = self._op
        if op is not None:
            op.shield = value


def _checked_deadline(value: float) -> float:
    """A cancel scope's deadline as a float; NaN refused."""
    value = float(value)
    if math.isnan(value):
        raise ValueError(
            "a CancelScope's deadline must not be NaN; pass a time on anyio.current_time()'s "
            "clock, or math.inf for none"
        )
    return value


def _raise_keeping_context(error: BaseException) -> NoReturn:
    """Raise ``error`` with the ``__context__`` it has, not the exception being handled."""
    context = error.__context__
    try:
        raise error
    finally:
        error.__context__ = context
        del error, context


class _GroupScope(BaseCancelScope):
    """A task group's ``cancel_scope``: the group's asyncop scope as a cancel scope."""

    __slots__ = ("_cancel_called", "_group")

    def __new__(cls, group: TaskGroup) -> _GroupScope:
        return object.__new__(cls)

    def __init__(self, group: TaskGroup) -> None:
        self._group = group
        self._cancel_called = False

    def __enter__(self) -> _GroupScope:
        raise RuntimeError(
            "a task group's cancel_scope is entered with the task group; use it to cancel "
            "the group or move its deadline, and 'with CancelScope()' for a scope of its own"
        )

    def __exit__(self, *exc_info: object) -> bool:
        raise RuntimeError(
            "a task group's cancel_scope is left with the task group; leave the "
            "'async with' block instead"
        )

    def cancel(self, reason: str | None = None) -> None:
        self._cancel_called = True
        self._group._op.cancel(reason if reason is not None else "the task group was cancelled")

    @property
    def deadline(self) -> float:
        deadline = self._group._op.deadline
        return math.inf if deadline is None else deadline

    @deadline.setter
    def deadline(self, value: float) -> None:
        value = float(value)
        self._group._op.deadline = None if math.isinf(value) and value > 0 else value

    @property
    def cancel_called(self) -> bool:
        return self._cancel_called or self._group._op.expired

    @property
    def cancelled_caught(self) -> bool:
        return self._group._caught

    @property
    def shield(self) -> bool:
        return self._group._op.shield

    @shield.setter
    def shield(self, value: bool) -> None:
        self._group._op.shield = value


class _TaskStatus(abc.TaskStatus[Any]):
    """Hands ``start()`` the value a started task reports, through asyncop's ``TaskStatus``.

    A plain function that calls ``started()`` and then returns the coroutine
    (a wrapper) reports before the task has a coroutine: the value is kept,
    and handed on once the coroutine exists (``attach``). Until then an
    error of the wrapper's, such as a second ``started()``, is ``start()``'s.
    """

    __slots__ = ("_attached", "_inner", "_started", "_task", "_value")

    def __init__(self, inner: Any, task: AsyncOperation[Any]) -> None:
        self._inner = inner
        self._task = task
        self._started = False
        self._attached = False
        self._value: Any = None

    def started(self, value: Any = None) -> None:
        if self._started:
            raise RuntimeError(
                "called 'started' twice on the same task status; call it once, when the "
                "task is ready"
            )
        self._started = True
        self._value = value
        if self._attached:
            self._report()

    def attach(self) -> None:
        self._attached = True
        if self._started:
            self._report()

    def _report(self) -> None:
        _starters.pop(self._task, None)  # the task belongs to the group now
        self._inner.started(self._value)
        self._value = None


class TaskGroup(abc.TaskGroup):
    """anyio's ``TaskGroup`` on ``async with asyncop.scope()``; see the module docstring."""

    def __init__(self) -> None:
        self._scope: Scope | None = None
        self._active = False
        self._caught = False
        self._group_scope = _GroupScope(self)
        self.cancel_scope = self._group_scope

    @property
    def _op(self) -> AsyncOperation[Any]:
        made = self._scope
        op = None if made is None else made._op
        if op is None:
            raise RuntimeError(
                "this task group has not been entered; use it in an 'async with' block first"
            )
        return op

    async def __aenter__(self) -> TaskGroup:
        if self._scope is not None:
            raise RuntimeError(
                "TaskGroup cannot be entered more than once; make a new one with "
                "anyio.create_task_group()"
            )
        self._scope = scope(name="task group")
        await self._scope.__aenter__()
        self._active = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool:
        made = self._scope
        assert made is not None
        op = made._op
        try:
            if exc_val is None and op is not None and not op.children():
                # Leaving is a schedule point, as in trio, but never a
                # cancellation point: a cancel lands at the next await.
                with CancelScope(shield=True):
                    await sleep(0)
            # (Tasks may start more tasks in the group until the last one ends.)
            swallowed = await made.__aexit__(exc_type, exc_val, exc_tb)
        except TimeoutError:
            # A bare TimeoutError is the group's own deadline, which cancelled
            # its tasks or its body: an anyio cancel scope moves on instead.
            self._caught = True
            return True
        except Cancelled:
            if exc_val is None and op is not None and op.state is not OperationState.CANCELLED:
                # A cancel from outside that interrupted nothing (no task,
                # and nothing raised in the block): anyio's group leaves
                # quietly, and the next await raises.
                return False
            raise
        except BaseExceptionGroup as failures:
            # As anyio's groups on every backend: what the block was handling
            # is not shown as the group's context.
            failures.__suppress_context__ = True
            raise
        except (KeyboardInterrupt, SystemExit) as interrupt:
            # asyncop's scopes let these out bare; anyio's groups wrap every
            # error, these too, in an exception group.
            wrapped = BaseExceptionGroup("unhandled errors in a TaskGroup", [interrupt])
            try:
                raise wrapped from None
            finally:
                del wrapped, interrupt
        finally:
            self._active = False
            del exc_val, exc_tb
        op = made._op
        if (
            self._group_scope._cancel_called
            and op is not None
            and op.state is OperationState.CANCELLED
        ):
            self._caught = True  # its own cancel interrupted something, and stopped here
        return swallowed

    def _check_active(self, coro: Coroutine[Any, Any, Any] | None = None) -> None:
        if not self._active:
            if coro is not None:
                coro.close()
            raise RuntimeError(
                "This task group is not active; no new tasks can be started; start them "
                "inside its 'async with' block, or in a task group that is still open"
            )

    def create_task(
        self,
        coro: Coroutine[Any, Any, Any],
        *,
        name: object = None,
        context: Context | None = None,
    ) -> TaskHandle[Any]:
        if not isinstance(coro, Coroutine):
            raise TypeError(
                f"expected a coroutine, got {coro.__class__.__qualname__}; pass the "
                "coroutine an async function returns, or use start_soon(fn, *args)"
            )
        self._check_active(coro)
        handle: TaskHandle[Any] = TaskHandle(coro, get_coro_name(coro, name))
        op = self._op
        if context is not None:
            context.run(lambda: lowlevel.spawn_shielded(op, _run, handle, name=handle.name))
        else:
            lowlevel.spawn_shielded(op, _run, handle, name=handle.name)
        return handle

    async def start(
        self,
        func: Callable[..., Coroutine[Any, Any, Any]],
        *args: object,
        name: object = None,
        return_handle: Literal[False, True] = False,
    ) -> Any:
        self._check_active()
        final_name = get_callable_name(func, name)
        handles: list[TaskHandle[Any]] = []
        starter = lowlevel.current_task()

        async def run(*, task_status: Any) -> Any:
            me = lowlevel.current_task()
            assert me is not None
            if starter is not None:
                _starters[me] = starter
            status = _TaskStatus(task_status, me)
            coro = call_for_coroutine(func, args, task_status=status)
            status.attach()
            handle: TaskHandle[Any] = TaskHandle(coro, final_name)
            handles.append(handle)
            await handle._run_coro()
            if not status._started:
                raise RuntimeError(
                    "Child exited without calling task_status.started(); call it once the "
                    "task is ready, or start the task with start_soon() instead"
                )

        value = await self._op.start(run, name=final_name)
        if not return_handle:
            return value
        handle = handles[0]
        handle._start_value = value
        return handle


async def _run(handle: TaskHandle[Any]) -> None:
    """An anyio task: it runs until its first await whatever happens above it meanwhile.

    Spawned shielded, it drops the shield as it starts, as trio's tasks begin
    even when their task group was cancelled before they ran: a cancel
    already pending above then lands at the task's first await.
    """
    task = lowlevel.current_task()
    assert task is not None
    task.shield = False
    run = handle._run_coro()
    # The failure's traceback holds this frame: it must not hold the handle,
    # which holds the failure (_run_coro lets go of it likewise).
    del task, handle
    await run


class AsyncopTaskInfo(TaskInfo):
    """anyio's ``TaskInfo`` of an asyncop task."""

    def __init__(self, op: AsyncOperation[Any]) -> None:
        parent = _parent_task(op)
        coro: Any = lowlevel.task_coroutine(op)  # (None until the task's first step)
        super().__init__(id(op), None if parent is None else id(parent), op.name, coro)
        self._op = op

    def has_pending_cancellation(self) -> bool:
        return lowlevel.cancel_pending(self._op)


# A task start() launched -> the task that called start(), until started():
# anyio sees the task under its starter until then, as trio runs it there.
_starters: weakref.WeakKeyDictionary[AsyncOperation[Any], AsyncOperation[Any]] = (
    weakref.WeakKeyDictionary()
)


def _parent_task(op: AsyncOperation[Any]) -> AsyncOperation[Any] | None:
    """The task whose code made ``op``: its starter, else its nearest ancestor that is a task."""
    starter = _starters.get(op)
    if starter is not None:
        return starter
    node = op.parent
    while node is not None:
        if lowlevel.task_coroutine(node) is not None:
            return node
        node = node.parent
    return None


def task_info(op: AsyncOperation[Any]) -> TaskInfo:
    return AsyncopTaskInfo(op)


def running_task_infos() -> list[TaskInfo]:
    return [AsyncopTaskInfo(op) for op in lowlevel.running_tasks(current_runtime())]
