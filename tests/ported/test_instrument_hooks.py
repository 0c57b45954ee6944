"""Instruments as a trio user writes them, with asyncop's hook names: the
behaviours trio's instrument suite checks (hooks bracket each step, an
instrument that raises is dropped and the run goes on, instruments come and
go from inside hooks), and the hooks' contract under many tasks at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from typing import Any

import pytest

import asyncop
from asyncop import AsyncOperation
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(30)

Op = AsyncOperation[Any]

HOOK_NAMES = ("spawned", "step_started", "parked", "woken", "step_ended", "cancelled", "ended")


def short(op: Op) -> str:
    """A task's name is its function's qualified name: the last part of it."""
    return op.name.rsplit(".", 1)[-1]


class Abort(BaseException):
    """Not an ``Exception``: what ``pytest.fail`` or ``sys.exit`` raise in a hook."""


class Journal:
    """Every event, per operation, in the order each thread saw it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_op: dict[Op, list[str]] = defaultdict(list)

    def _add(self, op: Op, event: str) -> None:
        with self.lock:
            self.by_op[op].append(event)

    def spawned(self, op: Op) -> None:
        self._add(op, "spawned")

    def step_started(self, op: Op) -> None:
        self._add(op, "start")

    def step_ended(self, op: Op) -> None:
        self._add(op, "end")

    def ended(self, op: Op) -> None:
        self._add(op, "ended")


async def hop(n: int) -> int:
    for _ in range(n):
        await asyncop.sleep(0.5)
        await asyncop.checkpoint()
    return n


