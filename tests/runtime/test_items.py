"""What a worker runs: the hooks before sync callbacks, and a task's pending cancel.

- ``lowlevel.add_callback_hook(hook)`` runs ``hook(runtime)`` on the worker
  thread just before each sync callback, on every runtime, until removed;
  a hook that raises is logged and the callback still runs;
- ``lowlevel.cancel_pending(task)`` tells whether another task's next await
  would raise ``Cancelled``, counting the scopes cancelled inside it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

import asyncop
from asyncop import lowlevel
from asyncop.testing import wait_all_blocked

pytestmark = pytest.mark.timeout(30)


def test_callback_hooks_run_on_the_callbacks_thread_until_removed(
    vruntime: asyncop.Runtime,
) -> None:
    seen: list[tuple[Any, int]] = []

    def hook(runtime: Any) -> None:
        seen.append((runtime, threading.get_ident()))

    def callback() -> int:
        return threading.get_ident()

    lowlevel.add_callback_hook(hook)
    lowlevel.add_callback_hook(hook)  # (once is enough)
    try:
        ident = vruntime.spawn(callback).wait(5).value
    finally:
        lowlevel.remove_callback_hook(hook)
    vruntime.spawn(callback).wait(5)
    assert seen == [(vruntime, ident)]
    lowlevel.remove_callback_hook(hook)  # removing it again is harmless


def test_a_failing_callback_hook_is_logged_and_the_callback_still_runs(
    vruntime: asyncop.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(runtime: Any) -> None:
        raise ValueError("hook broke")

    lowlevel.add_callback_hook(broken)
    try:
        with caplog.at_level(logging.ERROR, logger="asyncop"):
            assert vruntime.spawn(lambda: 42).wait(5).value == 42
    finally:
        lowlevel.remove_callback_hook(broken)
    assert "hook broke" in caplog.text


def test_cancel_pending_of_another_task_counts_the_scopes_inside_it(
    vruntime: asyncop.Runtime,
) -> None:
    scopes: list[asyncop.AsyncOperation[None]] = []

    async def sleeper() -> None:
        async with asyncop.scope() as inner:
            scopes.append(inner)
            await asyncop.sleep_forever()

    async def main() -> None:
        async with asyncop.scope() as s:
            task = s.spawn(sleeper)
            await wait_all_blocked()
            assert not lowlevel.cancel_pending(task)
            scopes[0].cancel()  # a scope inside the task, not the task itself
            assert lowlevel.cancel_pending(task)
        assert not lowlevel.cancel_pending(task)  # it has ended

    vruntime.run(main)
