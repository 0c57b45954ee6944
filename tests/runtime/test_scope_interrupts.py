"""Scopes misused or interrupted still end, and never swallow a Ctrl-C.

- A scope held open by an async generator and exited out of order raises a
  clear RuntimeError; the inner scope is closed, the task still ends, and
  the runtime shuts down.
- A Ctrl-C landing anywhere in ``Scope.__enter__`` leaves no RUNNING scope
  behind; one landing anywhere in the exit, its very first line included,
  ends the block and leaves the thread outside it; one landing inside
  ``s.cancel()`` does not keep the block from exiting; a second Ctrl-C at a
  sync scope's exit stops the wait.

The interrupts are injected with a profile hook that raises
KeyboardInterrupt at the n-th event inside the code under test, for every n
until the code runs through without reaching n. Compiled, that code makes no
profile events: those tests skip, and the real signals at random instants
stand for them.
"""

from __future__ import annotations

import _thread
import random
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from types import CodeType, FrameType
from typing import Any

import pytest

import asyncop
from asyncop import OperationState
from asyncop.runtime._core._abandon import _exit_unbound
from asyncop.runtime._core._scope import Scope
from tests._compiled import runs_bytecode

pytestmark = pytest.mark.timeout(120)


async def park_forever() -> None:
    await asyncop.Event().wait_async()


def wait_on_token() -> None:
    op = asyncop.current_operation()
    assert op is not None
    op.token.wait(30)


async def task_kid(started: threading.Semaphore) -> None:
    started.release()
    await park_forever()


def thread_kid(started: threading.Semaphore) -> None:
    started.release()
    wait_on_token()


# ----------------------------------------------------------------------
# Async generators holding a scope open
# ----------------------------------------------------------------------


async def holds_a_scope(opened: list[asyncop.AsyncOperation]) -> AsyncIterator[int]:
    async with asyncop.scope(name="generator's scope") as s:
        opened.append(s)
        s.spawn(park_forever)
        yield 1


def test_exiting_a_scope_while_a_generators_scope_inside_is_open_raises(
    runtime: asyncop.Runtime,
) -> None:
    opened: list[asyncop.AsyncOperation] = []
    keep: list[Any] = []
    seen: list[BaseException] = []

    async def main() -> str:
        gen = holds_a_scope(opened)
        keep.append(gen)
        try:
            async with asyncop.scope(name="outer"):
                await gen.__anext__()
        except RuntimeError as exc:
            seen.append(exc)
        await asyncop.sleep(0)  # the task still runs and can await
        return "went on"

    assert runtime.run(main) == "went on"
    assert len(seen) == 1
    message = str(seen[0])
    assert "'outer'" in message and "generator's scope" in message
    assert opened[0].done and opened[0].state is OperationState.CANCELLED


def test_task_returning_with_a_generators_scope_open_ends_failed(
    runtime: asyncop.Runtime,
) -> None:
    opened: list[asyncop.AsyncOperation] = []
    keep: list[Any] = []

    async def main() -> str:
        gen = holds_a_scope(opened)
        keep.append(gen)
        await gen.__anext__()
        return "returned with a scope open"

    result = runtime.spawn(main).wait(10)
    assert result.state is OperationState.FAILED
    assert isinstance(result.error, RuntimeError)
    assert "still open" in str(result.error)
    assert opened[0].done


def test_closing_the_generator_after_its_scope_was_closed_is_harmless(
    runtime: asyncop.Runtime,
) -> None:
    opened: list[asyncop.AsyncOperation] = []

    async def main() -> str:
        gen = holds_a_scope(opened)
        with pytest.raises(RuntimeError):
            async with asyncop.scope():
                await gen.__anext__()
        await gen.aclose()
        return "closed"

    assert runtime.run(main) == "closed"


# ----------------------------------------------------------------------
# Ctrl-C injected inside the code under test
# ----------------------------------------------------------------------


def interrupt_inside(code: CodeType, nth: int, fired: list[bool]) -> Callable[..., None]:
    """A profile hook raising KeyboardInterrupt at the nth point while ``code`` runs.

    The points are where CPython runs a pending signal handler: as a Python
    function starts and as a call into C returns.
    """
    depth = 0
    seen = 0

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal depth, seen
        if event == "call" and frame.f_code is code:
            depth += 1
        if depth and event in ("call", "c_return"):
            seen += 1
            if seen == nth:
                sys.setprofile(None)
                fired.append(True)
                raise KeyboardInterrupt
        if event == "return" and frame.f_code is code:
            depth -= 1

    return hook


