"""anyio's socket streams, listeners and datagram sockets, on asyncop's readiness waits.

Each class holds a non-blocking ``socket.socket`` and does what anyio's trio
backend does on ``trio.socket``: try the call, and on ``BlockingIOError``
park in asyncop's reactor (``asyncop.readable``/``writable``) and try again
(a wake may be spurious). Nothing is buffered: a receive takes bytes from
the socket only in a ``recv`` that returns them to the caller, so a
cancelled receive loses nothing, and a send returns once the kernel has
taken every byte (a cancelled send may have sent a prefix, as on trio).

Entry: every call is a cancellation point, passed in place
(``lowlevel.pass_checkpoint()``) rather than by a trip through the
scheduler, as asyncop's own streams do; every ``FAIR_STREAK``-th call in a
row that found its socket ready yields (``checkpoint()``), so that a task
reading a socket that always has data still lets the others run. A call
that waits has yielded already.

One task per direction: a second task receiving (or sending, or accepting)
while one does gets anyio's ``BusyResourceError`` at once. The guard is a
``threading.Lock`` taken without blocking, as asyncop's streams have it,
because asyncop may step two tasks on two worker threads at the same time.

Errors are anyio's, with trio's mapping: a socket this object closed
raises ``ClosedResourceError`` (also in a task that waited on it, woken by
``aclose()``'s ``notify_closing``); an ``OSError`` from the socket (a reset
by the peer, a broken pipe, a socket closed behind the object's back)
raises ``BrokenResourceError`` from it; a peer that closed its side makes
``receive()`` raise ``EndOfStream``.
"""

from __future__ import annotations

import array
import os
import socket
import threading
from collections.abc import Callable, Collection
from io import IOBase
from typing import Any, NoReturn, TypeVar

from anyio import BrokenResourceError, BusyResourceError, ClosedResourceError, EndOfStream, abc
from anyio._core._sockets import convert_ipv6_sockaddr

from .. import BusyResourceError as AsyncopBusy
from .. import ClosedResourceError as AsyncopClosed
from .. import checkpoint, lowlevel, readable, writable
from .. import notify_closing as asyncop_notify_closing
from ..net import getaddrinfo
from ..runtime import MAX_READ

__all__ = [
    "READING",
    "WRITING",
    "ConnectedUDPSocket",
    "ConnectedUNIXDatagramSocket",
    "SocketStream",
    "TCPSocketListener",
    "UDPSocket",
    "UNIXDatagramSocket",
    "UNIXSocketListener",
    "UNIXSocketStream",
    "wait_ready",
]

T = TypeVar("T")

#: A socket call yields to the scheduler at least once per this many calls
#: in a row that found their socket ready.
FAIR_STREAK = 16

# What a second task in the same direction was refused, as anyio's
# BusyResourceError words it ("Another task is already reading from ...").
READING = "reading from"
WRITING = "writing to"
ACCEPTING = "accepting connections from"

#: The size of one datagram receive: the largest UDP payload, rounded up.
DATAGRAM_SIZE = 65536


async def wait_ready(event: Any, what: str) -> None:
    """Await ``readable(fd)``/``writable(fd)`` with anyio's errors.

    ``what`` names the direction for ``BusyResourceError`` (``"reading
    from"``, ``"writing to"``).

    Raises:
        ClosedResourceError: ``notify_closing`` woke the wait, or the fd was
            closed.
        BusyResourceError: another task waits on the same fd and direction.
    """
    try:
        await event
    except AsyncopClosed as exc:
        raise ClosedResourceError(*exc.args).with_traceback(exc.__traceback__) from None
    except AsyncopBusy:
        raise BusyResourceError(what) from None


