"""Infinite and far-away deadlines: they never fire and never break the runtime.

"Sleep forever" is written ``sleep(math.inf)``, and "practically never" as a
huge number. Such a wait must park the task without a limit, leave the
workers, the watchdog and an autojumping virtual clock working, and end
cleanly when it is cancelled or the runtime shuts down.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import asyncop
from asyncop.testing import VirtualClock, wait_all_blocked
from tests.conftest import runtime_threads

pytestmark = pytest.mark.timeout(30)

FAR_VALUES = [math.inf, 1e9, 1e10, 1e12, 1e300]


async def _sleep(value: float) -> None:
    await asyncop.sleep(value)


async def _sleep_until(value: float) -> None:
    await asyncop.sleep_until(value)


async def _select_sleep(value: float) -> None:
    await asyncop.select(asyncop.sleep(value), asyncop.sleep(value))


async def _timeout_op(value: float) -> None:
    async with asyncop.scope() as s:
        forever = s.spawn(_sleep, math.inf)
        try:
            await asyncop.timeout(value, forever)
        finally:
            forever.cancel()


async def _scope_timeout(value: float) -> None:
    async with asyncop.scope(timeout=value):
        await asyncop.sleep(math.inf)


async def _scope_deadline(value: float) -> None:
    async with asyncop.scope(deadline=value):
        await asyncop.sleep(math.inf)


async def _op_deadline(value: float) -> None:
    op = asyncop.current_operation()
    assert op is not None
    op.deadline = value
    await asyncop.sleep(math.inf)


FOREVER: dict[str, Callable[[float], Awaitable[None]]] = {
    "sleep": _sleep,
    "sleep_until": _sleep_until,
    "select": _select_sleep,
    "timeout": _timeout_op,
    "scope_timeout": _scope_timeout,
    "scope_deadline": _scope_deadline,
    "op_deadline": _op_deadline,
}


def _live_workers(rt: asyncop.Runtime) -> list[threading.Thread]:
    return [t for t in runtime_threads(rt) if "-worker-" in t.name]


@pytest.mark.parametrize("value", FAR_VALUES, ids=repr)
@pytest.mark.parametrize("kind", sorted(FOREVER))
def test_a_wait_without_end_leaves_the_virtual_clock_alone(kind: str, value: float) -> None:
    clock = VirtualClock(autojump=True)
    with asyncop.Runtime(2, name=f"far-v-{kind}", clock=clock) as rt:
        forever = rt.spawn(FOREVER[kind], value)

        async def later() -> float:
            await asyncop.sleep(5)
            return asyncop.current_time()

        # The clock jumps to the real deadline, never to the far one.
        assert rt.spawn(later).wait(10).value == 5.0
        assert clock.now() == 5.0
        assert not forever.done
        forever.cancel()
        assert forever.wait(10).state is asyncop.OperationState.CANCELLED
        assert math.isfinite(clock.now())
        assert rt.spawn(later).wait(10).value == 10.0


@pytest.mark.parametrize("value", FAR_VALUES, ids=repr)
@pytest.mark.parametrize("kind", sorted(FOREVER))
def test_a_wait_without_end_keeps_the_workers_alive(kind: str, value: float) -> None:
    rt = asyncop.Runtime(2, name=f"far-r-{kind}")
    try:
        forever = rt.spawn(FOREVER[kind], value)
        time.sleep(0.1)  # every worker parks, with the far wait armed
        assert len(_live_workers(rt)) == 2
        assert rt.spawn(lambda: 42).wait(10).value == 42

        async def short() -> str:
            await asyncop.sleep(0.01)
            return "woke"

        assert rt.spawn(short).wait(10).value == "woke"
        assert not forever.done
    finally:
        start = time.monotonic()
        assert rt.shutdown(timeout=10)
    assert time.monotonic() - start < 5
    assert forever.state is asyncop.OperationState.CANCELLED
    assert runtime_threads(rt) == []


@pytest.mark.parametrize(
    ("asked", "shown"),
    [
        (1e9, "sleep(1e+09)"),
        (2e10, "sleep(2e+10)"),
        (10**12, "sleep(1e+12)"),
        (math.inf, "sleep(inf)"),
        (10**400, "sleep(inf)"),  # past float range: no length a float can show
    ],
    ids=repr,
)
def test_dump_shows_the_far_sleep_asked_for_which_arms_no_timer(
    vruntime: asyncop.Runtime, asked: float, shown: str
) -> None:
    async def sleeps() -> None:
        await asyncop.sleep(asked)

    async def waits_with_timeout() -> None:
        async with asyncop.scope() as s:
            await asyncop.timeout(asked, s.spawn(sleeps, name="slept"))

    async def main() -> tuple[str, int]:
        async with asyncop.scope() as s:
            s.spawn(sleeps, name="sleeper")
            s.spawn(waits_with_timeout, name="timed")
            await wait_all_blocked()
            text, timers = vruntime.dump(), vruntime.registrations()
            s.cancel()
        return text, timers

    text, timers = vruntime.run(main)
    sleeper = next(line for line in text.splitlines() if "sleeper [" in line)
    assert f"waiting on {shown} at " in sleeper
    timed = next(line for line in text.splitlines() if "timed [" in line)
    assert f"timeout({shown[len('sleep(') : -1]}, 'slept')" in timed
    assert timers == 0  # "no limit": nothing in the timer heap


def test_a_far_deadline_set_on_a_sync_operation_never_fires() -> None:
    with asyncop.Runtime(2, name="far-sync") as rt:

        def work(op: asyncop.AsyncOperation, _ctx: object) -> str:
            op.token.wait(0.2)
            return "done"

        op = rt.create(work)
        op.deadline = 1e12
        rt.submit(op)
        assert op.wait(10).value == "done"
        assert not op.expired


def test_moving_a_far_deadline_closer_still_fires_it() -> None:
    clock = VirtualClock(autojump=True)
    with asyncop.Runtime(2, name="far-move", clock=clock) as rt:

        async def main() -> bool:
            async with asyncop.scope(timeout=math.inf) as s:
                s.deadline = asyncop.current_time() + 3
                await asyncop.sleep(math.inf)
            return s.expired

        with pytest.raises(TimeoutError):
            rt.run(main)
        assert clock.now() == 3.0


@pytest.mark.parametrize("timeout", [math.inf, 1e10, 1e300])
def test_shutdown_with_an_infinite_timeout_waits_without_limit(timeout: float) -> None:
    rt = asyncop.Runtime(2, name="far-shutdown")
    started = threading.Event()

    def stubborn() -> str:
        started.set()
        time.sleep(0.3)  # ignores its token
        return "done"

    op = rt.spawn(stubborn)
    assert started.wait(10)
    assert rt.shutdown(timeout=timeout) is True
    assert op.state is asyncop.OperationState.COMPLETED
    assert runtime_threads(rt) == []


@pytest.mark.parametrize(
    ("timeout", "error"),
    [(math.nan, ValueError), ("1", TypeError), (True, TypeError), (object(), TypeError)],
    ids=["nan", "str", "bool", "object"],
)
def test_shutdown_with_a_bad_timeout_raises_before_changing_anything(
    timeout: Any, error: type[Exception]
) -> None:
    rt = asyncop.Runtime(2, name="bad-shutdown")
    try:

        async def forever() -> None:
            await asyncop.sleep(math.inf)

        op = rt.spawn(forever)
        with pytest.raises(error, match="shutdown"):
            rt.shutdown(timeout=timeout)
        # Nothing was cancelled or closed: the runtime still takes work.
        assert not op.done
        assert rt.spawn(lambda: 7).wait(10).value == 7
    finally:
        assert rt.shutdown(timeout=10)


@pytest.mark.parametrize("timeout", [0, -1, 0.0])
def test_shutdown_with_zero_or_negative_timeout_does_not_wait(timeout: float) -> None:
    rt = asyncop.Runtime(2, name="zero-shutdown")
    release = threading.Event()
    started = threading.Event()

    def stuck() -> None:
        started.set()
        release.wait(10)

    rt.spawn(stuck)
    assert started.wait(10)
    start = time.monotonic()
    try:
        assert rt.shutdown(timeout=timeout) is False
        assert time.monotonic() - start < 1.0
    finally:
        release.set()
        assert rt.shutdown(timeout=10)


_SPECIAL = [math.inf, -math.inf, 1e300, -1e300, 1e9, 1e9 - 1, 1e12, -1.0, 0.0, 5e-324]


@pytest.mark.timeout(120)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(
        st.one_of(
            st.sampled_from(_SPECIAL),
            st.floats(min_value=-10, max_value=10),
            st.floats(allow_nan=False),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_sleep_or_deadline_value_leaves_the_runtime_working(values: list[float]) -> None:
    clock = VirtualClock(autojump=True)
    with asyncop.Runtime(2, name="far-any", clock=clock) as rt:

        async def sleeper(value: float) -> None:
            await asyncop.sleep(value)

        async def until(value: float) -> None:
            await asyncop.sleep_until(value)

        async def deadline(value: float) -> None:
            await _op_deadline(value)

        async def main() -> float:
            async with asyncop.scope() as s:
                for value in values:
                    for fn in (sleeper, until, deadline):
                        s.spawn(fn, value)
                start = asyncop.current_time()
                await asyncop.sleep(1)
                waited = asyncop.current_time() - start
                s.cancel()
            return waited

        waited = rt.run(main)
        # Finite, small deadlines came first; a far one never moved the clock.
        assert 0.0 < waited <= 1.0
        assert math.isfinite(clock.now())
        assert rt.registrations() == 0
        assert rt.spawn(lambda: "still runs").wait(10).value == "still runs"
