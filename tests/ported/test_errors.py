"""Exception rules at scope boundaries, ported from asyncio's TaskGroup cases
(KeyboardInterrupt/SystemExit, errors while cancelled, timeouts around groups)
and trio's exception-group filtering cases.
"""

from __future__ import annotations

import threading

import pytest

import asyncop
from asyncop import BrokenResourceError, Cancelled, OperationState
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


class Boom(Exception):
    """A failure raised on purpose."""


async def sleep_forever() -> None:
    await asyncop.sleep(float("inf"))


async def crash_after(delay: float, exc: BaseException) -> None:
    await asyncop.sleep(delay)
    raise exc


@pytest.mark.asyncop
async def test_keyboard_interrupt_wins_over_a_failure_group(autojump_clock: VirtualClock) -> None:
    with pytest.raises(KeyboardInterrupt) as info:
        async with asyncop.scope() as s:
            s.spawn(crash_after, 1, Boom("first"))
            s.spawn(crash_after, 1, KeyboardInterrupt())
    ctx = info.value.__context__
    assert ctx is None or isinstance(ctx, BaseExceptionGroup)


@pytest.mark.asyncop
async def test_keyboard_interrupt_in_body_cancels_children(autojump_clock: VirtualClock) -> None:
    with pytest.raises(KeyboardInterrupt):
        async with asyncop.scope() as s:
            kid = s.spawn(sleep_forever)
            await wait_all_blocked()
            raise KeyboardInterrupt
    assert kid.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_system_exit_from_child(autojump_clock: VirtualClock) -> None:
    with pytest.raises(SystemExit):
        async with asyncop.scope() as s:
            s.spawn(crash_after, 1, SystemExit(2))
            await sleep_forever()


@pytest.mark.asyncop
async def test_timeout_around_a_failing_group(autojump_clock: VirtualClock) -> None:
    # asyncio test_timeout_taskgroup: the failure wins over the timeout that did not fire
    with pytest.raises(ExceptionGroup):
        async with asyncop.scope(timeout=10), asyncop.scope() as s:
            s.spawn(crash_after, 1, Boom())
            s.spawn(sleep_forever)


@pytest.mark.asyncop
async def test_group_timeout_fires_while_children_block(autojump_clock: VirtualClock) -> None:
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=1), asyncop.scope() as s:
            for _ in range(3):
                s.spawn(sleep_forever)
    assert asyncop.current_time() == 1


@pytest.mark.asyncop
async def test_error_in_finally_during_timeout(autojump_clock: VirtualClock) -> None:
    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope(timeout=1):
            try:
                await sleep_forever()
            finally:
                raise Boom("cleanup failed")
    assert isinstance(info.value.exceptions[0], Boom)


@pytest.mark.asyncop
async def test_group_of_only_own_cancelled_is_absorbed(autojump_clock: VirtualClock) -> None:
    after: list[str] = []
    async with asyncop.scope() as s:
        s.cancel()
        try:
            await asyncop.checkpoint()
        except Cancelled as exc:
            raise BaseExceptionGroup("wrapped", [exc]) from None
    after.append("absorbed")
    assert after == ["absorbed"]


@pytest.mark.asyncop
async def test_scope_exit_under_outside_cancel_raises_cancelled(
    autojump_clock: VirtualClock,
) -> None:
    log: list[str] = []

    async def runner() -> None:
        async with asyncop.scope() as s:
            s.spawn(asyncop_nap, 1)
            try:
                await sleep_forever()
            except Cancelled:
                log.append("body cancelled")
        log.append("after block")  # must not run

    async with asyncop.scope() as outer:
        op = outer.spawn(runner)
        await wait_all_blocked()
        op.cancel()
    assert log == ["body cancelled"]


async def _wait_forever() -> None:
    await asyncop.sleep_forever()


async def asyncop_nap(seconds: float) -> None:
    await asyncop.sleep(seconds)


@pytest.mark.asyncop
async def test_lock_broken_for_queued_waiters(autojump_clock: VirtualClock) -> None:
    lock = asyncop.Lock()
    outcomes: list[str] = []

    async def holder() -> None:
        await lock.lock_async()
        await asyncop.sleep(1)

    async def waiter() -> None:
        try:
            async with lock:
                outcomes.append("got it")
        except BrokenResourceError:
            outcomes.append("broken")

    async with asyncop.scope() as s:
        s.spawn(holder)
        await wait_all_blocked()
        s.spawn(waiter)
        s.spawn(waiter)
    assert outcomes == ["broken", "broken"]


