"""The receive methods every stream shares, over a buffer and two primitives.

A transport hands bytes over in whatever pieces they arrived in; a
protocol wants frames: "up to the next ``\\r\\n``", "exactly n bytes".
Both read past the frame, so the bytes beyond it must be kept for the next
read. ``_BufferedReceiver`` owns that buffer and implements
``receive_some``, ``receive_exactly`` and ``receive_until`` once; every
receive method serves the buffer first, so no byte is lost between two
styles of reading. A subclass provides two primitives, called with the
receive guard held:

- ``_receive_now(max_bytes)``: the bytes the transport has right now
  (``b""`` at its end), or None when it has none yet. It never waits.
- ``_receive_later(max_bytes)``: wait until the transport has bytes, then
  return them; called only after ``_receive_now`` found none.

``SocketStream`` and ``PipeStream`` read a non-blocking descriptor
(``_streams.py``); ``TLSStream`` reads decrypted bytes, all through
``_receive_later``.

Entry: cancellation and fairness
--------------------------------
Every call is a cancellation point *on entry*: a cancelled task leaves
before it takes a byte, so a cancelled receive never loses data. The
check is made in place (``_entry``): it reads the task's cancel flag and
counts the checkpoint, without a trip through the scheduler, which made a
keep-alive HTTP server a third slower. A cancelled task, or a call from
outside a task, awaits ``PASS`` instead, and the scheduler raises
``Cancelled`` or says what is wrong.

Two cases yield for real (``checkpoint()``: the back of the ready queue):

- **Fairness.** ``_streak`` counts the calls in a row that found the
  transport ready at once, and every ``FAIR_STREAK``-th call yields: a
  task reading a stream that always has data still lets the other tasks
  and the timers run.
- **A drained transport.** When the last read took all the transport had
  (fewer bytes than it asked for), a call that needs more bytes yields
  before it reads again. Right after a read emptied a socket, the peer has
  rarely sent more: in a request/response protocol it is still waiting for
  the answer. Reading at once would mostly fail and arm a wait in the
  multiplexer, which costs system calls and a wake; after a yield, the
  other ready tasks have run, the next request has usually arrived, and the
  read takes it without waiting. Under load the connections are served in
  turn, as by an event loop that reads on readiness; with no other task
  ready, the yield is one trip through the ready queue.
"""

from __future__ import annotations

from ...operations import thread_state
from .. import WaitEvent, checkpoint
from ._stream_api import (
    DEFAULT_RECEIVE_SIZE,
    MAX_READ,
    PASS,
    ConflictGuard,
    DelimiterNotFound,
    IncompleteRead,
    ReceiveStream,
    check_max_bytes,
)

__all__ = ["FAIR_STREAK", "_BufferedReceiver"]

# A stream yields to the scheduler at least once per this many calls that
# found their transport ready.
FAIR_STREAK = 16


def _check_delimiter(delimiter: object) -> bytes:
    """``receive_until``'s delimiter as non-empty bytes; refuses anything else."""
    if not isinstance(delimiter, bytes | bytearray | memoryview):
        raise TypeError(
            f"receive_until() needs a bytes delimiter, got {type(delimiter).__name__}; "
            "pass bytes such as b'\\r\\n' (encode a str first)"
        )
    delimiter = bytes(delimiter)
    if not delimiter:
        raise ValueError("receive_until() got an empty delimiter; pass e.g. b'\\n'")
    return delimiter


