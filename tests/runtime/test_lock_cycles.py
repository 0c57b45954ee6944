"""A Lock acquire that would close a cycle of holders and waiters raises DeadlockError.

As a database does: the acquire that closes the cycle fails at once in its
caller (task or thread, any form of acquire), naming each lock and holder
of the cycle; the other waiters keep waiting, the caller's acquire leaves
nothing behind (no lock held, no waiter queued), and ordinary contention
never raises. ``Runtime(deadlock="off")`` turns the check off.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import asyncop
from asyncop import DeadlockError, Lock
from asyncop.testing import VirtualClock, wait_all_blocked

from ._marked_lines import line_of

pytestmark = pytest.mark.timeout(30)

HERE = __file__


def at(marker: str) -> str:
    return f"{HERE}:{line_of(HERE, marker)}"


@pytest.fixture
def rt() -> Iterator[asyncop.Runtime]:
    runtime = asyncop.Runtime(2, name="locks", clock=VirtualClock(autojump=True))
    yield runtime
    assert runtime.shutdown(timeout=10)


def eventually(condition: Callable[[], bool], limit: float = 5.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.001)


AcquireForm = Callable[[Lock], Any]


async def _async_with(lock: Lock) -> None:
    async with lock:  # async_with acquires
        pass


async def _lock_async(lock: Lock) -> None:
    guard = await lock.lock_async()  # lock_async acquires
    guard.release()


ASYNC_FORMS: dict[str, AcquireForm] = {"async_with": _async_with, "lock_async": _lock_async}


@pytest.mark.parametrize("form", sorted(ASYNC_FORMS))
def test_task_task_cycle_fails_the_closing_acquire_and_spares_the_other_waiter(
    rt: asyncop.Runtime, form: str
) -> None:
    a, b = Lock("a"), Lock("b")
    first_has_a, second_has_b = asyncop.Event(), asyncop.Event()
    log: list[str] = []

    async def first() -> None:
        async with a:
            first_has_a.set()
            await second_has_b.wait_async()
            async with b:  # first waits
                log.append("first got b")  # (the other waiter: untouched)

    async def second() -> None:
        async with b:
            second_has_b.set()
            await first_has_a.wait_async()
            await wait_all_blocked()  # first waits for b now
            try:
                await ASYNC_FORMS[form](a)  # closes the cycle
            except DeadlockError as exc:
                log.append(str(exc))
                log.append(exc.report)
                assert b.statistics().owner is asyncop.current_operation()
                assert a.statistics().tasks_waiting == 0  # its waiter was taken back
                assert b.statistics().tasks_waiting == 1  # first still waits

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(first, name="first")
            s.spawn(second, name="second")

    rt.run(main)
    message, report, got = log
    assert message.startswith("acquiring lock 'a' would deadlock: task 'second' (the caller)")
    assert "cycle of 2 locks" in message
    assert report.splitlines() == [
        "  lock 'a' is held by task 'first'",
        f"  task 'first' at {at('first waits')} waits for lock 'b'",
        "  lock 'b' is held by task 'second'",
        f"  task 'second' (the caller) at {at(form + ' acquires')} asks for lock 'a': "
        "the cycle closes",
    ]
    assert got == "first got b"  # nothing lost: b was released, then handed over
    assert not a.locked() and not b.locked()


def test_a_three_cycle_names_every_lock_and_holder(rt: asyncop.Runtime) -> None:
    a, b, c = Lock("a"), Lock("b"), Lock("c")
    errors: list[DeadlockError] = []

    async def holder(mine: Lock, wanted: Lock, closes: bool) -> None:
        async with mine:
            await wait_all_blocked()
            if closes:
                await wait_all_blocked()  # the other two wait for their next lock
            try:
                async with wanted:  # holders wait
                    pass
            except DeadlockError as exc:
                errors.append(exc)

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(holder, a, b, False, name="t1")
            s.spawn(holder, b, c, False, name="t2")
            s.spawn(holder, c, a, True, name="t3")

    rt.run(main)
    (error,) = errors
    assert "task 't3' (the caller)" in str(error) and "cycle of 3 locks" in str(error)
    lines = error.report.splitlines()
    assert lines[0] == "  lock 'a' is held by task 't1'"
    assert f"  task 't1' at {at('holders wait')} waits for lock 'b'" in lines
    assert f"  task 't2' at {at('holders wait')} waits for lock 'c'" in lines
    assert lines[-1] == (
        f"  task 't3' (the caller) at {at('holders wait')} asks for lock 'a': the cycle closes"
    )


def test_thread_task_cycle_fails_the_closing_thread_acquire(rt: asyncop.Runtime) -> None:
    a, b = Lock("a"), Lock("b")
    thread_has_a, task_holds_b = threading.Event(), threading.Event()
    results: list[object] = []

    async def task() -> None:
        async with b:
            task_holds_b.set()
            async with a:  # the task waits for the thread's lock
                results.append("task got a")

    def thread_body() -> None:
        with a:
            thread_has_a.set()
            task_holds_b.wait(5)
            eventually(lambda: a.statistics().tasks_waiting == 1)
            try:
                b.acquire()  # the thread closes the cycle
            except DeadlockError as exc:
                results.append(exc)
                assert b.statistics().tasks_waiting == 0

    thread = threading.Thread(target=thread_body, name="closer")
    thread.start()
    thread_has_a.wait(5)
    op = rt.spawn(task, name="task")
    thread.join(10)
    op.wait(10)
    error, got = results
    assert isinstance(error, DeadlockError)
    assert "thread 'closer' (the caller)" in str(error)
    assert "lock 'b' is held by task 'task'" in error.report
    task_waits = at("the task waits for the thread's lock")
    assert f"task 'task' at {task_waits} waits for lock 'a'" in error.report
    closes = at("the thread closes the cycle")
    assert f"thread 'closer' (the caller) at {closes} asks for lock 'b'" in error.report
    assert got == "task got a"
    assert not a.locked() and not b.locked()


def test_task_thread_cycle_fails_the_closing_task_acquire(rt: asyncop.Runtime) -> None:
    a, b = Lock("a"), Lock("b")
    thread_got: list[str] = []

    def thread_body() -> None:
        with a, b:  # the thread waits for the task's lock, then gets it
            thread_got.append("b")

    async def task() -> None:
        async with b:
            thread = threading.Thread(target=thread_body, name="holder")
            thread.start()
            await asyncop.spawn_blocking(eventually, lambda: b.statistics().tasks_waiting == 1)
            with pytest.raises(DeadlockError, match="task 'task' \\(the caller\\)") as info:
                await a.lock_async()
            where = at("the thread waits for the task's lock, then gets it")
            assert f"thread 'holder' at {where} waits for lock 'b'" in info.value.report
        await asyncop.spawn_blocking(thread.join, 10)

    assert rt.spawn(task, name="task").wait(10).error is None
    assert thread_got == ["b"]
    assert not a.locked() and not b.locked()


def test_a_callback_acquire_closing_a_cycle_raises_in_the_callback(rt: asyncop.Runtime) -> None:
    a, b = Lock("a"), Lock("b")

    def callback() -> str:
        with b:
            eventually(lambda: b.statistics().tasks_waiting == 1)
            try:
                a.acquire()
            except DeadlockError as exc:
                return exc.report
            return "acquired"

    async def task() -> None:
        async with a:
            op = asyncop.current_operation(require=True).spawn(callback, name="callback")
            await asyncop.spawn_blocking(eventually, b.locked)
            async with b:
                pass
            assert "running operation 'callback'" in await op

    rt.run(task)


def test_ordinary_contention_never_raises(rt: asyncop.Runtime) -> None:
    a, b = Lock("a"), Lock("b")
    done: list[int] = []

    async def chain(k: int) -> None:
        # Everyone takes a then b, in one order: long waits, never a cycle.
        async with a:
            await asyncop.sleep(0.01)
            async with b:
                await asyncop.sleep(0.01)
        done.append(k)

    async def holds_b_and_sleeps() -> None:
        async with b:
            await asyncop.sleep(1)

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(holds_b_and_sleeps)
            for k in range(20):
                s.spawn(chain, k)

    rt.run(main)
    assert sorted(done) == list(range(20))


def test_deadlock_off_leaves_the_cycle_waiting() -> None:
    rt = asyncop.Runtime(2, deadlock="off", clock=VirtualClock(autojump=True))
    a, b = Lock("a"), Lock("b")

    async def holder(mine: Lock, wanted: Lock) -> None:
        async with mine:
            await wait_all_blocked()
            async with wanted:
                pass

    async def main() -> None:
        async with asyncop.scope(timeout=5) as s:
            s.spawn(holder, a, b)
            s.spawn(holder, b, a)

    try:
        with pytest.raises(TimeoutError):  # both waited until the scope's deadline
            rt.run(main)
    finally:
        assert rt.shutdown(timeout=10)


def test_a_refused_cycle_shows_among_the_runtime_warnings_for_a_while(
    rt: asyncop.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asyncop.runtime import _deadlock

    a, b = Lock("a"), Lock("b")
    first_has_a, second_has_b = asyncop.Event(), asyncop.Event()

    async def first() -> None:
        async with a:
            first_has_a.set()
            await second_has_b.wait_async()
            async with b:
                pass

    async def second() -> None:
        async with b:
            second_has_b.set()
            await first_has_a.wait_async()
            await wait_all_blocked()
            with pytest.raises(DeadlockError):
                await a.lock_async()

    async def main() -> None:
        assert rt.snapshot()["warnings"] == []
        async with asyncop.scope() as s:
            s.spawn(first, name="first")
            s.spawn(second, name="second")

    rt.run(main)
    (warning,) = rt.snapshot()["warnings"]
    assert warning.startswith("lock cycle refused ")
    assert "acquiring lock 'a' would deadlock: task 'second' (the caller)" in warning
    assert f"  warning: {warning}" in rt.dump().splitlines()
    monkeypatch.setattr(_deadlock, "CYCLES_SHOWN_S", 0.0)  # once its time has passed
    time.sleep(0.01)
    assert rt.snapshot()["warnings"] == []
