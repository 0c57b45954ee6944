"""Socket I/O: ping-pong over a socketpair, and HTTP requests to the page server.

``pingpong``: two tasks exchange 1-byte messages over a
``socket.socketpair()``, n round trips. asyncop's readiness comes from its
reactor thread, so each readiness may cross threads twice (kernel ->
reactor -> worker). The systems:

- ``asyncop``: the default, where a worker about to park polls the parked
  fds itself before leaving them to the reactor;
- ``asyncop_reactor_only``: that worker poll turned off, every readiness
  going through the reactor thread, as every readiness once did;
- ``asyncio``/``uvloop`` (``sock_recv``/``sock_sendall``), ``trio``
  (``trio.socket``), ``threads`` (two threads doing blocking I/O);
- ``anyio_asyncop``/``anyio_asyncio``/``anyio_trio``: one anyio program
  (``UNIXSocketStream.from_socket`` over the socketpair, ``send``/``receive``
  on the streams) run on each anyio backend;
- ``event_floor``: two threads ping-ponging a ``threading.Event``, the cost
  of one cross-thread wake each way, the floor of any design that hands a
  readiness to another thread.

Targets: asyncop's time at most 1.5 x asyncio's, and with the compiled
core at most uvloop's (a check marked ``(compiled)``, n/a when the core
runs as Python).

``http``: the page loader's own asyncop HTTP server (zero latency) answers n
GET requests, 50 in flight at a time, one connection each; the client is
asyncop (``asyncop.net``) or asyncio (``open_connection``). Reported as
requests per second.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import asyncop

from ._coro_common import register_anyio
from ._registry import Metrics, Ratio, workload

__all__ = ["HTTP", "PINGPONG", "pingpong_main"]

PINGPONG = workload(
    "pingpong",
    "two tasks exchange 1-byte messages over a socketpair, n round trips",
    sizes=(20_000,),
    quick_sizes=(2_000,),
    checks=[
        Ratio("asyncop", "asyncio", limit=1.5),
        Ratio("asyncop", "uvloop", limit=1.0, compiled=True),
        Ratio("anyio_asyncop", "anyio_asyncio", limit=1.5),
    ],
)

HTTP = workload(
    "http",
    "GET n resources from the page loader's asyncop HTTP server, 50 at a time",
    sizes=(1_000,),
    quick_sizes=(200,),
    checks=[Ratio("asyncop", "asyncio", limit=1.5)],
)

_CONCURRENCY = 50


def _pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    return a, b


# -- pingpong -----------------------------------------------------------------


async def pingpong_main(n: int) -> float:
    """asyncop's side of the ping-pong: n round trips; returns the seconds they took."""
    from asyncop.net import recv_async, send_all_async

    a, b = _pair()

    async def echo() -> None:
        for _ in range(n):
            await send_all_async(b, await recv_async(b, 1))

    async with asyncop.scope() as s:
        s.spawn(echo)
        start = time.perf_counter()
        for _ in range(n):
            await send_all_async(a, b"x")
            await recv_async(a, 1)
        seconds = time.perf_counter() - start
    a.close()
    b.close()
    return seconds


def _pingpong_asyncop(n: int) -> Metrics:
    with asyncop.Runtime() as runtime:
        seconds: float = runtime.run(pingpong_main, n)
    return {"seconds": seconds}


@PINGPONG.system("asyncop")
def _pingpong_asyncop_default(n: int) -> Metrics:
    return _pingpong_asyncop(n)


@PINGPONG.system("asyncop_reactor_only")
def _pingpong_asyncop_reactor_only(n: int) -> Metrics:
    from asyncop.runtime._core import _reactor

    _reactor.POLL_LIMIT = 0  # every readiness through the reactor thread
    return _pingpong_asyncop(n)


def _pingpong_asyncio(n: int, *, uvloop: bool) -> Metrics:
    import asyncio

    async def main() -> float:
        loop = asyncio.get_running_loop()
        a, b = _pair()

        async def echo() -> None:
            for _ in range(n):
                await loop.sock_sendall(b, await loop.sock_recv(b, 1))

        task = asyncio.create_task(echo())
        start = time.perf_counter()
        for _ in range(n):
            await loop.sock_sendall(a, b"x")
            await loop.sock_recv(a, 1)
        seconds = time.perf_counter() - start
        await task
        a.close()
        b.close()
        return seconds

    if uvloop:
        import uvloop as uv

        return {"seconds": uv.run(main())}
    return {"seconds": asyncio.run(main())}


@PINGPONG.system("asyncio")
def _pingpong_asyncio_default(n: int) -> Metrics:
    return _pingpong_asyncio(n, uvloop=False)


