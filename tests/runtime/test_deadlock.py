"""A stuck runtime is reported, with its wait-for graph, and never a busy one.

``Runtime(deadlock=...)``: a runtime where every task waits and nothing left
can wake one logs one WARNING (``"warn"``) or cancels its tree and makes
``run()`` raise ``DeadlockError`` (``"raise"``), after ``deadlock_after``
seconds, at once on an autojumping virtual clock. The report names each
parked task, what it waits on (an event, a lock and its holder, a channel
end and the ends of the other side, an operation, a condition, a semaphore
or limiter) and the user's line where it waits. Whatever can still wake a
task keeps the runtime alive: a sleeper, a socket, a blocking call, a sync
callback, a process, a thread outside waiting in one of asyncop's calls.
"""

from __future__ import annotations

import logging
import math
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import asyncop
from asyncop import DeadlockError, Event, Lock
from asyncop.process import run_process
from asyncop.testing import VirtualClock, wait_all_blocked

from ._marked_lines import line_of

pytestmark = pytest.mark.timeout(30)

HERE = __file__


def at(marker: str) -> str:
    return f"{HERE}:{line_of(HERE, marker)}"


@pytest.fixture
def virtual_raise() -> Iterator[asyncop.Runtime]:
    rt = asyncop.Runtime(2, name="stuck", deadlock="raise", clock=VirtualClock(autojump=True))
    yield rt
    assert rt.shutdown(timeout=10)


def real(mode: str = "raise", after: float = 0.1) -> asyncop.Runtime:
    return asyncop.Runtime(2, name="real", deadlock=mode, deadlock_after=after)


def waiting_on(event: Event) -> Callable[[], Any]:
    async def waits() -> None:
        await event.wait_async()

    return waits


# -- the arguments ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"deadlock": "loud"}, ValueError),
        ({"deadlock": None}, TypeError),
        ({"deadlock": True}, TypeError),
        ({"deadlock_after": -0.5}, ValueError),
        ({"deadlock_after": math.nan}, ValueError),
        ({"deadlock_after": "1"}, TypeError),
        ({"deadlock_after": True}, TypeError),
    ],
)
def test_bad_deadlock_arguments_are_refused_before_any_thread_starts(
    kwargs: dict[str, Any], error: type[Exception]
) -> None:
    before = threading.active_count()
    with pytest.raises(error, match="Runtime\\(deadlock"):
        asyncop.Runtime(1, **kwargs)
    assert threading.active_count() == before


@pytest.mark.parametrize("after", [0, 2, 0.25, math.inf])
def test_deadlock_after_takes_zero_or_more_seconds(after: float) -> None:
    with asyncop.Runtime(1, deadlock="off", deadlock_after=after):
        pass


# -- true positives -------------------------------------------------------------------


def test_an_event_nobody_can_set_raises_deadlock_error_bare_from_run(
    virtual_raise: asyncop.Runtime,
) -> None:
    ready = Event(name="ready")

    async def main() -> None:
        await ready.wait_async()  # waits-on-ready

    with pytest.raises(DeadlockError) as info:
        virtual_raise.run(main)
    error = info.value
    assert type(error) is DeadlockError and isinstance(error, Exception)
    assert "runtime 'stuck' is stuck" in str(error)
    assert "\n" not in str(error)  # one sentence; the report is its note
    assert error.__notes__ == [error.report]
    # (A function's name is its qualified name: "test_....<locals>.main".)
    assert f".main' at {at('waits-on-ready')} waits on event 'ready'" in error.report
    assert "waits in run() for operation 'test_" in error.report


@pytest.mark.parametrize("clock", ["virtual", "real"])
def test_two_tasks_each_waiting_on_the_others_channel(clock: str) -> None:
    rt = (
        asyncop.Runtime(2, deadlock="raise", clock=VirtualClock(autojump=True))
        if clock == "virtual"
        else real()
    )
    to_a = asyncop.Channel[int](name="to_a")
    to_b = asyncop.Channel[int](name="to_b")

    async def a(inbox: asyncop.ChannelReceiver[int], out: asyncop.ChannelSender[int]) -> None:
        await inbox.recv_async()  # a-receives
        await out.send_async(1)

    async def b(inbox: asyncop.ChannelReceiver[int], out: asyncop.ChannelSender[int]) -> None:
        await inbox.recv_async()  # b-receives
        await out.send_async(2)

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(a, to_a.receiver(), to_b.sender(), name="a")
            s.spawn(b, to_b.receiver(), to_a.sender(), name="b")

    started = time.monotonic()
    try:
        with pytest.raises(DeadlockError) as info:
            rt.run(main)
    finally:
        assert rt.shutdown(timeout=10)
    report = info.value.report
    assert f"task 'a' at {at('a-receives')} waits on receive from channel 'to_a'" in report
    assert f"task 'b' at {at('b-receives')} waits on receive from channel 'to_b'" in report
    assert "(1 sender end open)" in report  # each end is held by the other, stuck task
    assert ".main' at " in report and "waits on the children of scope" in report
    if clock == "real":
        assert time.monotonic() - started >= 0.1  # deadlock_after


