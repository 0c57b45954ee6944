"""How many CPUs this process may use."""

from __future__ import annotations

import os

__all__ = ["cpu_count"]


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
