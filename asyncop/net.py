"""Socket I/O for coroutine operations, on non-blocking sockets.

``Stream`` (with ``ReceiveStream`` and ``SendStream``) is what every byte
stream of asyncop is: ``SocketStream``, ``TLSStream`` and the pipes of
``asyncop.process`` share its methods, errors and cancellation rules, so a
function annotated ``stream: Stream`` takes any of them.

Each helper tries the operation first and, on ``BlockingIOError``, awaits
``readable``/``writable`` and tries again (a wake may be spurious). They are
cancellation points at every wait. ``recv_async`` waits first instead on a
socket whose last read had to wait (the peer of a request/response exchange
has rarely answered yet), and it yields to the other tasks once in a while on
a socket that always has data.

Errors are the standard ones, with a message that says what to do:
``ConnectionRefusedError`` when nobody listens, ``ConnectionResetError``
when the peer reset the connection, ``ClosedResourceError`` for a socket that
is closed (locally, or by ``notify_closing`` while a task waited).

Cancellation and partial transfers:

- ``recv_async``: a cancel while waiting takes nothing from the socket;
  bytes are only taken by a ``recv`` that returns them to the caller.
- ``send_all_async``: a cancel while waiting for room leaves a prefix of the
  data sent and the rest unsent; the ``Cancelled`` carries a note saying how
  many bytes went out. The stream is then at an unknown message boundary:
  close the socket rather than send on it again.
"""

from __future__ import annotations

import errno
import socket
from typing import Any

from ._exports import publish as _publish
from .operations import Cancelled, ClosedResourceError
from .runtime import MAX_READ, checkpoint, readable, spawn_blocking, writable
from .runtime import DelimiterNotFound as DelimiterNotFound
from .runtime import IncompleteRead as IncompleteRead
from .runtime import ReceiveStream as ReceiveStream
from .runtime import SendStream as SendStream
from .runtime import SocketListener as SocketListener
from .runtime import SocketStream as SocketStream
from .runtime import Stream as Stream
from .runtime import TLSStream as TLSStream
from .runtime import UDPSocket as UDPSocket
from .runtime import check_port as _check_port
from .runtime import getaddrinfo as getaddrinfo
from .runtime import open_tcp_listeners as open_tcp_listeners
from .runtime import open_tcp_stream as open_tcp_stream
from .runtime import open_udp_socket as open_udp_socket
from .runtime import open_unix_listener as open_unix_listener
from .runtime import open_unix_stream as open_unix_stream
from .runtime import serve_listeners as serve_listeners
from .runtime import serve_tcp as serve_tcp
from .runtime import serve_unix as serve_unix

__all__ = [
    "DelimiterNotFound",
    "IncompleteRead",
    "ReceiveStream",
    "SendStream",
    "SocketListener",
    "SocketStream",
    "Stream",
    "TLSStream",
    "UDPSocket",
    "accept_async",
    "connect_async",
    "getaddrinfo",
    "open_tcp_listeners",
    "open_tcp_stream",
    "open_udp_socket",
    "open_unix_listener",
    "open_unix_stream",
    "recv_async",
    "send_all_async",
    "serve_listeners",
    "serve_tcp",
    "serve_unix",
]


# How recv_async() read each socket lately, by descriptor number: a count
# >= 0 is the reads in a row that found data at once (every _FAIR_STREAK-th
# yields first, so that a socket that always has data cannot hold the worker);
# a count < 0 means the last read that tried at once found nothing, and -count
# the reads since then, which wait for readiness before they read: in a
# request/response exchange the answer has rarely come yet, and a read that
# fails costs more than the wait it comes back to. Every _PROBE_EVERY-th of
# them tries at once again, to notice a socket that now has data all along.
# A number reused by a new socket inherits a hint, never a wrong result: a
# wait on a socket that has data ends at once.
_streaks: dict[int, int] = {}
_FAIR_STREAK = 16
_PROBE_EVERY = 16