def test_every_step_is_bracketed_and_a_life_is_spawned_steps_ended() -> None:
    # trio: before_task_step/after_task_step pair up for each task, between
    # task_spawned and task_exited, however the tasks interleave.
    journal = Journal()

    async def main() -> list[int]:
        async with asyncop.scope() as s:
            ops = [s.spawn(hop, i % 4) for i in range(40)]
        return [op.result() for op in ops]

    with asyncop.Runtime(2, clock=VirtualClock(autojump=True)) as runtime:
        runtime.add_instrument(journal)
        assert runtime.run(main) == [i % 4 for i in range(40)]
        deadline = time.monotonic() + 5
        while not all(events[-1:] == ["ended"] for events in journal.by_op.values()):
            assert time.monotonic() < deadline, "an operation was never reported ended"
            time.sleep(0.001)
    tasks = [op for op in journal.by_op if short(op) == "hop"]
    assert len(tasks) == 40
    for op in tasks:
        events = journal.by_op[op]
        assert events[0] == "spawned" and events[-1] == "ended"
        steps = events[1:-1]
        assert steps == ["start", "end"] * (len(steps) // 2), events
        # a first step, then one per sleep and one per checkpoint
        assert len(steps) // 2 == op.stats.steps == 1 + 2 * op.result()


@pytest.mark.parametrize("hook", HOOK_NAMES)
def test_a_hook_raising_a_base_exception_is_removed_and_the_run_goes_on(
    hook: str, caplog: pytest.LogCaptureFixture
) -> None:
    # trio removes an instrument whatever its hook raises; a BaseException
    # must neither escape into a worker nor leave a task unreported.
    calls = []

    def raise_abort(*args: object) -> None:
        calls.append(args)
        raise Abort(hook)

    def method(self: object, *args: object) -> None:
        raise_abort(*args)

    method.__name__ = hook
    faulty = type("Faulty", (), {hook: method})()
    journal = Journal()

    async def child() -> str:
        await asyncop.sleep(1)
        return "child"

    async def main() -> str:
        async with asyncop.scope() as s:
            done = s.spawn(child)
            s.spawn(child).cancel("not needed")  # a cancel
        return done.result()

    runtime = asyncop.Runtime(2, clock=VirtualClock(autojump=True))
    try:
        runtime.add_instrument(journal)
        runtime.add_instrument(faulty)
        with caplog.at_level(logging.ERROR, logger="asyncop"):
            op = runtime.spawn(main)
            assert op.wait(timeout=10).value == "child"
        assert calls, f"{hook}() was never called"
        with pytest.raises(ValueError, match="not installed"):
            runtime.remove_instrument(faulty)
        runtime.remove_instrument(journal)  # the other one stays
        failures = [r for r in caplog.records if f"raised in {hook}()" in r.getMessage()]
        assert len(failures) == 1
        assert failures[0].exc_info is not None and failures[0].exc_info[0] is Abort
    finally:
        assert runtime.shutdown(timeout=10)


def test_a_hook_may_add_another_instrument_and_remove_its_own() -> None:
    # trio lets an instrument add and remove instruments from its hooks.
    counted: list[str] = []

    class Counter:
        def step_started(self, op: Op) -> None:
            counted.append(short(op))

    counter = Counter()

    class Installer:
        def __init__(self, runtime: asyncop.Runtime) -> None:
            self.runtime = runtime
            self.calls = 0

        def step_ended(self, op: Op) -> None:
            self.calls += 1
            self.runtime.add_instrument(counter)
            self.runtime.remove_instrument(self)

    async def main() -> None:
        for _ in range(3):
            await asyncop.checkpoint()

    with asyncop.Runtime(2) as runtime:
        installer = Installer(runtime)
        runtime.add_instrument(installer)
        runtime.run(main)
        runtime.remove_instrument(counter)
        with pytest.raises(ValueError, match="not installed"):
            runtime.remove_instrument(installer)
    assert installer.calls == 1
    assert counted == ["main"] * 3  # the steps after the first


def test_one_object_may_instrument_two_runtimes() -> None:
    journal = Journal()

    async def main() -> int:
        await asyncop.checkpoint()
        return 1

    with asyncop.Runtime(1, name="left") as left, asyncop.Runtime(1, name="right") as right:
        left.add_instrument(journal)
        right.add_instrument(journal)
        assert left.run(main) + right.run(main) == 2
        with pytest.raises(ValueError, match=r"installed already|already installed"):
            left.add_instrument(journal)
        left.remove_instrument(journal)
        right.remove_instrument(journal)
    assert sorted(op.runtime.name for op in journal.by_op) == ["left", "right"]


def test_parked_says_on_what_and_gives_the_awaitables(vruntime: asyncop.Runtime) -> None:
    # asyncio shows what a task awaits through its stack; an instrument gets it
    # as the park's reason, which prints as dump() does.
    parks: list[tuple[str, str, int]] = []

    class Parks:
        def parked(self, op: Op, reason: Any) -> None:
            parks.append((short(op), str(reason), len(reason.events)))

    ready = asyncop.Event(name="ready")

    async def waiter() -> None:
        await ready.wait_async()

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(waiter, name="waiter")
            await asyncop.sleep(1)
            ready.set()

    vruntime.add_instrument(Parks())
    vruntime.run(main)
    assert ("waiter", "event 'ready'", 1) in parks
    assert ("main", "sleep(1)", 1) in parks


def test_a_runtime_with_no_instrument_left_runs_as_before() -> None:
    journal = Journal()

    async def main() -> int:
        runtime = asyncop.current_runtime()
        await asyncop.checkpoint()
        runtime.remove_instrument(journal)
        await asyncop.checkpoint()
        return 5

    with asyncop.Runtime(2) as runtime:
        runtime.add_instrument(journal)
        assert runtime.run(main) == 5
        (main_op,) = [op for op in journal.by_op if short(op) == "main"]
        # told up to the step that removed it, and no more
        assert journal.by_op[main_op][:3] == ["spawned", "start", "end"]
        assert journal.by_op[main_op].count("start") == 2


def test_an_instrument_with_trio_hook_names_is_told_the_names_to_use() -> None:
    class FromTrio:
        def task_spawned(self, task: object) -> None:
            pass

        def before_task_step(self, task: object) -> None:
            pass

        def after_task_step(self, task: object) -> None:
            pass

    with asyncop.Runtime(1) as runtime, pytest.raises(TypeError) as caught:
        runtime.add_instrument(FromTrio())
    message = str(caught.value)
    assert "FromTrio has none" in message
    assert (
        "task_spawned is spawned, before_task_step is step_started, "
        "after_task_step is step_ended" in message
    )
