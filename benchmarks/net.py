"""Network servers: the ``echo`` workload (uvloop's) and ``tls`` handshakes and throughput.

``echo``: the workload of uvloop's echo benchmark. One client process
(``_echo_client``, the same for every server) keeps ``_CONNECTIONS``
connections busy for n milliseconds, each sending a 1 KiB message and
waiting for its echo before sending the next. Reported: ``messages_per_s``
and the round trip's ``p99_rtt_us``. The servers, each in the measuring
process:

- ``asyncop``: ``asyncop.net.serve_tcp`` with ``receive_some``/``send_all``;
- ``asyncio_streams``: ``asyncio.start_server``, ``read``/``write``/``drain``;
- ``asyncio_protocol``: an ``asyncio.Protocol`` that writes back in
  ``data_received`` (the fastest asyncio can be);
- ``uvloop_streams``: the streams server on uvloop;
- ``trio``: ``trio.serve_tcp`` with ``receive_some``/``send_all``.

Here ``n`` is the client's running time in milliseconds, not a count, and
``seconds`` is that time as measured.

``http_wrk``: ``wrk -t2 -c64 --latency`` (the Debian package ``wrk``)
for n milliseconds against a keep-alive HTTP/1.1 server written on each
system with the same lines of protocol: read a head up to the blank line,
answer a fixed 13-byte body, loop. Reported: ``requests_per_s`` and wrk's
``p99_latency_us``. Servers: asyncop (``serve_tcp``, ``receive_until``),
asyncio streams (``readuntil``), uvloop streams, trio (its streams with a
hand-kept buffer, as trio has no ``receive_until``).

``tls``: n TLS handshakes one after the other over loopback (a fresh TCP
connection each, TLS 1.3, a ``trustme`` certificate), then one connection
sending ``_TLS_MEGABYTES`` MB that the server counts. ``seconds`` is the
handshakes' time; ``handshakes_per_s`` and ``mb_per_s`` are reported. Peers:
asyncio's TLS (``start_server(ssl=...)``, ``open_connection(ssl=...)``).
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import asyncop

from ._registry import Metrics, Ratio, workload

__all__ = ["ECHO", "HTTP_WRK", "TLS"]

ECHO = workload(
    "echo",
    "uvloop's echo benchmark: 1 KiB messages over several connections for n ms",
    sizes=(3_000,),
    quick_sizes=(1_000,),
    checks=[Ratio("asyncio_streams", "asyncop", limit=1.0, metric="messages_per_s")],
    per_item=False,
    scalable=False,
)

HTTP_WRK = workload(
    "http_wrk",
    "wrk (2 threads, 64 connections) for n ms against a keep-alive HTTP/1.1 server",
    sizes=(5_000,),
    quick_sizes=(1_000,),
    checks=[Ratio("asyncio_streams", "asyncop", limit=1.0, metric="requests_per_s")],
    per_item=False,
    scalable=False,
)

TLS = workload(
    "tls",
    "n TLS handshakes over loopback one after another, then a bulk transfer",
    sizes=(300,),
    quick_sizes=(40,),
    checks=[
        Ratio("asyncop", "asyncio", limit=1.5),
        Ratio("asyncio", "asyncop", limit=1.5, metric="mb_per_s"),
    ],
)

_CONNECTIONS = 10
_MESSAGE = 1024
_TLS_MEGABYTES = 32
_CHUNK = 64 * 1024
# The one byte a handshake round sends, so that both ends finish cleanly.
_PROBE = b"h"


# -- echo ----------------------------------------------------------------------------


def _run_client(port: int, milliseconds: int) -> Metrics:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks._echo_client",
            "127.0.0.1",
            str(port),
            str(_CONNECTIONS),
            str(_MESSAGE),
            str(milliseconds),
        ],
        capture_output=True,
        text=True,
        timeout=60 + milliseconds / 1000,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the echo client failed: {done.stderr.strip()}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "seconds": result["seconds"],
        "messages_per_s": result["messages"] / result["seconds"],
        "p50_rtt_us": result["p50_rtt_us"],
        "p99_rtt_us": result["p99_rtt_us"],
    }


# A server body: serve(ready), calling ready(port, stop) once it accepts.
Serve = Callable[[Callable[[int, Callable[[], None]], None]], None]


class _ServerThread:
    """Run ``serve(ready)`` in a thread; ``ready(port, stop)`` hands back how to stop it."""

    def __init__(self, serve: Serve):
        self._ready = threading.Event()
        self._port = 0
        self._stop: Callable[[], None] = lambda: None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, args=(serve,), daemon=True)

    def _main(self, serve: Serve) -> None:
        try:
            serve(self._on_ready)
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    def _on_ready(self, port: int, stop: Callable[[], None]) -> None:
        self._port, self._stop = port, stop
        self._ready.set()

    def __enter__(self) -> int:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self._port

    def __exit__(self, *exc: object) -> None:
        self._stop()
        self._thread.join(30)


def _asyncop_serve(handler: Any, client: Callable[[int, int], Metrics], n: int) -> Metrics:
    """Serve ``handler`` with asyncop's ``serve_listeners`` while ``client(port, n)`` runs."""
    from asyncop.net import open_tcp_listeners, serve_listeners

    async def main() -> Metrics:
        listeners = await open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with asyncop.scope() as s:
            server = s.spawn(serve_listeners, handler, listeners)
            metrics: Metrics = await asyncop.spawn_blocking(client, port, n)
            server.cancel()
        return metrics

    with asyncop.Runtime() as runtime:
        result: Metrics = runtime.run(main)
    return result


