"""Functions the peer-case executor tests run in worker processes (importable there)."""

from __future__ import annotations

import os
import signal
import sys


def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def exit_with(code: int) -> None:
    sys.exit(code)


def raise_chained() -> None:
    try:
        {}["missing"]
    except KeyError as exc:
        raise ValueError("could not look it up") from exc


def blob(size: int) -> bytes:
    return bytes(range(256)) * (size // 256)


def pid() -> int:
    return os.getpid()


def add(a: int, b: int) -> int:
    return a + b
