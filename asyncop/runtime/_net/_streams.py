"""Byte streams over non-blocking descriptors: ``SocketStream`` and ``DescriptorStream``.

Why a stream object, when ``asyncop.net`` already had ``recv_async`` and
``send_all_async``? Because every real protocol needs three things those
helpers leave to the user, and each is easy to get subtly wrong:

- **Framing.** A line protocol reads "up to the next ``\\r\\n``"; a length
  prefix reads "exactly n bytes". Both over-read from the socket, so the
  bytes past the frame must be kept for the next read. A stream owns that
  buffer (``receive_until``, ``receive_exactly``; see
  ``_receive_buffer.py``), and every receive method serves the buffer
  first, so no byte is ever lost between two styles of reading.
- **One reader, one writer.** Two tasks receiving on one socket at once get
  interleaved, meaningless halves of the data. As in trio, a second task
  entering the same direction gets ``BusyResourceError`` at once, instead of
  a race that only shows under load. One task receiving while another sends
  is fine: the directions are independent.
- **Closing under a waiter.** ``aclose()`` calls ``notify_closing`` before it
  closes the fd, so a task parked in ``receive_some`` wakes with
  ``ClosedResourceError`` rather than waiting on a number the OS may reuse.

Reads and writes are tried first and wait only when the descriptor would
block: a receive calls ``recv`` and parks in the reactor on ``EAGAIN``, a
send writes what the socket takes and waits for room for the rest. Every
call is a cancellation point on entry, and may yield there for fairness or
because the last read drained the socket (``_receive_buffer.py`` says
when). A cancel while a send waits for room leaves a prefix of the data
sent; the ``Cancelled`` carries a note saying how much, and the stream
should then be closed (the peer is at an unknown message boundary).

Errors. A connection the peer reset, or a pipe it closed, raises
``BrokenResourceError`` (from the ``OSError``), as trio and anyio do: the
stream cannot be used further. A stream used after ``aclose()`` raises
``ClosedResourceError``.

``DescriptorStream`` adds sending and closing over a non-blocking
descriptor to the buffered receive methods, once for ``SocketStream`` and
the process pipes (``asyncop.process.PipeStream``), so the two behave and
fail alike, as trio's sockets and process pipes are all
``trio.abc.Stream`` objects. The interfaces and the shared errors are in
``_stream_api.py``.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable
from typing import Any, final

from ...operations import Cancelled, ClosedResourceError
from .. import WaitEvent, notify_closing, readable, writable
from ._receive_buffer import _BufferedReceiver
from ._stream_api import (
    _RECONNECT,
    PASS,
    ConflictGuard,
    Stream,
    broken,
    check_data,
    closed_error,
    closed_under_error,
    eof_sent_error,
)

__all__ = [
    "DescriptorStream",
    "SocketStream",
    "close_fd",
    "close_socket",
    "wait_ready",
]


async def wait_ready(event: WaitEvent, closed: Callable[[], bool], what: str) -> None:
    """Await ``readable``/``writable``; a socket closed meanwhile raises ``ClosedResourceError``.

    Another thread may close the socket between the failed attempt and the
    registration: the multiplexer then refuses the fd (``EBADF``). A close
    during the wait wakes it with the reactor's ``ClosedResourceError``,
    which names only a descriptor number; both become the error that names
    ``what``.
    """
    try:
        await event
    except (OSError, ClosedResourceError):
        if closed():
            raise closed_under_error(what) from None
        raise


def close_fd(fd: int) -> None:
    """Wake the tasks waiting on descriptor ``fd`` (``ClosedResourceError``), then close it.

    The order matters: once closed, the number may be reused by the next
    ``open``, and a waiter left registered would watch that file instead.
    """
    notify_closing(fd)
    os.close(fd)


def close_socket(sock: socket.socket) -> None:
    """Wake the tasks waiting on ``sock`` (``ClosedResourceError``), then close it."""
    if sock.fileno() >= 0:
        notify_closing(sock)
    sock.close()


class DescriptorStream(_BufferedReceiver, Stream):
    """A non-blocking descriptor (a stream socket, a pipe end) as a ``Stream``.

    The one implementation of receiving, sending, ``send_eof`` and closing
    for ``SocketStream`` and ``asyncop.process.PipeStream``, so the two
    behave and fail alike. A subclass calls ``_init_stream`` with the
    object to wait on (it has ``fileno()``, -1 once closed) and the
    non-blocking ``recv(n)``/``send(view)`` calls, and provides
    ``_shut_write`` (for ``send_eof``) and ``_release`` (for ``close``).
    """

    __slots__ = (
        "_broken_why",
        "_closed",
        "_eof_sent",
        "_recv",
        "_send",
        "_send_guard",
        "_waitable",
        "_what",
    )

    _recv: Callable[[int], bytes]
    _send: Callable[[bytes | memoryview], int]

    def _init_stream(
        self,
        what: str,
        waitable: Any,
        recv: Callable[[int], bytes],
        send: Callable[[bytes | memoryview], int],
        broken_why: tuple[str, str] = _RECONNECT,
    ) -> None:
        self._what = what
        self._waitable = waitable
        self._recv = recv
        self._send = send
        self._broken_why = broken_why
        self._closed = False
        self._eof_sent = False
        self._init_receiver(what)
        self._send_guard = ConflictGuard(
            f"another task is already sending on this {what}; send from one task at a "
            "time (hand the data over with a Channel, or hold a Lock around send_all)"
        )

    def _is_closed(self) -> bool:
        return self._closed or self._waitable.fileno() < 0

    def _check_receive(self) -> None:
        if self._closed:
            raise closed_error(self._what)

    def _check_send(self) -> None:
        if self._closed:
            raise closed_error(self._what)
        if self._eof_sent:
            raise eof_sent_error(self._what)

    def _receive_now(self, max_bytes: int) -> bytes | None:
        """``recv`` once: the bytes (``b""`` at the end), or None when it would block."""
        try:
            data = self._recv(max_bytes)
        except BlockingIOError:
            return None
        except OSError as exc:
            if self._is_closed():
                raise closed_under_error(self._what) from None
            raise broken(exc, "receive_some()", self._broken_why) from exc
        self._streak += 1
        self._drained = 0 < len(data) < max_bytes
        return data

    async def _receive_later(self, max_bytes: int) -> bytes:
        """Wait until the descriptor is readable, then read; retries a spurious wake."""
        while True:
            self._streak = 0  # this call waits: it yields to the scheduler
            await wait_ready(readable(self._waitable), self._is_closed, self._what)
            self._check_receive()
            data = self._receive_now(max_bytes)
            if data is not None:
                return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Send all of ``data``, waiting for room as needed.

        A cancellation point on entry and at every wait for room.

        Raises:
            TypeError: ``data`` is not bytes-like (a ``str``, say); raised
                before anything is sent.
            ClosedResourceError: the stream was closed, or ``send_eof()``
                was called.
            BusyResourceError: another task is sending on this stream.
            BrokenResourceError: the peer is gone (reset, or closed its side
                for good).
            Cancelled: the task was cancelled; a prefix of ``data`` may have
                been sent (the exception's note says how much): close the
                stream.
        """
        if type(data) is not bytes:
            data = check_data(data, f"{type(self).__name__}.send_all()")
        guard = self._send_guard.lock  # (a with block, inline: see ConflictGuard)
        if not guard.acquire(False):
            raise self._send_guard.busy()
        try:
            self._check_send()
            wait = self._entry(False)
            if wait is not None:
                await wait
            self._streak += 1
            sent = 0
            if type(data) is bytes:
                # The common case, a message the socket takes whole: no view.
                if not data:
                    return
                sent = self._send_now(data, 0, len(data))
                if sent == len(data):
                    return
            await self._send_rest(data, sent)
        finally:
            guard.release()

    def _send_now(self, data: bytes | memoryview, total: int, size: int) -> int:
        """``send`` once: the count of bytes the descriptor took, 0 when it would block.

        ``total`` and ``size`` (bytes sent before, and in all) name the
        point of failure in a ``BrokenResourceError``.
        """
        try:
            return self._send(data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            if self._is_closed():
                raise closed_under_error(self._what) from None
            where = f"send_all() after {total} of {size} bytes"
            raise broken(exc, where, self._broken_why) from exc

    async def _send_rest(self, data: bytes | bytearray | memoryview, total: int) -> None:
        """Send ``data`` from byte ``total`` on, waiting for room as needed."""
        view = memoryview(data).cast("B")
        size = len(view)
        with view:
            while total < size:
                sent = self._send_now(view[total:], total, size)
                if sent:
                    total += sent
                    continue
                self._streak = 0
                try:
                    await wait_ready(writable(self._waitable), self._is_closed, self._what)
                except Cancelled as exc:
                    if total:
                        exc.add_note(f"send_all() sent {total} of {size} bytes before the cancel")
                    raise
                self._check_send()

    async def send_eof(self) -> None:
        """Tell the peer no more data will be sent; the stream can still receive.

        Calling it twice is harmless. A cancellation point, before the
        end-of-file is sent.

        Raises:
            ClosedResourceError: the stream was closed.
            BusyResourceError: another task is sending on this stream.
        """
        with self._send_guard:
            self._check_eof()
            await PASS
            if self._eof_sent:
                return
            self._eof_sent = True
            self._shut_write()

    def _check_eof(self) -> None:
        if self._closed:
            raise closed_error(self._what)

    def _shut_write(self) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Close the stream at once, from sync code (``aclose`` without the checkpoint).

        A task waiting on the stream gets ``ClosedResourceError``. Harmless
        when already closed; not a cancellation point.
        """
        if not self._closed:
            self._closed = True
            self._release()


@final
class SocketStream(DescriptorStream):
    """A connected stream socket (TCP or Unix) as a byte stream.

    Made by ``open_tcp_stream``, ``open_unix_stream`` and the servers, or
    by hand from a connected ``socket.socket`` (which the stream then owns
    and switches to non-blocking mode). TCP streams get ``TCP_NODELAY``.

    Use it from asyncop coroutine tasks. One task may receive while
    another sends; two tasks in the same direction raise
    ``BusyResourceError``.
    """

    __slots__ = ("_socket",)

    def __init__(self, sock: socket.socket) -> None:
        if not isinstance(sock, socket.socket):
            raise TypeError(
                f"SocketStream() needs a socket.socket, got {type(sock).__name__}; "
                "use open_tcp_stream() to connect"
            )
        if sock.type != socket.SOCK_STREAM:
            raise ValueError(
                f"SocketStream() needs a SOCK_STREAM socket, got {sock.type!r}; "
                "use open_udp_socket() for datagrams"
            )
        if sock.fileno() < 0:
            raise ClosedResourceError(
                "SocketStream() got a closed socket; pass a connected one instead"
            )
        sock.setblocking(False)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # pragma: no cover - not every stream socket is TCP
                pass
        self._socket = sock
        self._init_stream("stream", sock, sock.recv, sock.send)

    @property
    def socket(self) -> socket.socket:
        """The underlying socket (non-blocking); do not read or write it directly."""
        return self._socket

    def _shut_write(self) -> None:
        """A TCP half-close."""
        try:
            self._socket.shutdown(socket.SHUT_WR)
        except OSError as exc:
            if exc.errno != errno.ENOTCONN:  # the peer is gone already: EOF is moot
                raise broken(exc, "send_eof()") from exc

    def _release(self) -> None:
        close_socket(self._socket)

    def getsockname(self) -> Any:
        """The local address."""
        self._check_receive()  # a closed stream: ClosedResourceError
        return self._socket.getsockname()

    def setsockopt(self, level: int, option: int, value: int | bytes) -> None:
        """Set a socket option, as ``socket.setsockopt`` does (e.g. ``SO_KEEPALIVE``)."""
        self._check_receive()  # a closed stream: ClosedResourceError
        self._socket.setsockopt(level, option, value)

    def getsockopt(self, level: int, option: int, buffersize: int = 0) -> int | bytes:
        """Read a socket option, as ``socket.getsockopt`` does."""
        self._check_receive()  # a closed stream: ClosedResourceError
        if buffersize:
            return self._socket.getsockopt(level, option, buffersize)
        return self._socket.getsockopt(level, option)

    def getpeername(self) -> Any:
        """The peer's address."""
        self._check_receive()  # a closed stream: ClosedResourceError
        return self._socket.getpeername()

    def __repr__(self) -> str:
        if self._closed:
            return "<SocketStream closed>"
        try:
            return f"<SocketStream {self.getsockname()!r} -> {self.getpeername()!r}>"
        except OSError:
            return f"<SocketStream fd={self._socket.fileno()}>"
