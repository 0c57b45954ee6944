"""Functions the executor tests run in worker processes (importable there)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import asyncop


def _write(path: str, text: str) -> None:
    """Write ``text`` so that a reader never sees the file empty or half written."""
    partial = f"{path}.partial"
    Path(partial).write_text(text)
    os.replace(partial, path)


def square(x: int) -> int:
    return x * x


def pid() -> int:
    return os.getpid()


def fail(message: str) -> None:
    raise ValueError(message)


def make_generator() -> object:
    return (i for i in range(3))


def touch(path: str) -> str:
    _write(path, "ran")
    return "ran"


def poll_token(seconds: float, path: str | None = None) -> str:
    """Poll the remote token every 10 ms; record when the cancel was seen."""
    token = asyncop.remote_token()
    end = time.monotonic() + seconds
    if path is not None:
        _write(path + ".started", str(os.getpid()))
    while time.monotonic() < end:
        if token.cancelled:
            if path is not None:
                _write(path, repr(time.time()))
            token.check()
        time.sleep(0.01)
    return "finished"


def wait_token(timeout: float) -> bool:
    return asyncop.remote_token().wait(timeout)


def ignore_token(seconds: float, path: str | None = None) -> str:
    """Compute without ever looking at the token."""
    if path is not None:
        _write(path, str(os.getpid()))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(1000))
    return "ignored"


def remote_tree(path: str) -> str:
    """Run a runtime with a subtree of sleepers; report how it ended."""

    async def leaf() -> None:
        try:
            await asyncop.sleep(60)
        finally:
            with open(path, "a") as f:
                f.write("leaf ended\n")

    async def main() -> None:
        async with asyncop.scope() as s:
            for _ in range(3):
                s.spawn(leaf)

    with asyncop.Runtime(1) as runtime:
        _write(path + ".started", str(os.getpid()))
        try:
            runtime.run(main)
        finally:
            with open(path, "a") as f:
                f.write("root ended\n")
    asyncop.remote_token().check()
    return "not cancelled"


def outside_token() -> str:
    try:
        asyncop.remote_token()
    except RuntimeError as exc:
        return str(exc)
    return "no error"


def die(code: int) -> None:
    """End the worker process abruptly."""
    os._exit(code)


class UnpicklableError(Exception):
    def __init__(self) -> None:
        super().__init__("holds a lock")
        self.lock = threading.Lock()


def raise_unpicklable() -> None:
    raise UnpicklableError


class Tally:
    """A callable object with state: each call counts itself."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.calls


def echo(value: object) -> object:
    return value


def spin_token(seconds: float, path: str) -> str:
    """Read the remote token without pause; leave the moment it is cancelled."""
    token = asyncop.remote_token()
    _write(path + ".started", str(os.getpid()))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        token.check()
    return "finished"
