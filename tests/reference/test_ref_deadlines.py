"""Reference: deadlines and sleeps, on trio and on asyncop.

asyncop's ``scope(timeout=...)`` is trio's ``fail_after`` around a nursery:
its own expiry raises ``TimeoutError`` (trio raises ``TooSlowError``, which
the adapter maps). ``move_on_after`` is that scope with the
``TimeoutError`` caught.
"""

from __future__ import annotations

import pytest

from ._adapters import Adapter, Log, run_both

pytestmark = pytest.mark.timeout(30)


async def sleeper(ad: Adapter, log: Log, who: str, seconds: float) -> None:
    """Sleep ``seconds``, logging whether the sleep ended or was cancelled."""
    try:
        await ad.sleep(seconds)
        log(who, "slept")
    except ad.Cancelled:
        log(who, "cancelled")
        raise


def test_scope_timeout_cancels_everything_and_raises_timeout_error() -> None:
    """At the deadline the block and the children are cancelled; the block raises TimeoutError."""

    async def scenario(ad: Adapter, log: Log) -> None:
        try:
            async with ad.scope(timeout=2) as s:
                s.spawn(sleeper, ad, log, "child", 10)
                s.spawn(sleeper, ad, log, "quick child", 1)
                await sleeper(ad, log, "body", 10)
        except TimeoutError:
            log("main", "TimeoutError")
        log("main", "after scope")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "quick child": [(1.0, "slept")],
        "child": [(2.0, "cancelled")],
        "body": [(2.0, "cancelled")],
        "main": [(2.0, "TimeoutError"), (2.0, "after scope")],
    }
    assert on_asyncop == on_trio


def test_catching_the_scope_timeout_matches_trio_move_on_after() -> None:
    """trio's ``move_on_after`` and asyncop's timed scope with TimeoutError caught agree."""

    async def scenario(ad: Adapter, log: Log) -> None:
        async with ad.move_on_after(3) as s:
            s.spawn(sleeper, ad, log, "child", 10)
            await sleeper(ad, log, "body", 10)
        log("main", "moved on")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "child": [(3.0, "cancelled")],
        "body": [(3.0, "cancelled")],
        "main": [(3.0, "moved on")],
    }
    assert on_asyncop == on_trio


def test_scope_ending_before_its_deadline_raises_nothing() -> None:
    """A block and children that end before the deadline leave the scope normally."""

    async def scenario(ad: Adapter, log: Log) -> None:
        try:
            async with ad.scope(timeout=5) as s:
                s.spawn(sleeper, ad, log, "child", 2)
                await sleeper(ad, log, "body", 1)
        except TimeoutError:
            log("main", "TimeoutError")  # never reached
        log("main", "after scope")
        await ad.sleep(10)  # past the old deadline: nothing fires
        log("main", "still running")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "body": [(1.0, "slept")],
        "child": [(2.0, "slept")],
        "main": [(2.0, "after scope"), (12.0, "still running")],
    }
    assert on_asyncop == on_trio


def test_deadline_that_interrupts_nothing_raises_nothing() -> None:
    """A deadline that passes while only a shielded wait runs, and nothing awaits after, is silent.

    asyncop: "If that cancel interrupted anything, the block raises
    TimeoutError"; trio's ``fail_after`` raises only if its scope caught a
    ``Cancelled``.
    """

    async def scenario(ad: Adapter, log: Log) -> None:
        try:
            async with ad.scope(timeout=1):
                async with ad.scope(shield=True):
                    await ad.sleep(2)
                log("main", "shielded sleep done")
        except TimeoutError:
            log("main", "TimeoutError")  # never reached
        log("main", "after scope")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {"main": [(2.0, "shielded sleep done"), (2.0, "after scope")]}
    assert on_asyncop == on_trio


