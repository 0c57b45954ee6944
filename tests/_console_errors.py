"""The error cases of the live console and of ``asyncop.dump_on_signal``.

``tests/test_error_messages.py`` adds ``CONSOLE_CASES`` to its table: each
row is ``(id, trigger, error type, text the message names, kind)``; each
trigger takes that module's ``Ctx`` and returns the exception it provoked.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncop
from asyncop._console_client import ConsoleClient, ConsoleError
from asyncop.testing import VirtualClock

from ._bridge_errors import _raises

__all__ = ["CONSOLE_CASES"]


@contextmanager
def _directory() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="c") as directory:
        yield directory


def _console_runtime(path: object) -> BaseException:
    return _raises(asyncop.Runtime, 1, console=path, clock=VirtualClock(autojump=False))


def t_console_type(c: Any) -> BaseException:
    return _console_runtime(42)


def t_console_empty(c: Any) -> BaseException:
    return _console_runtime("")


def t_console_too_long(c: Any) -> BaseException:
    return _console_runtime("/tmp/" + "x" * 150)


def t_console_no_directory(c: Any) -> BaseException:
    return _console_runtime("/nonexistent-dir/console.sock")


def t_console_not_a_socket(c: Any) -> BaseException:
    with _directory() as directory:
        path = Path(directory) / "taken.sock"
        path.write_text("")
        return _console_runtime(str(path))


def t_console_bound_too_long(c: Any) -> BaseException:
    """A path that fits, in a directory too deep for the private one made beside it."""
    with _directory() as directory:
        deep = os.path.join(directory, "d" * (100 - len(directory) - 1))
        os.mkdir(deep)
        return _console_runtime(os.path.join(deep, "c"))


def t_console_client_answered(c: Any) -> BaseException:
    with (
        _directory() as directory,
        asyncop.Runtime(1, console=f"{directory}/c.sock", clock=VirtualClock(autojump=False)),
        ConsoleClient(f"{directory}/c.sock") as client,
    ):
        return _raises(client.request, "bogus")


def t_console_client_closed(c: Any) -> BaseException:
    """A console that closes the connection at once, as a program ending does."""
    with _directory() as directory:
        path = f"{directory}/gone.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        with listener, ConsoleClient(path) as client:
            listener.accept()[0].close()
            return _raises(client.request, "snapshot")


def t_dump_signal_type(c: Any) -> BaseException:
    return _raises(asyncop.dump_on_signal, "SIGUSR1")


def t_dump_signal_uncatchable(c: Any) -> BaseException:
    return _raises(asyncop.dump_on_signal, signal.SIGKILL)


def t_dump_signal_file(c: Any) -> BaseException:
    return _raises(asyncop.dump_on_signal, file="dump.txt")


def _in_thread(fn: Callable[[], Any]) -> BaseException:
    box: list[BaseException] = []

    def main() -> None:
        box.append(_raises(fn))

    thread = threading.Thread(target=main)
    thread.start()
    thread.join(10)
    return box[0]


def t_dump_signal_thread(c: Any) -> BaseException:
    return _in_thread(asyncop.dump_on_signal)


def t_dump_signal_undo_thread(c: Any) -> BaseException:
    undo = asyncop.dump_on_signal(signal.SIGUSR2, file=io.StringIO())
    try:
        return _in_thread(undo)
    finally:
        undo()


CONSOLE_CASES: list[tuple[Any, ...]] = [
    ("console-type", t_console_type, TypeError, "got int"),
    ("console-empty", t_console_empty, ValueError, "console=''"),
    ("console-too-long", t_console_too_long, ValueError, "155 bytes"),
    ("console-no-directory", t_console_no_directory, FileNotFoundError, "/nonexistent-dir/"),
    ("console-not-a-socket", t_console_not_a_socket, FileExistsError, "taken.sock"),
    ("console-bound-too-long", t_console_bound_too_long, OSError, "12 bytes longer"),
    ("console-client-answered", t_console_client_answered, ConsoleError, "'bogus'"),
    ("console-client-closed", t_console_client_closed, ConsoleError, "gone.sock", "outcome"),
    ("dump-signal-type", t_dump_signal_type, TypeError, "got str"),
    ("dump-signal-uncatchable", t_dump_signal_uncatchable, ValueError, "signum=9"),
    ("dump-signal-file", t_dump_signal_file, TypeError, "'dump.txt'"),
    ("dump-signal-thread", t_dump_signal_thread, RuntimeError, "dump_on_signal()"),
    ("dump-signal-undo-thread", t_dump_signal_undo_thread, RuntimeError, "undo()"),
]
