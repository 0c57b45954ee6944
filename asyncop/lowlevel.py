"""The waker machinery, for building new awaitables.

``Waker`` and ``WakerStatus`` describe how a suspended task is woken;
``waker_new`` resets a task's waker for a new wait, ``resume_when``
subscribes it to an event, and ``resolve``, ``cancel`` and ``timeout`` are
the standard callbacks that decide how a firing event resumes the task.
See ``asyncop/runtime/_waker.py`` for the states and their invariants.
"""

from __future__ import annotations

from ._exports import publish as _publish
from .runtime import Subscription as Subscription
from .runtime import WaitEvent as WaitEvent
from .runtime import Waker as Waker
from .runtime import WakerStatus as WakerStatus
from .runtime import cancel as cancel
from .runtime import resolve as resolve
from .runtime import resume_when as resume_when
from .runtime import timeout_callback as timeout
from .runtime import waker_new as waker_new

__all__ = [
    "Subscription",
    "WaitEvent",
    "Waker",
    "WakerStatus",
    "cancel",
    "resolve",
    "resume_when",
    "timeout",
    "waker_new",
]

_publish("asyncop.lowlevel", globals(), __all__)
