"""Channel ends closed, cloned and cancelled, ported from trio's memory channel
cases and anyio's memory object stream cases.

Differences that follow asyncop's rules: ``channel.sender()`` and
``channel.receiver()`` make the ends (trio's ``open_memory_channel`` gives a
pair); a receive in a cancelled scope raises ``Cancelled`` before it looks,
and a wait cancelled after its item was handed over keeps the item.
"""

from __future__ import annotations

import math

import pytest

import asyncop
from asyncop import (
    BrokenResourceError,
    ChannelReceiver,
    ChannelSender,
    ClosedResourceError,
    EndOfChannel,
    OperationState,
    TaskStatus,
    WouldBlock,
)
from asyncop.testing import VirtualClock, assert_checkpoints, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


def ends(capacity: float = 0) -> tuple[ChannelSender[object], ChannelReceiver[object]]:
    channel = asyncop.Channel[object](capacity)
    return channel.sender(), channel.receiver()


async def send_expecting(tx: ChannelSender[object], error: type[BaseException]) -> None:
    with pytest.raises(error):
        await tx.send_async(None)


async def send_value(tx: ChannelSender[object], value: object) -> None:
    await tx.send_async(value)


async def receive_expecting(rx: ChannelReceiver[object], error: type[BaseException]) -> None:
    with pytest.raises(error):
        await rx.recv_async()


@pytest.mark.asyncop
async def test_a_timed_out_receive_leaves_room_for_a_send(autojump_clock: VirtualClock) -> None:
    tx, rx = ends(1)
    async with asyncop.move_on_after(10) as cs:
        await rx.recv_async()
    assert cs.cancelled_caught
    await tx.send_async("after")
    assert rx.try_recv() == "after"


@pytest.mark.asyncop
async def test_closing_the_sender_wakes_its_send_and_stays_closed(
    autojump_clock: VirtualClock,
) -> None:
    tx, rx = ends()
    async with asyncop.scope() as s:
        s.spawn(send_expecting, tx, ClosedResourceError)
        await wait_all_blocked()
        await tx.aclose()
    with pytest.raises(ClosedResourceError):
        tx.try_send(None)
    with pytest.raises(ClosedResourceError):
        await tx.send_async(None)
    with pytest.raises(EndOfChannel):
        rx.try_recv()
    with pytest.raises(EndOfChannel):
        await rx.recv_async()


@pytest.mark.asyncop
async def test_closing_the_receiver_breaks_sends_and_stays_broken(
    autojump_clock: VirtualClock,
) -> None:
    tx, rx = ends()
    async with asyncop.scope() as s:
        s.spawn(send_expecting, tx, BrokenResourceError)
        await wait_all_blocked()
        await rx.aclose()
    with pytest.raises(BrokenResourceError):
        tx.try_send(None)
    with pytest.raises(BrokenResourceError):
        await tx.send_async(None)

    tx, rx = ends()
    async with asyncop.scope() as s:
        s.spawn(receive_expecting, rx, ClosedResourceError)
        await wait_all_blocked()
        await rx.aclose()
    with pytest.raises(ClosedResourceError):
        rx.try_recv()
    with pytest.raises(ClosedResourceError):
        await rx.recv_async()


@pytest.mark.asyncop
async def test_receiver_clones_close_one_by_one(autojump_clock: VirtualClock) -> None:
    tx, rx = ends(10)
    rx2 = rx.clone()
    rx3 = rx.clone()
    tx.try_send(None)
    await rx.aclose()
    with rx2:
        pass
    with pytest.raises(ClosedResourceError):
        rx.clone()
    with pytest.raises(ClosedResourceError):
        rx2.clone()
    tx.try_send(None)  # rx3 is still open
    await rx3.aclose()
    with pytest.raises(BrokenResourceError):
        tx.try_send(None)


@pytest.mark.asyncop
async def test_sender_clones_close_one_by_one(autojump_clock: VirtualClock) -> None:
    tx, rx = ends(10)
    tx2, tx3, tx4 = tx.clone(), tx.clone(), tx.clone()
    with tx:
        pass
    await tx2.aclose()
    with pytest.raises(ClosedResourceError):
        tx.clone()
    tx3.try_send("hi")
    await tx4.send_async("there")
    await tx3.aclose()
    tx4.close()
    assert await rx.recv_async() == "hi"
    assert rx.try_recv() == "there"
    with pytest.raises(EndOfChannel):
        await rx.recv_async()


@pytest.mark.asyncop
async def test_a_closed_channel_still_clones_open_ends(autojump_clock: VirtualClock) -> None:
    channel = asyncop.Channel[int](1)
    tx, rx = channel.sender(), channel.receiver()
    tx.try_send(1)
    channel.close()
    rx2 = rx.clone()
    assert await rx2.recv_async() == 1
    with pytest.raises(EndOfChannel):
        await rx.recv_async()
    with pytest.raises(ClosedResourceError):
        tx.clone().try_send(2)


