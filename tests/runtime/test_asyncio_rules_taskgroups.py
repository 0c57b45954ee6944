"""Rules a user of asyncio's TaskGroup and timeout() expects of a scope.

Each test states, from the user's side, a rule of asyncio's task groups and
timeouts that asyncop promises too, in the cases the other scope tests leave
out: an error raised while handling the cancel of the block, BaseExceptions
mixed with plain failures, children that keep spawning while a sibling
fails, and the relative deadline of a timeout made before its block.

Where asyncop differs from asyncio by design, the test holds asyncop's rule
and says so: a cancel is level-triggered (an await in the handler of a
``Cancelled`` raises again at once; asyncio lets it run), and a timeout's
relative deadline counts from the entry of its block, as in trio.
``asyncop.timeout(seconds, op)`` waits for an operation; asyncio's block
form, ``async with timeout(seconds):``, is ``fail_after`` here, and the
one-argument call says so.
"""

from __future__ import annotations

from typing import Any

import pytest

import asyncop
from asyncop import Cancelled, OperationState
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(20)


class Boom(Exception):
    """The failure the tests raise on purpose."""


class Fatal(BaseException):
    """A BaseException that is neither an interrupt nor a cancel."""


def here() -> asyncop.AsyncOperation[Any]:
    op = asyncop.current_operation()
    assert op is not None
    return op


def kinds(group: BaseExceptionGroup[Any]) -> list[str]:
    """The type names of a group's direct members, sorted."""
    return sorted(type(exc).__name__ for exc in group.exceptions)


async def sleep_forever() -> None:
    await asyncop.sleep_forever()


async def crash_after(seconds: float, error: BaseException) -> None:
    await asyncop.sleep(seconds)
    raise error


@pytest.mark.asyncop
async def test_an_error_raised_while_handling_an_outside_cancel_fails_the_task(
    autojump_clock: VirtualClock,
) -> None:
    handled: list[str] = []

    async def runner() -> None:
        async with asyncop.scope() as s:
            s.spawn(sleep_forever)
            try:
                await asyncop.sleep_forever()
            except Cancelled as cancel:
                handled.append(str(cancel))
                raise Boom("while cancelled") from None

    async with asyncop.scope(supervise=True) as outer:
        task = outer.spawn(runner)
        await wait_all_blocked()
        task.cancel("stop")

    assert handled and "stop" in handled[0]
    assert task.state is OperationState.FAILED
    with pytest.raises(ExceptionGroup) as info:
        task.result()
    assert [type(e) for e in info.value.exceptions] == [Boom]


@pytest.mark.asyncop
@pytest.mark.parametrize(
    ("from_child", "from_body"),
    [(ZeroDivisionError(), Fatal()), (Fatal(), TypeError())],
    ids=["child-error-body-base", "child-base-body-error"],
)
async def test_a_base_exception_and_an_error_come_out_together_in_a_base_group(
    autojump_clock: VirtualClock, from_child: BaseException, from_body: BaseException
) -> None:
    async def nested() -> None:
        try:
            await asyncop.sleep_forever()
        finally:
            raise from_body

    with pytest.raises(BaseExceptionGroup) as info:
        async with asyncop.scope() as s:
            s.spawn(crash_after, 0.1, from_child)
            await nested()
    assert not isinstance(info.value, ExceptionGroup)
    assert kinds(info.value) == sorted([type(from_child).__name__, type(from_body).__name__])


@pytest.mark.asyncop
async def test_children_spawning_children_are_all_stopped_when_a_sibling_fails(
    autojump_clock: VirtualClock,
) -> None:
    born: list[asyncop.AsyncOperation[Any]] = []

    async def hydra(s: asyncop.AsyncOperation[Any]) -> None:
        born.append(here())
        await asyncop.sleep(0.01)
        s.spawn(hydra, s)
        s.spawn(hydra, s)

    async def hercules() -> None:
        while len(born) < 10:
            await asyncop.sleep(0.015)
        raise ZeroDivisionError

    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as s:
            s.spawn(hydra, s)
            s.spawn(hercules)
    assert kinds(info.value) == ["ZeroDivisionError"]
    assert len(born) >= 10
    assert all(op.done for op in born)
    assert s.children() == []


@pytest.mark.asyncop
async def test_an_await_in_the_handler_of_a_childs_failure_is_cancelled_again_at_once(
    autojump_clock: VirtualClock,
) -> None:
    # asyncio lets the handler sleep; asyncop's cancel is level-triggered.
    seen: list[tuple[str, float]] = []

    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as s:
            s.spawn(crash_after, 0.3, ZeroDivisionError())
            try:
                await asyncop.sleep(10)
            except Cancelled:
                seen.append(("cancelled", asyncop.current_time()))
                try:
                    await asyncop.sleep(0.5)
                except Cancelled:
                    seen.append(("again", asyncop.current_time()))
                    raise
    assert kinds(info.value) == ["ZeroDivisionError"]
    assert seen == [("cancelled", 0.3), ("again", 0.3)]


@pytest.mark.asyncop
async def test_a_relative_timeout_counts_from_the_entry_of_its_block(
    autojump_clock: VirtualClock,
) -> None:
    # asyncio.timeout(2) counts from the call; move_on_after and fail_after,
    # as trio's, count from the entry.
    limit = asyncop.fail_after(2)
    await asyncop.sleep(5)
    with pytest.raises(TimeoutError):
        async with limit:
            assert limit.deadline == 7
            await asyncop.sleep_forever()
    assert asyncop.current_time() == 7
    assert limit.cancelled_caught


@pytest.mark.asyncop
async def test_a_child_may_move_the_deadline_of_the_block_it_runs_in(
    autojump_clock: VirtualClock,
) -> None:
    async def shorten(limit: asyncop.TimeoutScope) -> None:
        await asyncop.sleep(1)
        limit.deadline = asyncop.current_time() + 1

    async with asyncop.move_on_after(100) as limit:
        here().spawn(shorten, limit)
        await asyncop.sleep_forever()
    assert limit.cancelled_caught
    assert asyncop.current_time() == 2


@pytest.mark.asyncop
async def test_asyncios_timeout_block_spelling_points_to_fail_after(
    autojump_clock: VirtualClock,
) -> None:
    with pytest.raises(TypeError, match=r"timeout\(5\) got no operation.*fail_after") as info:
        async with asyncop.timeout(5):
            await asyncop.sleep(1)
    assert "'await asyncop.timeout(seconds, op)'" in str(info.value)
    assert asyncop.current_time() == 0
    with pytest.raises(TypeError, match="needs an operation"):
        asyncop.timeout(5, None)  # type: ignore[call-overload]
