"""Shutdown: refused from inside its own tree, bounded as a whole, never half-built."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

import asyncop
from asyncop.runtime import _scheduler
from asyncop.runtime._core import _pool
from tests.conftest import runtime_threads

pytestmark = pytest.mark.timeout(40)


def _call_in_thread(fn: Any, limit: float = 10.0) -> BaseException | object:
    """Run ``fn()`` in a thread; return its result or error, or fail on a hang."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"{fn!r} hung"
    return box[0]


# -- shutdown from inside -------------------------------------------------------


def test_shutdown_inside_a_sync_scope_block_raises_at_once() -> None:
    rt = asyncop.Runtime(2, name="inside-scope")
    try:

        def inside() -> object:
            with rt.scope(name="outer") as s:
                s.spawn(lambda: None)
                with pytest.raises(RuntimeError, match=r"scope 'outer'.*after the with-block"):
                    rt.shutdown()
                return "left"

        assert _call_in_thread(inside) == "left"
        # Nothing was stopped: the runtime still runs work.
        assert rt.spawn(lambda: 1).wait(10).value == 1
    finally:
        assert rt.shutdown(timeout=10)
    assert runtime_threads(rt) == []


def test_shutdown_inside_a_nested_sync_scope_on_the_main_thread_raises() -> None:
    with asyncop.Runtime(2, name="inside-nested") as rt:
        with (
            rt.scope(name="outer"),
            rt.scope(name="inner"),
            pytest.raises(RuntimeError, match="shutdown"),
        ):
            rt.shutdown(timeout=1)
        assert rt.spawn(lambda: 2).wait(10).value == 2


def test_shutdown_from_a_spawn_blocking_thread_raises_in_the_task() -> None:
    with asyncop.Runtime(2, name="inside-blocking") as rt:

        async def main() -> str:
            try:
                await asyncop.spawn_blocking(rt.shutdown)
            except RuntimeError as exc:
                return str(exc)
            return "no error"

        message = rt.run(main)
        assert "spawn_blocking" in message and "inside-blocking" in message
        assert rt.spawn(lambda: 3).wait(10).value == 3


def test_shutdown_from_a_coroutine_task_raises() -> None:
    with asyncop.Runtime(2, name="inside-task") as rt:

        async def main() -> None:
            rt.shutdown()

        with pytest.raises(RuntimeError, match="worker"):
            rt.run(main)


def test_shutdown_of_another_runtime_from_inside_a_scope_is_allowed() -> None:
    other = asyncop.Runtime(1, name="other-rt")
    with asyncop.Runtime(2, name="host-rt") as rt, rt.scope():
        assert other.shutdown(timeout=10) is True
    assert runtime_threads(other) == []


def test_a_with_block_on_a_shut_down_runtime_is_refused_at_its_entry() -> None:
    ran: list[str] = []
    runtime = asyncop.Runtime(1, name="closed_once")
    with runtime:
        runtime.run(ran.append, "first block")
    for _ in range(2):  # an exit's shutdown, then an explicit one
        refused = pytest.raises(RuntimeError, match=r"'closed_once', which is shut down; make")
        with refused, runtime:
            ran.append("second block")  # pragma: no cover - must not run
        runtime.shutdown()
    assert ran == ["first block"]


def test_a_refused_shutdown_can_be_followed_by_a_real_one() -> None:
    rt = asyncop.Runtime(2, name="refused-then-real")
    with rt.scope(), pytest.raises(RuntimeError):
        rt.shutdown()
    assert rt.shutdown(timeout=10) is True
    assert runtime_threads(rt) == []


# -- one bound for the whole call -----------------------------------------------


@pytest.mark.parametrize("where", ["spawn_blocking", "worker"])
def test_shutdown_timeout_bounds_the_whole_call(where: str) -> None:
    # Five threads stuck for good: joined with 0.5 s each they would take 2.5 s.
    rt = asyncop.Runtime(5, name=f"bounded-{where}")
    release = threading.Event()
    started = threading.Semaphore(0)

    def stuck() -> None:
        started.release()
        release.wait(30)

    async def call() -> None:
        await asyncop.spawn_blocking(stuck, abandon=True)

    try:
        for _ in range(5):
            rt.spawn(call if where == "spawn_blocking" else stuck)
        for _ in range(5):
            assert started.acquire(timeout=10)
        start = time.monotonic()
        assert rt.shutdown(timeout=0.5) is False
        took = time.monotonic() - start
        assert took < 1.5, took
    finally:
        release.set()
        assert rt.shutdown(timeout=10) is True
    assert runtime_threads(rt) == []


