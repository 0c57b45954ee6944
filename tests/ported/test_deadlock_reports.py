"""Hangs as users write them, and what the deadlock watch and the lock-cycle
check say about them: two locks taken in opposite orders, an event nobody
sets, a task holding a lock its own child wants, a wait that a shielded scope
keeps every cancel away from. asyncio and trio leave each of these waiting;
here each must end in a report that names the waiting task, what it waits on
and the line, or, for a tree waiting on purpose, in no report at all.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Literal

import pytest

import asyncop
from asyncop import DeadlockError
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(30)


def stuck_runtime(mode: Literal["warn", "raise", "off"] = "raise") -> asyncop.Runtime:
    return asyncop.Runtime(2, name="stuck", deadlock=mode, clock=VirtualClock(autojump=True))


def test_two_locks_in_opposite_orders_fail_the_acquire_that_closes_the_cycle() -> None:
    first, second = asyncop.Lock("first"), asyncop.Lock("second")
    done: list[str] = []

    async def worker(a: asyncop.Lock, b: asyncop.Lock, name: str) -> None:
        async with a:
            await asyncop.sleep(1)
            async with b:
                done.append(name)

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(worker, first, second, "ab", name="ab")
            s.spawn(worker, second, first, "ba", name="ba")

    with stuck_runtime() as runtime, pytest.raises(ExceptionGroup) as caught:
        runtime.run(main)
    (error,) = caught.value.exceptions
    assert isinstance(error, DeadlockError)
    assert str(error).startswith("acquiring lock 'first' would deadlock: task 'ba' (the caller)")
    assert "take the locks in one order everywhere" in str(error)
    assert "lock 'second' is held by task 'ba'" in error.report
    assert done == ["ab"]  # the other one went on once the refused one let go


def test_an_event_nobody_sets_is_reported_with_its_name_and_line() -> None:
    never = asyncop.Event(name="config loaded")

    async def main() -> None:
        await never.wait_async()

    with stuck_runtime() as runtime, pytest.raises(DeadlockError) as caught:
        runtime.run(main)
    # (a task is named after its function's qualified name)
    (line,) = [line for line in caught.value.report.splitlines() if ".main' at " in line]
    assert "test_deadlock_reports.py:" in line
    assert line.endswith("waits on event 'config loaded'")


def test_a_task_holding_the_lock_its_child_wants_is_reported_with_the_holder() -> None:
    lock = asyncop.Lock("table")

    async def child() -> None:
        async with lock:
            pass

    async def parent() -> None:
        async with lock, asyncop.scope() as s:
            s.spawn(child, name="child")

    with stuck_runtime() as runtime, pytest.raises(DeadlockError) as caught:
        runtime.run(parent)
    assert "task 'child'" in caught.value.report
    assert ".parent')" in caught.value.report
    assert "waits on lock 'table' (held by task 'test_" in caught.value.report


def test_re_acquiring_a_held_lock_says_it_is_not_reentrant() -> None:
    lock = asyncop.Lock("db")

    async def main() -> None:
        async with lock, lock:
            pass

    with stuck_runtime() as runtime, pytest.raises(RuntimeError, match="not re-entrant"):
        runtime.run(main)


def test_sleeping_forever_waits_on_purpose_and_is_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def server() -> None:
        await asyncop.sleep_forever()

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(server)
            s.spawn(server)
            await asyncop.sleep(5)
            s.cancel("enough")

    with caplog.at_level(logging.WARNING, logger="asyncop"), stuck_runtime("warn") as runtime:
        runtime.run(main)
    assert [r for r in caplog.records if "stuck" in r.getMessage()] == []


def test_a_wait_for_a_cancel_inside_a_shield_is_reported_where_it_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # sleep_forever() waits for a cancel, but no cancel enters a shielded
    # scope: nothing can end this wait, Ctrl-C included.
    shields: list[asyncop.AsyncOperation[None]] = []

    async def flusher() -> None:
        async with asyncop.scope(shield=True, name="flush") as flush:
            shields.append(flush)
            await asyncop.sleep_forever()

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(flusher, name="flusher")

    runtime = stuck_runtime("warn")
    try:
        with caplog.at_level(logging.WARNING, logger="asyncop"):
            op = runtime.spawn(main)
            deadline = time.monotonic() + 10
            while not [r for r in caplog.records if "is stuck" in r.getMessage()]:
                assert time.monotonic() < deadline, "the stuck wait was never reported"
                time.sleep(0.01)
        record = next(r for r in caplog.records if "is stuck" in r.getMessage())
        (line,) = [line for line in record.getMessage().splitlines() if "task 'flusher' at" in line]
        assert "waits on sleep_forever()" in line
        assert "shielded scope 'flush'" in line
    finally:
        for flush in shields:
            flush.shield = False  # lets the cancel in: the way out of such a wait
        op.cancel()
        assert runtime.shutdown(timeout=10)


def test_a_request_to_stop_waited_for_inside_a_shield_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # wait_stop_requested() ends by a request or a cancel: a shield keeps both out.
    shields: list[asyncop.AsyncOperation[None]] = []

    async def worker() -> None:
        async with asyncop.scope(shield=True, name="shielded") as shielded:
            shields.append(shielded)
            await asyncop.wait_stop_requested()

    async def main() -> None:
        async with asyncop.scope(name="service") as s:
            s.spawn(worker, name="worker")
            await asyncop.sleep(1)
            s.cancel("deploying", grace=5)

    runtime = stuck_runtime("warn")
    try:
        with caplog.at_level(logging.WARNING, logger="asyncop"):
            op = runtime.spawn(main)
            deadline = time.monotonic() + 10
            while not [r for r in caplog.records if "is stuck" in r.getMessage()]:
                assert time.monotonic() < deadline, "the stuck wait was never reported"
                time.sleep(0.01)
        record = next(r for r in caplog.records if "is stuck" in r.getMessage())
        (line,) = [line for line in record.getMessage().splitlines() if "task 'worker' at" in line]
        assert "waits on wait_stop_requested() inside shielded scope 'shielded'" in line
    finally:
        for shielded in shields:
            shielded.shield = False
        op.cancel()
        assert runtime.shutdown(timeout=10)


def test_raise_mode_says_so_when_its_cancel_cannot_end_the_tree(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # "raise" cancels the tree to raise from run(); a wait inside a shield
    # outlives that cancel, and run() must not hang without a word.
    released = asyncop.Event(name="released")

    async def holder() -> None:
        async with asyncop.scope(shield=True, name="cleanup"):
            await released.wait_async()

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(holder, name="holder")

    runtime = stuck_runtime("raise")
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            runtime.run(main)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    try:
        with caplog.at_level(logging.WARNING, logger="asyncop"):
            thread.start()
            deadline = time.monotonic() + 10
            while not [r for r in caplog.records if "shield" in r.getMessage()]:
                assert time.monotonic() < deadline, "the hang after the cancel was never told"
                time.sleep(0.01)
        (record,) = [r for r in caplog.records if "shield" in r.getMessage()]
        message = record.getMessage()
        assert "run() still waits" in message
        assert "task 'holder'" in message and "waits on event 'released'" in message
        assert thread.is_alive()
        released.set()  # what the report points at: the tree can end now
        thread.join(10)
        assert isinstance(outcome.get("error"), DeadlockError), outcome
    finally:
        released.set()
        assert runtime.shutdown(timeout=10)