@pytest.mark.asyncop
async def test_an_item_sent_to_a_waiting_receiver_is_its_own(autojump_clock: VirtualClock) -> None:
    tx, rx = ends(1)
    tx.try_send(1)
    assert rx.try_recv() == 1
    tx.try_send(2)
    assert rx.try_recv() == 2
    result: list[object] = []

    async def do_receive() -> None:
        result.append(await rx.recv_async())

    async with asyncop.scope() as s:
        s.spawn(do_receive)
        await wait_all_blocked()
        tx.try_send(2)
        with pytest.raises(WouldBlock):
            rx.try_recv()
    assert result == [2]


@pytest.mark.asyncop
async def test_room_freed_goes_to_the_waiting_sender(autojump_clock: VirtualClock) -> None:
    tx, rx = ends(1)
    tx.try_send(1)
    with pytest.raises(WouldBlock):
        tx.try_send(None)

    async with asyncop.scope() as s:
        s.spawn(send_value, tx, 2)
        await wait_all_blocked()
        assert rx.try_recv() == 1
        with pytest.raises(WouldBlock):
            tx.try_send(3)
        assert await rx.recv_async() == 2


@pytest.mark.asyncop
async def test_rendezvous_sends_and_receives_are_checkpoints(autojump_clock: VirtualClock) -> None:
    tx, rx = ends(0)
    with pytest.raises(WouldBlock):
        rx.try_recv()
    with pytest.raises(WouldBlock):
        tx.try_send(1)

    async def do_send() -> None:
        with assert_checkpoints():
            await tx.send_async(1)

    async with asyncop.scope() as s:
        s.spawn(do_send)
        with assert_checkpoints():
            assert await rx.recv_async() == 1
    with pytest.raises(WouldBlock):
        rx.try_recv()


@pytest.mark.asyncop
async def test_a_cancelled_receiver_is_no_rendezvous(autojump_clock: VirtualClock) -> None:
    tx, rx = ends(0)

    async def receive() -> None:
        await rx.recv_async()

    async with asyncop.scope() as s:
        op = s.spawn(receive)
        await wait_all_blocked()
        op.cancel()
        with pytest.raises(WouldBlock):
            tx.try_send("x")
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_a_cancelled_sender_delivers_nothing(autojump_clock: VirtualClock) -> None:
    tx, rx = ends(0)
    async with asyncop.scope() as s:
        op = s.spawn(send_value, tx, "x")
        await wait_all_blocked()
        op.cancel()
        with pytest.raises(WouldBlock):
            rx.try_recv()
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_receive_in_a_cancelled_scope_takes_nothing(autojump_clock: VirtualClock) -> None:
    tx, rx = ends(0)
    async with asyncop.scope() as s:
        s.spawn(send_value, tx, "hello")
        await wait_all_blocked()
        s.spawn(send_value, tx, "world")
        await wait_all_blocked()
        async with asyncop.scope() as inner:
            inner.cancel()
            await rx.recv_async()
            pytest.fail("the receive should have raised")
        assert await rx.recv_async() == "hello"
        assert await rx.recv_async() == "world"


@pytest.mark.asyncop
async def test_send_in_a_cancelled_scope_sends_nothing(autojump_clock: VirtualClock) -> None:
    tx, rx = ends(0)
    got: list[object] = []

    async def receive() -> None:
        got.append(await rx.recv_async())

    async with asyncop.scope() as s:
        s.spawn(receive)
        await wait_all_blocked()
        s.spawn(receive)
        await wait_all_blocked()
        async with asyncop.scope() as inner:
            inner.cancel()
            await tx.send_async("hello")
            pytest.fail("the send should have raised")
        await tx.send_async("world")
        await tx.send_async("!")
    assert got == ["world", "!"]


@pytest.mark.asyncop
async def test_an_item_handed_over_survives_the_receivers_cancel(
    autojump_clock: VirtualClock,
) -> None:
    tx, rx = ends(0)
    received: list[object] = []
    scopes: list[asyncop.AsyncOperation[None]] = []

    async def scoped_receiver(*, task_status: TaskStatus[None]) -> None:
        async with asyncop.scope() as inner:
            scopes.append(inner)
            task_status.started()
            received.append(await rx.recv_async())

    async with asyncop.scope() as s:
        await s.start(scoped_receiver)
        await wait_all_blocked()
        tx.try_send("hello")
        scopes[0].cancel()
    assert received == ["hello"]


@pytest.mark.asyncop
async def test_a_rendezvous_sender_cancelled_after_the_hand_over_completes(
    autojump_clock: VirtualClock,
) -> None:
    tx, rx = ends(0)
    async with asyncop.scope() as s:
        op = s.spawn(send_value, tx, "v")
        await wait_all_blocked()
        assert rx.try_recv() == "v"
        op.cancel()
    assert op.state is OperationState.COMPLETED


@pytest.mark.asyncop
async def test_closing_every_receiver_drops_the_buffer(autojump_clock: VirtualClock) -> None:
    tx, rx = ends(5)
    tx.try_send(1)
    rx.close()
    assert tx.statistics().current_buffer_used == 0
    with pytest.raises(BrokenResourceError):
        tx.try_send(2)
    tx.close()
    with pytest.raises(ClosedResourceError):
        tx.try_send(2)


@pytest.mark.asyncop
async def test_unbounded_channel_drains_after_close(autojump_clock: VirtualClock) -> None:
    tx, rx = ends(math.inf)
    async with tx:
        for i in range(10):
            tx.try_send(i)
    assert [item async for item in rx] == list(range(10))
