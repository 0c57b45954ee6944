"""Channel: rendezvous and buffered hand-over between tasks and threads."""

from __future__ import annotations

import math
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

import asyncop
from asyncop import (
    Cancelled,
    Channel,
    ClosedResourceError,
    EndOfChannel,
    OperationState,
    WouldBlock,
)
from asyncop.testing import wait_all_blocked

pytestmark = pytest.mark.timeout(20)


# ----------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------


def receivers(ch: Channel[Any]) -> int:
    """How many receivers are queued on ``ch``.

    Threads blocked in ``send``/``recv`` are invisible to ``wait_all_blocked``,
    so tests that need a thread to be queued watch the channel's statistics.
    """
    return ch.statistics().tasks_waiting_receive


def senders(ch: Channel[Any]) -> int:
    """How many senders are queued on ``ch`` (see ``receivers``)."""
    return ch.statistics().tasks_waiting_send


def both_receiving(one: Channel[Any], two: Channel[Any]) -> bool:
    """Whether one receiver is queued on each channel."""
    return receivers(one) == 1 and receivers(two) == 1


def wait_until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``cond`` from a thread until it holds; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {timeout} s")
        time.sleep(0.001)


class Threads:
    """Start plain threads that record their exception; join them all at the end."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self, fn: Callable[[], None]) -> threading.Thread:
        def body() -> None:
            try:
                fn()
            except BaseException as exc:
                self.errors.append(exc)

        thread = threading.Thread(target=body, daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def join(self, timeout: float = 5.0) -> None:
        for thread in self.threads:
            thread.join(timeout)
            assert not thread.is_alive(), "a test thread is still blocked"


@pytest.fixture
def threads() -> Iterator[Threads]:
    pool = Threads()
    yield pool
    pool.join()


def drain(ch: Channel[Any]) -> list[Any]:
    """Take every item left in a closed channel, up to ``EndOfChannel``."""
    items = []
    while True:
        try:
            items.append(ch.try_recv())
        except EndOfChannel:
            return items


# ----------------------------------------------------------------------
# Construction
# ----------------------------------------------------------------------


def test_negative_capacity_raises_value_error() -> None:
    with pytest.raises(ValueError):
        Channel(-1)


def test_default_capacity_is_a_rendezvous() -> None:
    ch: Channel[int] = Channel()
    with pytest.raises(WouldBlock):
        ch.try_send(1)


# ----------------------------------------------------------------------
# Rendezvous (capacity 0)
# ----------------------------------------------------------------------


def test_rendezvous_send_async_completes_only_when_a_receiver_takes_it(
    runtime: asyncop.Runtime,
) -> None:
    ch: Channel[str] = Channel(0)
    log: list[str] = []

    async def sender() -> None:
        await ch.send_async("x")
        log.append("sent")

    async def main() -> list[str]:
        async with asyncop.scope() as s:
            s.spawn(sender)
            await wait_all_blocked()
            before = list(log)
            log.append("got " + await ch.recv_async())
        return before

    assert runtime.run(main) == []
    assert set(log) == {"sent", "got x"}


def test_rendezvous_thread_send_blocks_until_a_receiver_takes_it(threads: Threads) -> None:
    ch: Channel[str] = Channel(0)
    log: list[str] = []

    def sender() -> None:
        ch.send("x", timeout=5)
        log.append("sent")

    threads.start(sender)
    wait_until(lambda: senders(ch) == 1)
    time.sleep(0.02)
    assert log == []
    assert ch.recv(timeout=5) == "x"
    threads.join()
    assert log == ["sent"]


def test_rendezvous_try_send_without_a_receiver_raises_would_block() -> None:
    ch: Channel[int] = Channel(0)
    with pytest.raises(WouldBlock):
        ch.try_send(1)
    with pytest.raises(WouldBlock):
        ch.try_recv()  # and the item was not kept


def test_rendezvous_try_send_hands_the_item_to_a_waiting_receiver(
    runtime: asyncop.Runtime,
) -> None:
    ch: Channel[int] = Channel(0)

    async def receiver() -> int:
        item: int = await ch.recv_async()
        return item

    async def main() -> int:
        async with asyncop.scope() as s:
            op = s.spawn(receiver)
            await wait_all_blocked()
            ch.try_send(7)
        result: int = op.result()
        return result

    assert runtime.run(main) == 7


def test_rendezvous_thread_send_times_out_and_the_item_is_not_delivered() -> None:
    ch: Channel[str] = Channel(0)
    with pytest.raises(TimeoutError):
        ch.send("x", timeout=0.05)
    with pytest.raises(WouldBlock):
        ch.try_recv()
    assert senders(ch) == 0


# ----------------------------------------------------------------------
# Buffered (capacity N)
# ----------------------------------------------------------------------


def test_buffered_channel_holds_capacity_items_without_a_receiver() -> None:
    ch: Channel[int] = Channel(3)
    for i in range(3):
        ch.try_send(i)
    assert len(ch) == 3
    with pytest.raises(WouldBlock):
        ch.try_send(3)
    assert [ch.try_recv() for _ in range(3)] == [0, 1, 2]


def test_try_recv_on_an_empty_channel_raises_would_block() -> None:
    ch: Channel[int] = Channel(2)
    with pytest.raises(WouldBlock):
        ch.try_recv()


def test_thread_recv_times_out_with_timeout_error() -> None:
    ch: Channel[int] = Channel(2)
    with pytest.raises(TimeoutError):
        ch.recv(timeout=0.05)
    assert receivers(ch) == 0
    ch.try_send(1)
    assert ch.try_recv() == 1  # the timed-out receive took nothing


def test_thread_send_times_out_on_a_full_buffer_and_is_not_delivered() -> None:
    ch: Channel[str] = Channel(1)
    ch.send("a", timeout=1)
    with pytest.raises(TimeoutError):
        ch.send("b", timeout=0.05)
    assert ch.recv(timeout=1) == "a"
    with pytest.raises(WouldBlock):
        ch.try_recv()


def test_full_buffer_holds_back_a_sender_task(runtime: asyncop.Runtime) -> None:
    ch: Channel[int] = Channel(2)
    sent: list[int] = []

    async def sender() -> None:
        for i in range(5):
            await ch.send_async(i)
            sent.append(i)

    async def main() -> list[list[int]]:
        snapshots = []
        async with asyncop.scope() as s:
            s.spawn(sender)
            await wait_all_blocked()
            snapshots.append(list(sent))
            snapshots.append([await ch.recv_async()])
            await wait_all_blocked()
            snapshots.append(list(sent))
            for _ in range(4):
                await ch.recv_async()
        return snapshots

    assert runtime.run(main) == [[0, 1], [0], [0, 1, 2]]


def test_full_buffer_holds_back_a_sender_thread(threads: Threads) -> None:
    ch: Channel[int] = Channel(2)
    sent: list[int] = []

    def sender() -> None:
        for i in range(5):
            ch.send(i, timeout=5)
            sent.append(i)

    threads.start(sender)
    wait_until(lambda: senders(ch) == 1)
    assert sent == [0, 1]
    assert ch.recv(timeout=5) == 0
    wait_until(lambda: len(sent) == 3 and senders(ch) == 1)
    assert sent == [0, 1, 2]
    assert [ch.recv(timeout=5) for _ in range(4)] == [1, 2, 3, 4]
    threads.join()


# ----------------------------------------------------------------------
# Both directions, tasks and threads, FIFO
# ----------------------------------------------------------------------


@pytest.mark.parametrize("capacity", [0, 3])
@pytest.mark.parametrize("producer", ["task", "thread"])
@pytest.mark.parametrize("consumer", ["task", "thread"])
def test_items_arrive_in_order_between_tasks_and_threads(
    runtime: asyncop.Runtime, threads: Threads, capacity: int, producer: str, consumer: str
) -> None:
    ch: Channel[int] = Channel(capacity)
    count = 200
    got: list[int] = []

    async def produce_task() -> None:
        for i in range(count):
            await ch.send_async(i)
        ch.close()

    def produce_thread() -> None:
        for i in range(count):
            ch.send(i, timeout=5)
        ch.close()

    async def consume_task() -> None:
        while True:
            try:
                got.append(await ch.recv_async())
            except EndOfChannel:
                return

    def consume_thread() -> None:
        while True:
            try:
                got.append(ch.recv(timeout=5))
            except EndOfChannel:
                return

    ops = []
    if consumer == "task":
        ops.append(runtime.spawn(consume_task))
    else:
        threads.start(consume_thread)
    if producer == "task":
        ops.append(runtime.spawn(produce_task))
    else:
        threads.start(produce_thread)
    for op in ops:
        assert op.wait(10).state is OperationState.COMPLETED
    threads.join()
    assert threads.errors == []
    assert got == list(range(count))


def test_several_senders_each_keep_their_own_order(runtime: asyncop.Runtime) -> None:
    ch: Channel[tuple[str, int]] = Channel(2)

    async def sender(name: str) -> None:
        for i in range(50):
            await ch.send_async((name, i))

    async def main() -> list[tuple[str, int]]:
        got = []
        async with asyncop.scope() as s:
            for name in "ABC":
                s.spawn(sender, name)
            for _ in range(150):
                got.append(await ch.recv_async())
        return got

    got = runtime.run(main)
    for name in "ABC":
        assert [i for who, i in got if who == name] == list(range(50))


def test_queued_senders_deliver_in_queue_order(runtime: asyncop.Runtime) -> None:
    ch: Channel[str] = Channel(0)

    async def sender(item: str) -> None:
        await ch.send_async(item)

    async def main() -> list[str]:
        got = []
        async with asyncop.scope() as s:
            for item in "ABCD":
                s.spawn(sender, item)
                await wait_all_blocked()
            for _ in range(4):
                got.append(await ch.recv_async())
        return got

    assert runtime.run(main) == ["A", "B", "C", "D"]


def test_queued_receivers_are_served_in_queue_order(runtime: asyncop.Runtime) -> None:
    ch: Channel[int] = Channel(0)
    got: dict[str, int] = {}

    async def receiver(name: str) -> None:
        got[name] = await ch.recv_async()

    async def main() -> None:
        async with asyncop.scope() as s:
            for name in "ABCD":
                s.spawn(receiver, name)
                await wait_all_blocked()
            for i in range(4):
                await ch.send_async(i)

    runtime.run(main)
    assert got == {"A": 0, "B": 1, "C": 2, "D": 3}


# ----------------------------------------------------------------------
# close()
# ----------------------------------------------------------------------


def test_send_after_close_raises_closed_resource_error() -> None:
    ch: Channel[int] = Channel(2)
    ch.close()
    with pytest.raises(ClosedResourceError):
        ch.send(1, timeout=1)


def test_try_send_after_close_raises_closed_resource_error() -> None:
    ch: Channel[int] = Channel(0)
    ch.close()
    with pytest.raises(ClosedResourceError):
        ch.try_send(1)


def test_send_async_after_close_raises_closed_resource_error(runtime: asyncop.Runtime) -> None:
    ch: Channel[int] = Channel(2)
    ch.close()

    async def main() -> None:
        await ch.send_async(1)

    with pytest.raises(ClosedResourceError):
        runtime.run(main)
    assert len(ch) == 0


def test_recv_drains_the_buffer_after_close_then_raises_end_of_channel(
    runtime: asyncop.Runtime,
) -> None:
    ch: Channel[int] = Channel(4)
    for i in range(3):
        ch.send(i, timeout=1)
    ch.close()
    assert ch.recv(timeout=1) == 0
    assert ch.try_recv() == 1

    async def main() -> int:
        item: int = await ch.recv_async()
        return item

    assert runtime.run(main) == 2
    with pytest.raises(EndOfChannel):
        ch.recv(timeout=1)
    with pytest.raises(EndOfChannel):
        ch.try_recv()
    with pytest.raises(EndOfChannel):
        runtime.run(main)


def test_closing_twice_is_harmless() -> None:
    ch: Channel[int] = Channel(2)
    ch.try_send(1)
    ch.close()
    ch.close()
    assert ch.closed
    assert drain(ch) == [1]


def test_close_wakes_a_blocked_sender_task_with_closed_resource_error(
    runtime: asyncop.Runtime,
) -> None:
    ch: Channel[str] = Channel(1)
    ch.try_send("a")
    caught: list[str] = []

    async def sender() -> None:
        try:
            await ch.send_async("b")
        except ClosedResourceError:
            caught.append("closed")

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(sender)
            await wait_all_blocked()
            ch.close()

    runtime.run(main)
    assert caught == ["closed"]
    assert drain(ch) == ["a"]  # the blocked sender's item was not delivered


def test_close_wakes_a_blocked_sender_thread_with_closed_resource_error(
    threads: Threads,
) -> None:
    ch: Channel[str] = Channel(0)
    caught: list[str] = []

    def sender() -> None:
        try:
            ch.send("x", timeout=5)
        except ClosedResourceError:
            caught.append("closed")

    threads.start(sender)
    wait_until(lambda: senders(ch) == 1)
    ch.close()
    threads.join()
    assert caught == ["closed"]
    assert drain(ch) == []


def test_close_wakes_a_blocked_receiver_task_with_end_of_channel(
    runtime: asyncop.Runtime,
) -> None:
    ch: Channel[str] = Channel(0)
    caught: list[str] = []

    async def receiver() -> None:
        try:
            await ch.recv_async()
        except EndOfChannel:
            caught.append("end")

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(receiver)
            await wait_all_blocked()
            ch.close()

    runtime.run(main)
    assert caught == ["end"]


def test_close_wakes_a_blocked_receiver_thread_with_end_of_channel(threads: Threads) -> None:
    ch: Channel[str] = Channel(3)
    caught: list[str] = []

    def receiver() -> None:
        try:
            ch.recv(timeout=5)
        except EndOfChannel:
            caught.append("end")

    threads.start(receiver)
    wait_until(lambda: receivers(ch) == 1)
    ch.close()
    threads.join()
    assert caught == ["end"]


# ----------------------------------------------------------------------
# Iteration
# ----------------------------------------------------------------------


def test_async_for_iterates_until_closed_and_drained(runtime: asyncop.Runtime) -> None:
    ch: Channel[int] = Channel(2)

    async def producer() -> None:
        for i in range(10):
            await ch.send_async(i)
        ch.close()

    async def main() -> list[int]:
        got = []
        async with asyncop.scope() as s:
            s.spawn(producer)
            async for item in ch:
                got.append(item)
        return got

    assert runtime.run(main) == list(range(10))


def test_plain_for_iterates_until_closed_and_drained(runtime: asyncop.Runtime) -> None:
    ch: Channel[int] = Channel(0)

    async def producer() -> None:
        for i in range(10):
            await ch.send_async(i)
        ch.close()

    op = runtime.spawn(producer)
    got = list(ch)
    assert op.wait(5).state is OperationState.COMPLETED
    assert got == list(range(10))


def test_plain_for_over_a_closed_buffered_channel_yields_what_is_left() -> None:
    ch: Channel[int] = Channel(3)
    for i in range(3):
        ch.try_send(i)
    ch.close()
    assert list(ch) == [0, 1, 2]
    assert list(ch) == []


# ----------------------------------------------------------------------
# Cancelled receivers and senders
# ----------------------------------------------------------------------


def test_cancelled_queued_receiver_does_not_eat_the_item(runtime: asyncop.Runtime) -> None:
    ch: Channel[str] = Channel(0)
    got: dict[str, str] = {}

    async def receiver(name: str) -> None:
        got[name] = await ch.recv_async()

    async def main() -> tuple[OperationState, OperationState]:
        async with asyncop.scope() as s:
            a = s.spawn(receiver, "A")
            await wait_all_blocked()
            b = s.spawn(receiver, "B")
            await wait_all_blocked()
            a.cancel()
            ch.try_send("x")  # must go to B, the live receiver
        return a.state, b.state

    assert runtime.run(main) == (OperationState.CANCELLED, OperationState.COMPLETED)
    assert got == {"B": "x"}


def test_item_sent_after_the_only_receiver_was_cancelled_stays_buffered(
    runtime: asyncop.Runtime,
) -> None:
    ch: Channel[str] = Channel(1)

    async def receiver() -> None:
        await ch.recv_async()

    async def main() -> OperationState:
        async with asyncop.scope() as s:
            a = s.spawn(receiver)
            await wait_all_blocked()
            a.cancel()
            ch.try_send("x")
        return a.state

    assert runtime.run(main) is OperationState.CANCELLED
    assert ch.try_recv() == "x"


def test_rendezvous_try_send_after_the_only_receiver_was_cancelled_would_block(
    runtime: asyncop.Runtime,
) -> None:
    ch: Channel[str] = Channel(0)

    async def receiver() -> None:
        await ch.recv_async()

    async def main() -> str:
        async with asyncop.scope() as s:
            a = s.spawn(receiver)
            await wait_all_blocked()
            a.cancel()
            try:
                ch.try_send("x")
            except WouldBlock:
                return "would block"
        return "taken"

    assert runtime.run(main) == "would block"


def test_cancelled_sender_task_item_is_never_delivered_rendezvous(
    runtime: asyncop.Runtime,
) -> None:
    ch: Channel[str] = Channel(0)

    async def sender() -> None:
        await ch.send_async("x")

    async def main() -> OperationState:
        async with asyncop.scope() as s:
            a = s.spawn(sender)
            await wait_all_blocked()
            a.cancel()
            await asyncop.race(a)
        return a.state

    assert runtime.run(main) is OperationState.CANCELLED
    with pytest.raises(WouldBlock):
        ch.try_recv()
    ch.close()
    assert drain(ch) == []


def test_cancelled_sender_task_item_is_never_delivered_buffered(
    runtime: asyncop.Runtime,
) -> None:
    ch: Channel[str] = Channel(1)
    ch.try_send("a")

    async def sender() -> None:
        await ch.send_async("b")

    async def main() -> OperationState:
        async with asyncop.scope() as s:
            a = s.spawn(sender)
            await wait_all_blocked()
            a.cancel()
            await asyncop.race(a)
        return a.state

    assert runtime.run(main) is OperationState.CANCELLED
    assert ch.try_recv() == "a"
    with pytest.raises(WouldBlock):
        ch.try_recv()
    ch.close()
    assert drain(ch) == []


def test_cancelled_receiver_raises_cancelled_at_the_await(runtime: asyncop.Runtime) -> None:
    ch: Channel[str] = Channel(0)
    log: list[str] = []

    async def receiver() -> None:
        try:
            await ch.recv_async()
        except Cancelled:
            log.append("cancelled")
            raise

    async def main() -> None:
        async with asyncop.scope() as s:
            a = s.spawn(receiver)
            await wait_all_blocked()
            a.cancel()

    runtime.run(main)
    assert log == ["cancelled"]


@pytest.mark.timeout(30)
def test_cancel_racing_a_send_never_loses_the_item(runtime: asyncop.Runtime) -> None:
    ch: Channel[int] = Channel(1)
    got: list[int] = []

    async def receiver() -> None:
        got.append(await ch.recv_async())

    for i in range(200):
        op = runtime.spawn(receiver)
        wait_until(lambda: receivers(ch) == 1)
        canceller = threading.Thread(target=op.cancel)
        canceller.start()
        ch.try_send(i)
        canceller.join(5)
        op.wait(5)
        assert op.done
        if got and got[-1] == i:
            with pytest.raises(WouldBlock):
                ch.try_recv()
        else:
            assert ch.try_recv() == i, f"item {i} was lost"
    assert receivers(ch) == 0


@pytest.mark.timeout(30)
def test_cancel_racing_a_receive_never_duplicates_or_loses_the_item(
    runtime: asyncop.Runtime,
) -> None:
    ch: Channel[int] = Channel(0)
    sent: list[int] = []
    received: list[int] = []

    async def sender(i: int) -> None:
        await ch.send_async(i)
        sent.append(i)

    for i in range(200):
        op = runtime.spawn(sender, i)
        wait_until(lambda: senders(ch) == 1)
        canceller = threading.Thread(target=op.cancel)
        canceller.start()
        try:
            received.append(ch.try_recv())
        except WouldBlock:
            pass
        canceller.join(5)
        op.wait(5)
        assert op.done
        # The receive took the item exactly when the send completed.
        assert (i in received) == (i in sent), f"item {i}: sent={i in sent}"
    assert senders(ch) == 0


# ----------------------------------------------------------------------
# select over receives
# ----------------------------------------------------------------------


def test_select_over_two_ready_receives_leaves_the_loser_its_item(
    runtime: asyncop.Runtime,
) -> None:
    one: Channel[str] = Channel(0)
    two: Channel[str] = Channel(0)

    async def sender(ch: Channel[str], item: str) -> None:
        await ch.send_async(item)

    async def main() -> tuple[tuple[int, str], str, str]:
        async with asyncop.scope() as s:
            s.spawn(sender, one, "one")
            s.spawn(sender, two, "two")
            await wait_all_blocked()
            index, value = await asyncop.select(one.recv_async(), two.recv_async())
            loser = two if index == 0 else one
            left = await loser.recv_async()
            await wait_all_blocked()
            try:
                extra = (one if index == 0 else two).try_recv()
            except WouldBlock:
                extra = "nothing"
        return (index, value), left, extra

    (index, value), left, extra = runtime.run(main)
    assert {value, left} == {"one", "two"}
    assert value == ("one", "two")[index]
    assert extra == "nothing"


def test_select_over_buffered_receives_leaves_the_loser_its_item(
    runtime: asyncop.Runtime,
) -> None:
    one: Channel[str] = Channel(1)
    two: Channel[str] = Channel(1)
    one.try_send("one")
    two.try_send("two")

    async def main() -> tuple[int, str]:
        result: tuple[int, str] = await asyncop.select(one.recv_async(), two.recv_async())
        return result

    index, value = runtime.run(main)
    assert value == ("one", "two")[index]
    loser = two if index == 0 else one
    assert loser.try_recv() == ("one", "two")[1 - index]


@pytest.mark.timeout(30)
def test_parked_select_takes_one_item_and_the_other_send_finds_no_receiver(
    runtime: asyncop.Runtime,
) -> None:
    for _ in range(100):
        one: Channel[str] = Channel(0)
        two: Channel[str] = Channel(0)

        async def selector(one: Channel[str] = one, two: Channel[str] = two) -> tuple[int, str]:
            result: tuple[int, str] = await asyncop.select(one.recv_async(), two.recv_async())
            return result

        op = runtime.spawn(selector)
        wait_until(partial(both_receiving, one, two))
        outcomes = []
        for ch, item in ((one, "a"), (two, "b")):
            try:
                ch.try_send(item)
                outcomes.append("delivered")
            except WouldBlock:
                outcomes.append("would block")
        assert outcomes == ["delivered", "would block"]
        assert op.wait(5).value == (0, "a")


@pytest.mark.timeout(30)
def test_parked_select_on_buffered_channels_leaves_the_loser_its_item(
    runtime: asyncop.Runtime,
) -> None:
    for _ in range(100):
        one: Channel[str] = Channel(1)
        two: Channel[str] = Channel(1)

        async def selector(one: Channel[str] = one, two: Channel[str] = two) -> tuple[int, str]:
            result: tuple[int, str] = await asyncop.select(one.recv_async(), two.recv_async())
            return result

        op = runtime.spawn(selector)
        wait_until(partial(both_receiving, one, two))
        one.try_send("a")
        two.try_send("b")
        assert op.wait(5).value == (0, "a")
        assert two.try_recv() == "b"
        with pytest.raises(WouldBlock):
            one.try_recv()


# ----------------------------------------------------------------------
# Misuse
# ----------------------------------------------------------------------


def test_blocking_recv_inside_a_coroutine_raises_and_names_recv_async(
    runtime: asyncop.Runtime,
) -> None:
    ch: Channel[int] = Channel(1)
    ch.try_send(1)

    async def main() -> None:
        ch.recv(timeout=1)

    with pytest.raises(RuntimeError, match="recv_async"):
        runtime.run(main)
    assert ch.try_recv() == 1


def test_blocking_send_inside_a_coroutine_raises_and_names_send_async(
    runtime: asyncop.Runtime,
) -> None:
    ch: Channel[int] = Channel(1)

    async def main() -> None:
        ch.send(1, timeout=1)

    with pytest.raises(RuntimeError, match="send_async"):
        runtime.run(main)
    with pytest.raises(WouldBlock):
        ch.try_recv()


# ----------------------------------------------------------------------
# Stress: tasks and threads on both ends, consumers cancelled at random
# ----------------------------------------------------------------------


class Ledger:
    """What happened to each item, recorded from tasks and threads alike."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.attempted: list[Any] = []
        self.sent: list[Any] = []
        self.failed: list[Any] = []
        self.received: list[Any] = []

    def record(self, kind: str, item: Any) -> None:
        with self.lock:
            getattr(self, kind).append(item)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("capacity", [0, 1, 8])
