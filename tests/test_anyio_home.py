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
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
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


# Each way work comes to a parked home: a coroutine that measures, six
# times, how long the home took to step the task it concerns once it came.
# A wake that is lost shows as the monitor's look (50 ms) or as a hang.


async def _timer() -> list[float]:
    delays = []
    for _ in range(6):
        start = time.perf_counter()
        await anyio.sleep(0.02)
        delays.append(time.perf_counter() - start - 0.02)
    return delays


async def _timer_while_polling() -> list[float]:
    # A socket wait makes a parked thread (the home or a worker) the poller.
    left, right = socket.socketpair()
    with left, right:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.wait_readable, left)
            delays = await _timer()
            tg.cancel_scope.cancel()
    return delays


async def _thread_ending() -> list[float]:
    delays = []
    for _ in range(6):
        ended = await anyio.to_thread.run_sync(_sleep_then_time)
        delays.append(time.perf_counter() - ended)
    return delays


def _sleep_then_time() -> float:
    time.sleep(0.02)
    return time.perf_counter()


def _call_from_a_thread(call: Any) -> list[float]:
    delays = []
    for _ in range(6):
        time.sleep(0.02)  # (the home has parked by now)
        start = time.perf_counter()
        call()
        delays.append(time.perf_counter() - start)
    return delays


async def _from_thread_run_sync() -> list[float]:
    return await anyio.to_thread.run_sync(
        _call_from_a_thread, lambda: anyio.from_thread.run_sync(threading.current_thread)
    )


async def _from_thread_run() -> list[float]:
    return await anyio.to_thread.run_sync(
        _call_from_a_thread, lambda: anyio.from_thread.run(anyio.sleep, 0)
    )


async def _event_set_from_a_thread() -> list[float]:
    delays = []
    for _ in range(6):
        event = anyio.Event()
        set_at: list[float] = []

        def set_it(event: anyio.Event = event, set_at: list[float] = set_at) -> None:
            time.sleep(0.02)
            set_at.append(time.perf_counter())
            anyio.from_thread.run_sync(event.set)

        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, set_it)
            await event.wait()
            delays.append(time.perf_counter() - set_at[0])
    return delays


async def _socket_while_callbacks_run() -> list[float]:
    # Both workers are held by long sync callbacks: the home polls alone.
    left, right = socket.socketpair()
    sent: list[float] = []

    def send() -> None:
        for _ in range(6):
            time.sleep(0.02)
            sent.append(time.perf_counter())
            right.send(b"x")

    delays = []
    with left, right:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, time.sleep, 0.3)
            tg.start_soon(anyio.to_thread.run_sync, time.sleep, 0.3)
            await anyio.sleep(0.01)
            thread = threading.Thread(target=send)
            thread.start()
            for _ in range(6):
                await anyio.wait_readable(left)
                delays.append(time.perf_counter() - sent[-1])
                assert left.recv(1) == b"x"
            thread.join()
    return delays


async def _process_ending() -> list[float]:
    # The child says when it exits (CLOCK_MONOTONIC, the same in both processes).
    code = "import os, time; time.sleep(0.02); print(time.monotonic(), flush=True); os._exit(0)"
    delays = []
    for _ in range(3):
        done = await anyio.run_process([sys.executable, "-c", code])
        delays.append(time.monotonic() - float(done.stdout))
    return delays


async def _tree_cancelled_from_a_thread() -> list[float]:
    op = asyncop.current_operation()
    assert op is not None
    asked: list[float] = []

    def cancel() -> None:
        time.sleep(0.05)
        asked.append(time.perf_counter())
        op.cancel()

    threading.Thread(target=cancel).start()
    try:
        await anyio.sleep_forever()
    finally:
        _cancel_delays.append(time.perf_counter() - asked[0])
    return []


_cancel_delays: list[float] = []

WAYS = {
    "timer": _timer,
    "timer while a thread polls": _timer_while_polling,
    "to_thread ending": _thread_ending,
    "from_thread.run_sync": _from_thread_run_sync,
    "from_thread.run": _from_thread_run,
    "Event set from a thread": _event_set_from_a_thread,
    "socket while callbacks run": _socket_while_callbacks_run,
    "process ending": _process_ending,
}


def _in(caller: str, call: Any) -> Any:
    if caller == "main":
        return call()
    box: list[Any] = []

    def target() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # (raised in the caller's thread below)
            box.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(20)
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


