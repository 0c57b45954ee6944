"""A forgotten ``await``: an error under ``--enable-error-code unused-awaitable``.

mypy reports an unused coroutine by default but an unused awaitable only
with that error code on; asyncop's awaitables are not coroutines, so the
code must be enabled (``docs/typing.md``). Never imported or run.
"""

from __future__ import annotations

import asyncop
from asyncop import AsyncOperation


async def forgetful(op: AsyncOperation[int], ch: asyncop.Channel[int], lock: asyncop.Lock) -> None:
    asyncop.sleep(1)  # expect: unused-awaitable
    asyncop.checkpoint()  # expect: unused-awaitable
    ch.send_async(1)  # expect: unused-awaitable
    ch.recv_async()  # expect: unused-awaitable
    lock.lock_async()  # expect: unused-awaitable
    asyncop.timeout(1, op)  # expect: unused-awaitable
    asyncop.spawn_blocking(len, "abc")  # expect: unused-awaitable
    op  # expect: unused-awaitable
    await asyncop.sleep(1)
    _ = asyncop.sleep(1)  # assigned: a deliberate choice, not an error
