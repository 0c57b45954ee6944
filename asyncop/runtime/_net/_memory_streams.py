"""Two connected streams in memory: ``memory_stream_pair()``.

A protocol test wants a client and a server talking through a stream, and
a socket brings what such a test does not want: ports, a reactor, the
virtual clock refusing to jump over an I/O wait. ``memory_stream_pair()``
gives two ``Stream`` objects joined back to back, as trio's testing module
does: what one end sends, the other receives, in order. They are the
stream classes of asyncop (``_BufferedReceiver`` and ``Stream``), so
``receive_exactly``, ``receive_until``, ``async for`` and ``TLSStream.wrap``
work on them as on a ``SocketStream``, with the same errors:

- a second task receiving (or sending) on one end: ``BusyResourceError``;
- a call on an end after its ``aclose()``: ``ClosedResourceError``, and a
  task parked in a receive on that end wakes with it;
- ``send_all`` after ``send_eof()``: ``ClosedResourceError``;
- after the other end's ``send_eof()`` or ``aclose()``, a receive returns
  what was still buffered, then ``b""``;
- ``send_all`` to an end that was closed: ``BrokenResourceError``, as a
  socket whose peer left;
- a cancelled receive takes nothing: bytes leave the buffer only in a call
  that returns them.

**Unbounded.** Each direction is a ``_Pipe``: a byte buffer with no limit,
so ``send_all`` never waits for the reader (it is still a cancellation
point on entry). A bound would let a test that sends a large request
before reading the reply deadlock, which sockets, with their kernel
buffers, do not for the sizes tests use; a test that must see backpressure
should use a real socket pair.

A receive that finds the pipe empty waits on an ``Event`` that the next
send, ``send_eof`` or close sets; that is not an I/O wait, so a
``VirtualClock(autojump=True)`` jumps over it, and timeouts in protocol
tests take no real time. Every pipe field is written under the pipe's lock,
so the ends may be used from tasks on any worker (a parallel runtime too).
"""

from __future__ import annotations

import threading
from typing import final

from ...operations import BrokenResourceError
from .. import Event
from ._receive_buffer import _BufferedReceiver
from ._stream_api import (
    PASS,
    ConflictGuard,
    Stream,
    closed_error,
    closed_under_error,
    eof_sent_error,
)

__all__ = ["MemoryStream", "memory_stream_pair"]

_WHAT = "memory stream"


