"""The runtime: workers, the ready queue, timers, scopes and helpers.

A ``Runtime`` owns a pool of worker threads that run sync callbacks (and
step coroutines), a binary heap of timers on its clock, and the root set of
its operation tree. Work enters through ``create``/``submit``, ``spawn``,
``run`` or a ``scope`` block; it leaves through ``wait``, ``result`` or the
C-style ``async_*`` helpers on the default runtime. ``shutdown`` cancels
what is live, waits, and joins every thread the runtime started.

This module is the package's one face: ``asyncop`` and its public modules
(``net``, ``lowlevel``, ``testing``...) take what they publish from here,
never from a ``_`` module. The network, process and signal modules, and the
host asyncio loop of ``asyncop.asyncio_bridge``, load on first use of one of
their names (see ``__getattr__`` below), so that ``import asyncop`` does not
pay for ssl, subprocess and asyncio.

Where things are
----------------
Five folders, and the modules that stand on them here:

- ``_core/``: the compiled core (see ``pyproject.toml``): the kernel, the
  worker pool, its loop and its monitor, the work items, the waker and the
  task step, spawning, scopes, timers, the clock, I/O readiness (the
  reactor), blocking calls and the instruments' dispatch. Its
  ``__init__.py`` says which module is what.
- ``_primitives/``: ``Event``, ``Lock``, ``Semaphore``, ``Condition``,
  ``CapacityLimiter``, channels and their ends, their statistics and names.
- ``_net/`` (streams, TCP, TLS, UDP, Unix sockets, DNS, servers, memory
  streams), ``_proc/`` (processes, pipes, signals) and ``_executors/``
  (``ProcessExecutor``, remote executors and the calls they carry): the
  batteries. The first two use the core and the primitives through this
  face alone, and load on first use; ``tests/test_layers.py`` checks both
  and lists what the executors, which the face imports as it loads, take
  from the rest.

Here: ``_scheduler.py``: ``Runtime``, the public face (``spawn``, ``run``,
``scope``, ``shutdown``, ``dump``), built on ``_core/_kernel.py``;
``_kinds.py``: what kind of work a function makes; ``_subscribe.py``:
``waker_new`` and ``resume_when``; ``_interrupt.py``: the Ctrl-C rule;
``_timeout_scope.py``: ``move_on_after`` and its kin; ``_compose.py``:
``select``, ``race``, ``timeout``; ``start`` (``_start.py``); the C-style
helpers (``_helpers.py``); ``current_runtime`` (``_introspect.py``); the
diagnostics (``_deadlock.py``, ``_waitgraph.py``, ``_snapshot.py``,
``_console.py``, ``_dump_signal.py``; the instruments are in the core,
which calls them), the stop
requests (``_grace.py``, ``_shutdown_wait.py``); the host asyncio loop
(``_asyncio_host.py``, ``_asyncio_call.py``).

Who owns which state
--------------------
Each state machine has one owner, the module whose ``_transition_to_*``
functions are the only code that writes its field, each saying whether it
happened (``tests/test_layers.py`` checks it): the runtime's
(``RuntimeState``) is ``_core/_kernel.py``'s, a worker's
``_core/_worker.py``'s, a task's waker's (``WakerStatus``)
``_core/_waker.py``'s, a timer's ``_core/_timers.py``'s, a remote job's
``_executors/_remote.py``'s; an operation's state and
outcome belong to ``operations/_state.py`` and ``operations/_finalize.py``.
A scope's state is read from its operation.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..operations import install_start
from ._compose import race as race
from ._compose import select as select
from ._compose import timeout as timeout
from ._core._awaitables import checkpoint as checkpoint
from ._core._awaitables import current_time as current_time
from ._core._awaitables import notify_closing as notify_closing
from ._core._awaitables import readable as readable
from ._core._awaitables import sleep as sleep
from ._core._awaitables import sleep_forever as sleep_forever
from ._core._awaitables import sleep_until as sleep_until
from ._core._awaitables import writable as writable
from ._core._block import cancel_pending as cancel_pending
from ._core._block import current_task as current_task
from ._core._block import effective_deadline as effective_deadline
from ._core._block import enter_in_task as enter_in_task
from ._core._block import leave_in_task as leave_in_task
from ._core._block import pass_checkpoint as pass_checkpoint
from ._core._block import running_tasks as running_tasks
from ._core._block import spawn_shielded as spawn_shielded
from ._core._block import task_coroutine as task_coroutine
from ._core._blocking import spawn_blocking as spawn_blocking
from ._core._clock import MonotonicClock as MonotonicClock
from ._core._clock import VirtualClock as VirtualClock
from ._core._items import add_callback_hook as add_callback_hook
from ._core._items import remove_callback_hook as remove_callback_hook
from ._core._scope import Scope as Scope
from ._core._scope import ScopeState as ScopeState
from ._core._scope import scope as scope
from ._core._waker import Subscription as Subscription
from ._core._waker import WaitEvent as WaitEvent
from ._core._waker import Waker as Waker
from ._core._waker import WakerStatus as WakerStatus
from ._core._waker import cancel as cancel
from ._core._waker import let_go as let_go
from ._core._waker import resolve as resolve

# The waker callback that ends a wait with TimeoutError (asyncop.lowlevel's
# ``timeout``); plain ``timeout`` here is asyncop.timeout(seconds, op).
from ._core._waker import timeout as timeout_callback
from ._dump_signal import dump_on_signal as dump_on_signal
from ._executors._executors import ProcessExecutor as ProcessExecutor
from ._executors._remote import JobState as JobState
from ._executors._remote import RemoteExecutor as RemoteExecutor
from ._executors._remote import RemoteJob as RemoteJob
from ._executors._remote_call import RemoteToken as RemoteToken
from ._executors._remote_call import cancel_remote as cancel_remote
from ._executors._remote_call import decode_outcome as decode_outcome
from ._executors._remote_call import describe_error as describe_error
from ._executors._remote_call import pack_call as pack_call
from ._executors._remote_call import remote_token as remote_token
from ._executors._remote_call import run_call as run_call
from ._grace import stop_requested as stop_requested
from ._grace import wait_stop_requested as wait_stop_requested
from ._helpers import async_await as async_await
from ._helpers import async_cancel as async_cancel
from ._helpers import async_create as async_create
from ._helpers import async_result as async_result
from ._helpers import async_state as async_state
from ._helpers import async_submit as async_submit
from ._helpers import async_worker_limit as async_worker_limit
from ._helpers import default_runtime as default_runtime
from ._home import drive_home as drive_home  # (asyncop's anyio backend's)
from ._home import run_here as run_here
from ._introspect import current_runtime as current_runtime
from ._primitives._channel import Channel as Channel
from ._primitives._channel_ends import ChannelReceiver as ChannelReceiver
from ._primitives._channel_ends import ChannelSender as ChannelSender
from ._primitives._condition import Condition as Condition
from ._primitives._limiter import CapacityLimiter as CapacityLimiter
from ._primitives._limiter import current_default_limiter as current_default_limiter
from ._primitives._semaphore import Semaphore as Semaphore
from ._primitives._statistics import CapacityLimiterStatistics as CapacityLimiterStatistics
from ._primitives._statistics import ChannelStatistics as ChannelStatistics
from ._primitives._statistics import ConditionStatistics as ConditionStatistics
from ._primitives._statistics import EventStatistics as EventStatistics
from ._primitives._statistics import LockStatistics as LockStatistics
from ._primitives._statistics import SemaphoreStatistics as SemaphoreStatistics
from ._primitives._sync import Event as Event
from ._primitives._sync import Lock as Lock
from ._primitives._sync import LockGuard as LockGuard
from ._scheduler import Runtime as Runtime
from ._start import TASK_STATUS_IGNORED as TASK_STATUS_IGNORED
from ._start import TaskStatus as TaskStatus
from ._start import start as _start
from ._subscribe import resume_when as resume_when
from ._subscribe import waker_new as waker_new
from ._timeout_scope import TimeoutScope as TimeoutScope
from ._timeout_scope import fail_after as fail_after
from ._timeout_scope import fail_at as fail_at
from ._timeout_scope import move_on_after as move_on_after
from ._timeout_scope import move_on_at as move_on_at

if TYPE_CHECKING:
    from ._asyncio_call import call_from_task as call_from_task
    from ._asyncio_call import call_from_thread as call_from_thread
    from ._asyncio_call import check_coroutine_function as check_coroutine_function
    from ._net._dns import check_port as check_port
    from ._net._dns import getaddrinfo as getaddrinfo
    from ._net._memory_streams import memory_stream_pair as memory_stream_pair
    from ._net._serve import serve_listeners as serve_listeners
    from ._net._serve import serve_tcp as serve_tcp
    from ._net._stream_api import MAX_READ as MAX_READ
    from ._net._stream_api import DelimiterNotFound as DelimiterNotFound
    from ._net._stream_api import IncompleteRead as IncompleteRead
    from ._net._stream_api import ReceiveStream as ReceiveStream
    from ._net._stream_api import SendStream as SendStream
    from ._net._stream_api import Stream as Stream
    from ._net._streams import SocketStream as SocketStream
    from ._net._tcp import SocketListener as SocketListener
    from ._net._tcp import open_tcp_listeners as open_tcp_listeners
    from ._net._tcp import open_tcp_stream as open_tcp_stream
    from ._net._tls import TLSStream as TLSStream
    from ._net._udp import UDPSocket as UDPSocket
    from ._net._udp import open_udp_socket as open_udp_socket
    from ._net._unix import open_unix_listener as open_unix_listener
    from ._net._unix import open_unix_stream as open_unix_stream
    from ._net._unix import serve_unix as serve_unix
    from ._proc._pipes import PipeStream as PipeStream
    from ._proc._process import Process as Process
    from ._proc._process_start import open_process as open_process
    from ._proc._process_start import run_process as run_process
    from ._proc._signals import SignalReceiver as SignalReceiver
    from ._proc._signals import open_signal_receiver as open_signal_receiver

# The names loaded on first use -> their module. The same names, imported
# above for the type checkers (a test keeps the two lists equal).
_LAZY = {
    "call_from_task": "_asyncio_call",
    "call_from_thread": "_asyncio_call",
    "check_coroutine_function": "_asyncio_call",
    "check_port": "_net._dns",
    "getaddrinfo": "_net._dns",
    "memory_stream_pair": "_net._memory_streams",
    "PipeStream": "_proc._pipes",
    "Process": "_proc._process",
    "open_process": "_proc._process_start",
    "run_process": "_proc._process_start",
    "serve_listeners": "_net._serve",
    "serve_tcp": "_net._serve",
    "SignalReceiver": "_proc._signals",
    "open_signal_receiver": "_proc._signals",
    "MAX_READ": "_net._stream_api",
    "DelimiterNotFound": "_net._stream_api",
    "IncompleteRead": "_net._stream_api",
    "ReceiveStream": "_net._stream_api",
    "SendStream": "_net._stream_api",
    "Stream": "_net._stream_api",
    "SocketStream": "_net._streams",
    "SocketListener": "_net._tcp",
    "open_tcp_listeners": "_net._tcp",
    "open_tcp_stream": "_net._tcp",
    "TLSStream": "_net._tls",
    "UDPSocket": "_net._udp",
    "open_udp_socket": "_net._udp",
    "open_unix_listener": "_net._unix",
    "open_unix_stream": "_net._unix",
    "serve_unix": "_net._unix",
}


def __getattr__(name: str) -> Any:
    """Load the module of a network, process, signal or asyncio name on its first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(
            f"module {__name__!r} has no attribute {name!r}; "
            "use the public names of asyncop and its public modules instead"
        )
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next lookup does not come here
    return value


