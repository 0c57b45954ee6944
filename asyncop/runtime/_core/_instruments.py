"""Instruments: objects the runtime tells of each operation's life, as trio's.

::

    class Counter:
        def __init__(self):
            self.steps = 0

        def step_started(self, op):
            self.steps += 1

    runtime.add_instrument(counter := Counter())
    ...
    runtime.remove_instrument(counter)

An instrument has any of these methods, each called on the thread where
its event happens:

- ``spawned(op)``: the operation was made (a task, a callback, a scope, a
  remote job), on the thread that made it;
- ``step_started(op)`` / ``step_ended(op)``: around each coroutine step
  and each sync callback, on the worker that runs it;
- ``parked(op, reason)``: the task suspended on a wait that did not end at
  once, at the end of its step, before ``step_ended``; ``str(reason)``
  says on what, as ``dump()`` does, and ``reason.events`` are the
  awaitables (a ``ParkReason``: the text is made only when asked);
- ``woken(op)``: a parked task was woken, on the waking thread. Another
  thread may wake a task before its stepping thread has reported the
  park: order the two by ``op.stats.wakes`` if it matters;
- ``cancelled(op, reason)``: the operation's token was cancelled, on the
  cancelling thread (a task is cancelled once per cancel of its subtree);
- ``ended(op)``: the operation became final, after its last ``step_ended``;
  a thread that waited for the operation may already have been woken.

The hooks run outside the runtime lock, and may call into the runtime
(read ``op.stats``, spawn, cancel). An instrument whose hook raises is
removed, and the error logged with its traceback on the ``asyncop``
logger; the other instruments carry on.

Costs
-----
The runtime keeps one reference, ``_instruments``: None while none is
installed, so an event costs one attribute test when nobody listens. The
set is an :class:`Instruments`, never changed in place: adding or removing
an instrument builds a new one under a lock and swaps the reference (copy
on write), so the hot paths read it without a lock, and a hook a thread
had already read may still be called once right after its instrument was
removed.

``ended`` of an operation that ends in its own step waits, on that
thread, until the step's ``step_ended`` (``flush_ended``). When no
instrument listens to steps, the workers step tasks as without any.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, final

from ...operations import After, _thread_local, thread_state
from ._waker import WakerStatus, describe_event

if TYPE_CHECKING:
    from ...operations import AsyncOperation
    from ._task import TaskState

__all__ = [
    "HOOKS",
    "Instruments",
    "ParkReason",
    "add_instrument",
    "failed",
    "flush_ended",
    "note_ended_locked",
    "park_reason",
    "remove_instrument",
    "tell",
    "tell_why",
]

logger = logging.getLogger("asyncop")

# The methods an instrument may have, in the order of an operation's life.
HOOKS = ("spawned", "step_started", "parked", "woken", "step_ended", "cancelled", "ended")
# trio's names for the same events, named in the error for an object that
# has only those (an instrument brought over from trio).
TRIO_HOOKS = {
    "task_spawned": "spawned",
    "before_task_step": "step_started",
    "after_task_step": "step_ended",
    "task_scheduled": "woken",
    "task_exited": "ended",
}

Hooks = tuple[Callable[..., object], ...]


# Each event: call its hooks in turn, with the operation (and the reason).
# The steps' hooks, the commonest, are called the same way inline
# (``_items.py``), with ``failed`` for a hook that raises.
def tell(runtime: Any, hooks: Hooks, op: AsyncOperation) -> None:
    """Call each of ``hooks`` with ``op``; remove the instrument of any that raises."""
    for hook in hooks:
        try:
            hook(op)
        except BaseException:  # (any: one that escaped would skip the runtime's bookkeeping)
            failed(runtime, hook)


def tell_why(runtime: Any, hooks: Hooks, op: AsyncOperation, reason: object) -> None:
    """Call each of ``hooks`` with ``op`` and ``reason``; as ``tell``."""
    for hook in hooks:
        try:
            hook(op, reason)
        except BaseException:  # (any: one that escaped would skip the runtime's bookkeeping)
            failed(runtime, hook)


# Final: an extension type when compiled (see _instruments.pxd), which no class extends.
class Instruments:
    """The instruments of one runtime, and their hooks by event; never changed in place."""

    __slots__ = ("cancelled", "ended", "objects", "parked", "spawned", "step_ended",
                 "step_started", "stepping", "woken")  # fmt: skip

    objects: tuple[object, ...]
    spawned: Hooks
    step_started: Hooks
    parked: Hooks
    woken: Hooks
    step_ended: Hooks
    cancelled: Hooks
    ended: Hooks
    # Whether any instrument listens to steps: else they run as without any.
    stepping: bool

    def __init__(self, objects: tuple[object, ...]) -> None:
        self.objects = objects
        for hook in HOOKS:
            bound: Hooks = tuple(
                getattr(obj, hook) for obj in objects if callable(getattr(obj, hook, None))
            )
            setattr(self, hook, bound)
        self.stepping = bool(self.step_started or self.step_ended or self.parked)

    # The hooks' callers that import nothing of this module call these.
    tell = staticmethod(tell)
    tell_why = staticmethod(tell_why)

    def note_cancelled_locked(self, op: AsyncOperation, after: After) -> None:
        """``cancelled(op, reason)`` once the lock is released (the cancel walk holds it)."""
        if self.cancelled:
            after.append(
                functools.partial(tell_why, op.runtime, self.cancelled, op, op.cancel_reason)
            )


def note_ended_locked(instruments: Instruments, op: AsyncOperation, after: After) -> None:
    """``ended(op)`` once the lock is released; or after the step it ends in.

    An operation that ends in its own step, on the worker stepping it,
    is reported after that step's ``step_ended`` (``flush_ended``), when
    an instrument listens to steps; and so are the ancestors its end
    makes final, after it: a parent is never reported before its child.
    """
    if not instruments.ended:
        return
    if instruments.stepping:
        try:
            state = _thread_local.state  # (thread_state(), inline)
        except AttributeError:
            state = thread_state()
        worker = state.worker
        if worker is not None:
            task = state.task
            if worker.ended_later or (task is not None and task.task is op):
                worker.ended_later.append(op)
                return
    after.append(functools.partial(tell, op.runtime, instruments.ended, op))


def failed(runtime: Any, hook: Callable[..., object]) -> None:
    """``hook`` raised the exception being handled: remove its instrument, and log it.

    Logged once: a hook of the instrument that another thread had read
    before the removal, and that raises too, is not logged again.
    """
    owner = getattr(hook, "__self__", hook)
    if _discard(runtime, owner):
        logger.exception(
            "asyncop: instrument %r raised in %s() and was removed from runtime %r",
            owner,
            getattr(hook, "__name__", "?"),
            getattr(runtime, "name", runtime),
        )


def flush_ended(runtime: Any, deferred: list[Any]) -> None:
    """Report the operations that ended in the step just ended (see ``note_ended_locked``)."""
    ops = deferred[:]
    deferred.clear()
    instruments = runtime._instruments
    if instruments is not None:
        for op in ops:
            tell(runtime, instruments.ended, op)


@final
class ParkReason:
    """What a parked task waits on, for the instruments' ``parked(op, reason)``.

    ``str(reason)`` says it as ``dump()`` does; the text is made only when
    asked, since most instruments never read it and a description costs
    more than the rest of a park. ``events`` are the awaitables themselves.
    """

    __slots__ = ("events",)

    def __init__(self, events: tuple[Any, ...]) -> None:
        self.events = events

    def __str__(self) -> str:
        return ", ".join(describe_event(event) for event in self.events) or "?"

    def __repr__(self) -> str:
        return f"<ParkReason {self}>"


def park_reason(
    task: TaskState,
    _waiting: WakerStatus = WakerStatus.WAITING,
    _queued: WakerStatus = WakerStatus.QUEUED,
    _result: WakerStatus = WakerStatus.RESULT,
) -> ParkReason | None:
    """What a task that has just ended a step parked on; None if it did not park.

    For the instruments' ``parked``: a task that yielded (a checkpoint) or
    ended did not park; one that another thread has already woken did.
    """
    if task.coro is None:
        return None  # it ended
    status = task.status
    if status is _waiting:
        return ParkReason(tuple([sub.event for sub in list(task.events or ())]))
    if (status is _queued or status is _result) and task.triggered is not None:
        return ParkReason((task.triggered,))
    return None


# -- adding and removing -------------------------------------------------------

_lock = threading.Lock()


def add_instrument(runtime: Any, obj: object) -> None:
    """``Runtime.add_instrument``: see there."""
    if isinstance(obj, type):
        raise TypeError(
            f"Runtime {runtime.name!r}.add_instrument() needs an instrument object, got the "
            f"class {obj.__name__}, whose methods would be called without an instance; "
            f"pass an instance: add_instrument({obj.__name__}())"
        )
    if not any(callable(getattr(obj, hook, None)) for hook in HOOKS):
        renamed = [
            f"{theirs} is {ours}"
            for theirs, ours in TRIO_HOOKS.items()
            if callable(getattr(obj, theirs, None))
        ]
        hint = f" (trio's names: here {', '.join(renamed)})" if renamed else ""
        raise TypeError(
            f"Runtime {runtime.name!r}.add_instrument() needs an object with at least one of "
            f"the methods {', '.join(HOOKS)}; {type(obj).__name__} has none: define one of "
            f"them on it{hint}"
        )
    if runtime._stopping:
        raise RuntimeError(
            f"Runtime {runtime.name!r} is shut down and runs no more operations, so "
            "add_instrument() would never call the instrument; add it before shutdown(), "
            "or to a new Runtime"
        )
    with _lock:
        current = runtime._instruments
        objects = () if current is None else current.objects
        if any(known is obj for known in objects):
            raise ValueError(
                f"instrument {obj!r} is already installed in runtime {runtime.name!r}; "
                "add it once, or remove it first"
            )
        runtime._instruments = Instruments((*objects, obj))


def remove_instrument(runtime: Any, obj: object) -> None:
    """``Runtime.remove_instrument``: see there."""
    if not _discard(runtime, obj):
        raise ValueError(
            f"instrument {obj!r} is not installed in runtime {runtime.name!r}; "
            "pass the object that add_instrument() installed (one whose method raised was "
            "removed then)"
        )


def _discard(runtime: Any, obj: object) -> bool:
    """Take ``obj`` out of the runtime's instruments; False if it was not there."""
    with _lock:
        current = runtime._instruments
        if current is None or not any(known is obj for known in current.objects):
            return False
        rest = tuple(known for known in current.objects if known is not obj)
        runtime._instruments = Instruments(rest) if rest else None
        return True
