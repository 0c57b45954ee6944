"""Misuse a type checker must catch: each marked line must be an error.

An "expect" comment at the end of a line names the mypy error code and the
pyright rule that must be reported there; ``test_typing.py`` runs both
checkers and also refuses errors on unmarked lines. Never imported or run.
"""

from __future__ import annotations

import asyncop
import asyncop.asyncio_bridge
from asyncop import AsyncOperation, Runtime


async def fetch(page: int) -> str:
    return str(page)


def compute(a: int, b: str) -> float:
    return float(a)


def seed(op: AsyncOperation[int], context: bytes) -> int:
    return 0


def from_threads(rt: Runtime) -> None:
    rt.spawn(fetch, "one")  # expect: arg-type reportArgumentType
    rt.spawn(fetch)  # expect: call-arg reportCallIssue
    rt.spawn(fetch, 1, 2)  # expect: call-arg reportCallIssue
    rt.spawn(compute, "x", 1)  # expect: arg-type reportArgumentType
    rt.spawn(compute, 1, "x", nmae="typo")  # expect: call-overload reportCallIssue
    rt.spawn(compute, 1, "x", supervise="yes")  # expect: call-overload reportArgumentType
    rt.run(fetch, "one")  # expect: arg-type reportArgumentType
    rt.create(seed, "not bytes")  # expect: arg-type reportArgumentType
    n: int = rt.run(fetch, 1)  # expect: assignment reportAssignmentType
    op = rt.spawn(fetch, 1)
    s: bytes = op.result()  # expect: assignment reportAssignmentType
    op.runtime.no_such_method()  # expect: attr-defined reportAttributeAccessIssue


async def in_a_task(op: AsyncOperation[str], ch: asyncop.Channel[int]) -> None:
    value: int = await op  # expect: assignment reportAssignmentType
    item: str = await ch.recv_async()  # expect: assignment reportAssignmentType
    await ch.send_async("text")  # expect: arg-type reportArgumentType
    await asyncop.spawn_blocking(compute, "x", 1)  # expect: arg-type reportArgumentType
    # Keywords for the function go through functools.partial, not the call.
    await asyncop.spawn_blocking(compute, 1, b="x")  # expect: arg-type reportArgumentType
    await op.start(compute, 1, b="x")  # expect: arg-type reportArgumentType
    await asyncop.timeout(1, fetch)  # expect: call-overload reportArgumentType
    await asyncop.race(op, 3)  # expect: call-overload reportCallIssue
    await asyncop.select(op, 3)  # expect: call-overload reportCallIssue
    await asyncop.sleep("1")  # expect: arg-type reportArgumentType
    op.cancel("deploying", 10)  # expect: call-arg reportCallIssue
    op.cancel(grace="10")  # expect: arg-type reportArgumentType
    stopping: int = await asyncop.wait_stop_requested()  # expect: assignment reportAssignmentType
    winner = await asyncop.race(op)
    number: int = await winner  # expect: assignment reportAssignmentType


async def through_the_asyncio_bridge() -> None:
    await asyncop.asyncio_bridge.run(fetch, "one")  # expect: arg-type reportArgumentType
    value = await asyncop.asyncio_bridge.run(fetch, 1)
    text: bytes = value  # expect: assignment reportAssignmentType
    asyncop.asyncio_bridge.run_sync(compute, 1, "x")  # expect: arg-type reportArgumentType
    asyncop.Runtime(asyncio_loop_factory=5)  # expect: arg-type reportArgumentType
