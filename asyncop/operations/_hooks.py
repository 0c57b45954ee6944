"""What an operation needs from the runtime that owns it.

The operations package sits below the runtime in the import order, so the
node reaches its runtime only through this protocol. ``asyncop.runtime``
implements it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..platform import RecursiveLock
    from ._node import AsyncOperation, OpKind

__all__ = ["After", "RuntimeHooks"]

# Actions collected under the runtime lock and run after it is released:
# user callbacks (on_cancel, completion callbacks) must never run under it.
After = list[Callable[[], object]]


class RuntimeHooks(Protocol):
    """The runtime services an ``AsyncOperation`` calls into."""

    name: str
    _lock: RecursiveLock

    def now(self) -> float: ...

    def _submit(self, op: AsyncOperation) -> None: ...

    def _new_operation(
        self,
        fn: Callable[..., Any] | None,
        args: tuple[Any, ...],
        *,
        parent: AsyncOperation | None,
        name: str | None,
        kind: OpKind | None = None,
        submit: bool = False,
        supervise: bool = False,
    ) -> AsyncOperation:
        """Make an operation; with ``submit``, link and queue it in one locked step.

        ``kind`` is worked out from ``fn`` unless given.
        """
        ...

    def _track_root_locked(self, op: AsyncOperation) -> None: ...

    def _on_final_locked(self, op: AsyncOperation, after: After) -> None: ...

    def _on_cancel_running_locked(self, op: AsyncOperation, after: After) -> None:
        """A RUNNING, CREATED or PENDING operation's token was just cancelled."""
        ...

    def _arm_deadline_locked(self, op: AsyncOperation) -> bool:
        """(Re)arm the deadline timer; True if the deadline has already passed."""
        ...
