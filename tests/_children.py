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
from dataclasses import dataclass
from pathlib import Path

import asyncop

__all__ = [
    "ProcInfo",
    "child_pids",
    "group_members",
    "is_live",
    "leak_checked_runtime",
    "open_fds",
    "process_table",
    "process_tree",
]


@dataclass(frozen=True)
class ProcInfo:
    """What ``/proc/PID/stat`` says of one process."""

    name: str
    state: str
    ppid: int
    pgid: int

    @property
    def live(self) -> bool:
        """Running or sleeping: not a zombie, which has exited and waits to be reaped."""
        return self.state not in ("Z", "X")


def _info(pid: int | str) -> ProcInfo | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None  # gone meanwhile
    # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    fields = stat[stat.rindex(")") + 2 :].split()
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    return ProcInfo(name, fields[0], int(fields[1]), int(fields[2]))


def process_table() -> dict[int, ProcInfo]:
    """Every process on the machine, zombies included."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (info := _info(entry.name)) is not None:
            table[int(entry.name)] = info
    return table


def child_pids() -> set[int]:
    """The pids whose parent is this process, zombies included."""
    me = os.getpid()
    return {pid for pid, info in process_table().items() if info.ppid == me}


def process_tree(root: int) -> dict[int, ProcInfo]:
    """``root`` and its descendants that are live now."""
    table = process_table()
    tree = {root: table[root]} if root in table and table[root].live else {}
    added = True
    while added:
        added = False
        for pid, info in table.items():
            if pid not in tree and info.live and info.ppid in tree:
                tree[pid] = info
                added = True
    return tree


def group_members(pgid: int) -> set[int]:
    """The live processes of process group ``pgid``."""
    return {pid for pid, info in process_table().items() if info.pgid == pgid and info.live}


def is_live(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    info = _info(pid)
    return info is not None and info.live


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
