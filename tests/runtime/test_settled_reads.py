"""What another thread reads once it has seen an operation end.

An operation's end is read without the runtime's lock (``op.done``,
``op.state``, ``op.wait()`` on an operation that has ended...). Whatever
the thread reads next must find the end complete: the operation unlinked
from its parent, its end stamped, a failure handed up (which cancels the
parent). With the GIL off, the reader runs beside the worker that ends the
operation; each test repeats the race many times on the real clock.
"""

from __future__ import annotations

import pytest

import asyncop


def _noop() -> None:
    pass


def _boom() -> None:
    raise ValueError("boom")


def _seen_ended(op: asyncop.AsyncOperation[None], how: int) -> None:
    """See ``op`` end, without waiting on the runtime's lock if it can."""
    if how == 0:
        while not op.done:
            pass
    elif how == 1:
        while not op.state.final:
            pass
    else:
        op.wait(10)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["done", "state", "wait"])
def test_a_child_seen_ended_has_left_its_parent(runtime: asyncop.Runtime, how: str) -> None:
    seen = ["done", "state", "wait"].index(how)
    parent = runtime.create(_noop, name="parent")
    for _ in range(200):
        kid = parent.spawn(_noop)
        _seen_ended(kid, seen)
        assert kid.parent is None
        assert kid.stats.ended_at is not None
        assert kid not in parent.children()
    parent.cancel()
    assert parent.wait(10).state is asyncop.OperationState.CANCELLED


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["done", "state", "wait"])
def test_a_failed_child_seen_ended_has_cancelled_its_parent(
    runtime: asyncop.Runtime, how: str
) -> None:
    seen = ["done", "state", "wait"].index(how)
    for _ in range(200):
        parent = runtime.create(_noop, name="parent")
        token = parent.token  # (made first: reading it later takes the lock)
        kid = parent.spawn(_boom)
        _seen_ended(kid, seen)
        assert kid.state is asyncop.OperationState.FAILED
        # The failure went up as the child ended: the parent is cancelled,
        # and then fails with it.
        assert token.cancelled
        assert kid.parent is None
        result = parent.wait(10)
        assert result.state is asyncop.OperationState.FAILED
        assert isinstance(result.error, ExceptionGroup)
        assert [type(e) for e in result.error.exceptions] == [ValueError]


@pytest.mark.timeout(120)
def test_a_root_seen_ended_is_no_longer_live(runtime: asyncop.Runtime) -> None:
    async def task() -> None:
        await asyncop.checkpoint()

    for i in range(200):
        op = runtime.spawn(task if i % 2 else _noop)
        _seen_ended(op, i % 3)
        live = [row["name"] for row in runtime.snapshot()["operations"]]
        assert op.name not in live
        assert op.stats.ended_at is not None
        assert op.parent is None
