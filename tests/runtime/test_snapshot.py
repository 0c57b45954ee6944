"""``Runtime.snapshot()``: the live tree as plain data, and ``dump()`` as its text."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import pytest

import asyncop
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(30)

# What every row has, whatever the operation (the how-to on the console lists them).
ROW_FIELDS = {
    *("id", "parent", "depth", "name", "kind", "state", "where", "waiting_on", "waiting_at"),
    *("on_thread", "running_s", "cancelling", "cancel_reason", "stop", "deadline", "deadline_in_s"),
    *("shield", "warnings", "steps", "wakes", "busy_s", "cpu_s", "age_s"),
}
RUNTIME_FIELDS = {
    *("name", "pid", "state", "clock", "now", "time", "workers", "max_threads", "parallel"),
    *("threads", "threads_text", "warnings", "operations"),
}


def rows_by_name(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in snap["operations"]}


async def sleeper() -> None:
    await asyncop.sleep(1000)


def wait_until(predicate: Any, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.005)


def test_snapshot_has_a_row_per_live_operation_linked_to_its_parent(
    vruntime: asyncop.Runtime,
) -> None:
    gate = asyncop.Event()

    def waiting_callback() -> None:
        gate.wait(10)  # in asyncop: wait_all_blocked() counts it as blocked

    async def main() -> dict[str, Any]:
        async with asyncop.scope(name="service") as s:
            s.spawn(sleeper, name="sleeper")
            s.spawn(waiting_callback, name="callback")
            await wait_all_blocked()
            snap = vruntime.snapshot()
            gate.set()
            s.cancel()
        return snap

    snap = vruntime.spawn(main, name="main").wait(10).value
    assert set(snap) == RUNTIME_FIELDS
    assert snap["name"] == vruntime.name and snap["clock"] == "virtual"
    assert snap["state"] == "running" and snap["workers"] == 2
    rows = rows_by_name(snap)
    assert list(rows) == ["main", "service", "sleeper", "callback"]  # pre-order
    for row in snap["operations"]:
        assert set(row) == ROW_FIELDS, row["name"]
    ids = {name: row["id"] for name, row in rows.items()}
    assert rows["main"]["parent"] is None and rows["main"]["depth"] == 0
    assert rows["service"]["parent"] == ids["main"]
    assert rows["sleeper"]["parent"] == rows["callback"]["parent"] == ids["service"]
    kinds = {name: row["kind"] for name, row in rows.items()}
    assert kinds == {"main": "task", "service": "scope", "sleeper": "task", "callback": "callback"}
    assert {row["state"] for row in rows.values()} == {"RUNNING"}
    assert rows["sleeper"]["waiting_on"] == "sleep(1000)"
    assert rows["sleeper"]["waiting_at"].startswith(f"{__file__}:")
    assert rows["sleeper"]["where"].startswith(f"{__file__}:")
    assert rows["callback"]["on_thread"].startswith(f"{vruntime.name}-worker")
    assert rows["callback"]["waiting_on"] is None
    # The statistics are op.stats': the sleeper stepped once, to its await.
    sleeper_row = rows["sleeper"]
    assert (sleeper_row["steps"], sleeper_row["wakes"]) == (1, 0)
    assert sleeper_row["busy_s"] >= 0 and sleeper_row["cpu_s"] >= 0
    assert rows["service"]["steps"] == 0  # its block runs in main's steps
    assert {row["age_s"] for row in rows.values()} == {0.0}  # the virtual clock stood still


def test_snapshot_is_plain_data_that_json_carries_unchanged(vruntime: asyncop.Runtime) -> None:
    async def main() -> dict[str, Any]:
        async with asyncop.scope(name="service", timeout=50) as s:
            s.spawn(sleeper, name="sleeper")
            await wait_all_blocked()
            snap = vruntime.snapshot()
            s.cancel()
        return snap

    snap = vruntime.run(main)
    assert json.loads(json.dumps(snap, allow_nan=False)) == snap


def test_snapshot_shows_deadlines_on_the_runtime_clock_and_cancel_reasons(
    vruntime: asyncop.Runtime,
) -> None:
    release = asyncop.Event()

    async def stubborn() -> None:
        try:
            await asyncop.sleep(1000)
        finally:  # cancelled: cleans up in a shielded scope, staying RUNNING
            async with asyncop.scope(shield=True, name="cleanup"):
                await release.wait_async()

    async def main() -> dict[str, Any]:
        async with asyncop.scope(name="service") as s:
            timed = s.spawn(sleeper, name="timed")
            timed.deadline = asyncop.current_time() + 30
            slow = s.spawn(stubborn, name="stubborn")
            await wait_all_blocked()
            slow.cancel("no longer needed")
            snap = vruntime.snapshot()
            release.set()
            s.cancel()
        return snap

    snap = vruntime.run(main)
    rows = rows_by_name(snap)
    assert rows["timed"]["deadline"] == pytest.approx(snap["now"] + 30)
    assert rows["timed"]["deadline_in_s"] == pytest.approx(30)
    assert rows["timed"]["cancelling"] is False and rows["timed"]["cancel_reason"] is None
    assert rows["stubborn"]["cancelling"] is True
    assert rows["stubborn"]["cancel_reason"] == "no longer needed"
    assert rows["service"]["deadline"] is None


def test_a_spawn_blocking_call_in_flight_has_a_row_under_its_task(
    runtime: asyncop.Runtime,
) -> None:
    release = threading.Event()

    async def blocked() -> None:
        await asyncop.spawn_blocking(release.wait, 10)

    op = runtime.spawn(blocked, name="blocked")
    try:
        wait_until(
            lambda: any(r["kind"] == "blocking call" for r in runtime.snapshot()["operations"])
        )
        time.sleep(0.05)
        snap = runtime.snapshot()
        text = runtime.dump()
    finally:
        release.set()
    op.wait(10)
    task, call = snap["operations"]
    assert task["name"] == "blocked" and task["waiting_on"] == "spawn_blocking(Event.wait)"
    assert call["name"] == "spawn_blocking(Event.wait)" and call["kind"] == "blocking call"
    assert call["parent"] == task["id"] and call["depth"] == 1
    assert call["state"] == "RUNNING" and call["age_s"] >= 0.05
    assert call["where"] == task["waiting_at"]
    assert "    spawn_blocking(Event.wait) [RUNNING] blocking call for " in text


def test_dump_is_the_text_of_the_snapshot(vruntime: asyncop.Runtime) -> None:
    async def main() -> tuple[dict[str, Any], str]:
        async with asyncop.scope(name="service") as s:
            for i in range(3):
                s.spawn(sleeper, name=f"sleeper{i}")
            await wait_all_blocked()
            snap, text = vruntime.snapshot(), vruntime.dump()
            s.cancel()
        return snap, text

    snap, text = vruntime.run(main)
    lines = text.splitlines()
    assert lines[0] == f"{vruntime.name}:"
    assert lines[-1] == "  " + snap["threads_text"]
    body = lines[1:-1]
    assert len(body) == len(snap["operations"])
    for line, row in zip(body, snap["operations"], strict=True):
        assert line.startswith("  " + "  " * row["depth"] + f"{row['name']} [{row['state']}] ")
        if row["waiting_on"] is not None:
            assert line.endswith(f" waiting on {row['waiting_on']} at {row['waiting_at']}")


def test_a_step_that_does_not_await_is_a_warning_while_it_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = threading.Event()

    async def hog() -> None:
        started.set()
        time.sleep(1.0)  # never awaits: holds the lane

    with asyncop.Runtime(1, name="hogged") as rt:
        op = rt.spawn(hog, name="hog")
        assert started.wait(10)
        wait_until(lambda: rt.snapshot()["warnings"], timeout=5)
        snap = rt.snapshot()
        text = rt.dump()
        op.wait(10)
    (warning,) = snap["warnings"]
    assert warning.startswith("task 'hog' has run for ")
    assert "without awaiting, at " in warning and __file__ in warning
    (row,) = snap["operations"]
    assert row["warnings"] == [warning]
    assert row["on_thread"] == "hogged-worker-1" and row["running_s"] >= 0.1
    # The dump was taken a moment later: the same warning, a later duration.
    same = re.sub(r"for [0-9.]+ s", "for <t> s", f"  warning: {warning}")
    assert same in [re.sub(r"for [0-9.]+ s", "for <t> s", line) for line in text.splitlines()]


def test_a_stopped_runtime_has_no_rows() -> None:
    rt = asyncop.Runtime(1, clock=VirtualClock())
    rt.shutdown()
    snap = rt.snapshot()
    assert snap["state"] == "stopped" and snap["operations"] == []
    assert rt.dump().splitlines()[0].endswith("no live operations")


@pytest.mark.timeout(20)
def test_a_stuck_runtime_is_a_warning_of_its_snapshot_until_it_moves() -> None:
    event = asyncop.Event(name="never-set")

    async def waiter() -> None:
        await event.wait_async()

    with asyncop.Runtime(workers=1, deadlock="warn", deadlock_after=0.02) as runtime:
        op = runtime.spawn(waiter)
        deadline = time.monotonic() + 10
        while not any("is stuck" in w for w in runtime.snapshot()["warnings"]):
            assert time.monotonic() < deadline, runtime.dump()
            time.sleep(0.02)
        assert "is stuck" in runtime.dump()
        event.set()
        op.wait(5)
        assert not any("is stuck" in w for w in runtime.snapshot()["warnings"])
