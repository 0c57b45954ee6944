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
    op: AsyncOperation | None = None
    # True while the thread is stepping a coroutine: blocking waits refuse.
    in_coroutine: bool = False
    # The coroutine task being stepped (a runtime TaskState), or None.
    task: Any = None


current_state = _Current()


def current_operation() -> AsyncOperation | None:
    """Return the operation whose code the calling thread is running.

    Inside a sync callback, a coroutine operation or a scope's block, that is
    the operation itself; anywhere else it is None.
    """
    return current_state.op
