"""Run asyncio-only libraries from asyncop: the host asyncio loop.

Libraries such as asyncpg, aiohttp, redis.asyncio, and httpx (whose
transport, httpcore, runs only on asyncio and trio) need a running asyncio
event loop. Each asyncop ``Runtime`` has one for them, its *host loop*: a
daemon thread running an asyncio loop, started by the first call and closed
by ``Runtime.shutdown()`` once the operation tree has ended::

    import httpx
    import asyncop
    import asyncop.asyncio_bridge as bridge

    async def fetch(client, url):                 # asyncio code: runs on the host loop
        response = await client.get(url)
        return response.text

    async def main():                             # an asyncop task
        client = await bridge.run(make_client)    # made on the host loop, kept there
        async with asyncop.move_on_after(5):
            page = await bridge.run(fetch, client, "https://example.org")
        await bridge.run(client.aclose)

- ``await run(fn, *args)`` in an asyncop task runs the coroutine
  ``fn(*args)`` on the host loop and returns its value, or raises its
  exception (the original object, with its traceback). The task waits
  without holding a worker: the coroutine's end wakes it, as a
  ``spawn_blocking`` thread does.
- A cancel of the waiting task (``op.cancel()``, a scope's timeout)
  cancels the asyncio task and waits until it has ended, so that whatever
  it opened is closed (a streaming response, a socket); the await then
  raises ``asyncop.Cancelled``. A value the coroutine returned anyway is
  kept: the await returns it, and the task leaves at its next await.
- Every call of one runtime runs on the same loop: an ``httpx.AsyncClient``,
  an aiohttp session or a connection pool made by one call is usable by the
  later ones (and only there: such objects belong to their loop).
- ``run_sync(fn, *args, runtime=None)`` does the same from a plain thread,
  or from a sync operation, where it is a cancellation point like asyncop's
  other blocking calls.
- ``Runtime(asyncio_loop_factory=uvloop.new_event_loop)`` picks the loop.

Context variables: the coroutine runs in a copy of the caller's context, so
it sees the caller's variables (``asyncio.run_coroutine_threadsafe`` would
give it the loop thread's); what it sets stays in that copy. sniffio's
variable is reset in the copy: there, the running library is asyncio.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Never

from ._exports import publish as _publish
from .operations import R, Ts, keywords_refused
from .runtime import Runtime, call_from_task, call_from_thread, check_coroutine_function, let_go

__all__ = ["run", "run_sync"]


async def run(fn: Callable[[*Ts], Awaitable[R]], *args: *Ts, **keywords: Never) -> R:
    """Run the coroutine ``fn(*args)`` on the runtime's host asyncio loop and return its value.

    Await it in an asyncop task: the host loop is that of the task's
    runtime, started on first use. ``fn`` is called on the loop's thread,
    in a copy of the task's context variables. A cancellation point: a
    cancel of the task (or of a scope around the await) cancels the asyncio
    task, waits until it has ended, then raises ``Cancelled`` (or returns
    the value the coroutine returned anyway).

    Keyword arguments for ``fn`` go through ``functools.partial(fn,
    key=value)``.

    Returns:
        The coroutine's value.

    Raises:
        BaseException: what the coroutine raised, with its traceback.
        Cancelled: the task was cancelled while the coroutine ran.
        TypeError: ``fn`` is not a function (a coroutine object already made,
            say), is an async generator function, returned something that
            cannot be awaited, or a keyword argument is meant for ``fn``.
        RuntimeError: awaited outside an asyncop task, or the runtime is
            shut down.
    """
    if keywords:
        let_go((fn,))
        raise keywords_refused("asyncio_bridge.run", fn, keywords, ())
    check_coroutine_function("asyncio_bridge.run()", fn)
    value: R = await call_from_task(fn, args)
    return value


def run_sync(
    fn: Callable[[*Ts], Awaitable[R]],
    *args: *Ts,
    runtime: Runtime | None = None,
    **keywords: Never,
) -> R:
    """Run the coroutine ``fn(*args)`` on a runtime's host asyncio loop, and block until done.

    For plain threads and sync code (a sync operation, a sync scope's
    block). Called inside an operation, it is a cancellation point: the
    operation's cancel cancels the asyncio task, waits until it has ended,
    then raises ``Cancelled`` (or returns the value the coroutine returned
    anyway). From a plain thread it only blocks; a KeyboardInterrupt there
    cancels the asyncio task and propagates at once.

    Args:
        fn: an async function (or a callable that returns an awaitable).
        *args: its arguments.
        runtime: whose host loop runs it; by default the runtime of the
            calling operation (or of the ``spawn_blocking`` thread), else
            ``asyncop.default_runtime()``.

    Returns:
        The coroutine's value.

    Raises:
        BaseException: what the coroutine raised, with its traceback.
        Cancelled: the calling operation was cancelled.
        TypeError: ``fn`` is not a function, is an async generator function
            or returned something that cannot be awaited; ``runtime`` is not
            a Runtime; or a keyword argument is meant for ``fn``.
        RuntimeError: called in an asyncop task (write ``await run(fn)``), on
            the host loop itself or on any other running asyncio loop (each
            would wait for the coroutine while keeping its loop from running),
            or the runtime is shut down.
    """
    if keywords:
        let_go((fn,))
        raise keywords_refused("asyncio_bridge.run_sync", fn, keywords, ("runtime",))
    check_coroutine_function("asyncio_bridge.run_sync()", fn)
    value: R = call_from_thread(fn, args, runtime)
    return value


_publish("asyncop.asyncio_bridge", globals(), __all__)
