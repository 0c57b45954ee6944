"""Sockets: anyio's TCP, UDP and Unix streams and listeners, and name lookups, on asyncop.

anyio's backend-neutral half (``anyio._core._sockets``) resolves names,
runs happy eyeballs, binds listeners and wraps streams in TLS; it asks the
backend for the rest, which is here: connecting one socket to one numeric
address, wrapping a socket in one of anyio's socket classes (made in
``_socket_types.py``), the name lookups, and the raw readiness waits.

A connect is a non-blocking ``connect`` and a wait until the socket is
writable, then ``SO_ERROR`` says how it went, as on trio: a refused
connection raises ``ConnectionRefusedError`` (an ``OSError``, which anyio's
happy eyeballs collects), and a cancel closes the half-open socket.
``getaddrinfo`` is asyncop's (a numeric address in place, a name in a
resolver thread, abandoned on cancel); ``getnameinfo`` runs in a blocking
thread that a cancel abandons likewise. ``wait_readable``/``wait_writable``
are ``asyncop.readable``/``writable`` with anyio's errors, and
``notify_closing`` is asyncop's.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from socket import AddressFamily, SocketKind
from typing import TYPE_CHECKING, Any, Literal, overload

from anyio import abc

from .. import checkpoint, lowlevel, readable, spawn_blocking, writable
from .. import notify_closing as asyncop_notify_closing
from ..net import getaddrinfo as asyncop_getaddrinfo
from ._socket_types import (
    READING,
    WRITING,
    ConnectedUDPSocket,
    ConnectedUNIXDatagramSocket,
    SocketStream,
    TCPSocketListener,
    UDPSocket,
    UNIXDatagramSocket,
    UNIXSocketListener,
    UNIXSocketStream,
    wait_ready,
)

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike
    from anyio.abc import IPSockAddrType

__all__ = ["SocketMethods"]


async def _connect(sock: socket.socket, address: Any) -> None:
    """Connect the non-blocking ``sock`` to ``address``; a cancellation point.

    Raises:
        OSError: the connection failed (``ConnectionRefusedError`` when
            nobody listens), with the address in its message.
        Cancelled: the task was cancelled; the caller closes the socket.
    """
    if not lowlevel.pass_checkpoint():
        await checkpoint()
    try:
        sock.connect(address)
        return
    except BlockingIOError:
        pass
    await wait_ready(writable(sock), WRITING)
    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if code:
        # OSError(code, ...) is made as its subclass, e.g. ConnectionRefusedError.
        raise OSError(code, f"Error connecting to {address!r}: {os.strerror(code)}")


class SocketMethods:
    """The backend's calls about sockets; mixed into ``AsyncopBackend``."""

    @classmethod
    async def connect_tcp(
        cls, host: str, port: int, local_address: IPSockAddrType | None = None
    ) -> SocketStream:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if local_address:
                sock.bind(local_address)
            await _connect(sock, (host, port))
        except BaseException:
            sock.close()
            raise
        return SocketStream(sock)

    @classmethod
    async def connect_unix(
        cls,
        path: str | bytes,
        kind: Literal[SocketKind.SOCK_STREAM, SocketKind.SOCK_SEQPACKET],
    ) -> UNIXSocketStream:
        sock = socket.socket(socket.AF_UNIX, kind)
        try:
            sock.setblocking(False)
            await _connect(sock, path)
        except BaseException:
            sock.close()
            raise
        return UNIXSocketStream(sock)

    @classmethod
    def create_tcp_listener(cls, sock: socket.socket) -> TCPSocketListener:
        return TCPSocketListener(sock)

    @classmethod
    def create_unix_listener(cls, sock: socket.socket) -> UNIXSocketListener:
        return UNIXSocketListener(sock)

    @classmethod
    async def create_udp_socket(
        cls,
        family: AddressFamily,
        local_address: IPSockAddrType | None,
        remote_address: IPSockAddrType | None,
        reuse_port: bool,
    ) -> UDPSocket | ConnectedUDPSocket:
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if local_address:
                sock.bind(local_address)
            if remote_address:
                await _connect(sock, remote_address)
                return ConnectedUDPSocket(sock)
            await checkpoint()
        except BaseException:
            sock.close()
            raise
        return UDPSocket(sock)

    @overload
    @classmethod
    async def create_unix_datagram_socket(
        cls, raw_socket: socket.socket, remote_path: None
    ) -> abc.UNIXDatagramSocket: ...

    @overload
    @classmethod
    async def create_unix_datagram_socket(
        cls, raw_socket: socket.socket, remote_path: str | bytes
    ) -> abc.ConnectedUNIXDatagramSocket: ...

    @classmethod
    async def create_unix_datagram_socket(
        cls, raw_socket: socket.socket, remote_path: str | bytes | None
    ) -> abc.UNIXDatagramSocket | abc.ConnectedUNIXDatagramSocket:
        try:
            raw_socket.setblocking(False)
            if remote_path:
                await _connect(raw_socket, remote_path)
                return ConnectedUNIXDatagramSocket(raw_socket)
            await checkpoint()
        except BaseException:
            raw_socket.close()
            raise
        return UNIXDatagramSocket(raw_socket)

    @classmethod
    async def getaddrinfo(
        cls,
        host: bytes | str | None,
        port: str | int | None,
        *,
        family: int | AddressFamily = 0,
        type: int | SocketKind = 0,
        proto: int = 0,
        flags: int = 0,
    ) -> Sequence[
        tuple[
            AddressFamily,
            SocketKind,
            int,
            str,
            tuple[str, int] | tuple[str, int, int, int] | tuple[int, bytes],
        ]
    ]:
        return await asyncop_getaddrinfo(host, port, family, type, proto, flags)

    @classmethod
    async def getnameinfo(cls, sockaddr: IPSockAddrType, flags: int = 0) -> tuple[str, str]:
        # Off the workers, as getaddrinfo: a cancel leaves the thread to finish alone.
        return await spawn_blocking(socket.getnameinfo, sockaddr, flags, abandon=True)

    @classmethod
    async def wait_readable(cls, obj: FileDescriptorLike) -> None:
        await wait_ready(readable(obj), READING)

    @classmethod
    async def wait_writable(cls, obj: FileDescriptorLike) -> None:
        await wait_ready(writable(obj), WRITING)

    @classmethod
    def notify_closing(cls, obj: FileDescriptorLike) -> None:
        asyncop_notify_closing(obj)

    @classmethod
    async def wrap_listener_socket(cls, sock: socket.socket) -> abc.SocketListener:
        if sock.family == socket.AF_UNIX:
            return UNIXSocketListener(sock)
        return TCPSocketListener(sock)

    @classmethod
    async def wrap_stream_socket(cls, sock: socket.socket) -> SocketStream:
        return SocketStream(sock)

    @classmethod
    async def wrap_unix_stream_socket(cls, sock: socket.socket) -> UNIXSocketStream:
        return UNIXSocketStream(sock)

    @classmethod
    async def wrap_udp_socket(cls, sock: socket.socket) -> UDPSocket:
        return UDPSocket(sock)

    @classmethod
    async def wrap_connected_udp_socket(cls, sock: socket.socket) -> ConnectedUDPSocket:
        return ConnectedUDPSocket(sock)

    @classmethod
    async def wrap_unix_datagram_socket(cls, sock: socket.socket) -> UNIXDatagramSocket:
        return UNIXDatagramSocket(sock)

    @classmethod
    async def wrap_connected_unix_datagram_socket(
        cls, sock: socket.socket
    ) -> ConnectedUNIXDatagramSocket:
        return ConnectedUNIXDatagramSocket(sock)
