"""asyncop's blocking calls are cancellation points inside sync operations.

A plain function running as an operation (or the block of a sync
``with runtime.scope()``) that blocks in ``Channel.send/recv``,
``Lock.acquire``, ``Semaphore.acquire``, ``Event.wait``, ``op.wait`` or
``token.wait`` raises ``Cancelled`` promptly when its operation is cancelled
or its deadline passes. A value handed over before the cancel is kept, and
the next call that has to wait raises. A plain thread only blocks.
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs
import pytest

import asyncop
from asyncop import Cancelled, OperationState, WouldBlock

pytestmark = pytest.mark.timeout(60)

# How long a blocked thread may take to notice its cancel: the promise is
# 10 ms; the bound is generous because the test machine may be loaded.
PROMPT = 1.0


@attrs.define
class Blocker:
    """One blocking call on a fresh primitive, and how to check it lost nothing."""

    block: Callable[[], Any]
    check: Callable[[], None]
    # Make the blocked call succeed: hand it its item, permit, lock, ...
    satisfy: Callable[[], None]
    cleanup: Callable[[], None] = lambda: None


def _recv(rt: asyncop.Runtime) -> Blocker:
    ch: asyncop.Channel[int] = asyncop.Channel(0)

    def check() -> None:
        # The cancelled receive ate nothing: the next item reaches a new receiver.
        got: list[int] = []
        taker = threading.Thread(target=lambda: got.append(ch.recv(5)))
        taker.start()
        ch.send(7, timeout=5)
        taker.join(5)
        assert got == [7]

    return Blocker(ch.recv, check, lambda: ch.send(1, timeout=5))


def _buffered_recv(rt: asyncop.Runtime) -> Blocker:
    ch: asyncop.Channel[int] = asyncop.Channel(2)

    def check() -> None:
        ch.try_send(7)
        assert ch.try_recv() == 7

    return Blocker(ch.recv, check, lambda: ch.try_send(1))


def _send(rt: asyncop.Runtime) -> Blocker:
    ch: asyncop.Channel[int] = asyncop.Channel(0)

    def check() -> None:
        with pytest.raises(WouldBlock):
            ch.try_recv()  # the cancelled send left no item behind

    return Blocker(lambda: ch.send(1), check, lambda: ch.recv(5))


def _buffered_send(rt: asyncop.Runtime) -> Blocker:
    ch: asyncop.Channel[int] = asyncop.Channel(1)
    ch.try_send(0)

    def check() -> None:
        assert ch.try_recv() == 0
        with pytest.raises(WouldBlock):
            ch.try_recv()

    return Blocker(lambda: ch.send(1), check, lambda: ch.recv(5))


def _lock(rt: asyncop.Runtime) -> Blocker:
    lock = asyncop.Lock("contended")
    holder_has_it = threading.Event()
    let_go = threading.Event()

    def hold() -> None:
        with lock:
            holder_has_it.set()
            let_go.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holder_has_it.wait(5)

    def check() -> None:
        let_go.set()
        holder.join(5)
        assert not lock.locked(), "a cancelled acquire left the lock held"
        assert lock.acquire(timeout=1)
        lock.release()

    def satisfy() -> None:
        let_go.set()
        holder.join(5)  # released: handed to the waiter, if one is queued

    def block() -> bool:
        got = lock.acquire()
        lock.release()
        return got

    return Blocker(block, check, satisfy, cleanup=let_go.set)


def _semaphore(rt: asyncop.Runtime) -> Blocker:
    sem = asyncop.Semaphore(0)

    def check() -> None:
        assert sem.value == 0
        sem.release()
        assert sem.value == 1, "a cancelled acquire ate a permit"

    return Blocker(sem.acquire, check, sem.release)


def _event(rt: asyncop.Runtime) -> Blocker:
    event = asyncop.Event()

    def check() -> None:
        assert not event.is_set()

    return Blocker(event.wait, check, event.set)


def _op_wait(rt: asyncop.Runtime) -> Blocker:
    gate = threading.Event()
    other = rt.spawn(gate.wait, 10, name="other")

    def check() -> None:
        assert not other.done
        gate.set()
        assert other.wait(5).state is OperationState.COMPLETED

    def satisfy() -> None:
        gate.set()
        other.wait(5)

    return Blocker(other.wait, check, satisfy, cleanup=gate.set)


def _token_wait(rt: asyncop.Runtime) -> Blocker:
    gate = threading.Event()
    other = rt.spawn(gate.wait, 10, name="other")

    def check() -> None:
        assert not other.token.cancelled
        gate.set()
        other.wait(5)

    def satisfy() -> None:
        other.cancel()
        gate.set()

    return Blocker(other.token.wait, check, satisfy, cleanup=gate.set)


BLOCKERS: dict[str, Callable[[asyncop.Runtime], Blocker]] = {
    "channel_recv": _recv,
    "buffered_recv": _buffered_recv,
    "channel_send": _send,
    "buffered_send": _buffered_send,
    "lock_acquire": _lock,
    "semaphore_acquire": _semaphore,
    "event_wait": _event,
    "op_wait": _op_wait,
    "token_wait": _token_wait,
}


def _spawn_blocked(rt: asyncop.Runtime, blocker: Blocker) -> asyncop.AsyncOperation:
    started = threading.Event()

    def work() -> Any:
        started.set()
        return blocker.block()

    op = rt.spawn(work, name="blocked")
    assert started.wait(5)
    time.sleep(0.05)  # let it park
    return op


@pytest.mark.parametrize("kind", sorted(BLOCKERS))
def test_cancel_wakes_a_sync_operation_blocked_in_the_call(kind: str) -> None:
    with asyncop.Runtime(4, name=kind) as rt:
        blocker = BLOCKERS[kind](rt)
        try:
            op = _spawn_blocked(rt, blocker)
            assert not op.done, "the call did not block"
            start = time.monotonic()
            op.cancel("test")
            result = op.wait(5)
            elapsed = time.monotonic() - start
            assert result.state is OperationState.CANCELLED
            assert elapsed < PROMPT, f"the cancel took {elapsed:.3f} s to end the wait"
            blocker.check()
        finally:
            blocker.cleanup()


@pytest.mark.parametrize("kind", sorted(BLOCKERS))
def test_a_scope_deadline_ends_a_child_blocked_in_the_call_with_timeout_error(kind: str) -> None:
    with asyncop.Runtime(4, name=kind) as rt:
        blocker = BLOCKERS[kind](rt)
        try:
            start = time.monotonic()
            with pytest.raises(TimeoutError), rt.scope(timeout=0.1) as root:
                root.spawn(blocker.block)
            elapsed = time.monotonic() - start
            assert elapsed < 0.1 + PROMPT, f"the scope took {elapsed:.3f} s"
            blocker.check()
        finally:
            blocker.cleanup()


@pytest.mark.parametrize("kind", sorted(BLOCKERS))
def test_a_sync_scope_block_blocked_in_the_call_leaves_at_its_deadline(kind: str) -> None:
    with asyncop.Runtime(4, name=kind) as rt:
        blocker = BLOCKERS[kind](rt)
        try:
            start = time.monotonic()
            with pytest.raises(TimeoutError), rt.scope(timeout=0.1):
                blocker.block()
                pytest.fail("the block went on after its deadline")
            assert time.monotonic() - start < 0.1 + PROMPT
            blocker.check()
        finally:
            blocker.cleanup()


@pytest.mark.parametrize("kind", sorted(BLOCKERS))
def test_a_value_handed_over_before_the_cancel_is_kept_and_the_next_wait_raises(
    kind: str,
) -> None:
    with asyncop.Runtime(4, name=kind) as rt:
        blocker = BLOCKERS[kind](rt)
        second = BLOCKERS[kind](rt)
        log: list[object] = []
        try:
            started = threading.Event()

            def work() -> None:
                started.set()
                log.append(("first", blocker.block()))
                # The operation is cancelled by now: a call that has to wait
                # raises at once instead of blocking.
                try:
                    second.block()
                except Cancelled:
                    log.append("second raised")
                    raise

            op = rt.spawn(work)
            assert started.wait(5)
            time.sleep(0.05)
            # Hand the value over, then cancel at once: most often before
            # the woken thread runs again.
            blocker.satisfy()
            op.cancel()
            assert op.wait(5).state is OperationState.CANCELLED
            assert len(log) == 2 and log[0][0] == "first" and log[1] == "second raised", log  # type: ignore[index]
            second.check()
        finally:
            blocker.cleanup()
            second.cleanup()


@pytest.mark.parametrize("kind", sorted(BLOCKERS))
def test_a_plain_thread_only_blocks_whatever_the_runtime_cancels(kind: str) -> None:
    with asyncop.Runtime(4, name=kind) as rt:
        blocker = BLOCKERS[kind](rt)
        results: list[object] = []
        thread = threading.Thread(target=lambda: results.append(blocker.block()))
        thread.start()
        try:
            time.sleep(0.05)
            for op in rt._roots:
                if op.name != "other":
                    op.cancel()
            time.sleep(0.1)
            assert thread.is_alive(), "a plain thread's wait was ended by a cancel"
            blocker.satisfy()
            thread.join(5)
            assert not thread.is_alive()
            assert len(results) == 1
        finally:
            blocker.cleanup()


def test_a_call_that_needs_no_wait_completes_in_a_cancelled_operation() -> None:
    """Cleanup code in a cancelled operation may still take a free lock."""
    lock = asyncop.Lock()
    ch: asyncop.Channel[int] = asyncop.Channel(1)
    ch.try_send(5)
    event = asyncop.Event()
    event.set()
    sem = asyncop.Semaphore(1)
    log: list[object] = []
    with asyncop.Runtime(2) as rt:

        def work() -> None:
            op = asyncop.current_operation()
            assert op is not None
            op.cancel()
            with lock:
                log.append("lock")
            log.append(ch.recv())
            log.append(event.wait())
            log.append(sem.acquire())
            log.append(op.token.wait())
            op.token.check()

        assert rt.spawn(work).wait(5).state is OperationState.CANCELLED
    assert log == ["lock", 5, True, True, True]


def test_the_issue_example_a_sender_in_a_timed_scope_stops_at_the_deadline() -> None:
    ch: asyncop.Channel[int] = asyncop.Channel(1)
    sent: list[int] = []

    def produce() -> None:
        for i in range(100):
            ch.send(i)
            sent.append(i)

    with asyncop.Runtime(2) as rt:
        start = time.monotonic()
        with pytest.raises(TimeoutError), rt.scope(timeout=0.1) as root:
            root.spawn(produce)
        assert time.monotonic() - start < 0.1 + PROMPT
    assert sent == [0]
    assert ch.try_recv() == 0


def test_waiting_on_the_own_token_returns_true_at_the_cancel() -> None:
    with asyncop.Runtime(2) as rt:

        def work() -> bool:
            op = asyncop.current_operation()
            assert op is not None
            return op.token.wait()

        op = rt.spawn(work)
        time.sleep(0.05)
        op.cancel()
        # The cancel is what it waited for: the wait returns True, the
        # function returns, and its value is kept.
        result = op.wait(5)
        assert result.state is OperationState.COMPLETED and result.value is True


def test_a_cancelled_waiter_leaves_no_registration_on_its_token() -> None:
    ch: asyncop.Channel[int] = asyncop.Channel(0)
    with asyncop.Runtime(2) as rt:

        def work() -> None:
            op = asyncop.current_operation()
            assert op is not None
            for _ in range(50):
                with pytest.raises(TimeoutError):
                    ch.recv(timeout=0.001)
            assert not op.token._waiters

        assert rt.spawn(work).wait(10).state is OperationState.COMPLETED
    assert not ch.statistics().tasks_waiting_receive


# ----------------------------------------------------------------------
# Random timing: cancels racing hand-overs never lose or duplicate anything
# ----------------------------------------------------------------------


def _stress(seed: int) -> None:
    rng = random.Random(seed)
    capacity = rng.choice([0, 1, 3])
    ch: asyncop.Channel[int] = asyncop.Channel(capacity)
    lock = asyncop.Lock("stress")
    permits = rng.randint(1, 3)
    sem = asyncop.Semaphore(permits)
    sent: list[int] = []
    received: list[int] = []
    inside = [0]
    violations: list[str] = []
    record = threading.Lock()
    counter = itertools.count()

    def check() -> None:
        # A call that completes without waiting completes even when
        # cancelled: loops that may never wait poll the token, as sync work must.
        op = asyncop.current_operation()
        assert op is not None
        op.token.check()

    def producer() -> None:
        while True:
            check()
            item = next(counter)
            ch.send(item)  # raises Cancelled: then not sent
            with record:
                sent.append(item)

    def consumer() -> None:
        while True:
            check()
            item = ch.recv()
            with record:
                received.append(item)

    def locker() -> None:
        while True:
            check()
            lock.acquire()
            try:
                inside[0] += 1
                if inside[0] != 1:
                    violations.append("two holders of the lock")
                time.sleep(0)
                inside[0] -= 1
            finally:
                lock.release()

    def permit_taker() -> None:
        while True:
            check()
            sem.acquire()
            try:
                time.sleep(rng.random() * 0.001)
            finally:
                sem.release()

    kinds = [producer, consumer, locker, permit_taker]
    with asyncop.Runtime(6, name=f"stress-{seed}") as rt:
        live: list[asyncop.AsyncOperation] = []
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            live = [op for op in live if not op.done]
            if len(live) < 8:
                op = rt.spawn(rng.choice(kinds))
                if rng.random() < 0.3:
                    op.deadline = rt.now() + rng.random() * 0.01
                live.append(op)
            if live and rng.random() < 0.5:
                rng.choice(live).cancel()
            time.sleep(rng.random() * 0.003)
        for op in live:
            op.cancel()
        for op in live:
            assert op.wait(10).state.final, f"seed {seed}: an operation stayed blocked"
    left: list[int] = []
    while True:
        try:
            left.append(ch.try_recv())
        except WouldBlock:
            break
    assert not violations, f"seed {seed}: {violations}"
    assert sorted(received + left) == sorted(sent), (
        f"seed {seed}: items lost or invented: sent {len(sent)}, "
        f"received {len(received)}, left {len(left)}"
    )
    assert len(set(received)) == len(received), f"seed {seed}: an item was received twice"
    assert not lock.locked(), f"seed {seed}: a cancelled acquire left the lock held"
    assert sem.value == permits, f"seed {seed}: permits {sem.value}, expected {permits}"
    ghosts = (
        ch.statistics().tasks_waiting_receive,
        lock.statistics().tasks_waiting,
        sem.statistics().tasks_waiting,
    )
    assert ghosts == (0, 0, 0), f"seed {seed}: ghosts"


@pytest.mark.parametrize("run", range(3))
def test_random_cancels_never_lose_items_locks_or_permits(run: int) -> None:
    seed = int(os.environ.get("ASYNCOP_SEED", random.randrange(2**32))) + run
    try:
        _stress(seed)
    except BaseException:
        print(f"stress seed: {seed}")
        raise
