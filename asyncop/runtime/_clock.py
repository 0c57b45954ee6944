"""Clocks: the real monotonic clock and the virtual clock for tests.

A runtime reads time only through its clock's ``now()``. The real clock is
``time.monotonic``. A :class:`VirtualClock` stands still until it is
advanced: by hand with ``advance()``, or, with ``autojump=True``, by the
runtime itself, which jumps it to the next timer deadline whenever every
worker is idle and nothing else (an I/O wait, a blocking call in another
thread) could make progress. Tests that sleep for an hour then finish in
microseconds, and deterministically.
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["Clock", "MonotonicClock", "VirtualClock", "clock_reader"]


class _ClockListener(Protocol):
    def _clock_advanced(self) -> None: ...


class Clock(Protocol):
    """What a runtime needs from a clock."""

    def now(self) -> float: ...


class MonotonicClock:
    """The real clock: ``time.monotonic()``, in seconds."""

    __slots__ = ()
    virtual = False
    autojump = False

    def now(self) -> float:
        """Return the current monotonic time in seconds."""
        return time.monotonic()

    def __repr__(self) -> str:
        return "MonotonicClock()"


def _finite(value: object, what: str) -> float:
    """``value`` as a finite float, or a TypeError/ValueError naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{what} needs a number of seconds, got {type(value).__name__}; pass a float"
        )
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(
            f"{what} got {number!r}, which no clock can read; pass a finite number of seconds"
        )
    return number


class VirtualClock:
    """A clock that moves only when told to, for fast deterministic tests.

    Args:
        autojump: when True, a runtime using this clock jumps it to the next
            timer deadline as soon as all of its workers are idle and no I/O
            wait or blocking call is in flight.
        start: the initial reading, in seconds: a finite number.

    Raises:
        TypeError: ``start`` is not a number.
        ValueError: ``start`` is NaN or infinite.
    """

    virtual = True

    def __init__(self, autojump: bool = True, *, start: float = 0.0) -> None:
        self.autojump = bool(autojump)
        self._now = _finite(start, "VirtualClock(start=...)")
        self._lock = threading.Lock()
        self._listeners: list[_ClockListener] = []

    def now(self) -> float:
        """Return the virtual time in seconds."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` and fire what became due.

        Callable from any thread.

        Raises:
            TypeError: ``seconds`` is not a number.
            ValueError: ``seconds`` is negative (virtual time never goes
                back), NaN or infinite.
        """
        seconds = _finite(seconds, "VirtualClock.advance()")
        if seconds < 0:
            raise ValueError(
                f"VirtualClock.advance() needs a non-negative number of seconds, got "
                f"{seconds!r}; pass 0 or more, since a clock never moves backwards"
            )
        with self._lock:
            self._now += seconds
            listeners = list(self._listeners)
        for listener in listeners:
            listener._clock_advanced()

    def _jump_to(self, when: float) -> None:
        """Move time forward to ``when``; called by an autojumping runtime."""
        with self._lock:
            if when > self._now:
                self._now = when

    def _subscribe(self, listener: _ClockListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def _unsubscribe(self, listener: _ClockListener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def __repr__(self) -> str:
        return f"VirtualClock(autojump={self.autojump}, now={self._now!r})"


def clock_reader(clock: Any) -> Callable[[], float]:
    """A function that reads ``clock`` as a float.

    For the built-in clocks it is the reading itself (``time.monotonic``,
    or the virtual clock's ``now``), with no call in between: the runtime
    reads its clock on every timer it arms.
    """
    if type(clock) is MonotonicClock:
        return time.monotonic
    if type(clock) is VirtualClock:
        read: Callable[[], float] = clock.now
        return read
    now = clock.now

    def read_any() -> float:
        return float(now())

    return read_any
