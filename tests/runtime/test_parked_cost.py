"""What a parked task keeps alive for its await: a few fields, not a frame."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import asyncop
from asyncop.lowlevel import is_compiled
from asyncop.operations import Suspension, suspend
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(20)


@pytest.mark.skipif(
    not is_compiled(),
    reason="as Python a task suspends in a generator, which CPython steps without a call",
)
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


@pytest.mark.parametrize("make", [Suspension, suspend], ids=["Suspension", "suspend"])
def test_a_suspension_steps_as_a_one_yield_generator(make: Any) -> None:
    token = object()
    it = make(token)
    assert iter(it) is it
    with pytest.raises(TypeError, match=r"before it started|just-started generator"):
        it.send(1)
    it = make(token)
    assert next(it) is token
    with pytest.raises(StopIteration) as stop:
        it.send("value")
    assert stop.value.value == "value"
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(KeyError):
        make(token).throw(KeyError("k"))
    closed = make(token)
    closed.close()
    with pytest.raises(StopIteration):
        next(closed)


@pytest.mark.parametrize("make", [Suspension, suspend], ids=["Suspension", "suspend"])
def test_a_suspension_waiting_for_none_ends_with_none(make: Any) -> None:
    it = make("event")
    assert it.send(None) == "event"
    with pytest.raises(StopIteration) as stop:
        next(it)
    assert stop.value.value is None
