"""Starting a task and waiting until it says it is ready: ``start`` and ``TaskStatus``.

::

    async def serve(port: int, *, task_status: TaskStatus[int]) -> None:
        listener = bind(port)
        task_status.started(listener.port)   # start() returns this value
        ...                                   # and the task keeps running

    async with asyncop.scope() as s:
        port = await s.start(serve, 0)

``op.start(fn, *args)`` spawns ``fn(*args, task_status=status)`` as a child of
``op`` at once, as ``spawn`` would, and waits until ``fn`` calls
``task_status.started(value)``; it then returns ``value`` and the child keeps
running under ``op``.

Until ``started()``, the child belongs to the caller of ``start()``, as in
trio and anyio, where the task runs under the caller until it is ready:

- it is *supervised*: a failure stays on the child instead of failing
  ``op`` and cancelling its siblings, so ``start()`` can raise it to its
  caller and nothing else in the tree sees it;
- it is *shielded*: a cancel of ``op`` (a task group being cancelled) does
  not reach it, while the caller's cancel does, through the caller's wait.

``started()`` makes it an ordinary child, whose failure is the scope's and
which a cancel of the scope reaches, one already made included.

States of one start (the runtime lock guards them, with the child's
supervision flag, so that ``started()`` and the child's end cannot cross):

- WAITING: ``fn`` runs and has not called ``started()``.
- STARTED: ``started()`` was called; its value is handed over.
- ENDED: the child ended without calling ``started()``; ``start()`` raises
  the child's failure, or RuntimeError.

Only the two transitions of the status write it, and the first to come
wins: ``started()`` refuses a start that ended (or started) already, and
the child's end tells the caller of ``start()`` only of a start that never
came.

If the caller of ``start()`` is cancelled (or interrupted) while WAITING, it
cancels the child, waits for it to end, and lets the cancel propagate: no
task is left behind half started.
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, final, overload

from ..operations import AsyncOperation, OperationState, TreeWait, thread_state
from ._core._scope_task import ScopeDone
from ._core._waker import let_go
from ._interrupt import wait_after_interrupt
from ._introspect import owner_of
from ._kinds import describe_fn
from ._primitives._sync import Event

if TYPE_CHECKING:
    from collections.abc import Coroutine

__all__ = ["TASK_STATUS_IGNORED", "TaskStatus", "start"]

T = TypeVar("T")


class _Start(enum.Enum):
    WAITING = "waiting"
    STARTED = "started"
    ENDED = "ended"


class TaskStatus(Generic[T]):
    """What a function started with ``start()`` receives as ``task_status``.

    Call ``task_status.started(value)`` once the task is ready: the
    ``start()`` call that launched it returns ``value``. Annotate the
    parameter as ``task_status: TaskStatus[int] = TASK_STATUS_IGNORED`` so
    the function can also be spawned or called without ``start()``.
    """

    __slots__ = ()

    @overload
    def started(self: TaskStatus[None]) -> None: ...

    @overload
    def started(self, value: T) -> None: ...

    def started(self, value: Any = None) -> None:
        """Tell the waiting ``start()`` that the task is ready, handing it ``value``.

        Not a cancellation point; it never blocks.

        Raises:
            RuntimeError: ``started()`` was already called, or the task has ended.
        """
        raise NotImplementedError  # pragma: no cover - overridden


@final
class _IgnoredStatus(TaskStatus[Any]):
    __slots__ = ()

    def started(self, value: Any = None) -> None:
        """Do nothing: the function was not launched by ``start()``."""

    def __repr__(self) -> str:
        return "TASK_STATUS_IGNORED"


#: The default for a ``task_status`` parameter: ``started()`` on it does nothing.
TASK_STATUS_IGNORED: TaskStatus[Any] = _IgnoredStatus()


@final
class _Status(TaskStatus[Any]):
    """The real status of one ``start()``; see the module docstring."""

    __slots__ = ("_op", "_ready", "_state", "_value")

    def __init__(self) -> None:
        self._op: AsyncOperation | None = None
        self._state = _Start.WAITING
        self._value: Any = None
        # Set on STARTED or ENDED: what the caller of start() waits on, in
        # a task or in a thread alike.
        self._ready = Event()

    def started(self, value: Any = None) -> None:
        op = self._op
        assert op is not None
        with op.runtime._lock:
            if op.done or not self._transition_to_started():
                if self._state is _Start.STARTED:
                    raise RuntimeError(
                        f"task_status.started() called twice by {op.name!r}; call it once, "
                        "when the task is ready"
                    )
                raise RuntimeError(
                    f"task_status.started() called after {op.name!r} ended; call it "
                    "from the task, before it returns"
                )
            self._value = value
            # From now on the child is an ordinary child of its scope.
            op._supervised = False
        try:
            # Whatever cancelled the scope meanwhile reaches the child now, at its
            # next await (outside the lock: the cancel runs on_cancel callbacks).
            op.shield = False
        finally:
            # Even past a Ctrl-C raised by one: the child has started, and
            # the end of the child no longer tells the caller of start().
            self._ready.set()

    def _on_end(self) -> None:
        """The child is final (runs outside the runtime lock)."""
        op = self._op
        assert op is not None
        with op.runtime._lock:
            if not self._transition_to_ended():
                return  # started: the caller of start() was told already
        self._ready.set()

    def _transition_to_started(self) -> bool:
        """WAITING -> STARTED: ``started()``; False once started or ended."""
        if self._state is not _Start.WAITING:
            return False
        self._state = _Start.STARTED
        return True

    def _transition_to_ended(self) -> bool:
        """WAITING -> ENDED: the child ended without ``started()``; False if it started."""
        if self._state is not _Start.WAITING:
            return False
        self._state = _Start.ENDED
        return True

    def _outcome(self) -> Any:
        """What start() gives once ``_ready`` is set: the value, or the error."""
        op = self._op
        assert op is not None
        if self._state is _Start.STARTED:
            value = self._value
            self._value = None
            return value
        state = op.state
        if state is OperationState.FAILED:
            error = op.error  # observes it: start() reports it
            assert error is not None
            raise error
        how = "was cancelled" if state is OperationState.CANCELLED else "returned"
        raise RuntimeError(
            f"{op.name!r} {how} without calling task_status.started(); call "
            "task_status.started() once it is ready, or spawn it instead of starting it"
        )

    def __repr__(self) -> str:
        name = self._op.name if self._op is not None else "?"
        return f"<TaskStatus of {name!r} {self._state.value}>"


def _launch(
    target: AsyncOperation, fn: Callable[..., Any], args: tuple[Any, ...], name: str | None
) -> _Status:
    if name is None:
        name = describe_fn(fn)
    status = _Status()
    call = functools.partial(fn, task_status=status)
    # Spawned under the runtime lock (it is re-entrant), which the child's
    # first step takes: another worker may run the child at once, and its
    # started() must find it in the status.
    with target.runtime._lock:
        # Shielded until started(): the task belongs to the caller of start()
        # until then, and only the caller's cancel reaches it (through the wait).
        child = owner_of(target)._new_operation(
            call, args, parent=target, name=name, submit=True, supervise=True, shield=True
        )
        status._op = child
        if not child.done:
            child._add_waiter_locked(status._on_end)
            return status
    status._on_end()  # already over
    return status


def _abandon(status: _Status) -> bool:
    """The caller gives up: cancel a child that is not started yet. True if it did."""
    op = status._op
    assert op is not None
    with op.runtime._lock:
        waiting = status._state is _Start.WAITING
    if waiting:
        op.cancel("the start() that launched it was cancelled")
    return waiting


async def _start_async(
    target: AsyncOperation, fn: Callable[..., Any], args: tuple[Any, ...], name: str | None
) -> Any:
    status = _launch(target, fn, args, name)
    try:
        await status._ready.wait_async()
    except BaseException:
        if _abandon(status):
            assert status._op is not None
            await ScopeDone(status._op)  # not interruptible
            status._op._observe()  # what it did is replaced by the cancel
        raise
    return status._outcome()


def _start_blocking(
    target: AsyncOperation, fn: Callable[..., Any], args: tuple[Any, ...], name: str | None
) -> Any:
    status = _launch(target, fn, args, name)
    if status._op is not None:
        # The thread waits for the tree: no thread that could wake a task.
        status._ready._purpose = TreeWait(status._op, "start()")
    try:
        status._ready.wait()
    except BaseException as exc:
        if _abandon(status):
            assert status._op is not None
            if isinstance(exc, KeyboardInterrupt):
                wait_after_interrupt(status._op)  # a second Ctrl-C stops the wait
            else:
                status._op._block_until_final(None, None, TreeWait(status._op, "start()"))
            status._op._observe()
        raise
    return status._outcome()


def _takes_task_status(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` accepts the ``task_status`` keyword; True when that cannot be told."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature
        return True
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == "task_status" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        for p in parameters
    )


def start(
    target: AsyncOperation,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    name: str | None,
) -> Coroutine[Any, Any, Any] | Any:
    """``target.start(fn, *args)``: see ``AsyncOperation.start``."""
    # Checked before anything is made: a coroutine's start() refuses at
    # the call, not at the await.
    if not callable(fn):
        let_go((fn,))  # refused: it must not warn "never awaited" besides
        raise TypeError(
            f"start() needs a function, got {type(fn).__name__}; pass a function that "
            "takes a task_status keyword"
        )
    if not _takes_task_status(fn):
        raise TypeError(
            f"start() calls {describe_fn(fn)!r} with a task_status keyword, which it does "
            "not take; give it a keyword parameter 'task_status' and call "
            "task_status.started() once it is ready, or spawn() it instead"
        )
    if thread_state().task is not None:
        return _start_async(target, fn, args, name)
    return _start_blocking(target, fn, args, name)