@final
class _Pipe:
    """One direction of a pair: bytes one end sent and the other has not received."""

    __slots__ = ("data", "eof", "lock", "reader_closed", "wakeup")

    def __init__(self) -> None:
        # Invariant: every field below is read and written under this lock.
        self.lock = threading.Lock()
        self.data = bytearray()
        self.eof = False  # the sending end sent EOF or was closed
        self.reader_closed = False  # the receiving end was closed
        self.wakeup: Event | None = None  # set by the next change; the reader waits on it

    def take(self, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` bytes, ``b""`` at the end, None when it has none yet."""
        with self.lock:
            data = self.data
            if data:
                chunk = bytes(data[:max_bytes])
                del data[:max_bytes]
                return chunk
            return b"" if self.eof else None

    def wake(self) -> None:
        """Wake the reader, if it waits; called after a change, without the lock."""
        with self.lock:
            wakeup, self.wakeup = self.wakeup, None
        if wakeup is not None:
            wakeup.set()


@final
class MemoryStream(_BufferedReceiver, Stream):
    """One end of a ``memory_stream_pair()``: a ``Stream`` whose peer is in memory.

    It has the ``SocketStream`` methods (``receive_some``, ``send_all``,
    ``receive_exactly``, ``receive_until``, ``send_eof``, ``aclose``,
    ``async with``, ``async for``) with the same errors and cancellation
    rules; see the module documentation for the few that are its own.
    """

    __slots__ = ("_closed", "_eof_sent", "_incoming", "_name", "_outgoing", "_send_guard")

    def __init__(self, incoming: _Pipe, outgoing: _Pipe, name: str) -> None:
        self._incoming = incoming
        self._outgoing = outgoing
        self._name = name
        self._closed = False
        self._eof_sent = False
        self._init_receiver(_WHAT)
        self._send_guard = ConflictGuard(
            f"another task is already sending on this {_WHAT}; send from one task at a "
            "time (hand the data over with a Channel, or hold a Lock around send_all)"
        )

    # -- receiving (the primitives of _BufferedReceiver) --------------------------

    def _check_receive(self) -> None:
        if self._closed:
            raise closed_error(_WHAT)

    def _receive_now(self, max_bytes: int) -> bytes | None:
        data = self._incoming.take(max_bytes)
        if data is not None:
            self._streak += 1  # found ready: counts toward the fairness yield
        return data

    async def _receive_later(self, max_bytes: int) -> bytes:
        """Wait for the other end to send, send EOF or close; a cancel takes nothing."""
        pipe = self._incoming
        while True:
            self._streak = 0  # this call waits: it yields to the scheduler
            with pipe.lock:
                if self._closed:
                    raise closed_under_error(_WHAT)
                if pipe.data or pipe.eof:
                    wakeup = None
                else:
                    wakeup = pipe.wakeup = Event()
            if wakeup is not None:
                try:
                    await wakeup.wait_async()
                finally:
                    with pipe.lock:
                        if pipe.wakeup is wakeup:
                            pipe.wakeup = None
                continue  # look again: closed, or bytes, or the end
            data = pipe.take(max_bytes)
            if data is not None:
                return data

    # -- sending ------------------------------------------------------------------

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Hand all of ``data`` to the other end; it never waits for room.

        A cancellation point on entry; a cancelled call sent nothing.

        Raises:
            TypeError: ``data`` is not bytes-like (a ``str``, say).
            ClosedResourceError: this end was closed, or sent end-of-file.
            BusyResourceError: another task is sending on this end.
            BrokenResourceError: the other end was closed.
            Cancelled: the task was cancelled; nothing was sent.
        """
        try:
            chunk = bytes(memoryview(data).cast("B"))  # a copy: the caller may reuse data
        except TypeError:
            raise TypeError(
                f"send_all() needs bytes-like data, got {type(data).__name__}; pass bytes, "
                "bytearray or memoryview (encode a str first, e.g. text.encode())"
            ) from None
        with self._send_guard:
            self._check_send()
            wait = self._entry(False)
            if wait is not None:
                await wait
            self._check_send()  # closed while this task yielded
            self._streak += 1
            pipe = self._outgoing
            with pipe.lock:
                if pipe.reader_closed:
                    raise BrokenResourceError(
                        f"send_all() on {self._name} failed: the other end of the pair was "
                        "closed; close this end too, as after a broken connection"
                    )
                pipe.data += chunk
            if chunk:
                pipe.wake()

    def _check_send(self) -> None:
        if self._closed:
            raise closed_error(_WHAT)
        if self._eof_sent:
            raise eof_sent_error(_WHAT)

    async def send_eof(self) -> None:
        """Tell the other end that nothing more will come; this end still receives.

        The other end receives what was sent, then ``b""``. Calling it twice
        is harmless. A cancellation point, before the end-of-file is sent.

        Raises:
            ClosedResourceError: this end was closed.
            BusyResourceError: another task is sending on this end.
        """
        with self._send_guard:
            if self._closed:
                raise closed_error(_WHAT)
            await PASS
            if self._eof_sent:
                return
            self._eof_sent = True
            with self._outgoing.lock:
                self._outgoing.eof = True
            self._outgoing.wake()

    # -- closing ------------------------------------------------------------------

    def close(self) -> None:
        """Close this end at once; harmless when already closed.

        A task parked in a receive on this end gets ``ClosedResourceError``;
        the other end receives ``b""`` once it has read what was sent, and
        its ``send_all`` raises ``BrokenResourceError``. Not a cancellation
        point (``aclose`` is).
        """
        if self._closed:
            return
        self._closed = True
        incoming, outgoing = self._incoming, self._outgoing
        with incoming.lock:
            incoming.reader_closed = True
            incoming.data.clear()  # nobody will read it: free it
        with outgoing.lock:
            outgoing.eof = True
        incoming.wake()
        outgoing.wake()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<MemoryStream {self._name} {state}>"


def memory_stream_pair() -> tuple[Stream, Stream]:
    """Two streams connected in memory: what one sends, the other receives.

    For testing protocols without sockets: run the server on one end and
    the client on the other, from asyncop tasks. Each end has the
    ``SocketStream`` methods and errors; sends are buffered without limit,
    so ``send_all`` never waits for the reader. See the module
    documentation for every rule.

    Returns:
        ``(a, b)``: the two ends, each a ``Stream``.
    """
    a_to_b = _Pipe()
    b_to_a = _Pipe()
    return (
        MemoryStream(b_to_a, a_to_b, "end a"),
        MemoryStream(a_to_b, b_to_a, "end b"),
    )