def test_a_task_awaiting_its_child_that_waits_on_a_lock_the_task_holds(
    virtual_raise: asyncop.Runtime,
) -> None:
    lock = Lock("db")

    async def child() -> None:
        async with lock:  # child-acquires
            pass

    async def parent() -> None:
        async with lock:
            op = asyncop.current_operation(require=True).spawn(child, name="child")
            await op  # parent-awaits

    with pytest.raises(DeadlockError) as info:
        virtual_raise.run(parent)
    report = info.value.report
    assert f".parent' at {at('parent-awaits')} waits on operation 'child'" in report
    assert f"task 'child' at {at('child-acquires')} waits on lock 'db' (held by task '" in report
    assert report.index(".parent' at") < report.index("  task 'child'")  # the tree's order


def test_a_callback_blocked_on_an_event_shows_its_thread_and_line(
    virtual_raise: asyncop.Runtime,
) -> None:
    never = Event(name="never")

    def blocked() -> None:
        never.wait()  # callback-waits

    async def main() -> None:
        await asyncop.current_operation(require=True).spawn(blocked, name="blocked")

    with pytest.raises(DeadlockError) as info:
        virtual_raise.run(main)
    report = info.value.report
    assert f"at {at('callback-waits')} waits on event 'never'" in report
    assert "callback 'blocked' on thread 'stuck-" in report


def test_every_primitive_is_described_with_what_holds_it_up(
    virtual_raise: asyncop.Runtime,
) -> None:
    cond = asyncop.Condition(name="cond")
    sem = asyncop.Semaphore(0, name="sem")
    limiter = asyncop.CapacityLimiter(1, name="pool")
    unnamed = Event()  # unnamed-event

    async def notified() -> None:
        async with cond:
            await cond.wait_async()

    async def borrower() -> None:
        async with limiter:
            await unnamed.wait_async()

    async def permit() -> None:
        await sem.acquire_async()

    async def second() -> None:
        await limiter.acquire_async()

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(notified, name="notified")
            s.spawn(permit, name="permit")
            s.spawn(borrower, name="borrower")
            await wait_all_blocked()
            s.spawn(second, name="second")

    with pytest.raises(DeadlockError) as info:
        virtual_raise.run(main)
    report = info.value.report
    assert "waits on notify() of condition 'cond'" in report
    assert "waits on semaphore 'sem' (value 0)" in report
    assert f"waits on event (made at {at('unnamed-event')})" in report
    assert (
        "waits on a token of capacity limiter 'pool' (1 of 1 tokens borrowed by "
        "operation 'borrower')" in report
    )


def test_a_sync_scope_cancelled_for_a_deadlock_raises_it_at_its_exit(
    virtual_raise: asyncop.Runtime,
) -> None:
    gate = Event(name="gate")
    with pytest.raises(DeadlockError) as info, virtual_raise.scope(name="block") as s:
        s.spawn(waiting_on(gate), name="gated")
    assert "task 'gated'" in info.value.report
    assert "waits in the exit of its with-block for operation 'block'" in info.value.report


def test_a_thread_in_op_wait_without_timeout_waits_for_the_tree() -> None:
    rt = real()
    try:
        op = rt.spawn(waiting_on(Event(name="forever")))
        result = op.wait()  # stuck after 0.1 s: cancelled, as "raise" does
        assert result.state is asyncop.OperationState.CANCELLED
        assert "deadlock" in str(op.cancel_reason)
    finally:
        assert rt.shutdown(timeout=10)


def test_raise_logs_the_report_of_a_root_no_run_or_scope_raises_it_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncop")
    rt = real()
    try:
        op = rt.spawn(waiting_on(Event(name="forever")), name="spawned")
        op.wait()  # no run(): nothing would raise the DeadlockError
        assert op.state is asyncop.OperationState.CANCELLED
        (record,) = [r for r in caplog.records if "is stuck" in r.getMessage()]
        assert record.levelno == logging.WARNING
        text = record.getMessage()
        assert "deadlock='raise' cancels 'spawned'" in text
        assert "task 'spawned' at " in text and "waits on event 'forever'" in text
        assert "asyncop logger" in str(op.cancel_reason)
    finally:
        assert rt.shutdown(timeout=10)