class _SocketBase:
    """The socket, the closed flag, ``aclose`` and the error mapping every class shares."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._socket = sock
        self._closed = False
        self._streak = 0  # calls in a row that found the socket ready; see FAIR_STREAK

    @property
    def _raw_socket(self) -> socket.socket:
        return self._socket

    def _check_closed(self) -> None:
        if self._closed:
            raise ClosedResourceError(
                f"{type(self).__name__} was closed with aclose(); open a new one to go on"
            )
        if self._socket.fileno() < 0:
            raise BrokenResourceError(
                f"the socket of this {type(self).__name__} was closed behind its back; "
                "close it with aclose() instead"
            )

    def _fail(self, exc: BaseException) -> NoReturn:
        """Raise anyio's error for what a socket call, or a wait, raised."""
        if self._closed or isinstance(exc, ClosedResourceError):
            raise ClosedResourceError(
                f"{type(self).__name__} was closed while this task used it"
            ) from None
        if isinstance(exc, OSError):
            raise BrokenResourceError(
                f"{type(self).__name__} is broken: {exc}; open a new one to go on"
            ) from exc
        raise exc

    async def _attempt(
        self, wait: Callable[[Any], Any], what: str, call: Callable[..., T], *args: Any
    ) -> T:
        """Run the non-blocking ``call(*args)``, waiting for readiness until it goes through.

        A cancellation point on entry (see the module docstring); the
        caller holds the direction's guard.
        """
        if self._streak >= FAIR_STREAK or not lowlevel.pass_checkpoint():
            self._streak = 0
            await checkpoint()
        while True:
            try:
                result = call(*args)
            except BlockingIOError:
                pass
            except OSError as exc:
                self._fail(exc)
            else:
                self._streak += 1
                return result
            self._streak = 0  # this call waits: it yields to the scheduler
            try:
                await wait_ready(wait(self._socket), what)
            except ClosedResourceError as exc:
                self._fail(exc)
            self._check_closed()

    async def aclose(self) -> None:
        """Close the socket; a task waiting on it gets ``ClosedResourceError``.

        Closes even in a cancelled scope, then raises the cancel (a
        cancellation point after the close).
        """
        if not self._closed:
            self._closed = True
            sock = self._socket
            if sock.fileno() >= 0:
                asyncop_notify_closing(sock)  # before close: the fd number may be reused
            sock.close()
        await checkpoint()


def _check_max_bytes(value: object) -> None:
    """Refuse a ``max_bytes`` that is not a positive int (an int subclass passes)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"receive() needs an int max_bytes, got {type(value).__name__}; pass e.g. 65536"
        )
    if value < 1:
        raise ValueError(
            f"max_bytes must be a positive integer, got {value}; pass the most bytes "
            "to take at once, e.g. 65536"
        )


class SocketStream(_SocketBase, abc.SocketStream):
    """A connected TCP (or other stream) socket as anyio's ``SocketStream``."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock)
        self._receive_lock = threading.Lock()
        self._send_lock = threading.Lock()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if type(max_bytes) is not int or max_bytes < 1:
            _check_max_bytes(max_bytes)
        lock = self._receive_lock
        if not lock.acquire(False):
            raise BusyResourceError(READING)
        try:
            self._check_closed()
            # (A huge max_bytes would allocate that much first; no recv needs more.)
            size = max_bytes if max_bytes <= MAX_READ else MAX_READ
            data = await self._attempt(readable, READING, self._socket.recv, size)
        finally:
            lock.release()
        if not data:
            raise EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        lock = self._send_lock
        if not lock.acquire(False):
            raise BusyResourceError(WRITING)
        try:
            self._check_closed()
            send = self._socket.send
            sent = await self._attempt(writable, WRITING, send, item)
            if sent < len(item):
                with memoryview(item) as view:
                    while sent < len(view):
                        sent += await self._attempt(writable, WRITING, send, view[sent:])
        finally:
            lock.release()

    async def send_eof(self) -> None:
        self._check_closed()
        try:
            self._socket.shutdown(socket.SHUT_WR)
        except OSError as exc:
            self._fail(exc)


class UNIXSocketStream(SocketStream, abc.UNIXSocketStream):
    """A connected Unix stream socket, which can also pass file descriptors."""

    async def receive_fds(self, msglen: int, maxfds: int) -> tuple[bytes, list[int]]:
        if not isinstance(msglen, int) or msglen < 0:
            raise ValueError(
                f"msglen must be a non-negative integer, got {msglen!r}; pass the most "
                "bytes of message to receive with the descriptors"
            )
        if not isinstance(maxfds, int) or maxfds < 1:
            raise ValueError(
                f"maxfds must be a positive integer, got {maxfds!r}; pass the most "
                "descriptors to receive"
            )
        fds = array.array("i")
        lock = self._receive_lock
        if not lock.acquire(False):
            raise BusyResourceError(READING)
        try:
            self._check_closed()
            message, ancdata, _flags, _addr = await self._attempt(
                readable,
                READING,
                self._socket.recvmsg,
                msglen,
                socket.CMSG_LEN(maxfds * fds.itemsize),
            )
        finally:
            lock.release()
        if not message and not ancdata:
            raise EndOfStream
        unexpected = None
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
            else:
                unexpected = (level, kind)
        if unexpected is not None:
            for fd in fds:  # received, but never handed over: not leaked either
                os.close(fd)
            raise RuntimeError(
                f"receive_fds() got ancillary data other than descriptors (cmsg_level, "
                f"cmsg_type = {unexpected}) with message {message!r}; send only "
                "descriptors (SCM_RIGHTS) to this socket"
            )
        return message, list(fds)

    async def send_fds(self, message: bytes, fds: Collection[int | IOBase]) -> None:
        if not message:
            raise ValueError(
                "message must not be empty: the descriptors travel with its bytes; "
                "pass at least one byte"
            )
        if not fds:
            raise ValueError("fds must not be empty; pass the descriptors to send, or use send()")
        numbers = [fd if isinstance(fd, int) else fd.fileno() for fd in fds]
        ancdata = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", numbers))]
        lock = self._send_lock
        if not lock.acquire(False):
            raise BusyResourceError(WRITING)
        try:
            self._check_closed()
            with memoryview(message) as view:
                sent = 0
                while sent < len(view):
                    sent += await self._attempt(
                        writable, WRITING, self._socket.sendmsg, [view[sent:]], ancdata
                    )
                    ancdata = []  # the descriptors went with the first write
        finally:
            lock.release()


