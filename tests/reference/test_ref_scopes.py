"""Reference: scopes (nurseries) and their failures, on trio and on asyncop."""

from __future__ import annotations

from collections.abc import Hashable

import pytest

from ._adapters import Adapter, Log, describe_error, per_task, run_asyncop, run_both, run_trio

pytestmark = pytest.mark.timeout(30)


async def sleeper(ad: Adapter, log: Log, who: str, seconds: float) -> None:
    """Sleep ``seconds``, logging whether the sleep ended or was cancelled."""
    try:
        await ad.sleep(seconds)
        log(who, "slept")
    except ad.Cancelled:
        log(who, "cancelled")
        raise


async def fail_after_shielded_sleep(ad: Adapter, who: str, seconds: float) -> None:
    """Raise ``ValueError(who)`` after ``seconds``, whatever is cancelled meanwhile.

    The shield makes the failure happen even if a sibling's failure cancels
    this task first, so two such children always both fail, on either
    library and whatever the interleaving of the workers.
    """
    async with ad.scope(shield=True):
        await ad.sleep(seconds)
    raise ValueError(who)


def test_scope_cancel_stops_at_the_scope() -> None:
    """``s.cancel()`` ends the block and the children; the code after the block goes on."""

    async def scenario(ad: Adapter, log: Log) -> None:
        async with ad.scope() as s:
            s.spawn(sleeper, ad, log, "child", 10)
            await ad.sleep(1)
            s.cancel()
            log("main", "cancelled the scope")
            try:
                await ad.checkpoint()
            except ad.Cancelled:
                log("main", "body cancelled")
                raise
        log("main", "scope exited")
        await ad.sleep(1)
        log("main", "still running")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "child": [(1.0, "cancelled")],
        "main": [
            (1.0, "cancelled the scope"),
            (1.0, "body cancelled"),
            (1.0, "scope exited"),
            (2.0, "still running"),
        ],
    }
    assert on_asyncop == on_trio


def test_cancelling_the_outer_scope_unwinds_the_inner_scope() -> None:
    """A cancel of the outer scope goes through the inner one; only the outer swallows it.

    One deliberate difference in what passes through the inner scope. In
    asyncop cancellations never appear inside a group, and the inner scope "lets
    ``Cancelled`` pass": a bare ``Cancelled``. trio's strict nursery wraps the
    ``Cancelled`` of the body (and of its children) in a
    ``BaseExceptionGroup``, which the outer cancel scope then unwraps.
    """

    async def scenario(ad: Adapter, log: Log) -> None:
        async with ad.scope() as outer:
            outer.spawn(sleeper, ad, log, "outer child", 10)
            try:
                async with ad.scope() as inner:
                    inner.spawn(sleeper, ad, log, "inner child", 10)

                    async def cancel_outer() -> None:
                        await ad.sleep(1)
                        outer.cancel()

                    inner.spawn(cancel_outer)
                    try:
                        await ad.sleep(10)
                    except ad.Cancelled:
                        log("main", "inner body cancelled")
                        raise
                log("main", "after inner scope")  # never reached
            except BaseException as exc:
                log("main", ("passed the inner scope", describe_error(exc)))
                raise
        log("main", "outer scope exited")

    on_trio, on_asyncop = run_both(scenario)

    def expected(passed: Hashable) -> dict[str, list[tuple[float, Hashable]]]:
        return {
            "outer child": [(1.0, "cancelled")],
            "inner child": [(1.0, "cancelled")],
            "main": [
                (1.0, "inner body cancelled"),
                (1.0, ("passed the inner scope", passed)),
                (1.0, "outer scope exited"),
            ],
        }

    assert on_trio == expected(("group", frozenset({("Cancelled", "")})))
    assert on_asyncop == expected(("Cancelled", ""))


