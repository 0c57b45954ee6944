"""Rules a user of trio's, anyio's and asyncio's ``to_thread`` expects of ``spawn_blocking``.

Each test states, from the user's side, a rule those libraries promise for
a call run in another thread that asyncop promises too, in the cases the
other blocking-call tests leave out: the thread's frames in the error's
traceback, the limiter's accounting after a cancel, context variables that
do not leak back, and a thread that calls back into its runtime.

Where asyncop differs by design, the test holds asyncop's rule: a runtime
takes calls from any thread (trio's ``from_thread`` needs a token), so a
blocking-call thread calls back with ``runtime.spawn(...)`` or
``runtime.run(...)``.
"""

from __future__ import annotations

import contextvars
import threading
import traceback
from typing import Any

import pytest

import asyncop
from asyncop import CapacityLimiter, OperationState, spawn_blocking
from asyncop.runtime._core import _blocking
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(20)


class Boom(Exception):
    """The failure the tests raise on purpose."""


def test_an_error_from_the_thread_keeps_the_threads_frames() -> None:
    def fails_in_thread() -> None:
        raise Boom("in the thread")

    async def main() -> list[str]:
        try:
            await spawn_blocking(fails_in_thread)
        except Boom as exc:
            return [frame.f_code.co_name for frame, _ in traceback.walk_tb(exc.__traceback__)]
        return []

    with asyncop.Runtime(2) as rt:
        names = rt.run(main)
    assert "main" in names
    assert names[-1] == "fails_in_thread"


def test_a_cancelled_wait_for_a_token_takes_none() -> None:
    limiter = CapacityLimiter(1)
    gate = threading.Event()

    async def call() -> bool:
        return await spawn_blocking(gate.wait, 10, limiter=limiter)

    async def main() -> None:
        async with asyncop.scope() as s:
            first = s.spawn(call)
            while limiter.borrowed_tokens == 0:
                await asyncop.sleep(0.01)
            second = s.spawn(call)
            while limiter.statistics().tasks_waiting == 0:
                await asyncop.sleep(0.01)
            second.cancel()
            await asyncop.race(second)
            assert second.state is OperationState.CANCELLED
            assert limiter.borrowed_tokens == 1
            assert limiter.statistics().tasks_waiting == 0
            gate.set()
        assert first.result() is True
        assert limiter.borrowed_tokens == 0

    with asyncop.Runtime(2) as rt:
        rt.run(main)


def test_an_abandoned_call_keeps_its_token_until_its_thread_ends() -> None:
    limiter = CapacityLimiter(1)
    gate, ended = threading.Event(), threading.Event()

    def work() -> None:
        gate.wait(10)
        ended.set()

    async def call() -> None:
        await spawn_blocking(work, abandon=True, limiter=limiter)

    async def main() -> None:
        op = asyncop.current_operation(require=True).spawn(call)
        while limiter.borrowed_tokens == 0:
            await asyncop.sleep(0.01)
        op.cancel()
        await asyncop.race(op)
        assert op.state is OperationState.CANCELLED
        assert limiter.borrowed_tokens == 1  # the thread still runs
        gate.set()
        assert await spawn_blocking(ended.wait, 10)
        while limiter.borrowed_tokens:
            await asyncop.sleep(0.01)

    with asyncop.Runtime(2) as rt:
        rt.run(main)
    assert limiter.borrowed_tokens == 0


def test_raising_total_tokens_starts_a_waiting_call() -> None:
    limiter = CapacityLimiter(1)
    gate = threading.Event()

    async def call() -> bool:
        return await spawn_blocking(gate.wait, 10, limiter=limiter)

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(call)
            s.spawn(call)
            while limiter.statistics().tasks_waiting == 0:
                await asyncop.sleep(0.01)
            limiter.total_tokens = 2
            while limiter.borrowed_tokens < 2:
                await asyncop.sleep(0.01)
            gate.set()

    with asyncop.Runtime(2) as rt:
        rt.run(main)


