"""The state machines a user can see: a scope's, a runtime's, a timer's."""

from __future__ import annotations

import threading

import pytest

import asyncop
from asyncop.runtime._core._timers import TimerHeap, TimerState

pytestmark = pytest.mark.timeout(30)


def test_a_scope_goes_new_open_exiting_closed_and_its_repr_says_so() -> None:
    release = threading.Event()
    with asyncop.Runtime(2) as rt:
        scope = rt.scope(name="block")
        assert repr(scope) == "<Scope 'block' NEW>"
        seen: list[str] = []

        def child() -> None:
            release.wait(10)

        def watch() -> None:
            # The exit waits for the child: the scope is EXITING meanwhile.
            for _ in range(1000):
                if "EXITING" in repr(scope):
                    seen.append(repr(scope))
                    break
                threading.Event().wait(0.005)
            release.set()

        with scope as s:
            assert repr(scope) == "<Scope 'block' OPEN>"
            s.spawn(child)
            threading.Thread(target=watch).start()
        assert seen == ["<Scope 'block' EXITING>"]
        assert repr(scope) == "<Scope 'block' CLOSED>"


def test_an_async_scope_reports_open_inside_its_block() -> None:
    async def main() -> list[str]:
        scope = asyncop.scope(name="inner")
        states = [scope.state.name]
        async with scope:
            states.append(scope.state.name)
        states.append(scope.state.name)
        return states

    with asyncop.Runtime(2) as rt:
        assert rt.run(main) == ["NEW", "OPEN", "CLOSED"]


def test_a_runtime_says_whether_it_runs() -> None:
    rt = asyncop.Runtime(1, name="states")
    assert repr(rt).startswith("<Runtime 'states' running workers=1")
    rt.shutdown()
    assert repr(rt).startswith("<Runtime 'states' stopped workers=1")
    with pytest.raises(RuntimeError, match="shut down"):
        rt.spawn(lambda: None)


def test_a_timer_fires_or_is_cancelled_once() -> None:
    heap = TimerHeap()
    fired = heap.push(1.0, lambda: None, inline=True)
    cancelled = heap.push(2.0, lambda: None, inline=True)
    assert fired.state is TimerState.ARMED
    assert heap.cancel(cancelled)
    assert cancelled.state is TimerState.CANCELLED
    assert not heap.cancel(cancelled)  # a second cancel changes nothing
    assert heap.pop_due(5.0) == [fired]
    assert fired.state is TimerState.FIRED
    assert not heap.cancel(fired)  # too late: it fired
    assert fired.state is TimerState.FIRED
    assert len(heap) == 0
