"""How a worker charges each step and callback to its operation: ``op.stats``.

A worker reads the wall clock (``time.monotonic``, some 50 ns) as it
starts a run of items (a batch of coroutine steps, or one sync callback)
and each time the code of an item hands control back (a task yields, a
callback returns). Each reading ends one item's time and starts the next
one's, so a step costs one read: the operation gets the time from the
reading before to the reading after its code, which includes the worker's
own bookkeeping for that step (taking it from the queue, the runtime lock
around its state), a microsecond or so. A task's ``steps`` counts its
resumptions, and ``busy_s`` adds up that wall time.

CPU time is the costly part. The thread's CPU clock
(``time.thread_time``) is a system call, some 0.3 to 1 µs; read around
every step, it would cost as much as the rest of the stepping of a task
that only awaits a checkpoint. So each worker thread has a
:class:`CpuMeter`, which reads it now and then and charges what it read:

- **Short items** (under ``LONG``, 1 ms of wall time), nearly every step,
  are charged their wall time times the thread's recent *ratio* of CPU to
  wall time over its items: about 1 for steps that compute, less when the
  thread was kept waiting (another thread held the GIL, a page fault, a
  short blocking call).
- **Long items** are measured: right after one, the meter reads the CPU
  clock, and the item gets what the thread used since the last reading,
  less what the rest of that time was charged at the ratio, within
  ``[0, wall]``. A callback that blocks for a second shows ``cpu_s`` near
  0, one that computes for a second near 1.
- The reading long items count from is kept fresh: a run of items that
  starts more than ``FRESH`` (1 ms) after the last reading takes a new one
  first, and updates the ratio from the items run since the last. A parked
  worker reads nothing.

So the CPU clock is read at most about once per millisecond of a worker's
work, plus once per long item (which lasts over a millisecond anyway):
under 0.1 % of the work. A long item's ``cpu_s`` is exact to within the CPU
of the short items that share its reading (under ``FRESH`` of them); a
short item's is as good as the ratio, measured over the same thread's items
of the millisecond before.

A long item is also where a slow step is caught as it ends: one that took
``slow_after`` seconds or more is handed to ``on_slow(op, wall)`` (the
monitor's :meth:`~asyncop.runtime._core._monitor.Monitor.slow_step_ended`),
which reports it unless the monitor already saw it running. Short items
never get there, so this costs the common step nothing.

Who writes what: a meter belongs to one worker thread, which alone uses it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...operations import AsyncOperation

__all__ = ["FRESH", "LONG", "CpuMeter", "wall_clock"]

# An item this long or longer is measured on the CPU clock (seconds).
LONG = 0.001
# A reading of the CPU clock older than this is taken again before a run.
FRESH = 0.001

# The wall clock of busy_s: real time, whatever clock the runtime uses. It
# is the real clock's own reading too, so a step's reading serves as its
# operation's started_at on a runtime with the real clock.
wall_clock = time.monotonic
_cpu_clock = time.thread_time


# Final: an extension type when compiled (see _usage.pxd), which no class extends.
class CpuMeter:
    """One worker thread's wall and CPU clock readings, and the ratio it charges short items."""

    __slots__ = (
        "cpu_mark",
        "last",
        "on_slow",
        "ratio",
        "run_start",
        "since",
        "slow_after",
        "wall_mark",
    )

    def __init__(self) -> None:
        # The CPU time and the wall time at the last reading of the CPU
        # clock; none yet (this is made on another thread): the first run
        # takes one.
        self.cpu_mark = 0.0
        self.wall_mark = -math.inf
        # The wall time that the items since that reading took, up to the
        # start of the current run, and when the current run started.
        self.since = 0.0
        self.run_start = 0.0
        # The last wall clock reading: where the next item's time starts.
        self.last = 0.0
        # What short items are charged per second of wall time.
        self.ratio = 1.0
        # An item this long (seconds) is handed to on_slow(op, wall) as it
        # ends; its worker sets both (see the module docstring).
        self.slow_after = math.inf
        self.on_slow: Callable[[Any, float], object] | None = None

    def start_run(self) -> float:
        """A run of items starts now: read the wall clock, and the CPU clock if stale.

        Returns the reading, which is also ``last``.
        """
        now = wall_clock()
        if now - self.wall_mark > FRESH:
            self._refresh(now)
        self.run_start = self.last = now
        return now

    def end_run(self) -> None:
        """The run of items ends (at ``last``): count its wall time."""
        self.since += self.last - self.run_start

    def _refresh(self, now: float) -> None:
        """Read the CPU clock; the items since the last reading give the new ratio."""
        cpu = _cpu_clock()
        since = self.since
        if since > 0.0:
            ratio = (cpu - self.cpu_mark) / since
            self.ratio = 1.0 if ratio > 1.0 else ratio
        self.cpu_mark = cpu
        self.wall_mark = now
        self.since = 0.0

    def charge_long(self, op: AsyncOperation, wall: float, now: float) -> None:
        """Charge ``op`` the CPU its long item used: ``wall`` seconds, ended at ``now``."""
        cpu = _cpu_clock()
        # What the thread ran since the last reading, besides this item, at the ratio.
        others = (self.since + now - wall - self.run_start) * self.ratio
        used = cpu - self.cpu_mark - others
        op._cpu += wall if used > wall else used if used > 0.0 else 0.0
        self.cpu_mark = cpu
        self.wall_mark = self.run_start = now
        self.since = 0.0
        if wall >= self.slow_after and self.on_slow is not None:
            self.on_slow(op, wall)


def charge(op: AsyncOperation, meter: CpuMeter, start: float) -> float:
    """Charge ``op`` the wall and CPU time from ``start`` to now; return now.

    The caller counts the step.
    """
    meter.last = now = wall_clock()
    wall = now - start
    op._busy += wall
    if wall < LONG:
        op._cpu += wall * meter.ratio
    else:
        meter.charge_long(op, wall, now)
    return now
