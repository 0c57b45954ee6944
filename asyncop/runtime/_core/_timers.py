"""The timer heap: deadlines in a binary heap, with lazy deletion.

Entries are ``(deadline, seq, timer)`` tuples in a ``heapq``. ``seq`` grows
by one per insert, so equal deadlines leave in the order they were set and
tuple comparison never reaches the timer object. Insert and expiry are
O(log n).

Cancelling a timer only marks it: finding it in the heap would be O(n). A
cancelled entry stays until it surfaces at the top, where ``pop_due`` and
``next_deadline`` drop it, or until a clean-up: when more than half of the
heap (and more than ``_COMPACT_MIN`` entries) is cancelled, the heap is
rebuilt without them in O(n). Each rebuild at least halves the heap, so its
cost is amortised O(1) per cancel and churn cannot grow the heap without
bound.

A deadline of ``inf`` (or NaN, which no caller should pass but which
would corrupt the heap's order) never comes: such a timer is *dormant*. It
counts as armed, so ``registrations()`` still shows the wait, and it can be
cancelled, but it never enters the heap, so it never reaches
``next_deadline``, never makes a worker compute a wait of infinite length,
and never draws an autojumping virtual clock to infinity. Callers turn
far-away finite deadlines into ``inf`` first (see :func:`is_far`).

Not thread-safe by itself: the runtime calls it under its lock. Compiled
(``_timers.pxd``), a timer and the heap are extension types, and the kernel,
whose ``_timers`` field has the heap's type, arms, cancels and pops timers
with C calls and reads a timer's fields in C.

States of a timer: *armed* -> *fired* | *cancelled*. ``pop_due`` moves an
armed timer to fired; ``cancel`` moves it to cancelled. Neither happens
twice, which ``registrations()`` relies on. This module owns ``state``: the
timer's two ``_transition_to_*`` methods are the only code that writes it
(``__init__`` arms it), and the heap keeps its counts by their answers.
Everything here runs once per timer or per look at the heap, so the states
a method tests and writes are default arguments, read as locals (through its
class, an enum member costs ten times that on CPython 3.11); only the
``active`` property, which the runtime never reads, names its state through
the class (a property takes no argument).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from heapq import heapify, heappop, heappush

__all__ = ["FAR", "Timer", "TimerHeap", "TimerState", "is_far"]

_COMPACT_MIN = 64
_INF = float("inf")
# A wait this long (about 31 years) means "never", as for a user's timeout
# (asyncop.platform.check_timeout): no OS call waits that long, and a clock
# jumped that far would lose the precision of every later deadline.
FAR = 1e9


def is_far(deadline: float, now: float) -> bool:
    """Tell whether ``deadline`` is as good as never, seen from ``now``.

    True for ``inf``, NaN, and any deadline ``FAR`` or more seconds ahead.
    """
    return not deadline - now < FAR


class TimerState(enum.Enum):
    """A timer's life: armed, then fired or cancelled, once."""

    ARMED = "armed"
    FIRED = "fired"
    CANCELLED = "cancelled"


# Final: an extension type when compiled (see _timers.pxd), which no class extends.
class Timer:
    """One armed deadline and what to do when it passes."""

    # The mark typing.final leaves, which an extension type cannot take as a decorator.
    __final__ = True

    __slots__ = ("callback", "deadline", "inline", "state")

    def __init__(
        self,
        deadline: float,
        callback: Callable[..., object],
        inline: bool,
        _armed: TimerState = TimerState.ARMED,
    ) -> None:
        self.deadline = deadline
        self.callback = callback
        # inline: an internal wake-up, called with no argument. Otherwise a
        # deadline's cancel, called with the list of what to run once the
        # runtime lock is released. Both are called under the lock, so due
        # timers fire in deadline order across threads, each in the same
        # hold of the lock as it leaves the heap.
        self.inline = inline
        self.state = _armed

    @property
    def active(self) -> bool:
        """Whether the timer is still armed."""
        return self.state is TimerState.ARMED

    def _transition_to_fired(
        self, _armed: TimerState = TimerState.ARMED, _fired: TimerState = TimerState.FIRED
    ) -> bool:
        """ARMED -> FIRED; False (and no change) if it was not armed."""
        if self.state is not _armed:
            return False
        self.state = _fired
        return True

    def _transition_to_cancelled(
        self, _armed: TimerState = TimerState.ARMED, _cancelled: TimerState = TimerState.CANCELLED
    ) -> bool:
        """ARMED -> CANCELLED; False (and no change) if it was not armed."""
        if self.state is not _armed:
            return False
        self.state = _cancelled
        return True

    def __repr__(self) -> str:
        return f"<Timer {self.state.value} at {self.deadline:.6f}>"


# Final, as Timer (see _timers.pxd).
class TimerHeap:
    """A min-heap of timers by deadline, FIFO among equal deadlines."""

    __final__ = True

    __slots__ = ("_cancelled", "_heap", "_live", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Timer]] = []
        self._seq = 0
        self._live = 0
        self._cancelled = 0

    def __len__(self) -> int:
        """The number of armed timers (cancelled ones waiting in the heap excluded)."""
        return self._live

    @property
    def heap_size(self) -> int:
        """Entries physically in the heap, cancelled ones included."""
        return len(self._heap)

    def push(self, deadline: float, callback: Callable[..., object], *, inline: bool) -> Timer:
        """Arm a timer; O(log n). A deadline of ``inf`` or NaN arms a dormant timer."""
        if not deadline < _INF:
            # Never due: kept out of the heap (see the module docstring).
            timer = Timer(_INF, callback, inline)
            self._live += 1
            return timer
        timer = Timer(deadline, callback, inline)
        self._seq += 1
        heappush(self._heap, (deadline, self._seq, timer))
        self._live += 1
        return timer

    def cancel(self, timer: Timer) -> bool:
        """Disarm a timer; it is dropped lazily. Returns False if it was not armed."""
        if not timer._transition_to_cancelled():
            return False
        self._live -= 1
        # A dormant timer (never in the heap) counts here too: it only
        # brings the next clean-up forward, which resets the count.
        self._cancelled += 1
        if self._cancelled > _COMPACT_MIN and self._cancelled * 2 > len(self._heap):
            self._compact()
        return True

    def _compact(self, _armed: TimerState = TimerState.ARMED) -> None:
        self._heap = [entry for entry in self._heap if entry[2].state is _armed]
        heapify(self._heap)
        self._cancelled = 0

    def next_deadline(self, _armed: TimerState = TimerState.ARMED) -> float | None:
        """The earliest armed deadline, or None when no timer is armed."""
        heap = self._heap
        while heap and heap[0][2].state is not _armed:
            heappop(heap)
            self._cancelled -= 1
        return heap[0][0] if heap else None

    def pop_due(self, now: float) -> list[Timer]:
        """Remove and return the timers due at ``now``, in firing order."""
        heap = self._heap
        due: list[Timer] = []
        while heap and heap[0][0] <= now:
            timer = heappop(heap)[2]
            if timer._transition_to_fired():
                self._live -= 1
                due.append(timer)
            else:
                self._cancelled -= 1
        return due
