"""asyncop.net over Unix-domain stream sockets and UDP."""

from __future__ import annotations

import functools
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop import BusyResourceError, Cancelled, ClosedResourceError
from asyncop.net import (
    SocketListener,
    UDPSocket,
    getaddrinfo,
    open_udp_socket,
    open_unix_listener,
    open_unix_stream,
    serve_unix,
)

from ._net import Status, finish

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.skipif(sys.platform == "win32", reason="Unix-domain sockets"),
]


@pytest.fixture
def sock_path(tmp_path: Path) -> str:
    return str(tmp_path / "server.sock")


async def echo(stream: Any) -> None:
    async for chunk in stream:
        await stream.send_all(chunk)


# -- Unix-domain streams -------------------------------------------------------------


def test_serve_unix_and_open_unix_stream_echo_and_clean_up_the_file(
    runtime: asyncop.Runtime, sock_path: str
) -> None:
    async def main() -> list[bytes]:
        async with asyncop.scope() as s:
            [listener] = await s.start(serve_unix, echo, sock_path)
            assert isinstance(listener, SocketListener)
            [server] = s.children()
            assert os.path.exists(sock_path)
            replies = []
            for text in (b"one", b"two"):
                async with await open_unix_stream(sock_path) as stream:
                    await stream.send_all(text)
                    await stream.send_eof()
                    replies.append(b"".join([chunk async for chunk in stream]))
            server.cancel()
        assert server.state is asyncop.OperationState.CANCELLED
        return replies

    assert runtime.run(main) == [b"one", b"two"]
    assert not os.path.exists(sock_path)  # the listener removed its socket file
    finish(runtime)


def test_a_stale_socket_file_is_replaced_but_a_regular_file_is_not(
    runtime: asyncop.Runtime, sock_path: str, tmp_path: Path
) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(sock_path)
    stale.close()  # the file stays behind, as after a crash
    regular = tmp_path / "plain.txt"
    regular.write_text("keep me")

    async def main() -> None:
        listener = await open_unix_listener(sock_path)
        await listener.aclose()
        with pytest.raises(FileExistsError, match="not a socket"):
            await open_unix_listener(regular)

    runtime.run(main)
    assert regular.read_text() == "keep me"
    finish(runtime)


def test_a_listener_leaves_a_socket_file_another_server_took_over(
    runtime: asyncop.Runtime, sock_path: str
) -> None:
    async def main() -> None:
        first = await open_unix_listener(sock_path)
        second = await open_unix_listener(sock_path)  # replaces the file
        await first.aclose()
        assert os.path.exists(sock_path)  # not first's file any more
        await second.aclose()
        assert not os.path.exists(sock_path)

    runtime.run(main)
    finish(runtime)


@pytest.mark.parametrize(
    ("backlog", "error"), [("8", TypeError), (-1, ValueError), (2.5, TypeError)]
)
def test_a_bad_backlog_is_refused_before_the_file_at_the_path_is_touched(
    runtime: asyncop.Runtime, sock_path: str, backlog: Any, error: type[Exception]
) -> None:
    async def main() -> bytes:
        async with await open_unix_listener(sock_path) as serving:
            with pytest.raises(error, match="backlog"):
                await open_unix_listener(sock_path, backlog=backlog)
            with pytest.raises(error, match="backlog"):
                await serve_unix(echo, sock_path, backlog=backlog)
            # The first listener's file is still there, and it still answers.
            async with await open_unix_stream(sock_path) as client:
                accepted = await serving.accept()
                async with accepted:
                    await client.send_all(b"still here")
                    return await accepted.receive_some()

    assert runtime.run(main) == b"still here"
    finish(runtime)


def test_open_unix_stream_without_a_server_raises(runtime: asyncop.Runtime, sock_path: str) -> None:
    async def main() -> None:
        with pytest.raises(FileNotFoundError):
            await open_unix_stream(sock_path)
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(sock_path)
        stale.close()
        with pytest.raises(ConnectionRefusedError):
            await open_unix_stream(sock_path)
        with pytest.raises(TypeError, match="path"):
            await open_unix_stream(3)  # type: ignore[arg-type]

    runtime.run(main)
    finish(runtime)


def test_cancelling_serve_unix_cancels_its_connections(
    runtime: asyncop.Runtime, sock_path: str
) -> None:
    events: list[str] = []

    async def handler(stream: Any) -> None:
        events.append("start")
        try:
            await stream.receive_some()
        except Cancelled:
            events.append("cancelled")
            raise

    async def main() -> None:
        status = Status()
        async with asyncop.scope() as s:
            server = s.spawn(functools.partial(serve_unix, handler, sock_path, task_status=status))
            await status.event.wait_async()
            client = await open_unix_stream(sock_path)
            while not events:
                await asyncop.sleep(0.01)
            server.cancel()
        assert await client.receive_some() == b""
        await client.aclose()

    runtime.run(main)
    assert events == ["start", "cancelled"]
    finish(runtime)


# -- UDP ---------------------------------------------------------------------------------


def test_udp_sockets_exchange_datagrams(runtime: asyncop.Runtime) -> None:
    async def main() -> list[Any]:
        async with (
            await open_udp_socket("127.0.0.1") as a,
            await open_udp_socket("127.0.0.1") as b,
        ):
            host, port = b.local_address
            await a.sendto(b"first", host, port)
            await a.sendto(b"second", "localhost", port)  # a name works too
            got = [await b.recvfrom(), await b.recvfrom()]
            _data, sender = got[0]
            await b.sendto(b"reply", *sender)
            got.append(await a.recvfrom())
            return [(d, addr == a.local_address or addr == b.local_address) for d, addr in got]

    assert runtime.run(main) == [(b"first", True), (b"second", True), (b"reply", True)]
    finish(runtime)


