"""Timeouts as users write them, and blocking waits that honour them.

Users pass timeouts as numbers of seconds: ``None`` or ``math.inf`` for "no
limit", ``0`` to poll, a large number such as ``1e10`` for "practically
never". The OS cannot wait that long in one call (``threading.TIMEOUT_MAX``
is about 49 days on Linux, and ``Lock.acquire`` raises OverflowError past
it), so every blocking wait in asyncop goes through :func:`acquire_for`,
which waits in slices.

Slicing serves a second purpose. On the main thread, a Ctrl-C that the
kernel delivers to another thread only sets a flag; Python raises
KeyboardInterrupt in the main thread when it next runs bytecode. A main
thread parked in one long ``acquire()`` would not notice for as long as it
sleeps, so the main thread waits in slices of :data:`MAIN_SLICE` seconds.
Other threads never receive KeyboardInterrupt and wait in the longest slice
the OS allows. Between two slices the main thread also runs the calls that
other threads handed it (``_main_calls.py``): waiting in asyncop, it stays
available for what only the main thread may do.

:func:`check_timeout` is the one place that decides what a timeout value
means. Call it first, before any state changes, so that a bad value raises
and leaves nothing half done. :func:`check_grace` does the same for a
grace period (the seconds an operation is asked to stop before it is
cancelled, or a process given between ``SIGTERM`` and ``SIGKILL``).
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from typing import Protocol

from ._main_calls import _serving, serve_main_calls, start_serving

__all__ = [
    "MAIN_SLICE",
    "acquire_for",
    "check_deadline",
    "check_grace",
    "check_kill_grace",
    "check_timeout",
    "is_main_thread",
]

# The longest single wait, in seconds, that every OS accepts: below
# threading.TIMEOUT_MAX, and short enough that a clock jump is recovered.
_OS_SLICE = min(threading.TIMEOUT_MAX, 3600.0)
# How long the main thread blocks at most before it looks for a Ctrl-C.
MAIN_SLICE = 0.05

_main_thread = threading.main_thread()


class _Acquirable(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...


def is_main_thread() -> bool:
    """Tell whether the caller runs on the main thread (the one that gets Ctrl-C)."""
    return threading.current_thread() is _main_thread


def check_timeout(timeout: object, what: str) -> float | None:
    """Validate a user's timeout and say what it means.

    Args:
        timeout: the value the user passed, in seconds.
        what: the call that took it, for the error message, e.g.
            ``"Lock.acquire(timeout=...)"``.

    Returns:
        None for no limit (``None``, ``inf``, or a value beyond what any OS
        can wait for); otherwise the timeout as a float, 0.0 for a value of
        zero or less (a poll).

    Raises:
        TypeError: ``timeout`` is not a real number (or is a bool).
        ValueError: ``timeout`` is NaN.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(
            f"{what} needs a number of seconds or None, got {type(timeout).__name__}; "
            "pass a float, or None for no limit"
        )
    try:
        value = float(timeout)
    except OverflowError:  # an int too large for a float: no limit, or a poll
        value = math.inf if timeout > 0 else -math.inf  # type: ignore[operator]
    if math.isnan(value):
        raise ValueError(f"{what} got NaN seconds; pass a number, or None for no limit")
    if value <= 0.0:
        return 0.0
    if value >= 1e9:  # about 31 years: the same as no limit, and safe for deadlines
        return None
    return value


