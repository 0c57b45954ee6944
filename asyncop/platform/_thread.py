"""Thread start: run ``entry(context)`` on a new, named OS thread.

This is the portable form of ``_beginthreadex``. The runtime's threads are
daemon threads: interpreter exit must never wait for a callback that ignores
its cancellation token. The runtime joins its threads itself, in
``Runtime.shutdown()``, and that is where an orderly exit waits for them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ._timeout import MAIN_SLICE, is_main_thread

__all__ = ["ThreadHandle", "join_by", "start_thread"]

# The longest single join of a thread off the main thread (the main thread
# joins in slices of MAIN_SLICE, to notice a Ctrl-C).
_JOIN_SLICE = 1.0


class ThreadHandle:
    """A started thread: its name and ident, and a way to join it."""

    __slots__ = ("_thread",)

    def __init__(self, thread: threading.Thread) -> None:
        self._thread = thread

    @property
    def name(self) -> str:
        """The thread's name, as shown by debuggers and ``threading``."""
        return self._thread.name

    @property
    def ident(self) -> int | None:
        """The OS-level thread id, or None before the thread has started."""
        return self._thread.ident

    def is_alive(self) -> bool:
        """Tell whether the thread is still running."""
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end.

        Args:
            timeout: seconds to wait at most, or None to wait forever.

        Returns:
            True if the thread has ended, False if the timeout passed first.

        Raises:
            RuntimeError: when a thread tries to join itself.
        """
        if self._thread is threading.current_thread():
            raise RuntimeError(
                f"thread {self.name!r} tried to join itself; join it from another thread"
            )
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def __repr__(self) -> str:
        state = "alive" if self.is_alive() else "ended"
        return f"<ThreadHandle {self.name!r} {state}>"


def start_thread(entry: Callable[[Any], object], context: Any = None, *, name: str) -> ThreadHandle:
    """Start a daemon thread that runs ``entry(context)``.

    Args:
        entry: the function the thread runs.
        context: the single argument passed to ``entry``.
        name: the thread's name.

    Returns:
        A handle for joining the thread.

    Raises:
        TypeError: if ``entry`` is not callable.
        RuntimeError: if the OS could not start the thread.
    """
    if not callable(entry):
        raise TypeError(
            f"start_thread() needs a callable entry for thread {name!r}, "
            f"got {type(entry).__name__}; pass a function"
        )
    thread = threading.Thread(target=entry, args=(context,), name=name, daemon=True)
    thread.start()
    return ThreadHandle(thread)


def join_by(handle: ThreadHandle, end: float | None) -> bool:
    """Join a thread until the ``time.monotonic()`` time ``end`` (None: no limit).

    Waits in slices, so that any ``end`` works and the main thread notices
    a Ctrl-C between two of them.

    Returns:
        True if the thread has ended.
    """
    slice_max = MAIN_SLICE if is_main_thread() else _JOIN_SLICE
    while True:
        if end is None:
            wait = slice_max
        else:
            wait = end - time.monotonic()
            if wait <= 0.0:
                return not handle.is_alive()
        if handle.join(min(wait, slice_max)):
            return True