@PINGPONG.system("uvloop", requires=("uvloop",))
def _pingpong_uvloop(n: int) -> Metrics:
    return _pingpong_asyncio(n, uvloop=True)


@PINGPONG.system("trio", requires=("trio",))
def _pingpong_trio(n: int) -> Metrics:
    import trio

    async def main() -> float:
        a, b = trio.socket.socketpair()

        async def echo() -> None:
            for _ in range(n):
                await b.send(await b.recv(1))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(echo)
            start = time.perf_counter()
            for _ in range(n):
                await a.send(b"x")
                await a.recv(1)
            seconds = time.perf_counter() - start
        a.close()
        b.close()
        return seconds

    result: float = trio.run(main)
    return {"seconds": result}


async def _pingpong_anyio(n: int) -> Metrics:
    import anyio
    from anyio.abc import UNIXSocketStream

    a, b = socket.socketpair()
    left = await UNIXSocketStream.from_socket(a)
    right = await UNIXSocketStream.from_socket(b)
    async with left, right:

        async def echo() -> None:
            for _ in range(n):
                await right.send(await right.receive(1))

        async with anyio.create_task_group() as tg:
            tg.start_soon(echo)
            start = time.perf_counter()
            for _ in range(n):
                await left.send(b"x")
                await left.receive(1)
            seconds = time.perf_counter() - start
    return {"seconds": seconds}


register_anyio(PINGPONG, _pingpong_anyio)


@PINGPONG.system("threads")
def _pingpong_threads(n: int) -> Metrics:
    a, b = socket.socketpair()

    def echo() -> None:
        for _ in range(n):
            b.sendall(b.recv(1))

    peer = threading.Thread(target=echo)
    peer.start()
    start = time.perf_counter()
    for _ in range(n):
        a.sendall(b"x")
        a.recv(1)
    seconds = time.perf_counter() - start
    peer.join()
    a.close()
    b.close()
    return {"seconds": seconds}


@PINGPONG.system("event_floor")
def _pingpong_event_floor(n: int) -> Metrics:
    ping, pong = threading.Event(), threading.Event()

    def peer() -> None:
        for _ in range(n):
            ping.wait()
            ping.clear()
            pong.set()

    thread = threading.Thread(target=peer)
    thread.start()
    start = time.perf_counter()
    for _ in range(n):
        ping.set()
        pong.wait()
        pong.clear()
    seconds = time.perf_counter() - start
    thread.join()
    return {"seconds": seconds}


# -- http -----------------------------------------------------------------------


def _paths(n: int) -> list[str]:
    kinds = ("header", "body", "comments", "sidebar")
    return [f"/page/{i // 4 + 1}/{kinds[i % 4]}" for i in range(n)]


def _server() -> Any:
    from examples.page_loader.pages import Site
    from examples.page_loader.server import running_server

    return running_server(Site.build(latency=0.0))


@HTTP.system("asyncop")
def _http_asyncop(n: int) -> Metrics:
    from examples.page_loader.client import fetch

    paths = _paths(n)

    async def main(host: str, port: int) -> float:
        queue: asyncop.Channel[str] = asyncop.Channel(len(paths))
        for path in paths:
            queue.try_send(path)
        queue.close()

        async def client() -> None:
            async for path in queue:
                await fetch(host, port, path)

        start = time.perf_counter()
        async with asyncop.scope() as s:
            for _ in range(_CONCURRENCY):
                s.spawn(client)
        return time.perf_counter() - start

    with _server() as (host, port), asyncop.Runtime() as runtime:
        seconds: float = runtime.run(main, host, port)
    return {"seconds": seconds, "requests_per_s": n / seconds}


@HTTP.system("asyncio")
def _http_asyncio(n: int) -> Metrics:
    import asyncio

    paths = _paths(n)

    async def get(host: str, port: int, path: str) -> bytes:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        data = await reader.read()
        writer.close()
        await writer.wait_closed()
        if not data.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"GET {path} failed: {data[:40]!r}")
        return data

    async def main(host: str, port: int) -> float:
        queue: asyncio.Queue[str] = asyncio.Queue()
        for path in paths:
            queue.put_nowait(path)

        async def client() -> None:
            while True:
                try:
                    path = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                await get(host, port, path)

        start = time.perf_counter()
        async with asyncio.TaskGroup() as tg:
            for _ in range(_CONCURRENCY):
                tg.create_task(client())
        return time.perf_counter() - start

    with _server() as (host, port):
        seconds = asyncio.run(main(host, port))
    return {"seconds": seconds, "requests_per_s": n / seconds}
