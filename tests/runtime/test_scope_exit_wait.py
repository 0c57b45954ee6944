"""The exit of ``async with scope()`` waiting for the children still running.

The block's end and the wait happen in one locked step: while the children
run the scope is EXITING (its block over, its operation RUNNING), the task
is parked on "the children of scope ...", and it goes on once the last
child has ended, leaving no registration and nothing for the collector.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

import asyncop
from asyncop import OperationState, ScopeState
from tests._freethreading import may_not_free_by_refcounting

pytestmark = pytest.mark.timeout(30)


async def nap(seconds: float) -> None:
    await asyncop.sleep(seconds)


def test_exit_with_children_left_is_exiting_until_the_last_ends(
    vruntime: asyncop.Runtime,
) -> None:
    seen: list[Any] = []

    async def main() -> None:
        scope = asyncop.scope(name="outer")
        async with scope as s:
            s.spawn(nap, 5)

            async def watch() -> None:
                await asyncop.sleep(1)  # the exit waits by now
                waiting = "the children of scope 'outer'" in vruntime.dump()
                seen.append((scope.state, s.state, waiting))

            s.spawn(watch)
        seen.append((scope.state, s.state, asyncop.current_time()))

    vruntime.run(main)
    assert seen == [
        (ScopeState.EXITING, OperationState.RUNNING, True),
        (ScopeState.CLOSED, OperationState.COMPLETED, pytest.approx(5)),
    ]
    assert vruntime.registrations() == 0


def test_exit_with_no_child_left_does_not_wait(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[ScopeState, OperationState]:
        scope = asyncop.scope()
        async with scope as s:
            await s.spawn(nap, 1)
        return scope.state, s.state

    assert vruntime.run(main) == (ScopeState.CLOSED, OperationState.COMPLETED)
    assert vruntime.registrations() == 0


def test_cancel_from_outside_reaches_the_children_the_exit_waits_for(
    vruntime: asyncop.Runtime,
) -> None:
    log: list[Any] = []

    async def level(depth: int) -> None:
        try:
            if depth == 0:
                await asyncop.sleep(100)
                return
            async with asyncop.scope() as s:
                s.spawn(level, depth - 1)
            log.append(("after the block", depth))  # never: the cancel came from outside
        finally:
            log.append(("left", depth))

    async def main() -> OperationState:
        top = asyncop.current_operation()
        assert top is not None
        op = top.spawn(level, 50)
        await asyncop.sleep(1)
        op.cancel()
        try:
            await op
        except asyncop.CancellationError:
            pass
        return op.state

    assert vruntime.run(main) is OperationState.CANCELLED
    assert log == [("left", depth) for depth in range(51)]
    assert vruntime.registrations() == 0


@pytest.mark.parametrize("rounds", [300])
def test_children_ending_as_the_exit_starts_never_strand_it(rounds: int) -> None:
    # Sync children on the other worker end around the exit's first look at
    # them: whichever way the race goes, the exit returns and the scope completes.
    rt = asyncop.Runtime(2, name="exitrace")

    def quick() -> int:
        return 1

    async def main() -> list[OperationState]:
        states = []
        for _ in range(rounds):
            async with asyncop.scope() as s:
                s.spawn(quick)
            states.append(s.state)
        return states

    try:
        assert set(rt.run(main)) == {OperationState.COMPLETED}
        assert rt.registrations() == 0
    finally:
        assert rt.shutdown(timeout=10)


@may_not_free_by_refcounting
def test_exit_wait_leaves_nothing_for_the_collector(vruntime: asyncop.Runtime) -> None:
    async def main() -> None:
        for _ in range(50):
            async with asyncop.scope() as s:
                s.spawn(nap, 1)

    gc.collect()
    gc.disable()
    try:
        vruntime.run(main)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        kinds = {type(obj).__name__ for obj in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not kinds & {"ScopeDone", "Subscription", "AsyncOperation", "TaskState"}