def test_shutdown_joins_a_worker_that_left_the_pool_on_its_way_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A worker that retires leaves the pool first and its thread ends a
    # moment later; a shutdown in that moment must still wait for the thread.
    from asyncop.runtime._core import _worker

    park = _worker._park
    leaving = threading.Event()

    def slow_exit(*args: Any) -> bool:
        stays = park(*args)
        if not stays and not leaving.is_set():  # the first to leave: slowly
            leaving.set()
            time.sleep(1.0)
        return stays

    monkeypatch.setattr(_worker, "_park", slow_exit)
    monkeypatch.setenv("ASYNCOP_DYNAMIC_WORKERS", "1")  # idle workers retire
    rt = asyncop.Runtime(3, name="leaving")
    rt.idle_retire = 0.05
    gate = threading.Event()
    running = threading.Semaphore(0)

    def block() -> None:
        running.release()
        gate.wait(10)

    ops = [rt.spawn(block) for _ in range(3)]
    for _ in range(3):
        assert running.acquire(timeout=10)
    gate.set()
    for op in ops:
        op.wait(10)
    assert leaving.wait(10)
    assert rt.shutdown(timeout=10) is True
    assert runtime_threads(rt) == []


def test_interpreter_exit_with_abandoned_blocking_calls_is_prompt() -> None:
    script = textwrap.dedent(
        """
        import threading, time
        import asyncop

        started = threading.Semaphore(0)

        def stuck():
            started.release()
            time.sleep(60)

        async def call():
            await asyncop.spawn_blocking(stuck, abandon=True)

        rt = asyncop.default_runtime()
        for _ in range(10):
            rt.spawn(call)
        for _ in range(10):
            assert started.acquire(timeout=10)
        print("exiting", flush=True)
        """
    )
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    took = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    assert "exiting" in done.stdout
    # The exit grace is one bound for everything, not one per thread.
    assert took < 6.0, took


