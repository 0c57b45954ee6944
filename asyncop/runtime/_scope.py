"""Scopes: nursery-style blocks whose body is an operation's own work.

::

    with runtime.scope(name="load_page", timeout=5) as root:
        root.spawn(fetch_header, page_id)
        root.spawn(fetch_body, page_id)
    # leaves only when every child has ended

Entering makes a SCOPE operation, linked under the operation whose code the
thread is running (if any), and RUNNING at once: the block is its work.
Leaving records how the block ended, waits for the children, and then
decides what the ``with`` statement raises:

1. A KeyboardInterrupt (in the block, or while waiting at the exit) cancels
   the tree, waits for it, and is re-raised as itself.
2. Failures (the block's exception and the failing children's) are raised as
   one ``ExceptionGroup``, even when there is only one.
3. The scope's own deadline, if it cancelled something, raises a bare
   ``TimeoutError``.
4. A ``Cancelled`` from the block stops here when the scope itself was
   cancelled; it passes on when something outside was cancelled too.

A scope's error is raised out of its block only: it is not handed to the
enclosing operation as a failing child, so code that catches it goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, final

from ..operations import AsyncOperation, Cancelled, OperationState
from ..operations._current import current_operation, thread_state
from ..operations._node import OpKind, Outcome
from ._awaitables import forget_end_waiter, when_ended
from ._waker import Subscription, WaitEvent

if TYPE_CHECKING:
    from types import TracebackType

    from ._scheduler import Runtime

__all__ = ["Scope", "ScopeDone", "scope"]


@final
class Scope:
    """The context manager returned by ``Runtime.scope()``; see the module docstring."""

    __slots__ = (
        "_deadline",
        "_name",
        "_op",
        "_parent",
        "_runtime",
        "_saved",
        "_shield",
        "_supervise",
        "_timeout",
    )

    def __init__(
        self,
        runtime: Runtime,
        *,
        name: str | None,
        timeout: float | None,
        deadline: float | None,
        shield: bool,
        supervise: bool,
    ) -> None:
        for label, value in (("timeout", timeout), ("deadline", deadline)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(
                    f"scope({label}=...) needs a number of seconds, got "
                    f"{type(value).__name__}; pass a float or None"
                )
            if value != value:
                raise ValueError(
                    f"scope({label}=nan) is not a time; pass a number of seconds or None"
                )
        self._runtime = runtime
        self._name = name
        self._timeout = timeout
        self._deadline = deadline
        self._shield = shield
        self._supervise = supervise
        self._op: AsyncOperation | None = None
        self._saved: AsyncOperation | None = None
        self._parent: AsyncOperation | None = None

    def _open(self, parent: AsyncOperation | None) -> AsyncOperation:
        """Make the scope operation under ``parent`` and start its block."""
        if self._op is not None:
            raise RuntimeError(
                f"scope {self._op.name!r} was already entered; call scope() again for a new block"
            )
        runtime = self._runtime
        if parent is None and runtime._closing:
            raise RuntimeError(
                f"Runtime {runtime.name!r} is shut down and takes no new operations; "
                "make a new Runtime"
            )
        op = runtime._new_operation(
            None,
            (),
            parent=parent,
            name=self._name if self._name is not None else "scope",
            kind=OpKind.SCOPE,
            shield=self._shield,
        )
        op._supervise = bool(self._supervise)
        op._propagates = False
        deadline = self._deadline
        if self._timeout is not None:
            by_timeout = runtime.now() + self._timeout
            deadline = by_timeout if deadline is None else min(deadline, by_timeout)
        if deadline is not None:
            op.deadline = deadline
        self._op = op
        self._parent = parent
        return op

    @staticmethod
    def _end_block(op: AsyncOperation, exc: BaseException | None) -> None:
        """Record how the block ended; a failed block cancels the children."""
        if exc is None:
            op._end_work(Outcome.VALUE, None, None)
        elif isinstance(exc, Cancelled):
            op._end_work(Outcome.CANCELLED, None, None)
        elif isinstance(exc, KeyboardInterrupt):
            op.cancel("KeyboardInterrupt")
            op._end_work(Outcome.CANCELLED, None, None)
        else:
            op.cancel(f"the block of scope {op.name!r} raised {type(exc).__name__}")
            op._end_work(Outcome.ERROR, None, exc)

    def start(self, fn: Callable[..., Any], *args: Any, name: str | None = None) -> Any:
        """Start ``fn`` in the scope and wait until it is ready: see ``AsyncOperation.start``.

        Raises:
            RuntimeError: the scope has not been entered yet.
        """
        op = self._op
        if op is None:
            raise RuntimeError(
                "start() on a scope that was not entered; write 'with runtime.scope() as s:' "
                "and call s.start() inside the block"
            )
        return op.start(fn, *args, name=name)

    # -- sync block ----------------------------------------------------------

    def __enter__(self) -> AsyncOperation:
        state = thread_state()
        if state.task is not None:
            raise RuntimeError(
                "a sync 'with scope()' inside a coroutine would block its worker; "
                "write 'async with asyncop.scope()' instead"
            )
        current = state.op
        runtime = self._runtime
        parent = current if current is not None and current.runtime is runtime else None
        op = self._open(parent)
        self._saved = current
        state.op = op
        return op

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        op = self._op
        assert op is not None, "scope exited without being entered"
        thread_state().op = self._saved
        interrupt = exc if isinstance(exc, KeyboardInterrupt) else None
        self._end_block(op, exc)
        while True:
            try:
                op._block_until_final(None)
                break
            except KeyboardInterrupt as caught:
                if interrupt is None:
                    interrupt = caught
                op.cancel("KeyboardInterrupt")
        if interrupt is not None:
            op._observe()
            raise interrupt
        return self._outcome(op, exc)

    # -- async block ---------------------------------------------------------

    async def __aenter__(self) -> AsyncOperation:
        task = thread_state().task
        if task is None:
            raise RuntimeError(
                "'async with scope()' needs a coroutine operation of asyncop; in a "
                "thread, write 'with runtime.scope()' instead"
            )
        parent = task.current
        if parent.runtime is not self._runtime:
            raise RuntimeError(
                f"scope of runtime {self._runtime.name!r} entered from an operation of "
                f"runtime {parent.runtime.name!r}; use asyncop.scope() in that operation"
            )
        op = self._open(parent)
        op._task = task
        if task.outer is None:
            task.outer = []
        task.outer.append(parent)
        task.current = op  # current_operation() is now the scope
        return op

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        op = self._op
        assert op is not None, "scope exited without being entered"
        task = op._task
        assert task is not None and task.current is op, "async scopes exited out of order"
        assert task.outer
        task.current = task.outer.pop()
        self._end_block(op, exc)
        await ScopeDone(op)
        return self._outcome(op, exc)

    def _outcome(self, op: AsyncOperation, exc: BaseException | None) -> bool:
        if op.state is OperationState.FAILED:
            error = op.error  # reading it marks it observed
            assert error is not None
            raise error from None
        if op.expired and op._interrupted:
            raise TimeoutError(f"scope {op.name!r} passed its deadline and was cancelled") from None
        if isinstance(exc, Cancelled):
            parent = self._parent
            outside = not op.shield and parent is not None and parent._cancelled
            # Swallow the Cancelled that this scope's own cancel caused.
            return not outside
        return False


@final
class ScopeDone(WaitEvent):
    """Wait, without being interruptible, until a scope operation is final."""

    __slots__ = ("op",)
    cancellable = False
    entry_checked = False

    def __init__(self, op: AsyncOperation) -> None:
        self.op = op

    def _arm(self, sub: Subscription) -> None:
        when_ended(self.op, sub, lambda: sub.fire(None))

    def _disarm(self, sub: Subscription) -> None:
        forget_end_waiter(self.op, sub)

    def _describe(self) -> str:
        return f"the children of scope {self.op.name!r}"


def scope(
    *,
    name: str | None = None,
    timeout: float | None = None,
    deadline: float | None = None,
    shield: bool = False,
    supervise: bool = False,
) -> Scope:
    """Open a scope under the calling operation: ``async with asyncop.scope():``.

    Inside a coroutine operation use ``async with``; inside a sync callback,
    ``with`` works too. See ``Runtime.scope`` for the arguments.

    Raises:
        RuntimeError: the calling thread is not running an operation; outside
            one, use ``runtime.scope()``.
    """
    op = current_operation()
    if op is None:
        raise RuntimeError(
            "asyncop.scope() needs a running operation to attach to, and this thread runs "
            "none; outside an operation, write 'with runtime.scope()'"
        )
    runtime: Runtime = op.runtime  # type: ignore[assignment]
    return runtime.scope(
        name=name, timeout=timeout, deadline=deadline, shield=shield, supervise=supervise
    )
