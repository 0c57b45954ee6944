"""Worker threads: the loop that runs ready work, fires timers and parks.

The loop::

    loop:
        1. run ready operations (a bounded batch, so timers are not starved)
        2. fire the timers that are due
        3. park until the next deadline, or until a push wakes us

Parking is a wait on the worker's own auto-reset :class:`WakeEvent`; the
worker first puts itself on the runtime's idle stack, under the runtime
lock, and a push pops the stack and sets the event under the same lock. A
push therefore either finds the worker on the stack (and wakes it) or
happens before the worker's last look at the ready queue: no wake is lost.
The stack is LIFO so that the most recently active (cache-warm) worker is
woken first.

Work a coroutine step queues stays with its worker: a push made while a
worker steps a coroutine (or fires timers, between items) wakes nobody when
the pushed item is a coroutine task, because that worker runs the queue
next. Waking another worker for it would only hand the item across threads:
under the GIL two threads stepping Python code take turns rather than run
side by side, and every hand-over of the runtime lock between them then
costs a pair of context switches. Sync callbacks still wake a parked worker
at once, since they may block.

A worker stuck in one item is replaced: the watchdog
(``Runtime._watchdog_main``) notices a worker busy with one item for longer
than ``BLOCKED_AFTER`` while work is queued, and wakes a parked worker, or
starts an *extra* one when none is parked. A coroutine step that keeps its
thread computing (it used at least ``COMPUTING`` of one CPU since the
watchdog last looked) is left alone: another thread could only take turns
with it for the GIL, and the step holds its worker as it would hold any
event loop. One blocked in a system call uses no CPU and is replaced. An
extra worker retires when it would park and the pool has more unstuck
workers than its target size.

Timers across retirement: the worker that arms a timer from a step wakes
nobody for it (it looks at the timers itself before it parks), and a
parked worker sleeps towards the deadline it saw when it parked. So a
worker that retires while a timer is pending wakes a parked worker to
re-park on the current deadline; without that, the timer would wait for an
unrelated wake-up. A worker woken by its timer fires it before it
considers retiring.

No exception ends a worker: whatever escapes a round of the loop is logged
on the ``asyncop`` logger, the worker's bookkeeping is put back in shape
(off the idle stack, counted active), and the loop goes on. Only shutdown
and retirement end it.

Who writes what: ``item_seq``, ``stepping`` and
``replaced`` are written by the worker itself and read by the watchdog;
``cpu_clock`` is set once when the thread starts; everything else is
written under the runtime lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, final

from ..platform import MAIN_SLICE, ThreadHandle, WakeEvent, is_main_thread

if TYPE_CHECKING:
    from ._scheduler import Runtime

__all__ = ["BLOCKED_AFTER", "COMPUTING", "EXTRA_IDLE", "IDLE_RETIRE", "Worker", "join_by"]

# A worker busy with one item for this long, while work waits, is replaced
# (timed from when the watchdog first saw the item: at most when work
# started to wait, so queued work waits about this long at most).
BLOCKED_AFTER = 0.05
# The share of one CPU above which a long coroutine step counts as computing.
COMPUTING = 0.5
# In dynamic mode, a worker parked this long with nothing to do retires.
IDLE_RETIRE = 2.0
# An extra worker re-checks this often whether the pool still needs it.
EXTRA_IDLE = 0.5


@final
class Worker:
    """One worker thread's state, shared with the scheduler and the watchdog."""

    __slots__ = (
        "cpu_clock",
        "event",
        "extra",
        "handle",
        "index",
        "item_seq",
        "parked",
        "parked_at",
        "replaced",
        "runtime",
        "stepping",
    )

    def __init__(self, runtime: Runtime, index: int, *, extra: bool) -> None:
        self.runtime = runtime
        self.index = index
        self.extra = extra
        self.event = WakeEvent()
        self.handle: ThreadHandle | None = None
        # Bumped when an item starts and when it ends: odd while busy. The
        # watchdog times an item by seeing the same number on its looks.
        self.item_seq = 0
        # Whether the current item is a coroutine step (not a sync callback).
        self.stepping = False
        # Reads the thread's CPU time from any thread; None where the OS
        # cannot, and then a long step always counts as blocked.
        self.cpu_clock: Callable[[], float] | None = None
        # True once the watchdog started a replacement for the current item.
        self.replaced = False
        # True while on the idle stack; cleared by whoever pops it (under the
        # runtime lock, before setting the event).
        self.parked = False
        self.parked_at = 0.0

    def __repr__(self) -> str:
        kind = "extra" if self.extra else "base"
        busy = "busy" if self.item_seq & 1 else "idle"
        return f"<Worker {self.index} {kind} {busy}>"


# Real time for the watchdog, whatever clock the runtime uses.
monotonic = time.monotonic

# The longest single join of a thread off the main thread (the main thread
# joins in slices of MAIN_SLICE, to notice a Ctrl-C).
_JOIN_SLICE = 1.0


def join_by(handle: ThreadHandle, end: float | None) -> bool:
    """Join a thread until the ``monotonic()`` time ``end`` (None: no limit).

    Waits in slices, so that any ``end`` works and the main thread notices
    a Ctrl-C between two of them.

    Returns:
        True if the thread has ended.
    """
    slice_max = MAIN_SLICE if is_main_thread() else _JOIN_SLICE
    while True:
        if end is None:
            wait = slice_max
        else:
            wait = end - monotonic()
            if wait <= 0.0:
                return not handle.is_alive()
        if handle.join(min(wait, slice_max)):
            return True
