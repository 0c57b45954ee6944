"""Unix-domain stream sockets: ``open_unix_stream``, ``open_unix_listener``, ``serve_unix``.

They are TCP's streams and servers on a path instead of a port, so this
module only connects and binds; ``SocketStream``, ``SocketListener`` and
``serve_listeners`` do the rest.

The socket file. Binding creates a file at the path, and it outlives the
socket unless removed. As asyncio does, a listener removes a *stale socket
file* left at its path (a crashed server's) before binding, and removes its
own file when it closes. It only ever removes a socket, never a regular
file, and on close only the file it created itself (same device and inode):
a second server that took the path over keeps its file (see
``_socket_file.py``). A Linux abstract address (a path starting with NUL)
has no file: there is nothing to remove or record.

Connecting to a listener whose queue is full fails with ``EAGAIN`` on
Linux, with no readiness to wait for; the connect is retried every
``_CONNECT_RETRY`` seconds (each wait a cancellation point) instead.
"""

from __future__ import annotations

import errno
import os
import socket
import stat

from .. import TASK_STATUS_IGNORED, TaskStatus, sleep, writable
from ._serve import Handler, check_handler, serve_listeners
from ._socket_file import forget_socket_file, remember_socket_file
from ._stream_api import PASS
from ._streams import SocketStream
from ._tcp import SocketListener, check_backlog

__all__ = ["open_unix_listener", "open_unix_stream", "serve_unix"]

_CONNECT_RETRY = 0.01


def _check_path(path: object, what: str) -> str:
    if not isinstance(path, str | bytes | os.PathLike):
        raise TypeError(
            f"{what} needs a path, got {type(path).__name__}; pass a str or a pathlib.Path"
        )
    name = os.fsdecode(os.fspath(path))
    if not name:
        raise ValueError(f"{what} got an empty path; pass a file path such as '/tmp/app.sock'")
    return name


def _path_error(exc: OSError, doing: str, name: str) -> OSError:
    """``exc`` (from ``bind``/``connect``), reworded to name the socket's path."""
    if exc.errno is None:  # Python's own refusal: "AF_UNIX path too long"
        return OSError(f"cannot {doing} Unix socket {name!r}: {exc}; choose a shorter path")
    return OSError(exc.errno, f"cannot {doing} Unix socket {name!r}: {exc.strerror}")


async def open_unix_stream(path: str | bytes | os.PathLike[str]) -> SocketStream:
    """Connect to the Unix-domain stream socket at ``path``.

    A cancellation point; a cancel closes the half-open socket.

    Raises:
        FileNotFoundError: no socket file at ``path``.
        ConnectionRefusedError: the file is there but nobody listens.
        Cancelled: the task was cancelled.
    """
    name = _check_path(path, "open_unix_stream()")
    await PASS
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        while True:
            try:
                code = sock.connect_ex(name)
            except OSError as exc:
                raise _path_error(exc, "connect to", name) from None
            if code == errno.EINPROGRESS:
                await writable(sock)
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code == errno.EAGAIN:
                await sleep(_CONNECT_RETRY)  # the listener's queue is full
                continue
            break
        if code:
            raise OSError(code, f"cannot connect to Unix socket {name!r}: {os.strerror(code)}")
        return SocketStream(sock)
    except BaseException:
        sock.close()
        raise


def _remove_stale_socket_file(name: str) -> None:
    """Remove a socket file left at ``name``; refuse a path that holds anything else."""
    try:
        if stat.S_ISSOCK(os.stat(name).st_mode):
            os.unlink(name)
        else:
            raise FileExistsError(
                errno.EEXIST, f"{name!r} exists and is not a socket; choose another path"
            )
    except FileNotFoundError:
        pass


async def open_unix_listener(
    path: str | bytes | os.PathLike[str], *, backlog: int | None = None
) -> SocketListener:
    """Listen on a Unix-domain stream socket at ``path``.

    A stale socket file at ``path`` is replaced; the listener removes its
    file when it closes. On Linux, a path that starts with a NUL character
    (``"\\0name"``) is in the abstract namespace: no file is made.

    Args:
        path: where the socket file goes.
        backlog: the accept queue length; None for the OS maximum.

    Raises:
        FileExistsError: ``path`` exists and is not a socket.
        OSError: the path cannot be bound.
        TypeError, ValueError: ``backlog`` is not an int of 0 or more (refused
            before anything at ``path`` is touched).
    """
    name = _check_path(path, "open_unix_listener()")
    backlog = check_backlog(backlog, "open_unix_listener")  # before the stale file goes
    await PASS
    abstract = name.startswith("\0")  # Linux's abstract namespace: no file at all
    if not abstract:
        _remove_stale_socket_file(name)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.bind(name)
        except OSError as exc:
            raise _path_error(exc, "listen on", name) from None
        if not abstract:
            remember_socket_file(sock, name)
        sock.listen(backlog)
        return SocketListener(sock)
    except BaseException:
        forget_socket_file(sock)
        sock.close()
        raise


async def serve_unix(
    handler: Handler,
    path: str | bytes | os.PathLike[str],
    *,
    backlog: int | None = None,
    task_status: TaskStatus[list[SocketListener]] = TASK_STATUS_IGNORED,
) -> None:
    """Serve a Unix-domain stream socket at ``path``: ``handler(stream)`` runs per connection.

    See ``serve_listeners`` for how connections are run, supervised,
    stopped gracefully (asked to stop, it closes the listener and lets the
    handlers finish) and cancelled. ``task_status.started([listener])`` is
    called once it accepts.

    Raises:
        OSError: the path cannot be bound.
        Cancelled: the server was cancelled (the usual way to stop it).
    """
    check_handler(handler, "serve_unix()")
    listener = await open_unix_listener(path, backlog=backlog)
    await serve_listeners(handler, [listener], task_status=task_status)
