"""``anyio.run(..., backend="asyncop")`` steps its tasks on the thread that called it.

As on anyio's other backends: code between two awaits, and what
``from_thread.run``/``run_sync`` and a blocking portal's calls run, runs on
the thread of ``anyio.run()`` (the portal's own thread); plain functions
given to ``to_thread`` still run on other threads; once the run has ended,
the runtime's tasks go back to its workers; a Ctrl-C on the main thread
cancels the tree, waits for it and is raised, as ``Runtime.run()``'s.
A parallel runtime steps tasks on all its workers, as before.
"""

from __future__ import annotations

import _thread
import socket
import threading
import time
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import pytest

import asyncop

from .conftest import needs_default_mode

pytestmark = pytest.mark.timeout(30)


def run(main: Any, *args: Any, **options: Any) -> Any:
    options.setdefault("workers", 2)
    return anyio.run(main, *args, backend="asyncop", backend_options=options)


@needs_default_mode
def test_the_tasks_of_anyio_run_run_on_the_thread_that_called_it() -> None:
    async def child(seen: list[threading.Thread]) -> None:
        await anyio.sleep(0)
        seen.append(threading.current_thread())

    async def main() -> list[threading.Thread]:
        seen = [threading.current_thread()]
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(child, seen)
        await anyio.sleep(0.01)
        seen.append(threading.current_thread())
        return seen

    assert set(run(main)) == {threading.main_thread()}
    # And from another thread than the main one: that thread.
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(run(main)), name="caller")
    thread.start()
    thread.join(20)
    assert {t.name for t in box[0]} == {"caller"}


@needs_default_mode
def test_from_thread_calls_run_on_the_thread_of_anyio_run_and_to_thread_elsewhere() -> None:
    async def where() -> threading.Thread:
        await anyio.sleep(0)
        return threading.current_thread()

    def in_thread() -> tuple[threading.Thread, threading.Thread, threading.Thread]:
        return (
            threading.current_thread(),
            anyio.from_thread.run_sync(threading.current_thread),
            anyio.from_thread.run(where),
        )

    async def main() -> tuple[threading.Thread, threading.Thread, threading.Thread]:
        return await anyio.to_thread.run_sync(in_thread)

    own, sync_call, async_call = run(main)
    assert own is not threading.main_thread()
    assert sync_call is threading.main_thread()
    assert async_call is threading.main_thread()


@needs_default_mode
def test_a_blocking_portals_calls_run_on_the_portals_thread() -> None:
    async def name() -> str:
        await anyio.sleep(0)
        return threading.current_thread().name

    with anyio.from_thread.start_blocking_portal(backend="asyncop", name="the-portal") as portal:
        assert portal.call(lambda: threading.current_thread().name) == "the-portal"
        assert portal.call(name) == "the-portal"


def test_after_the_run_the_runtimes_tasks_go_back_to_its_workers() -> None:
    async def where() -> threading.Thread:
        await anyio.sleep(0)
        return threading.current_thread()

    with asyncop.Runtime(workers=2) as runtime:
        anyio.run(where, backend="asyncop", backend_options={"runtime": runtime})
        later = runtime.run(where)
        assert later is not threading.main_thread()
        assert later.name.startswith(f"{runtime.name}-")


def test_a_parallel_runtime_steps_the_tasks_on_its_workers() -> None:
    async def main() -> threading.Thread:
        await anyio.sleep(0)
        return threading.current_thread()

    assert run(main, parallel=True) is not threading.main_thread()


def test_a_ctrl_c_cancels_the_tree_waits_for_it_and_is_raised() -> None:
    cleaned: list[str] = []

    async def sleeper() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.append("sleeper")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(sleeper)
            await anyio.sleep(0.01)
            # As a Ctrl-C does: SIGINT's handler runs on the main thread.
            await anyio.to_thread.run_sync(_thread.interrupt_main)
            try:
                await anyio.sleep_forever()
            finally:
                cleaned.append("main")

    with pytest.raises(KeyboardInterrupt):
        run(main)
    assert sorted(cleaned) == ["main", "sleeper"]


@pytest.mark.parametrize("caller", ["main", "other"])
def test_a_socket_wait_of_anyio_run_wakes_as_the_data_comes(caller: str) -> None:
    # The home parks after every worker has parked: it must then wait in the
    # multiplexer itself, or a readiness waits for the monitor's next look,
    # tens of milliseconds later.
    left, right = socket.socketpair()

    async def main() -> list[float]:
        sent: list[float] = []

        def send() -> None:
            for _ in range(6):
                time.sleep(0.02)  # (the home has parked by now)
                sent.append(time.perf_counter())
                right.send(b"x")

        thread = threading.Thread(target=send)
        thread.start()
        delays = []
        for _ in range(6):
            await anyio.wait_readable(left)
            delays.append(time.perf_counter() - sent[-1])
            assert left.recv(1) == b"x"
        thread.join()
        return delays

    try:
        if caller == "main":
            delays = run(main)
        else:
            box: list[list[float]] = []
            thread = threading.Thread(target=lambda: box.append(run(main)))
            thread.start()
            thread.join(20)
            delays = box[0]
    finally:
        left.close()
        right.close()
    # Well under a millisecond on a quiet machine; the bound only tells a
    # wake from the monitor's look apart.
    assert sorted(delays)[3] < 0.02, delays


def test_a_socket_readiness_reaches_a_run_whose_tasks_never_park() -> None:
    # One task waits for the socket while another loops on checkpoints: the
    # home never runs out of tasks to step, so it must poll between batches,
    # as a worker does; the parked workers leave the polling to it.
    left, right = socket.socketpair()

    async def main() -> list[float]:
        sent: list[float] = []
        seen: list[float] = []

        async def reader() -> None:
            for _ in range(6):
                await anyio.wait_readable(left)
                seen.append(time.perf_counter())
                assert left.recv(1) == b"x"

        def send() -> None:
            for _ in range(6):
                time.sleep(0.02)
                sent.append(time.perf_counter())
                right.send(b"x")

        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            thread = threading.Thread(target=send)
            thread.start()
            while len(seen) < 6:
                await anyio.lowlevel.checkpoint()
        thread.join()
        return [got - put for got, put in zip(seen, sent, strict=True)]

    try:
        delays = run(main)
    finally:
        left.close()
        right.close()
    assert sorted(delays)[3] < 0.02, delays
