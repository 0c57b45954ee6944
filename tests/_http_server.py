"""A tiny HTTP/1.1 server for the client-library tests, on its own thread and asyncio loop.

It keeps connections alive, and records what a test needs to see from the
server's side: how many connections it accepted, and when each one saw its
client close (the end of file, or a reset).

Routes:

- ``GET /hello``: ``hello``;
- ``POST /echo``: the request body;
- ``GET /bytes/N``: N bytes, in one response with a Content-Length;
- ``GET /stream``: 16 KiB chunks every 10 ms, chunked, until the client leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from types import TracebackType

__all__ = ["HttpServer"]

CHUNK = 16 * 1024


class HttpServer:
    """``with HttpServer() as server:`` serves on ``server.url`` until the block ends."""

    def __init__(self) -> None:
        self.port = 0
        self.connections = 0
        # time.monotonic() when each connection saw its client leave, in order.
        self.closed_at: list[float] = []
        self.client_left = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="test-http-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> HttpServer:
        self._thread.start()
        assert self._ready.wait(10), "the test HTTP server did not start"
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        loop, stop = self._loop, self._stop
        assert loop is not None and stop is not None
        loop.call_soon_threadsafe(stop.set)
        self._thread.join(10)
        assert not self._thread.is_alive(), "the test HTTP server did not stop"

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
            server.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while await self._request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.closed_at.append(time.monotonic())
            self.client_left.set()
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False once the client has closed the connection."""
        head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
        if not head:
            return False
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:] if line)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if method == "GET" and path == "/stream":
            await self._stream(reader, writer)
            return False
        if method == "GET" and path == "/hello":
            payload = b"hello"
        elif method == "POST" and path == "/echo":
            payload = body
        elif method == "GET" and path.startswith("/bytes/"):
            payload = b"x" * int(path.removeprefix("/bytes/"))
        else:
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return True
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload)
        await writer.drain()
        return True

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Send chunks until the client leaves; its leaving is seen at once, as an end of file."""
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n" % CHUNK + b"s" * CHUNK + b"\r\n"
        eof = asyncio.ensure_future(reader.read())  # b"" (or an error) when the client leaves
        try:
            while not eof.done():
                writer.write(chunk)
                await writer.drain()
                await asyncio.wait([eof], timeout=0.01)
        except ConnectionError:
            pass
        finally:
            eof.cancel()
