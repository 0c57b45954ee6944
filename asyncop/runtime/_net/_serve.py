"""Servers on the operation tree: ``serve_listeners``, ``serve_tcp``.

``serve_listeners`` runs one accept loop per listener and one child
operation per connection, all under one scope: cancelling the server
cancels every connection, and the server ends only when they have ended.
A handler that raises is logged on the ``asyncop.net`` logger and ends its
own connection only (the server is *supervised*); a KeyboardInterrupt or
SystemExit still stops everything. ``accept`` failing for lack of resources
(EMFILE, ENFILE, ENOBUFS, ENOMEM) is logged and retried after
``ACCEPT_BACKOFF`` seconds instead of spinning, as in trio: the condition
usually passes once some connections close.

Stopping gracefully: a server asked to stop (``cancel(grace=...)`` on it or
on an ancestor, or ``Runtime.shutdown(grace=...)``) closes its listeners at
once, so no new connection is accepted (a client's connect is refused), and
lets the running handlers finish; they see ``stop_requested()`` True, and
are cancelled if they still run when the grace runs out. A child of the
server, ``close on stop``, waits for the request beside the accept loops,
and ends with them when the listeners are closed some other way.

``task_status.started(listeners)`` is called once the listeners accept, so
``await scope.start(serve_tcp, handler, 0)`` gives the caller the listeners
(and their ports) of a server that is ready.

Every argument is checked before a listener is opened or a connection
accepted: an ``ssl_context`` that cannot serve (not an ``ssl.SSLContext``,
or a client-side one) would otherwise fail each connection in turn, logged
as if the handler had failed. With TLS, each connection's handshake has
``handshake_timeout`` seconds (``HANDSHAKE_TIMEOUT`` by default): a client
that connects and says nothing is dropped then, instead of holding its
socket (and a file descriptor) until the server stops.
"""

from __future__ import annotations

import errno
import functools
import inspect
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...operations import AsyncOperation, ClosedResourceError
from .. import TASK_STATUS_IGNORED, TaskStatus, scope, select, wait_stop_requested
from .._core._awaitables import OpWait, sleep
from ._stream_api import PASS
from ._streams import SocketStream
from ._tcp import SocketListener, open_tcp_listeners
from ._tls import TLSStream
from ._tls_checks import check_handshake_timeout, check_ssl_context

if TYPE_CHECKING:
    import ssl

__all__ = [
    "ACCEPT_BACKOFF",
    "HANDSHAKE_TIMEOUT",
    "Handler",
    "check_handler",
    "serve_listeners",
    "serve_tcp",
]

logger = logging.getLogger("asyncop.net")

ACCEPT_BACKOFF = 0.1
# accept() failing for lack of resources: back off and retry.
_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# Seconds a client has to finish its TLS handshake: ample for a slow
# network, and short enough that stalled clients cannot pile up.
HANDSHAKE_TIMEOUT = 10.0


# -- serving ---------------------------------------------------------------------

Handler = Callable[[Any], Awaitable[object]]
# Wraps an accepted stream in server-side TLS; None: plain TCP.
_Wrap = Callable[[SocketStream], TLSStream] | None


def check_handler(handler: object, what: str) -> None:
    """Refuse a handler that cannot be called, before anything is opened."""
    if not callable(handler):
        raise TypeError(
            f"{what} needs a callable handler, got {type(handler).__name__}; "
            "pass an 'async def handler(stream)'"
        )


def _checked_tls(ssl_context: object, handshake_timeout: object, what: str) -> _Wrap:
    """Check the TLS arguments of a server; the wrap for its connections."""
    limit = check_handshake_timeout(handshake_timeout, f"{what[:-2]}(handshake_timeout=...)")
    if ssl_context is None:
        return None
    context = check_ssl_context(ssl_context, server_side=True, what=what)
    # The limit is checked again by wrap(): math.inf stands for None.
    return functools.partial(
        TLSStream.wrap,
        ssl_context=context,
        server_side=True,
        handshake_timeout=math.inf if limit is None else limit,
    )


