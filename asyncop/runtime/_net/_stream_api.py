"""The stream interfaces, and the errors and checks every stream shares.

``ReceiveStream``, ``SendStream`` and ``Stream`` are the abstract byte
streams, as ``trio.abc`` has them: ``SocketStream``, ``TLSStream`` and
``asyncop.process.PipeStream`` all are ``Stream`` objects, with the same
methods, errors and cancellation rules. This module holds those classes,
the exceptions a receive raises (``IncompleteRead``, ``DelimiterNotFound``),
and the small pieces the stream modules share: ``PASS`` (a cancellation
point that never parks), ``ConflictGuard`` (one task per direction), and
the constructors of the errors, so that every stream words them alike.
The buffered receive methods are in ``_receive_buffer.py``, the streams
over descriptors in ``_streams.py``.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, final

from ...operations import BrokenResourceError, BusyResourceError, ClosedResourceError
from .. import Subscription, WaitEvent

if TYPE_CHECKING:
    from types import TracebackType
    from typing import Self

__all__ = [
    "DEFAULT_RECEIVE_SIZE",
    "PASS",
    "AsyncResource",
    "ConflictGuard",
    "DelimiterNotFound",
    "IncompleteRead",
    "MAX_READ",
    "ReceiveStream",
    "SendStream",
    "Stream",
    "broken",
    "check_data",
    "check_max_bytes",
    "closed_error",
    "closed_under_error",
    "eof_sent_error",
]

DEFAULT_RECEIVE_SIZE = 65536
# The most bytes one read asks a transport for, whatever the caller allows:
# the read allocates that much first, so a huge max_bytes would fail with
# MemoryError or OverflowError instead of reading what there is. Far above
# what a socket or pipe buffer holds.
MAX_READ = 1 << 24


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
    The hottest stream calls take ``lock`` themselves, which saves the two
    Python-level calls of a ``with`` block:
    ``if not guard.lock.acquire(False): raise guard.busy()``.
    """

    __slots__ = ("_message", "lock")

    def __init__(self, message: str) -> None:
        self.lock = threading.Lock()
        self._message = message

    def __enter__(self) -> None:
        if not self.lock.acquire(False):
            raise self.busy()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()

    def busy(self) -> BusyResourceError:
        """The error for a second task in this direction."""
        return BusyResourceError(self._message)

    @property
    def held(self) -> bool:
        return self.lock.locked()


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


def check_max_bytes(value: object, what: str) -> int:
    """Refuse a byte count that is not a positive int; returns it as it is."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{what} needs an int number of bytes, got {type(value).__name__}; pass e.g. 65536"
        )
    if value < 1:
        raise ValueError(f"{what} needs at least 1 byte, got {value}; pass a positive int")
    return value


def check_data(data: object, what: str) -> bytes | bytearray | memoryview:
    """Refuse data to send that is not bytes-like, before anything is sent.

    ``what`` names the call (``"SocketStream.send_all()"``). Any object with
    the buffer protocol passes (bytes, bytearray, memoryview, array, mmap).

    Returns:
        What to send: ``data`` itself, or for a buffer that is not
        contiguous (a strided view) a copy of the bytes it shows, which the
        OS calls could not take as it is.
    """
    if type(data) is bytes or type(data) is bytearray:
        return data
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{what} needs bytes-like data, got {type(data).__name__}; pass bytes, "
            "bytearray or memoryview (encode a str first, e.g. text.encode())"
        ) from None
    with view:
        if not view.c_contiguous:
            return view.tobytes()
    return data  # type: ignore[return-value]


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