def test_outer_deadline_at_the_same_instant_wins() -> None:
    """Outer and inner deadlines fire together: the outer raises, the inner lets Cancelled pass."""

    async def scenario(ad: Adapter, log: Log) -> None:
        try:
            async with ad.scope(timeout=1):
                try:
                    async with ad.scope(timeout=1):
                        await sleeper(ad, log, "body", 5)
                    log("main", "after inner scope")  # never reached
                except TimeoutError:
                    log("main", "inner TimeoutError")  # never reached
                log("main", "after inner try")  # never reached
        except TimeoutError:
            log("main", "outer TimeoutError")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "body": [(1.0, "cancelled")],
        "main": [(1.0, "outer TimeoutError")],
    }
    assert on_asyncop == on_trio


def test_earlier_inner_deadline_raises_in_the_inner_scope_only() -> None:
    """The inner deadline fires first: the inner scope raises, the outer body carries on."""

    async def scenario(ad: Adapter, log: Log) -> None:
        try:
            async with ad.scope(timeout=3):
                try:
                    async with ad.scope(timeout=1):
                        await sleeper(ad, log, "inner body", 5)
                except TimeoutError:
                    log("main", "inner TimeoutError")
                await sleeper(ad, log, "outer body", 5)
        except TimeoutError:
            log("main", "outer TimeoutError")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "inner body": [(1.0, "cancelled")],
        "outer body": [(3.0, "cancelled")],
        "main": [(1.0, "inner TimeoutError"), (3.0, "outer TimeoutError")],
    }
    assert on_asyncop == on_trio


def test_moving_the_deadline_while_the_block_runs() -> None:
    """Pushing the deadline later delays the timeout; pulling it earlier brings it forward."""

    async def scenario(ad: Adapter, log: Log) -> None:
        try:
            async with ad.scope(timeout=1) as s:
                await ad.sleep(0.5)
                s.deadline = ad.now() + 2  # from 1.0 to 2.5
                await sleeper(ad, log, "first", 10)
        except TimeoutError:
            log("main", "first TimeoutError")
        try:
            async with ad.scope(timeout=10) as s:
                s.deadline = ad.now() + 1  # from 12.5 to 3.5
                await sleeper(ad, log, "second", 10)
        except TimeoutError:
            log("main", "second TimeoutError")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "first": [(2.5, "cancelled")],
        "second": [(3.5, "cancelled")],
        "main": [(2.5, "first TimeoutError"), (3.5, "second TimeoutError")],
    }
    assert on_asyncop == on_trio


def test_shielded_scope_keeps_its_own_deadline_in_a_cancelled_task() -> None:
    """A shield keeps the outer cancel out, not the shielded scope's own deadline."""

    async def scenario(ad: Adapter, log: Log) -> None:
        async with ad.scope() as s:
            s.cancel()
            try:
                await ad.checkpoint()
            except ad.Cancelled:
                log("main", "cancelled")
            try:
                async with ad.scope(shield=True, timeout=1):
                    await sleeper(ad, log, "shielded", 5)
            except TimeoutError:
                log("main", "shielded scope TimeoutError")
            try:
                await ad.checkpoint()
            except ad.Cancelled:
                log("main", "cancelled again")
                raise
        log("main", "scope exited")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "shielded": [(1.0, "cancelled")],
        "main": [
            (0.0, "cancelled"),
            (1.0, "shielded scope TimeoutError"),
            (1.0, "cancelled again"),
            (1.0, "scope exited"),
        ],
    }
    assert on_asyncop == on_trio


def test_sleeps_wake_in_deadline_order() -> None:
    """Sleepers started together wake in the order of their deadlines, at their deadlines."""

    durations = [3.0, 1.0, 4.0, 1.5, 5.0, 2.0, 0.5]

    async def scenario(ad: Adapter, log: Log) -> None:
        async def nap(seconds: float) -> None:
            await ad.sleep(seconds)
            log("wakes", seconds)  # one shared task name: the order across tasks counts

        async with ad.scope() as s:
            for seconds in durations:
                s.spawn(nap, seconds)

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {"wakes": [(d, d) for d in sorted(durations)]}
    assert on_asyncop == on_trio
