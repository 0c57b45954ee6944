"""A cancel with a grace period, as a server author uses it: work that catches
the request and cleans up, work that ignores it, a nested scope with a grace
of its own, a handler that swallows the final cancel. The behaviours trio's
and anyio's shutdown recipes rely on (ask, wait, then cancel), on the virtual
clock so that every time below is exact.
"""

from __future__ import annotations

from typing import Any

import pytest

import asyncop
from asyncop import OperationState
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


def vruntime() -> asyncop.Runtime:
    return asyncop.Runtime(2, clock=VirtualClock(autojump=True))


def test_asked_work_cleans_up_and_ignoring_work_is_cancelled_when_the_grace_ends() -> None:
    log: list[tuple[float, str]] = []

    async def cleaner() -> str:
        await asyncop.wait_stop_requested()
        log.append((asyncop.current_time(), "cleaner asked"))
        await asyncop.sleep(1)  # flush
        return "flushed"

    async def ignorer() -> None:
        try:
            await asyncop.sleep_forever()
        finally:
            log.append((asyncop.current_time(), "ignorer cancelled"))

    async def main() -> list[Any]:
        async with asyncop.scope(name="service") as service:
            ops = [service.spawn(cleaner, name="cleaner"), service.spawn(ignorer, name="ignorer")]
            await asyncop.sleep(10)
            service.cancel("deploying", grace=5)
            tokens = [(op.token.stop_requested, op.token.cancelled) for op in ops]
        assert tokens == [(True, False), (True, False)]
        return [(op.state, op.cancel_reason) for op in ops]

    with vruntime() as runtime:
        states = runtime.run(main)
    assert states == [
        (OperationState.COMPLETED, None),
        (OperationState.CANCELLED, "deploying"),
    ]
    assert log == [(10.0, "cleaner asked"), (15.0, "ignorer cancelled")]


def test_a_nested_scope_with_a_shorter_grace_of_its_own_ends_first() -> None:
    ended: dict[str, float] = {}

    async def stubborn(name: str) -> None:
        try:
            await asyncop.sleep_forever()
        finally:
            ended[name] = asyncop.current_time()

    async def batch() -> None:
        async with asyncop.scope(name="batch") as inner:
            inner.spawn(stubborn, "inner")
            await asyncop.sleep(1)
            inner.cancel("batch over", grace=2)
        ended["batch block"] = asyncop.current_time()
        await stubborn("after the batch")

    async def main() -> None:
        async with asyncop.scope() as outer:
            outer.spawn(batch)
            await asyncop.sleep(5)
            outer.cancel("shutdown", grace=10)

    with vruntime() as runtime:
        runtime.run(main)
    assert ended == {"inner": 3.0, "batch block": 3.0, "after the batch": 15.0}


def test_a_nested_grace_longer_than_the_outer_one_is_cut_short_by_it() -> None:
    ended: dict[str, float] = {}

    async def stubborn() -> None:
        try:
            await asyncop.sleep_forever()
        finally:
            ended["inner"] = asyncop.current_time()

    async def batch() -> None:
        async with asyncop.scope(name="batch") as inner:
            inner.spawn(stubborn)
            inner.cancel("batch over", grace=50)

    async def main() -> None:
        async with asyncop.scope() as outer:
            outer.spawn(batch)
            await asyncop.sleep(1)
            outer.cancel("shutdown", grace=5)

    with vruntime() as runtime:
        runtime.run(main)
    assert ended == {"inner": 6.0}


def test_a_value_returned_after_swallowing_the_final_cancel_is_discarded() -> None:
    async def swallower() -> str:
        try:
            await asyncop.sleep_forever()
        except asyncop.Cancelled:
            return "swallowed"
        return "never"

    async def main() -> asyncop.AsyncOperation[str]:
        async with asyncop.scope() as s:
            op = s.spawn(swallower)
            await wait_all_blocked()
            s.cancel("stop", grace=1)
        return op

    with vruntime() as runtime:
        op = runtime.run(main)
    assert op.state is OperationState.CANCELLED
    assert op.cancel_reason == "stop"


def test_a_thread_callback_polls_its_token_and_returns_what_it_did() -> None:
    def copy(items: int) -> tuple[int, bool]:
        token = asyncop.current_operation(require=True).token
        done = 0
        while done < items and not token.stop_requested:
            done += 1
        token.check()  # asked, not cancelled: the grace has not ended
        return done, token.cancelled

    async def main() -> tuple[OperationState, tuple[int, bool]]:
        async with asyncop.scope() as s:
            s.cancel("asked first", grace=100)
            worker = s.spawn(copy, 10**9)
        return worker.state, worker.result()

    with vruntime() as runtime:
        state, (done, cancelled) = runtime.run(main)
    assert state is OperationState.COMPLETED
    assert (done, cancelled) == (0, False)  # asked from before its first item


def test_work_spawned_after_the_request_is_asked_from_its_first_line() -> None:
    seen: list[bool] = []

    async def late() -> None:
        seen.append(asyncop.stop_requested())

    async def main() -> None:
        async with asyncop.scope() as s:
            s.cancel("draining", grace=3)
            s.spawn(late)
            s.spawn(lambda: seen.append(asyncop.stop_requested()))

    with vruntime() as runtime:
        runtime.run(main)
    assert seen == [True, True]


def test_the_snapshot_names_the_request_and_when_the_grace_ends() -> None:
    async def main() -> dict[str, Any]:
        async with asyncop.scope(name="service") as s:
            await asyncop.sleep(2)
            s.cancel("deploying", grace=5)
            rows: list[dict[str, Any]] = asyncop.current_runtime().snapshot()["operations"]
            (row,) = [row for row in rows if row["name"] == "service"]
            s.cancel()
        return row

    with vruntime() as runtime:
        row = runtime.run(main)
    assert row["stop"] == "asked to stop (deploying), cancelled at 7.000"
    assert row["cancelling"] is False
