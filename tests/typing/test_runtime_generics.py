"""The generic classes are subscriptable at run time, and the overloads introspectable."""

from __future__ import annotations

import typing
from typing import Any

import pytest

import asyncop
import asyncop.net
from asyncop.lowlevel import WaitEvent

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "cls",
    [asyncop.AsyncOperation, asyncop.AsyncResult, asyncop.Channel, WaitEvent, asyncop.TaskStatus],
)
def test_generic_classes_subscript_at_run_time(cls: Any) -> None:
    alias = cls[int]
    assert typing.get_origin(alias) is cls
    assert typing.get_args(alias) == (int,)


def test_a_subscripted_operation_type_checks_instances() -> None:
    async def answer() -> int:
        return 42

    with asyncop.Runtime(workers=1) as runtime:
        op = runtime.spawn(answer)
        assert op.wait(10).value == 42
        assert isinstance(op, asyncop.AsyncOperation)
        assert repr(asyncop.AsyncOperation[int]) == "asyncop.AsyncOperation[int]"


def test_published_functions_keep_their_overloads() -> None:
    # publish() renames the module of asyncop.race & co.; typing files the
    # overloads by module, so they must move with the function.
    for function in (asyncop.race, asyncop.select, asyncop.net.open_tcp_stream):
        assert function.__module__ in ("asyncop", "asyncop.net")
        assert len(typing.get_overloads(function)) >= 3, function
    assert len(typing.get_overloads(asyncop.Runtime.spawn)) == 2
    assert len(typing.get_overloads(asyncop.AsyncOperation[Any].spawn)) == 2
