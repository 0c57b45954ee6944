"""The operation tree: nodes, states, results, tokens and errors.

An ``AsyncOperation`` is one unit of work. It links to its ``parent``, its
``first_child`` and its ``sibling_next``, so that cancelling a node reaches
its whole subtree with one iterative walk, and a child that ends unlinks
itself in O(1). Running work learns of a cancel through its ``CancelToken``.
This package holds the node's state machine and tree rules; it reaches the
runtime that schedules the work only through the ``RuntimeHooks`` protocol,
the services the runtime installs in ``_hooks.py``, and the base
``RuntimeBase`` of ``_owner.py`` that every runtime extends (the lock, the
clock and the two calls every operation makes, which the compiled core
reaches in C).

Where things are: ``_node.py`` defines ``AsyncOperation`` (its public
face), on the base ``OperationFields`` of ``_fields.py`` (its fields, which
the compiled core reads in C); the machinery behind it is in ``_cancel.py`` (the cancel
walk), ``_waiting.py`` (blocking until a node ends, the waiter list) and
``_finalize.py`` (how a node ends and hands its failure up, and the
transition of its outcome), and ``_stop.py`` (who was asked to stop by a
cancel with a grace). ``_state.py`` has the states and their transitions,
the only code that writes a node's state, the result snapshot and the
node's kinds; ``_token.py``
the cancel token; ``_park.py`` how a blocked thread is parked so that a
cancel wakes it; ``_current.py`` the per-thread state (the current
operation); ``_errors.py`` the exceptions; ``_warn.py`` warnings that
point at the user's line.

This module is the package's one face. Besides the public names in
``__all__`` (which ``asyncop`` re-exports), it gives the runtime the
internals it drives the tree with and the type variables of the public
signatures; no other package imports a ``_`` module of this one.
"""

from __future__ import annotations

from ._current import RAISE as RAISE
from ._current import ThreadState as ThreadState
from ._current import _thread_local as _thread_local
from ._current import current_operation as current_operation
from ._current import every_thread_state as every_thread_state
from ._current import state_of as state_of
from ._current import thread_state as thread_state
from ._errors import SPAWN_KEYWORDS as SPAWN_KEYWORDS
from ._errors import BrokenResourceError as BrokenResourceError
from ._errors import BusyResourceError as BusyResourceError
from ._errors import CancellationError as CancellationError
from ._errors import Cancelled as Cancelled
from ._errors import ClosedResourceError as ClosedResourceError
from ._errors import DeadlockError as DeadlockError
from ._errors import EndOfChannel as EndOfChannel
from ._errors import InvalidStateError as InvalidStateError
from ._errors import WouldBlock as WouldBlock
from ._errors import blocking_in_task_error as blocking_in_task_error
from ._errors import cancelled_for as cancelled_for
from ._errors import check_flag as check_flag
from ._errors import keywords_refused as keywords_refused
from ._errors import no_result_error as no_result_error
from ._errors import only_cancelled as only_cancelled
from ._errors import without_cancelled as without_cancelled
from ._executor import spawn_remote as spawn_remote
from ._face import RuntimeFace as RuntimeFace
from ._face import ScopeFace as ScopeFace
from ._finalize import end_work_on_worker as end_work_on_worker
from ._finalize import line_of as line_of
from ._finalize import transition_to_ended as transition_to_ended
from ._foreign import awaited_outside_error as awaited_outside_error
from ._foreign import foreign_failure as foreign_failure
from ._foreign import foreign_yield_error as foreign_yield_error
from ._foreign import outside_advice as outside_advice
from ._guard import describe_fn as describe_fn
from ._guard import log_user_failure as log_user_failure
from ._guard import run_isolated as run_isolated
from ._guard import safe_repr as safe_repr
from ._guard import safe_str as safe_str
from ._hooks import After as After
from ._hooks import RuntimeHooks as RuntimeHooks
from ._hooks import install_start as install_start
from ._hooks import run_after as run_after
from ._node import AsyncOperation as AsyncOperation
from ._node import _user_frame as _user_frame
from ._node import made_by_user as made_by_user
from ._owner import RuntimeBase as RuntimeBase
from ._park import cancelled_error as cancelled_error
from ._park import park as park
from ._park import release_quietly as release_quietly
from ._state import AsyncResult as AsyncResult
from ._state import OperationState as OperationState
from ._state import OpKind as OpKind
from ._state import Outcome as Outcome
from ._state import transition_to_running as transition_to_running
from ._stats import OperationStatistics as OperationStatistics
from ._stop import check_cancel_grace as check_cancel_grace
from ._stop import stop_requested_of as stop_requested_of
from ._suspend import OWN_COROUTINE as OWN_COROUTINE
from ._suspend import OWN_GENERATOR as OWN_GENERATOR
from ._suspend import SUSPEND_CODE as SUSPEND_CODE
from ._suspend import Awaited as Awaited
from ._suspend import Suspends as Suspends
from ._suspend import SuspendsItself as SuspendsItself
from ._suspend import Suspension as Suspension
from ._suspend import Watched as Watched
from ._suspend import suspend as suspend
from ._suspend import suspend_on_constant as suspend_on_constant
from ._token import CancelHandle as CancelHandle
from ._token import CancelToken as CancelToken
from ._tree import walk as walk
from ._typing import A as A
from ._typing import B as B
from ._typing import C as C
from ._typing import D as D
from ._typing import E as E
from ._typing import R as R
from ._typing import T as T
from ._typing import Ts as Ts
from ._typing import V as V
from ._waiting import TreeWait as TreeWait
from ._warn import warn_user as warn_user

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
    "DeadlockError",
    "EndOfChannel",
    "InvalidStateError",
    "OperationState",
    "OperationStatistics",
    "RuntimeFace",
    "WouldBlock",
    "current_operation",
]
