"""Reference: events and channels, on trio and on asyncop."""

from __future__ import annotations

import pytest

from ._adapters import Adapter, Log, run_both

pytestmark = pytest.mark.timeout(30)


def test_event_set_wakes_every_waiter_and_later_waits_return_at_once() -> None:
    """``set()`` wakes every current waiter at once; a wait on a set event does not block."""

    async def scenario(ad: Adapter, log: Log) -> None:
        event = ad.event()

        async def waiter(who: str) -> None:
            await event.wait()
            log(who, "woke")

        async with ad.scope() as s:
            for who in ("w1", "w2", "w3"):
                s.spawn(waiter, who)
            await ad.sleep(2)
            event.set()
        await event.wait()
        log("main", "waited on the set event")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "w1": [(2.0, "woke")],
        "w2": [(2.0, "woke")],
        "w3": [(2.0, "woke")],
        "main": [(2.0, "waited on the set event")],
    }
    assert on_asyncop == on_trio


def test_cancelled_event_waiter_leaves_and_the_others_still_wake() -> None:
    """A waiter cancelled while parked leaves at once; the set still reaches the others."""

    async def scenario(ad: Adapter, log: Log) -> None:
        event = ad.event()

        async def waiter(who: str) -> None:
            try:
                await event.wait()
                log(who, "woke")
            except ad.Cancelled:
                log(who, "cancelled")
                raise

        async with ad.scope() as s:
            s.spawn(waiter, "stays")
            leaving = s.spawn(waiter, "leaves")
            await ad.sleep(1)
            leaving.cancel()
            await ad.sleep(1)
            event.set()

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {"leaves": [(1.0, "cancelled")], "stays": [(2.0, "woke")]}
    assert on_asyncop == on_trio


def test_rendezvous_channel_blocks_the_sender_until_received() -> None:
    """With capacity 0 each send waits for its receive; items arrive in order."""

    async def scenario(ad: Adapter, log: Log) -> None:
        channel = ad.channel(0)

        async def producer() -> None:
            for item in range(3):
                await channel.send(item)
                log("producer", ("sent", item))

        async def consumer() -> None:
            for _ in range(3):
                await ad.sleep(1)
                log("consumer", ("received", await channel.recv()))

        async with ad.scope() as s:
            s.spawn(producer)
            s.spawn(consumer)

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "producer": [(1.0, ("sent", 0)), (2.0, ("sent", 1)), (3.0, ("sent", 2))],
        "consumer": [(1.0, ("received", 0)), (2.0, ("received", 1)), (3.0, ("received", 2))],
    }
    assert on_asyncop == on_trio


def test_buffered_channel_lets_the_sender_run_ahead_by_its_capacity() -> None:
    """With capacity 2 the sender runs two items ahead of the receiver, then waits."""

    async def scenario(ad: Adapter, log: Log) -> None:
        channel = ad.channel(2)

        async def producer() -> None:
            for item in range(5):
                await channel.send(item)
                log("producer", ("sent", item))

        async def consumer() -> None:
            for _ in range(5):
                await ad.sleep(1)
                log("consumer", ("received", await channel.recv()))

        async with ad.scope() as s:
            s.spawn(producer)
            s.spawn(consumer)

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "producer": [
            (0.0, ("sent", 0)),
            (0.0, ("sent", 1)),
            (1.0, ("sent", 2)),
            (2.0, ("sent", 3)),
            (3.0, ("sent", 4)),
        ],
        "consumer": [(float(t), ("received", t - 1)) for t in range(1, 6)],
    }
    assert on_asyncop == on_trio


def test_closed_channel_is_drained_then_ends() -> None:
    """After ``close()`` the receiver gets what was buffered, then ``EndOfChannel``."""

    async def scenario(ad: Adapter, log: Log) -> None:
        channel = ad.channel(3)

        async def consumer() -> None:
            await ad.sleep(1)
            while True:
                try:
                    item = await channel.recv()
                except ad.EndOfChannel:
                    log("consumer", "end of channel")
                    return
                log("consumer", ("received", item))

        async with ad.scope() as s:
            s.spawn(consumer)
            for item in ("a", "b"):
                await channel.send(item)
            channel.close()
            log("main", "closed")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "main": [(0.0, "closed")],
        "consumer": [
            (1.0, ("received", "a")),
            (1.0, ("received", "b")),
            (1.0, "end of channel"),
        ],
    }
    assert on_asyncop == on_trio


def test_closing_wakes_a_parked_receiver_with_end_of_channel() -> None:
    """A receiver parked on an empty channel gets ``EndOfChannel`` when it is closed."""

    async def scenario(ad: Adapter, log: Log) -> None:
        channel = ad.channel(0)

        async def consumer() -> None:
            try:
                await channel.recv()
            except ad.EndOfChannel:
                log("consumer", "end of channel")

        async with ad.scope() as s:
            s.spawn(consumer)
            await ad.sleep(2)
            channel.close()

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {"consumer": [(2.0, "end of channel")]}
    assert on_asyncop == on_trio