def test_cancelling_the_inner_scope_leaves_the_outer_running() -> None:
    """A cancel of the inner scope stops there; the outer scope's children go on."""

    async def scenario(ad: Adapter, log: Log) -> None:
        async with ad.scope() as outer:
            outer.spawn(sleeper, ad, log, "outer child", 3)
            async with ad.scope() as inner:
                inner.spawn(sleeper, ad, log, "inner child", 10)
                await ad.sleep(1)
                inner.cancel()
                try:
                    await ad.sleep(10)
                except ad.Cancelled:
                    log("main", "inner body cancelled")
                    raise
            log("main", "after inner scope")
            await ad.sleep(1)
            log("main", "outer body slept")
        log("main", "outer scope exited")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "outer child": [(3.0, "slept")],
        "inner child": [(1.0, "cancelled")],
        "main": [
            (1.0, "inner body cancelled"),
            (1.0, "after inner scope"),
            (2.0, "outer body slept"),
            (3.0, "outer scope exited"),
        ],
    }
    assert on_asyncop == on_trio


def test_two_failing_children_are_grouped_without_cancellations() -> None:
    """Two failures come out in one group; the cancelled sibling and body add no ``Cancelled``."""

    async def scenario(ad: Adapter, log: Log) -> None:
        try:
            async with ad.scope() as s:
                s.spawn(fail_after_shielded_sleep, ad, "a", 1)
                s.spawn(fail_after_shielded_sleep, ad, "b", 1)
                s.spawn(sleeper, ad, log, "sibling", 10)
                try:
                    await ad.sleep(10)
                except ad.Cancelled:
                    log("main", "body cancelled")
                    raise
        except BaseExceptionGroup as group:
            log("main", describe_error(group))

    on_trio, on_asyncop = run_both(scenario)
    expected: Hashable = ("group", frozenset({("ValueError", "a"), ("ValueError", "b")}))
    assert on_trio == {
        "sibling": [(1.0, "cancelled")],
        "main": [(1.0, "body cancelled"), (1.0, expected)],
    }
    assert on_asyncop == on_trio


def test_failing_child_cancels_its_siblings_and_the_body() -> None:
    """One child fails: its siblings and the block are cancelled at their awaits."""

    async def scenario(ad: Adapter, log: Log) -> None:
        async def fails() -> None:
            await ad.sleep(1)
            log("failing", "raising")
            raise KeyError("boom")

        try:
            async with ad.scope() as s:
                s.spawn(fails)
                s.spawn(sleeper, ad, log, "sibling 1", 10)
                s.spawn(sleeper, ad, log, "sibling 2", 20)
                try:
                    await ad.sleep(10)
                    log("main", "body slept")  # never reached
                except ad.Cancelled:
                    log("main", "body cancelled")
                    raise
        except BaseExceptionGroup as group:
            log("main", describe_error(group))
        log("main", "after scope")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "failing": [(1.0, "raising")],
        "sibling 1": [(1.0, "cancelled")],
        "sibling 2": [(1.0, "cancelled")],
        "main": [
            (1.0, "body cancelled"),
            (1.0, ("group", frozenset({("KeyError", "'boom'")}))),
            (1.0, "after scope"),
        ],
    }
    assert on_asyncop == on_trio


def test_error_in_the_block_cancels_the_children_and_is_grouped() -> None:
    """The block raising cancels the children; the error comes out alone in a group."""

    async def scenario(ad: Adapter, log: Log) -> None:
        try:
            async with ad.scope() as s:
                s.spawn(sleeper, ad, log, "child 1", 10)
                s.spawn(sleeper, ad, log, "child 2", 10)
                await ad.sleep(1)
                raise RuntimeError("block failed")
        except BaseExceptionGroup as group:
            log("main", describe_error(group))

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "child 1": [(1.0, "cancelled")],
        "child 2": [(1.0, "cancelled")],
        "main": [(1.0, ("group", frozenset({("RuntimeError", "block failed")})))],
    }
    assert on_asyncop == on_trio


