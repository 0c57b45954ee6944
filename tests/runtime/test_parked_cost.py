"""What a parked task keeps alive for its await: a few fields, not a frame."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import asyncop
from asyncop.lowlevel import is_compiled, pass_checkpoint, resolve
from asyncop.operations import Awaited, SuspendsItself, Suspension, suspend, thread_state
from asyncop.runtime._core._items import queued_after
from asyncop.testing import VirtualClock, assert_checkpoints

pytestmark = pytest.mark.timeout(20)


@pytest.mark.skipif(
    not is_compiled(),
    reason="as Python a task suspends in a generator, which CPython steps without a call",
)
def test_a_task_parked_on_an_event_awaits_no_generator_frame() -> None:
    [(awaited, size)] = _parked_on_an_event(
        lambda op: (op._task.coro.cr_await, sys.getsizeof(op._task.coro.cr_await))
    )
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


@pytest.mark.parametrize("name", ["__iter__", "__next__", "send", "throw", "close"])
def test_both_kinds_of_suspension_step_by_one_iterator_protocol(name: str) -> None:
    assert getattr(Suspension, name) is getattr(SuspendsItself, name)
    assert not hasattr(Awaited, name)  # (an event that is no suspension is no iterator)


@pytest.mark.parametrize("make", [Suspension, suspend], ids=["Suspension", "suspend"])
def test_a_suspension_waiting_for_none_ends_with_none(make: Any) -> None:
    it = make("event")
    assert it.send(None) == "event"
    with pytest.raises(StopIteration) as stop:
        next(it)
    assert stop.value.value is None


def _parked_on_an_event(inspect: Any) -> list[Any]:
    """What ``inspect(op)`` returns for a task parked on an event's wait_async()."""
    seen: list[Any] = []

    async def main() -> None:
        event = asyncop.Event()

        async def waiter() -> None:
            await event.wait_async()

        async with asyncop.scope() as scope:
            op = scope.spawn(waiter)
            while op._task.coro is None or op._task.coro.cr_await is None:
                await asyncop.checkpoint()
            seen.append(inspect(op))
            event.set()

    with asyncop.Runtime(1, clock=VirtualClock(autojump=True)) as runtime:
        runtime.run(main)
    return seen


@pytest.mark.skipif(not is_compiled(), reason="as Python a task suspends in a generator")
def test_a_task_parked_on_an_event_keeps_one_object_for_its_wait() -> None:
    [(awaited, subscribed)] = _parked_on_an_event(
        lambda op: (op._task.coro.cr_await, op._task._subs.event)
    )
    assert awaited is subscribed


@pytest.mark.skipif(not is_compiled(), reason="as Python a node's fields are slots")
def test_a_parked_task_s_node_fits_256_bytes() -> None:
    [size] = _parked_on_an_event(sys.getsizeof)
    assert size <= 256


@pytest.mark.skipif(not is_compiled(), reason="as Python a task state's fields are slots")
def test_a_parked_task_s_task_state_fits_128_bytes() -> None:
    [size] = _parked_on_an_event(lambda op: sys.getsizeof(op._task))
    assert size <= 128


@pytest.mark.skipif(not is_compiled(), reason="as Python a subscription's fields are slots")
def test_a_parked_task_s_subscription_fits_64_bytes() -> None:
    [(size, callback)] = _parked_on_an_event(
        lambda op: (sys.getsizeof(op._task._subs), op._task._subs.callback)
    )
    assert size <= 64
    assert callback is resolve


def test_a_task_s_checkpoint_count_wraps_at_32_bits() -> None:
    passed: list[bool] = []

    async def main() -> None:
        task = thread_state().task
        assert task is not None
        task.checkpoints = 2**32 - 1
        with assert_checkpoints():
            passed.append(pass_checkpoint())
        assert task.checkpoints == 0

    with asyncop.Runtime(1, clock=VirtualClock(autojump=True)) as runtime:
        runtime.run(main)
    assert passed == [True]


def test_an_operation_s_step_and_wake_counts_wrap_at_32_bits() -> None:
    def at_the_last_count(op: Any) -> Any:
        assert (op.stats.steps, op.stats.wakes) == (1, 0)
        op._steps = op._wakes = 2**32 - 1
        return op

    [op] = _parked_on_an_event(at_the_last_count)  # (then woken: one more step and wake)
    assert (op.stats.steps, op.stats.wakes) == (0, 0)


