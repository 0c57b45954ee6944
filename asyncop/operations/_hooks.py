"""What an operation needs from the runtime that owns it.

The operations package sits below the runtime in the import order, so the
node reaches its runtime only through this protocol, which the runtime
implements, and through the few services the runtime installs here when it
is imported (:func:`install_start`). An operation exists only once a runtime
made it, so by the time a node calls a service, it is installed. The calls
every operation makes (``_new_operation``, ``_on_final_locked``, and from
the cancel walk ``_on_cancel_running_locked``) and the fields they need
are declared on ``RuntimeBase`` (``_owner.py``) too, which every runtime
extends, so that the compiled node calls them in C.

Work the node and the runtime do under the runtime lock collects what must
happen after it (``After``), and :func:`run_after` runs it once the lock is
released.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ._guard import run_isolated

if TYPE_CHECKING:
    from ..platform import RecursiveLock
    from ._node import AsyncOperation
    from ._state import OpKind

__all__ = ["After", "RuntimeHooks", "StartFn", "install_start", "run_after", "start_child"]

# Actions collected under the runtime lock and run after it is released:
# user callbacks (on_cancel, completion callbacks) must never run under it.
After = list[Callable[[], object]]


def run_after(after: After) -> None:
    """Run the actions collected under the runtime lock, after releasing it.

    An exception from one action (a user's ``on_cancel`` callback), even
    SystemExit or KeyboardInterrupt, is logged and does not stop the others:
    they carry wakeups that must be delivered, and the cancel that triggered
    them has already happened and cannot be undone. A KeyboardInterrupt on
    the main thread is raised again once every action has run.
    """
    run_isolated(after, "a cancellation or completion callback")


class RuntimeHooks(Protocol):
    """The runtime services an ``AsyncOperation`` calls into."""

    name: str
    _lock: RecursiveLock
    # The earliest armed deadline (inf: none), read without the lock, and
    # the clock read that goes with it.
    _next_deadline: float
    _now: Callable[[], float]
    # The pending stop requests of cancel(grace=...), by operation (see _stop.py).
    _stop_requests: dict[AsyncOperation, Any]
    # The same clock for op.stats' timestamps, read where it must not raise.
    _stamp: Callable[[], float]
    # The runtime's instruments, None when none is installed (see the
    # runtime's _instruments.py): the cancel walk tells them of each cancel.
    _instruments: Any

    def now(self) -> float: ...

    def _fire_due_timers(self) -> None:
        """Fire every timer whose deadline has passed, on the calling thread."""
        ...

    def _submit(self, op: AsyncOperation) -> None: ...

    def _new_operation(
        self,
        fn: Callable[..., Any] | None,
        args: tuple[Any, ...],
        parent: AsyncOperation | None,
        name: str | None,
        submit: bool = False,
        supervise: bool = False,
        kind: OpKind | None = None,
    ) -> AsyncOperation:
        """Make an operation and link it; with ``submit``, queue it in the same locked step.

        ``kind`` is worked out from ``fn`` unless given.
        """
        ...

    def _track_root_locked(self, op: AsyncOperation) -> None: ...

    def _on_final_locked(
        self, op: AsyncOperation, after: After, at: float | None = None
    ) -> None: ...

    def _on_cancel_running_locked(self, op: AsyncOperation, after: After) -> bool:
        """A RUNNING, CREATED or PENDING operation's token was just cancelled.

        Returns whether a task was woken (or, never started, marked never to run).
        """
        ...

    def _arm_deadline_locked(self, op: AsyncOperation) -> bool:
        """(Re)arm the deadline timer; True if the deadline has already passed."""
        ...

    def _request_stop(self, op: AsyncOperation, reason: object, grace: float | None) -> object:
        """Ask ``op``'s subtree to stop; cancel it after ``grace`` seconds (None: never)."""
        ...

    def _wake_stop_waiters_locked(self) -> None:
        """Wake the tasks in ``wait_stop_requested()`` that were asked to stop by now."""
        ...


#: ``start(op, fn, args, name)``: spawn ``fn(*args, task_status=...)`` under
#: ``op`` and wait until it is ready (an awaitable in a task, blocking in a
#: thread); what ``AsyncOperation.start`` does.
StartFn = Callable[["AsyncOperation", Callable[..., Any], tuple[Any, ...], "str | None"], Any]

_start: StartFn | None = None


def install_start(start: StartFn) -> None:
    """Give ``AsyncOperation.start`` the runtime's ``start``; ``asyncop.runtime`` calls it once."""
    global _start
    _start = start


def start_child(
    op: AsyncOperation, fn: Callable[..., Any], args: tuple[Any, ...], name: str | None
) -> Any:
    """Run the installed ``start`` for ``op.start(fn, *args, name=name)``."""
    start = _start
    assert start is not None, "asyncop.runtime installs start when it is imported"
    return start(op, fn, args, name)