def check_grace(grace: object, what: str, hint: str) -> float | None:
    """Validate a grace period: the seconds before something is forced.

    A grace is how long work is asked nicely before it is made to stop (a
    process killed, an operation cancelled). ``None``, ``inf`` or a value
    of 1e9 or more mean never, as for :func:`check_timeout`; 0 forces at
    once. A negative grace is refused: a timeout already passed is a poll,
    but a grace of -1 has no such meaning and is more likely a slip.

    Args:
        grace: the value the user passed, in seconds.
        what: the call that took it, for the error message, e.g.
            ``"run_process(kill_grace=...)"``.
        hint: what to pass instead, ending the error messages.

    Returns:
        None for never; otherwise the grace as a float, 0 or more.

    Raises:
        TypeError: ``grace`` is not a real number (or is a bool).
        ValueError: ``grace`` is NaN or negative.
    """
    if grace is None:
        return None
    if isinstance(grace, bool) or not isinstance(grace, numbers.Real):
        raise TypeError(f"{what} needs a number of seconds, got {type(grace).__name__}; {hint}")
    if grace != grace:
        raise ValueError(f"{what} got NaN seconds; {hint}")
    if grace < 0:
        raise ValueError(f"{what} got {grace!r}, a negative number of seconds; {hint}")
    return check_timeout(grace, what)


def check_kill_grace(grace: object, what: str) -> float | None:
    """Validate the seconds a process gets between ``SIGTERM`` and ``SIGKILL``.

    See :func:`check_grace`: None or ``inf`` never kill, 0 kills at once.

    Raises:
        TypeError: ``grace`` is not a real number (or is a bool).
        ValueError: ``grace`` is NaN or negative.
    """
    return check_grace(
        grace, what, "pass 0 to kill at once, a positive grace, or None to never kill"
    )


def check_deadline(deadline: object, what: str) -> float | None:
    """Validate a user's deadline, a time on a clock, and say what it means.

    Args:
        deadline: the value the user passed, in seconds on the clock.
        what: the call or attribute that took it, for the error message.

    Returns:
        None for no deadline (``None`` or ``+inf``, or an int past float
        range); otherwise the deadline as a float (``-inf`` or a time long
        past is due at once).

    Raises:
        TypeError: ``deadline`` is not a real number (or is a bool).
        ValueError: ``deadline`` is NaN.
    """
    if deadline is None:
        return None
    if isinstance(deadline, bool) or not isinstance(deadline, numbers.Real):
        raise TypeError(
            f"{what} needs a time in seconds on the runtime clock or None, got "
            f"{type(deadline).__name__}; pass a float, or None for no deadline"
        )
    try:
        value = float(deadline)
    except OverflowError:  # an int too large for a float
        value = math.inf if deadline > 0 else -math.inf  # type: ignore[operator]
    if math.isnan(value):
        raise ValueError(f"{what} got NaN; pass a time in seconds, or None for no deadline")
    if value == math.inf:
        return None
    return value


def acquire_for(lock: _Acquirable, timeout: float | None) -> bool:
    """Acquire ``lock``, waiting ``timeout`` seconds at most (None: no limit).

    ``timeout`` must have been through :func:`check_timeout` (or be a float
    the runtime computed). Waits longer than the OS allows are made of
    slices, and the main thread waits in slices of :data:`MAIN_SLICE` so a
    Ctrl-C reaches it promptly; between two of them it also runs the calls
    other threads handed it (``_main_calls.py``). A KeyboardInterrupt
    raised between two slices propagates with the lock not acquired.

    Returns:
        True if the lock was acquired, False if the timeout passed.
    """
    if timeout is not None:
        if timeout <= 0.0:
            return lock.acquire(False)
        if timeout <= MAIN_SLICE:  # the common short wait: one call, on any thread
            return lock.acquire(True, timeout)
    # (The slices are waited for here, in this frame, and nowhere else.)
    main = threading.current_thread() is _main_thread
    mark = object()
    try:
        slice_max = MAIN_SLICE if main else _OS_SLICE
        if main:
            start_serving(mark)
            serve_main_calls()  # one handed over before the wait began
        if timeout is None:
            while not lock.acquire(True, slice_max):
                if main:
                    serve_main_calls()
            return True
        if timeout <= slice_max:
            return lock.acquire(True, timeout)
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0.0:
                return lock.acquire(False)
            if lock.acquire(True, min(left, slice_max)):
                return True
            if main:
                serve_main_calls()
    finally:
        if main:
            # end_serving(mark), inline: a Ctrl-C landing as a call begins
            # would skip the whole call, and leave the mark behind.
            try:
                serve_main_calls()
            finally:
                _serving.discard(mark)