def test_stress_every_sent_item_is_received_exactly_once(
    runtime: asyncop.Runtime, threads: Threads, capacity: int
) -> None:
    seed = int(os.environ.get("ASYNCOP_SEED", random.randrange(2**32)))
    print(f"stress seed: ASYNCOP_SEED={seed} (capacity {capacity})")
    rng = random.Random(seed)
    ch: Channel[tuple[str, int]] = Channel(capacity)
    ledger = Ledger()
    per_producer = int(os.environ.get("ASYNCOP_STRESS_ITEMS", 4000))

    async def producer_task(name: str) -> None:
        for i in range(per_producer):
            item = (name, i)
            ledger.record("attempted", item)
            try:
                await ch.send_async(item)
            except (Cancelled, ClosedResourceError):
                ledger.record("failed", item)
                raise
            ledger.record("sent", item)

    def producer_thread(name: str, local_seed: int) -> None:
        local = random.Random(local_seed)
        for i in range(per_producer):
            item = (name, i)
            ledger.record("attempted", item)
            try:
                if local.random() < 0.2:
                    ch.try_send(item)
                else:
                    ch.send(item, timeout=local.choice([0.001, 0.01, 1.0]))
            except (WouldBlock, TimeoutError):
                ledger.record("failed", item)
                continue
            ledger.record("sent", item)

    async def consumer_task(use_select: bool) -> None:
        while True:
            try:
                if use_select:
                    index, item = await asyncop.select(ch.recv_async(), asyncop.sleep(0.001))
                    if index == 1:
                        continue
                else:
                    item = await ch.recv_async()
            except EndOfChannel:
                return
            ledger.record("received", item)

    def consumer_thread(local_seed: int) -> None:
        local = random.Random(local_seed)
        while True:
            try:
                if local.random() < 0.3:
                    item = ch.try_recv()
                else:
                    item = ch.recv(timeout=local.choice([0.001, 0.01]))
            except (WouldBlock, TimeoutError):
                time.sleep(0)
                continue
            except EndOfChannel:
                return
            ledger.record("received", item)

    producers = [runtime.spawn(producer_task, f"task{k}") for k in range(3)]
    seeds = [rng.randrange(2**32) for _ in range(4)]
    for k in range(2):
        threads.start(partial(producer_thread, f"thread{k}", seeds[k]))
    consumers = [runtime.spawn(consumer_task, k % 2 == 0) for k in range(4)]
    for k in range(2, 4):
        threads.start(partial(consumer_thread, seeds[k]))

    # Cancel consumer tasks at random while the producers run, and now and
    # then a producer task, replacing each cancelled consumer.
    started = time.monotonic()
    cancelled_producer = False
    while not all(op.done for op in producers) or any(t.is_alive() for t in threads.threads[:2]):
        assert time.monotonic() - started < 30, f"producers stuck (seed {seed})"
        time.sleep(rng.uniform(0, 0.002))
        victim = rng.randrange(len(consumers))
        consumers[victim].cancel()
        consumers[victim] = runtime.spawn(consumer_task, rng.random() < 0.5)
        if not cancelled_producer and rng.random() < 0.05:
            producers[rng.randrange(len(producers))].cancel()
            cancelled_producer = True

    ch.close()
    for op in producers + consumers:
        op.wait(10)
        assert op.done, f"an operation did not end (seed {seed})"
    threads.join(10)
    assert threads.errors == [], f"seed {seed}"
    for item in drain(ch):
        ledger.record("received", item)

    attempted, sent, failed = set(ledger.attempted), set(ledger.sent), set(ledger.failed)
    received = ledger.received
    assert len(attempted) == len(ledger.attempted), f"an item attempted twice (seed {seed})"
    assert sent.isdisjoint(failed), f"an item both sent and failed (seed {seed})"
    assert sent | failed == attempted, f"an item with no outcome (seed {seed})"
    assert len(received) == len(set(received)), f"an item received twice (seed {seed})"
    lost = sent - set(received)
    assert not lost, f"{len(lost)} sent items were never received, e.g. {min(lost)} (seed {seed})"
    ghosts = set(received) - sent
    assert not ghosts, f"received items that were never sent: {sorted(ghosts)[:5]} (seed {seed})"


