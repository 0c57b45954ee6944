"""The waker machinery, for building new awaitables, and a task's view of its tree.

``Waker`` and ``WakerStatus`` describe how a suspended task is woken;
``waker_new`` resets a task's waker for a new wait, ``resume_when``
subscribes it to an event, and ``resolve``, ``cancel`` and ``timeout`` are
the standard callbacks that decide how a firing event resumes the task.
See ``asyncop/runtime/_core/_waker.py`` for the states and their invariants.

For libraries that build their own cancel scopes on asyncop's (the anyio
backend): ``enter_in_task(scope)`` and ``leave_in_task(scope, exc)`` open and
close a scope's block in the running task without an await;
``current_task()``, ``running_tasks(runtime)``, ``task_coroutine(op)``,
``effective_deadline()`` and ``cancel_pending()`` answer what a task asks of
its place in the tree, ``spawn_shielded()`` spawns a task that runs its
first step whatever happens above it meanwhile, and ``pass_checkpoint()``
passes a cancellation point without a trip through the scheduler. See
``asyncop/runtime/_core/_block.py``.

For libraries that let a thread call back into their event loop (anyio's
``from_thread``): ``add_callback_hook(hook)`` runs ``hook(runtime)`` on a
worker thread just before each sync callback, and
``remove_callback_hook(hook)`` stops it. See ``asyncop/runtime/_core/_items.py``.

``is_compiled()`` says whether asyncop's core runs compiled (an install with
a C compiler) or as Python source (``ASYNCOP_NO_EXTENSIONS=1``, or no
compiler); see ``asyncop/_compiled.py``.
"""

from __future__ import annotations

from ._compiled import is_compiled as is_compiled
from ._exports import publish as _publish
from .runtime import Subscription as Subscription
from .runtime import WaitEvent as WaitEvent
from .runtime import Waker as Waker
from .runtime import WakerStatus as WakerStatus
from .runtime import add_callback_hook as add_callback_hook
from .runtime import cancel as cancel
from .runtime import cancel_pending as cancel_pending
from .runtime import current_task as current_task
from .runtime import effective_deadline as effective_deadline
from .runtime import enter_in_task as enter_in_task
from .runtime import leave_in_task as leave_in_task
from .runtime import pass_checkpoint as pass_checkpoint
from .runtime import remove_callback_hook as remove_callback_hook
from .runtime import resolve as resolve
from .runtime import resume_when as resume_when
from .runtime import running_tasks as running_tasks
from .runtime import spawn_shielded as spawn_shielded
from .runtime import task_coroutine as task_coroutine
from .runtime import timeout_callback as timeout
from .runtime import waker_new as waker_new

__all__ = [
    "Subscription",
    "WaitEvent",
    "Waker",
    "WakerStatus",
    "add_callback_hook",
    "cancel",
    "cancel_pending",
    "current_task",
    "effective_deadline",
    "enter_in_task",
    "is_compiled",
    "leave_in_task",
    "pass_checkpoint",
    "remove_callback_hook",
    "resolve",
    "resume_when",
    "running_tasks",
    "spawn_shielded",
    "task_coroutine",
    "timeout",
    "waker_new",
]

_publish("asyncop.lowlevel", globals(), __all__)
