"""The runtime: workers, the ready queue, timers, scopes and helpers.

A ``Runtime`` owns a pool of worker threads that run sync callbacks (and
step coroutines), a binary heap of timers on its clock, and the root set of
its operation tree. Work enters through ``create``/``submit``, ``spawn``,
``run`` or a ``scope`` block; it leaves through ``wait``, ``result`` or the
C-style ``async_*`` helpers on the default runtime. ``shutdown`` cancels
what is live, waits, and joins every thread the runtime started.
"""

from __future__ import annotations

from ..operations._hooks import install_start
from ._clock import MonotonicClock as MonotonicClock
from ._clock import VirtualClock as VirtualClock
from ._helpers import async_await as async_await
from ._helpers import async_cancel as async_cancel
from ._helpers import async_create as async_create
from ._helpers import async_result as async_result
from ._helpers import async_state as async_state
from ._helpers import async_submit as async_submit
from ._helpers import async_worker_limit as async_worker_limit
from ._helpers import default_runtime as default_runtime
from ._scheduler import Runtime as Runtime
from ._scope import Scope as Scope
from ._start import start as _start

# AsyncOperation.start() lives below the runtime, in the operations package:
# give it the runtime's start().
install_start(_start)

__all__ = [
    "MonotonicClock",
    "Runtime",
    "Scope",
    "VirtualClock",
    "async_await",
    "async_cancel",
    "async_create",
    "async_result",
    "async_state",
    "async_submit",
    "async_worker_limit",
    "default_runtime",
]