def _checked_listeners(listeners: object) -> list[SocketListener]:
    """The listeners as a list; refuses one listener alone, or what cannot accept."""
    if isinstance(listeners, SocketListener):
        raise TypeError(
            "serve_listeners() needs a list of listeners, got one SocketListener; "
            "pass [listener] instead"
        )
    try:
        items: list[SocketListener] = list(listeners)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(
            f"serve_listeners() needs a list of listeners, got {type(listeners).__name__}; "
            "pass what open_tcp_listeners() returns"
        ) from None
    for item in items:
        if not callable(getattr(item, "accept", None)):
            raise TypeError(
                f"serve_listeners() needs listeners with accept(), got {type(item).__name__}; "
                "pass what open_tcp_listeners() returns"
            )
    return items


async def _close_quietly(stream: Any) -> None:
    try:
        await stream.aclose()
    except Exception:
        pass


async def _handle(
    handler: Handler,
    stream: SocketStream,
    wrap: _Wrap,
    open_streams: set[SocketStream],
) -> None:
    peer = _peer_name(stream)
    conversation: Any = stream
    try:
        if wrap is not None:
            conversation = wrap(stream)
            try:
                await conversation.do_handshake()
            except TimeoutError:
                logger.warning(
                    "asyncop.net: closed the connection from %s: its TLS handshake did not "
                    "finish within handshake_timeout",
                    peer,
                )
                return
            except Exception as exc:
                logger.warning("asyncop.net: TLS handshake with %s failed: %s", peer, exc)
                return
        work = handler(conversation)
        if not inspect.isawaitable(work):
            raise _not_awaitable(handler, work)
        await work
    except Exception:
        logger.exception(
            "asyncop.net: the handler %r failed for the connection from %s", handler, peer
        )
    finally:
        open_streams.discard(stream)
        try:
            await _close_quietly(conversation)
        finally:
            stream.close()


def _not_awaitable(handler: Handler, work: object) -> TypeError:
    """The error for a handler that is a plain function: it ran, and gave nothing to await."""
    qualname = getattr(handler, "__qualname__", None)
    name = repr(qualname) if isinstance(qualname, str) else repr(handler)
    return TypeError(
        f"the server's handler {name} returned {type(work).__name__}, not an awaitable; "
        f"make it an 'async def {getattr(handler, '__name__', 'handler')}(stream)' function"
    )


def _peer_name(stream: SocketStream) -> str:
    try:
        peer = stream.getpeername()
    except (OSError, ClosedResourceError):
        return "a peer that already left"
    if isinstance(peer, tuple):
        return f"{peer[0]} port {peer[1]}"
    return repr(peer) if peer else "an unnamed Unix socket"


async def _accept_loop(
    listener: SocketListener,
    handler: Handler,
    server: AsyncOperation,
    wrap: _Wrap,
    open_streams: set[SocketStream],
) -> None:
    while True:
        try:
            stream = await listener.accept()
        except ClosedResourceError:
            return  # the listener was closed: stop serving it
        except OSError as exc:
            if exc.errno not in _CAPACITY_ERRNOS:
                raise
            logger.warning(
                "asyncop.net: accept() on %r failed (%s); retrying in %g s",
                listener,
                exc,
                ACCEPT_BACKOFF,
            )
            await sleep(ACCEPT_BACKOFF)
            continue
        open_streams.add(stream)
        server.spawn(
            _handle,
            handler,
            stream,
            wrap,
            open_streams,
            name=f"connection from {_peer_name(stream)}",
        )


async def _close_on_stop(listeners: list[SocketListener], loops: list[AsyncOperation]) -> None:
    """Close the listeners once the server is asked to stop; or end with the accept loops."""
    for loop in loops:
        index, _ = await select(wait_stop_requested(), OpWait(loop, as_op=True))
        if index == 0:
            logger.info(
                "asyncop.net: asked to stop: closed %s, letting the connections finish",
                ", ".join(repr(listener) for listener in listeners),
            )
            for listener in listeners:
                listener.close()
            return