def test_a_task_wakes_across_the_wrap_of_its_32_bit_wait_generation() -> None:
    seen: list[object] = []

    async def main() -> None:
        task = thread_state().task
        assert task is not None
        task.generation = 2**32 - 1
        event = asyncop.Event()

        async def setter() -> None:
            await asyncop.sleep(1)
            event.set()

        async with asyncop.scope() as scope:
            scope.spawn(setter)
            await event.wait_async()
            seen.append(task.generation == (0 if is_compiled() else 2**32))
        await asyncop.sleep(1)  # (a timer's wait, after the wrap)
        seen.append("woken")

    with asyncop.Runtime(1, clock=VirtualClock(autojump=True)) as runtime:
        runtime.run(main)
    assert seen == [True, "woken"]


def test_queue_numbers_compare_across_the_32_bit_wrap() -> None:
    numbers: list[int] = []

    async def main() -> None:
        task = thread_state().task
        assert task is not None
        with task.task.runtime._lock:
            task.task.runtime._queue_seq = 2**32 - 1
        await asyncop.checkpoint()
        numbers.append(task.queued_at)

    with asyncop.Runtime(1, clock=VirtualClock(autojump=True)) as runtime:
        runtime.run(main)
    assert numbers == [0 if is_compiled() else 2**32]
    for earlier in (0, 5, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1):
        for ahead in (1, 2, 1000, 2**31 - 1):
            later = (earlier + ahead) % 2**32
            assert queued_after(later, earlier)
            assert not queued_after(earlier, later)
        assert not queued_after(earlier, earlier)


def test_children_stay_listed_in_order_whichever_ends_first() -> None:
    listed: list[list[str]] = []

    async def main() -> None:
        events = {name: asyncop.Event() for name in "abcdefg"}

        async def child(name: str) -> None:
            await events[name].wait_async()

        async with asyncop.scope() as scope:
            for name in "abcde":
                scope.spawn(child, name, name=name)
            for name in "cae":  # a middle one, the first, the last
                events[name].set()
                await asyncop.sleep(1)
                listed.append([op.name for op in scope.children()])
            for name in "fg":
                scope.spawn(child, name, name=name)
            for name in "bdfg":
                events[name].set()
                await asyncop.sleep(1)
                listed.append([op.name for op in scope.children()])

    with asyncop.Runtime(1, clock=VirtualClock(autojump=True)) as runtime:
        runtime.run(main)
    assert listed == [
        ["a", "b", "d", "e"],
        ["b", "d", "e"],
        ["b", "d"],
        ["d", "f", "g"],
        ["f", "g"],
        ["g"],
        [],
    ]


def test_a_node_s_flags_read_as_bools() -> None:
    def flags(op: Any) -> list[object]:
        rows = op.runtime.snapshot()["operations"]
        return [
            op.shield,
            op.expired,
            *(row[key] for row in rows for key in ("shield", "cancelling")),
        ]

    [read] = _parked_on_an_event(flags)
    assert len(read) > 2
    assert all(flag is False for flag in read)


@pytest.mark.parametrize("set_first", [False, True], ids=["waiting", "already set"])
def test_one_wait_awaited_by_two_tasks_wakes_both(set_first: bool) -> None:
    woke: list[str] = []

    async def main() -> None:
        event = asyncop.Event()
        wait = event.wait_async()

        async def waiter(name: str) -> None:
            await wait
            woke.append(name)

        if set_first:
            event.set()
        async with asyncop.scope() as scope:
            scope.spawn(waiter, "a")
            scope.spawn(waiter, "b")
            await asyncop.sleep(1)
            event.set()
        await wait

    with asyncop.Runtime(2, clock=VirtualClock(autojump=True)) as runtime:
        runtime.run(main)
    assert sorted(woke) == ["a", "b"]


def test_a_task_parked_on_an_event_is_cancelled_with_the_error_it_handles() -> None:
    seen: list[BaseException | None] = []

    async def main() -> None:
        event = asyncop.Event()

        async def waiter() -> None:
            try:
                raise KeyError("handled")
            except KeyError:
                try:
                    await event.wait_async()
                except asyncop.Cancelled as exc:
                    seen.append(exc.__context__)
                    raise

        async with asyncop.scope() as scope:
            op = scope.spawn(waiter)
            await asyncop.sleep(1)
            op.cancel()

    with asyncop.Runtime(1, clock=VirtualClock(autojump=True)) as runtime:
        runtime.run(main)
    [context] = seen
    assert isinstance(context, KeyError)
