"""Channel ends: ``sender()``/``receiver()``, ``clone()``, ``close()``, from tasks and threads."""

from __future__ import annotations

import threading

import pytest

import asyncop
from asyncop import (
    BrokenResourceError,
    Channel,
    ChannelReceiver,
    ChannelSender,
    ClosedResourceError,
    EndOfChannel,
    WouldBlock,
)
from asyncop.testing import wait_all_blocked
from tests.runtime.test_channel import wait_until

pytestmark = pytest.mark.timeout(20)


def test_receivers_drain_then_end_when_every_sender_is_closed() -> None:
    ch: Channel[int] = Channel(5)
    tx, rx = ch.sender(), ch.receiver()
    tx2 = tx.clone()
    tx.try_send(1)
    tx.close()
    tx2.try_send(2)  # one sender is still open
    assert not ch.closed
    tx2.close()
    assert ch.closed
    assert [rx.try_recv(), rx.try_recv()] == [1, 2]
    with pytest.raises(EndOfChannel):
        rx.try_recv()


def test_senders_break_when_every_receiver_is_closed() -> None:
    ch: Channel[int] = Channel(5)
    tx, rx = ch.sender(), ch.receiver()
    rx2 = rx.clone()
    tx.try_send(1)
    rx.close()
    tx.try_send(2)  # one receiver is still open
    rx2.close()
    with pytest.raises(BrokenResourceError):
        tx.try_send(3)
    with pytest.raises(BrokenResourceError):
        tx.send(3, timeout=1)
    assert len(ch) == 0  # the buffered items were dropped


def test_a_closed_end_raises_closed_resource_error_for_every_use() -> None:
    ch: Channel[int] = Channel(5)
    tx, rx = ch.sender(), ch.receiver()
    keep_tx, keep_rx = tx.clone(), rx.clone()
    tx.close()
    rx.close()
    assert tx.closed and rx.closed and not keep_tx.closed
    for use in (
        lambda: tx.try_send(1),
        lambda: tx.send(1),
        lambda: tx.send_async(1),
        tx.clone,
        rx.try_recv,
        rx.recv,
        rx.recv_async,
        rx.clone,
    ):
        with pytest.raises(ClosedResourceError, match="clone one before closing"):
            use()
    tx.close()  # twice is harmless
    keep_tx.try_send(5)
    assert keep_rx.try_recv() == 5


def test_context_managers_close_the_ends() -> None:
    ch: Channel[str] = Channel(1)
    with ch.sender() as tx, ch.receiver() as rx:
        tx.send("x")
        assert rx.recv() == "x"
    assert tx.closed and rx.closed and ch.closed


def test_async_with_closes_and_async_for_ends(vruntime: asyncop.Runtime) -> None:
    async def producer(tx: ChannelSender[int], n: int) -> None:
        async with tx:
            for i in range(3):
                await tx.send_async(n * 10 + i)
                await asyncop.sleep(0.01)

    async def main() -> list[int]:
        ch: Channel[int] = Channel()
        got: list[int] = []
        async with asyncop.scope() as s:
            tx = ch.sender()
            for n in range(3):
                s.spawn(producer, tx.clone(), n)
            tx.close()
            async with ch.receiver() as rx:
                async for item in rx:
                    got.append(item)
        return got

    assert sorted(vruntime.run(main)) == [0, 1, 2, 10, 11, 12, 20, 21, 22]


def test_blocked_task_receiver_gets_end_of_channel_when_the_last_sender_closes(
    vruntime: asyncop.Runtime,
) -> None:
    async def main() -> str:
        ch: Channel[int] = Channel()
        tx, rx = ch.sender(), ch.receiver()

        async def receive() -> str:
            try:
                await rx.recv_async()
            except EndOfChannel:
                return "end"
            return "item"

        async with asyncop.scope() as s:
            op = s.spawn(receive)
            await wait_all_blocked()
            tx.close()
        return str(op.result())

    assert vruntime.run(main) == "end"


def test_blocked_task_sender_gets_broken_when_the_last_receiver_closes(
    vruntime: asyncop.Runtime,
) -> None:
    async def main() -> list[str]:
        ch: Channel[int] = Channel()
        tx, rx = ch.sender(), ch.receiver()
        log: list[str] = []

        async def send(item: int) -> None:
            try:
                await tx.send_async(item)
            except BrokenResourceError:
                log.append(f"broken {item}")

        async with asyncop.scope() as s:
            s.spawn(send, 1)
            s.spawn(send, 2)
            await wait_all_blocked()
            rx.close()
        return log

    assert sorted(vruntime.run(main)) == ["broken 1", "broken 2"]


def blocked_thread_send(
    ch: Channel[int], tx: ChannelSender[int]
) -> tuple[threading.Thread, list[BaseException]]:
    """A thread blocked sending 1 through ``tx``, and the list its error goes to."""
    errors: list[BaseException] = []

    def send() -> None:
        try:
            tx.send(1, timeout=10)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=send)
    thread.start()
    wait_until(lambda: ch.statistics().tasks_waiting_send == 1)
    return thread, errors


def test_thread_sender_blocked_in_send_gets_broken() -> None:
    ch: Channel[int] = Channel()
    tx, rx = ch.sender(), ch.receiver()
    thread, errors = blocked_thread_send(ch, tx)
    rx.close()
    thread.join(10)
    assert len(errors) == 1 and isinstance(errors[0], BrokenResourceError)


def test_thread_receiver_iterates_until_every_sender_is_closed() -> None:
    ch: Channel[int] = Channel(2)
    tx, rx = ch.sender(), ch.receiver()
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.extend(rx))
    thread.start()
    for clone_index in range(3):
        with tx.clone() as mine:
            mine.send(clone_index, timeout=10)
    tx.close()
    thread.join(10)
    assert not thread.is_alive()
    assert got == [0, 1, 2]


