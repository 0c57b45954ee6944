"""Instruments: ``runtime.add_instrument(obj)`` tells ``obj`` of every operation's life.

- a task's events come in the order of its life, each on the thread where
  it happens; a callback's, a scope's and a cancel's likewise;
- ``ended`` comes after the last ``step_ended``, and a parent's after its
  children's;
- an instrument that raises is removed and logged, and the others go on;
- an object with only some of the hooks gets only those;
- instruments can come and go while the runtime runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import asyncop
from asyncop import AsyncOperation
from asyncop.testing import VirtualClock

Op = AsyncOperation[Any]


class Recorder:
    """Every event, with the operation's name and the thread it came on."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()

    def _add(self, event: str, op: Op, extra: str = "") -> None:
        with self.lock:
            self.events.append((event, op.name, extra or threading.current_thread().name))

    def spawned(self, op: Op) -> None:
        self._add("spawned", op)

    def step_started(self, op: Op) -> None:
        self._add("step_started", op)

    def step_ended(self, op: Op) -> None:
        self._add("step_ended", op)

    def parked(self, op: Op, reason: object) -> None:
        self._add("parked", op, str(reason))

    def woken(self, op: Op) -> None:
        self._add("woken", op)

    def cancelled(self, op: Op, reason: object) -> None:
        self._add("cancelled", op, repr(reason))

    def ended(self, op: Op) -> None:
        self._add("ended", op)

    def of(self, name: str) -> list[str]:
        with self.lock:
            return [event for event, op_name, _ in self.events if op_name == name]


def eventually(condition: Callable[[], bool]) -> None:
    """Wait for ``condition``: an operation's end may be reported just after a
    thread waiting for it was woken."""
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.001)


async def napper() -> None:
    await asyncop.checkpoint()
    await asyncop.sleep(1)


@pytest.mark.timeout(10)
def test_a_task_is_told_in_the_order_of_its_life() -> None:
    recorder = Recorder()
    with asyncop.Runtime(1, clock=VirtualClock(autojump=True)) as rt:
        rt.add_instrument(recorder)
        rt.spawn(napper).wait(5)
    assert recorder.of("napper") == [
        "spawned",
        "step_started",  # to the checkpoint
        "step_ended",
        "step_started",  # to the sleep, which parks it
        "parked",
        "step_ended",
        "woken",
        "step_started",  # to its end
        "step_ended",
        "ended",
    ]
    reasons = [extra for event, _, extra in recorder.events if event == "parked"]
    assert reasons == ["sleep(1)"]


@pytest.mark.timeout(10)
def test_each_event_comes_on_the_thread_where_it_happens(runtime: asyncop.Runtime) -> None:
    recorder = Recorder()
    runtime.add_instrument(recorder)
    op = runtime.spawn(lambda: None, name="callback")
    op.wait(5)
    eventually(lambda: "ended" in recorder.of("callback"))
    threads = {event: thread for event, name, thread in recorder.events if name == "callback"}
    assert threads["spawned"] == threading.current_thread().name
    assert threads["step_started"] == threads["step_ended"] != threads["spawned"]
    assert [event for event, name, _ in recorder.events if name == "callback"] == [
        "spawned",
        "step_started",
        "step_ended",
        "ended",
    ]


@pytest.mark.timeout(10)
def test_scopes_and_cancels_are_told(vruntime: asyncop.Runtime) -> None:
    recorder = Recorder()
    vruntime.add_instrument(recorder)

    async def sleeper() -> None:
        await asyncop.sleep(100)

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(sleeper, name="sleeper")
            await asyncop.sleep(1)
            s.cancel("enough")

    vruntime.run(main)
    events = recorder.of("sleeper")
    assert events[0] == "spawned"
    assert events.count("cancelled") == 1
    assert events.index("parked") < events.index("cancelled") < events.index("woken")
    assert events[-2:] == ["step_ended", "ended"]
    cancels = {(name, extra) for event, name, extra in recorder.events if event == "cancelled"}
    assert ("sleeper", "'enough'") in cancels
    scope_events = [event for event, name, _ in recorder.events if name == "scope"]
    assert scope_events[0] == "spawned"
    assert scope_events[-1] == "ended"
    assert "step_started" not in scope_events  # its block runs in main's steps


