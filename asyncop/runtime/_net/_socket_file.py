"""The file a Unix-domain listener binds, removed when the listener closes.

Binding a Unix socket creates a file at its path, which outlives the socket.
``open_unix_listener`` records the file it created (its device and inode)
with :func:`remember_socket_file`; ``SocketListener.close`` calls
:func:`forget_socket_file`, which removes the file only if it is still that
one: a second server that took the path over keeps its file. Kept apart
from ``_unix.py`` because ``_tcp.py``'s listener needs it, and ``_unix.py``
builds on ``_tcp.py``.
"""

from __future__ import annotations

import os
import socket
import weakref

__all__ = ["forget_socket_file", "remember_socket_file"]

# listener socket -> (path, st_dev, st_ino) of the file it bound.
_bound: weakref.WeakKeyDictionary[socket.socket, tuple[str, int, int]] = weakref.WeakKeyDictionary()


def remember_socket_file(sock: socket.socket, name: str) -> None:
    """Record that ``sock`` just bound the socket file at ``name``."""
    info = os.stat(name)
    _bound[sock] = (name, info.st_dev, info.st_ino)


def forget_socket_file(sock: socket.socket) -> None:
    """Remove the socket file ``sock`` bound, if it is still that file."""
    entry = _bound.pop(sock, None)
    if entry is None:
        return
    name, device, inode = entry
    try:
        info = os.stat(name)
        if (info.st_dev, info.st_ino) == (device, inode):
            os.unlink(name)
    except OSError:
        pass
