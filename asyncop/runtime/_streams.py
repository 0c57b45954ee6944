"""Byte streams over connected sockets: ``SocketStream`` and its buffered reads.

Why a stream object, when ``asyncop.net`` already had ``recv_async`` and
``send_all_async``? Because every real protocol needs three things those
helpers leave to the user, and each is easy to get subtly wrong:

- **Framing.** A line protocol reads "up to the next ``\\r\\n``"; a length
  prefix reads "exactly n bytes". Both over-read from the socket, so the
  bytes past the frame must be kept for the next read. A stream owns that
  buffer (``receive_until``, ``receive_exactly``), and every receive method
  serves the buffer first, so no byte is ever lost between two styles of
  reading.
- **One reader, one writer.** Two tasks receiving on one socket at once get
  interleaved, meaningless halves of the data. As in trio, a second task
  entering the same direction gets ``BusyResourceError`` at once, instead of
  a race that only shows under load. One task receiving while another sends
  is fine: the directions are independent.
- **Closing under a waiter.** ``aclose()`` calls ``notify_closing`` before it
  closes the fd, so a task parked in ``receive_some`` wakes with
  ``ClosedResourceError`` rather than waiting on a number the OS may reuse.

Cancellation and fairness. Every receive and send is a cancellation point
*on entry*: a cancelled task leaves before it takes bytes from the socket,
so a cancelled receive never loses data. The check reads the task's
cancel flag in place (``CANCEL_POINT``) instead of going through the
scheduler, which made a keep-alive HTTP server a third slower. What the
scheduler's trip gave for free, a bound on how long a task may run without
yielding, is kept by the stream itself: ``_streak`` counts the calls that
found the socket ready at once, and every ``FAIR_STREAK``-th call yields
with a real checkpoint, so a task reading a stream that always has data
still lets other tasks and timers run. A cancel while a send waits for
room leaves a prefix of the data sent; the ``Cancelled`` carries a note
saying how much, and the stream should then be closed (the peer is at an
unknown message boundary).

Errors. A connection the peer reset, or a pipe it closed, raises
``BrokenResourceError`` (from the ``OSError``), as trio and anyio do: the
stream cannot be used further. A stream used after ``aclose()`` raises
``ClosedResourceError``.

``_BufferedReceiver`` holds the reading logic once, over one primitive,
``_receive_raw``; ``TLSStream`` reuses it over decrypted bytes.
``DescriptorStream`` adds sending and closing over a non-blocking
descriptor, once for ``SocketStream`` and the process pipes
(``asyncop.process.PipeStream``), so the two behave and fail alike, as
trio's sockets and process pipes are all ``trio.abc.Stream`` objects.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
from collections.abc import AsyncIterator, Callable, Generator
from typing import TYPE_CHECKING, Any, final

from ..operations import (
    BrokenResourceError,
    BusyResourceError,
    Cancelled,
    ClosedResourceError,
    thread_state,
)
from ._awaitables import CHECKPOINT, notify_closing, readable, writable
from ._waker import Subscription, WaitEvent

if TYPE_CHECKING:
    from types import TracebackType
    from typing import Self

__all__ = [
    "AsyncResource",
    "DescriptorStream",
    "ReceiveStream",
    "SendStream",
    "Stream",
    "CANCEL_POINT",
    "DEFAULT_RECEIVE_SIZE",
    "FAIR_STREAK",
    "PASS",
    "DelimiterNotFound",
    "IncompleteRead",
    "SocketStream",
    "check_max_bytes",
    "closed_error",
    "closed_under_error",
    "close_fd",
    "eof_sent_error",
    "close_socket",
    "wait_ready",
    "ConflictGuard",
]

DEFAULT_RECEIVE_SIZE = 65536


@final
class _Pass(WaitEvent):
    """A cancellation point that never parks: it fires as it is armed.

    ``await PASS`` raises ``Cancelled`` in a cancelled task and otherwise
    returns at once; it counts as a wait, so a loop of them is requeued by
    the scheduler now and then.
    """

    __slots__ = ()

    def _arm(self, sub: Subscription) -> None:
        sub.fire(None)

    def _describe(self) -> str:
        return "cancellation check"


PASS = _Pass()
# A shared singleton, collected only at exit: never an await that was forgotten.
PASS._awaited = True

# A stream yields to the scheduler at least once per this many calls that
# found their socket ready.
FAIR_STREAK = 16


@final
class _CancelPoint:
    """``await CANCEL_POINT``: a cancellation point that costs no trip through the scheduler.

    In a task that is not cancelled it only counts the checkpoint (for
    ``assert_checkpoints``) and returns; otherwise, or outside an asyncop
    task, it defers to ``PASS``, so the scheduler raises ``Cancelled`` (or
    says what is wrong) exactly as for any other await.
    """

    __slots__ = ()

    def __await__(self) -> Generator[Any, Any, None]:
        task = thread_state().task
        if task is None or task.current._cancelled:
            yield from PASS.__await__()
            return
        task.checkpoints += 1


CANCEL_POINT = _CancelPoint()


class IncompleteRead(EOFError):
    """The peer closed the stream before the requested bytes arrived.

    Raised by ``receive_exactly`` and ``receive_until``. ``partial`` holds
    the bytes that did arrive (they are no longer in the stream's buffer).
    """

    __module__ = "asyncop.net"

    def __init__(self, message: str, partial: bytes) -> None:
        super().__init__(message)
        self.partial = partial


class DelimiterNotFound(Exception):
    """``receive_until`` read ``max_bytes`` bytes without finding the delimiter.

    The bytes read stay in the stream's buffer: a later receive returns them.
    """

    __module__ = "asyncop.net"


class ConflictGuard:
    """Refuses a second task in one direction of a stream, as trio does.

    A non-blocking lock: taking it is atomic on any CPython (free-threaded
    too), and it never blocks, so holding it across awaits is harmless.
    """

    __slots__ = ("_lock", "_message")

    def __init__(self, message: str) -> None:
        self._lock = threading.Lock()
        self._message = message

    def __enter__(self) -> None:
        if not self._lock.acquire(False):
            raise BusyResourceError(self._message)

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    @property
    def held(self) -> bool:
        return self._lock.locked()


def closed_error(what: str) -> ClosedResourceError:
    """The error for using ``what`` (``"stream"``, ``"listener"``...) after it was closed."""
    return ClosedResourceError(f"this {what} was closed; open a new one")


def closed_under_error(what: str) -> ClosedResourceError:
    """The error for ``what`` closed (by another task, or under it) while a task used it."""
    return ClosedResourceError(f"this {what} was closed while a task used it; open a new one")


def eof_sent_error(what: str) -> ClosedResourceError:
    """The error for sending on ``what`` after ``send_eof()``."""
    return ClosedResourceError(
        f"this {what} already sent end-of-file with send_eof(); "
        "send everything before calling send_eof()"
    )


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


def check_max_bytes(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{what} needs an int number of bytes, got {type(value).__name__}; pass e.g. 65536"
        )
    if value < 1:
        raise ValueError(f"{what} needs at least 1 byte, got {value}; pass a positive int")
    return value


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


class AsyncResource:
    """A resource closed by ``close()``/``aclose()``; ``async with`` closes it."""

    __slots__ = ()

    def close(self) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the resource; idempotent. A cancellation point, but it closes anyway.

        A task waiting on the resource gets ``ClosedResourceError``.
        """
        self.close()
        await PASS

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class ReceiveStream(AsyncResource):
    """A byte stream to receive from, as ``trio.abc.ReceiveStream``.

    ``SocketStream``, ``TLSStream`` and ``asyncop.process.PipeStream`` are
    all ``Stream`` objects with the same methods, errors and cancellation
    rules: annotate a parameter ``ReceiveStream`` (or ``Stream``) and the
    function takes any of them.
    """

    __slots__ = ()

    async def receive_some(self, max_bytes: int | None = DEFAULT_RECEIVE_SIZE) -> bytes:
        """Receive at most ``max_bytes`` bytes; ``b""`` at end of stream.

        A cancellation point. See ``SocketStream.receive_some`` for the errors.
        """
        raise NotImplementedError

    async def receive_exactly(self, n: int) -> bytes:
        """Receive exactly ``n`` bytes; ``IncompleteRead`` if the stream ends first.

        A cancellation point. See ``SocketStream.receive_exactly``.
        """
        raise NotImplementedError

    async def receive_until(self, delimiter: bytes, max_bytes: int) -> bytes:
        """Receive the bytes before ``delimiter``, which is consumed.

        A cancellation point. Raises ``DelimiterNotFound`` when ``max_bytes``
        bytes arrive without it, ``IncompleteRead`` when the stream ends
        first; see ``SocketStream.receive_until``.
        """
        raise NotImplementedError

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        while chunk := await self.receive_some():
            yield chunk


class SendStream(AsyncResource):
    """A byte stream to send on, as ``trio.abc.SendStream``."""

    __slots__ = ()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Send all of ``data``, waiting for room as needed.

        A cancellation point. See ``SocketStream.send_all`` for the errors.
        """
        raise NotImplementedError

    async def send_eof(self) -> None:
        """Tell the peer that nothing more will be sent; calling it twice is harmless.

        A cancellation point. A later ``send_all`` raises ``ClosedResourceError``.
        """
        raise NotImplementedError


class Stream(ReceiveStream, SendStream):
    """A byte stream in both directions, as ``trio.abc.HalfCloseableStream``."""

    __slots__ = ()


class _BufferedReceiver(ReceiveStream):
    """The receive side shared by ``SocketStream``, ``TLSStream`` and ``PipeStream``.

    Subclasses provide ``_receive_raw(max_bytes)``: bytes from the transport
    (``b""`` at end of stream), called with the receive guard held.
    """

    __slots__ = ("_buffer", "_receive_guard", "_streak")

    # Bytes received but not yet returned (the tail of a receive_until).
    _buffer: bytearray
    _receive_guard: ConflictGuard

    def _init_receiver(self, what: str) -> None:
        self._streak = 0  # calls in a row that found the socket ready; see FAIR_STREAK
        self._buffer = bytearray()
        self._receive_guard = ConflictGuard(
            f"another task is already receiving on this {what}; "
            "receive from one task at a time (hand the data over with a Channel)"
        )

    async def _receive_raw(self, max_bytes: int) -> bytes:
        raise NotImplementedError

    def _entry(self) -> Any:
        """The cancellation point a call starts with: a checkpoint now and then, for fairness."""
        if self._streak >= FAIR_STREAK:
            self._streak = 0
            return CHECKPOINT
        return CANCEL_POINT

    def _check_receive(self) -> None:
        raise NotImplementedError

    def _take(self, count: int) -> bytes:
        buffer = self._buffer
        data = bytes(buffer[:count])
        del buffer[:count]
        return data

    async def receive_some(self, max_bytes: int | None = DEFAULT_RECEIVE_SIZE) -> bytes:
        """Receive at most ``max_bytes`` bytes, waiting until some arrive.

        ``max_bytes=None``, as trio spells it, means the default size. A
        cancellation point, checked before any byte is taken: a cancelled
        receive loses nothing.

        Returns:
            The bytes; ``b""`` once the peer has closed its side (and every
            later call returns ``b""`` too).

        Raises:
            ClosedResourceError: the stream was closed (also when closed by
                another task while this one waited).
            BusyResourceError: another task is receiving on this stream.
            BrokenResourceError: the connection broke (reset by the peer).
            Cancelled: the task was cancelled; nothing was received.
        """
        if max_bytes is None:
            max_bytes = DEFAULT_RECEIVE_SIZE
        check_max_bytes(max_bytes, "receive_some(max_bytes=...)")
        with self._receive_guard:
            self._check_receive()
            await self._entry()
            if self._buffer:
                return self._take(max_bytes)
            return await self._receive_raw(max_bytes)

    async def receive_exactly(self, n: int) -> bytes:
        """Receive exactly ``n`` bytes, waiting for as many reads as it takes.

        A cancellation point; the bytes gathered before a cancel stay in the
        stream's buffer for the next receive.

        Raises:
            IncompleteRead: the peer closed the stream first; ``partial``
                holds what arrived.
            ClosedResourceError, BusyResourceError, BrokenResourceError,
            Cancelled: as for ``receive_some``.
        """
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(
                f"receive_exactly() needs an int count, got {type(n).__name__}; pass e.g. 4"
            )
        if n < 0:
            raise ValueError(f"receive_exactly({n}) needs a count of 0 or more; pass e.g. 4")
        with self._receive_guard:
            self._check_receive()
            await self._entry()
            buffer = self._buffer
            while len(buffer) < n:
                chunk = await self._receive_raw(max(n - len(buffer), DEFAULT_RECEIVE_SIZE))
                if not chunk:
                    partial = self._take(len(buffer))
                    raise IncompleteRead(
                        f"the peer closed the stream after {len(partial)} of the {n} bytes "
                        "receive_exactly() waited for; the message was cut short",
                        partial,
                    )
                buffer += chunk
            return self._take(n)

    async def receive_until(self, delimiter: bytes, max_bytes: int) -> bytes:
        """Receive up to ``delimiter``; returns the bytes before it.

        The delimiter is consumed and not returned. Bytes read past it stay
        in the stream's buffer for the next receive. A cancellation point;
        the bytes gathered before a cancel stay in the buffer.

        Args:
            delimiter: the non-empty byte string that ends the frame.
            max_bytes: the most bytes the frame (without the delimiter) may
                have.

        Raises:
            DelimiterNotFound: ``max_bytes`` bytes arrived without the
                delimiter; they stay in the buffer.
            IncompleteRead: the peer closed the stream before the delimiter.
            ClosedResourceError, BusyResourceError, BrokenResourceError,
            Cancelled: as for ``receive_some``.
        """
        if not isinstance(delimiter, bytes | bytearray | memoryview):
            raise TypeError(
                f"receive_until() needs a bytes delimiter, got {type(delimiter).__name__}; "
                "pass bytes such as b'\\r\\n' (encode a str first)"
            )
        delimiter = bytes(delimiter)
        if not delimiter:
            raise ValueError("receive_until() got an empty delimiter; pass e.g. b'\\n'")
        check_max_bytes(max_bytes, "receive_until(max_bytes=...)")
        with self._receive_guard:
            self._check_receive()
            await self._entry()
            buffer = self._buffer
            searched = 0  # no delimiter starts before this offset
            while True:
                index = buffer.find(delimiter, searched)
                if 0 <= index <= max_bytes:
                    data = bytes(buffer[:index])
                    del buffer[: index + len(delimiter)]
                    return data
                if index > max_bytes or len(buffer) >= max_bytes + len(delimiter):
                    raise DelimiterNotFound(
                        f"receive_until() found no {delimiter!r} within max_bytes={max_bytes} "
                        "bytes; raise max_bytes, or treat the peer as misbehaving"
                    )
                searched = max(0, len(buffer) - len(delimiter) + 1)
                chunk = await self._receive_raw(DEFAULT_RECEIVE_SIZE)
                if not chunk:
                    partial = self._take(len(buffer))
                    raise IncompleteRead(
                        f"the peer closed the stream before {delimiter!r} arrived "
                        f"({len(partial)} bytes without it); the message was cut short",
                        partial,
                    )
                buffer += chunk


_RECONNECT = ("connection", "close the stream and reconnect")


def broken(exc: OSError, what: str, why: tuple[str, str] = _RECONNECT) -> BrokenResourceError:
    """The ``BrokenResourceError`` for a transport-level ``OSError``.

    ``why`` is ``(what broke, what to do)``: a connection by default.
    """
    reason = errno.errorcode.get(exc.errno or 0, "") or type(exc).__name__
    thing, fix = why
    error = BrokenResourceError(
        f"{what} failed: the {thing} is broken ({reason}: {exc.strerror or exc}); {fix}"
    )
    error.__cause__ = exc
    return error


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
    _send: Callable[[memoryview], int]

    def _init_stream(
        self,
        what: str,
        waitable: Any,
        recv: Callable[[int], bytes],
        send: Callable[[memoryview], int],
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

    async def _receive_raw(self, max_bytes: int) -> bytes:
        recv = self._recv
        streak = self._streak + 1
        while True:
            try:
                data = recv(max_bytes)
            except BlockingIOError:
                pass
            except OSError as exc:
                if self._is_closed():
                    raise closed_under_error(self._what) from None
                raise broken(exc, "receive_some()", self._broken_why) from exc
            else:
                self._streak = streak
                return data
            streak = 0  # this call waits: it yields to the scheduler
            await wait_ready(readable(self._waitable), self._is_closed, self._what)
            self._check_receive()
            recv = self._recv

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Send all of ``data``, waiting for room as needed.

        A cancellation point on entry and at every wait for room.

        Raises:
            ClosedResourceError: the stream was closed, or ``send_eof()``
                was called.
            BusyResourceError: another task is sending on this stream.
            BrokenResourceError: the peer is gone (reset, or closed its side
                for good).
            Cancelled: the task was cancelled; a prefix of ``data`` may have
                been sent (the exception's note says how much): close the
                stream.
        """
        with self._send_guard:
            self._check_send()
            await self._entry()
            view = memoryview(data).cast("B")
            total, size = 0, len(view)
            self._streak += 1
            with view:
                while total < size:
                    try:
                        total += self._send(view[total:])
                        continue
                    except BlockingIOError:
                        pass
                    except OSError as exc:
                        if self._is_closed():
                            raise closed_under_error(self._what) from None
                        where = f"send_all() after {total} of {size} bytes"
                        raise broken(exc, where, self._broken_why) from exc
                    self._streak = 0
                    try:
                        await wait_ready(writable(self._waitable), self._is_closed, self._what)
                    except Cancelled as exc:
                        if total:
                            exc.add_note(
                                f"send_all() sent {total} of {size} bytes before the cancel"
                            )
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
        return self._socket.getsockname()

    def setsockopt(self, level: int, option: int, value: int | bytes) -> None:
        """Set a socket option, as ``socket.setsockopt`` does (e.g. ``SO_KEEPALIVE``)."""
        self._socket.setsockopt(level, option, value)

    def getsockopt(self, level: int, option: int, buffersize: int = 0) -> int | bytes:
        """Read a socket option, as ``socket.getsockopt`` does."""
        if buffersize:
            return self._socket.getsockopt(level, option, buffersize)
        return self._socket.getsockopt(level, option)

    def getpeername(self) -> Any:
        """The peer's address."""
        return self._socket.getpeername()

    def __repr__(self) -> str:
        if self._closed:
            return "<SocketStream closed>"
        try:
            return f"<SocketStream {self.getsockname()!r} -> {self.getpeername()!r}>"
        except OSError:
            return f"<SocketStream fd={self._socket.fileno()}>"
