"""A tiny HTTP/1.1 client over ``asyncop.net``: one GET per connection.

``http_get`` connects, sends the request line with ``Host`` and
``Connection: close``, and reads the status line, the headers and a
``Content-Length`` body. ``fetch`` does the same and raises ``HTTPError`` for
any status but 200. Both are coroutine functions, to be awaited inside an
asyncop coroutine operation; every wait is a cancellation point, and a
cancelled request closes its socket on the way out.
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncop.net import connect_async, send_all_async

from .wire import ProtocolError, SocketReader, encode_message, parse_head

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


async def http_get(host: str, port: int, path: str) -> Response:
    """Send ``GET path`` to ``host:port`` and return the response.

    Raises:
        ConnectionRefusedError: nobody listens at ``host:port``.
        ProtocolError: the response is not well-formed HTTP/1.1.
        Cancelled: the calling operation was cancelled; the socket is closed.
    """
    sock = await connect_async(host, port)
    with sock:
        headers = {"Host": f"{host}:{port}", "Connection": "close"}
        await send_all_async(sock, encode_message(f"GET {path} HTTP/1.1", headers))
        reader = SocketReader(sock)
        head = await reader.read_head()
        if head is None:
            raise ProtocolError(f"{host}:{port} closed the connection without answering {path}")
        status_line, response_headers = parse_head(head)
        status, reason = _parse_status_line(status_line)
        length = response_headers.get("content-length")
        if length is None:
            body = await reader.read_to_end()
        elif length.isdigit():
            body = await reader.read_exactly(int(length))
        else:
            raise ProtocolError(f"bad Content-Length {length!r} in the answer to {path}")
    return Response(status, reason, response_headers, body)


async def fetch(host: str, port: int, path: str) -> bytes:
    """GET ``path`` and return the body of a 200 response.

    Raises:
        HTTPError: the status was not 200, for example 503 or 404.
    """
    response = await http_get(host, port, path)
    if response.status != 200:
        raise HTTPError(response.status, response.reason, path)
    return response.body


def _parse_status_line(line: str) -> tuple[int, str]:
    version, _, rest = line.partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise ProtocolError(f"malformed status line {line!r}")
    return int(code), reason