def test_interpreter_exit_with_several_stuck_runtimes_shares_one_grace_period() -> None:
    script = textwrap.dedent(
        """
        import threading, time
        import asyncop

        started = threading.Semaphore(0)

        def stuck():
            started.release()
            time.sleep(60)          # ignores its token

        runtimes = [asyncop.Runtime(1, name=f"stuck{i}") for i in range(5)]
        for rt in runtimes:
            rt.spawn(stuck)
        for _ in runtimes:
            assert started.acquire(timeout=10)
        print("exiting", flush=True)
        """
    )
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    took = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    assert "exiting" in done.stdout
    # One second for all five, not one each.
    assert took < 4.0, took


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "inner",
    [None, "poll", "nothing"],
    ids=["one-scope", "nested-scopes", "nested-scopes-inner-empty"],
)
def test_interpreter_exit_inside_a_scope_block_cancels_its_tree(inner: str | None) -> None:
    # The script ends while the main thread is still inside the block of a
    # scope it entered and never left: exit cancels that tree and shuts down.
    # An inner scope with no child left ends as its block does; the scope
    # around it must be ended all the same.
    script = textwrap.dedent(
        f"""
        import os
        import threading
        import time
        import asyncop

        rt = asyncop.Runtime(2)
        started = threading.Semaphore(0)

        def say(line):  # one write: threads print at the same time
            os.write(1, (line + "\\n").encode())

        def poll(name):
            token = asyncop.current_operation(require=True).token
            started.release()
            while not token.cancelled:
                time.sleep(0.005)
            say(name + " saw the cancel")

        def wait(name):
            token = asyncop.current_operation(require=True).token
            started.release()
            token.wait()
            say(name + " saw the cancel")

        outer = rt.scope(name="outer").__enter__()
        outer.spawn(poll, "outer poll")
        outer.spawn(wait, "outer wait")
        count = 2
        if {inner is not None}:
            inner = rt.scope(name="inner").__enter__()
            if {inner == "poll"}:
                inner.spawn(poll, "inner poll")
                count += 1
        # Each one started: work cancelled before it starts never runs.
        for _ in range(count):
            assert started.acquire(timeout=10)
        say("exiting")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "exiting"
    expected = {"outer poll saw the cancel", "outer wait saw the cancel"}
    if inner == "poll":
        expected.add("inner poll saw the cancel")
    assert set(lines[1:]) == expected
    assert done.stderr == ""


# -- never half-built -----------------------------------------------------------


@pytest.mark.parametrize("workers", [_scheduler.MAX_WORKERS + 1, 10**6, 2**63])
def test_too_many_workers_is_refused_before_any_thread_starts(workers: int) -> None:
    before = threading.active_count()
    with pytest.raises(ValueError, match=f"{_scheduler.MAX_WORKERS}"):
        asyncop.Runtime(workers)
    assert threading.active_count() == before


def test_the_largest_allowed_worker_count_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCOP_DYNAMIC_WORKERS", "1")  # starts one thread, not 1024
    with asyncop.Runtime(_scheduler.MAX_WORKERS, name="max-workers") as rt:
        assert rt.workers == _scheduler.MAX_WORKERS


def test_a_thread_refused_midway_stops_the_threads_already_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ASYNCOP_DYNAMIC_WORKERS", raising=False)
    real_start = _pool.start_thread
    calls = 0

    def failing_start(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 4:
            raise RuntimeError("can't start new thread")
        return real_start(*args, **kwargs)

    monkeypatch.setattr(_pool, "start_thread", failing_start)
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(RuntimeError, match="can't start new thread"):
        asyncop.Runtime(8, name="half-built")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = [
            t for t in threading.enumerate() if t.ident not in before and "half-built" in t.name
        ]
        if not left:
            break
        time.sleep(0.01)
    assert left == []
    assert not any(r.name == "half-built" for r in _scheduler.live_runtimes())


async def _ran() -> str:
    return "ran"


def test_a_refused_extra_worker_is_logged_and_the_work_still_runs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("ASYNCOP_DYNAMIC_WORKERS", raising=False)
    release = threading.Event()
    started = threading.Event()

    def stuck() -> None:
        started.set()
        release.wait(30)

    with asyncop.Runtime(1, name="refusing") as rt:
        real_start = _pool.start_thread

        def refuse(*args: Any, name: str, **kwargs: Any) -> Any:
            if "-extra-" in name:
                raise RuntimeError("can't start new thread")
            return real_start(*args, name=name, **kwargs)

        monkeypatch.setattr(_pool, "start_thread", refuse)
        try:
            rt.spawn(stuck)
            assert started.wait(10)
            queued = rt.spawn(_ran)  # a task: it needs a replacement worker
            time.sleep(0.3)
            assert not queued.done
            assert "could not start another worker" in caplog.text
        finally:
            monkeypatch.setattr(_pool, "start_thread", real_start)
            release.set()
        assert queued.wait(10).value == "ran"


# -- at_shutdown -----------------------------------------------------------------


def test_at_shutdown_callbacks_run_once_last_first_before_the_work_is_cancelled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[object] = []
    rt = asyncop.Runtime(2, name="hooks")
    started = threading.Event()

    async def live() -> None:
        try:
            started.set()
            await asyncop.sleep_forever()
        finally:
            calls.append("cancelled")

    def fails() -> None:
        calls.append("fails")
        raise KeyError("a broken callback")

    op = rt.spawn(live)
    assert started.wait(10)  # (a task cancelled before its first step never runs)
    rt.at_shutdown(calls.append, "first")
    rt.at_shutdown(fails)
    rt.at_shutdown(lambda: calls.append(op.done))
    assert rt.shutdown(timeout=10)
    # The last registered runs first; all run before the live work is
    # cancelled, and one that raises is logged and stops nothing.
    assert calls == [False, "fails", "first", "cancelled"]
    assert "a Runtime.at_shutdown() callback raised" in caplog.text
    assert rt.shutdown(timeout=10)  # a second shutdown runs none again
    assert calls == [False, "fails", "first", "cancelled"]


def test_at_shutdown_is_refused_once_the_shutdown_began_and_needs_a_callable() -> None:
    rt = asyncop.Runtime(1, name="late-hook")
    with pytest.raises(TypeError, match=r"at_shutdown\(\) needs a callable, got str"):
        rt.at_shutdown("cleanup")  # type: ignore[arg-type]
    late: list[BaseException] = []

    def register_late() -> None:
        try:
            rt.at_shutdown(print)
        except RuntimeError as exc:
            late.append(exc)

    rt.at_shutdown(register_late)
    assert rt.shutdown(timeout=10)
    assert len(late) == 1 and "during or after its shutdown" in str(late[0])
    with pytest.raises(RuntimeError, match="during or after its shutdown"):
        rt.at_shutdown(print)


def test_shutdown_joins_a_blocking_call_thread_that_already_left_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A thread whose call ends after a shutdown gave up leaves the pool, then
    # takes a while to end: the next shutdown must still wait for it.
    class SlowToEnd(threading.Thread):
        def run(self) -> None:
            super().run()
            time.sleep(0.5)

    monkeypatch.setattr(threading, "Thread", SlowToEnd)
    rt = asyncop.Runtime(1, name="left-pool")
    release, started = threading.Event(), threading.Event()

    def stuck() -> None:
        started.set()
        release.wait(30)

    async def call() -> None:
        await asyncop.spawn_blocking(stuck, abandon=True)

    try:
        rt.spawn(call)
        assert started.wait(10)
        assert rt.shutdown(timeout=0.1) is False
        release.set()
        deadline = time.monotonic() + 10
        while rt._blocking.thread_count() and time.monotonic() < deadline:
            time.sleep(0.01)  # the thread has left the pool and is ending
    finally:
        release.set()
        assert rt.shutdown(timeout=10) is True
    assert runtime_threads(rt) == []
