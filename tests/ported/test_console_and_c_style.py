"""The live console's client and the C-style helpers, tried as a new user
tries them from docs/howto/console.md and docs/c-style.md alone.

Each test is one small program a user coming from asyncio, trio or a C API
would write, and checks that what happens is what the docs say, or at least
an error that says what went wrong.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop import OperationState, async_await, async_cancel, async_result, async_submit

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]


def asyncop_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asyncop", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        env={k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")},
    )


# -- the console's client ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["regular file", "directory"])
def test_a_path_that_is_not_a_socket_is_named_as_such_not_as_a_stale_console(
    tmp_path: Path, kind: str
) -> None:
    # A user who passes the program's log file or its folder by mistake must
    # not be told that the program has ended.
    path = tmp_path / "shop.log"
    if kind == "directory":
        path.mkdir()
    else:
        path.write_text("not a socket\n")
    result = asyncop_cli("dump", str(path))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        f"python -m asyncop dump: {path} is not a console socket; pass the path given to "
        "Runtime(console=...)\n"
    )


def test_the_commands_without_a_path_print_their_usage() -> None:
    for args in ([], ["top"]):
        result = asyncop_cli(*args)
        assert result.returncode == 2
        assert result.stderr.startswith("usage: python -m asyncop")


def test_the_dump_command_matches_the_programs_own_dump(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sock")
    with asyncop.Runtime(1, console=path, name="trial") as rt, rt.scope(name="service") as s:
        s.spawn(stuck, name="stuck")
        deadline = time.monotonic() + 10
        while "waiting on sleep_forever()" not in rt.dump():
            assert time.monotonic() < deadline, rt.dump()
            time.sleep(0.01)
        result = asyncop_cli("dump", path)
        own = rt.dump()
        s.cancel()
    assert result.returncode == 0, result.stderr
    assert "service [RUNNING]" in result.stdout and "stuck [RUNNING]" in result.stdout
    assert result.stdout.splitlines()[0] == own.splitlines()[0] == "trial:"


async def stuck() -> None:
    await asyncop.sleep_forever()


# -- the C-style helpers --------------------------------------------------------------


def test_awaiting_an_operation_never_submitted_says_so_instead_of_waiting_forever(
    runtime: asyncop.Runtime,
) -> None:
    # The C program of docs/c-style.md without its ASYNC_SUBMIT lines: the
    # await could never end, so it must say what is missing at once.
    ran = threading.Event()

    def task(op: asyncop.AsyncOperation[Any], context: object) -> None:
        ran.set()

    op = runtime.create(task, name="forgotten")
    with pytest.raises(RuntimeError) as info:
        async_await(op)
    assert str(info.value) == (
        "async_await() on operation 'forgotten', which was never submitted, would wait "
        "forever; call async_submit(op) first"
    )
    assert op.state is OperationState.CREATED and not ran.is_set()
    async_submit(op)
    assert async_await(op, 5).state is OperationState.COMPLETED
    assert ran.is_set()


def test_awaiting_a_created_operation_that_was_cancelled_returns_its_result(
    runtime: asyncop.Runtime,
) -> None:
    op = runtime.create(lambda op, context: None, name="dropped")
    async_cancel(op)
    assert async_await(op, 0).state is OperationState.CANCELLED
    assert async_result(op).state is OperationState.CANCELLED


def test_a_callback_that_fails_is_a_failed_result_not_a_raise(runtime: asyncop.Runtime) -> None:
    def task(op: asyncop.AsyncOperation[Any], context: object) -> None:
        raise ValueError(context)

    op = async_submit(runtime.create(task, "bad input"))
    result = async_await(op, 5)
    assert result.state is OperationState.FAILED
    assert isinstance(result.error, ValueError) and result.error.args == ("bad input",)


def test_an_async_callback_gets_the_operation_and_the_context(runtime: asyncop.Runtime) -> None:
    async def task(op: asyncop.AsyncOperation[Any], context: int) -> int:
        await asyncop.sleep(0)
        assert op is asyncop.current_operation()
        return context * 2

    op = async_submit(runtime.create(task, 21))
    assert async_await(op, 5).value == 42


def test_a_child_submitted_before_its_parent_runs_and_the_parent_cancels_the_rest(
    runtime: asyncop.Runtime,
) -> None:
    def fetch(op: asyncop.AsyncOperation[Any], resource: str) -> str:
        if op.token.wait(30):
            op.token.check()
        return resource

    page = runtime.create(lambda op, context: context, 7, name="page")
    early = async_submit(runtime.create(fetch, "header", parent=page))
    late = runtime.create(fetch, "body", parent=page)
    async_cancel(page)
    assert async_await(early, 5).state is OperationState.CANCELLED
    assert async_state_after(late) is OperationState.CANCELLED
    assert async_await(page, 5).state is OperationState.CANCELLED


def async_state_after(op: asyncop.AsyncOperation[Any]) -> OperationState:
    return asyncop.async_state(op)


@pytest.mark.parametrize(("timeout", "error"), [("1", TypeError), (math.nan, ValueError)])
def test_a_bad_timeout_is_named_as_async_awaits(
    runtime: asyncop.Runtime, timeout: object, error: type[Exception]
) -> None:
    op = async_submit(runtime.create(lambda op, context: None))
    with pytest.raises(error) as info:
        async_await(op, timeout)  # type: ignore[arg-type]
    assert str(info.value).startswith("async_await(timeout=...) ")
