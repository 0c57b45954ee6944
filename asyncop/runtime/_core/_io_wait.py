"""Waiting for a socket to be readable or writable: ``IoWait`` and its helpers.

``await readable(fd)`` and ``await writable(fd)`` yield an :class:`IoWait`,
which parks the task's waker in its runtime's reactor (see ``_reactor.py``)
under the key ``(fd, direction)``. This module holds the wait itself and
what the reactor needs to tell a ready fd from one closed under its waiter
and to deliver the wakes it collected.
"""

from __future__ import annotations

import errno
import os
import select
import socket
from typing import Any, final

from ...operations import ClosedResourceError
from ._waker import Subscription, WaitEvent

__all__ = ["READ", "WRITE", "IoWait", "fileno_of"]

READ = 1
WRITE = 2
_NAMES = {READ: "readable", WRITE: "writable"}


def fileno_of(fd: Any) -> int:
    """The descriptor number of an int or of an object with ``fileno()``.

    Raises:
        ClosedResourceError: the object is closed (its fileno is -1).
        TypeError: it is neither an int nor has ``fileno()``.
    """
    if isinstance(fd, int) and not isinstance(fd, bool):
        number = fd
    else:
        getter = getattr(fd, "fileno", None)
        if getter is None:
            raise TypeError(
                f"expected a file descriptor or an object with fileno(), got "
                f"{type(fd).__name__}; pass a socket or its fileno()"
            )
        number = getter()
    if number < 0:
        raise ClosedResourceError(f"{fd!r} is closed and cannot be waited on; open a new socket")
    return int(number)


def _identity(fd: int) -> tuple[int, int] | None:
    """The (device, inode) of the file behind ``fd``, or None if it is closed."""
    try:
        st = os.fstat(fd)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


def _closed_error(fd: int, direction: int) -> ClosedResourceError:
    return ClosedResourceError(
        f"fd {fd} was closed while a task waited until it was {_NAMES[direction]}; "
        "stop using the socket (call asyncop.notify_closing(sock) before closing it)"
    )


def _refused_error(fd: int, direction: int, exc: OSError) -> BaseException:
    """The error for a wait whose fd the multiplexer refused."""
    if exc.errno == errno.EBADF:
        return _closed_error(fd, direction)
    hint = (
        "regular files cannot be waited on: use asyncop.fs or spawn_blocking"
        if exc.errno == errno.EPERM
        else "check that it is an open socket or pipe"
    )
    error = OSError(
        exc.errno,
        f"cannot wait until fd {fd} is {_NAMES[direction]}: the I/O multiplexer "
        f"refused it ({exc.strerror or exc}); {hint}",
    )
    error.__cause__ = exc
    return error


def _is_stale(sub: Subscription, fd: int) -> bool:
    stale = getattr(sub.event, "stale", None)
    return stale is not None and bool(stale(fd))


def _ready_now(fd: int, direction: int) -> int:
    """Poll one fd with a zero timeout (the re-check after registering).

    Returns:
        The poll event mask, 0 when not ready. ``POLLNVAL`` means the fd is
        closed.
    """
    poller = select.poll()
    poller.register(fd, select.POLLIN if direction == READ else select.POLLOUT)
    events = poller.poll(0)
    return events[0][1] if events else 0


def _epoll_mask_now(fd: int) -> int:
    """``fd``'s readiness now, as an epoll event mask (0: none; a closed fd: an error).

    The re-check of an event that may belong to a file closed since (see
    ``Reactor._collect_epoll``); poll's bits are epoll's.
    """
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLOUT)
    events = poller.poll(0)
    mask = events[0][1] if events else 0
    return (mask & ~select.POLLNVAL) | select.POLLERR if mask & select.POLLNVAL else mask


def _add_ready(
    fd: int, taken: list[Subscription], wakes: list[tuple[Subscription, BaseException | None]]
) -> None:
    """Queue the wakes of the waits ``fd``'s readiness took.

    A wait whose socket was closed meanwhile fails instead: poll calls a
    closed fd ready, and a new file on the same number may be ready too.
    """
    for sub in taken:
        wakes.append((sub, _closed_error(fd, sub.event.direction) if _is_stale(sub, fd) else None))


def _deliver(wakes: list[tuple[Subscription, BaseException | None]]) -> None:
    """Fire the collected wakes; called with the reactor lock released."""
    for sub, error in wakes:
        sub.fire(None, error)


@final
class IoWait(WaitEvent):
    """``await readable(fd)`` / ``await writable(fd)``: wait for readiness once."""

    __slots__ = ("direction", "fd", "identity", "sock")

    def __init__(self, fd: Any, direction: int) -> None:
        self.fd = fd
        self.direction = direction
        # For a bare int, the file it named when the wait began (see stale()).
        self.identity: tuple[int, int] | None = None
        # A plain socket, whose fileno() the hot paths compare inline.
        self.sock: socket.socket | None = fd if type(fd) is socket.socket else None

    def _arm(self, sub: Subscription) -> None:
        runtime = sub.waker.runtime
        reactor = runtime._reactor  # (made on the first wait, by _get_reactor)
        if reactor is None:
            reactor = runtime._get_reactor()
        sock = self.sock
        fd = sock.fileno() if sock is not None else -1
        if fd < 0:  # not a plain socket, or a closed one (which raises here)
            fd = fileno_of(self.fd)
            if not hasattr(self.fd, "fileno"):
                self.identity = _identity(fd)
        sub.handle = (fd, self.direction)
        reactor.register(fd, self.direction, sub)

    def stale(self, fd: int) -> bool:
        """Tell whether ``fd`` no longer is what this wait waits on: it was closed.

        A socket object closed since reports fileno() -1 (or another number);
        a bare int names another file now, or none.
        """
        obj = self.fd
        if self.identity is not None or not hasattr(obj, "fileno"):
            return _identity(fd) != self.identity
        try:
            return bool(obj.fileno() != fd)
        except Exception:
            return True  # a fileno() that raises: the object is unusable

    def _disarm(self, sub: Subscription) -> None:
        key = sub.handle
        if key is not None:
            sub.handle = None
            sub.waker.runtime._get_reactor().unregister(key[0], key[1], sub)

    def _describe(self) -> str:
        return f"{_NAMES[self.direction]}({self.fd!r})"
