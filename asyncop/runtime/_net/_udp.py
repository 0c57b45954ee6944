"""UDP sockets: ``open_udp_socket`` and ``UDPSocket``.

Datagrams need less than streams: no framing (each ``recvfrom`` is one
datagram), no end of stream and no connection to break. What they share
with ``SocketStream`` is the rest of the discipline, for the same reasons:

- every send and receive is a cancellation point on entry, and a cancelled
  ``recvfrom`` takes no datagram;
- one task per direction (a second gets ``BusyResourceError``): two
  receivers would split the datagrams between them by chance;
- ``aclose()`` wakes a parked task with ``ClosedResourceError``.

``sendto(data, host, port)`` takes a host name as well as an address, like
anyio's: a name is resolved with ``getaddrinfo`` (in a thread), an address
in place, in the socket's own family. Ports are checked as TCP's are
(``_dns.check_port``): 70000 is refused, not sent to port 4464.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any, final

from .. import readable, writable
from . import _dns
from ._stream_api import (
    DEFAULT_RECEIVE_SIZE,
    MAX_READ,
    PASS,
    AsyncResource,
    ConflictGuard,
    check_data,
    check_max_bytes,
    closed_error,
    closed_under_error,
)
from ._streams import close_socket, wait_ready

__all__ = ["UDPSocket", "open_udp_socket"]


@final
class UDPSocket(AsyncResource):
    """A bound UDP socket: ``sendto``, ``recvfrom``, ``aclose``, ``async with``, ``async for``.

    Made by ``open_udp_socket``, or from a ``socket.socket`` of type
    ``SOCK_DGRAM`` (which it then owns and makes non-blocking).
    """

    __slots__ = ("_closed", "_receive_guard", "_send_guard", "_socket")

    def __init__(self, sock: socket.socket) -> None:
        if not isinstance(sock, socket.socket) or sock.type != socket.SOCK_DGRAM:
            raise TypeError(
                f"UDPSocket() needs a SOCK_DGRAM socket.socket, got {sock!r}; use open_udp_socket()"
            )
        sock.setblocking(False)
        self._socket = sock
        self._closed = False
        self._receive_guard = ConflictGuard(
            "another task is already receiving on this UDP socket; receive from one task"
        )
        self._send_guard = ConflictGuard(
            "another task is already sending on this UDP socket; send from one task"
        )

    @property
    def socket(self) -> socket.socket:
        """The underlying socket."""
        return self._socket

    @property
    def local_address(self) -> Any:
        """The bound address, e.g. ``("127.0.0.1", 40312)``.

        Raises:
            ClosedResourceError: the socket was closed.
        """
        self._check_open()
        return self._socket.getsockname()

    def _is_closed(self) -> bool:
        return self._closed or self._socket.fileno() < 0

    def _check_open(self) -> None:
        if self._closed:
            raise closed_error("UDP socket")

    async def sendto(self, data: bytes | bytearray | memoryview, host: str, port: int) -> None:
        """Send one datagram to ``host``:``port`` (a name or an address).

        A cancellation point; a cancelled send sent nothing.

        Raises:
            ClosedResourceError: the socket was closed.
            BusyResourceError: another task is sending on this socket.
            socket.gaierror: ``host`` does not resolve in this socket's family.
            OSError: the datagram is too large (``EMSGSIZE``), or the
                network refused it.
            TypeError, ValueError: ``data`` is not bytes-like, or ``port``
                is not an int in 0..65535 (raised before anything is sent).
            Cancelled: the task was cancelled.
        """
        data = check_data(data, "UDPSocket.sendto()")
        _dns.check_port(port, "UDPSocket.sendto()")
        with self._send_guard:
            self._check_open()
            sock = self._socket
            infos = await _dns.getaddrinfo(host, port, sock.family, socket.SOCK_DGRAM)
            address = infos[0][4]
            while True:
                if self._is_closed():  # by another task, while this one waited
                    raise closed_under_error("UDP socket")
                try:
                    sock.sendto(data, address)
                    return
                except BlockingIOError:
                    pass
                except OSError:
                    if self._is_closed():
                        raise closed_under_error("UDP socket") from None
                    raise
                await wait_ready(writable(sock), self._is_closed, "UDP socket")

    async def recvfrom(self, max_bytes: int = DEFAULT_RECEIVE_SIZE) -> tuple[bytes, Any]:
        """Receive one datagram, waiting for it; longer ones are cut to ``max_bytes``.

        A cancellation point; a cancelled receive takes no datagram.

        Returns:
            ``(data, (host, port))``.

        Raises:
            ClosedResourceError: the socket was closed (also while waiting).
            BusyResourceError: another task is receiving on this socket.
            TypeError, ValueError: ``max_bytes`` is not a positive int.
            Cancelled: the task was cancelled.
        """
        # (A datagram never holds more than MAX_READ: the cap cuts nothing.)
        size = min(check_max_bytes(max_bytes, "recvfrom(max_bytes=...)"), MAX_READ)
        with self._receive_guard:
            self._check_open()
            await PASS
            sock = self._socket
            while True:
                try:
                    return sock.recvfrom(size)
                except BlockingIOError:
                    pass
                await wait_ready(readable(sock), self._is_closed, "UDP socket")
                self._check_open()

    def __aiter__(self) -> AsyncIterator[tuple[bytes, Any]]:
        return self._datagrams()

    async def _datagrams(self) -> AsyncIterator[tuple[bytes, Any]]:
        while True:
            yield await self.recvfrom()

    def close(self) -> None:
        """Close at once; a task waiting on the socket gets ``ClosedResourceError``."""
        if self._closed:
            return
        self._closed = True
        close_socket(self._socket)

    def __repr__(self) -> str:
        if self._closed:
            return "<UDPSocket closed>"
        return f"<UDPSocket {self.local_address!r}>"


async def open_udp_socket(
    local_host: str | None = None,
    local_port: int = 0,
    *,
    family: int = socket.AF_UNSPEC,
) -> UDPSocket:
    """Open a UDP socket bound to ``local_host``:``local_port``.

    Args:
        local_host: the address (or name) to bind; None for every
            interface of the family.
        local_port: the port; 0 for any free port (read it from
            ``local_address``).
        family: ``socket.AF_INET`` or ``socket.AF_INET6``; by default the
            family of ``local_host``, or IPv4 when it is None.

    Raises:
        OSError: the address cannot be bound or resolved.
        TypeError, ValueError: ``local_port`` is not an int in 0..65535.
        Cancelled: the task was cancelled.
    """
    _dns.check_port(local_port, "open_udp_socket()", "local_port")
    if local_host is None and family == socket.AF_UNSPEC:
        family = socket.AF_INET
    infos = await _dns.getaddrinfo(
        local_host, local_port, family, socket.SOCK_DGRAM, 0, socket.AI_PASSIVE
    )
    chosen_family, kind, proto, _, address = infos[0]
    sock = socket.socket(chosen_family, kind, proto)
    try:
        sock.bind(address)
        return UDPSocket(sock)
    except BaseException:
        sock.close()
        raise
