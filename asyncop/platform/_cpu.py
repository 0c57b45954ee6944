"""How many CPUs this process may use, and how much of one a thread used."""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable

__all__ = ["cpu_count", "thread_cpu_clock"]


def cpu_count() -> int:
    """Return the number of CPUs this process may run on, at least 1.

    The affinity mask counts, not the machine's total: a process pinned to
    two cores of a larger machine (``taskset``, a container's cpuset) gets 2.
    """
    getter = getattr(os, "process_cpu_count", None)  # Python 3.13+
    if getter is not None:
        count = getter()
    elif hasattr(os, "sched_getaffinity"):
        count = len(os.sched_getaffinity(0))
    else:
        count = os.cpu_count()
    return max(1, count or 1)


def thread_cpu_clock() -> Callable[[], float] | None:
    """Return a reader of the calling thread's CPU time, or None if the OS has none.

    The reader may be called from any thread, and returns seconds of CPU the
    thread that made it has used so far (``time.thread_time`` answers only
    for the thread that calls it). It works where the OS gives each thread a
    CPU clock (``pthread_getcpuclockid``: Linux and most other Unixes).
    """
    getclock = getattr(time, "pthread_getcpuclockid", None)
    if getclock is None:
        return None
    try:
        clock_id = getclock(threading.get_ident())
        time.clock_gettime(clock_id)
    except (OSError, OverflowError, ValueError):
        return None
    return functools.partial(time.clock_gettime, clock_id)
