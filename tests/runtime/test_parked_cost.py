"""What a parked task keeps alive for its await: a few fields, not a frame."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import asyncop
from asyncop.operations import Suspension, suspend
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(20)


def test_a_task_parked_on_an_event_awaits_no_generator_frame() -> None:
    seen: list[Any] = []

    async def main() -> None:
        event = asyncop.Event()

        async def waiter() -> None:
            await event.wait_async()

        async with asyncop.scope() as scope:
            op = scope.spawn(waiter)
            while op._task.coro is None or op._task.coro.cr_await is None:
                await asyncop.checkpoint()
            awaited = op._task.coro.cr_await
            seen.extend([awaited, sys.getsizeof(awaited)])
            event.set()

    with asyncop.Runtime(1, clock=VirtualClock(autojump=True)) as runtime:
        runtime.run(main)
    awaited, size = seen
    assert getattr(awaited, "gi_frame", None) is None
    assert size <= 64


def test_a_suspension_steps_as_a_one_yield_generator() -> None:
    token = object()
    it = suspend(token)
    assert type(it) is Suspension and iter(it) is it
    with pytest.raises(TypeError, match="before it started; send None first"):
        it.send(1)
    assert next(it) is token
    with pytest.raises(StopIteration) as stop:
        it.send("value")
    assert stop.value.value == "value"
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(KeyError):
        suspend(token).throw(KeyError("k"))
    closed = suspend(token)
    closed.close()
    with pytest.raises(StopIteration):
        next(closed)


def test_a_suspension_waiting_for_none_ends_with_none() -> None:
    it = suspend("event")
    assert it.send(None) == "event"
    with pytest.raises(StopIteration) as stop:
        next(it)
    assert stop.value.value is None
