"""The operation tree: nodes, states, results, tokens and errors.

An ``AsyncOperation`` is one unit of work. It links to its ``parent``, its
``first_child`` and its ``sibling_next``, so that cancelling a node reaches
its whole subtree with one iterative walk, and a child that ends unlinks
itself in O(1). Running work learns of a cancel through its ``CancelToken``.
This package holds the node's state machine and tree rules; it reaches the
runtime that schedules the work only through the ``RuntimeHooks`` protocol.
"""

from __future__ import annotations

from ._current import current_operation as current_operation
from ._errors import BrokenResourceError as BrokenResourceError
from ._errors import BusyResourceError as BusyResourceError
from ._errors import CancellationError as CancellationError
from ._errors import Cancelled as Cancelled
from ._errors import ClosedResourceError as ClosedResourceError
from ._errors import EndOfChannel as EndOfChannel
from ._errors import InvalidStateError as InvalidStateError
from ._errors import WouldBlock as WouldBlock
from ._node import AsyncOperation as AsyncOperation
from ._state import AsyncResult as AsyncResult
from ._state import OperationState as OperationState
from ._token import CancelHandle as CancelHandle
from ._token import CancelToken as CancelToken

__all__ = [
    "AsyncOperation",
    "AsyncResult",
    "BrokenResourceError",
    "BusyResourceError",
    "CancelHandle",
    "CancelToken",
    "Cancelled",
    "CancellationError",
    "ClosedResourceError",
    "EndOfChannel",
    "InvalidStateError",
    "OperationState",
    "WouldBlock",
    "current_operation",
]