def _check_open(sock: socket.socket, what: str, arg: str = "sock") -> None:
    """Refuse what is not a socket, or a closed one; make an open one non-blocking.

    A blocking socket would block the worker inside ``recv``/``send``; the
    helpers only work on non-blocking ones, so they switch it themselves.
    """
    if not isinstance(sock, socket.socket):
        raise TypeError(
            f"{what} needs a socket.socket as '{arg}', got {type(sock).__name__}; pass a "
            "socket, e.g. one from connect_async() or accept_async()"
        )
    if sock.fileno() < 0:
        raise ClosedResourceError(f"{what} on a closed socket; open a new connection instead")
    if sock.getblocking():
        sock.setblocking(False)


def _numeric_host(host: str) -> bool:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
            return True
        except OSError:
            continue
    return False


async def connect_async(host: str, port: int) -> socket.socket:
    """Open a TCP connection to ``(host, port)``; returns a non-blocking socket.

    A hostname is resolved in a blocking-call thread; a numeric address is not.

    Raises:
        ConnectionRefusedError: nobody listens at that address.
        OSError: the address cannot be resolved or reached.
        Cancelled: the task was cancelled; the half-open socket is closed.
        TypeError: ``host`` is not a str or ``port`` not an int.
        ValueError: ``port`` is outside 0..65535.
    """
    if not isinstance(host, str):
        raise TypeError(
            f"connect_async() needs a host name or address as 'host', got "
            f"{type(host).__name__}; pass a str such as '127.0.0.1' or 'example.com'"
        )
    _check_port(port, "connect_async()")
    if _numeric_host(host):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        infos: list[Any] = [(family, socket.SOCK_STREAM, 0, "", (host, port))]
    else:
        infos = await spawn_blocking(socket.getaddrinfo, host, port, 0, socket.SOCK_STREAM)
    last: OSError | None = None
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            code = sock.connect_ex(address)
            if code in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
                await writable(sock)
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code == 0:
                return sock
            if code == errno.ECONNREFUSED:
                last = ConnectionRefusedError(
                    code,
                    f"connection to {host}:{port} refused: nobody listens there; "
                    "start the server first or check the port",
                )
            else:
                last = OSError(
                    code, f"cannot connect to {host}:{port}: {errno.errorcode.get(code, code)}"
                )
        except BaseException:
            sock.close()
            raise
        sock.close()
    assert last is not None
    raise last


async def accept_async(listener: socket.socket) -> tuple[socket.socket, Any]:
    """Accept a connection on a listening socket, like ``socket.accept()``.

    The listener is switched to non-blocking mode; the accepted socket is
    non-blocking too.

    Returns:
        ``(sock, addr)``.

    Raises:
        ClosedResourceError: the listener is closed.
        Cancelled: the task was cancelled while waiting; nothing was accepted.
        TypeError: ``listener`` is not a socket.
        OSError: ``accept`` failed, e.g. ``EMFILE`` (out of file descriptors),
            or ``listener`` is not listening (``listen()`` was not called, or
            it is not a stream socket): then the message says so, with the
            OS's errno (``EINVAL``, ``EOPNOTSUPP``).
    """
    _check_open(listener, "accept_async()", "listener")
    while True:
        try:
            sock, addr = listener.accept()
        except BlockingIOError:
            await readable(listener)
            _check_open(listener, "accept_async()")
            continue
        except OSError as exc:
            if _listening(listener):
                raise
            # An OSError still, with the OS's errno, as asyncio's sock_accept
            # raises here; its message says what to do.
            raise OSError(
                exc.errno,
                f"accept_async() needs a listening socket, and {listener!r} is not "
                "listening; call listener.listen() first, on a stream socket",
            ) from None
        sock.setblocking(False)
        return sock, addr


def _listening(sock: socket.socket) -> bool:
    """Whether ``sock`` listens (True where the OS cannot tell: the error stands)."""
    try:
        return sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) != 0
    except OSError:
        return True