@pytest.mark.parametrize("caller", ["main", "other"])
@pytest.mark.parametrize("way", list(WAYS))
def test_work_that_comes_to_a_parked_home_wakes_it_at_once(way: str, caller: str) -> None:
    delays = _in(caller, lambda: run(WAYS[way]))
    # Well under a millisecond on a quiet machine; the bound only tells a
    # wake from the monitor's look apart.
    assert sorted(delays)[len(delays) // 2] < 0.02, delays


@pytest.mark.parametrize("caller", ["main", "other"])
def test_a_cancel_of_the_tree_from_a_thread_wakes_the_home_at_once(caller: str) -> None:
    _cancel_delays.clear()
    for _ in range(3):
        with pytest.raises(asyncop.CancellationError):
            _in(caller, lambda: run(_tree_cancelled_from_a_thread))
    assert sorted(_cancel_delays)[1] < 0.02, _cancel_delays


@pytest.mark.parametrize("caller", ["main", "other"])
def test_a_blocking_portals_calls_wake_its_thread_at_once(caller: str) -> None:
    def calls() -> list[float]:
        with anyio.from_thread.start_blocking_portal(backend="asyncop") as portal:
            return _call_from_a_thread(lambda: portal.call(anyio.sleep, 0)) + (
                _call_from_a_thread(lambda: portal.call(threading.current_thread))
            )

    delays = _in(caller, calls)
    assert sorted(delays)[6] < 0.02, delays


def test_two_runtimes_homes_wake_each_at_once() -> None:
    other = threading.Thread(target=lambda: box.append(run(_timer_while_polling)))
    box: list[list[float]] = []
    other.start()
    delays = run(_timer_while_polling)
    other.join(20)
    for each in (delays, box[0]):
        assert sorted(each)[3] < 0.02, each


@pytest.mark.parametrize("caller", ["main", "other"])
def test_a_virtual_clock_jumps_once_a_threads_result_wakes_the_home(caller: str) -> None:
    from asyncop.testing import VirtualClock

    async def main() -> float:
        start = time.perf_counter()
        for _ in range(5):
            await anyio.to_thread.run_sync(time.sleep, 0.01)
            await anyio.sleep(1000)  # (jumps: every task waits for the clock)
        return time.perf_counter() - start - 0.05

    lag = _in(caller, lambda: run(main, clock=VirtualClock(autojump=True)))
    assert lag < 0.1, lag


@pytest.mark.parametrize("caller", ["main", "other"])
def test_the_first_socket_wait_of_each_run_wakes_as_the_data_comes(caller: str) -> None:
    # A fresh runtime each time: its workers parked first, off the
    # multiplexer, while the home ran; the home parks last, as the poller.
    async def main(left: socket.socket, right: socket.socket) -> float:
        sent: list[float] = []

        def send() -> None:
            time.sleep(0.02)
            sent.append(time.perf_counter())
            right.send(b"x")

        thread = threading.Thread(target=send)
        thread.start()
        await anyio.wait_readable(left)
        delay = time.perf_counter() - sent[0]
        thread.join()
        return delay

    delays = []
    for _ in range(5):
        left, right = socket.socketpair()
        with left, right:
            delays.append(_in(caller, lambda: run(main, left, right)))  # noqa: B023
    assert sorted(delays)[2] < 0.02, delays


def test_a_slow_step_on_the_home_is_reported_at_the_line_it_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        await anyio.sleep(0)
        time.sleep(0.4)  # the line the warning names

    with caplog.at_level("WARNING", logger="asyncop"):
        run(main)
    line = main.__code__.co_firstlineno + 2
    warnings = [r.getMessage() for r in caplog.records if "without awaiting" in r.getMessage()]
    assert any(f"at {__file__}:{line}" in w for w in warnings), warnings


SECOND_CTRL_C = """
import anyio, time
import asyncop

async def main():
    print("ready", flush=True)
    while True:
        time.sleep(0.01)  # a step that never awaits: the second Ctrl-C lands in it

try:
    anyio.run(main, backend="asyncop")
except KeyboardInterrupt:
    print("interrupted", flush=True)
import gc
gc.collect()
print("collected", flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_second_ctrl_c_into_a_step_is_the_users_and_logs_no_unobserved_failure() -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    child = subprocess.Popen(
        [sys.executable, "-c", SECOND_CTRL_C],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        for _ in range(2):
            time.sleep(0.3)
            child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert out.split() == ["interrupted", "collected"], err
    assert "nobody observed" not in err, err
