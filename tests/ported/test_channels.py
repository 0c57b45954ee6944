"""Memory channels, ported from trio's memory-channel cases and anyio's
memory-object-stream cases (and asyncio's Queue cases where they fit).

Mapping: ``trio.open_memory_channel(n)`` -> ``ch = asyncop.Channel(n)`` with
``ch.sender()`` / ``ch.receiver()``; ``send_nowait``/``receive_nowait`` ->
``try_send``/``try_recv``; ``trio.EndOfChannel`` -> ``asyncop.EndOfChannel``.
"""

from __future__ import annotations

import math
import threading

import pytest

import asyncop
from asyncop import (
    BrokenResourceError,
    Channel,
    ClosedResourceError,
    EndOfChannel,
    OperationState,
    WouldBlock,
)
from asyncop.testing import VirtualClock, assert_checkpoints, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


@pytest.mark.asyncop
async def test_buffered_send_and_receive(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(1)
    tx, rx = ch.sender(), ch.receiver()
    await tx.send_async(1)
    with pytest.raises(WouldBlock):
        tx.try_send(2)
    assert await rx.recv_async() == 1
    with pytest.raises(WouldBlock):
        rx.try_recv()


@pytest.mark.asyncop
async def test_rendezvous_needs_a_receiver(autojump_clock: VirtualClock) -> None:
    ch: Channel[str] = Channel(0)
    with pytest.raises(WouldBlock):
        ch.try_send("x")

    async def receiver() -> str:
        return await ch.recv_async()

    async with asyncop.scope() as s:
        op = s.spawn(receiver)
        await wait_all_blocked()
        ch.try_send("x")  # a waiting receiver takes it at once
    assert op.result() == "x"


@pytest.mark.asyncop
async def test_rendezvous_send_blocks_until_received(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(0)
    log: list[str] = []

    async def sender() -> None:
        await ch.send_async(1)
        log.append("sent")

    async with asyncop.scope() as s:
        s.spawn(sender)
        await asyncop.sleep(5)
        assert log == []
        assert await ch.recv_async() == 1
    assert log == ["sent"]


@pytest.mark.asyncop
async def test_fifo_items(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(10)
    for i in range(10):
        ch.try_send(i)
    assert len(ch) == 10
    assert [ch.try_recv() for _ in range(10)] == list(range(10))


@pytest.mark.asyncop
async def test_fifo_receivers(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(0)
    got: list[tuple[int, int]] = []

    async def receiver(i: int) -> None:
        got.append((i, await ch.recv_async()))

    async with asyncop.scope() as s:
        for i in range(3):
            s.spawn(receiver, i)
            await wait_all_blocked()
        for v in (10, 11, 12):
            await ch.send_async(v)
    assert got == [(0, 10), (1, 11), (2, 12)]


@pytest.mark.asyncop
async def test_fifo_senders(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(0)

    async def sender(v: int) -> None:
        await ch.send_async(v)

    async with asyncop.scope() as s:
        for v in range(4):
            s.spawn(sender, v)
            await wait_all_blocked()
        got = [await ch.recv_async() for _ in range(4)]
    assert got == [0, 1, 2, 3]


@pytest.mark.asyncop
async def test_send_and_receive_are_checkpoints(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(1)
    with assert_checkpoints():
        await ch.send_async(1)
    with assert_checkpoints():
        await ch.recv_async()


@pytest.mark.asyncop
async def test_close_channel_drains_then_ends(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(3)
    ch.try_send(1)
    ch.try_send(2)
    ch.close()
    assert ch.closed
    with pytest.raises(ClosedResourceError):
        await ch.send_async(3)
    with pytest.raises(ClosedResourceError):
        ch.try_send(3)
    assert await ch.recv_async() == 1
    assert ch.try_recv() == 2
    with pytest.raises(EndOfChannel):
        await ch.recv_async()
    with pytest.raises(EndOfChannel):
        ch.try_recv()
    ch.close()  # twice is harmless


@pytest.mark.asyncop
async def test_async_for_ends_at_close(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(0)
    got: list[int] = []

    async def consumer() -> None:
        async for item in ch:
            got.append(item)

    async with asyncop.scope() as s:
        s.spawn(consumer)
        for i in range(3):
            await ch.send_async(i)
        ch.close()
    assert got == [0, 1, 2]


def test_plain_for_from_a_thread(vruntime: asyncop.Runtime) -> None:
    ch: Channel[int] = Channel(2)

    async def producer() -> None:
        for i in range(5):
            await ch.send_async(i)
        ch.close()

    op = vruntime.spawn(producer)
    assert list(ch) == [0, 1, 2, 3, 4]
    op.wait(5)


@pytest.mark.asyncop
async def test_close_wakes_blocked_receiver(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(0)

    async def receiver() -> None:
        with pytest.raises(EndOfChannel):
            await ch.recv_async()

    async with asyncop.scope() as s:
        op = s.spawn(receiver)
        await wait_all_blocked()
        ch.close()
    op.result()


@pytest.mark.asyncop
async def test_close_wakes_blocked_sender(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(0)

    async def sender() -> None:
        with pytest.raises(ClosedResourceError):
            await ch.send_async(1)

    async with asyncop.scope() as s:
        op = s.spawn(sender)
        await wait_all_blocked()
        ch.close()
    op.result()


@pytest.mark.asyncop
async def test_last_sender_close_ends_receivers_after_drain(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(5)
    tx, rx = ch.sender(), ch.receiver()
    tx2 = tx.clone()
    await tx.send_async(1)
    await tx.aclose()
    await tx2.send_async(2)
    tx2.close()
    assert [await rx.recv_async(), await rx.recv_async()] == [1, 2]
    with pytest.raises(EndOfChannel):
        await rx.recv_async()


@pytest.mark.asyncop
async def test_last_sender_close_wakes_waiting_receivers(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(0)
    tx, rx = ch.sender(), ch.receiver()
    results: list[str] = []

    async def receiver(r: asyncop.ChannelReceiver[int]) -> None:
        try:
            await r.recv_async()
        except EndOfChannel:
            results.append("end")

    async with asyncop.scope() as s:
        s.spawn(receiver, rx)
        s.spawn(receiver, rx.clone())
        await wait_all_blocked()
        tx.close()
    assert results == ["end", "end"]


@pytest.mark.asyncop
async def test_last_receiver_close_breaks_senders(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(0)
    tx, rx = ch.sender(), ch.receiver()
    rx2 = rx.clone()
    errors: list[str] = []

    async def sender() -> None:
        try:
            await tx.send_async(1)
        except BrokenResourceError:
            errors.append("broken")

    async with asyncop.scope() as s:
        s.spawn(sender)
        await wait_all_blocked()
        rx.close()
        await wait_all_blocked()
        assert errors == []
        rx2.close()
    assert errors == ["broken"]
    with pytest.raises(BrokenResourceError):
        tx.try_send(2)
    with pytest.raises(BrokenResourceError):
        await tx.send_async(2)


@pytest.mark.asyncop
async def test_closed_end_raises_closed_resource_error(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(1)
    tx, rx = ch.sender(), ch.receiver()
    tx_keep = tx.clone()
    rx_keep = rx.clone()
    tx.close()
    rx.close()
    assert tx.closed and rx.closed
    with pytest.raises(ClosedResourceError):
        tx.try_send(1)
    with pytest.raises(ClosedResourceError):
        await tx.send_async(1)
    with pytest.raises(ClosedResourceError):
        rx.try_recv()
    with pytest.raises(ClosedResourceError):
        await rx.recv_async()
    with pytest.raises(ClosedResourceError):
        tx.clone()
    with pytest.raises(ClosedResourceError):
        rx.clone()
    tx.close()  # twice is harmless
    rx.close()
    tx_keep.try_send(5)
    assert rx_keep.try_recv() == 5


@pytest.mark.asyncop
async def test_ends_as_context_managers(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(1)
    rx = ch.receiver()
    async with ch.sender() as tx:
        await tx.send_async(1)
    assert tx.closed
    with rx:
        assert rx.try_recv() == 1
        with pytest.raises(EndOfChannel):
            rx.try_recv()
    assert rx.closed


@pytest.mark.asyncop
async def test_receiver_async_for_over_an_end(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(0)
    tx, rx = ch.sender(), ch.receiver()
    got: list[int] = []

    async def producer(t: asyncop.ChannelSender[int]) -> None:
        async with t:
            for i in range(3):
                await t.send_async(i)

    async def consumer() -> None:
        async for item in rx:
            got.append(item)

    async with asyncop.scope() as s:
        s.spawn(producer, tx.clone())
        s.spawn(producer, tx.clone())
        tx.close()
        s.spawn(consumer)
    assert sorted(got) == [0, 0, 1, 1, 2, 2]


@pytest.mark.asyncop
async def test_closing_the_sender_while_a_receiver_waits_in_for(
    autojump_clock: VirtualClock,
) -> None:
    ch: Channel[int] = Channel(0)
    tx, rx = ch.sender(), ch.receiver()
    done: list[str] = []

    async def consumer() -> None:
        async for _ in rx:
            pass
        done.append("done")

    async with asyncop.scope() as s:
        s.spawn(consumer)
        await wait_all_blocked()
        await tx.aclose()
    assert done == ["done"]


@pytest.mark.asyncop
async def test_cancelled_receive_takes_nothing(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(0)

    async def receiver() -> int:
        return await ch.recv_async()

    async with asyncop.scope() as s:
        a = s.spawn(receiver)
        await wait_all_blocked()
        b = s.spawn(receiver)
        await wait_all_blocked()
        a.cancel()
        await wait_all_blocked()
        await ch.send_async(7)
    assert a.state is OperationState.CANCELLED
    assert b.result() == 7


@pytest.mark.asyncop
async def test_cancelled_send_sends_nothing(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(0)

    async def sender(v: int) -> None:
        await ch.send_async(v)

    async with asyncop.scope() as s:
        a = s.spawn(sender, 1)
        await wait_all_blocked()
        s.spawn(sender, 2)
        await wait_all_blocked()
        a.cancel()
        await wait_all_blocked()
        assert await ch.recv_async() == 2
    with pytest.raises(WouldBlock):
        ch.try_recv()


@pytest.mark.asyncop
async def test_item_handed_over_then_cancelled_is_kept(autojump_clock: VirtualClock) -> None:
    # anyio test_cancel_during_receive_after_send_nowait: the item is not lost.
    ch: Channel[int] = Channel(0)

    async def receiver() -> int:
        return await ch.recv_async()

    async with asyncop.scope() as s:
        op = s.spawn(receiver)
        await wait_all_blocked()
        ch.try_send(42)
        op.cancel()
    assert op.state is OperationState.COMPLETED
    assert op.result() == 42


@pytest.mark.asyncop
async def test_timeout_on_receive(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(1)
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=1):
            await ch.recv_async()
    ch.try_send(1)
    assert ch.try_recv() == 1


def test_bad_capacities() -> None:
    with pytest.raises(ValueError):
        Channel(-1)
    with pytest.raises(TypeError):
        Channel(1.5)  # type: ignore[arg-type]


def test_infinite_capacity() -> None:
    # trio accepts open_memory_channel(math.inf) for an unbounded buffer.
    ch: Channel[int] = Channel(math.inf)
    for i in range(1000):
        ch.try_send(i)
    assert len(ch) == 1000


def test_channel_between_threads() -> None:
    ch: Channel[int] = Channel(2)
    got: list[int] = []

    def consumer() -> None:
        for item in ch:
            got.append(item)

    t = threading.Thread(target=consumer)
    t.start()
    for i in range(50):
        ch.send(i, timeout=5)
    ch.close()
    t.join(5)
    assert got == list(range(50))


def test_thread_send_and_recv_timeouts() -> None:
    ch: Channel[int] = Channel(1)
    ch.send(1, timeout=0)
    with pytest.raises(TimeoutError):
        ch.send(2, timeout=0.01)
    assert ch.recv(timeout=0) == 1
    with pytest.raises(TimeoutError):
        ch.recv(timeout=0.01)


def test_thread_end_ops() -> None:
    ch: Channel[int] = Channel(1)
    tx, rx = ch.sender(), ch.receiver()
    tx.send(1, timeout=1)
    assert rx.recv(timeout=1) == 1
    tx.close()
    with pytest.raises(EndOfChannel):
        rx.recv(timeout=1)


def test_blocking_send_inside_coroutine_is_refused(vruntime: asyncop.Runtime) -> None:
    ch: Channel[int] = Channel(1)

    async def main() -> None:
        with pytest.raises(RuntimeError):
            ch.send(1)
        with pytest.raises(RuntimeError):
            ch.recv()

    vruntime.run(main)


@pytest.mark.asyncop
async def test_many_producers_and_consumers(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(3)
    tx, rx = ch.sender(), ch.receiver()
    got: list[int] = []

    async def producer(t: asyncop.ChannelSender[int], base: int) -> None:
        async with t:
            for i in range(20):
                await t.send_async(base + i)
                await asyncop.sleep(0.01)

    async def consumer(r: asyncop.ChannelReceiver[int]) -> None:
        async with r:
            async for item in r:
                got.append(item)

    async with asyncop.scope() as s, tx, rx:
        for p in range(3):
            s.spawn(producer, tx.clone(), p * 100)
        for _ in range(2):
            s.spawn(consumer, rx.clone())
    assert sorted(got) == sorted(p * 100 + i for p in range(3) for i in range(20))


@pytest.mark.asyncop
async def test_receive_after_close_of_all_receivers_clone(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(2)
    tx, rx = ch.sender(), ch.receiver()
    tx.try_send(1)
    rx.close()
    # trio: with every receiver closed, sends raise BrokenResourceError
    with pytest.raises(BrokenResourceError):
        tx.try_send(2)


@pytest.mark.asyncop
async def test_close_channel_wakes_ends(autojump_clock: VirtualClock) -> None:
    ch: Channel[int] = Channel(0)
    tx, rx = ch.sender(), ch.receiver()
    outcomes: list[str] = []

    async def receiver() -> None:
        try:
            await rx.recv_async()
        except EndOfChannel:
            outcomes.append("end")

    async with asyncop.scope() as s:
        s.spawn(receiver)
        await wait_all_blocked()
        ch.close()
    assert outcomes == ["end"]
    with pytest.raises(ClosedResourceError):
        await tx.send_async(1)


@pytest.mark.asyncop
async def test_select_receive_from_two_channels(autojump_clock: VirtualClock) -> None:
    a: Channel[str] = Channel(1)
    b: Channel[str] = Channel(1)

    async def later() -> None:
        await asyncop.sleep(1)
        await b.send_async("b")

    async with asyncop.scope() as s:
        s.spawn(later)
        assert await asyncop.select(a.recv_async(), b.recv_async()) == (1, "b")
    a.try_send("a")
    assert a.try_recv() == "a"


def test_primitives_work_across_two_runtimes() -> None:
    ev = asyncop.Event()
    ch: Channel[int] = Channel(0)

    async def waiter() -> int:
        await ev.wait_async()
        return await ch.recv_async()

    async def setter() -> None:
        await asyncop.sleep(0.01)
        ev.set()
        await ch.send_async(5)

    with asyncop.Runtime(1, name="rtA") as a, asyncop.Runtime(1, name="rtB") as b:
        op = a.spawn(waiter)
        op2 = b.spawn(setter)
        assert op.wait(10).value == 5
        assert op2.wait(10).state is OperationState.COMPLETED
