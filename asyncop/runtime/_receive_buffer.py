"""The receive methods every stream shares, over a buffer and one primitive.

A transport hands bytes over in whatever pieces they arrived in; a
protocol wants frames: "up to the next ``\\r\\n``", "exactly n bytes".
Both read past the frame, so the bytes beyond it must be kept for the next
read. ``_BufferedReceiver`` owns that buffer and implements
``receive_some``, ``receive_exactly`` and ``receive_until`` once, over one
primitive of its subclass, ``_receive_raw``; every receive method serves
the buffer first, so no byte is lost between two styles of reading.
``SocketStream`` and ``PipeStream`` read a non-blocking descriptor
(``_streams.py``); ``TLSStream`` reads decrypted bytes.

Cancellation and fairness. Every receive and send is a cancellation point
*on entry*: a cancelled task leaves before it takes bytes from the socket,
so a cancelled receive never loses data. The check reads the task's
cancel flag in place (``CANCEL_POINT``) instead of going through the
scheduler, which made a keep-alive HTTP server a third slower. What the
scheduler's trip gave for free, a bound on how long a task may run without
yielding, is kept by the stream itself: ``_streak`` counts the calls that
found the socket ready at once, and every ``FAIR_STREAK``-th call yields
with a real checkpoint, so a task reading a stream that always has data
still lets other tasks and timers run.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, final

from ..operations import thread_state
from ._awaitables import CHECKPOINT
from ._stream_api import (
    DEFAULT_RECEIVE_SIZE,
    PASS,
    ConflictGuard,
    DelimiterNotFound,
    IncompleteRead,
    ReceiveStream,
    check_max_bytes,
)

__all__ = ["CANCEL_POINT", "FAIR_STREAK", "_BufferedReceiver"]

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
