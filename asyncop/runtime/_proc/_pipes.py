"""The pipes to a child process: :class:`PipeStream`, the socket streams over a pipe.

The pipes to a child are made by ``open_process`` (``os.pipe``), not by
``Popen``, so the parent's ends are raw non-blocking descriptors from the
start. Each is a
:class:`PipeStream`, which is the socket streams' own implementation
(``asyncop.net``'s ``DescriptorStream``) over ``os.read``/``os.write``: the
same buffered ``receive_until``/``receive_exactly``, the same
``BusyResourceError`` for two tasks in one direction, the same
cancellation points and the same errors (``IncompleteRead``,
``DelimiterNotFound``, ``BrokenResourceError`` when the process closed its
end, ``ClosedResourceError`` after ``aclose``), as trio's process pipes and
sockets are all ``trio.abc.Stream`` objects. Closing a stream calls
``notify_closing`` first, so a task parked on it wakes with
``ClosedResourceError`` instead of waiting on a number the OS may reuse.

A pipe stream owns its descriptor. Its number is kept in a small
``_Descriptor`` object apart from the stream, so that the stream holds no
reference to itself and an unwaited process's pipes are closed as soon as
they are dropped; once closed, the number reads -1.
"""

from __future__ import annotations

import errno
import functools
import os
from typing import Any, final

from .._net._streams import DescriptorStream, close_fd

__all__ = ["PipeStream"]


def _closed_io(*args: object) -> Any:
    """What a closed pipe's read and write become: never touch a number the OS may reuse."""
    raise OSError(errno.EBADF, os.strerror(errno.EBADF))


@final
class _Descriptor:
    """A descriptor number that reads -1 once closed: what a pipe stream waits on.

    Separate from the stream so that the stream holds no reference to
    itself, and an unwaited process's pipes are closed as soon as they are
    dropped.
    """

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


@final
class PipeStream(DescriptorStream):
    """One end of an OS pipe as a byte stream: the write end or the read end.

    The same stream as ``asyncop.net.SocketStream`` (both are
    ``asyncop.net.Stream`` objects): ``receive_some``, ``receive_exactly``,
    ``receive_until``, ``async for``, ``send_all``, ``send_eof`` and
    ``aclose`` behave, and fail, alike. The read end receives and the write
    end sends; the other direction raises RuntimeError. ``Process.stdin``
    is a write end, ``stdout`` and ``stderr`` are read ends. The stream
    owns the descriptor and switches it to non-blocking mode.
    """

    __slots__ = ("_end", "_name", "_writable")

    def __init__(self, fd: int, *, writable: bool, name: str | None = None) -> None:
        """Wrap ``fd``, which the stream then owns and closes.

        Args:
            fd: an open pipe descriptor.
            writable: True for a write end, False for a read end.
            name: shown in ``repr`` and error messages.
        """
        os.set_blocking(fd, False)
        self._end = _Descriptor(fd)
        self._writable = writable
        self._name = name if name is not None else f"fd {fd}"
        what = f"pipe ({self._name})"
        self._init_stream(
            what,
            self._end,
            functools.partial(os.read, fd),
            functools.partial(os.write, fd),
            (what, "the process exited or closed its end; check await process.wait()"),
        )

    def __repr__(self) -> str:
        fd = self._end.fd
        state = f"fd {fd}" if fd >= 0 else "closed"
        end = "write end" if self._writable else "read end"
        return f"<PipeStream {self._name} ({end}, {state})>"

    def fileno(self) -> int:
        """The descriptor, or -1 once closed."""
        return self._end.fd

    def _check_receive(self) -> None:
        if self._writable:
            raise RuntimeError(
                f"{self._name} is the write end of a pipe and cannot receive; "
                "receive from the process through its stdout or stderr stream instead"
            )
        super()._check_receive()

    def _check_send(self) -> None:
        self._refuse_read_end("send_all()")
        super()._check_send()

    def _check_eof(self) -> None:
        self._refuse_read_end("send_eof()")
        super()._check_eof()

    def _refuse_read_end(self, what: str) -> None:
        if not self._writable:
            raise RuntimeError(
                f"{what} on {self._name}, which is the read end of a pipe; "
                "send to the process through its stdin stream instead"
            )

    def _shut_write(self) -> None:
        """For a pipe, the end of the data is the close of the write end."""
        self._release()

    def _release(self) -> None:
        fd = self._end.fd
        if fd < 0:
            return
        self._end.fd = -1
        self._recv = self._send = _closed_io
        close_fd(fd)

    def __del__(self) -> None:
        # An unreachable stream no task can wait on: closing is all there is.
        end = getattr(self, "_end", None)
        if end is not None and end.fd >= 0:
            os.close(end.fd)
