"""Test support: VirtualClock autojump and advance, wait_all_blocked, assert_checkpoints."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import asyncop
from asyncop import OperationState
from asyncop.testing import VirtualClock, assert_checkpoints, wait_all_blocked

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
def manual() -> Iterator[tuple[asyncop.Runtime, VirtualClock]]:
    """A 2-worker runtime on a virtual clock that moves only by ``advance()``."""
    clock = VirtualClock(autojump=False)
    rt = asyncop.Runtime(2, name=f"tmrt{id(object()):x}", clock=clock)
    try:
        yield rt, clock
    finally:
        assert rt.shutdown(timeout=10), "runtime did not shut down in 10 s"
        prefix = f"{rt.name}-"
        assert [t for t in threading.enumerate() if t.name.startswith(prefix)] == []


def me() -> asyncop.AsyncOperation:
    op = asyncop.current_operation()
    assert op is not None
    return op


def wait_until(predicate: Any, timeout: float = 5.0) -> bool:
    """Poll ``predicate`` from the test thread for at most ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.001)
    return bool(predicate())


# ----------------------------------------------------------------------
# VirtualClock(autojump=True)
# ----------------------------------------------------------------------


def test_autojump_makes_an_hour_long_sleep_instant(vruntime: asyncop.Runtime) -> None:
    async def main() -> float:
        await asyncop.sleep(3600)
        return asyncop.current_time()

    start = time.monotonic()
    assert vruntime.run(main) == pytest.approx(3600)
    assert time.monotonic() - start < 2


