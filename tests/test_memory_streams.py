"""asyncop.testing.memory_stream_pair: two streams joined in memory, used as a user would."""

from __future__ import annotations

from typing import Any

import pytest

import asyncop
from asyncop import BrokenResourceError, BusyResourceError, ClosedResourceError
from asyncop.net import IncompleteRead, Stream
from asyncop.testing import memory_stream_pair, wait_all_blocked

pytestmark = pytest.mark.timeout(20)


# -- a little line protocol over the pair ------------------------------------------------


async def line_server(stream: Stream) -> list[bytes]:
    """``ECHO <text>`` answers ``<text>``, ``QUIT`` answers ``BYE`` and hangs up."""
    heard = []
    async with stream:
        while True:
            try:
                line = await stream.receive_until(b"\n", 1000)
            except IncompleteRead as exc:
                assert exc.partial == b""  # the client ended between two lines
                return heard
            heard.append(line)
            command, _, text = line.partition(b" ")
            if command == b"QUIT":
                await stream.send_all(b"BYE\n")
                return heard
            await stream.send_all(text + b"\n" if command == b"ECHO" else b"ERR\n")


def test_an_echo_server_and_its_client_talk_over_the_pair(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[list[bytes], list[bytes]]:
        client, server_end = memory_stream_pair()
        async with asyncop.scope() as s:
            server = s.spawn(line_server, server_end)
            replies = []
            await client.send_all(b"ECHO one\nECHO two\n")  # two requests in one write
            replies.append(await client.receive_until(b"\n", 100))
            replies.append(await client.receive_until(b"\n", 100))
            for byte in b"ECHO three\n":  # one request in eleven writes
                await client.send_all(bytes([byte]))
            replies.append(await client.receive_until(b"\n", 100))
            await client.send_all(bytearray(b"HELP\nQUIT\n"))
            replies.append(await client.receive_until(b"\n", 100))
            replies.append(await client.receive_until(b"\n", 100))
            replies.append(await client.receive_some())  # the server hung up
            await client.aclose()
        return replies, await server

    replies, heard = vruntime.run(main)
    assert replies == [b"one", b"two", b"three", b"ERR", b"BYE", b""]
    assert heard == [b"ECHO one", b"ECHO two", b"ECHO three", b"HELP", b"QUIT"]


def test_the_server_sees_the_end_when_the_client_sends_eof(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[bytes, list[bytes]]:
        client, server_end = memory_stream_pair()
        async with asyncop.scope() as s:
            server = s.spawn(line_server, server_end)
            await client.send_all(b"ECHO last\n")
            await client.send_eof()
            reply = b"".join([chunk async for chunk in client])  # until the server closes
        return reply, await server

    assert vruntime.run(main) == (b"last\n", [b"ECHO last"])


# -- the rules, one by one ----------------------------------------------------------


def test_bytes_arrive_in_order_and_cut_to_max_bytes(vruntime: asyncop.Runtime) -> None:
    async def main() -> list[bytes]:
        a, b = memory_stream_pair()
        data = bytearray(b"abcdef")
        await a.send_all(data)
        data[:] = b"XXXXXX"  # the pair kept a copy
        await a.send_all(memoryview(b"ghij"))
        got = [await b.receive_some(4), await b.receive_some(4), await b.receive_exactly(2)]
        await b.send_all(b"back")
        got.append(await a.receive_some())
        return got

    assert vruntime.run(main) == [b"abcd", b"efgh", b"ij", b"back"]


@pytest.mark.parametrize("how", ["send_eof", "aclose"])
def test_a_receive_after_the_peer_ends_gets_what_was_sent_then_empty_bytes(
    vruntime: asyncop.Runtime, how: str
) -> None:
    async def main() -> list[bytes]:
        a, b = memory_stream_pair()
        await a.send_all(b"tail")
        await getattr(a, how)()
        return [await b.receive_some(), await b.receive_some(), await b.receive_some()]

    assert vruntime.run(main) == [b"tail", b"", b""]


@pytest.mark.parametrize("how", ["send_eof", "aclose"])
def test_a_parked_receiver_wakes_with_empty_bytes_when_the_peer_ends(
    vruntime: asyncop.Runtime, how: str
) -> None:
    async def main() -> bytes:
        a, b = memory_stream_pair()
        async with asyncop.scope() as s:
            reader = s.spawn(b.receive_some)
            await wait_all_blocked()
            await getattr(a, how)()
        return await reader

    assert vruntime.run(main) == b""


def test_send_all_on_a_closed_end_or_after_send_eof_raises_closed_resource_error(
    vruntime: asyncop.Runtime,
) -> None:
    async def main() -> None:
        a, b = memory_stream_pair()
        await a.send_eof()
        await a.send_eof()  # twice is harmless
        with pytest.raises(ClosedResourceError, match="send_eof"):
            await a.send_all(b"late")
        await b.aclose()
        await b.aclose()  # so is closing twice
        for call in (b.send_all(b"x"), b.receive_some(), b.send_eof()):
            with pytest.raises(ClosedResourceError, match="memory stream was closed"):
                await call

    vruntime.run(main)


def test_send_all_to_an_end_that_was_closed_raises_broken_resource_error(
    vruntime: asyncop.Runtime,
) -> None:
    async def main() -> bytes:
        a, b = memory_stream_pair()
        await b.send_all(b"still readable")
        await b.aclose()
        with pytest.raises(BrokenResourceError, match="other end"):
            await a.send_all(b"to nobody")
        return await a.receive_some()  # what b sent before closing still arrives

    assert vruntime.run(main) == b"still readable"


def test_closing_an_end_wakes_its_own_parked_receiver(vruntime: asyncop.Runtime) -> None:
    async def main() -> BaseException | None:
        a, _ = memory_stream_pair()
        async with asyncop.scope() as s:
            reader = s.spawn(a.receive_some, supervise=True)
            await wait_all_blocked()
            a.close()
        return reader.error

    error = vruntime.run(main)
    assert isinstance(error, ClosedResourceError)
    assert "closed while a task used it" in str(error)


def test_two_tasks_receiving_on_one_end_get_busy_resource_error(
    vruntime: asyncop.Runtime,
) -> None:
    async def main() -> bytes:
        a, b = memory_stream_pair()
        async with asyncop.scope() as s:
            reader = s.spawn(b.receive_some)
            await wait_all_blocked()
            with pytest.raises(BusyResourceError, match="already receiving"):
                await b.receive_some()
            with pytest.raises(BusyResourceError, match="already receiving"):
                await b.receive_until(b"\n", 10)
            await a.send_all(b"to the first")
        return await reader

    assert vruntime.run(main) == b"to the first"


def test_a_cancelled_receive_loses_no_bytes(vruntime: asyncop.Runtime) -> None:
    async def main() -> list[Any]:
        a, b = memory_stream_pair()
        got: list[Any] = []
        async with asyncop.scope() as s:
            waiting = s.spawn(b.receive_some)
            await wait_all_blocked()
            waiting.cancel()
        got.append(waiting.state)
        await a.send_all(b"123")
        async with asyncop.scope() as s:
            # Three of the five bytes it waits for are there: it takes them, waits, is cancelled.
            exact = s.spawn(b.receive_exactly, 5)
            await wait_all_blocked()
            exact.cancel()
        got.append(exact.state)
        await a.send_all(b"4567890")
        got.append(await b.receive_exactly(10))
        return got

    cancelled = asyncop.OperationState.CANCELLED
    assert vruntime.run(main) == [cancelled, cancelled, b"1234567890"]


def test_the_virtual_clock_jumps_over_a_wait_on_the_pair(vruntime: asyncop.Runtime) -> None:
    async def main() -> float:
        _, b = memory_stream_pair()
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=30):
                await b.receive_some()  # nothing is ever sent
        return asyncop.current_time()

    assert vruntime.run(main) == 30.0


def test_the_ends_refuse_what_a_socket_stream_refuses(vruntime: asyncop.Runtime) -> None:
    async def main() -> None:
        a, b = memory_stream_pair()
        with pytest.raises(TypeError, match="encode a str"):
            await a.send_all("text")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="max_bytes"):
            await b.receive_some(0)
        with pytest.raises(TypeError, match="delimiter"):
            await b.receive_until("\n", 10)  # type: ignore[arg-type]

    vruntime.run(main)


def test_the_ends_are_streams_from_the_testing_module() -> None:
    a, b = memory_stream_pair()
    assert isinstance(a, Stream) and isinstance(b, Stream)
    assert "memory_stream_pair" in asyncop.testing.__all__
    assert memory_stream_pair.__module__ == "asyncop.testing"
    assert repr(a) == "<MemoryStream end a open>"
    b.close()
    assert repr(b) == "<MemoryStream end b closed>"
