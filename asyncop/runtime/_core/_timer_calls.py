"""Arming and cancelling a timer: the kernel's calls on its timer heap.

A sleep arms a timer as it is awaited and, woken by anything else (a
cancel, another event of a ``select``), cancels it; a node's deadline and a
cancel's grace do the same. :class:`TimerCalls`, a base of the kernel,
holds the two calls: ``_add_timer_locked`` pushes a timer on the heap
(``_timers.py``) and makes sure that some thread fires it when due: it
wakes a parked worker, starts one, or leaves it to the monitor, unless the
calling worker looks at the timers before it parks anyway;
``_cancel_timer_locked`` disarms a timer, and says whether it was still
armed. Both run under the runtime lock. Firing the due timers is the
kernel's (``_fire_due_timers``, ``_kernel.py``).

Why a class of its own: compiled (``_timer_calls.pxd``), it is an
extension type between ``KernelFields`` and ``NodeHooks`` whose calls are C
methods, so that a sleep (``_awaitables.py``), which names its runtime's
type as this one, arms and cancels its timer with C calls, and reads the
heap and the timer in C. The sleep cannot name ``NodeHooks`` (``_spawn.py``)
instead: that module imports the stepper, which imports the awaitables.
This one imports nothing of the runtime but the fields and the heap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...operations import thread_state
from ._timers import Timer, is_far

try:
    import cython  # pyright: ignore[reportMissingImports]
except ImportError:  # run as Python, without Cython installed
    from ...platform import pure_cython as cython
if TYPE_CHECKING or not cython.compiled:  # (compiled, _timer_calls.pxd cimports it: the C base)
    from ._fields import KernelFields
if TYPE_CHECKING:
    from ._kernel import Kernel

__all__ = ["TimerCalls"]

_INF = float("inf")


def _noop() -> None:
    pass


# Compiled, an extension type (see _timer_calls.pxd) that NodeHooks extends.
class TimerCalls(KernelFields):
    """The kernel's calls that arm and cancel a timer: a base of ``NodeHooks``."""

    __slots__ = ()

    def _add_timer_locked(  # type: ignore[misc]  # (self: the kernel this is the base of)
        self: Kernel,  # pyright: ignore[reportGeneralTypeIssues]
        deadline: float,
        callback: Callable[..., object],
        inline: bool,
    ) -> Timer:
        """Arm a timer in the heap, under the lock, and see that a thread fires it when due.

        ``inline``: ``callback`` is a wake-up, called with no argument;
        otherwise a deadline's cancel, called with the ``after`` list.
        """
        if not deadline < self._far_floor and is_far(deadline, self._now()):
            # Never due (inf, or decades away): a dormant timer, which no
            # worker waits for and no autojump goes to. The test on
            # _far_floor first keeps the clock read off the common path.
            deadline = _INF
        timer = self._timers.push(deadline, callback, inline=inline)
        if deadline < self._next_deadline:
            self._next_deadline = deadline
            # A parked worker sleeps until the old earliest deadline; wake
            # one to re-park on the new one (or, on an autojumping virtual
            # clock, to notice that time may jump now). Unless this thread
            # is a worker that looks at the timers before it parks anyway:
            # the woken one would then fire them beside it, and two threads
            # stepping the woken tasks only take turns for the GIL.
            own = self._on_own_worker(thread_state())
            if self._idle and (self._virtual or not own):
                self._wake_one_locked()
            elif self._dynamic and self._unstuck_locked() < self._target and not own:
                # Every worker started so far is busy: start one to fire it.
                self._grow_locked(extra=False)
            else:
                # Should no worker look at the timers by the deadline (each
                # held by long work), the monitor fires it.
                self._monitor.deadline_pending()
        return timer

    def _cancel_timer_locked(self: Kernel, timer: Timer) -> bool:  # type: ignore[misc]
        """Disarm ``timer``, under the lock; False if it had fired or was cancelled already."""
        if not self._timers.cancel(timer):
            return False
        timer.callback = _noop  # drop the reference to the waiter now
        return True