async def serve_listeners(
    handler: Handler,
    listeners: Sequence[SocketListener],
    *,
    ssl_context: ssl.SSLContext | None = None,
    handshake_timeout: float | None = HANDSHAKE_TIMEOUT,
    task_status: TaskStatus[list[SocketListener]] = TASK_STATUS_IGNORED,
) -> None:
    """Accept connections on ``listeners`` and run ``handler(stream)`` for each.

    Each connection's handler runs as a child operation of the server, and
    its stream is closed when the handler returns. A handler that raises is
    logged on the ``asyncop.net`` logger and ends only its own connection.
    Cancelling the server cancels every connection. Closing every listener
    stops accepting; the call then returns once the connections have ended.
    Asking the server to stop (``cancel(grace=...)`` on it or an ancestor)
    closes the listeners at once and lets the handlers finish: they see
    ``asyncop.stop_requested()``, and the call returns once they have
    ended, or raises ``Cancelled`` if the grace runs out first. The
    listeners are closed when it returns. Every argument is checked
    before anything is accepted; a refused call leaves the listeners open.

    Args:
        handler: ``async def handler(stream)``.
        listeners: what to accept on.
        ssl_context: wrap each connection in server-side TLS; a failed
            handshake is logged and the handler is not called.
        handshake_timeout: with ``ssl_context``, the seconds each client
            has to finish its TLS handshake; a client that takes longer is
            logged and disconnected. ``math.inf`` (or None) for no limit.
        task_status: ``task_status.started(listeners)`` is called once
            the server accepts.

    Raises:
        TypeError: ``handler`` is not callable, ``ssl_context`` is not an
            ``ssl.SSLContext``, or ``listeners`` is not a list of listeners.
        ValueError: ``ssl_context`` is a client-side context
            (``PROTOCOL_TLS_CLIENT``), or ``handshake_timeout`` is not
            positive.
        Cancelled: the server was cancelled (the usual way to stop it).
    """
    check_handler(handler, "serve_listeners()")
    wrap = _checked_tls(ssl_context, handshake_timeout, "serve_listeners()")
    listeners = _checked_listeners(listeners)
    open_streams: set[SocketStream] = set()
    try:
        async with scope(name="server") as server:
            loops = [
                server.spawn(
                    _accept_loop,
                    listener,
                    handler,
                    server,
                    wrap,
                    open_streams,
                    name=f"accept on {listener!r}",
                )
                for listener in listeners
            ]
            server.spawn(_close_on_stop, listeners, loops, name="close on stop")
            task_status.started(listeners)
    finally:
        for listener in listeners:
            listener.close()
        # A connection whose operation was cancelled before it ran never
        # closed its stream.
        for stream in list(open_streams):
            stream.close()
    # A cancel that reached the children after the block had finished is
    # still the server's end: report it as one.
    await PASS


async def serve_tcp(
    handler: Handler,
    port: int,
    *,
    host: str | bytes | None = None,
    ssl_context: ssl.SSLContext | None = None,
    handshake_timeout: float | None = HANDSHAKE_TIMEOUT,
    backlog: int | None = None,
    task_status: TaskStatus[list[SocketListener]] = TASK_STATUS_IGNORED,
) -> None:
    """Serve TCP connections on ``port``: ``handler(stream)`` runs for each.

    Opens the listeners with ``open_tcp_listeners`` and serves them with
    ``serve_listeners`` (see there). Runs until cancelled, or until asked
    to stop and its handlers have finished. Every argument is checked
    before a listener is opened.

    Args:
        handler: ``async def handler(stream)``; the stream is a
            ``SocketStream``, or a ``TLSStream`` with ``ssl_context``.
        port: the port; 0 for any free port (read it from the listeners
            given to ``task_status.started``).
        host: the address to listen on; None for every interface.
        ssl_context: serve TLS with this (server-side) context.
        handshake_timeout: with ``ssl_context``, the seconds each client
            has to finish its TLS handshake before it is disconnected;
            ``math.inf`` (or None) for no limit.
        backlog: the accept queue length.
        task_status: ``task_status.started(listeners)`` is called once
            the server accepts.

    Raises:
        OSError: the port is in use.
        TypeError, ValueError: a bad argument, as for ``serve_listeners``
            and ``open_tcp_listeners``.
        Cancelled: the server was cancelled.
    """
    check_handler(handler, "serve_tcp()")
    _checked_tls(ssl_context, handshake_timeout, "serve_tcp()")
    listeners = await open_tcp_listeners(port, host=host, backlog=backlog)
    await serve_listeners(
        handler,
        listeners,
        ssl_context=ssl_context,
        handshake_timeout=handshake_timeout,
        task_status=task_status,
    )