class _BufferedReceiver(ReceiveStream):
    """The receive side shared by ``SocketStream``, ``TLSStream`` and ``PipeStream``.

    See the module docstring for the two primitives a subclass provides.
    """

    __slots__ = ("_buffer", "_drained", "_receive_guard", "_streak")

    # Bytes received but not yet returned (the tail of a receive_until).
    _buffer: bytearray
    _receive_guard: ConflictGuard

    def _init_receiver(self, what: str) -> None:
        self._streak = 0  # calls in a row that found the transport ready; see FAIR_STREAK
        # Whether the last read took all the transport had: the next read yields first.
        self._drained = False
        self._buffer = bytearray()
        self._receive_guard = ConflictGuard(
            f"another task is already receiving on this {what}; "
            "receive from one task at a time (hand the data over with a Channel)"
        )

    def _receive_now(self, max_bytes: int) -> bytes | None:
        """The bytes the transport has now (``b""`` at its end), or None; never waits."""
        return None

    async def _receive_later(self, max_bytes: int) -> bytes:
        """Wait until the transport has bytes and return them (``b""`` at its end)."""
        raise NotImplementedError

    def _check_receive(self) -> None:
        raise NotImplementedError

    def _entry(self, refill: bool) -> WaitEvent | None:
        """Pass a call's cancellation point in place, or say what the call must await.

        Args:
            refill: whether the call needs bytes from the transport (its
                buffer cannot serve it).

        Returns:
            None when the task may go on at once (the checkpoint is
            counted); a ``checkpoint()`` when it must yield first
            (fairness, or a drained transport); ``PASS`` when the scheduler
            must raise ``Cancelled`` or refuse a call from outside a task.
        """
        if self._streak >= FAIR_STREAK or (refill and self._drained):
            self._streak = 0
            self._drained = False
            # (Not the shared CHECKPOINT marker: an awaited checkpoint joins
            # checkpoint()'s spares, and the marker must never be handed out.)
            return checkpoint()
        task = thread_state().task
        if task is None or task.current._cancelled:
            return PASS
        task.count_checkpoint()
        return None

    def _take(self, count: int) -> bytes:
        buffer = self._buffer
        data = bytes(buffer[:count])
        del buffer[:count]
        return data

    async def receive_some(self, max_bytes: int | None = DEFAULT_RECEIVE_SIZE) -> bytes:
        """Receive at most ``max_bytes`` bytes, waiting until some arrive.

        ``max_bytes=None``, as trio spells it, means the default size; one
        call returns at most ``MAX_READ`` (16 MiB) whatever ``max_bytes``
        allows. A cancellation point, checked before any byte is taken: a
        cancelled receive loses nothing.

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
        elif type(max_bytes) is not int or max_bytes < 1 or max_bytes > MAX_READ:
            max_bytes = min(check_max_bytes(max_bytes, "receive_some(max_bytes=...)"), MAX_READ)
        guard = self._receive_guard.lock  # (a with block, inline: see ConflictGuard)
        if not guard.acquire(False):
            raise self._receive_guard.busy()
        try:
            self._check_receive()
            buffer = self._buffer
            wait = self._entry(not buffer)
            if wait is not None:
                await wait
            if buffer:
                return self._take(max_bytes)
            data = self._receive_now(max_bytes)
            if data is None:
                data = await self._receive_later(max_bytes)
            return data
        finally:
            guard.release()

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
            buffer = self._buffer
            wait = self._entry(len(buffer) < n)
            if wait is not None:
                await wait
            while len(buffer) < n:
                size = min(max(n - len(buffer), DEFAULT_RECEIVE_SIZE), MAX_READ)
                chunk = self._receive_now(size)
                if chunk is None:
                    chunk = await self._receive_later(size)
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
        if type(delimiter) is not bytes or not delimiter:
            delimiter = _check_delimiter(delimiter)
        if type(max_bytes) is not int or max_bytes < 1:
            max_bytes = check_max_bytes(max_bytes, "receive_until(max_bytes=...)")
        guard = self._receive_guard.lock  # (a with block, inline: see ConflictGuard)
        if not guard.acquire(False):
            raise self._receive_guard.busy()
        try:
            self._check_receive()
            buffer = self._buffer
            index = buffer.find(delimiter)
            wait = self._entry(index < 0)
            if wait is not None:
                await wait
            while True:
                if 0 <= index <= max_bytes:
                    data = bytes(buffer[:index])
                    del buffer[: index + len(delimiter)]
                    return data
                if index > max_bytes or len(buffer) >= max_bytes + len(delimiter):
                    raise DelimiterNotFound(
                        f"receive_until() found no {delimiter!r} within max_bytes={max_bytes} "
                        "bytes; raise max_bytes, or treat the peer as misbehaving"
                    )
                # No delimiter starts before this offset: search on from there.
                searched = max(0, len(buffer) - len(delimiter) + 1)
                chunk = self._receive_now(DEFAULT_RECEIVE_SIZE)
                if chunk is None:
                    chunk = await self._receive_later(DEFAULT_RECEIVE_SIZE)
                if not chunk:
                    partial = self._take(len(buffer))
                    raise IncompleteRead(
                        f"the peer closed the stream before {delimiter!r} arrived "
                        f"({len(partial)} bytes without it); the message was cut short",
                        partial,
                    )
                if not buffer:
                    # The commonest case: the frame starts with this chunk.
                    # Cut it out of the chunk; only what follows it is kept.
                    index = chunk.find(delimiter)
                    if 0 <= index <= max_bytes:
                        rest = index + len(delimiter)
                        if rest < len(chunk):
                            buffer += chunk[rest:]
                        return chunk[:index]
                    buffer += chunk
                    continue
                buffer += chunk
                index = buffer.find(delimiter, searched)
        finally:
            guard.release()
