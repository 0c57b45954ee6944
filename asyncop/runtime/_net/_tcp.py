"""TCP clients and listeners on the operation tree.

Connecting: Happy Eyeballs
--------------------------
A name often resolves to several addresses (IPv6 and IPv4, several hosts),
and some of them may be dead: an IPv6 route that drops packets makes a plain
"try each address in turn" wait for the OS's connect timeout, often a
minute, before it tries the working IPv4 address. ``open_tcp_stream``
follows RFC 8305 instead, as trio does: the addresses are interleaved by
family, and attempt *i+1* starts ``happy_eyeballs_delay`` seconds after
attempt *i*, or at once when attempt *i* fails. The first attempt to
connect wins; the others are cancelled.

The attempts are children of one scope, so "cancel the losers" is the
tree's own rule: the winner cancels the scope, which cancels every other
attempt (each closes its half-open socket on the way out) and the staggering
loop. A cancel of the caller reaches all of them the same way. When every
attempt fails, one ``OSError`` lists each address and why it failed.

Arguments first, sockets after. Every argument (the port, through
``_dns.check_port``; the ``ssl_context`` and ``server_hostname``, through
``_tls_checks``) is checked before a socket exists. Once one is connected,
every error on the way to the caller (wrapping it, the TLS handshake, a
cancel) closes it before it propagates: a caller that gets an exception
holds no connection.

The servers built on these listeners (``serve_listeners``, ``serve_tcp``)
are in ``_serve``.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading
from typing import TYPE_CHECKING, Any, final, overload

from ...operations import AsyncOperation
from ...platform import check_timeout
from .. import Event, readable, scope, select, sleep, writable
from . import _dns
from ._socket_file import forget_socket_file
from ._stream_api import PASS, AsyncResource, ConflictGuard, closed_error, closed_under_error
from ._streams import SocketStream, close_socket, wait_ready
from ._tls import TLSStream
from ._tls_checks import check_ssl_context

if TYPE_CHECKING:
    import ssl

__all__ = [
    "SocketListener",
    "check_backlog",
    "connect_socket",
    "open_tcp_listeners",
    "open_tcp_stream",
]

# accept() failing for one connection that died in the queue: take the next.
_IGNORED_ACCEPT_ERRNOS = frozenset(
    getattr(errno, name)
    for name in (
        "ECONNABORTED",
        "EPROTO",
        "ENETDOWN",
        "ENOPROTOOPT",
        "EHOSTDOWN",
        "ENONET",
        "EHOSTUNREACH",
        "EOPNOTSUPP",
        "ENETUNREACH",
    )
    if hasattr(errno, name)
)
_IN_PROGRESS = frozenset({errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN})


def check_backlog(backlog: object, call: str) -> int:
    """The accept queue length to pass to ``listen()``: ``SOMAXCONN`` for None."""
    if backlog is None:
        return socket.SOMAXCONN
    if isinstance(backlog, bool) or not isinstance(backlog, int):
        raise TypeError(
            f"{call}(backlog=...) needs an int, got {type(backlog).__name__}; "
            "pass a queue length, or None for the OS maximum"
        )
    if backlog < 0:
        raise ValueError(
            f"{call}(backlog={backlog}) needs an int of 0 or more; pass None for the OS maximum"
        )
    # As trio does: the kernel caps it anyway, and listen() overflows past an int.
    return min(backlog, 0xFFFF)


# -- connecting ------------------------------------------------------------------


async def connect_socket(target: tuple[Any, ...]) -> socket.socket:
    """Connect a non-blocking socket to one ``getaddrinfo`` entry.

    Raises:
        OSError: the connection failed (``ConnectionRefusedError`` when
            nobody listens).
        Cancelled: the half-open socket is closed.
    """
    family, kind, proto, _, address = target
    sock = socket.socket(family, kind, proto)
    try:
        sock.setblocking(False)
        code = sock.connect_ex(address)
        if code in _IN_PROGRESS:
            await writable(sock)
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            raise OSError(code, os.strerror(code))
    except BaseException:
        sock.close()
        raise
    return sock


def _interleave(targets: list[Any]) -> list[Any]:
    """Alternate address families, starting with the first one (RFC 8305 §4)."""
    by_family: dict[int, list[Any]] = {}
    for target in targets:
        by_family.setdefault(target[0], []).append(target)
    queues = list(by_family.values())
    ordered: list[Any] = []
    while queues:
        for queue in queues:
            ordered.append(queue.pop(0))
        queues = [queue for queue in queues if queue]
    return ordered


def _all_failed(host: object, port: int, errors: list[tuple[Any, OSError]]) -> OSError:
    lines = "; ".join(f"{address[0]} port {address[1]}: {exc}" for address, exc in errors)
    codes = {exc.errno for _, exc in errors}
    code = codes.pop() if len(codes) == 1 else None
    cls = ConnectionRefusedError if code == errno.ECONNREFUSED else OSError
    what = "the only address" if len(errors) == 1 else f"all {len(errors)} addresses"
    error = cls(code, f"cannot connect to {host}:{port}: {what} failed ({lines})")
    error.__cause__ = ExceptionGroup("connection attempts", [exc for _, exc in errors])
    return error


async def _happy_eyeballs(
    targets: list[Any], delay: float | None, host: object, port: int
) -> socket.socket:
    winner: list[socket.socket] = []
    errors: list[tuple[Any, OSError]] = []
    lock = threading.Lock()

    async def attempt(target: Any, failed: Event, race: AsyncOperation) -> None:
        try:
            sock = await connect_socket(target)
        except OSError as exc:
            with lock:
                errors.append((target[4], exc))
            failed.set()
            return
        with lock:
            lost = bool(winner)
            if not lost:
                winner.append(sock)
        if lost:
            sock.close()
        else:
            race.cancel("another address connected first")

    try:
        async with scope(name=f"connect to {host}:{port}") as race:
            for index, target in enumerate(targets):
                failed = Event()
                race.spawn(attempt, target, failed, race, name=f"connect to {target[4][0]}")
                if index == len(targets) - 1:
                    break
                if delay is None:
                    await failed.wait_async()
                else:
                    await select(failed.wait_async(), sleep(delay))
    except BaseException:
        for sock in winner:
            sock.close()
        raise
    if winner:
        return winner[0]
    if len(errors) < len(targets):
        # Some attempts ended cancelled, not failed: the caller was
        # cancelled while the block had already finished. Leave here.
        await PASS
    raise _all_failed(host, port, errors)


# The overloads tell the two results apart: TLS only with an ssl_context.
@overload
async def open_tcp_stream(
    host: str | bytes,
    port: int,
    *,
    ssl_context: None = None,
    server_hostname: None = None,
    happy_eyeballs_delay: float | None = 0.25,
) -> SocketStream: ...


@overload
async def open_tcp_stream(
    host: str | bytes,
    port: int,
    *,
    ssl_context: ssl.SSLContext,
    server_hostname: str | None = None,
    happy_eyeballs_delay: float | None = 0.25,
) -> TLSStream: ...


@overload
async def open_tcp_stream(
    host: str | bytes,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    happy_eyeballs_delay: float | None = 0.25,
) -> SocketStream | TLSStream: ...


async def open_tcp_stream(
    host: str | bytes,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    happy_eyeballs_delay: float | None = 0.25,
) -> SocketStream | TLSStream:
    """Connect to ``host``:``port`` over TCP; with ``ssl_context``, over TLS.

    Every address the name resolves to is tried with Happy Eyeballs: the
    next attempt starts ``happy_eyeballs_delay`` seconds after the previous
    one (at once if it fails), the first to connect wins and the others are
    cancelled. ``TCP_NODELAY`` is set. With ``ssl_context``, the TLS
    handshake is done before returning, checking the certificate against
    ``server_hostname`` (``host`` by default).

    A cancellation point; a cancel closes every half-open socket.

    Args:
        host: a name or a numeric address.
        port: the port.
        ssl_context: wrap the connection in TLS with this context.
        server_hostname: the name the server's certificate must match
            (and the SNI sent); defaults to ``host``.
        happy_eyeballs_delay: seconds between attempts; None tries one
            address at a time.

    Returns:
        A ``SocketStream``, or a ``TLSStream`` with ``ssl_context``.

    Raises:
        OSError: the name does not resolve (``socket.gaierror``), or every
            address failed (``ConnectionRefusedError`` when each refused);
            the message lists each address and its error.
        ssl.SSLError: the TLS handshake failed, e.g. the certificate is not
            trusted or does not match ``server_hostname``.
        TypeError, ValueError: a bad argument, refused before connecting
            (``ssl_context`` not an ``ssl.SSLContext``, or a server-side
            one; a port outside 0..65535...).
        Cancelled: the task was cancelled.
    """
    if not isinstance(host, str | bytes):
        raise TypeError(
            f"open_tcp_stream() needs a str host, got {type(host).__name__}; "
            "pass a name or an address such as '127.0.0.1'"
        )
    _dns.check_port(port, "open_tcp_stream()")
    if server_hostname is not None and ssl_context is None:
        raise ValueError(
            "open_tcp_stream(server_hostname=...) only applies to TLS; pass ssl_context too"
        )
    if ssl_context is not None:
        check_ssl_context(ssl_context, server_side=False, what="open_tcp_stream()")
        if server_hostname is not None and not isinstance(server_hostname, str):
            raise TypeError(
                "open_tcp_stream() needs a str as 'server_hostname', got "
                f"{type(server_hostname).__name__}; pass the name the certificate is for"
            )
    delay = check_timeout(happy_eyeballs_delay, "open_tcp_stream(happy_eyeballs_delay=...)")
    # getaddrinfo raises rather than answer nothing.
    targets = _interleave(await _dns.getaddrinfo(host, port, type=socket.SOCK_STREAM))
    if len(targets) == 1:
        try:
            sock = await connect_socket(targets[0])
        except OSError as exc:
            raise _all_failed(host, port, [(targets[0][4], exc)]) from None
    else:
        sock = await _happy_eyeballs(targets, delay, host, port)
    # From here on the socket is ours to close on any error, a cancel included.
    try:
        stream = SocketStream(sock)
        if ssl_context is None:
            return stream
        name = server_hostname
        if name is None:
            name = host.decode() if isinstance(host, bytes) else host
        tls = TLSStream.wrap(stream, ssl_context=ssl_context, server_hostname=name)
        await tls.do_handshake()
    except BaseException:
        close_socket(sock)
        raise
    return tls


# -- listening -------------------------------------------------------------------


@final
class SocketListener(AsyncResource):
    """A listening stream socket; ``accept()`` gives a ``SocketStream``.

    Made by ``open_tcp_listeners`` and ``open_unix_listener``, or by hand
    from a bound, listening ``socket.socket`` (which it then owns).
    """

    __slots__ = ("_closed", "_guard", "_socket")

    def __init__(self, sock: socket.socket) -> None:
        if not isinstance(sock, socket.socket):
            raise TypeError(
                f"SocketListener() needs a socket.socket, got {type(sock).__name__}; "
                "use open_tcp_listeners() instead"
            )
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 0:
            raise ValueError(
                f"SocketListener() needs a listening socket, and {sock!r} is not listening; "
                "call sock.listen() first"
            )
        sock.setblocking(False)
        self._socket = sock
        self._closed = False
        self._guard = ConflictGuard(
            "another task is already accepting on this listener; accept from one task"
        )

    @property
    def socket(self) -> socket.socket:
        """The listening socket; ``socket.getsockname()`` gives the port."""
        return self._socket

    async def accept(self) -> SocketStream:
        """Wait for a connection and return it as a stream.

        A connection that died while it queued is skipped. A cancellation
        point; a cancel accepts nothing.

        Raises:
            ClosedResourceError: the listener was closed.
            BusyResourceError: another task is accepting on this listener.
            OSError: ``accept`` failed, e.g. ``EMFILE`` (out of file
                descriptors).
            Cancelled: the task was cancelled.
        """
        with self._guard:
            self._check_open()
            await PASS
            sock = self._socket
            while True:
                try:
                    conn, _ = sock.accept()
                except BlockingIOError:
                    await wait_ready(readable(sock), self._is_closed, "listener")
                    self._check_open()
                    continue
                except OSError as exc:
                    if self._is_closed():  # by another thread, or behind the listener's back
                        raise closed_under_error("listener") from None
                    if exc.errno in _IGNORED_ACCEPT_ERRNOS:
                        continue
                    raise
                return SocketStream(conn)

    def _is_closed(self) -> bool:
        return self._closed or self._socket.fileno() < 0

    def _check_open(self) -> None:
        if self._closed:
            raise closed_error("listener")

    def close(self) -> None:
        """Stop listening at once; a task in ``accept()`` gets ``ClosedResourceError``."""
        if self._closed:
            return
        self._closed = True
        sock = self._socket
        if sock.family == socket.AF_UNIX:
            forget_socket_file(sock)
        close_socket(sock)

    def __repr__(self) -> str:
        if self._closed:
            return "<SocketListener closed>"
        return f"<SocketListener {self._socket.getsockname()!r}>"


async def open_tcp_listeners(
    port: int, *, host: str | bytes | None = None, backlog: int | None = None
) -> list[SocketListener]:
    """Listen on ``port`` at every address of ``host`` (every interface if None).

    One listener per address (an IPv4 and an IPv6 one for ``host=None``).
    With ``port=0`` the OS picks a free port, and every listener gets the
    same one. ``SO_REUSEADDR`` is set; IPv6 listeners are IPv6-only.

    Args:
        port: the port, or 0 for any free port.
        host: a name or address to listen on; None for every interface.
        backlog: the accept queue length; None for the OS maximum.

    Returns:
        The listeners; ``listeners[0].socket.getsockname()[1]`` is the port.

    Raises:
        OSError: the address is in use, or cannot be resolved.
        TypeError, ValueError: ``port`` or ``backlog`` is not an int in range.
        Cancelled: the task was cancelled; nothing is left open.
    """
    _dns.check_port(port, "open_tcp_listeners()")
    backlog = check_backlog(backlog, "open_tcp_listeners")
    infos = await _dns.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    listeners: list[SocketListener] = []
    seen: set[tuple[int, Any]] = set()
    chosen = port
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            try:
                sock = socket.socket(family, kind, proto)
            except OSError as exc:
                if exc.errno == errno.EAFNOSUPPORT and (listeners or host is None):
                    continue  # this machine has no such family (IPv6 off, say)
                raise
            try:
                if sys.platform != "win32":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                if chosen:
                    address = (address[0], chosen, *address[2:])
                try:
                    sock.bind(address)
                except OSError as exc:
                    if (
                        host is None
                        and family == socket.AF_INET6
                        and exc.errno
                        in (
                            errno.EADDRNOTAVAIL,
                            errno.EAFNOSUPPORT,
                        )
                    ):
                        sock.close()
                        continue
                    raise OSError(
                        exc.errno,
                        f"cannot listen on {address[0]} port {address[1]}: {exc.strerror}",
                    ) from None
                sock.listen(backlog)
                chosen = sock.getsockname()[1]
                listener = SocketListener(sock)
            except BaseException:
                sock.close()
                raise
            listeners.append(listener)
        if not listeners:
            raise OSError(
                f"open_tcp_listeners() found no address to listen on for host {host!r} "
                f"port {port}; pass a host this machine has"
            )
    except BaseException:
        for listener in listeners:
            listener.close()
        raise
    await PASS
    return listeners
