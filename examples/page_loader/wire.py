"""HTTP/1.1 framing shared by the client and the server: read a head, read a body, encode.

Only what the page loader needs: a start line, headers, and a body whose
length is given by ``Content-Length`` (or, for a response without one, by
the peer closing the connection). Every read goes through
``asyncop.net.recv_async``, so every wait for bytes is a cancellation point.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from asyncop.net import recv_async

__all__ = ["MAX_HEAD", "ProtocolError", "SocketReader", "encode_message", "parse_head"]

MAX_HEAD = 16 * 1024
_CHUNK = 64 * 1024


class ProtocolError(Exception):
    """The peer sent something that is not the HTTP/1.1 this module speaks."""


class SocketReader:
    """Buffered reads from a non-blocking socket, for coroutine operations."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()
        self._eof = False

    async def _fill(self) -> bool:
        """Read one more chunk into the buffer; False once the peer has closed."""
        if self._eof:
            return False
        chunk = await recv_async(self._sock, _CHUNK)
        if not chunk:
            self._eof = True
            return False
        self._buffer += chunk
        return True

    async def read_head(self) -> bytes | None:
        """Read up to the blank line that ends a message head; returns the head.

        Returns None when the peer closed the connection before sending a
        byte. A cancellation point.

        Raises:
            ProtocolError: the head is longer than ``MAX_HEAD``, or the
                connection closed in the middle of it.
        """
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end >= 0:
                head = bytes(self._buffer[:end])
                del self._buffer[: end + 4]
                return head
            if len(self._buffer) > MAX_HEAD:
                raise ProtocolError(f"message head longer than {MAX_HEAD} bytes")
            if not await self._fill():
                if self._buffer:
                    raise ProtocolError("connection closed in the middle of a message head")
                return None

    async def read_exactly(self, size: int) -> bytes:
        """Read exactly ``size`` bytes. A cancellation point.

        Raises:
            ProtocolError: the connection closed before ``size`` bytes came.
        """
        while len(self._buffer) < size:
            if not await self._fill():
                raise ProtocolError(
                    f"connection closed after {len(self._buffer)} of {size} body bytes"
                )
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def read_to_end(self) -> bytes:
        """Read until the peer closes the connection. A cancellation point."""
        while await self._fill():
            pass
        data = bytes(self._buffer)
        self._buffer.clear()
        return data


def parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    """Split a message head into its start line and headers (names lower-cased).

    Raises:
        ProtocolError: a header line has no colon, or the head is not ASCII.
    """
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise ProtocolError("message head is not ASCII") from None
    start, *lines = text.split("\r\n")
    headers: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise ProtocolError(f"malformed header line {line!r}")
        headers[name.strip().lower()] = value.strip()
    return start, headers


def encode_message(start: str, headers: Mapping[str, str], body: bytes = b"") -> bytes:
    """Encode a start line, headers and a body as one HTTP/1.1 message."""
    lines = [start, *(f"{name}: {value}" for name, value in headers.items()), "", ""]
    return "\r\n".join(lines).encode("ascii") + body