@runs_bytecode
def test_ctrl_c_anywhere_in_scope_entry_inside_an_operation_leaves_no_orphan(
    runtime: asyncop.Runtime,
) -> None:
    for nth in range(1, 400):
        fired: list[bool] = []

        def callback(nth: int = nth, fired: list[bool] = fired) -> str:
            sys.setprofile(interrupt_inside(Scope.__enter__.__code__, nth, fired))
            try:
                with runtime.scope() as s:
                    s.spawn(wait_on_token)
                    s.cancel()
            except KeyboardInterrupt:
                return "interrupted"
            finally:
                sys.setprofile(None)
            return "entered"

        op = runtime.spawn(callback)
        result = op.wait(10)  # an orphan RUNNING scope would keep it RUNNING
        assert result.state is OperationState.COMPLETED, f"nth={nth}: {runtime.dump()}"
        if not fired:
            assert result.value == "entered"
            break
    else:
        raise AssertionError("the entry never ran through")


@runs_bytecode
def test_ctrl_c_anywhere_in_root_scope_entry_leaves_no_orphan(runtime: asyncop.Runtime) -> None:
    for nth in range(1, 400):
        fired: list[bool] = []
        sys.setprofile(interrupt_inside(Scope.__enter__.__code__, nth, fired))
        try:
            with runtime.scope(name="entered root"):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            sys.setprofile(None)
        deadline = time.monotonic() + 5
        while "RUNNING" in runtime.dump() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "RUNNING" not in runtime.dump(), f"nth={nth}: {runtime.dump()}"
        if not fired:
            break
    else:
        raise AssertionError("the entry never ran through")


def _assert_left(runtime: asyncop.Runtime, scope: asyncop.AsyncOperation, where: str) -> None:
    """The thread is out of ``scope``'s block, and the scope ends."""
    assert asyncop.current_operation() is not scope, f"{where}: the thread is still inside"
    result = scope.wait(10)
    assert result.state in (OperationState.COMPLETED, OperationState.CANCELLED), where
    assert "RUNNING" not in runtime.dump() or where.startswith("op"), f"{where}: {runtime.dump()}"


@runs_bytecode
def test_ctrl_c_anywhere_in_a_root_scope_exit_ends_the_block(runtime: asyncop.Runtime) -> None:
    # The exit's very first line included: a signal handler runs as any
    # Python function starts, before a try inside it could catch anything.
    for nth in range(1, 400):
        fired: list[bool] = []
        scope: asyncop.AsyncOperation | None = None
        try:
            with runtime.scope(name="left root") as scope:
                scope.spawn(wait_on_token)
                scope.cancel()
                sys.setprofile(interrupt_inside(_exit_unbound.__code__, nth, fired))
        except KeyboardInterrupt:
            assert fired, f"nth={nth}: an interrupt nobody injected"
        finally:
            sys.setprofile(None)
        assert scope is not None
        _assert_left(runtime, scope, f"nth={nth}")
        if not fired:
            break
    else:
        raise AssertionError("the exit never ran through")
    # The runtime is still usable, and the thread is inside no block.
    with runtime.scope() as s:
        s.spawn(wait_on_token)
        s.cancel()
    assert asyncop.current_operation() is None


@runs_bytecode
def test_ctrl_c_anywhere_in_a_scope_exit_inside_an_operation_ends_the_block(
    runtime: asyncop.Runtime,
) -> None:
    for nth in range(1, 400):
        fired: list[bool] = []

        def callback(nth: int = nth, fired: list[bool] = fired) -> str:
            me = asyncop.current_operation()
            scope: asyncop.AsyncOperation | None = None
            try:
                with runtime.scope() as scope:
                    scope.spawn(wait_on_token)
                    scope.cancel()
                    sys.setprofile(interrupt_inside(_exit_unbound.__code__, nth, fired))
            except KeyboardInterrupt:
                pass
            finally:
                sys.setprofile(None)
            assert asyncop.current_operation() is me, "the thread is still inside the block"
            assert scope is not None
            scope.wait(10)
            assert scope.done
            return "interrupted" if fired else "left"

        result = runtime.spawn(callback).wait(10)
        assert result.state is OperationState.COMPLETED, f"nth={nth}: {result} {runtime.dump()}"
        if result.value == "left":
            break
    else:
        raise AssertionError("the exit never ran through")