def test_sync_scope_in_cancelled_operation_raises_cancelled(vruntime: asyncop.Runtime) -> None:
    started = threading.Event()
    log: list[str] = []

    def worker() -> None:
        with vruntime.scope() as s:
            # Waits for nothing the clock could jump to: a virtual clock
            # jumps while every thread waits inside asyncop, and a nap
            # would end before the cancel comes from this test's thread.
            s.spawn(_wait_forever)
            started.set()
        log.append("after block")

    op = vruntime.spawn(worker)
    assert started.wait(5)
    op.cancel()
    assert op.wait(10).state is OperationState.CANCELLED
    assert log == []


def test_failure_nobody_observed_is_logged(
    vruntime: asyncop.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    import gc

    async def bad() -> None:
        raise Boom("unseen")

    import time

    op = vruntime.spawn(bad)
    deadline = time.monotonic() + 5
    while not op.done and time.monotonic() < deadline:
        time.sleep(0.005)
    assert op.state is OperationState.FAILED  # read without observing the error
    del op
    gc.collect()
    assert any("unseen" in r.getMessage() or "Boom" in r.getMessage() for r in caplog.records) or (
        any(r.exc_info and isinstance(r.exc_info[1], Boom) for r in caplog.records)
    )


@pytest.mark.asyncop
async def test_cancelled_message_names_operation(autojump_clock: VirtualClock) -> None:
    seen: list[Cancelled] = []

    async def child() -> None:
        try:
            await sleep_forever()
        except Cancelled as exc:
            seen.append(exc)
            raise

    async with asyncop.scope() as s:
        op = s.spawn(child, name="worker-7")
        await wait_all_blocked()
        op.cancel("stop")
    assert seen[0].reason == "stop"
    assert seen[0].operation_name == "worker-7"


@pytest.mark.asyncop
async def test_timeout_cancelled_reason_mentions_deadline(autojump_clock: VirtualClock) -> None:
    seen: list[str] = []
    with pytest.raises(TimeoutError):
        async with asyncop.scope(timeout=1):
            try:
                await sleep_forever()
            except Cancelled as exc:
                seen.append(str(exc))
                raise
    assert seen and seen[0]


# -- blocking thread calls made inside a coroutine (they would stall a worker)


def _blocking_calls() -> list[tuple[str, object]]:
    lock = asyncop.Lock()
    sem = asyncop.Semaphore(0)
    ev = asyncop.Event()
    ch: asyncop.Channel[int] = asyncop.Channel(0)
    lim = asyncop.CapacityLimiter(1)
    cond = asyncop.Condition()
    tx, rx = ch.sender(), ch.receiver()
    return [
        ("Lock.acquire", lambda: lock.acquire(0.01)),
        ("Semaphore.acquire", lambda: sem.acquire(0.01)),
        ("Event.wait", lambda: ev.wait(0.01)),
        ("Channel.send", lambda: ch.send(1, timeout=0.01)),
        ("Channel.recv", lambda: ch.recv(timeout=0.01)),
        ("ChannelSender.send", lambda: tx.send(1, timeout=0.01)),
        ("ChannelReceiver.recv", lambda: rx.recv(timeout=0.01)),
        ("CapacityLimiter.acquire", lambda: lim.acquire(0.01)),
        ("Condition.wait", lambda: cond.wait(0.01)),
        (
            "CancelToken.wait",
            lambda: asyncop.current_operation().token.wait(0.01),  # type: ignore[union-attr]
        ),
    ]


@pytest.mark.parametrize(
    "index",
    [pytest.param(i, id=name) for i, (name, _) in enumerate(_blocking_calls())],
)
def test_blocking_call_inside_a_coroutine_is_refused(vruntime: asyncop.Runtime, index: int) -> None:
    # asyncop's rule (and asyncio's advice): a thread-blocking call inside a
    # coroutine raises RuntimeError at once, pointing at the async form.
    name, call = _blocking_calls()[index]

    async def main() -> str:
        try:
            call()  # type: ignore[operator]
        except RuntimeError as exc:
            return f"refused: {exc}"
        except TimeoutError:
            return "blocked the worker until its timeout"
        return "returned"

    outcome = vruntime.run(main)
    assert outcome.startswith("refused"), f"{name}: {outcome}"
