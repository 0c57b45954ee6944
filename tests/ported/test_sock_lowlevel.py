"""Socket-level rules that asyncio's low-level socket and server suites check,
written against asyncop.net's helpers and streams, over socketpairs and 127.0.0.1.
"""

from __future__ import annotations

import array
import socket
import ssl
from collections.abc import Iterator

import pytest

import asyncop
from asyncop import Cancelled, ClosedResourceError, net
from asyncop.testing import wait_all_blocked

pytestmark = pytest.mark.timeout(30)

HOST = "127.0.0.1"


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    with a, b:
        yield a, b


def read_all_now(sock: socket.socket) -> bytes:
    """What ``sock`` has received so far, without waiting."""
    sock.setblocking(False)
    chunks = []
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def strided() -> memoryview:
    """A memoryview over every other byte: a buffer that is not contiguous."""
    return memoryview(b"a-b-c-d-")[::2]


# -- what a send takes ---------------------------------------------------------------


@pytest.mark.asyncop
async def test_send_all_async_sends_a_view_that_is_not_contiguous(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    # asyncio's sock_sendall takes any buffer; a strided view holds the bytes it shows
    a, b = pair
    await net.send_all_async(a, strided())
    assert read_all_now(b) == b"abcd"


@pytest.mark.asyncop
async def test_stream_send_all_sends_a_view_that_is_not_contiguous(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    stream = net.SocketStream(a)
    await stream.send_all(strided())
    await stream.send_all(memoryview(array.array("B", b"ef")))
    assert read_all_now(b) == b"abcdef"


@pytest.mark.asyncop
async def test_udp_sendto_sends_a_view_that_is_not_contiguous() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind((HOST, 0))
        async with await net.open_udp_socket(HOST, 0) as udp:
            await udp.sendto(strided(), HOST, receiver.getsockname()[1])
        receiver.settimeout(5)
        assert receiver.recv(10) == b"abcd"


@pytest.mark.asyncop
async def test_tls_send_all_sends_a_view_that_is_not_contiguous(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    trustme = pytest.importorskip("trustme")
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost").configure_cert(server_context)
    client_context = ssl.create_default_context()
    authority.configure_trust(client_context)
    a, b = pair
    client = net.TLSStream.wrap(
        net.SocketStream(a), ssl_context=client_context, server_hostname="localhost"
    )
    server = net.TLSStream.wrap(net.SocketStream(b), ssl_context=server_context, server_side=True)
    async with asyncop.scope() as s:
        s.spawn(server.do_handshake)
        await client.do_handshake()
    await client.send_all(strided())
    assert await server.receive_exactly(4) == b"abcd"


# -- huge transfers, cancels and closes -------------------------------------------------


@pytest.mark.asyncop
async def test_a_huge_send_and_receive_meet_in_two_tasks(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    # asyncio test_huge_content: far more than the socket buffers hold, intact
    a, b = pair
    payload = bytes(range(256)) * (16 * 1024)  # 4 MiB
    received = bytearray()
    async with asyncop.scope() as s:
        s.spawn(net.send_all_async, a, payload)
        while len(received) < len(payload):
            received += await net.recv_async(b, 1 << 16)
    assert received == payload


@pytest.mark.asyncop
async def test_a_cancelled_accept_takes_no_connection_and_the_next_accept_gets_it() -> None:
    # asyncio test_cancel_sock_accept
    with socket.create_server((HOST, 0)) as listener:
        async with asyncop.scope() as s:
            waiter = s.spawn(net.accept_async, listener)
            await wait_all_blocked()
            waiter.cancel()
        assert waiter.state is asyncop.OperationState.CANCELLED
        with socket.create_connection(listener.getsockname()) as client:
            sock, addr = await net.accept_async(listener)
            with sock:
                assert addr == client.getsockname()


@pytest.mark.asyncop
async def test_a_socket_closed_under_a_waiting_recv_fails_it_even_without_notify_closing(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    # closing a socket another task waits on must not leave that task parked forever
    a, _b = pair
    errors: list[BaseException] = []

    async def reader() -> None:
        try:
            await net.recv_async(a, 10)
        except ClosedResourceError as exc:
            errors.append(exc)

    async with asyncop.fail_after(10), asyncop.scope() as s:
        s.spawn(reader)
        await wait_all_blocked()
        a.close()
    assert len(errors) == 1
    assert "notify_closing" in str(errors[0])


@pytest.mark.asyncop
async def test_a_send_cancelled_before_it_starts_reports_what_it_sent(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    # the note's count matches what the peer can read, whatever the count is
    a, b = pair
    notes: list[str] = []

    async def sender() -> None:
        asyncop.current_operation(require=True).cancel()
        try:
            await net.send_all_async(a, b"x" * (8 << 20))
        except Cancelled as exc:
            notes.extend(getattr(exc, "__notes__", []))
            raise

    async with asyncop.scope() as s:
        s.spawn(sender)
    assert len(notes) == 1
    sent = int(notes[0].split()[2])
    assert len(read_all_now(b)) == sent