@pytest.mark.timeout(10)
def test_an_instrument_that_raises_is_removed_and_logged(
    runtime: asyncop.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        def __init__(self) -> None:
            self.calls = 0

        def step_started(self, op: Op) -> None:
            self.calls += 1
            raise RuntimeError("instrument bug")

    broken, recorder = Broken(), Recorder()
    runtime.add_instrument(broken)
    runtime.add_instrument(recorder)
    with caplog.at_level(logging.ERROR, logger="asyncop"):
        for _ in range(3):
            runtime.spawn(lambda: None, name="work").wait(5)
    assert broken.calls == 1
    assert recorder.of("work").count("step_ended") == 3
    records = [r for r in caplog.records if "instrument bug" in str(r.exc_info)]
    assert len(records) == 1
    assert "was removed" in records[0].getMessage()
    assert records[0].exc_info is not None  # with its traceback
    with pytest.raises(ValueError, match="not installed"):
        runtime.remove_instrument(broken)


@pytest.mark.timeout(10)
def test_an_instrument_whose_hook_raises_twice_at_once_is_logged_once(
    runtime: asyncop.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        def __init__(self) -> None:
            self.calls = 0

        def ended(self, op: Op) -> None:
            self.calls += 1
            raise RuntimeError("instrument bug")

    broken = Broken()

    async def main() -> None:
        # The child and its scope end together: both ends are told to the
        # hooks read before the first one raised.
        async with asyncop.scope() as s:
            s.spawn(napper, name="child")
            await asyncop.checkpoint()
            s.cancel()

    runtime.add_instrument(broken)
    with caplog.at_level(logging.ERROR, logger="asyncop"):
        runtime.run(main)
        runtime.run(main)
    assert broken.calls >= 1
    records = [r for r in caplog.records if "instrument bug" in str(r.exc_info)]
    assert len(records) == 1, [r.getMessage() for r in records]


@pytest.mark.timeout(10)
def test_an_instrument_gets_only_the_hooks_it_has(runtime: asyncop.Runtime) -> None:
    class EndsOnly:
        def __init__(self) -> None:
            self.ended_ops: list[str] = []

        def ended(self, op: Op) -> None:
            self.ended_ops.append(op.name)

    ends = EndsOnly()
    runtime.add_instrument(ends)
    runtime.spawn(lambda: None, name="one").wait(5)
    eventually(lambda: ends.ended_ops == ["one"])
    runtime.remove_instrument(ends)
    runtime.spawn(lambda: None, name="two").wait(5)
    assert ends.ended_ops == ["one"]


@pytest.mark.timeout(30)
def test_instruments_come_and_go_while_the_runtime_runs(runtime: asyncop.Runtime) -> None:
    stop = threading.Event()

    async def busy() -> None:
        while not stop.is_set():
            await asyncop.checkpoint()

    ops = [runtime.spawn(busy) for _ in range(4)]
    recorders = [Recorder() for _ in range(20)]
    for recorder in recorders:
        runtime.add_instrument(recorder)
    for recorder in recorders[::2]:
        runtime.remove_instrument(recorder)
    stop.set()
    for op in ops:
        op.wait(10)
    for recorder in recorders[1::2]:
        with recorder.lock:
            started = sum(event == "step_started" for event, _, _ in recorder.events)
            ended = sum(event == "step_ended" for event, _, _ in recorder.events)
        # Added while tasks stepped: it may have missed the start of one step per task.
        assert started <= ended <= started + len(ops)


@pytest.mark.timeout(20)
def test_a_parent_is_reported_ended_after_its_children(runtime: asyncop.Runtime) -> None:
    async def child(i: int) -> None:
        await asyncop.sleep(0.001 * i)

    async def parent() -> None:
        async with asyncop.scope(name="group") as s:
            for i in range(4):
                s.spawn(child, i, name=f"child{i}")

    for _ in range(20):
        recorder = Recorder()
        runtime.add_instrument(recorder)
        runtime.spawn(parent, name="parent").wait(10)
        eventually(lambda r=recorder: "ended" in r.of("parent"))
        runtime.remove_instrument(recorder)
        ended = [name for event, name, _ in recorder.events if event == "ended"]
        assert ended.index("group") > max(ended.index(f"child{i}") for i in range(4))
        assert ended.index("parent") > ended.index("group")


@pytest.mark.timeout(20)
def test_spawned_comes_before_the_first_step_of_a_callback_a_task_spawns(
    runtime: asyncop.Runtime,
) -> None:
    # A callback needs no lane: a worker that just finished another callback
    # takes it at once. Its spawned() must still come first, however slow.
    class SlowSpawn(Recorder):
        def spawned(self, op: Op) -> None:
            if op.name.startswith("callback"):
                time.sleep(0.02)
            super().spawned(op)  # (recorded as the hook returns)

    def callback() -> None:
        pass

    async def main() -> None:
        for i in range(5):
            go = threading.Event()
            async with asyncop.scope() as s:
                s.spawn(go.wait, 10, name=f"spinner{i}")  # holds the other worker
                await asyncop.sleep(0.01)
                go.set()  # ... which then looks for the next callback at once
                s.spawn(callback, name=f"callback{i}")

    recorder = SlowSpawn()
    runtime.add_instrument(recorder)
    runtime.run(main)
    for i in range(5):
        eventually(lambda i=i: "ended" in recorder.of(f"callback{i}"))
        events = recorder.of(f"callback{i}")
        assert events.index("spawned") < events.index("step_started"), events
