"""The fields of the kernel and of its workers, in a layout the compiled core reads in C.

A push, the batch loop, the end of a task's work and a wake read and write
a few fields of the :class:`~asyncop.runtime._core._kernel.Kernel` (its
ready queues, its queue number, its idle stack) and of the
:class:`~asyncop.runtime._core._worker.Worker` that runs them (its item,
its item number, its meter) for every task. Both are declared here, as
:class:`OperationFields` (``operations/_fields.py``) declares a node's:
compiled (see ``hatch_build.py``), :class:`KernelFields` and
:class:`WorkerFields` are extension types (``_fields.pxd``), so the core
modules that name them as the type of a runtime or a worker
(``cython.locals``, or the signatures of their ``.pxd``) read and write
these fields as C struct members, where an attribute of a plain class is a
dictionary walk through the type and a descriptor call. Run as Python,
they are plain classes with ``__slots__``.

Why a module of its own: the modules that read the fields in C
(``_items``, ``_task``, ``_spawn``) are imported by ``_kernel`` and
``_worker``, and a compiled module finds the types it names as it is
imported; this module imports nothing of the runtime, so it is always
there first. (Compiled, it imports ``_timers``, whose heap is the type of
the kernel's ``_timers``, and which imports nothing of the runtime either.)

Each class holds fields only, and says nothing of their meaning: the
kernel's are set and described in ``Kernel.__init__`` (``_kernel.py``),
which owns them with its bases ``WorkerPool`` (``_pool.py``),
``NodeHooks`` (``_spawn.py``, the node's calls on its runtime) and
``TimerCalls`` (``_timer_calls.py``, arming and cancelling a timer); ``Worker``
(``_worker.py``) extends ``WorkerFields``, sets every field in its
``__init__``, and tells who writes what. ``KernelFields`` holds the
kernel's hot fields alone: the rest live in the runtime's ``__dict__``
(``Runtime`` is a plain class, and so keeps its weak references too).
``Worker`` adds no slot of its own (one would hide its base's).
``KernelFields`` extends the operations package's ``RuntimeBase``
(``operations/_owner.py``), which holds the two fields a node reads (the
lock and the stamp clock), and is imported from its own module: compiled,
Cython matches a cimported base to the module that defines it.
:class:`WorkerState`, the values of a worker's ``state``, is here too, for
the push (``_waker.py``), which reads a worker's state and is imported
below ``_worker``; ``_worker`` owns the field and its transitions.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

try:
    import cython  # pyright: ignore[reportMissingImports]
except ImportError:  # run as Python, without Cython installed
    from ...platform import pure_cython as cython
if TYPE_CHECKING or not cython.compiled:  # (compiled, _fields.pxd cimports it: the C base)
    # (From its own module: Cython matches a C base to the module that defines it.)
    from ...operations._owner import RuntimeBase

__all__ = ["KernelFields", "WorkerFields", "WorkerState"]


class WorkerState(enum.Enum):
    """Where a worker is in its life."""

    BUSY = "busy"  # running the loop: stepping, running a callback, or between
    PARKED = "parked"  # on the idle stack, waiting on its wake event
    POLLING = "polling"  # on the idle stack, waiting in the I/O multiplexer
    RETIRED = "retired"  # out of the pool; the thread is ending


# Compiled, an extension type (see _fields.pxd) that the core's NodeHooks extends.
class KernelFields(RuntimeBase):
    """The kernel's fields that every task reads: the base of ``NodeHooks``."""

    __slots__ = (
        "_active",
        "_autojump",
        "_dynamic",
        "_far_floor",
        "_home",
        "_idle",
        "_instruments",
        "_lane",
        "_monitor",
        "_next_deadline",
        "_now",
        "_overtaken",
        "_parallel",
        "_poller",
        "_polls",
        "_queue_seq",
        "_reactor",
        "_ready",
        "_sync_ready",
        "_target",
        "_timers",
        "_virtual",
        "_woken",
        "_workers",
    )


# Compiled, an extension type (see _fields.pxd) that Worker extends.
class WorkerFields:
    """The fields of one worker thread: the base of ``Worker``."""

    __slots__ = (
        "cpu_clock",
        "ended_later",
        "event",
        "extra",
        "handle",
        "in_sync",
        "index",
        "item",
        "item_seq",
        "meter",
        "parked_at",
        "replaced",
        "runtime",
        "state",
        "stepping",
        "steps_only",
        "thread_state",
    )
