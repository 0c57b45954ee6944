"""A tiny HTTP/1.1 client over ``asyncop.net`` streams: one GET per connection.

``http_get`` opens a stream with ``open_tcp_stream`` (over TLS when given
an ``ssl_context``), sends the request line with ``Host`` and
``Connection: close``, and reads the status line, the headers and a
``Content-Length`` body. ``fetch`` does the same and raises ``HTTPError`` for
any status but 200. Both are coroutine functions, to be awaited inside an
asyncop coroutine operation; every wait is a cancellation point, and a
cancelled request closes its stream on the way out.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from asyncop.net import open_tcp_stream

from .wire import ProtocolError, encode_message, parse_head, read_body, read_head

__all__ = ["HTTPError", "Response", "fetch", "http_get"]


@dataclass(frozen=True)
class Response:
    """A response: status code, reason phrase, headers (names lower-cased), body."""

    status: int
    reason: str
    headers: dict[str, str]
    body: bytes


class HTTPError(Exception):
    """The server answered with a status other than 200."""

    def __init__(self, status: int, reason: str, path: str) -> None:
        super().__init__(f"HTTP {status} {reason} from {path}")
        self.status = status
        self.path = path


async def http_get(
    host: str, port: int, path: str, *, ssl_context: ssl.SSLContext | None = None
) -> Response:
    """Send ``GET path`` to ``host:port`` and return the response.

    With ``ssl_context`` the request goes over TLS (HTTPS), and the server's
    certificate must be valid for ``host``.

    Raises:
        ConnectionRefusedError: nobody listens at ``host:port``.
        ssl.SSLCertVerificationError: the certificate is not trusted.
        ProtocolError: the response is not well-formed HTTP/1.1.
        Cancelled: the calling operation was cancelled; the stream is closed.
    """
    async with await open_tcp_stream(host, port, ssl_context=ssl_context) as stream:
        headers = {"Host": f"{host}:{port}", "Connection": "close"}
        await stream.send_all(encode_message(f"GET {path} HTTP/1.1", headers))
        head = await read_head(stream)
        if head is None:
            raise ProtocolError(f"{host}:{port} closed the connection without answering {path}")
        status_line, response_headers = parse_head(head)
        status, reason = _parse_status_line(status_line)
        body = await read_body(stream, response_headers.get("content-length"))
    return Response(status, reason, response_headers, body)


async def fetch(
    host: str, port: int, path: str, *, ssl_context: ssl.SSLContext | None = None
) -> bytes:
    """GET ``path`` and return the body of a 200 response.

    Raises:
        HTTPError: the status was not 200, for example 503 or 404.
    """
    response = await http_get(host, port, path, ssl_context=ssl_context)
    if response.status != 200:
        raise HTTPError(response.status, response.reason, path)
    return response.body


def _parse_status_line(line: str) -> tuple[int, str]:
    version, _, rest = line.partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise ProtocolError(f"malformed status line {line!r}")
    return int(code), reason