def _asyncio_serve(start: Callable[[], Any], *, uvloop: bool) -> Serve:
    """A ``_ServerThread`` body running the server ``await start()`` makes, on asyncio or uvloop."""
    import asyncio

    def serve(ready: Callable[[int, Callable[[], None]], None]) -> None:
        async def main() -> None:
            loop = asyncio.get_running_loop()
            stop = asyncio.Event()
            server = await start()
            ready(server.sockets[0].getsockname()[1], lambda: loop.call_soon_threadsafe(stop.set))
            async with server:
                await stop.wait()

        if uvloop:
            import uvloop as uv

            uv.run(main())
        else:
            asyncio.run(main())

    return serve


def _trio_serve(handler: Any) -> Serve:
    """A ``_ServerThread`` body running ``trio.serve_tcp(handler)``."""
    import functools

    import trio

    def serve(ready: Callable[[int, Callable[[], None]], None]) -> None:
        async def main() -> None:
            async with trio.open_nursery() as nursery:
                listeners = await nursery.start(
                    functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1")
                )
                token = trio.lowlevel.current_trio_token()
                ready(
                    listeners[0].socket.getsockname()[1],
                    lambda: token.run_sync_soon(nursery.cancel_scope.cancel),
                )

        trio.run(main)

    return serve


@ECHO.system("asyncop")
def _echo_asyncop(n: int) -> Metrics:
    async def echo(stream: Any) -> None:
        while data := await stream.receive_some():
            await stream.send_all(data)

    return _asyncop_serve(echo, _run_client, n)


def _asyncio_server(*, protocol: bool, uvloop: bool) -> Serve:
    import asyncio

    class Echo(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            transport.get_extra_info("socket").setsockopt(6, 1, 1)  # TCP_NODELAY

        def data_received(self, data: bytes) -> None:
            self.transport.write(data)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    async def start() -> Any:
        if protocol:
            return await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0)
        return await asyncio.start_server(handle, "127.0.0.1", 0)

    return _asyncio_serve(start, uvloop=uvloop)


@ECHO.system("asyncio_streams")
def _echo_asyncio_streams(n: int) -> Metrics:
    with _ServerThread(_asyncio_server(protocol=False, uvloop=False)) as port:
        return _run_client(port, n)


@ECHO.system("asyncio_protocol")
def _echo_asyncio_protocol(n: int) -> Metrics:
    with _ServerThread(_asyncio_server(protocol=True, uvloop=False)) as port:
        return _run_client(port, n)


@ECHO.system("uvloop_streams", requires=("uvloop",))
def _echo_uvloop_streams(n: int) -> Metrics:
    with _ServerThread(_asyncio_server(protocol=False, uvloop=True)) as port:
        return _run_client(port, n)


@ECHO.system("trio", requires=("trio",))
def _echo_trio(n: int) -> Metrics:
    async def echo(stream: Any) -> None:
        while data := await stream.receive_some(65536):
            await stream.send_all(data)

    with _ServerThread(_trio_serve(echo)) as port:
        return _run_client(port, n)


# -- tls -----------------------------------------------------------------------------


def _contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    import trustme

    authority = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return server, client


