"""Async generators: a dropped one, or one alive at shutdown, is closed in a task.

A generator partly iterated by a task and then dropped, or still alive when
the runtime shuts down, runs its ``finally`` to the end, awaits included,
in a task of its runtime that no cancel of the dropping task reaches. An
error there is logged; a generator another loop iterates is that loop's.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

import asyncop
import asyncop.asyncio_bridge as bridge
from asyncop.testing import VirtualClock
from tests.conftest import runtime_threads

pytestmark = pytest.mark.timeout(30)


async def _numbers(log: list[str], lock: asyncop.Lock | None = None) -> AsyncIterator[int]:
    """Counts; its cleanup awaits twice, and takes ``lock`` if given."""
    try:
        for n in range(10):
            yield n
    finally:
        await asyncop.sleep(0)
        if lock is not None:
            async with lock:
                await asyncop.sleep(0.5)
        log.append("closed")


def test_a_dropped_generator_runs_its_awaiting_finally_to_its_end(
    vruntime: asyncop.Runtime,
) -> None:
    log: list[str] = []

    async def main() -> None:
        lock = asyncop.Lock()
        gen = _numbers(log, lock)
        assert await gen.__anext__() == 0
        del gen
        gc.collect()
        # The cleanup's lock is released again: the next owner gets it.
        await asyncop.sleep(5)
        async with lock:
            log.append("after")

    vruntime.run(main)
    assert log == ["closed", "after"]
    assert vruntime.registrations() == 0


def test_the_cleanup_is_not_in_the_dropping_tasks_cancelled_scope(
    vruntime: asyncop.Runtime,
) -> None:
    log: list[str] = []

    async def main() -> None:
        async with asyncop.move_on_after(1):
            gen = _numbers(log)
            await gen.__anext__()
            await asyncop.sleep(10)  # the scope is cancelled here
        # (Dropped in a task whose scope was cancelled, while it unwinds.)
        del gen
        gc.collect()
        await asyncop.sleep(1)

    async def cancelled_main() -> None:
        gen = _numbers(log)
        await gen.__anext__()
        try:
            await asyncop.sleep(100)
        finally:
            del gen
            gc.collect()

    async def nap() -> None:
        await asyncop.sleep(1)

    vruntime.run(main)
    op = vruntime.spawn(cancelled_main)
    vruntime.run(nap)
    op.cancel()
    vruntime.run(nap)
    assert log == ["closed", "closed"]


def test_generators_alive_at_shutdown_are_closed_before_it_returns() -> None:
    log: list[str] = []
    kept: list[Any] = []
    rt = asyncop.Runtime(2, name="agen-shutdown", clock=VirtualClock(autojump=True))

    async def main() -> None:
        for _ in range(3):
            gen = _numbers(log)
            await gen.__anext__()
            kept.append(gen)

    rt.run(main)
    assert log == []
    assert rt.shutdown(timeout=10)
    assert log == ["closed"] * 3
    assert runtime_threads(rt) == [] and rt.registrations() == 0


def test_an_error_in_a_cleanup_is_logged_and_the_runtime_carries_on(
    vruntime: asyncop.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    async def failing() -> AsyncIterator[int]:
        try:
            yield 1
        finally:
            await asyncop.sleep(0)
            raise ValueError("cleanup failed")

    async def main() -> int:
        gen = failing()
        await gen.__anext__()
        del gen
        gc.collect()
        await asyncop.sleep(1)
        return 7

    with caplog.at_level(logging.ERROR, logger="asyncop"):
        assert vruntime.run(main) == 7
        assert vruntime.run(main) == 7
    errors = [r for r in caplog.records if r.exc_info and "cleanup failed" in str(r.exc_info[1])]
    assert len(errors) == 2
    assert "failing" in errors[0].getMessage()


def test_a_generator_of_another_loop_is_left_to_that_loop(vruntime: asyncop.Runtime) -> None:
    closed_on: list[object] = []

    async def ticks() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            await asyncio.sleep(0)
            closed_on.append(asyncio.get_running_loop())

    async def on_asyncio() -> object:
        gen = ticks()
        await gen.__anext__()
        del gen
        gc.collect()
        for _ in range(5):
            await asyncio.sleep(0)
        return asyncio.get_running_loop()

    def own_loop() -> object:
        # A loop that a sync operation runs on a worker thread.
        return asyncio.run(on_asyncio())

    async def main() -> None:
        closed_on.append(await bridge.run(on_asyncio))
        closed_on.append(await asyncop.current_operation(require=True).spawn(own_loop))

    vruntime.run(main)
    # Each cleanup ran on the loop that iterated the generator.
    assert len(closed_on) == 4
    assert closed_on[0] is closed_on[1] and closed_on[2] is closed_on[3]


def test_the_calling_threads_hooks_are_left_alone(vruntime: asyncop.Runtime) -> None:
    before = sys.get_asyncgen_hooks()

    async def main() -> None:
        gen = _numbers([])
        await gen.__anext__()
        await gen.aclose()

    vruntime.run(main)
    assert sys.get_asyncgen_hooks() == before


def test_a_generator_dropped_inside_the_runtimes_lock_is_closed_after(
    vruntime: asyncop.Runtime,
) -> None:
    # (The collector may run anywhere, even inside the runtime's own locked
    # step: the cleanup is started once the lock is free, not in there.)
    log: list[str] = []

    async def first() -> Any:
        gen = _numbers(log)
        await gen.__anext__()
        return gen

    async def nap() -> None:
        await asyncop.sleep(1)

    kept = [vruntime.run(first)]
    with vruntime._lock:
        kept.clear()
        assert log == []
    give_up = time.monotonic() + 10  # (a thread of the runtime's starts it)
    while log == [] and time.monotonic() < give_up:
        vruntime.run(nap)
    assert log == ["closed"]


def test_a_generator_iterated_outside_any_task_is_closed_where_it_is_dropped(
    vruntime: asyncop.Runtime,
) -> None:
    closed_in: list[str] = []

    async def ticks() -> AsyncIterator[int]:
        try:
            yield 1
        finally:
            closed_in.append(asyncop.current_operation(require=True).name)

    def by_hand() -> None:
        # A sync operation steps the generator itself: no loop owns it.
        gen = ticks()
        with pytest.raises(StopIteration):
            gen.asend(None).send(None)
        del gen
        gc.collect()

    assert vruntime.spawn(by_hand, name="by-hand").wait(10).value is None
    assert closed_in == ["by-hand"]
