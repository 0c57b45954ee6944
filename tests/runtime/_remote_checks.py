"""Checks that the ProcessExecutor and DaskExecutor tests share."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop import OperationState
from tests.runtime import _remote_jobs as jobs

CANNOT_CROSS_IDS = [case[0].__name__ for case in jobs.CANNOT_CROSS]  # type: ignore[attr-defined]


def assert_fails_saying(
    runtime: asyncop.Runtime,
    executor: Any,
    fn: Callable[..., object],
    args: tuple[object, ...],
    error_type: type[BaseException],
    message: str,
    cause_type: type[BaseException] | None,
) -> BaseException:
    """Run ``fn(*args)`` on ``executor`` in a scope: it must fail the scope as a child does.

    Returns the error, once its type, message and cause are checked.
    """
    with pytest.raises(ExceptionGroup) as info, runtime.scope() as root:
        sibling = root.spawn(jobs.poll_token, 30, executor=executor)
        op = root.spawn(fn, *args, executor=executor)
    assert op.state is OperationState.FAILED
    (error,) = info.value.exceptions
    assert isinstance(error, error_type)
    assert re.fullmatch(message + ".*", str(error)), str(error)
    if cause_type is not None:
        assert isinstance(error.__cause__, cause_type)
    assert sibling.state is OperationState.CANCELLED
    return error


def cancel_once_started(
    runtime: asyncop.Runtime, executor: Any, fn: Callable[[str], object], path: str
) -> asyncop.AsyncResult[Any]:
    """Run ``fn(path)`` on ``executor``, cancel it once it wrote ``path.started``; its result."""
    op = runtime.spawn(fn, path, executor=executor)
    end = time.monotonic() + 20
    while not Path(path + ".started").exists():
        assert time.monotonic() < end, f"{fn!r} did not start in time"
        time.sleep(0.01)
    op.cancel()
    return op.wait(20)
