"""Cancel with a grace period, from the user's side: ask first, cancel when the grace runs out."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import asyncop
from asyncop import Cancelled, OperationState
from asyncop.testing import VirtualClock, wait_all_blocked
from tests.conftest import runtime_threads

pytestmark = pytest.mark.timeout(20)


def me() -> asyncop.AsyncOperation[Any]:
    return asyncop.current_operation(require=True)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(autojump=True)


@pytest.fixture
def rt(clock: VirtualClock) -> Iterator[asyncop.Runtime]:
    """A runtime on an autojumping virtual clock, checked for leftovers after the test."""
    runtime = asyncop.Runtime(2, name=f"grace{id(object()):x}", clock=clock)
    try:
        yield runtime
        assert "no live operations" in runtime.dump()
        assert runtime.registrations() == 0, "a timer or a wait was left registered"
    finally:
        assert runtime.shutdown(timeout=10), "runtime did not shut down in 10 s"
        assert runtime_threads(runtime) == []


async def until_stop_requested(log: list[str], value: str = "finished") -> str:
    await asyncop.wait_stop_requested()
    log.append(f"asked at {asyncop.current_time():g}")
    return value


async def forever() -> None:
    await asyncop.sleep_forever()


async def ignoring(log: list[str]) -> None:
    try:
        await asyncop.sleep(1000)
    finally:
        log.append(f"ended at {asyncop.current_time():g}")


# -- the request, then the cancel ----------------------------------------------


def test_callback_that_polls_stop_requested_and_returns_ends_completed(
    rt: asyncop.Runtime,
) -> None:
    started = threading.Event()
    seen: list[bool] = []

    def polite(op: asyncop.AsyncOperation[Any], context: None) -> str:
        started.set()
        while not op.token.stop_requested:
            time.sleep(0.001)
        seen.append(op.token.cancelled)
        seen.append(asyncop.stop_requested())
        return "tidied up"

    op = rt.submit(rt.create(polite))
    assert started.wait(5)
    assert op.token.stop_requested is False
    op.cancel("deploy", grace=30)
    assert op.token.stop_requested is True
    assert op.token.cancelled is False  # asked, not cancelled
    assert op.wait(5).value == "tidied up"
    assert op.state is OperationState.COMPLETED
    assert seen == [False, True]
    assert op.cancel_reason is None  # it was never cancelled


def test_task_ignoring_the_request_is_cancelled_when_the_grace_runs_out(
    rt: asyncop.Runtime,
) -> None:
    log: list[str] = []

    async def main() -> tuple[OperationState, object]:
        child = me().spawn(ignoring, log, name="ignoring")
        await asyncop.sleep(1)
        child.cancel("deploy", grace=5)
        await asyncop.sleep(4.5)
        assert log == [] and not child.token.cancelled
        await asyncio_wait(child)
        return child.state, child.cancel_reason

    assert rt.run(main) == (OperationState.CANCELLED, "deploy")
    assert log == ["ended at 6"]


async def asyncio_wait(op: asyncop.AsyncOperation[Any]) -> None:
    """Wait for ``op`` to end, whatever its outcome."""
    await asyncop.race(op)


def test_task_that_returns_within_the_grace_ends_completed_with_its_value(
    rt: asyncop.Runtime,
) -> None:
    log: list[str] = []

    async def main() -> tuple[str, OperationState, bool]:
        child = me().spawn(until_stop_requested, log, "saved")
        await asyncop.sleep(2)
        child.cancel(grace=10)
        value = await child
        return value, child.state, child.token.cancelled

    assert rt.run(main) == ("saved", OperationState.COMPLETED, False)
    assert log == ["asked at 2"]


def test_the_request_reaches_nested_scopes_and_children_spawned_after_it(
    rt: asyncop.Runtime,
) -> None:
    seen: dict[str, bool] = {}

    async def deep() -> None:
        async with asyncop.scope(name="inner"):
            seen["inner, before"] = asyncop.stop_requested()
            await asyncop.wait_stop_requested()
            seen["inner, after"] = asyncop.stop_requested()
            me().spawn(late)

    async def late() -> None:
        seen["spawned after the request"] = asyncop.stop_requested()

    async def bystander() -> None:
        await asyncop.sleep(3)
        seen["outside the subtree"] = asyncop.stop_requested()

    async def main() -> None:
        async with asyncop.scope(name="outer") as outer:
            target = outer.spawn(deep)
            outer.spawn(bystander)
            await asyncop.sleep(1)
            target.cancel(grace=60)

    rt.run(main)
    assert seen == {
        "inner, before": False,
        "inner, after": True,
        "spawned after the request": True,
        "outside the subtree": False,
    }


def test_a_shielded_scope_is_neither_asked_nor_cancelled_from_above(
    rt: asyncop.Runtime,
) -> None:
    log: list[str] = []

    async def cleanup() -> None:
        await asyncop.wait_stop_requested()  # asked: go to the cleanup
        async with asyncop.scope(shield=True) as shielded:
            log.append(f"shielded sees a request: {asyncop.stop_requested()}")
            await asyncop.sleep(20)  # outlives the grace
            log.append(f"cleanup done at {asyncop.current_time():g}")
            shielded.cancel("its own", grace=1)
            log.append(f"its own request: {asyncop.stop_requested()}")
        await asyncop.checkpoint()  # cancelled meanwhile, when the grace ran out

    async def main() -> OperationState:
        child = me().spawn(cleanup)
        await asyncop.sleep(1)
        child.cancel(grace=5)
        await asyncio_wait(child)
        return child.state

    assert rt.run(main) is OperationState.CANCELLED
    assert log == [
        "shielded sees a request: False",
        "cleanup done at 21",
        "its own request: True",
    ]


def test_dropping_a_shield_lets_a_pending_request_in(rt: asyncop.Runtime) -> None:
    log: list[str] = []

    async def waiter() -> None:
        async with asyncop.scope(shield=True):
            await asyncop.wait_stop_requested()
            log.append(f"woken at {asyncop.current_time():g}")

    async def main() -> None:
        async with asyncop.scope() as outer:
            child = outer.spawn(waiter)
            await asyncop.sleep(1)
            outer.cancel(grace=100)
            await asyncop.sleep(1)
            assert log == []
            [shielded] = child.children()
            shielded.shield = False

    rt.run(main)
    assert log == ["woken at 2"]


def test_grace_zero_cancels_at_once(rt: asyncop.Runtime) -> None:
    log: list[str] = []

    async def main() -> None:
        child = me().spawn(ignoring, log)
        await asyncop.sleep(1)
        child.cancel("now", grace=0)
        assert child.token.cancelled
        await asyncio_wait(child)

    rt.run(main)
    assert log == ["ended at 1"]


def test_a_second_cancel_without_grace_cancels_at_once(rt: asyncop.Runtime) -> None:
    log: list[str] = []

    async def main() -> object:
        child = me().spawn(ignoring, log)
        await asyncop.sleep(1)
        child.cancel("first", grace=50)
        await asyncop.sleep(2)
        child.cancel("second")
        await asyncio_wait(child)
        return child.cancel_reason

    assert rt.run(main) == "second"
    assert log == ["ended at 3"]


@pytest.mark.parametrize(
    ("second", "ended"),
    [(20.0, "ended at 11"), (3.0, "ended at 5"), (math.inf, "ended at 11")],
    ids=["longer-is-ignored", "shorter-wins", "infinite-is-ignored"],
)
def test_a_second_grace_brings_the_cancel_nearer_but_never_later(
    rt: asyncop.Runtime, second: float, ended: str
) -> None:
    log: list[str] = []

    async def main() -> object:
        child = me().spawn(ignoring, log)
        await asyncop.sleep(1)
        child.cancel("first", grace=10)
        await asyncop.sleep(1)
        child.cancel("second", grace=second)
        await asyncio_wait(child)
        return child.cancel_reason

    assert rt.run(main) == "first"
    assert log == [ended]


def test_an_infinite_grace_only_asks(rt: asyncop.Runtime) -> None:
    log: list[str] = []

    async def main() -> str:
        child = me().spawn(until_stop_requested, log, "stopped by itself")
        await asyncop.sleep(1)
        child.cancel(grace=math.inf)
        return await child

    assert rt.run(main) == "stopped by itself"


def test_cancel_with_grace_on_an_operation_that_ended_or_is_cancelled_does_nothing(
    rt: asyncop.Runtime,
) -> None:
    async def quick() -> str:
        return "done"

    async def main() -> None:
        ended = me().spawn(quick)
        await ended
        ended.cancel("late", grace=5)
        assert ended.state is OperationState.COMPLETED and ended.cancel_reason is None
        cancelled = me().spawn(forever)
        cancelled.cancel("first")
        cancelled.cancel("late", grace=5)
        await asyncio_wait(cancelled)
        assert cancelled.cancel_reason == "first"
        assert "asked to stop" not in asyncop.current_runtime().dump()

    rt.run(main)


def test_nothing_stays_registered_once_the_asked_work_has_ended(rt: asyncop.Runtime) -> None:
    counts: list[int] = []

    async def asked() -> None:
        await asyncop.wait_stop_requested()
        # Its wait is over, and the grace's timer runs until the task ends.
        counts.append(rt.registrations())

    async def main() -> list[int]:
        counts.append(rt.registrations())
        child = me().spawn(asked)
        await wait_all_blocked()
        counts.append(rt.registrations())  # the task parked in wait_stop_requested()
        child.cancel(grace=30)
        await child
        counts.append(rt.registrations())  # ended within the grace: nothing left
        return counts

    assert rt.run(main) == [0, 1, 1, 0]


# -- waiting for the request ---------------------------------------------------------


def test_wait_stop_requested_is_a_cancellation_point(rt: asyncop.Runtime) -> None:
    log: list[str] = []

    async def waits() -> None:
        try:
            await asyncop.wait_stop_requested()
        except Cancelled:
            log.append(f"cancelled at {asyncop.current_time():g}")
            raise

    async def already_cancelled() -> None:
        me().cancel()
        try:
            await asyncop.wait_stop_requested()
        except Cancelled:
            log.append("raised on entry")
            raise

    async def main() -> list[OperationState]:
        a = me().spawn(waits)
        b = me().spawn(already_cancelled)
        await asyncop.sleep(2)
        a.cancel()
        await asyncio_wait(a)
        await asyncio_wait(b)
        return [a.state, b.state]

    assert rt.run(main) == [OperationState.CANCELLED, OperationState.CANCELLED]
    assert sorted(log) == ["cancelled at 2", "raised on entry"]


def test_wait_stop_requested_composes_in_select(rt: asyncop.Runtime) -> None:
    async def worker() -> str:
        index, _ = await asyncop.select(asyncop.sleep(100), asyncop.wait_stop_requested())
        return "asked" if index == 1 else "slept"

    async def main() -> str:
        child = me().spawn(worker)
        await asyncop.sleep(1)
        child.cancel(grace=10)
        return await child

    assert rt.run(main) == "asked"


def test_a_consumer_that_stops_on_request_loses_no_item(rt: asyncop.Runtime) -> None:
    channel: asyncop.Channel[int] = asyncop.Channel(5)

    async def consumer(got: list[int]) -> None:
        while True:
            index, value = await asyncop.select(asyncop.wait_stop_requested(), channel.recv_async())
            if index == 0:
                return  # asked to stop: the losing receive took nothing
            assert isinstance(value, int)
            got.append(value)
            await asyncop.sleep(1)

    async def main() -> tuple[list[int], list[int], int]:
        got: list[int] = []
        child = me().spawn(consumer, got)
        sent = 0
        for _ in range(8):
            await channel.send_async(sent)
            sent += 1
        child.cancel("enough", grace=100)
        while True:  # fill the buffer while the consumer winds down
            try:
                channel.try_send(sent)
            except asyncop.WouldBlock:
                break
            sent += 1
        await child
        left: list[int] = []
        while True:
            try:
                left.append(channel.try_recv())
            except asyncop.WouldBlock:
                return got, left, sent

    got, left, sent = rt.run(main)
    assert got + left == list(range(sent))
    assert got and left


def test_stop_requested_outside_an_operation_says_where_to_call_it() -> None:
    with pytest.raises(RuntimeError, match=r"stop_requested\(\) needs a running asyncop operation"):
        asyncop.stop_requested()


# -- scopes, timeouts and the C-style call ------------------------------------------


def test_a_scope_asked_from_its_own_block_exits_normally_either_way(rt: asyncop.Runtime) -> None:
    log: list[str] = []

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(until_stop_requested, log)
            s.cancel("polite", grace=5)
            await asyncop.wait_stop_requested()
        log.append(f"after the polite block at {asyncop.current_time():g}")
        async with asyncop.scope() as s:
            s.spawn(ignoring, log)
            s.cancel("stubborn", grace=5)
            await asyncop.sleep(100)
        log.append(f"after the stubborn block at {asyncop.current_time():g}")

    rt.run(main)
    assert log == [
        "asked at 0",
        "after the polite block at 0",
        "ended at 5",
        "after the stubborn block at 5",
    ]


def test_a_scope_timeout_inside_the_grace_still_raises_timeout_error(
    rt: asyncop.Runtime,
) -> None:
    async def main() -> float:
        me().cancel(grace=10)
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=2):
                await asyncop.sleep(100)
        return asyncop.current_time()

    assert rt.run(main) == 2


def test_move_on_after_cancel_with_grace(rt: asyncop.Runtime) -> None:
    async def main() -> tuple[bool, bool, float]:
        async with asyncop.move_on_after(100) as polite:
            polite.cancel(grace=5)
            await asyncop.wait_stop_requested()
        async with asyncop.move_on_after(100) as stubborn:
            stubborn.cancel(grace=5)
            await asyncop.sleep(50)
        return polite.cancelled_caught, stubborn.cancelled_caught, asyncop.current_time()

    assert rt.run(main) == (False, True, 5)


def test_async_cancel_takes_a_grace(rt: asyncop.Runtime) -> None:
    log: list[str] = []
    op = rt.spawn(until_stop_requested, log, "c-style")
    asyncop.async_cancel(op, grace=10)
    assert asyncop.async_await(op, 5).value == "c-style"


def test_dump_shows_the_request_and_when_it_becomes_a_cancel(rt: asyncop.Runtime) -> None:
    async def main() -> str:
        child = me().spawn(forever, name="stubborn")
        await asyncop.sleep(1)
        child.cancel("deploying", grace=5)
        text = asyncop.current_runtime().dump()
        child.cancel()
        await asyncio_wait(child)
        return text

    line = next(line for line in rt.run(main).splitlines() if "stubborn" in line)
    assert "asked to stop (deploying), cancelled at 6.000" in line


@pytest.mark.parametrize(
    ("grace", "error", "message"),
    [
        ("5", TypeError, r"\.cancel\(grace=\.\.\.\) needs a number of seconds, got str"),
        (True, TypeError, r"needs a number of seconds, got bool"),
        (-1, ValueError, r"got -1, a negative number of seconds"),
        (math.nan, ValueError, r"got NaN seconds"),
    ],
)
def test_a_bad_grace_is_refused_before_anything_happens(
    rt: asyncop.Runtime, grace: object, error: type[Exception], message: str
) -> None:
    op = rt.spawn(forever, name="work")
    with pytest.raises(error, match=message) as caught:
        op.cancel(grace=grace)  # type: ignore[arg-type]
    assert "'work'" in str(caught.value) and "leave grace out" in str(caught.value)
    assert not op.token.stop_requested
    with pytest.raises(error, match=message.replace(r"\.cancel", r"\.shutdown")):
        rt.shutdown(grace=grace)  # type: ignore[arg-type]
    assert not op.token.stop_requested
    op.cancel()
    op.wait(5)


# -- shutdown ---------------------------------------------------------------------


def test_shutdown_with_grace_lets_threads_finish_then_cancels_the_rest(clock: VirtualClock) -> None:
    rt = asyncop.Runtime(2, name="graceful", clock=clock)
    started = threading.Barrier(3)
    log: list[tuple[str, float, bool]] = []

    def polite(op: asyncop.AsyncOperation[Any], context: None) -> str:
        started.wait(5)
        while not op.token.stop_requested:
            time.sleep(0.001)
        log.append(("polite", rt.now(), op.token.cancelled))
        return "saved"

    def stubborn(op: asyncop.AsyncOperation[Any], context: None) -> None:
        started.wait(5)
        op.token.wait()  # ignores the request: only a cancel ends this
        log.append(("stubborn", rt.now(), op.token.cancelled))
        op.token.check()

    a = rt.submit(rt.create(polite))
    b = rt.submit(rt.create(stubborn))
    started.wait(5)
    asked_at = rt.now()
    assert rt.shutdown(timeout=10, grace=30)
    assert (a.state, a.result()) == (OperationState.COMPLETED, "saved")
    assert b.state is OperationState.CANCELLED
    assert sorted(log) == [("polite", asked_at, False), ("stubborn", asked_at + 30, True)]
    assert runtime_threads(rt) == []


def test_shutdown_with_grace_does_not_wait_for_operations_never_submitted(
    clock: VirtualClock,
) -> None:
    rt = asyncop.Runtime(2, name="unsubmitted", clock=clock)
    never = rt.create(lambda op, context: None, name="never submitted")
    child = rt.create(lambda op, context: None, parent=never)  # the runtime tracks never now
    assert rt.shutdown(timeout=10, grace=1000)
    assert never.state is child.state is OperationState.CANCELLED
    assert rt.now() < 1000


def test_shutdown_grace_with_cancel_false_is_refused(rt: asyncop.Runtime) -> None:
    with pytest.raises(ValueError, match=r"shutdown\(cancel=False, grace=\.\.\.\) would ask"):
        rt.shutdown(cancel=False, grace=5)


def test_a_shutdown_that_waits_names_what_it_waits_for(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncop.runtime._shutdown_wait as shutdown_wait

    monkeypatch.setattr(shutdown_wait, "REPORT_EVERY", 0.05)
    rt = asyncop.Runtime(2, name="slow-to-stop")
    release = threading.Event()
    started = threading.Event()

    def stubborn_thread(op: asyncop.AsyncOperation[Any], context: None) -> None:
        started.set()
        release.wait(10)  # not asyncop's: a cancel cannot end it

    async def parked() -> None:
        async with asyncop.scope(shield=True):
            await asyncop.sleep(0.3)

    rt.submit(rt.create(stubborn_thread, name="stubborn"))
    rt.spawn(parked, name="parked")
    assert started.wait(5)
    caplog.set_level(logging.INFO, logger="asyncop")
    assert rt.shutdown(timeout=0.6, grace=0.1) is False
    release.set()
    assert rt.shutdown(timeout=10)
    messages = [r.getMessage() for r in caplog.records]
    assert any("asked 2 operation trees to stop" in m for m in messages), messages
    expired = "\n".join(m for m in messages if "grace of the shutdown of runtime" in m)
    waiting = "\n".join(m for m in messages if "has waited" in m)
    gave_up = [m for m in messages if "stopped waiting after" in m]
    assert len(gave_up) == 1, messages
    for text in (expired, waiting, gave_up[0]):
        assert "callback stubborn [RUNNING]" in text and "test_grace.py:" in text, text
    for text in (expired, waiting):
        assert "task parked [RUNNING]" in text and "waiting on sleep(0.3)" in text, text


@pytest.mark.timeout(20)
def test_a_tree_waiting_to_be_asked_to_stop_is_not_a_deadlock() -> None:
    # A server that waits for its stop request waits for its user, as
    # sleep_forever() does: the deadlock watch must not call it stuck.
    async def serve() -> str:
        await asyncop.wait_stop_requested()
        return "stopped"

    with asyncop.Runtime(workers=1, deadlock="raise", deadlock_after=0.02) as runtime:
        op = runtime.spawn(serve)
        time.sleep(0.3)  # nothing in the runtime can end the wait meanwhile
        assert not op.done
        op.cancel(grace=1)
        assert op.wait(5).value == "stopped"