def test_try_forms_raise_would_block_like_the_channel() -> None:
    ch: Channel[int] = Channel(1)
    tx, rx = ch.sender(), ch.receiver()
    with pytest.raises(WouldBlock):
        rx.try_recv()
    tx.try_send(1)
    with pytest.raises(WouldBlock):
        tx.try_send(2)


def test_a_task_and_a_thread_talk_through_ends(runtime: asyncop.Runtime) -> None:
    requests: Channel[int] = Channel()
    replies: Channel[int] = Channel()

    async def server(rx: ChannelReceiver[int], tx: ChannelSender[int]) -> None:
        with rx, tx:
            async for n in rx:
                await tx.send_async(n * n)

    op = runtime.spawn(server, requests.receiver(), replies.sender())
    tx, rx = requests.sender(), replies.receiver()
    for n in range(5):
        tx.send(n, timeout=10)
        assert rx.recv(timeout=10) == n * n
    tx.close()
    op.wait(10)
    with pytest.raises(EndOfChannel):
        rx.recv(timeout=10)


def test_ends_made_after_the_channel_closed_see_it_closed() -> None:
    ch: Channel[int] = Channel(1)
    ch.sender().close()
    late = ch.sender()
    with pytest.raises(ClosedResourceError):
        late.try_send(1)
    assert repr(late).startswith("<ChannelSender open of <Channel closed")


def test_the_repr_counts_open_ends_apart_from_blocked_waiters() -> None:
    ch: Channel[int] = Channel(0, name="jobs")
    assert "ends" not in repr(ch)  # no end made yet: the channel is used directly
    tx, rx, rx2 = ch.sender(), ch.receiver(), ch.receiver()
    waiter = threading.Thread(target=lambda: rx.recv(timeout=10), daemon=True)
    waiter.start()
    wait_until(lambda: "receive_waiters=1" in repr(ch))
    text = repr(ch)
    assert "sender_ends=1 receiver_ends=2 send_waiters=0 receive_waiters=1" in text, text
    assert "'jobs'" in text
    tx.send(1, timeout=10)
    waiter.join(10)
    rx2.close()
    assert "sender_ends=1 receiver_ends=1 send_waiters=0 receive_waiters=0" in repr(ch)


def test_aclose_closes_the_end_in_a_task(vruntime: asyncop.Runtime) -> None:
    async def main() -> bool:
        ch: Channel[int] = Channel(1)
        tx = ch.sender()
        await tx.aclose()
        return tx.closed and ch.closed

    assert vruntime.run(main)


# -- closing one end while clones stay open ------------------------------------


def test_closing_an_end_fails_the_thread_receive_blocked_on_it_only() -> None:
    ch: Channel[int] = Channel()
    tx, rx = ch.sender(), ch.receiver()
    other = rx.clone()
    results: dict[str, object] = {}

    def recv(name: str, end: ChannelReceiver[int]) -> None:
        try:
            results[name] = end.recv(timeout=10)
        except BaseException as exc:
            results[name] = exc

    threads = [
        threading.Thread(target=recv, args=("closed", rx)),
        threading.Thread(target=recv, args=("open", other)),
    ]
    for thread in threads:
        thread.start()
    wait_until(lambda: ch.statistics().tasks_waiting_receive == 2)
    rx.close()
    threads[0].join(10)
    assert isinstance(results["closed"], ClosedResourceError)
    assert "receiver end" in str(results["closed"])
    tx.send(7, timeout=10)  # the clone still receives
    threads[1].join(10)
    assert results["open"] == 7
    other.close()
    tx.close()


def test_closing_an_end_fails_the_thread_send_blocked_on_it_and_sends_nothing() -> None:
    ch: Channel[int] = Channel()
    tx, rx = ch.sender(), ch.receiver()
    keep = tx.clone()
    thread, errors = blocked_thread_send(ch, tx)
    tx.close()
    thread.join(10)
    assert len(errors) == 1 and isinstance(errors[0], ClosedResourceError)
    assert not ch.closed  # a clone is still open
    with pytest.raises(WouldBlock):
        rx.try_recv()  # the item of the failed send never arrives
    keep.close()
    with pytest.raises(EndOfChannel):
        rx.try_recv()


def test_closing_an_end_ends_an_async_for_over_it(vruntime: asyncop.Runtime) -> None:
    ch: Channel[int] = Channel(1)
    tx, rx = ch.sender(), ch.receiver()
    other = rx.clone()

    async def main() -> list[object]:
        log: list[object] = []

        async def consume() -> None:
            try:
                async for item in rx:
                    log.append(item)
            except ClosedResourceError:
                log.append("closed")

        async with asyncop.scope() as s:
            s.spawn(consume)
            await tx.send_async(1)
            await wait_all_blocked()
            rx.close()
            await wait_all_blocked()
            await tx.send_async(2)  # buffered, for the clone
        log.append(other.try_recv())
        return log

    assert vruntime.run(main) == [1, "closed", 2]
    tx.close()
    other.close()


def test_ends_forget_the_waits_that_completed(vruntime: asyncop.Runtime) -> None:
    ch: Channel[int] = Channel()
    tx, rx = ch.sender(), ch.receiver()

    async def send(end: ChannelSender[int], item: int) -> None:
        await end.send_async(item)

    async def main() -> None:
        async with asyncop.scope() as s:
            for i in range(20):
                s.spawn(send, tx, i)
            await wait_all_blocked()
            got = [await rx.recv_async() for _ in range(20)]
        assert sorted(got) == list(range(20))
        assert not tx._waiting and not rx._waiting

    vruntime.run(main)