def test_cancelled_task_does_not_take_a_buffered_item(runtime: asyncop.Runtime) -> None:
    ch: Channel[str] = Channel(1)
    ch.try_send("x")
    never = asyncop.Event()
    log: list[str] = []

    async def victim() -> None:
        try:
            await never.wait_async()
        except Cancelled:
            log.append("cancelled")
        try:
            log.append("took " + await ch.recv_async())  # level-triggered: refused
        except Cancelled:
            log.append("refused the item")
            raise

    async def main() -> None:
        async with asyncop.scope() as s:
            a = s.spawn(victim)
            await wait_all_blocked()
            a.cancel()

    runtime.run(main)
    assert log == ["cancelled", "refused the item"]
    assert ch.try_recv() == "x"


def test_a_channel_of_infinite_capacity_never_makes_a_sender_wait(
    vruntime: asyncop.Runtime,
) -> None:
    ch: asyncop.Channel[int] = asyncop.Channel(math.inf)

    async def main() -> list[int]:
        for i in range(10_000):
            await ch.send_async(i)
        for i in range(10_000, 10_010):
            ch.try_send(i)  # never WouldBlock
        return [await ch.recv_async() for _ in range(10_010)]

    assert vruntime.run(main) == list(range(10_010))
    ch.send(1, timeout=0)  # nor does a thread's
    assert ch.recv(timeout=0) == 1


@pytest.mark.parametrize("capacity", [1.5, -math.inf, math.nan, "3"])
def test_a_capacity_that_is_neither_an_int_nor_inf_is_refused(capacity: object) -> None:
    with pytest.raises((TypeError, ValueError), match=r"Channel"):
        asyncop.Channel(capacity)  # type: ignore[arg-type]
