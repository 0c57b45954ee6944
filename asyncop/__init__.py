"""asyncop: structured concurrency on an operation tree.

Every unit of work is an ``AsyncOperation`` in a tree: cancelling a node
cancels its subtree, a node ends only after its children, and failures climb
to the parent as an ``ExceptionGroup``. The work runs on asyncop's own
``Runtime`` of worker threads and timers. Start with::

    import asyncop

    with asyncop.Runtime() as runtime:
        with runtime.scope(timeout=5) as root:
            root.spawn(download, "a")
            root.spawn(download, "b")

This module only re-exports the public names.
"""

from __future__ import annotations

import sys as _sys
from importlib import import_module as _import_module
from types import ModuleType as _ModuleType
from typing import TYPE_CHECKING

# First: decides whether the core modules run compiled or from source.
from . import _compiled as _compiled
from ._anyio_hook import install as _install_anyio_backend
from ._exports import publish as _publish
from ._peer_names import SUBMODULES as _SUBMODULES
from ._peer_names import missing as _missing
from ._version import __version__ as __version__
from .operations import AsyncOperation as AsyncOperation
from .operations import AsyncResult as AsyncResult
from .operations import BrokenResourceError as BrokenResourceError
from .operations import BusyResourceError as BusyResourceError
from .operations import CancelHandle as CancelHandle
from .operations import CancellationError as CancellationError
from .operations import Cancelled as Cancelled
from .operations import CancelToken as CancelToken
from .operations import ClosedResourceError as ClosedResourceError
from .operations import DeadlockError as DeadlockError
from .operations import EndOfChannel as EndOfChannel
from .operations import InvalidStateError as InvalidStateError
from .operations import OperationState as OperationState
from .operations import OperationStatistics as OperationStatistics
from .operations import RuntimeFace as RuntimeFace
from .operations import WouldBlock as WouldBlock
from .operations import current_operation as current_operation
from .runtime import TASK_STATUS_IGNORED as TASK_STATUS_IGNORED
from .runtime import CapacityLimiter as CapacityLimiter
from .runtime import CapacityLimiterStatistics as CapacityLimiterStatistics
from .runtime import Channel as Channel
from .runtime import ChannelReceiver as ChannelReceiver
from .runtime import ChannelSender as ChannelSender
from .runtime import ChannelStatistics as ChannelStatistics
from .runtime import Condition as Condition
from .runtime import ConditionStatistics as ConditionStatistics
from .runtime import Event as Event
from .runtime import EventStatistics as EventStatistics
from .runtime import Lock as Lock
from .runtime import LockGuard as LockGuard
from .runtime import LockStatistics as LockStatistics
from .runtime import ProcessExecutor as ProcessExecutor
from .runtime import Runtime as Runtime
from .runtime import Scope as Scope
from .runtime import ScopeState as ScopeState
from .runtime import Semaphore as Semaphore
from .runtime import SemaphoreStatistics as SemaphoreStatistics
from .runtime import TaskStatus as TaskStatus
from .runtime import TimeoutScope as TimeoutScope
from .runtime import WakerStatus as WakerStatus
from .runtime import async_await as async_await
from .runtime import async_cancel as async_cancel
from .runtime import async_create as async_create
from .runtime import async_result as async_result
from .runtime import async_state as async_state
from .runtime import async_submit as async_submit
from .runtime import async_worker_limit as async_worker_limit
from .runtime import checkpoint as checkpoint
from .runtime import current_default_limiter as current_default_limiter
from .runtime import current_runtime as current_runtime
from .runtime import current_time as current_time
from .runtime import default_runtime as default_runtime
from .runtime import dump_on_signal as dump_on_signal
from .runtime import fail_after as fail_after
from .runtime import fail_at as fail_at
from .runtime import move_on_after as move_on_after
from .runtime import move_on_at as move_on_at
from .runtime import notify_closing as notify_closing
from .runtime import race as race
from .runtime import readable as readable
from .runtime import remote_token as remote_token
from .runtime import scope as scope
from .runtime import select as select
from .runtime import sleep as sleep
from .runtime import sleep_forever as sleep_forever
from .runtime import sleep_until as sleep_until
from .runtime import spawn_blocking as spawn_blocking
from .runtime import stop_requested as stop_requested
from .runtime import timeout as timeout
from .runtime import wait_stop_requested as wait_stop_requested
from .runtime import writable as writable

__all__ = [
    "AsyncOperation",
    "AsyncResult",
    "BrokenResourceError",
    "BusyResourceError",
    "CancelHandle",
    "CancelToken",
    "CapacityLimiter",
    "CapacityLimiterStatistics",
    "Channel",
    "ChannelReceiver",
    "ChannelSender",
    "ChannelStatistics",
    "Cancelled",
    "CancellationError",
    "ClosedResourceError",
    "DeadlockError",
    "Condition",
    "ConditionStatistics",
    "EndOfChannel",
    "Event",
    "EventStatistics",
    "InvalidStateError",
    "Lock",
    "LockGuard",
    "LockStatistics",
    "OperationState",
    "OperationStatistics",
    "ProcessExecutor",
    "Runtime",
    "RuntimeFace",
    "Scope",
    "ScopeState",
    "Semaphore",
    "SemaphoreStatistics",
    "TASK_STATUS_IGNORED",
    "TaskStatus",
    "TimeoutScope",
    "WakerStatus",
    "WouldBlock",
    "__version__",
    "async_await",
    "async_cancel",
    "async_create",
    "async_result",
    "async_state",
    "async_submit",
    "async_worker_limit",
    "checkpoint",
    "current_default_limiter",
    "current_operation",
    "current_runtime",
    "current_time",
    "default_runtime",
    "dump_on_signal",
    "fail_after",
    "fail_at",
    "move_on_after",
    "move_on_at",
    "notify_closing",
    "race",
    "readable",
    "remote_token",
    "scope",
    "select",
    "sleep",
    "sleep_forever",
    "sleep_until",
    "spawn_blocking",
    "stop_requested",
    "timeout",
    "wait_stop_requested",
    "writable",
]

_publish("asyncop", globals(), __all__)

if not TYPE_CHECKING:  # type checkers keep reporting unknown names themselves

    def __getattr__(name: str) -> _ModuleType:
        # asyncop.net, asyncop.lowlevel...: imported on first use, as the
        # hints below and the docs write them after a plain 'import asyncop'.
        if name in _SUBMODULES:
            return _import_module(f"{__name__}.{name}")
        # asyncop.run, asyncop.open_nursery...: say what asyncop calls it.
        raise _missing(_sys.modules[__name__], name)


# anyio finds its "asyncop" backend through this, once asyncop is imported.
_install_anyio_backend()
