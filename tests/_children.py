"""What a test leaves behind outside the runtime: child processes, descriptors.

``child_pids()`` reads ``/proc`` instead of calling ``os.waitpid(-1, ...)``,
which would reap (steal) a child that someone else is about to wait for. A
child that exited and was not reaped (a zombie) is still listed, so a test
that leaves one fails.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["child_pids", "open_fds"]


def child_pids() -> set[int]:
    """The pids whose parent is this process, zombies included."""
    me = os.getpid()
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == me:
            found.add(int(entry.name))
    return found


def open_fds() -> set[int]:
    """The descriptors open in this process."""
    return {int(name) for name in os.listdir("/proc/self/fd")}