def test_raise_logs_nothing_where_run_raises_the_report(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncop")
    rt = real()
    try:
        with pytest.raises(DeadlockError) as info:
            rt.run(waiting_on(Event(name="forever")))
        assert "waits on event 'forever'" in info.value.report
        with pytest.raises(DeadlockError), rt.scope() as s:
            s.spawn(waiting_on(Event(name="again")))
    finally:
        assert rt.shutdown(timeout=10)
    assert not [r for r in caplog.records if "is stuck" in r.getMessage()]


def test_warn_logs_one_warning_per_stuck_spell(caplog: pytest.LogCaptureFixture) -> None:
    first, second = Event(name="first"), Event(name="second")

    async def main() -> None:
        await first.wait_async()
        await second.wait_async()

    caplog.set_level(logging.WARNING, logger="asyncop")
    rt = real("warn", 0.1)
    try:
        op = rt.spawn(main)

        def stuck_warnings() -> list[str]:
            return [r.getMessage() for r in caplog.records if "is stuck" in r.getMessage()]

        wait_for(lambda: len(stuck_warnings()) == 1)
        time.sleep(0.5)  # five times deadlock_after: still one
        assert len(stuck_warnings()) == 1
        assert "waits on event 'first'" in stuck_warnings()[0]
        first.set()  # from outside: the task moves on, then is stuck again
        wait_for(lambda: len(stuck_warnings()) == 2)
        assert "waits on event 'second'" in stuck_warnings()[1]
        time.sleep(0.3)
        assert len(stuck_warnings()) == 2
        assert not op.done  # warn cancels nothing
        op.cancel()
        op.wait(5)
    finally:
        assert rt.shutdown(timeout=10)


def wait_for(condition: Callable[[], bool], limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.01)


# -- no false positives -----------------------------------------------------------


async def _sleeper() -> None:
    await asyncop.sleep(0.4)


async def _socket_wait() -> None:
    a, b = socket.socketpair()
    with a, b:
        timer = threading.Timer(0.4, b.send, (b"x",))
        timer.start()
        try:
            await asyncop.readable(a)
        finally:
            timer.join()


async def _blocking_call() -> None:
    await asyncop.spawn_blocking(time.sleep, 0.4)


def _sync_sleep() -> None:
    time.sleep(0.4)


async def _sync_callback() -> None:
    await asyncop.current_operation(require=True).spawn(_sync_sleep)


async def _process_job() -> None:
    await run_process(["sleep", "0.4"])


async def _outside_thread() -> None:
    done = Event(name="done")
    gate = Event(name="gate")

    def helper() -> None:
        gate.wait(0.4)  # blocked in an asyncop call: it may act afterwards
        done.set()

    thread = threading.Thread(target=helper)
    thread.start()
    try:
        await done.wait_async()
    finally:
        thread.join()


KEEPS_ALIVE: dict[str, Callable[[], Any]] = {
    "sleeper": _sleeper,
    "socket": _socket_wait,
    "blocking_call": _blocking_call,
    "sync_callback": _sync_callback,
    "process": _process_job,
    "outside_thread": _outside_thread,
}


@pytest.mark.parametrize("what", sorted(KEEPS_ALIVE))
def test_work_that_can_still_wake_a_task_keeps_the_runtime_alive(what: str) -> None:
    if what == "process" and sys.platform == "win32":
        pytest.skip("needs the sleep command")
    rt = real("raise", 0.05)
    try:
        rt.run(KEEPS_ALIVE[what])
    finally:
        assert rt.shutdown(timeout=10)


@pytest.mark.parametrize("what", ["blocking_call", "sync_callback", "outside_thread"])
def test_on_a_virtual_clock_too(what: str) -> None:
    rt = asyncop.Runtime(2, deadlock="raise", clock=VirtualClock(autojump=True))
    try:
        rt.run(KEEPS_ALIVE[what])
    finally:
        assert rt.shutdown(timeout=10)


def test_a_sync_scope_block_that_runs_keeps_the_runtime_alive() -> None:
    rt = real("raise", 0.05)
    gate = Event(name="gate")
    try:
        with rt.scope() as s:
            s.spawn(waiting_on(gate))
            time.sleep(0.3)  # the block runs: it may still set the gate
            gate.set()
    finally:
        assert rt.shutdown(timeout=10)


def test_waiting_for_a_cancel_on_purpose_is_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncop")

    async def forever() -> None:
        await asyncop.sleep_forever()

    def until_cancelled() -> None:
        asyncop.current_operation(require=True).token.wait()

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(forever)
            s.spawn(until_cancelled)
            await asyncop.sleep_forever()

    rt = real("warn", 0.05)
    try:
        op = rt.spawn(main)
        time.sleep(0.4)
        assert "waiting on sleep_forever()" in rt.dump()  # (it did start)
        assert not [r for r in caplog.records if "is stuck" in r.getMessage()]
        op.cancel()
        assert op.wait(5).state is asyncop.OperationState.CANCELLED
    finally:
        assert rt.shutdown(timeout=10)


def test_off_reports_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="asyncop")
    rt = asyncop.Runtime(2, deadlock="off", clock=VirtualClock(autojump=True))
    try:
        op = rt.spawn(waiting_on(Event()))
        time.sleep(0.3)
        assert not op.done
        assert not [r for r in caplog.records if "is stuck" in r.getMessage()]
        op.cancel()
        op.wait(5)
    finally:
        assert rt.shutdown(timeout=10)
