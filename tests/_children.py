"""What a test leaves behind outside the runtime: child processes, descriptors.

``child_pids()`` reads ``/proc`` instead of calling ``os.waitpid(-1, ...)``,
which would reap (steal) a child that someone else is about to wait for. A
child that exited and was not reaped (a zombie) is still listed, so a test
that leaves one fails.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncop

__all__ = ["child_pids", "leak_checked_runtime", "open_fds"]


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


@contextmanager
def leak_checked_runtime(prefix: str) -> Iterator[asyncop.Runtime]:
    """A 2-worker runtime; afterwards no child, fd, thread or registration is left."""
    children, fds, threads = child_pids(), open_fds(), set(threading.enumerate())
    runtime = asyncop.Runtime(2, name=f"{prefix}{id(object()):x}")
    try:
        yield runtime
        assert runtime.registrations() == 0
    finally:
        assert runtime.shutdown(timeout=10), "runtime did not shut down in 10 s"
    assert child_pids() - children == set(), "a child process was left (maybe a zombie)"
    assert open_fds() - fds == set(), "a descriptor was left open"
    assert set(threading.enumerate()) - threads == set(), "a thread was left running"
