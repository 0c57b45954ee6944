"""The I/O multiplexer and the way to interrupt a thread blocked in it.

:func:`choose_selector` picks the multiplexer once per reactor: epoll on
Linux, kqueue on macOS and the BSDs, poll or select elsewhere. The order is
the cost order: epoll and kqueue keep the interest set in the kernel, so a
wait costs O(ready) rather than O(registered). ``ASYNCOP_SELECTOR`` (one of
``epoll``, ``kqueue``, ``poll``, ``select``) forces a choice, which the tests
use to run the reactor on every multiplexer the machine has.

:class:`WakeupChannel` is a self-pipe (a socket pair, which also works on
Windows). A thread that adds a registration while the reactor is blocked
calls ``wake()``; the reactor sees the read end readable, drains it, and
re-reads its registration list.
"""

from __future__ import annotations

import os
import selectors
import socket
import threading

__all__ = ["WakeupChannel", "choose_selector", "selector_name"]

_CHOICES: dict[str, str] = {
    "epoll": "EpollSelector",
    "kqueue": "KqueueSelector",
    "poll": "PollSelector",
    "select": "SelectSelector",
}
_PREFERENCE = ("epoll", "kqueue", "poll", "select")


def _available() -> list[str]:
    return [name for name in _PREFERENCE if hasattr(selectors, _CHOICES[name])]


def selector_name(name: str | None = None) -> str:
    """Return the name of the multiplexer :func:`choose_selector` would use.

    Args:
        name: a multiplexer to insist on; None reads ``ASYNCOP_SELECTOR`` and
            falls back to the best one available.

    Raises:
        ValueError: if the requested multiplexer is unknown or missing here.
    """
    wanted = name if name is not None else os.environ.get("ASYNCOP_SELECTOR") or None
    available = _available()
    if wanted is None:
        return available[0]
    if wanted not in available:
        raise ValueError(
            f"I/O multiplexer {wanted!r} is not available on this platform; "
            f"choose one of {', '.join(available)}"
        )
    return wanted


def choose_selector(name: str | None = None) -> selectors.BaseSelector:
    """Make a new selector on the best multiplexer (or the one named)."""
    cls: type[selectors.BaseSelector] = getattr(selectors, _CHOICES[selector_name(name)])
    return cls()


class WakeupChannel:
    """A self-pipe that wakes a thread blocked in a selector.

    ``wake()`` may be called from any thread, any number of times; only the
    first call after a ``drain()`` writes a byte, so a burst of wake-ups costs
    one syscall and the pipe never fills.
    """

    __slots__ = ("_lock", "_pending", "_reader", "_writer")

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._lock = threading.Lock()
        self._pending = False

    def fileno(self) -> int:
        """The descriptor to register for reading in the selector."""
        return self._reader.fileno()

    def wake(self) -> None:
        """Make the read end readable, unless a wake-up is already pending."""
        with self._lock:
            if self._pending:
                return
            self._pending = True
        try:
            self._writer.send(b"\0")
        except (BlockingIOError, OSError):
            # A full buffer already makes the reader readable; a closed
            # channel means the reactor is gone and nobody needs waking.
            pass

    def drain(self) -> None:
        """Consume every pending wake-up byte; call it from the woken thread.

        The caller re-reads whatever state the wakers changed *after* this
        returns. Empty the socket first and clear the flag last: a wake()
        landing in between finds the flag still set and writes nothing, but
        its change is seen by that re-read. Clearing first would let such a
        wake() write a byte that this loop then swallows, leaving the flag
        set with an empty socket, and every later wake() would be lost.
        """
        while True:
            try:
                if not self._reader.recv(4096):
                    break
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
        with self._lock:
            self._pending = False

    def close(self) -> None:
        """Close both ends. Later ``wake()`` calls do nothing."""
        with self._lock:
            self._pending = True
        self._reader.close()
        self._writer.close()
