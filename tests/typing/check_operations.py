"""What a type checker sees for operations: spawn, run, create, results.

Checked by ``mypy --strict`` and ``pyright`` (``test_typing.py``); never
imported or run.
"""

from __future__ import annotations

import functools
from typing import Any, assert_type

import asyncop
from asyncop import AsyncOperation, AsyncResult, Runtime, RuntimeFace


async def fetch(page: int, *, verbose: bool = False) -> str:
    await asyncop.sleep(0)
    return str(page)


def compute(a: int, b: str) -> float:
    return float(a)


def nothing() -> None:
    pass


def seed(op: AsyncOperation[Any], context: bytes) -> int:
    return len(context)


def seed_no_context(op: AsyncOperation[Any], context: None) -> str:
    return ""


async def seed_async(op: AsyncOperation[Any], context: int) -> bytes:
    return b""


def from_threads(rt: Runtime) -> None:
    assert_type(rt.run(fetch, 1), str)
    assert_type(rt.run(compute, 1, "x"), float)
    assert_type(rt.run(nothing), None)

    op = rt.spawn(fetch, 1)
    assert_type(op, AsyncOperation[str])
    assert_type(op.result(), str)
    assert_type(op.wait(), AsyncResult[str])
    assert_type(op.wait(1.0).value, str | None)
    assert_type(rt.spawn(compute, 1, "x", name="c", supervise=True), AsyncOperation[float])
    assert_type(rt.spawn(nothing), AsyncOperation[None])

    assert_type(rt.create(seed, b"ctx"), AsyncOperation[int])
    assert_type(rt.create(seed_no_context), AsyncOperation[str])
    assert_type(rt.create(seed_async, 3, name="s"), AsyncOperation[bytes])
    assert_type(rt.submit(rt.create(seed, b"")), AsyncOperation[int])

    # The runtime, as an operation knows it: the Runtime's public calls.
    assert_type(op.runtime, RuntimeFace)
    op.runtime.dump()
    assert_type(op.runtime.spawn(compute, 2, "z"), AsyncOperation[float])
    assert_type(op.runtime.run(fetch, 4), str)
    with op.runtime.scope(timeout=1) as block:
        assert_type(block, AsyncOperation[None])
    # Runtime implements it.
    face: RuntimeFace = rt
    assert_type(face.workers, int)

    with rt.scope(timeout=5) as root:
        assert_type(root, AsyncOperation[None])
        assert_type(root.parent, AsyncOperation[Any] | None)
        assert_type(root.children(), list[AsyncOperation[Any]])
        assert_type(root.spawn(compute, 2, "y"), AsyncOperation[float])
        assert_type(root.spawn(fetch, 3), AsyncOperation[str])

    assert_type(asyncop.async_await(op), AsyncResult[str])
    assert_type(asyncop.async_result(op), AsyncResult[str])


async def in_a_task() -> None:
    me = asyncop.current_operation(require=True)
    assert_type(me, AsyncOperation[Any])
    assert_type(asyncop.current_operation(), AsyncOperation[Any] | None)
    child = me.spawn(fetch, 4)
    assert_type(child, AsyncOperation[str])
    assert_type(await child, str)
    assert_type(await me.spawn(compute, 1, "z"), float)

    async with asyncop.scope() as s:
        assert_type(await s.spawn(fetch, 5), str)

    # An operation of a narrower type is one of a wider type.
    assert_type(await widen(child), object)


def widen(op: AsyncOperation[object]) -> AsyncOperation[object]:
    return op


# The generic class can be subscripted at run time too.
IntOperation = AsyncOperation[int]


def with_keywords(rt: Runtime) -> None:
    # spawn passes positional arguments; functools.partial binds keywords.
    assert_type(rt.spawn(functools.partial(fetch, 1, verbose=True)), AsyncOperation[str])
    assert_type(rt.run(functools.partial(compute, b="x"), 1), float)