def test_context_changes_in_the_thread_do_not_leak_back() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    def in_thread() -> str:
        seen = var.get()
        var.set("thread")
        return seen

    async def main() -> tuple[str, str]:
        var.set("task")
        seen = await spawn_blocking(in_thread)
        return seen, var.get()

    with asyncop.Runtime(2) as rt:
        assert rt.run(main) == ("task", "task")


def test_a_blocking_thread_calls_back_into_its_runtime() -> None:
    async def double(x: int) -> int:
        await asyncop.checkpoint()
        return 2 * x

    def in_thread(rt: asyncop.Runtime) -> tuple[int, int | None]:
        return rt.run(double, 21), rt.spawn(double, 4).wait(10).value

    async def main() -> tuple[int, int | None]:
        return await spawn_blocking(in_thread, asyncop.current_runtime())

    with asyncop.Runtime(2) as rt:
        assert rt.run(main) == (42, 8)


def test_a_thread_calling_into_a_shut_down_runtime_is_told_so() -> None:
    rt = asyncop.Runtime(2, name="closed-for-threads")
    entered, errors = threading.Event(), []
    release = threading.Event()

    def in_thread() -> None:
        entered.set()
        release.wait(10)
        try:
            rt.spawn(lambda: None)
        except RuntimeError as exc:
            errors.append(exc)

    async def main() -> None:
        await spawn_blocking(in_thread, abandon=True)

    rt.spawn(main)
    assert entered.wait(10)
    rt.shutdown(timeout=5)
    release.set()
    for _ in range(1000):
        if errors:
            break
        threading.Event().wait(0.01)
    assert errors
    assert "closed-for-threads" in str(errors[0])
    assert "shut down" in str(errors[0])


def test_a_keyboard_interrupt_in_the_thread_reaches_the_task() -> None:
    def interrupted() -> Any:
        raise KeyboardInterrupt

    async def main() -> str:
        try:
            await spawn_blocking(interrupted)
        except KeyboardInterrupt:
            return "caught"
        return "missed"

    with asyncop.Runtime(2) as rt:
        assert rt.run(main) == "caught"


def _refuse_threads(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("can't start new thread")


def test_a_call_whose_thread_cannot_start_fails_and_gives_everything_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limiter = CapacityLimiter(1)
    ran: list[str] = []

    async def main() -> str:
        with monkeypatch.context() as patch:
            patch.setattr(_blocking, "start_thread", _refuse_threads)
            with pytest.raises(RuntimeError, match="can't start new thread"):
                await spawn_blocking(ran.append, "refused", limiter=limiter)
        assert limiter.borrowed_tokens == 0
        # Nothing counts the refused call as running: the clock jumps.
        await asyncop.sleep(3600)
        # And it never runs later, on a thread started for another call.
        await spawn_blocking(ran.append, "later", limiter=limiter)
        return "done"

    with asyncop.Runtime(2, clock=VirtualClock(autojump=True)) as rt:
        assert rt.run(main) == "done"
    assert ran == ["later"]
    assert limiter.borrowed_tokens == 0


def test_a_call_whose_thread_cannot_start_once_its_token_comes_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limiter = CapacityLimiter(1)
    gate = threading.Event()
    ran: list[str] = []

    async def second() -> None:
        await spawn_blocking(ran.append, "refused", limiter=limiter)

    async def main() -> None:
        async with asyncop.scope() as s:
            holder = s.spawn(_hold, limiter, gate)
            while limiter.borrowed_tokens == 0:
                await asyncop.sleep(0.01)
            waiter = s.spawn(second, supervise=True)
            while limiter.statistics().tasks_waiting == 0:
                await asyncop.sleep(0.01)
            monkeypatch.setattr(_blocking, "start_thread", _refuse_threads)
            gate.set()  # the holder's call ends and hands its token on
            await asyncop.race(waiter)
            monkeypatch.undo()
            assert isinstance(waiter.error, RuntimeError)
            assert "can't start new thread" in str(waiter.error)
            await asyncop.race(holder)
            assert holder.result() is True

    with asyncop.Runtime(2) as rt:
        rt.run(main)
    assert ran == []
    assert limiter.borrowed_tokens == 0


async def _hold(limiter: CapacityLimiter, gate: threading.Event) -> bool:
    return await spawn_blocking(gate.wait, 10, limiter=limiter)
