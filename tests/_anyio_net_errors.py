"""The error cases of anyio's networking on the asyncop backend.

``tests/test_error_messages.py`` adds ``ANYIO_NET_CASES`` to its table: each
row is ``(id, trigger, error type, text the message names, kind, public)``
and each trigger takes that module's ``Ctx`` and returns the exception it
provoked, running anyio code as an operation of the real-clock runtime.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketStream, UNIXSocketStream

__all__ = ["ANYIO_NET_CASES"]

HOST = "127.0.0.1"


def _failure(c: Any, action: Callable[[], Awaitable[Any]]) -> BaseException:
    """Run ``action()`` as a root operation of the real-clock runtime; return its error."""
    result = c.rt.spawn(action).wait(20)
    assert result.error is not None, f"{action!r} raised nothing"
    return result.error  # type: ignore[no-any-return]


async def _tcp_pair() -> tuple[SocketStream, SocketStream]:
    async with await anyio.create_tcp_listener(local_host=HOST) as listener:
        port = listener.extra(SocketAttribute.local_port)
        client = await anyio.connect_tcp(HOST, port)
        (inner,) = listener.listeners
        server = await inner.accept()
    return client, server  # type: ignore[return-value]


async def _unix_pair() -> tuple[UNIXSocketStream, socket.socket]:
    a, b = socket.socketpair()
    return await UNIXSocketStream.from_socket(a), b


def t_receive_after_aclose(c: Any) -> BaseException:
    async def action() -> None:
        client, server = await _tcp_pair()
        await server.aclose()
        await client.aclose()
        await client.receive()

    return _failure(c, action)


def t_raw_socket_closed_behind_its_back(c: Any) -> BaseException:
    async def action() -> None:
        client, server = await _tcp_pair()
        async with server:
            client.extra(SocketAttribute.raw_socket).close()
            await client.receive()

    return _failure(c, action)


def t_closed_under_a_receive(c: Any) -> BaseException:
    async def action() -> None:
        client, server = await _tcp_pair()

        async def close_it() -> None:
            await anyio.wait_all_tasks_blocked()
            await client.aclose()

        error: BaseException | None = None
        async with server, anyio.create_task_group() as tg:
            tg.start_soon(close_it)
            try:
                await client.receive()
            except anyio.ClosedResourceError as exc:
                error = exc  # raised below, outside the task group's ExceptionGroup
        assert error is not None
        raise error

    return _failure(c, action)


def t_reset_by_the_peer(c: Any) -> BaseException:
    async def action() -> None:
        client, server = await _tcp_pair()
        raw = server.extra(SocketAttribute.raw_socket)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await server.aclose()
        async with client:
            await client.receive()

    return _failure(c, action)


def _receive_with(max_bytes: Any) -> Callable[[Any], BaseException]:
    def trigger(c: Any) -> BaseException:
        async def action() -> None:
            client, server = await _tcp_pair()
            async with client, server:
                await client.receive(max_bytes)

        return _failure(c, action)

    return trigger


def _receive_fds_with(msglen: Any, maxfds: Any) -> Callable[[Any], BaseException]:
    def trigger(c: Any) -> BaseException:
        async def action() -> None:
            stream, peer = await _unix_pair()
            with peer:
                async with stream:
                    await stream.receive_fds(msglen, maxfds)

        return _failure(c, action)

    return trigger


def _send_fds_with(message: bytes, fds: list[int]) -> Callable[[Any], BaseException]:
    def trigger(c: Any) -> BaseException:
        async def action() -> None:
            stream, peer = await _unix_pair()
            with peer:
                async with stream:
                    await stream.send_fds(message, fds)

        return _failure(c, action)

    return trigger


def t_receive_fds_of_credentials(c: Any) -> BaseException:
    async def action() -> None:
        stream, peer = await _unix_pair()
        raw = stream.extra(SocketAttribute.raw_socket)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        credentials = struct.pack("3i", os.getpid(), os.getuid(), os.getgid())
        with peer:
            peer.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, credentials)])
            async with stream:
                await stream.receive_fds(10, 1)

    return _failure(c, action)


def t_connect_refused(c: Any) -> BaseException:
    async def action() -> None:
        with socket.socket() as unused:
            unused.bind((HOST, 0))
            port = unused.getsockname()[1]  # bound, never listening: refused
            await anyio.connect_tcp(HOST, port)

    error = _failure(c, action)
    assert isinstance(error.__cause__, ConnectionRefusedError), error
    return error.__cause__


ANYIO_NET_CASES: list[
    tuple[str, Callable[[Any], BaseException], type[BaseException], str, str, bool]
]
ANYIO_NET_CASES = [
    (
        "anyio-receive-after-aclose",
        t_receive_after_aclose,
        anyio.ClosedResourceError,
        "SocketStream",
        "misuse",
        True,
    ),
    (
        "anyio-raw-socket-closed",
        t_raw_socket_closed_behind_its_back,
        anyio.BrokenResourceError,
        "SocketStream",
        "misuse",
        True,
    ),
    (
        "anyio-closed-under-receive",
        t_closed_under_a_receive,
        anyio.ClosedResourceError,
        "SocketStream",
        "outcome",
        True,
    ),
    (
        "anyio-reset-by-peer",
        t_reset_by_the_peer,
        anyio.BrokenResourceError,
        "SocketStream",
        "outcome",
        True,
    ),
    ("anyio-receive-max-bytes-type", _receive_with("1"), TypeError, "str", "misuse", True),
    ("anyio-receive-max-bytes-zero", _receive_with(0), ValueError, "got 0", "misuse", True),
    ("anyio-receive-fds-msglen", _receive_fds_with(-1, 1), ValueError, "-1", "misuse", True),
    ("anyio-receive-fds-maxfds", _receive_fds_with(1, 0), ValueError, "got 0", "misuse", True),
    (
        "anyio-receive-fds-credentials",
        t_receive_fds_of_credentials,
        RuntimeError,
        "receive_fds()",
        "outcome",
        True,
    ),
    ("anyio-send-fds-no-message", _send_fds_with(b"", [0]), ValueError, "message", "misuse", True),
    ("anyio-send-fds-no-fds", _send_fds_with(b"x", []), ValueError, "fds", "misuse", True),
    ("anyio-connect-refused", t_connect_refused, ConnectionRefusedError, HOST, "outcome", True),
]
