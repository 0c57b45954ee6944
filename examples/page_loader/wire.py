"""HTTP/1.1 framing shared by the client and the server: read a head, encode a message.

Only what the page loader needs: a start line, headers, and a body whose
length is given by ``Content-Length`` (or, for a response without one, by
the peer closing the connection). The reading is the stream's own:
``receive_until(b"\\r\\n\\r\\n", MAX_HEAD)`` for the head and
``receive_exactly(n)`` for the body, so the bytes of the body that arrive
with the head are kept for the body read. Every wait is a cancellation point.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

from asyncop import BrokenResourceError
from asyncop.net import DelimiterNotFound, IncompleteRead

__all__ = ["MAX_HEAD", "ProtocolError", "encode_message", "parse_head", "read_body", "read_head"]

MAX_HEAD = 16 * 1024


class ProtocolError(Exception):
    """The peer sent something that is not the HTTP/1.1 this module speaks."""


# What a peer that misbehaves or vanishes mid-message looks like on a stream.
PEER_ERRORS = (ConnectionError, BrokenResourceError, ssl.SSLError, ProtocolError)


async def read_head(stream: Any) -> bytes | None:
    """Read up to the blank line that ends a message head; returns the head.

    Returns None when the peer closed the connection before sending a byte.
    A cancellation point.

    Raises:
        ProtocolError: the head is longer than ``MAX_HEAD``, or the
            connection closed in the middle of it.
    """
    try:
        return bytes(await stream.receive_until(b"\r\n\r\n", MAX_HEAD))
    except IncompleteRead as exc:
        if exc.partial:
            raise ProtocolError("connection closed in the middle of a message head") from None
        return None
    except DelimiterNotFound:
        raise ProtocolError(f"message head longer than {MAX_HEAD} bytes") from None


async def read_body(stream: Any, length: str | None) -> bytes:
    """Read a body of ``Content-Length`` bytes, or to the end of the stream without one.

    Raises:
        ProtocolError: a bad length, or the connection closed too early.
    """
    if length is None:
        return b"".join([chunk async for chunk in stream])
    if not length.isdigit():
        raise ProtocolError(f"bad Content-Length {length!r}")
    try:
        return bytes(await stream.receive_exactly(int(length)))
    except IncompleteRead as exc:
        raise ProtocolError(
            f"connection closed after {len(exc.partial)} of {length} body bytes"
        ) from None


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
