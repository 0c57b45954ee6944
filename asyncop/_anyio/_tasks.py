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

Every anyio task runs until its first checkpoint, whatever cancel is
pending when it is launched, as anyio specifies on every backend (an asyncop
task cancelled before its first step never runs). So each is spawned
shielded (``lowlevel.spawn_shielded``): a ``start_soon`` task drops the
shield as it starts, and a cancel pending above lands at its first await. A
task ``start()`` launches keeps the shield until it calls ``started()``:
until then it belongs to the caller of ``start()``, whose failure it is
and whose cancel alone reaches it. That cancel goes through the task's
handle: the caller cancels the handle's cancel scope, which the task enters
at its first step, and so the task too runs until its first checkpoint
(``_TaskStatus`` has the states of one start).
"""

from __future__ import annotations

import enum
import math
import threading
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
from ..runtime import Event, Scope, current_runtime, scope, sleep

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


class _Start(enum.Enum):
    """Where one ``TaskGroup.start()`` stands; see ``_TaskStatus``."""

    WAITING = "waiting"
    STARTED = "started"
    ENDED = "ended"
    ABANDONED = "abandoned"


class _TaskStatus(abc.TaskStatus[Any]):
    """The status of one ``start()``: the value the started task reports, or its failure.

    States (``_lock`` guards them, with ``_task``, so that ``started()``, the
    task's first step, its end and the caller giving up cannot cross):

    - WAITING: the task has not called ``started()``. It is spawned shielded:
      it belongs to the caller of ``start()``, so a cancel of the group does
      not reach it, and a failure of its is ``start()``'s, not the group's.
    - STARTED: ``started()`` was called; the task is an ordinary task of the
      group from then on (its shield is dropped), and ``start()`` returns
      the value.
    - ENDED: the task ended before ``started()``; ``start()`` raises its
      failure, or RuntimeError.
    - ABANDONED: the caller of ``start()`` was cancelled (or interrupted)
      first; it cancels the task's handle, whose cancel scope the task
      enters at its first step, so the task runs until its first
      checkpoint, as every anyio task does, and then ends.

    Only the three transitions write the state, and the first to come wins.
    """

    __slots__ = ("_error", "_lock", "_ready", "_state", "_task", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = _Start.WAITING
        self._value: Any = None
        self._error: BaseException | None = None
        self._task: AsyncOperation[Any] | None = None  # set at the task's first step
        self._ready = Event()  # set on STARTED or ENDED

    def started(self, value: Any = None) -> None:
        with self._lock:
            if not self._transition_to_started(value):
                if self._state is _Start.ABANDONED:
                    return  # the caller of start() gave up: nobody to hand it to
                if self._state is _Start.ENDED:
                    raise RuntimeError(
                        "called 'started' after the started task ended; call it from the "
                        "task, before it returns"
                    )
                raise RuntimeError(
                    "called 'started' twice on the same task status; call it once, when "
                    "the task is ready"
                )
            task = self._task
        if task is not None:
            _report(task)
        self._ready.set()

    def _stepped(self, task: AsyncOperation[Any]) -> None:
        """The task takes its first step: ``started()`` may now drop its shield."""
        with self._lock:
            self._task = task
            started = self._state is _Start.STARTED
        if started:
            _report(task)

    def _transition_to_started(self, value: Any) -> bool:
        """WAITING -> STARTED (under ``_lock``): ``started(value)``; False if not WAITING."""
        if self._state is not _Start.WAITING:
            return False
        self._state = _Start.STARTED
        self._value = value
        return True

    def _transition_to_ended(self, error: BaseException | None) -> bool:
        """WAITING -> ENDED: the task ended without ``started()``; False if not WAITING."""
        with self._lock:
            if self._state is not _Start.WAITING:
                return False
            self._state = _Start.ENDED
            self._error = error
            return True

    def _transition_to_abandoned(self) -> bool:
        """WAITING -> ABANDONED: the caller of ``start()`` gives up; False if not WAITING."""
        with self._lock:
            if self._state is not _Start.WAITING:
                return False
            self._state = _Start.ABANDONED
            return True

    def _outcome(self) -> Any:
        """What ``start()`` gives once ``_ready`` is set: the value, or the error."""
        value, error = self._value, self._error
        self._value = self._error = None
        if self._state is _Start.STARTED:
            return value
        if error is not None:
            try:
                _raise_keeping_context(error)
            finally:
                del error  # (the traceback holds this frame)
        raise RuntimeError(
            "Child exited without calling task_status.started(); call it once the task is "
            "ready, or start the task with start_soon() instead"
        )


def _report(task: AsyncOperation[Any]) -> None:
    """A started task becomes an ordinary task of its group."""
    _starters.pop(task, None)
    # Whatever cancelled the group meanwhile reaches the task now, at its next await.
    task.shield = False


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
        status = _TaskStatus()
        coro = call_for_coroutine(func, args, task_status=status)
        handle: TaskHandle[Any] = TaskHandle(coro, final_name)
        # Shielded until started(), and so run until its first checkpoint
        # whatever happens meanwhile: the caller's cancel reaches it through
        # its handle's cancel scope, the group's only once it has started.
        task = lowlevel.spawn_shielded(self._op, _run_started, status, handle, name=final_name)
        starter = lowlevel.current_task()
        with status._lock:
            if starter is not None and status._state is _Start.WAITING:
                _starters[task] = starter
        del task
        try:
            await status._ready.wait_async()
        except BaseException:
            if status._transition_to_abandoned():
                handle.cancel()
                with CancelScope(shield=True):
                    await handle.wait()
            raise
        value = status._outcome()
        if not return_handle:
            return value
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


async def _run_started(status: _TaskStatus, handle: TaskHandle[Any]) -> None:
    """A task ``start()`` launched: ``_run``, with what it does before ``started()`` kept apart.

    A failure before ``started()`` is ``start()``'s to raise, not the group's;
    after ``start()`` gave up it goes nowhere, as the caller's own
    interruption replaces it.
    """
    task = lowlevel.current_task()
    assert task is not None
    status._stepped(task)
    run = handle._run_coro()
    del task, handle  # (as in _run: a failure's traceback holds this frame)
    try:
        await run
    except BaseException as error:
        if status._transition_to_ended(error):
            status._ready.set()  # start() raises it
            return
        if status._state is _Start.ABANDONED:
            return
        raise
    finally:
        with status._lock:
            status._task = None  # a started() from elsewhere has no task to report now
    if status._transition_to_ended(None):
        status._ready.set()  # start() raises RuntimeError: it returned without started()


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
