"""The anyio backend named ``"asyncop"``: anyio's calls, on asyncop's own machinery.

``anyio.run(main, backend="asyncop")`` runs ``main`` as the root task of a
fresh ``Runtime`` (or of ``backend_options={"runtime": rt}``), whose tasks
the calling thread steps while it waits, as on anyio's other backends
(``runtime/_home.py``), and inside
every asyncop task ``sniffio.current_async_library()`` is ``"asyncop"``, so
that anyio finds this backend there: task groups and cancel scopes are
asyncop scopes (``_tasks.py``), anyio's tasks are asyncop operations, and
the rest maps onto asyncop's primitives, threads, sockets and processes.
Nothing here runs asyncio or trio.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import copy_context
from typing import Any

import sniffio
from anyio import TaskInfo
from anyio.abc import AsyncBackend
from anyio.abc._tasks import get_callable_name

from .. import lowlevel, testing
from ..operations import Cancelled
from ..runtime import checkpoint, current_runtime, run_here, sleep
from ._options import runtime_for
from ._process import ProcessMethods
from ._sockets import SocketMethods
from ._sync import SyncMethods
from ._tasks import CancelScope, TaskGroup, running_task_infos, task_info
from ._testing import TestRunner
from ._threads import ThreadMethods

__all__ = ["AsyncopBackend"]


def _no_async_library() -> None:
    """Run in the context the root task copies: no async library by context variable.

    anyio.run() sets sniffio's context variable before it calls the backend,
    and every operation of the tree would copy it, sync callbacks included,
    which run no async library. asyncop names itself per thread instead,
    while a worker steps tasks.
    """
    sniffio.current_async_library_cvar.set(None)


class AsyncopBackend(SyncMethods, ThreadMethods, SocketMethods, ProcessMethods, AsyncBackend):
    """anyio's backend interface, implemented on asyncop; see the module docstring.

    The calls about tasks, cancel scopes and time are here; the others are
    mixed in, each group from its own module: synchronization primitives
    (``_sync.py``), threads (``_threads.py``), sockets (``_sockets.py``),
    processes and signals (``_process.py``).
    """

    @classmethod
    def run(
        cls,
        func: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        options: dict[str, Any],
    ) -> Any:
        runtime, made = runtime_for(dict(options))
        fn = functools.partial(func, **kwargs) if kwargs else func
        context = copy_context()
        context.run(_no_async_library)
        # A blocking portal's runtime waits, by design, for calls from
        # threads the deadlock watch cannot see between two calls.
        portal = _runs_a_portal(func)
        if portal:
            runtime._deadlocks.hold(True)
        try:
            # The calling thread steps the tasks while it waits (_home.py).
            return context.run(run_here, runtime, _root_task(fn, get_callable_name(func)), *args)
        finally:
            if portal:
                runtime._deadlocks.hold(False)
            if made:
                runtime.shutdown()

    @classmethod
    def current_token(cls) -> object:
        return current_runtime()

    @classmethod
    def current_time(cls) -> float:
        return current_runtime().now()

    @classmethod
    def cancelled_exception_class(cls) -> type[BaseException]:
        return Cancelled

    @classmethod
    async def checkpoint(cls) -> None:
        if lowlevel.cancel_pending():
            # A schedule point first, then the cancel, as trio's checkpoint:
            # the tasks ready meanwhile run before this one unwinds.
            await cls.cancel_shielded_checkpoint()
        await checkpoint()

    @classmethod
    async def checkpoint_if_cancelled(cls) -> None:
        if lowlevel.cancel_pending():
            await cls.checkpoint()

    @classmethod
    async def cancel_shielded_checkpoint(cls) -> None:
        with CancelScope(shield=True):
            await sleep(0)

    @classmethod
    async def sleep(cls, delay: float) -> None:
        await sleep(delay)

    @classmethod
    def create_cancel_scope(cls, *, deadline: float = math.inf, shield: bool = False) -> Any:
        return CancelScope(deadline=deadline, shield=shield)

    @classmethod
    def current_effective_deadline(cls) -> float:
        return lowlevel.effective_deadline()

    @classmethod
    def create_task_group(cls) -> Any:
        return TaskGroup()

    @classmethod
    def create_test_runner(cls, options: dict[str, Any]) -> Any:
        return TestRunner(**options)

    @classmethod
    def get_current_task(cls) -> TaskInfo:
        op = lowlevel.current_task()
        if op is None:
            raise RuntimeError(
                "anyio.get_current_task() was called outside an asyncop task; call it from "
                "an async function that anyio.run(..., backend='asyncop') or asyncop runs"
            )
        return task_info(op)

    @classmethod
    def get_running_tasks(cls) -> list[TaskInfo]:
        return running_task_infos()

    @classmethod
    async def wait_all_tasks_blocked(cls) -> None:
        # A task waiting for a thread counts as blocked, as in trio.
        await testing.wait_all_blocked(threads=False)


def _runs_a_portal(func: object) -> bool:
    """Whether ``anyio.run`` runs the task of ``anyio.from_thread.start_blocking_portal``.

    Its thread serves the portal's calls until ``stop()``. Should anyio rename
    that function, an idle portal would be reported as stuck, which a test of
    ``tests/test_anyio_threads.py`` catches.
    """
    return getattr(func, "__module__", None) == "anyio.from_thread" and getattr(
        func, "__qualname__", ""
    ).startswith("start_blocking_portal.")


def _root_task(fn: Callable[..., Awaitable[Any]], name: str) -> Callable[..., Any]:
    """``fn`` as the root task: an ``async def`` named as anyio names tasks (``module.qualname``).

    (anyio.run takes any function that returns an awaitable.)
    """

    async def main(*args: Any) -> Any:
        return await fn(*args)

    main.__qualname__ = name
    return main


_Coro = Coroutine[Any, Any, Any]