@pytest.mark.parametrize("port", [70000, 65536, -1])
def test_udp_refuses_a_port_outside_the_range_instead_of_wrapping_it(
    runtime: asyncop.Runtime, port: int
) -> None:
    # The C resolver takes 70000 as 70000 % 65536 = 4464, without a word.
    async def main() -> None:
        with pytest.raises(ValueError, match=f"local_port {port}, outside 0..65535"):
            await open_udp_socket("127.0.0.1", port)
        async with await open_udp_socket("127.0.0.1") as sock:
            with pytest.raises(ValueError, match=f"port {port}, outside 0..65535"):
                await sock.sendto(b"to nowhere", "127.0.0.1", port)
            with pytest.raises(TypeError, match="int port"):
                await sock.sendto(b"to nowhere", "127.0.0.1", str(port))  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=f"port {port}, outside 0..65535"):
            await getaddrinfo("127.0.0.1", port)
        if port >= 0:
            with pytest.raises(ValueError, match=f"port {port}, outside"):
                await getaddrinfo("127.0.0.1", str(port).encode())

    runtime.run(main)
    finish(runtime)


def test_getaddrinfo_takes_a_service_name_or_a_port_and_refuses_other_types(
    runtime: asyncop.Runtime,
) -> None:
    async def main() -> list[int]:
        ports = []
        for port in (53, "53", b"53", "domain", None):
            infos = await getaddrinfo("127.0.0.1", port, type=socket.SOCK_DGRAM)
            ports.append(infos[0][4][1])
        with pytest.raises(TypeError, match="service name"):
            await getaddrinfo("127.0.0.1", 53.0)  # type: ignore[arg-type]
        return ports

    assert runtime.run(main) == [53, 53, 53, 53, 0]
    finish(runtime)


def test_udp_over_ipv6(runtime: asyncop.Runtime) -> None:
    async def main() -> bytes:
        async with await open_udp_socket("::1") as a, await open_udp_socket("::1") as b:
            assert a.socket.family == socket.AF_INET6
            await a.sendto(b"six", "::1", b.local_address[1])
            data, _ = await b.recvfrom()
            return data

    assert runtime.run(main) == b"six"
    finish(runtime)


def test_recvfrom_cuts_to_max_bytes_and_async_for_yields_datagrams(
    runtime: asyncop.Runtime,
) -> None:
    async def main() -> list[bytes]:
        async with await open_udp_socket("127.0.0.1") as a, await open_udp_socket() as b:
            port = b.local_address[1]
            for i in range(3):
                await a.sendto(b"datagram %d" % i, "127.0.0.1", port)
            first, _ = await b.recvfrom(4)
            got = [first]
            async for data, _addr in b:
                got.append(data)
                if len(got) == 3:
                    break
            return got

    assert runtime.run(main) == [b"data", b"datagram 1", b"datagram 2"]
    finish(runtime)


def test_recvfrom_with_a_huge_max_bytes_returns_the_datagram(runtime: asyncop.Runtime) -> None:
    async def main() -> list[bytes]:
        async with await open_udp_socket("127.0.0.1") as a, await open_udp_socket() as b:
            port = b.local_address[1]
            got = []
            for max_bytes in (10**12, sys.maxsize, 2**70):
                await a.sendto(b"datagram", "127.0.0.1", port)
                data, _ = await b.recvfrom(max_bytes)
                got.append(data)
            return got

    assert runtime.run(main) == [b"datagram"] * 3
    finish(runtime)


def test_a_cancelled_recvfrom_takes_no_datagram_and_a_second_receiver_is_refused(
    runtime: asyncop.Runtime,
) -> None:
    async def main() -> bytes:
        async with await open_udp_socket("127.0.0.1") as a, await open_udp_socket("127.0.0.1") as b:
            async with asyncop.scope() as s:
                waiting = s.spawn(b.recvfrom)
                await asyncop.sleep(0.05)
                with pytest.raises(BusyResourceError):
                    await b.recvfrom()
                waiting.cancel()
            await a.sendto(b"kept", *b.local_address)
            data, _ = await b.recvfrom()
            return data

    assert runtime.run(main) == b"kept"
    finish(runtime)


def test_closing_a_udp_socket_wakes_its_receiver(runtime: asyncop.Runtime) -> None:
    async def receive(sock: UDPSocket) -> str:
        try:
            await sock.recvfrom()
        except ClosedResourceError as exc:
            return str(exc)
        return "received"

    async def main() -> str:
        sock = await open_udp_socket("127.0.0.1")
        async with asyncop.scope() as s:
            waiting = s.spawn(receive, sock)
            await asyncop.sleep(0.05)
            await sock.aclose()
        with pytest.raises(ClosedResourceError):
            await sock.sendto(b"x", "127.0.0.1", 9)
        result: str = waiting.result()
        return result

    assert "closed" in runtime.run(main)
    finish(runtime)


def test_udp_socket_refuses_a_stream_socket() -> None:
    with socket.socket() as tcp, pytest.raises(TypeError, match="SOCK_DGRAM"):
        UDPSocket(tcp)