@TLS.system("asyncop", requires=("trustme",))
def _tls_asyncop(n: int) -> Metrics:
    import functools

    from asyncop.net import open_tcp_listeners, open_tcp_stream, serve_listeners

    server_context, client_context = _contexts()
    total = _TLS_MEGABYTES * 1024 * 1024

    async def handler(stream: Any) -> None:
        received = 0
        while data := await stream.receive_some():
            if data == _PROBE:  # a handshake round: the client waits for our close
                return
            received += len(data)
            if received >= total:
                await stream.send_all(b"!")

    async def main() -> Metrics:
        listeners = await open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with asyncop.scope() as s:
            server = s.spawn(
                functools.partial(serve_listeners, handler, listeners, ssl_context=server_context)
            )
            start = time.perf_counter()
            for _ in range(n):
                stream = await open_tcp_stream("127.0.0.1", port, ssl_context=client_context)
                await stream.send_all(_PROBE)
                await stream.receive_some()
                await stream.aclose()
            handshakes = time.perf_counter() - start
            stream = await open_tcp_stream("127.0.0.1", port, ssl_context=client_context)
            chunk = b"x" * _CHUNK
            start = time.perf_counter()
            for _ in range(total // _CHUNK):
                await stream.send_all(chunk)
            assert await stream.receive_some() == b"!"
            transfer = time.perf_counter() - start
            await stream.aclose()
            server.cancel()
        return {
            "seconds": handshakes,
            "handshakes_per_s": n / handshakes,
            "mb_per_s": _TLS_MEGABYTES / transfer,
        }

    with asyncop.Runtime() as runtime:
        result: Metrics = runtime.run(main)
    return result


@TLS.system("asyncio", requires=("trustme",))
def _tls_asyncio(n: int) -> Metrics:
    import asyncio

    server_context, client_context = _contexts()
    total = _TLS_MEGABYTES * 1024 * 1024

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received = 0
        try:
            while data := await reader.read(65536):
                if data == _PROBE:
                    break
                received += len(data)
                if received >= total:
                    writer.write(b"!")
                    await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        writer.close()

    async def main() -> Metrics:
        server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=server_context)
        port = server.sockets[0].getsockname()[1]
        async with server:
            start = time.perf_counter()
            for _ in range(n):
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", port, ssl=client_context
                )
                writer.write(_PROBE)
                await writer.drain()
                await reader.read(1)
                writer.close()
                try:
                    await writer.wait_closed()
                except (ConnectionError, ssl.SSLError):
                    pass
            handshakes = time.perf_counter() - start
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context)
            chunk = b"x" * _CHUNK
            start = time.perf_counter()
            for _ in range(total // _CHUNK):
                writer.write(chunk)
                await writer.drain()
            assert await reader.read(1) == b"!"
            transfer = time.perf_counter() - start
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, ssl.SSLError):
                pass
            await asyncio.sleep(0.05)  # let the handler see the end before the server closes
        return {
            "seconds": handshakes,
            "handshakes_per_s": n / handshakes,
            "mb_per_s": _TLS_MEGABYTES / transfer,
        }

    return asyncio.run(main())


# -- http_wrk ------------------------------------------------------------------------

_RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nHello, world!"
)
_WRK_UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6}


def _run_wrk(port: int, milliseconds: int) -> Metrics:
    import re
    import shutil

    if shutil.which("wrk") is None:
        raise RuntimeError("http_wrk needs wrk: apt-get install wrk")
    seconds = max(1, round(milliseconds / 1000))
    done = subprocess.run(
        ["wrk", "-t2", "-c64", f"-d{seconds}s", "--latency", f"http://127.0.0.1:{port}/"],
        capture_output=True,
        text=True,
        timeout=60 + seconds,
    )
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed: {done.stderr.strip()}")
    rate = re.search(r"Requests/sec:\s+([0-9.]+)", done.stdout)
    p99 = re.search(r"99%\s+([0-9.]+)(us|ms|s)\b", done.stdout)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", done.stdout)
    if rate is None or p99 is None:
        raise RuntimeError(f"cannot read wrk's report: {done.stdout!r}")
    if errors is not None:
        raise RuntimeError(f"wrk saw errors: {errors.group(0)}")
    return {
        "seconds": float(seconds),
        "requests_per_s": float(rate.group(1)),
        "p99_latency_us": float(p99.group(1)) * _WRK_UNITS[p99.group(2)],
    }


@HTTP_WRK.system("asyncop")
def _wrk_asyncop(n: int) -> Metrics:
    from asyncop.net import IncompleteRead

    async def handler(stream: Any) -> None:
        try:
            while True:
                await stream.receive_until(b"\r\n\r\n", 65536)
                await stream.send_all(_RESPONSE)
        except (IncompleteRead, asyncop.BrokenResourceError):
            return

    return _asyncop_serve(handler, _run_wrk, n)


def _asyncio_http(*, uvloop: bool) -> Serve:
    import asyncio

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                writer.write(_RESPONSE)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    async def start() -> Any:
        return await asyncio.start_server(handler, "127.0.0.1", 0)

    return _asyncio_serve(start, uvloop=uvloop)


@HTTP_WRK.system("asyncio_streams")
def _wrk_asyncio(n: int) -> Metrics:
    with _ServerThread(_asyncio_http(uvloop=False)) as port:
        return _run_wrk(port, n)


@HTTP_WRK.system("uvloop_streams", requires=("uvloop",))
def _wrk_uvloop(n: int) -> Metrics:
    with _ServerThread(_asyncio_http(uvloop=True)) as port:
        return _run_wrk(port, n)


@HTTP_WRK.system("trio", requires=("trio",))
def _wrk_trio(n: int) -> Metrics:
    import trio

    async def handler(stream: Any) -> None:
        buffer = bytearray()
        try:
            while True:
                while (end := buffer.find(b"\r\n\r\n")) < 0:
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        return
                    buffer += chunk
                del buffer[: end + 4]
                await stream.send_all(_RESPONSE)
        except trio.BrokenResourceError:
            return

    with _ServerThread(_trio_serve(handler)) as port:
        return _run_wrk(port, n)
