"""CapacityLimiter: tokens with borrowers, from tasks and threads, and spawn_blocking's limiter."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import pytest

import asyncop
from asyncop import CapacityLimiter, OperationState
from asyncop.testing import wait_all_blocked
from tests.runtime.test_channel import wait_until

pytestmark = pytest.mark.timeout(30)


async def call_blocking(fn: Any, arg: Any = None, limiter: CapacityLimiter | None = None) -> Any:
    args = () if arg is None else (arg,)
    return await asyncop.spawn_blocking(fn, *args, limiter=limiter)


@pytest.mark.parametrize("bad", [1.0, "2", True, None])
def test_total_tokens_must_be_an_int(bad: Any) -> None:
    with pytest.raises(TypeError, match="CapacityLimiter"):
        CapacityLimiter(bad)
    limiter = CapacityLimiter(2)
    with pytest.raises(TypeError, match="CapacityLimiter"):
        limiter.total_tokens = bad
    assert limiter.total_tokens == 2


@pytest.mark.parametrize("bad", [-1, -5])
def test_total_tokens_must_not_be_negative(bad: int) -> None:
    with pytest.raises(ValueError, match="0 or more"):
        CapacityLimiter(bad)
    limiter = CapacityLimiter(2)
    with pytest.raises(ValueError, match="0 or more"):
        limiter.total_tokens = bad
    assert limiter.total_tokens == 2


def test_zero_tokens_lend_nothing_until_the_total_is_raised(vruntime: asyncop.Runtime) -> None:
    limiter = CapacityLimiter(0)
    got: list[str] = []

    async def borrower() -> None:
        async with limiter:
            got.append("in")

    async def main() -> None:
        with pytest.raises(asyncop.WouldBlock):
            limiter.acquire_nowait()
        async with asyncop.scope() as s:
            s.spawn(borrower)
            await wait_all_blocked()
            assert got == [] and limiter.statistics().tasks_waiting == 1
            limiter.total_tokens = 1
        assert got == ["in"] and limiter.borrowed_tokens == 0
        limiter.total_tokens = 0
        assert limiter.available_tokens == 0

    vruntime.run(main)


def test_async_with_bounds_the_tasks_inside(vruntime: asyncop.Runtime) -> None:
    limiter = CapacityLimiter(3)
    active: list[int] = [0, 0]

    async def worker() -> None:
        async with limiter:
            active[0] += 1
            active[1] = max(active[1], active[0])
            # A token handed to a waiter counts as lent before the waiter runs.
            assert active[0] <= limiter.borrowed_tokens <= 3
            await asyncop.sleep(0.1)
            active[0] -= 1

    async def main() -> None:
        async with asyncop.scope() as s:
            for _ in range(10):
                s.spawn(worker)

    vruntime.run(main)
    assert active == [0, 3]
    assert limiter.borrowed_tokens == 0
    assert limiter.available_tokens == 3


def test_with_bounds_threads() -> None:
    limiter = CapacityLimiter(2)
    active: list[int] = [0, 0]
    lock = threading.Lock()

    def worker() -> None:
        with limiter:
            with lock:
                active[0] += 1
                active[1] = max(active[1], active[0])
            time.sleep(0.01)
            with lock:
                active[0] -= 1

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert active == [0, 2]
    assert limiter.available_tokens == 2


def test_acquiring_twice_raises_for_a_task_and_for_a_thread(vruntime: asyncop.Runtime) -> None:
    limiter = CapacityLimiter(5)

    async def twice() -> None:
        async with limiter:
            with pytest.raises(RuntimeError, match="already holding one of"):
                await limiter.acquire_async()
        assert limiter.borrowed_tokens == 0

    vruntime.run(twice)
    assert limiter.acquire()
    with pytest.raises(RuntimeError, match="already holding one of"):
        limiter.acquire()
    assert limiter.borrowed_tokens == 1
    limiter.release()


def test_releasing_without_a_token_raises(vruntime: asyncop.Runtime) -> None:
    limiter = CapacityLimiter(1)
    with pytest.raises(RuntimeError, match="holding any of this"):
        limiter.release()

    async def task_releases() -> None:
        limiter.release()

    with pytest.raises(RuntimeError, match="holding any of this"):
        vruntime.run(task_releases)


def test_a_token_is_released_only_by_its_borrower() -> None:
    limiter = CapacityLimiter(1)
    assert limiter.acquire()
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            limiter.release()
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join(10)
    assert len(errors) == 1
    limiter.release()


def test_thread_acquire_times_out_and_leaves_nothing_behind() -> None:
    limiter = CapacityLimiter(1)
    limiter.acquire_on_behalf_of("holder")
    got: list[bool] = []
    thread = threading.Thread(target=lambda: got.append(limiter.acquire(timeout=0.05)))
    thread.start()
    thread.join(10)
    assert got == [False]
    assert limiter.borrowed_tokens == 1
    limiter.release_on_behalf_of("holder")
    assert limiter.acquire(timeout=0)  # the timed-out thread took nothing
    limiter.release()


def test_bad_timeout_raises_before_anything_changes() -> None:
    limiter = CapacityLimiter(1)
    with pytest.raises(TypeError):
        limiter.acquire(timeout="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        limiter.acquire(timeout=float("nan"))
    assert limiter.borrowed_tokens == 0
    assert limiter.acquire(timeout=float("inf"))
    limiter.release()


def test_blocking_acquire_in_a_coroutine_raises(vruntime: asyncop.Runtime) -> None:
    limiter = CapacityLimiter(1)

    async def blocks() -> None:
        limiter.acquire()

    with pytest.raises(RuntimeError, match="acquire_async"):
        vruntime.run(blocks)


def test_raising_total_tokens_wakes_waiters_and_lowering_retires_tokens(
    vruntime: asyncop.Runtime,
) -> None:
    limiter = CapacityLimiter(2)

    async def main() -> None:
        async with asyncop.scope() as s:
            # One at a time, so that the queue order is the spawn order
            # even when tasks run on several threads at once.
            for i in range(5):
                s.spawn(limiter.acquire_on_behalf_of_async, i)
                await wait_all_blocked()
            assert limiter.borrowed_tokens == 2
            limiter.total_tokens += 1
            await wait_all_blocked()
            assert limiter.borrowed_tokens == 3
            limiter.total_tokens = 1
            assert limiter.available_tokens == 0
            # Three are out and the total is 1: two releases retire tokens.
            limiter.release_on_behalf_of(0)
            limiter.release_on_behalf_of(1)
            await wait_all_blocked()
            assert limiter.borrowed_tokens == 1
            limiter.release_on_behalf_of(2)
            await wait_all_blocked()
            assert limiter.borrowed_tokens == 1  # borrower 3 got the one token
            limiter.total_tokens = 3
            await wait_all_blocked()
            assert limiter.borrowed_tokens == 2
            limiter.release_on_behalf_of(3)
            limiter.release_on_behalf_of(4)
        assert limiter.available_tokens == 3

    vruntime.run(main)


def test_waiters_get_tokens_in_fifo_order(vruntime: asyncop.Runtime) -> None:
    limiter = CapacityLimiter(1)
    order: list[int] = []

    async def waiter(i: int) -> None:
        async with limiter:
            order.append(i)
            await asyncop.sleep(0.01)

    async def main() -> None:
        async with asyncop.scope() as s:
            for i in range(6):
                s.spawn(waiter, i)
                await wait_all_blocked()

    vruntime.run(main)
    assert order == list(range(6))


def test_cancelled_waiter_takes_no_token(vruntime: asyncop.Runtime) -> None:
    limiter = CapacityLimiter(1)

    async def main() -> list[object]:
        await limiter.acquire_on_behalf_of_async("holder")
        async with asyncop.scope() as s:
            waiting = s.spawn(limiter.acquire_on_behalf_of_async, "cancelled")
            later = s.spawn(limiter.acquire_on_behalf_of_async, "later")
            await wait_all_blocked()
            waiting.cancel()
            await wait_all_blocked()
            limiter.release_on_behalf_of("holder")
        assert waiting.state is OperationState.CANCELLED
        assert later.state is OperationState.COMPLETED
        return sorted(limiter.statistics().borrowers, key=str)

    assert vruntime.run(main) == ["later"]


def test_spawn_blocking_takes_a_token_from_its_limiter(runtime: asyncop.Runtime) -> None:
    limiter = CapacityLimiter(2)
    active: list[int] = [0, 0]
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            active[0] += 1
            active[1] = max(active[1], active[0])
        time.sleep(0.02)
        with lock:
            active[0] -= 1
        return i

    async def call(i: int) -> int:
        value: int = await asyncop.spawn_blocking(work, i, limiter=limiter)
        return value

    async def main() -> list[int]:
        async with asyncop.scope() as s:
            ops = [s.spawn(call, i) for i in range(8)]
        return [op.result() for op in ops]

    assert runtime.run(main) == list(range(8))
    assert active == [0, 2]
    assert limiter.borrowed_tokens == 0


def test_spawn_blocking_calls_share_a_default_limiter_of_40(runtime: asyncop.Runtime) -> None:
    release = threading.Event()
    running: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        with lock:
            running.append(1)
        release.wait(20)

    async def main() -> tuple[int, int]:
        limiter = asyncop.current_default_limiter()
        assert limiter is asyncop.current_default_limiter()
        assert limiter.total_tokens == 40
        async with asyncop.scope() as s:
            for _ in range(45):
                s.spawn(call_blocking, work)
            while len(running) < 40:
                await asyncop.sleep(0.01)
            await asyncop.sleep(0.2)
            seen = (len(running), limiter.borrowed_tokens)
            release.set()
        return seen

    assert runtime.run(main) == (40, 40)
    assert len(running) == 45


def test_waiting_for_a_token_is_a_cancellation_point(vruntime: asyncop.Runtime) -> None:
    limiter = CapacityLimiter(1)
    ran: list[str] = []

    async def main() -> OperationState:
        await limiter.acquire_on_behalf_of_async("holder")
        async with asyncop.scope() as s:
            op = s.spawn(call_blocking, ran.append, "ran", limiter)
            await wait_all_blocked()
            op.cancel()
        limiter.release_on_behalf_of("holder")
        assert limiter.borrowed_tokens == 0
        return op.state

    assert vruntime.run(main) is OperationState.CANCELLED
    assert ran == []


def test_a_running_blocking_call_is_not_interrupted(runtime: asyncop.Runtime) -> None:
    go_on = threading.Event()
    started = threading.Event()

    def work() -> str:
        started.set()
        go_on.wait(10)
        return "kept"

    async def call() -> str:
        value: str = await asyncop.spawn_blocking(work, limiter=CapacityLimiter(1))
        return value

    op = runtime.spawn(call)
    assert started.wait(10)
    op.cancel()
    time.sleep(0.05)
    assert not op.done
    go_on.set()
    op.wait(10)
    assert op.result() == "kept"


def test_a_losing_select_branch_gives_its_token_back(vruntime: asyncop.Runtime) -> None:
    limiter = CapacityLimiter(1)

    async def main() -> int:
        await limiter.acquire_on_behalf_of_async("holder")
        index, _ = await asyncop.select(
            asyncop.spawn_blocking(time.sleep, 0, limiter=limiter), asyncop.sleep(1)
        )
        limiter.release_on_behalf_of("holder")
        assert limiter.borrowed_tokens == 0
        await limiter.acquire_on_behalf_of_async("next")  # nothing queued ahead
        limiter.release_on_behalf_of("next")
        return int(index)

    assert vruntime.run(main) == 1


def test_spawn_blocking_refuses_a_non_limiter(vruntime: asyncop.Runtime) -> None:
    with pytest.raises(TypeError, match="CapacityLimiter"):
        asyncop.spawn_blocking(time.sleep, 0, limiter=3)  # type: ignore[arg-type]


def test_current_default_limiter_needs_an_operation() -> None:
    with pytest.raises(RuntimeError, match="current_default_limiter"):
        asyncop.current_default_limiter()


def test_a_thread_waiting_for_a_token_gets_it_on_release() -> None:
    limiter = CapacityLimiter(1)
    assert limiter.acquire_on_behalf_of("holder")
    got: list[bool] = []
    thread = threading.Thread(target=lambda: got.append(limiter.acquire(timeout=5)))
    thread.start()
    wait_until(lambda: limiter.statistics().tasks_waiting == 1)
    limiter.release_on_behalf_of("holder")
    thread.join(10)
    assert got == [True]
    assert limiter.borrowed_tokens == 1


def test_an_infinite_total_never_makes_anyone_wait_and_can_be_lowered(
    vruntime: asyncop.Runtime,
) -> None:
    limiter = CapacityLimiter(math.inf)
    assert limiter.total_tokens == math.inf
    assert limiter.available_tokens == math.inf

    async def main() -> None:
        async with asyncop.scope() as s:
            for i in range(50):
                s.spawn(limiter.acquire_on_behalf_of_async, i)
            await wait_all_blocked()
            assert limiter.borrowed_tokens == 50
            limiter.total_tokens = 50
            assert limiter.available_tokens == 0
            waiter = s.spawn(limiter.acquire_on_behalf_of_async, "late")
            await wait_all_blocked()
            assert waiter.state is OperationState.RUNNING
            # Back to no limit: the waiter gets its token at once.
            limiter.total_tokens = math.inf
            await wait_all_blocked()
            assert waiter.state is OperationState.COMPLETED
            for i in range(50):
                limiter.release_on_behalf_of(i)
            limiter.release_on_behalf_of("late")
        assert limiter.borrowed_tokens == 0
        assert limiter.available_tokens == math.inf

    vruntime.run(main)


@pytest.mark.parametrize("bad", [2.5, 2.0, -math.inf, math.nan, "3"])
def test_a_total_other_than_an_int_or_inf_is_refused(bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="CapacityLimiter"):
        CapacityLimiter(bad)  # type: ignore[arg-type]