async def recv_async(sock: socket.socket, n: int) -> bytes:
    """Receive up to ``n`` bytes (16 MiB at most); ``b""`` means the peer closed its side.

    Raises:
        ClosedResourceError: the socket is closed.
        ConnectionResetError: the peer reset the connection.
        Cancelled: the task was cancelled while waiting or yielding; nothing was taken.
        TypeError: ``sock`` is not a socket, or ``n`` not an int.
        ValueError: ``n`` is less than 1.
    """
    if type(sock) is not socket.socket or sock.fileno() < 0 or sock.timeout != 0.0:
        _check_open(sock, "recv_async()")  # (the checks, inline for an open non-blocking socket)
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(
            f"recv_async() needs a byte count as 'n', got {type(n).__name__}; pass an int "
            "such as 65536"
        )
    if n < 1:
        raise ValueError(f"recv_async() got n={n}; pass 1 or more bytes to receive")
    fd = sock.fileno()
    streak = _streaks.get(fd, 0)
    if streak >= _FAIR_STREAK:
        streak = 0
        await checkpoint()  # data all along: let the other tasks and the timers run
        if sock.fileno() < 0 or sock.timeout != 0.0:
            _check_open(sock, "recv_async()")
    elif streak < 0:
        if streak > -_PROBE_EVERY:
            _streaks[fd] = streak - 1
            await readable(sock)
            if sock.fileno() < 0 or sock.timeout != 0.0:
                _check_open(sock, "recv_async()")
        else:
            streak = 0  # a probe: this read tries at once
    while True:
        try:
            data = sock.recv(min(n, MAX_READ))  # (at most: a huge n allocates nothing huge)
        except BlockingIOError:
            _streaks[fd] = streak = -1
            await readable(sock)
            if sock.fileno() < 0 or sock.timeout != 0.0:
                _check_open(sock, "recv_async()")
            continue
        except ConnectionResetError as exc:
            raise ConnectionResetError(
                exc.errno, "the peer reset the connection; reconnect to go on"
            ) from None
        if streak >= 0:
            _streaks[fd] = streak + 1
        return data


async def send_all_async(sock: socket.socket, data: bytes | bytearray | memoryview) -> None:
    """Send all of ``data``, waiting for room as needed.

    Raises:
        ClosedResourceError: the socket is closed.
        ConnectionResetError, BrokenPipeError: the peer is gone.
        Cancelled: the task was cancelled while waiting; a prefix of ``data``
            was sent (the exception's note says how many bytes).
        TypeError: ``sock`` is not a socket, or ``data`` not bytes-like.
    """
    if type(sock) is not socket.socket or sock.fileno() < 0 or sock.timeout != 0.0:
        _check_open(sock, "send_all_async()")
    total = 0
    if type(data) is bytes:
        # The common case, a message the socket takes whole: no view.
        size = len(data)
        if not size:
            return
        try:
            total = sock.send(data)
        except BlockingIOError:
            pass
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise _gone(exc, 0, size) from None
        if total == size:
            return
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(
            f"send_all_async() needs bytes-like 'data', got {type(data).__name__}; pass "
            "bytes, bytearray or memoryview (encode a str first, e.g. text.encode())"
        ) from None
    # A strided view cannot be sent as it is: send a copy of the bytes it shows.
    view = memoryview(view.tobytes()) if not view.c_contiguous else view.cast("B")
    size = len(view)
    while total < size:
        try:
            total += sock.send(view[total:])
        except BlockingIOError:
            try:
                await writable(sock)
            except Cancelled as exc:
                exc.add_note(f"send_all_async sent {total} of {size} bytes before the cancel")
                raise
            _check_open(sock, "send_all_async()")
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise _gone(exc, total, size) from None


def _gone(exc: OSError, total: int, size: int) -> OSError:
    """The error for a peer that went away, saying how much of the data went out."""
    return type(exc)(
        exc.errno, f"the peer is gone after {total} of {size} bytes; reconnect to go on"
    )


_publish("asyncop.net", globals(), __all__)
