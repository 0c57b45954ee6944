"""``ScopeDone``: the wait of a scope's exit for its children.

An ``async with scope()`` exit first ends the block (``_end_work``, which
makes the scope final at once when no child is left), then, while children
remain, waits on a ``ScopeDone`` until the scope's operation is final. The
wait is not interrupted by a cancel (the cancel reaches the children
instead), and is not a cancellation point on entry: it must happen. It arms
under the runtime lock (``arms_locked``), so the worker stepping the task
subscribes and suspends it in one locked step (``_wait_on`` in
``_task.py``); it is awaited nowhere else, and has no ``_arm`` of its own.

See ``_scope.py`` for the rules of scopes, and ``_block.py`` for the entry.
"""

from __future__ import annotations

from typing import final

from ...operations import AsyncOperation
from ._awaitables import forget_end_waiter, when_ended_locked
from ._waker import Subscription, WaitEvent

__all__ = ["ScopeDone"]


@final
class ScopeDone(WaitEvent):
    """Wait, without being interruptible, until a scope operation is final."""

    __slots__ = ("op",)
    cancellable = False
    entry_checked = False
    arms_locked = True

    def __init__(self, op: AsyncOperation) -> None:
        self.op = op

    def _arm_locked(self, sub: Subscription) -> None:
        if not when_ended_locked(self.op, sub, sub.fire):
            sub.fire()  # final already: the task goes on without suspending

    def _disarm(self, sub: Subscription) -> None:
        forget_end_waiter(self.op, sub)

    def _describe(self) -> str:
        return f"the children of scope {self.op.name!r}"