class _Listener(_SocketBase):
    """A listening socket: ``accept`` with one task at a time."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock)
        self._accept_lock = threading.Lock()

    async def _accept(self) -> socket.socket:
        lock = self._accept_lock
        if not lock.acquire(False):
            raise BusyResourceError(ACCEPTING)
        try:
            self._check_closed()
            conn, _ = await self._attempt(readable, ACCEPTING, self._socket.accept)
        finally:
            lock.release()
        return conn


class TCPSocketListener(_Listener, abc.SocketListener):
    """A listening TCP socket; accepted streams get ``TCP_NODELAY``."""

    async def accept(self) -> SocketStream:
        conn = await self._accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return SocketStream(conn)


class UNIXSocketListener(_Listener, abc.SocketListener):
    """A listening Unix stream socket."""

    async def accept(self) -> UNIXSocketStream:
        return UNIXSocketStream(await self._accept())


class _Datagrams(_SocketBase):
    """A datagram socket: one receiving task and one sending task at a time."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock)
        self._receive_lock = threading.Lock()
        self._send_lock = threading.Lock()

    async def _receive_with(self, call: Callable[[int], T]) -> T:
        lock = self._receive_lock
        if not lock.acquire(False):
            raise BusyResourceError(READING)
        try:
            self._check_closed()
            return await self._attempt(readable, READING, call, DATAGRAM_SIZE)
        finally:
            lock.release()

    async def _send_with(self, call: Callable[..., int], *args: Any) -> None:
        lock = self._send_lock
        if not lock.acquire(False):
            raise BusyResourceError(WRITING)
        try:
            self._check_closed()
            await self._attempt(writable, WRITING, call, *args)
        finally:
            lock.release()


async def _datagram_target(sock: socket.socket, address: Any) -> Any:
    """``address`` as ``sendto`` takes it: a host name resolved in the socket's family.

    A numeric address is used as it is; a name is resolved by asyncop's
    ``getaddrinfo`` (in a resolver thread), as trio resolves it.
    """
    family = sock.family
    if family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
        return address
    host = address[0]
    try:
        socket.inet_pton(family, host)
        return address
    except (OSError, TypeError):
        pass
    infos = await getaddrinfo(host, address[1], family, socket.SOCK_DGRAM)
    return infos[0][4]


class UDPSocket(_Datagrams, abc.UDPSocket):
    """An unconnected UDP socket: ``(data, (host, port))`` packets."""

    async def receive(self) -> tuple[bytes, tuple[str, int]]:
        data, address = await self._receive_with(self._socket.recvfrom)
        return data, convert_ipv6_sockaddr(address)

    async def send(self, item: tuple[bytes, tuple[str, int]]) -> None:
        data, address = item
        self._check_closed()
        target = await _datagram_target(self._socket, address)
        await self._send_with(self._socket.sendto, data, target)


class ConnectedUDPSocket(_Datagrams, abc.ConnectedUDPSocket):
    """A UDP socket connected to one peer: bytes packets."""

    async def receive(self) -> bytes:
        return await self._receive_with(self._socket.recv)

    async def send(self, item: bytes) -> None:
        await self._send_with(self._socket.send, item)


class UNIXDatagramSocket(_Datagrams, abc.UNIXDatagramSocket):
    """An unconnected Unix datagram socket: ``(data, path)`` packets."""

    async def receive(self) -> tuple[bytes, str]:
        data, address = await self._receive_with(self._socket.recvfrom)
        return data, address

    async def send(self, item: tuple[bytes, str]) -> None:
        data, path = item
        await self._send_with(self._socket.sendto, data, path)


class ConnectedUNIXDatagramSocket(_Datagrams, abc.ConnectedUNIXDatagramSocket):
    """A Unix datagram socket connected to one peer: bytes packets."""

    async def receive(self) -> bytes:
        return await self._receive_with(self._socket.recv)

    async def send(self, item: bytes) -> None:
        await self._send_with(self._socket.send, item)
