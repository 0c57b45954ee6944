"""The bridge to anyio: await asyncop work from asyncio or trio code.

::

    import anyio, asyncop.anyio

    async def main():
        value = await asyncop.anyio.spawn(crunch, data)   # runs on asyncop
        op = runtime.spawn(fetch_all)
        with anyio.move_on_after(5):
            await asyncop.anyio.wait(op)                  # the host loop keeps running

Neither call blocks the host's event loop: the operation's completion is
handed to the host loop thread-safely (``call_soon_threadsafe`` on asyncio
and uvloop, the trio token on trio). When the host's cancel scope is
cancelled while waiting, the operation's subtree is cancelled and the host
sees its own cancellation, not an asyncop error. The host does not wait for
the cancelled operation to finish unwinding: asyncop runs it to its end on
its own threads.

This module needs the ``asyncop[anyio]`` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, overload

try:
    import anyio
    import anyio.lowlevel
    import sniffio
except ImportError as exc:  # pragma: no cover - tested in a venv without the extra
    raise ImportError(
        f"asyncop.anyio needs anyio and sniffio, which are not installed ({exc.name} is "
        "missing); run pip install 'asyncop[anyio]' to add them",
        name=exc.name,
    ) from exc

from .operations import AsyncOperation, R, Ts, V, keywords_refused
from .runtime import Runtime, default_runtime, let_go

__all__ = ["spawn", "wait"]


def _threadsafe(fn: Callable[[], object]) -> Callable[[], None]:
    """Wrap ``fn`` so that any thread can schedule it on the host loop."""
    library = sniffio.current_async_library()
    if library == "trio":
        import trio

        token = trio.lowlevel.current_trio_token()

        def notify() -> None:
            try:
                token.run_sync_soon(fn)
            except trio.RunFinishedError:
                pass  # the host run is over: nobody is waiting any more

        return notify
    if library == "asyncio":
        import asyncio

        loop = asyncio.get_running_loop()

        def notify_asyncio() -> None:
            try:
                loop.call_soon_threadsafe(fn)
            except RuntimeError:
                pass  # the host loop is closed: nobody is waiting any more

        return notify_asyncio
    raise RuntimeError(
        f"asyncop.anyio does not know the {library!r} event loop; "
        "run it under anyio on asyncio or trio"
    )


async def wait(op: AsyncOperation[V]) -> V:
    """Wait for an asyncop operation from anyio code, without blocking the loop.

    A checkpoint of the host: cancelling the host's scope while waiting
    cancels ``op``'s subtree and raises the host's own cancellation.

    Returns:
        The operation's value.

    Raises:
        BaseException: the operation's failure.
        asyncop.CancellationError: the operation was cancelled by someone else.
        TypeError: ``op`` is not an operation.
    """
    if not isinstance(op, AsyncOperation):
        let_go((op,))  # refused: it must not warn "never awaited" besides
        raise TypeError(
            f"asyncop.anyio.wait() needs an AsyncOperation, got {type(op).__name__}; "
            "pass what runtime.spawn() returned"
        )
    if op.done:
        await anyio.lowlevel.checkpoint()
        return op.result()
    event = anyio.Event()
    notify = _threadsafe(event.set)
    with op.runtime._lock:
        registered = not op.done
        if registered:
            op._add_waiter_locked(notify)
    if registered:
        try:
            await event.wait()
        except BaseException:
            # The host was cancelled (or interrupted): the work it waited for
            # is no longer wanted.
            op._remove_waiter(notify)
            op.cancel("the anyio task waiting for it was cancelled")
            raise
    else:
        await anyio.lowlevel.checkpoint()
    return op.result()


@overload
async def spawn(
    fn: Callable[[*Ts], Coroutine[Any, Any, R]], *args: *Ts, runtime: Runtime | None = None
) -> R: ...


@overload
async def spawn(fn: Callable[[*Ts], R], *args: *Ts, runtime: Runtime | None = None) -> R: ...


async def spawn(
    fn: Callable[[*Ts], Any], *args: *Ts, runtime: Runtime | None = None, **keywords: Any
) -> Any:
    """Run ``fn(*args)`` on an asyncop runtime and wait for its value from anyio code.

    ``fn`` may be a plain function (run on a worker thread) or an ``async
    def`` function (run as an asyncop coroutine task, where asyncop's own
    awaitables apply). Cancelling the host's scope cancels the work.

    Args:
        fn: the work.
        *args: its arguments.
        runtime: where to run it; the default runtime when None.

    Raises:
        TypeError: a keyword argument is meant for ``fn``: bind it with
            ``functools.partial(fn, key=value)``.
    """
    if keywords:
        let_go((fn,))  # refused: it must not warn "never awaited" besides
        raise keywords_refused("spawn", fn, keywords, ("runtime",))
    target = runtime if runtime is not None else default_runtime()
    op = target.spawn(fn, *args)
    return await wait(op)
