"""Worker threads: the loop that runs ready work, fires timers and parks.

The loop (seed 002, 7.7.6)::

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

A worker stuck in a long synchronous callback is replaced: the watchdog
(``Runtime._watchdog_main``) notices a worker busy with one item for longer
than ``BLOCKED_AFTER`` while work is queued, and starts an *extra* worker.
An extra worker retires when it would park and the pool has more unstuck
workers than its target size.

Who writes what: ``busy_since``, ``item_seq`` and ``replaced`` are written
by the worker itself and read by the watchdog; everything else is written
under the runtime lock.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, final

from ..platform import ThreadHandle, WakeEvent

if TYPE_CHECKING:
    from ._scheduler import Runtime

__all__ = ["BLOCKED_AFTER", "EXTRA_IDLE", "IDLE_RETIRE", "Worker"]

# A worker busy with one item for this long, while work waits, is replaced.
BLOCKED_AFTER = 0.05
# In dynamic mode, a worker parked this long with nothing to do retires.
IDLE_RETIRE = 2.0
# An extra worker re-checks this often whether the pool still needs it.
EXTRA_IDLE = 0.5


@final
class Worker:
    """One worker thread's state, shared with the scheduler and the watchdog."""

    __slots__ = (
        "busy_since",
        "event",
        "extra",
        "handle",
        "index",
        "item_seq",
        "parked",
        "parked_at",
        "replaced",
        "runtime",
    )

    def __init__(self, runtime: Runtime, index: int, *, extra: bool) -> None:
        self.runtime = runtime
        self.index = index
        self.extra = extra
        self.event = WakeEvent()
        self.handle: ThreadHandle | None = None
        # Real monotonic time the current item started, 0.0 when not busy.
        self.busy_since = 0.0
        self.item_seq = 0
        # True once the watchdog started a replacement for the current item.
        self.replaced = False
        # True while on the idle stack; cleared by whoever pops it (under the
        # runtime lock, before setting the event).
        self.parked = False
        self.parked_at = 0.0

    def __repr__(self) -> str:
        kind = "extra" if self.extra else "base"
        busy = "busy" if self.busy_since else "idle"
        return f"<Worker {self.index} {kind} {busy}>"


# Real time for the watchdog, whatever clock the runtime uses.
monotonic = time.monotonic
