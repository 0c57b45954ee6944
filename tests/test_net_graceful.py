"""Servers stopping gracefully: asked to stop, they refuse connections and let handlers finish."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop import OperationState
from asyncop.net import open_tcp_stream, open_unix_stream, serve_tcp, serve_unix
from asyncop.testing import VirtualClock, wait_all_blocked

from ._net import Status, finish

pytestmark = pytest.mark.timeout(20)

HOST = "127.0.0.1"


def port_of(listeners: Any) -> int:
    port: int = listeners[0].socket.getsockname()[1]
    return port


async def polite(stream: Any) -> None:
    """Answer the request only once asked to stop, as a long poll would."""
    request = await stream.receive_until(b"\n", 100)
    asked_before = asyncop.stop_requested()
    await asyncop.wait_stop_requested()
    asked = f"asked {asked_before} then {asyncop.stop_requested()}".encode()
    await stream.send_all(request + b": " + asked + b"\n")


def test_a_tcp_server_asked_to_stop_refuses_connections_and_lets_handlers_finish(
    runtime: asyncop.Runtime,
) -> None:
    async def main() -> tuple[OperationState, bytes]:
        async with asyncop.scope() as s:
            listeners = await s.start(functools.partial(serve_tcp, polite, 0, host=HOST))
            [server] = s.children()
            port = port_of(listeners)
            async with await open_tcp_stream(HOST, port) as client:
                await client.send_all(b"hello\n")
                await wait_all_blocked()  # the handler waits for the request
                server.cancel("deploying", grace=30)
                reply = await client.receive_until(b"\n", 100)
                await wait_all_blocked()
                with pytest.raises(ConnectionRefusedError):
                    await open_tcp_stream(HOST, port)
        return server.state, reply

    assert runtime.run(main) == (OperationState.COMPLETED, b"hello: asked False then True")
    finish(runtime)


def test_handlers_still_running_when_the_grace_runs_out_are_cancelled() -> None:
    clock = VirtualClock(autojump=True, io_grace=0.05)
    ended: list[float] = []

    async def stubborn(stream: Any) -> None:
        try:
            await asyncop.sleep_forever()
        finally:
            ended.append(asyncop.current_time())

    async def main() -> tuple[OperationState, bytes, float]:
        async with asyncop.scope() as s:
            listeners = await s.start(functools.partial(serve_tcp, stubborn, 0, host=HOST))
            [server] = s.children()
            async with await open_tcp_stream(HOST, port_of(listeners)) as client:
                await wait_all_blocked()
                asked_at = asyncop.current_time()
                server.cancel("deploying", grace=30)
                eof = await client.receive_some()
        return server.state, eof, ended[0] - asked_at

    with asyncop.Runtime(2, clock=clock) as rt:
        assert rt.run(main) == (OperationState.CANCELLED, b"", 30)
        finish(rt)


@pytest.fixture
def sock_path(tmp_path: Path) -> Iterator[str]:
    yield str(tmp_path / "graceful.sock")


def test_a_unix_server_asked_to_stop_refuses_connections_and_lets_handlers_finish(
    runtime: asyncop.Runtime, sock_path: str
) -> None:
    async def main() -> tuple[OperationState, bytes]:
        status = Status()
        async with asyncop.scope() as s:
            server = s.spawn(functools.partial(serve_unix, polite, sock_path, task_status=status))
            await status.event.wait_async()
            async with await open_unix_stream(sock_path) as client:
                await client.send_all(b"hi\n")
                await wait_all_blocked()
                s.cancel(grace=30)  # the scope around the server: the request reaches it
                reply = await client.receive_until(b"\n", 100)
                await wait_all_blocked()
                with pytest.raises(OSError):
                    await open_unix_stream(sock_path)
        return server.state, reply

    assert runtime.run(main) == (OperationState.COMPLETED, b"hi: asked False then True")
    finish(runtime)


def test_a_server_whose_listeners_are_closed_still_returns(runtime: asyncop.Runtime) -> None:
    async def main() -> OperationState:
        async with asyncop.scope() as s:
            listeners = await s.start(functools.partial(serve_tcp, polite, 0, host=HOST))
            [server] = s.children()
            for listener in listeners:
                listener.close()
        return server.state

    assert runtime.run(main) is OperationState.COMPLETED
    finish(runtime)


def test_a_runtime_shutdown_with_grace_lets_a_connection_finish() -> None:
    replies: list[bytes] = []
    handling = threading.Event()

    async def handler(stream: Any) -> None:
        request = await stream.receive_until(b"\n", 100)
        handling.set()
        await asyncop.wait_stop_requested()
        await stream.send_all(request + b": finished\n")

    async def client(port: int) -> None:
        async with await open_tcp_stream(HOST, port) as stream:
            await stream.send_all(b"bye\n")
            replies.append(await stream.receive_until(b"\n", 100))

    rt = asyncop.Runtime(2)
    try:
        status = Status()
        rt.spawn(functools.partial(serve_tcp, handler, 0, host=HOST, task_status=status))
        assert status.event.wait(5)
        rt.spawn(client, port_of(status.value))
        assert handling.wait(5)
    finally:
        assert rt.shutdown(timeout=10, grace=5)
    assert replies == [b"bye: finished"]
