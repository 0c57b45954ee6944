"""A scope's own ``Cancelled`` inside a mixed exception group, after the
exception-group filtering cases of anyio's task-group suite.

A block may raise a group that holds a ``Cancelled`` next to real errors:
an ``except*`` handler that awaits after its scope was cancelled, or code
that gathers the exceptions it met into one group. The scope that caused
the cancel takes its ``Cancelled`` out of the group and lets the real
errors through; the ``Cancelled`` never leaves the scope that caused it.

Deliberate difference: ``cancelled_caught`` stays False when the block
failed, as it does for any failed block (trio and anyio set it here).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

import asyncop
from asyncop import Cancelled, OperationState
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(30)


class Boom(Exception):
    """A failure raised on purpose."""


def leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for member in exc.exceptions:
            yield from leaves(member)
    else:
        yield exc


async def raise_mixed_group(error: BaseException) -> None:
    """Raise ``error`` and the current ``Cancelled`` together, nested in two groups."""
    met: list[BaseException] = [error]
    try:
        await asyncop.checkpoint()
    except Cancelled as exc:
        met.append(exc)
    try:
        raise BaseExceptionGroup("outer", [BaseExceptionGroup("inner", met)])
    finally:
        del met


@pytest.mark.asyncop
async def test_a_move_on_scope_takes_its_cancel_out_of_a_mixed_group(
    autojump_clock: VirtualClock,
) -> None:
    error = Boom("real")
    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.move_on_after(math.inf) as cs:
            cs.cancel()
            await raise_mixed_group(error)
    assert list(leaves(info.value)) == [error]
    # The block failed: cancelled_caught stays False, as for any failed block.
    assert not cs.cancelled_caught


@pytest.mark.asyncop
async def test_a_scope_takes_its_cancel_out_of_a_mixed_group(autojump_clock: VirtualClock) -> None:
    error = Boom("real")
    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as s:
            s.cancel()
            await raise_mixed_group(error)
    assert list(leaves(info.value)) == [error]
    assert s.state is OperationState.FAILED


@pytest.mark.asyncop
async def test_the_rest_of_an_except_star_handled_group_is_an_error_not_a_cancel(
    autojump_clock: VirtualClock,
) -> None:
    # The handler for one half of a group awaits after the timeout fired; the
    # other half leaves with the handler's Cancelled, which the timeout takes.
    async def fail_with(exc: Exception) -> None:
        await asyncop.sleep(1)
        raise exc

    value_error = ValueError("kept")
    log: list[str] = []
    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.move_on_after(2):
            try:
                async with asyncop.scope() as s:
                    s.spawn(fail_with, KeyError("handled"))
                    s.spawn(fail_with, value_error)
            except* KeyError:
                log.append("handling")
                await asyncop.sleep(5)
                log.append("not reached")
    assert log == ["handling"]
    assert list(leaves(info.value)) == [value_error]
    # The task carries on: no Cancelled is left pending for it.
    await asyncop.sleep(1)


@pytest.mark.asyncop
async def test_a_child_raising_a_mixed_group_fails_with_the_real_error_only(
    autojump_clock: VirtualClock,
) -> None:
    error = Boom("real")

    async def child() -> None:
        try:
            await asyncop.sleep(10)
        except Cancelled as exc:
            raise BaseExceptionGroup("both", [error, exc]) from None

    with pytest.raises(ExceptionGroup) as info:
        async with asyncop.scope() as s:
            op = s.spawn(child)
            await asyncop.sleep(1)
            op.cancel()
    assert list(leaves(info.value)) == [error]
    assert op.state is OperationState.FAILED
    assert list(leaves(op.error)) == [error]  # type: ignore[arg-type]


def test_a_sync_scope_takes_its_cancel_out_of_a_mixed_group(runtime: asyncop.Runtime) -> None:
    error = Boom("real")
    with pytest.raises(ExceptionGroup) as info, runtime.scope() as s:
        s.cancel()
        try:
            s.token.check()
        except Cancelled as exc:
            raise BaseExceptionGroup("both", [error, exc]) from None
    assert list(leaves(info.value)) == [error]
    assert s.state is OperationState.FAILED
