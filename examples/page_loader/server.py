"""A small HTTP/1.1 server for the site, written with asyncop itself.

``serve(listener, site)`` runs ``asyncop.net.serve_listeners``: it accepts
connections until cancelled and hands each one, as a stream, to a child
operation running ``handle_connection``, so connections are served
concurrently, and a connection that fails is logged without stopping the
server. Each child reads one request, waits the resource's latency with
``asyncop.sleep``, answers, and closes (``Connection: close``):

- 200 with a ``Content-Length`` body for a known path;
- 503 when the site injects a failure for that path;
- 404 for an unknown path, 405 for a method other than GET, 400 for garbage.

``running_server(site)`` runs all of this on its own ``asyncop.Runtime`` on
an ephemeral port of 127.0.0.1: the loader lives on another runtime, so
cancelling the loader's tree never touches the server. With an
``ssl_context`` it serves HTTPS: every stream is a ``TLSStream``.
"""

from __future__ import annotations

import functools
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import Any

import asyncop
from asyncop.net import SocketListener, serve_listeners

from .pages import Site
from .wire import PEER_ERRORS, ProtocolError, encode_message, parse_head, read_head

__all__ = ["handle_connection", "running_server", "serve"]


@contextmanager
def running_server(
    site: Site, *, workers: int = 2, ssl_context: ssl.SSLContext | None = None
) -> Iterator[tuple[str, int]]:
    """Serve ``site`` on 127.0.0.1 in the background; yields ``(host, port)``.

    Leaving the block shuts the server's runtime down, which cancels
    ``serve`` and every connection still being handled, and joins its threads.
    """
    listener = SocketListener(socket.create_server(("127.0.0.1", 0)))
    with listener.socket, asyncop.Runtime(workers, name="page-server") as runtime:
        runtime.spawn(serve, listener, site, ssl_context, name="serve")
        host, port = listener.socket.getsockname()[:2]
        yield host, port


async def serve(
    listener: SocketListener, site: Site, ssl_context: ssl.SSLContext | None = None
) -> None:
    """Accept connections until cancelled; each is handled by a child operation.

    A connection that fails is logged and does not stop the others.
    Cancelling ``serve`` cancels them all.
    """
    handler = functools.partial(handle_connection, site=site)
    await serve_listeners(handler, [listener], ssl_context=ssl_context)


async def handle_connection(stream: Any, site: Site) -> None:
    """Answer one request on ``stream``; the server closes it afterwards.

    A client that goes away early (it was cancelled, say) is not an error:
    the answer is dropped.
    """
    try:
        head = await read_head(stream)
        if head is None:
            return
        response = await respond(site, head)
        await stream.send_all(response)
    except PEER_ERRORS:
        return


async def respond(site: Site, head: bytes) -> bytes:
    """Build the response to a request head, after the resource's latency."""
    try:
        request_line, _ = parse_head(head)
        method, path, _version = request_line.split(" ")
    except (ProtocolError, ValueError):
        return _response(HTTPStatus.BAD_REQUEST, "malformed request\n")
    if method != "GET":
        return _response(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} is not served here\n")
    resource = site.lookup(path)
    if resource is None:
        return _response(HTTPStatus.NOT_FOUND, f"no such resource: {path}\n")
    await asyncop.sleep(resource.latency)
    if resource.fails:
        return _response(HTTPStatus.SERVICE_UNAVAILABLE, f"{path} failed (injected)\n")
    return _response(HTTPStatus.OK, resource.content, resource.content_type)


def _response(
    status: HTTPStatus, body: str | bytes, content_type: str = "text/plain; charset=utf-8"
) -> bytes:
    data = body.encode() if isinstance(body, str) else body
    headers = {
        "Content-Type": content_type,
        "Content-Length": str(len(data)),
        "Connection": "close",
    }
    return encode_message(f"HTTP/1.1 {status.value} {status.phrase}", headers, data)
