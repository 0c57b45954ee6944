"""Clocks: the real monotonic clock and the virtual clock for tests.

A runtime reads time only through its clock's ``now()``. The real clock is
``time.monotonic``. A :class:`VirtualClock` stands still until it is
advanced: by hand with ``advance()``, or, with ``autojump=True``, by the
runtime itself, which jumps it to the next timer deadline whenever every
worker is idle and nothing else (an I/O wait, a blocking call in another
thread) could make progress. Tests that sleep for an hour then finish in
microseconds, and deterministically.

An I/O wait holds the clock because its readiness comes from outside, in
real time: a peer that answers in 5 ms must not see the client's 30 s
timeout fire first. A test whose peer never answers would then hang, so
``io_grace=S`` lets the clock jump over I/O waits too, once the runtime has
been idle for ``S`` seconds of real time with nothing woken (no readiness,
no timer, no push). The runtime keeps that count (``_worker.py``, where a
worker decides how long to park); the clock only carries the setting.
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from ...platform import check_timeout

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
        io_grace: with ``autojump``, also jump while tasks wait on I/O, once
            nothing has woken any task for this many seconds of real time:
            for tests whose peer may never answer. None (the default): an
            I/O wait always holds the clock.
        start: the initial reading, in seconds: a finite number.

    Raises:
        TypeError: ``start`` or ``io_grace`` is not a number.
        ValueError: ``start`` is NaN or infinite; ``io_grace`` is not a
            positive finite number, or is given without ``autojump``.
    """

    virtual = True

    def __init__(
        self, autojump: bool = True, io_grace: float | None = None, *, start: float = 0.0
    ) -> None:
        self.autojump = bool(autojump)
        self._io_grace = _io_grace(io_grace, self.autojump)
        self._now = _finite(start, "VirtualClock(start=...)")
        self._lock = threading.Lock()
        self._listeners: list[_ClockListener] = []

    @property
    def io_grace(self) -> float | None:
        """Real seconds of quiet after which an autojump passes over I/O waits; None: never."""
        return self._io_grace

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
        grace = "" if self._io_grace is None else f", io_grace={self._io_grace!r}"
        return f"VirtualClock(autojump={self.autojump}{grace}, now={self._now!r})"


def _io_grace(value: object, autojump: bool) -> float | None:
    """``VirtualClock(io_grace=...)`` checked: None, or a positive finite float."""
    if value is None:
        return None
    grace = check_timeout(value, "VirtualClock(io_grace=...)")  # (a non-number, NaN)
    if grace is None or grace <= 0.0:  # (None here: an infinity, or decades)
        raise ValueError(
            f"VirtualClock(io_grace=...) got {value!r}; pass a positive finite number of "
            "seconds of real time, or None to never jump over an I/O wait"
        )
    if not autojump:
        raise ValueError(
            "VirtualClock(io_grace=...) only applies to a clock that jumps by itself; "
            "pass autojump=True with it, or drop io_grace"
        )
    return grace


def stamp_reader(clock: Any) -> Callable[[], float]:
    """A function that reads ``clock`` for a timestamp of ``op.stats``, and never raises.

    The runtime stamps operations as they are made, start and end, in the
    middle of its own bookkeeping: a user's clock that raises must not
    break that. For the built-in clocks, which do not raise, it is
    ``clock_reader``'s; a user's clock that raises gives NaN.
    """
    read = clock_reader(clock)
    if type(clock) is MonotonicClock or type(clock) is VirtualClock:
        return read

    def read_safely() -> float:
        try:
            return read()
        except Exception:
            return math.nan

    return read_safely


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
