"""Rules that asyncio's task suite checks, written against asyncop's operations:
tasks that await one another, awaiting oneself, a cancel's reason, and what an
unfinished operation answers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

import asyncop
from asyncop import Cancelled, DeadlockError, OperationState
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


def stuck_runtime() -> asyncop.Runtime:
    return asyncop.Runtime(2, name="cycle", deadlock="raise", clock=VirtualClock(autojump=True))


def test_two_tasks_awaiting_each_other_are_reported_stuck() -> None:
    # asyncio leaves such a pair waiting forever; asyncop's deadlock watch must
    # tell it from a tree that waits for a cancel on purpose
    ops: dict[str, asyncop.AsyncOperation[None]] = {}

    async def first() -> None:
        await asyncop.sleep(1)
        await ops["second"]

    async def second() -> None:
        await asyncop.sleep(1)
        await ops["first"]

    async def main() -> None:
        async with asyncop.scope() as s:
            ops["first"] = s.spawn(first, name="first")
            ops["second"] = s.spawn(second, name="second")

    rt = stuck_runtime()
    try:
        with pytest.raises(DeadlockError) as info:
            rt.run(main)
        assert "task 'first'" in info.value.report
        assert "waits on operation 'second'" in info.value.report
    finally:
        assert rt.shutdown(timeout=10)


def test_a_cycle_of_three_beside_a_task_asleep_forever_is_reported() -> None:
    ops: dict[str, asyncop.AsyncOperation[None]] = {}

    async def idle() -> None:
        await asyncop.sleep_forever()

    def awaiting(name: str) -> Callable[[], Coroutine[Any, Any, None]]:
        async def body() -> None:
            await asyncop.sleep(1)
            await ops[name]

        return body

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(idle, name="idle")
            for me, other in (("a", "b"), ("b", "c"), ("c", "a")):
                ops[me] = s.spawn(awaiting(other), name=me)

    rt = stuck_runtime()
    try:
        with pytest.raises(DeadlockError):
            rt.run(main)
    finally:
        assert rt.shutdown(timeout=10)


def test_awaiting_a_task_that_sleeps_forever_is_still_waiting_on_purpose() -> None:
    rt = asyncop.Runtime(2, name="idle", deadlock="raise", deadlock_after=0.05)

    async def sleeper() -> None:
        await asyncop.sleep_forever()

    async def main() -> None:
        async with asyncop.scope() as s:
            inner = s.spawn(sleeper, name="sleeper")
            await inner

    try:
        op = rt.spawn(main)
        time.sleep(0.4)
        assert op.state is OperationState.RUNNING  # not cancelled as stuck
        op.cancel()
        assert op.wait(5).state is OperationState.CANCELLED
    finally:
        assert rt.shutdown(timeout=10)


@pytest.mark.asyncop
async def test_a_task_awaiting_itself_is_refused_at_once(autojump_clock: VirtualClock) -> None:
    # asyncio: a task may not await itself
    async def selfish() -> None:
        await asyncop.current_operation(require=True)

    async with asyncop.scope() as s:
        op = s.spawn(selfish, supervise=True)
    assert op.state is OperationState.FAILED
    assert isinstance(op.error, RuntimeError)
    assert "awaited itself" in str(op.error)


@pytest.mark.asyncop
async def test_a_cancel_reason_reaches_the_cancelled_code(autojump_clock: VirtualClock) -> None:
    # asyncio task.cancel(msg): the message shows up in the CancelledError
    seen: list[object] = []

    async def worker() -> None:
        try:
            await asyncop.sleep(10)
        except Cancelled as exc:
            seen.append(exc.reason)
            raise

    async with asyncop.scope() as s:
        op = s.spawn(worker)
        await wait_all_blocked()
        op.cancel("shutting down")
    assert seen == ["shutting down"]
    assert op.state is OperationState.CANCELLED


def test_a_chain_of_awaits_ending_in_a_task_asleep_forever_is_waiting_on_purpose() -> None:
    rt = asyncop.Runtime(2, name="chain", deadlock="raise", deadlock_after=0.05)
    ops: dict[str, asyncop.AsyncOperation[None]] = {}

    async def last() -> None:
        await asyncop.sleep_forever()

    async def middle() -> None:
        await ops["last"]

    async def main() -> None:
        async with asyncop.scope() as s:
            ops["last"] = s.spawn(last, name="last")
            ops["middle"] = s.spawn(middle, name="middle")
            await ops["middle"]

    try:
        op = rt.spawn(main)
        time.sleep(0.4)
        assert op.state is OperationState.RUNNING  # not cancelled as stuck
        op.cancel()
        assert op.wait(5).state is OperationState.CANCELLED
    finally:
        assert rt.shutdown(timeout=10)


@pytest.mark.asyncop
async def test_an_unfinished_operation_has_no_result_and_no_error_yet(
    autojump_clock: VirtualClock,
) -> None:
    # asyncio: result() of an unfinished task raises InvalidStateError; asyncop's
    # op.error (asyncio's exception()) reads None until the operation has FAILED
    async def sleeper() -> None:
        await asyncop.sleep(10)

    async with asyncop.scope() as s:
        op = s.spawn(sleeper)
        for _ in range(2):  # PENDING, then RUNNING
            with pytest.raises(asyncop.InvalidStateError, match="has no result yet"):
                op.result()
            assert op.error is None and not op.done
            await wait_all_blocked()
        op.cancel("enough")
    with pytest.raises(asyncop.CancellationError):
        op.result()
    assert op.error is None and op.done


def test_awaiting_an_operation_of_another_runtime_is_not_a_cycle() -> None:
    # the other runtime's work is out of this one's sight: it may well end
    other = asyncop.Runtime(1, name="other")
    rt = asyncop.Runtime(2, name="waits", deadlock="raise", deadlock_after=0.05)
    gate = threading.Event()

    def slow() -> str:
        gate.wait(10)
        return "done"

    try:
        remote = other.spawn(slow)

        async def main() -> str:
            return await remote

        op = rt.spawn(main)
        time.sleep(0.4)
        assert op.state is OperationState.RUNNING  # not cancelled as stuck
        gate.set()
        op.wait(5)
        assert op.result() == "done"
    finally:
        gate.set()
        assert rt.shutdown(timeout=10)
        assert other.shutdown(timeout=10)