# AsyncOperation.start() lives below the runtime, in the operations package:
# give it the runtime's start().
install_start(_start)

__all__ = [
    "add_callback_hook",
    "async_await",
    "async_cancel",
    "async_create",
    "async_result",
    "async_state",
    "async_submit",
    "async_worker_limit",
    "call_from_task",
    "call_from_thread",
    "cancel",
    "cancel_pending",
    "cancel_remote",
    "CapacityLimiter",
    "CapacityLimiterStatistics",
    "Channel",
    "ChannelReceiver",
    "ChannelSender",
    "ChannelStatistics",
    "check_coroutine_function",
    "check_port",
    "checkpoint",
    "Condition",
    "ConditionStatistics",
    "current_default_limiter",
    "current_runtime",
    "current_task",
    "current_time",
    "decode_outcome",
    "default_runtime",
    "DelimiterNotFound",
    "describe_error",
    "dump_on_signal",
    "effective_deadline",
    "enter_in_task",
    "Event",
    "EventStatistics",
    "fail_after",
    "fail_at",
    "getaddrinfo",
    "IncompleteRead",
    "JobState",
    "leave_in_task",
    "let_go",
    "Lock",
    "LockGuard",
    "LockStatistics",
    "MAX_READ",
    "memory_stream_pair",
    "MonotonicClock",
    "move_on_after",
    "move_on_at",
    "notify_closing",
    "open_process",
    "open_signal_receiver",
    "open_tcp_listeners",
    "open_tcp_stream",
    "open_udp_socket",
    "open_unix_listener",
    "open_unix_stream",
    "pack_call",
    "pass_checkpoint",
    "PipeStream",
    "Process",
    "ProcessExecutor",
    "race",
    "readable",
    "ReceiveStream",
    "remote_token",
    "remove_callback_hook",
    "RemoteExecutor",
    "RemoteJob",
    "RemoteToken",
    "resolve",
    "resume_when",
    "run_call",
    "run_process",
    "running_tasks",
    "Runtime",
    "Scope",
    "scope",
    "ScopeState",
    "select",
    "Semaphore",
    "SemaphoreStatistics",
    "SendStream",
    "serve_listeners",
    "serve_tcp",
    "serve_unix",
    "SignalReceiver",
    "sleep",
    "sleep_forever",
    "sleep_until",
    "SocketListener",
    "SocketStream",
    "spawn_blocking",
    "spawn_shielded",
    "stop_requested",
    "Stream",
    "Subscription",
    "task_coroutine",
    "TASK_STATUS_IGNORED",
    "TaskStatus",
    "timeout",
    "timeout_callback",
    "TimeoutScope",
    "TLSStream",
    "UDPSocket",
    "VirtualClock",
    "wait_stop_requested",
    "WaitEvent",
    "Waker",
    "waker_new",
    "WakerStatus",
    "writable",
]
