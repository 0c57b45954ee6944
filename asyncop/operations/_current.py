"""Which operation's code the calling thread is running.

Workers set it around each callback they run and each coroutine step they
take; a sync scope sets it for the duration of its block. It is a
thread-local, not a context variable: the answer belongs to the thread that
is executing, and an operation's context variables are copied to its
children, which must not inherit the parent as "current".
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._node import AsyncOperation

__all__ = ["current_operation", "current_state"]


class _Current(threading.local):
    # The sync callback or sync scope the thread is running, if any.
    op: AsyncOperation | None = None
    # The coroutine task being stepped (a runtime TaskState), or None. While
    # it is set, the current operation is the task's innermost scope, and
    # blocking waits refuse to run (they would block a worker).
    task: Any = None
    # Set by a worker that is about to run the ready queue itself: the next
    # push from this thread need not wake another worker for it.
    keep_next_push: bool = False
    # The runtime Worker whose thread this is, or None on any other thread.
    worker: Any = None


current_state = _Current()


def current_operation() -> AsyncOperation | None:
    """Return the operation whose code the calling thread is running.

    Inside a sync callback, a coroutine operation or a scope's block, that is
    the operation itself; anywhere else it is None.
    """
    state = current_state
    task = state.task
    if task is not None:
        op: AsyncOperation = task.current
        return op
    return state.op