@pytest.mark.timeout(60)
# A signal may also land in a finalizer the interpreter runs meanwhile (a
# WeakSet's, as a thread ends), where Python can only print it.
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <function WeakSet:pytest.PytestUnraisableExceptionWarning"
)
def test_ctrl_c_at_random_instants_around_a_scope_never_leaves_it_open(
    runtime: asyncop.Runtime,
) -> None:
    # A real signal, at random instants: the handler raises KeyboardInterrupt
    # wherever CPython runs it, in the entry, the block or the exit.
    assert threading.current_thread() is threading.main_thread()
    rng = random.Random(23)

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        for trial in range(400):
            scope: asyncop.AsyncOperation | None = None
            try:
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(0, 0.0003))
                with runtime.scope() as scope:
                    scope.spawn(wait_on_token)
                    scope.cancel()
            except KeyboardInterrupt:
                pass
            while True:  # the timer may fire here too
                try:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    break
                except KeyboardInterrupt:
                    pass
            assert asyncop.current_operation() is None, f"trial {trial}: still inside"
            if scope is not None:
                scope.wait(10)
                assert scope.done, f"trial {trial}: {runtime.dump()}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert runtime.shutdown(timeout=10)


@runs_bytecode
def test_ctrl_c_inside_scope_cancel_still_lets_the_block_exit(runtime: asyncop.Runtime) -> None:
    assert threading.current_thread() is threading.main_thread()
    for nth in range(1, 400):
        fired: list[bool] = []
        started = threading.Semaphore(0)
        began = time.monotonic()
        kids: list[asyncop.AsyncOperation] = []
        try:
            with runtime.scope() as s:
                kids += [s.spawn(task_kid, started), s.spawn(thread_kid, started)]
                assert started.acquire(timeout=10) and started.acquire(timeout=10)
                sys.setprofile(interrupt_inside(asyncop.AsyncOperation.cancel.__code__, nth, fired))
                try:
                    s.cancel()
                finally:
                    sys.setprofile(None)
        except KeyboardInterrupt:
            assert fired, f"nth={nth}: an interrupt nobody injected"
        assert time.monotonic() - began < 10, f"nth={nth}: the exit took too long"
        assert all(kid.done for kid in kids), f"nth={nth}: {runtime.dump()}"
        if not fired:
            break
    else:
        raise AssertionError("cancel() never ran through")
    # The next Ctrl-C at a scope's exit is noticed, not swallowed.
    timer = threading.Timer(0.2, _thread.interrupt_main)
    with pytest.raises(KeyboardInterrupt), runtime.scope() as s:
        s.spawn(wait_on_token)
        timer.start()
    timer.join()


def test_second_ctrl_c_at_a_sync_scope_exit_stops_the_wait(runtime: asyncop.Runtime) -> None:
    assert threading.current_thread() is threading.main_thread()
    started = threading.Event()

    def stubborn() -> None:
        started.set()
        time.sleep(2.0)  # ignores the cancel

    timers = [
        threading.Timer(0.2, _thread.interrupt_main),
        threading.Timer(0.4, _thread.interrupt_main),
    ]
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt), runtime.scope() as s:
        kid = s.spawn(stubborn)
        assert started.wait(10)
        for timer in timers:
            timer.start()
    elapsed = time.monotonic() - began
    for timer in timers:
        timer.join()
    assert elapsed < 1.6, "the second Ctrl-C was swallowed by the wait"
    assert kid.token.cancelled
    kid.wait(10)


def test_aclose_of_a_generator_suspended_inside_its_scope_closes_it_cleanly(
    runtime: asyncop.Runtime,
) -> None:
    opened: list[asyncop.AsyncOperation] = []

    async def main() -> str:
        gen = holds_a_scope(opened)
        await gen.__anext__()
        await gen.aclose()  # GeneratorExit passes through the scope bare
        return "closed"

    assert runtime.run(main) == "closed"
    assert opened[0].state is OperationState.CANCELLED