def test_supervised_failure_stays_on_the_child() -> None:
    """A supervised child's failure cancels nobody and does not fail the block.

    trio has no supervision; its side of the adapter catches the child's
    exception in the task's wrapper, the pattern trio code uses instead.
    """

    async def scenario(ad: Adapter, log: Log) -> None:
        async def fails() -> None:
            await ad.sleep(1)
            raise ValueError("supervised")

        async with ad.scope() as s:
            task = s.spawn(fails, supervise=True)
            s.spawn(sleeper, ad, log, "sibling", 3)
            await ad.sleep(2)
            log("main", "body slept")
        log("main", "scope exited")
        error = task.error
        log("main", ("child error", None if error is None else describe_error(error)))

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "sibling": [(3.0, "slept")],
        "main": [
            (2.0, "body slept"),
            (3.0, "scope exited"),
            (3.0, ("child error", ("ValueError", "supervised"))),
        ],
    }
    assert on_asyncop == on_trio


def test_supervising_scope_keeps_every_failure_on_its_child() -> None:
    """In ``scope(supervise=True)`` failing children cancel nobody and the block does not raise."""

    async def scenario(ad: Adapter, log: Log) -> None:
        async def fails(seconds: float, message: str) -> None:
            await ad.sleep(seconds)
            raise ValueError(message)

        async with ad.scope(supervise=True) as s:
            first = s.spawn(fails, 1, "first")
            second = s.spawn(fails, 2, "second")
            s.spawn(sleeper, ad, log, "sibling", 3)
            await sleeper(ad, log, "body", 4)
        log("main", "scope exited")
        for name, task in (("first", first), ("second", second)):
            error = task.error
            log("main", (name, None if error is None else describe_error(error)))

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "sibling": [(3.0, "slept")],
        "body": [(4.0, "slept")],
        "main": [
            (4.0, "scope exited"),
            (4.0, ("first", ("ValueError", "first"))),
            (4.0, ("second", ("ValueError", "second"))),
        ],
    }
    assert on_asyncop == on_trio


def test_first_of_two_racing_children_cancels_the_loser() -> None:
    """The racing pattern: the first child to finish records itself and cancels the scope."""

    async def scenario(ad: Adapter, log: Log) -> None:
        async with ad.scope() as s:

            async def contender(who: str, seconds: float) -> None:
                try:
                    await ad.sleep(seconds)
                except ad.Cancelled:
                    log(who, "lost")
                    raise
                log(who, "won")
                s.cancel()

            s.spawn(contender, "slow", 5)
            s.spawn(contender, "fast", 2)
        log("main", "race over")

    on_trio, on_asyncop = run_both(scenario)
    assert on_trio == {
        "fast": [(2.0, "won")],
        "slow": [(2.0, "lost")],
        "main": [(2.0, "race over")],
    }
    assert on_asyncop == on_trio


def test_select_loser_consumes_no_item_unlike_trio_race() -> None:
    """``asyncop.select`` over two ready receives takes one item; trio's race loses one.

    Deliberate difference. asyncop's ``select`` "cancels the losers. A losing
    receive consumes no item." trio has no select; its idiom races the
    receives in a nursery, and when both channels get an item in the same
    instant both receivers are handed theirs before the winner can cancel the
    loser, so the loser's item is taken from its channel and dropped.
    """

    async def scenario(ad: Adapter, log: Log) -> None:
        a = ad.channel(1)
        b = ad.channel(1)
        async with ad.scope() as s:

            async def receiver() -> None:
                index, item = await ad.select_recv(a, b)
                log("receiver", ("won", index, item))

            s.spawn(receiver)
            await ad.sleep(1)
            a.send_nowait("from a")  # both in the same instant, with the
            b.send_nowait("from b")  # receiver parked on both
        for name, channel in (("a", a), ("b", b)):
            try:
                log("main", ("left in", name, channel.recv_nowait()))
            except ad.WouldBlock:
                log("main", ("left in", name, None))

    on_trio = per_task(run_trio(scenario))
    on_asyncop = per_task(run_asyncop(scenario))
    # trio: one item won, and the other channel is empty too: that item is lost.
    assert len(on_trio["receiver"]) == 1
    assert on_trio["main"] == [(1.0, ("left in", "a", None)), (1.0, ("left in", "b", None))]
    # asyncop: "a" fired first and won; "b"'s item is still in its channel.
    assert on_asyncop == {
        "receiver": [(1.0, ("won", 0, "from a"))],
        "main": [(1.0, ("left in", "a", None)), (1.0, ("left in", "b", "from b"))],
    }