def test_autojump_waits_for_a_blocking_call_in_flight(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    def blocking() -> float:
        time.sleep(0.2)
        return vruntime.now()

    async def sleeper() -> None:
        await asyncop.sleep(3600)
        log.append(("sleeper woke", asyncop.current_time()))

    async def blocker() -> None:
        at_end = await asyncop.spawn_blocking(blocking)
        log.append(("blocking call ended", at_end))
        log.append(("blocker resumed", asyncop.current_time()))

    async def main() -> None:
        me().spawn(sleeper)
        me().spawn(blocker)

    vruntime.run(main)
    assert log == [
        ("blocking call ended", 0.0),
        ("blocker resumed", 0.0),
        ("sleeper woke", pytest.approx(3600)),
    ]


def test_autojump_waits_while_a_worker_runs_a_sync_operation(vruntime: asyncop.Runtime) -> None:
    log: list[Any] = []

    def busy() -> None:
        time.sleep(0.1)
        log.append(("sync work ended", vruntime.now()))

    async def sleeper() -> None:
        await asyncop.sleep(60)
        log.append(("sleeper woke", asyncop.current_time()))

    async def main() -> None:
        me().spawn(sleeper)
        me().spawn(busy)

    vruntime.run(main)
    assert log == [("sync work ended", 0.0), ("sleeper woke", pytest.approx(60))]


def test_autojump_goes_to_the_next_deadline_only(vruntime: asyncop.Runtime) -> None:
    log: list[float] = []

    async def sleeper(seconds: float) -> None:
        await asyncop.sleep(seconds)
        log.append(asyncop.current_time())

    async def main() -> None:
        for seconds in (30, 10, 20):
            me().spawn(sleeper, seconds)

    vruntime.run(main)
    assert log == [pytest.approx(10), pytest.approx(20), pytest.approx(30)]


# ----------------------------------------------------------------------
# VirtualClock(autojump=False) and advance()
# ----------------------------------------------------------------------


def test_manual_clock_does_not_move_by_itself(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, clock = manual

    async def sleeper() -> None:
        await asyncop.sleep(1)

    op = rt.spawn(sleeper)
    with pytest.raises(TimeoutError):
        op.wait(0.2)
    assert clock.now() == 0.0
    clock.advance(1)
    assert op.wait(5).state is OperationState.COMPLETED


def test_advance_from_another_thread_wakes_a_sleeper(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, clock = manual

    async def sleeper() -> float:
        await asyncop.sleep(10)
        return asyncop.current_time()

    op = rt.spawn(sleeper)
    assert wait_until(lambda: rt.registrations() >= 1), "the sleeper never parked"
    clock.advance(4)
    with pytest.raises(TimeoutError):
        op.wait(0.1)  # 4 of 10 seconds: still asleep
    mover = threading.Thread(target=clock.advance, args=(6,))
    mover.start()
    mover.join(5)
    result = op.wait(5)
    assert result.state is OperationState.COMPLETED
    assert result.value == pytest.approx(10)


def test_advance_from_inside_a_task_wakes_another_sleeper(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, clock = manual
    log: list[Any] = []

    async def sleeper() -> None:
        await asyncop.sleep(5)
        log.append(("woke", asyncop.current_time()))

    async def main() -> None:
        op = me().spawn(sleeper)
        await wait_all_blocked()
        clock.advance(5)
        await op

    result = rt.spawn(main).wait(5)
    assert result.state is OperationState.COMPLETED, result
    assert log == [("woke", pytest.approx(5))]


def test_advance_wakes_sleepers_in_deadline_order(
    manual: tuple[asyncop.Runtime, VirtualClock],
) -> None:
    rt, clock = manual
    log: list[int] = []
    lock = threading.Lock()

    async def sleeper(seconds: int) -> None:
        await asyncop.sleep(seconds)
        with lock:
            log.append(seconds)

    ops = [rt.spawn(sleeper, s) for s in (3, 1, 2)]
    assert wait_until(lambda: rt.registrations() >= 3)
    for _ in range(3):
        # Count before advancing: the sleeper may log before advance() returns.
        count = len(log) + 1
        clock.advance(1)
        assert wait_until(lambda count=count: len(log) >= count)
    for op in ops:
        assert op.wait(5).state is OperationState.COMPLETED
    assert log == [1, 2, 3]


def test_advance_by_a_negative_amount_raises_value_error() -> None:
    clock = VirtualClock(autojump=False)
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert clock.now() == 0.0


# ----------------------------------------------------------------------
# wait_all_blocked()
# ----------------------------------------------------------------------


def test_wait_all_blocked_returns_once_every_task_is_parked(runtime: asyncop.Runtime) -> None:
    tasks, checkpoints = 20, 50
    gate = asyncop.Event()
    reached: list[int] = []
    lock = threading.Lock()

    async def worker(i: int) -> None:
        for _ in range(checkpoints + i):
            await asyncop.checkpoint()
        with lock:
            reached.append(i)
        await gate.wait_async()

    async def main() -> list[int]:
        for i in range(tasks):
            me().spawn(worker, i)
        await wait_all_blocked()
        with lock:
            seen = sorted(reached)
        gate.set()
        return seen

    assert runtime.run(main) == list(range(tasks))


def test_wait_all_blocked_waits_for_sleepers_to_park(vruntime: asyncop.Runtime) -> None:
    parked: list[int] = []
    lock = threading.Lock()

    async def sleeper(i: int) -> None:
        for _ in range(10):
            await asyncop.checkpoint()
        with lock:
            parked.append(i)
        await asyncop.sleep(100 + i)

    async def main() -> tuple[int, float]:
        for i in range(10):
            me().spawn(sleeper, i)
        await wait_all_blocked()
        with lock:
            count = len(parked)
        # The sleepers are parked on timers, and time has not moved.
        return count, asyncop.current_time()

    assert vruntime.run(main) == (10, 0.0)


def test_wait_all_blocked_waits_for_a_blocking_call_in_flight(runtime: asyncop.Runtime) -> None:
    log: list[str] = []
    gate = asyncop.Event()

    async def blocker() -> None:
        await asyncop.spawn_blocking(time.sleep, 0.2)
        log.append("blocking call ended")
        await gate.wait_async()

    async def main() -> list[str]:
        me().spawn(blocker)
        await wait_all_blocked()
        seen = list(log)
        gate.set()
        return seen

    assert runtime.run(main) == ["blocking call ended"]


def test_wait_all_blocked_waits_for_a_sync_operation(runtime: asyncop.Runtime) -> None:
    log: list[str] = []

    def busy() -> None:
        time.sleep(0.1)
        log.append("sync work ended")

    async def main() -> list[str]:
        me().spawn(busy)
        await wait_all_blocked()
        return list(log)

    assert runtime.run(main) == ["sync work ended"]


def test_wait_all_blocked_returns_at_once_when_nothing_else_runs(
    vruntime: asyncop.Runtime,
) -> None:
    async def main() -> float:
        await wait_all_blocked()
        return asyncop.current_time()

    assert vruntime.run(main) == 0.0


def test_wait_all_blocked_is_a_cancellation_point(vruntime: asyncop.Runtime) -> None:
    async def main() -> None:
        me().cancel()
        await wait_all_blocked()

    op = vruntime.spawn(main)
    assert op.wait(5).state is OperationState.CANCELLED


# ----------------------------------------------------------------------
# assert_checkpoints()
# ----------------------------------------------------------------------


def test_assert_checkpoints_passes_when_the_block_awaited(vruntime: asyncop.Runtime) -> None:
    async def main() -> str:
        with assert_checkpoints():
            await asyncop.checkpoint()
        return "passed"

    assert vruntime.run(main) == "passed"


def test_assert_checkpoints_passes_for_an_await_that_did_not_park(
    vruntime: asyncop.Runtime,
) -> None:
    async def main() -> str:
        with assert_checkpoints():
            await asyncop.sleep(0)
        return "passed"

    assert vruntime.run(main) == "passed"


def test_assert_checkpoints_passes_for_a_sleep(vruntime: asyncop.Runtime) -> None:
    async def main() -> str:
        with assert_checkpoints():
            await asyncop.sleep(5)
        return "passed"

    assert vruntime.run(main) == "passed"


def test_assert_checkpoints_fails_when_the_block_did_not_await(
    vruntime: asyncop.Runtime,
) -> None:
    async def main() -> None:
        with assert_checkpoints():
            sum(range(10))

    with pytest.raises(AssertionError):
        vruntime.run(main)


def test_assert_checkpoints_fails_for_a_non_asyncop_await(vruntime: asyncop.Runtime) -> None:
    async def plain() -> int:
        return 1

    async def main() -> None:
        with assert_checkpoints():
            await plain()  # a plain coroutine call passes no cancellation point

    with pytest.raises(AssertionError):
        vruntime.run(main)


def test_assert_checkpoints_outside_an_operation_raises_runtime_error() -> None:
    with pytest.raises(RuntimeError), assert_checkpoints():
        pass


def test_assert_checkpoints_in_a_sync_operation_raises_runtime_error(
    runtime: asyncop.Runtime,
) -> None:
    def work() -> None:
        with assert_checkpoints():
            pass

    with pytest.raises(RuntimeError):
        runtime.run(work)


@pytest.mark.timeout(60)
def test_wait_all_blocked_returns_when_an_extra_worker_parks_last() -> None:
    # Spawning thousands of children in one step keeps a worker busy long
    # enough for the watchdog to look at it (where there is no per-thread
    # CPU clock, to add extra workers); the last worker to park may then be
    # an extra one on its way out, and it must still wake the waiter.
    async def sleeper() -> None:
        await asyncop.sleep(3600)

    async def main() -> None:
        async with asyncop.scope() as s:
            for _ in range(3000):
                s.spawn(sleeper)
            await wait_all_blocked()
            s.cancel()

    for _ in range(5):
        with asyncop.Runtime(2) as runtime:
            assert runtime.spawn(main).wait(10).state is OperationState.COMPLETED


@pytest.mark.timeout(30)
def test_wait_all_blocked_can_count_a_task_waiting_for_a_thread_as_parked() -> None:
    release = threading.Event()
    log: list[str] = []

    async def waits_for_a_thread() -> None:
        await asyncop.spawn_blocking(release.wait, 10)

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(waits_for_a_thread)
            await wait_all_blocked(threads=False)  # the thread still runs
            log.append("parked")
            release.set()
            await wait_all_blocked()  # once the thread's call has returned too
            log.append("done")

    with asyncop.Runtime(2) as rt:
        rt.run(main)
    assert log == ["parked", "done"]


def _waits_for_all_blocked(rt: asyncop.Runtime) -> bool:
    """Whether a task of ``rt`` waits in ``wait_all_blocked()``."""
    rows = rt.snapshot()["operations"]
    return any(row["waiting_on"] == "wait_all_blocked()" for row in rows)


def _wait_all_blocked_beside(callback: Any, event: asyncop.Event) -> Any:
    """A main that spawns ``callback``, waits until all is blocked, then sets ``event``."""

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(callback)
            await wait_all_blocked()
            event.set()

    return main


@pytest.mark.timeout(30)
def test_wait_all_blocked_returns_when_every_worker_is_a_callback_asleep_inside_asyncop() -> None:
    # The one worker steps main, then runs the callback, which falls asleep:
    # no worker is left to park, so the callback's sleep must wake the waiter.
    event = asyncop.Event()
    runtime = asyncop.Runtime(1)

    def falls_asleep_once_main_waits() -> bool:
        assert wait_until(lambda: _waits_for_all_blocked(runtime))
        return event.wait()

    main = _wait_all_blocked_beside(falls_asleep_once_main_waits, event)

    with runtime:
        assert runtime.spawn(main).wait(10).state is OperationState.COMPLETED


@pytest.mark.timeout(30)
def test_wait_all_blocked_returns_when_a_callback_falls_asleep_after_a_worker_parked() -> None:
    # The other worker parks while the callback still runs (it cannot tell
    # that the callback is about to sleep); the callback's sleep must wake it.
    gate = threading.Event()
    started = threading.Event()
    event = asyncop.Event()

    def falls_asleep_when_let() -> bool:
        started.set()
        gate.wait(10)
        return event.wait()

    main = _wait_all_blocked_beside(falls_asleep_when_let, event)

    with asyncop.Runtime(2) as runtime:
        op = runtime.spawn(main)
        assert started.wait(10)
        assert wait_until(
            lambda: _waits_for_all_blocked(runtime) and runtime.snapshot()["threads"]["parked"] == 1
        )
        gate.set()
        assert op.wait(10).state is OperationState.COMPLETED
