"""A ``Cancelled`` that no cancel of the scope caused, after the cancel-scope
cases of trio and anyio (a scope catches only the ``Cancelled`` of its own
cancel) and asyncio's task-group case of a ``CancelledError`` raised in the
body by hand (the group lets it through).

Such a ``Cancelled`` comes from another operation's ``token.check()`` (a
job handle, the token of the task that called a thread), or from code that
raises it by hand. A scope that was not cancelled must let it through: the
block stopped part way, so the code after the block must not run as if it
had finished, and wrapping code in a scope must not change how its task
ends. A scope that was cancelled still stops its own ``Cancelled``.
"""

from __future__ import annotations

import pytest

import asyncop
from asyncop import Cancelled, OperationState
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(30)


async def idle() -> None:
    await asyncop.sleep_forever()


def cancelled_job(parent: asyncop.AsyncOperation[object]) -> asyncop.AsyncOperation[None]:
    """A sibling task, cancelled: its token raises ``Cancelled`` on ``check()``."""
    job = parent.spawn(idle)
    job.cancel("the job was stopped")
    return job


@pytest.mark.asyncop
async def test_another_operations_cancel_leaves_an_uncancelled_scope(
    autojump_clock: VirtualClock,
) -> None:
    me = asyncop.current_operation()
    job = cancelled_job(me)
    log: list[str] = []

    async def watcher() -> str:
        async with asyncop.scope():
            job.token.check()
            log.append("rest of the block")
        log.append("after the block")
        return "finished"

    op = me.spawn(watcher, supervise=True)
    await asyncop.race(op)
    assert log == []
    assert op.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_the_same_task_without_a_scope_ends_the_same_way(
    autojump_clock: VirtualClock,
) -> None:
    me = asyncop.current_operation()
    job = cancelled_job(me)

    async def bare() -> str:
        job.token.check()
        return "finished"

    async def scoped() -> str:
        async with asyncop.scope():
            job.token.check()
        return "finished"

    ops = [me.spawn(bare, supervise=True), me.spawn(scoped, supervise=True)]
    for op in ops:
        await asyncop.race(op)
    assert [op.state for op in ops] == [OperationState.CANCELLED] * 2


@pytest.mark.asyncop
async def test_a_cancelled_raised_by_hand_passes_through_nested_scopes(
    autojump_clock: VirtualClock,
) -> None:
    with pytest.raises(Cancelled):
        async with asyncop.scope() as outer, asyncop.scope(), asyncop.scope(supervise=True):
            raise Cancelled("raised by hand")
    assert not outer.token.cancelled


@pytest.mark.asyncop
async def test_an_outer_scope_that_was_cancelled_still_stops_it(
    autojump_clock: VirtualClock,
) -> None:
    job = cancelled_job(asyncop.current_operation())
    async with asyncop.scope() as outer:
        outer.cancel()
        async with asyncop.scope(shield=True):
            job.token.check()
        pytest.fail("the Cancelled should have left the shielded scope")
    assert outer.state is OperationState.CANCELLED


@pytest.mark.asyncop
async def test_move_on_after_does_not_move_on_from_it(autojump_clock: VirtualClock) -> None:
    job = cancelled_job(asyncop.current_operation())
    cs = asyncop.move_on_after(5)
    with pytest.raises(Cancelled):
        async with cs:
            job.token.check()
    assert not cs.cancelled_caught
    assert asyncop.current_time() == 0


@pytest.mark.asyncop
async def test_a_group_of_it_beside_an_error_keeps_the_error(
    autojump_clock: VirtualClock,
) -> None:
    with pytest.raises(ExceptionGroup) as caught:
        async with asyncop.scope():
            raise BaseExceptionGroup("gathered", [Cancelled("by hand"), KeyError("k")])
    (group,) = caught.value.exceptions
    assert isinstance(group, ExceptionGroup)
    assert [type(exc) for exc in group.exceptions] == [KeyError]


@pytest.mark.asyncop
async def test_own_cancel_is_still_stopped_by_the_scope(autojump_clock: VirtualClock) -> None:
    async with asyncop.scope() as s:
        s.cancel()
        await asyncop.sleep(1)
    assert s.state is OperationState.CANCELLED
    async with asyncop.move_on_after(1) as cs:
        await asyncop.sleep_forever()
    assert cs.cancelled_caught


def test_a_sync_scope_lets_it_through_too(vruntime: asyncop.Runtime) -> None:
    log: list[str] = []

    async def main() -> asyncop.AsyncOperation[object]:
        me = asyncop.current_operation()
        job = cancelled_job(me)

        def worker() -> str:
            with asyncop.move_on_after(5) as cs:
                job.token.check()
            log.append(f"after the block, caught={cs.cancelled_caught}")
            return "finished"

        op = me.spawn(worker, supervise=True)
        await asyncop.race(op)
        return op

    op = vruntime.run(main)
    assert log == []
    assert op.state is OperationState.CANCELLED


def test_a_plain_threads_scope_lets_it_through(vruntime: asyncop.Runtime) -> None:
    job = vruntime.spawn(idle)
    job.cancel()
    job.wait(5)
    with pytest.raises(Cancelled), vruntime.scope():
        job.token.check()
