"""One coroutine run on a host asyncio loop, and how its caller waits for it.

An :class:`AsyncioCall` is made by ``asyncop.asyncio_bridge.run()`` (an
asyncop task awaits it) or ``run_sync()`` (a thread blocks on it). The
caller's thread hands it to the runtime's host (``_asyncio_host.py``); on
the loop thread, ``start_on_loop`` calls ``fn(*args)`` and wraps the
coroutine in an asyncio task, whose done callback stores the outcome and
wakes the caller: an asyncop task through its waker (``Subscription.fire``,
as ``spawn_blocking``'s thread does), a thread through the lock it is
parked on. Nothing blocks an asyncop worker while the coroutine runs.

States
------
::

    QUEUED --start_on_loop--> RUNNING --the asyncio task ends--> DONE
       +--cancel requested before it started, fn(*args) failed,
          or the handover was refused (the host is shut down)--> DONE

``state`` is written by the loop thread (``finish`` may also run on the
host's thread as the loop closes or fails to open, and the caller's thread
marks a refused handover DONE); ``cancel_requested`` by whoever cancels,
once. ``finish`` runs once per call: it is what ends the wait.

A cancel of the caller (its operation, or a scope around the await: a
timeout) sets ``cancel_requested`` and cancels the asyncio task on the
loop; the caller keeps waiting until the task has ended, so that nothing
the coroutine opened is left half closed behind it. Then, if the task
ended cancelled, the caller raises ``Cancelled``; if it returned a value or
raised anyway, the caller gets that (the value-kept rule of every asyncop
wait), and leaves at its next cancellation point.

While a call is in flight it counts as work outside the workers
(``_outside_work``), as a blocking call does: a virtual clock does not jump
over it, and ``wait_all_blocked()`` does not take its caller for blocked.

Context variables: the coroutine runs in a copy of the caller's context
(``asyncio.run_coroutine_threadsafe`` would give it the loop thread's), so
it sees the caller's variables, and what it sets stays in the copy. The one
variable reset there is sniffio's: the code runs on asyncio, whatever
library the caller's context names.
"""

from __future__ import annotations

import _thread
import asyncio
import contextvars
import enum
import inspect
import sys
from collections.abc import Awaitable, Callable
from inspect import CO_ASYNC_GENERATOR
from types import CoroutineType, FunctionType
from typing import Any, final

from ..operations import (
    AsyncOperation,
    CancelHandle,
    cancelled_error,
    describe_fn,
    park,
    release_quietly,
    safe_repr,
    thread_state,
)
from ..platform import acquire_for
from ._asyncio_host import AsyncioHost, asyncio_host
from ._core._task import CANCEL_LATER
from ._core._waker import Subscription, WaitEvent, describe_event, let_go
from ._helpers import default_runtime
from ._introspect import owner_of
from ._kinds import code_of_call
from ._scheduler import Runtime, live_runtimes

__all__ = [
    "AsyncioCall",
    "CallState",
    "call_from_task",
    "call_from_thread",
    "caller_context",
    "check_coroutine_function",
]


class CallState(enum.Enum):
    """Where one call is; see the module docstring."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


def check_coroutine_function(what: str, fn: object) -> None:
    """Refuse, before anything runs, what can never give a coroutine to run.

    A plain function is accepted: it may return a coroutine (a lambda around
    one); what it returns is checked when it has run, on the loop.

    Raises:
        TypeError: ``fn`` is not callable (a coroutine object, an awaitable,
            anything else) or is an async generator function.
    """
    if type(fn) is FunctionType and not fn.__code__.co_flags & CO_ASYNC_GENERATOR:
        return  # the common case, without inspect's lookups
    if callable(fn):
        if inspect.isasyncgenfunction(code_of_call(fn)):
            raise TypeError(
                f"{what} needs an async function, and {describe_fn(fn)!r} is an async "
                "generator function, which makes a generator, not a coroutine; pass an "
                "async def function that iterates it with 'async for'"
            )
        return
    let_go((fn,))  # refused: it must not warn "never awaited" besides
    if isinstance(fn, CoroutineType):
        name = fn.__name__
        raise TypeError(
            f"{what} needs the async function and its arguments, and got coroutine object "
            f"{fn.__qualname__}(), a call already made; write {what.removesuffix('()')}"
            f"({name}, arg) instead of {name}(arg)"
        )
    if isinstance(fn, WaitEvent):
        raise TypeError(
            f"{what} runs asyncio coroutines, and got asyncop awaitable {describe_event(fn)}; "
            "await it in the asyncop task itself"
        )
    raise TypeError(
        f"{what} needs an async function to run on the host asyncio loop, got "
        f"{safe_repr(fn)}, which is not callable; pass an async def function and its arguments"
    )


def caller_context() -> contextvars.Context:
    """A copy of the calling thread's context, for the coroutine to run in."""
    ctx = contextvars.copy_context()
    sniffio = sys.modules.get("sniffio")
    if sniffio is not None:
        var = getattr(sniffio, "current_async_library_cvar", None)
        if var is not None and ctx.get(var) is not None:
            ctx.run(var.set, None)  # on the host loop it is asyncio that runs
    return ctx


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


@final
class AsyncioCall(WaitEvent[Any]):
    """One coroutine run on a host asyncio loop; see the module docstring."""

    __slots__ = (
        "_args",
        "_caller",
        "_ctx",
        "_fn",
        "_handle",
        "_host",
        "_locks",
        "_named",
        "_sub",
        "_what",
        "cancel_requested",
        "cancelled",
        "error",
        "state",
        "task",
        "value",
    )

    # A cancel does not wake the caller: it cancels the asyncio task, and
    # the task's end does (see the module docstring).
    cancellable = False

    def __init__(
        self,
        host: AsyncioHost,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        ctx: contextvars.Context,
        caller: AsyncOperation | None,
        what: str,
    ) -> None:
        self._host = host
        self._fn: Callable[..., Any] | None = fn
        self._args: tuple[Any, ...] | None = args
        self._ctx: contextvars.Context | None = ctx
        # The operation whose cancel cancels the coroutine: the awaiting
        # task's innermost scope, or the sync operation that blocks.
        self._caller = caller
        # What to call the call in messages and dump(): kept past the run.
        self._what = what
        self._named = fn
        self.state = CallState.QUEUED
        self.cancel_requested = False
        self.task: asyncio.Task[Any] | None = None
        self._sub: Subscription | None = None
        self._handle: CancelHandle | None = None
        # A blocked thread's two locks: the one it parks on (which its
        # operation's cancel releases too), and the one only the end releases.
        self._locks: tuple[_thread.LockType, _thread.LockType] | None = None
        # The outcome, kept for a blocked thread (a task gets it from its waker).
        self.value: Any = None
        self.error: BaseException | None = None
        self.cancelled = False

    # -- the caller's side -----------------------------------------------------

    def _arm(self, sub: Subscription) -> None:
        self._sub = sub
        self._account(+1)
        try:
            self._host.launch(self)
        except BaseException:
            self._sub = None
            self.state = CallState.DONE
            self._account(-1)
            raise
        caller = self._caller
        if caller is not None:
            # After the launch: a cancel that runs at once (a token cancelled
            # meanwhile) finds the call handed over, and start_on_loop sees it.
            self._handle = caller.token.on_cancel(self.request_cancel)

    def _disarm(self, sub: Subscription) -> None:
        handle = self._handle
        if handle is not None:
            self._handle = None
            handle.remove()
        if self.state is not CallState.DONE:
            # The wait ended some other way (the task is being torn down):
            # the coroutine is no longer wanted.
            self.request_cancel()

    @property
    def label(self) -> str:
        """The call as the user wrote it, for messages: ``asyncio_bridge.run(fetch)``."""
        return f"{self._what}({describe_fn(self._named)})"

    def _describe(self) -> str:
        return f"{self.label} on the host asyncio loop"

    def block(self) -> Any:
        """Run the call from a thread and block until it has ended.

        A cancellation point when the thread runs an operation (``_caller``):
        its cancel cancels the coroutine, and the call returns once the
        coroutine has ended. A KeyboardInterrupt cancels the coroutine and
        propagates without waiting.

        Returns:
            The coroutine's value.

        Raises:
            Cancelled: the calling operation was cancelled, and the coroutine
                ended cancelled (or never started).
            BaseException: what the coroutine raised.
        """
        self._awaited = True  # not awaited: this thread waits instead
        caller = self._caller
        if caller is not None and caller.token.cancelled:
            raise cancelled_error(caller)
        parked = _thread.allocate_lock()
        ended = _thread.allocate_lock()
        parked.acquire()
        ended.acquire()
        self._locks = (parked, ended)
        self._account(+1)
        try:
            self._host.launch(self)
        except BaseException:
            self._account(-1)
            raise
        try:
            park(parked, None, caller)
            if self.state is not CallState.DONE:  # (woken by the cancel)
                self.request_cancel()
                acquire_for(ended, None)
        except BaseException:
            self.request_cancel()  # a Ctrl-C: the coroutine is no longer wanted
            raise
        return self._outcome(caller)

    def _outcome(self, caller: AsyncOperation | None) -> Any:
        error, self.error = self.error, None
        if self.cancelled:
            assert caller is not None, "only a cancel of the caller cancels its call"
            raise cancelled_error(caller)
        if error is not None:
            try:
                raise error
            finally:
                del error  # the traceback would hold this frame, and it the error
        value, self.value = self.value, None
        return value

    def request_cancel(self) -> None:
        """Cancel the coroutine, from any thread; the caller waits for its end.

        Runs as an ``on_cancel`` callback, in the cancelling thread.
        """
        if self.state is CallState.DONE or self.cancel_requested:
            return
        self.cancel_requested = True
        loop = self._host.loop_for_cancel()
        if loop is None:
            return  # not started yet: start_on_loop will see the request
        try:
            loop.call_soon_threadsafe(self._cancel_on_loop)
        except RuntimeError:
            pass  # the loop closed meanwhile: closing it ended the call

    # -- the loop's side ---------------------------------------------------

    def start_on_loop(self) -> None:
        """Loop thread: call ``fn(*args)`` and run its coroutine as an asyncio task."""
        if self.cancel_requested:
            self.finish(None, None, cancelled=True)
            return
        fn, args, ctx = self._fn, self._args, self._ctx
        assert fn is not None and args is not None and ctx is not None
        self._fn = self._args = None
        self.state = CallState.RUNNING
        try:
            awaitable = ctx.run(fn, *args)
            if isinstance(awaitable, CoroutineType) or asyncio.iscoroutine(awaitable):
                coro = awaitable
            elif inspect.isawaitable(awaitable) and not isinstance(awaitable, WaitEvent):
                coro = _await(awaitable)
            else:
                raise _not_awaitable(self.label, fn, awaitable)
            task = self._host.running_loop().create_task(coro, context=ctx)
        except BaseException as exc:
            self.finish(None, exc, cancelled=False)
            return
        finally:
            self._ctx = None
        self.task = task
        self._host.track(self)
        task.add_done_callback(self._task_done)

    def _cancel_on_loop(self) -> None:
        task = self.task
        if task is not None and not task.done():
            task.cancel(f"the asyncop caller of {self.label} was cancelled")

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._host.untrack(self)
        self.task = None
        if task.cancelled():
            if self.cancel_requested:
                self.finish(None, None, cancelled=True)
                return
            self.finish(None, self._cancelled_error(task), cancelled=False)
            return
        exc = task.exception()
        if exc is None:
            self.finish(task.result(), None, cancelled=False)
        else:
            self.finish(None, exc, cancelled=False)

    def _cancelled_error(self, task: asyncio.Task[Any]) -> BaseException:
        """What a caller gets for an asyncio task that something else than it cancelled."""
        if self._host.stopping:
            return RuntimeError(
                f"{self.label} was cancelled because the host asyncio loop of Runtime "
                f"{self._host.runtime.name!r} shut down"
            )
        try:
            task.result()
        except BaseException as exc:  # the coroutine's own CancelledError
            return exc
        return asyncio.CancelledError()  # (result() of a cancelled task always raises)

    def finish(self, value: Any, error: BaseException | None, *, cancelled: bool) -> None:
        """Store the outcome and wake the caller; once per call."""
        if self.state is CallState.DONE:
            return
        self._fn = self._args = self._ctx = None
        sub = self._sub
        if sub is not None:
            self._sub = None
            self.state = CallState.DONE
            runtime = self._host.runtime
            # (One hold of the lock for both: fire() takes it again, re-entrant.)
            with runtime._lock:
                runtime._outside_work -= 1
                sub.fire(value, CANCEL_LATER if cancelled else error)
            return
        self._account(-1)
        self.value, self.error, self.cancelled = value, error, cancelled
        self.state = CallState.DONE
        locks = self._locks
        if locks is not None:
            parked, ended = locks
            release_quietly(parked)  # (the cancel may have released it already)
            ended.release()

    def _account(self, change: int) -> None:
        """Count the call as work outside the workers, while it is in flight."""
        runtime = self._host.runtime
        with runtime._lock:
            runtime._outside_work += change


def _not_awaitable(label: str, fn: object, value: object) -> TypeError:
    if isinstance(value, WaitEvent):
        value._awaited = True  # refused here: no second warning when collected
        return TypeError(
            f"{label} returned asyncop awaitable {describe_event(value)}, which the host "
            "asyncio loop cannot run; await it in the asyncop task itself"
        )
    return TypeError(
        f"{label} returned {safe_repr(value)}, not a coroutine or another awaitable; "
        f"asyncio_bridge runs async functions on the host loop: make {describe_fn(fn)} an "
        "async def function, or run a blocking function with asyncop.spawn_blocking()"
    )


# -- the two ways in -------------------------------------------------------------


def call_from_task(fn: Callable[..., Any], args: tuple[Any, ...]) -> AsyncioCall:
    """The call ``asyncio_bridge.run(fn, *args)`` awaits, in the running asyncop task.

    Raises:
        RuntimeError: the caller is not an asyncop task, or its runtime is
            shut down.
    """
    task = thread_state().task
    if task is None:
        let_go((fn,))
        if asyncio._get_running_loop() is not None:
            raise RuntimeError(
                "asyncio_bridge.run() was awaited on an asyncio loop, not in an asyncop "
                "task; await the coroutine itself there ('await fn(*args)')"
            )
        raise RuntimeError(
            "asyncio_bridge.run() was awaited outside an asyncop task; await it in a task "
            "of an asyncop Runtime, or call asyncio_bridge.run_sync(fn, *args) from a thread"
        )
    op: AsyncOperation = task.current  # (a cancel of the innermost scope cancels the call)
    host = asyncio_host(owner_of(op))
    return AsyncioCall(host, fn, args, caller_context(), op, "asyncio_bridge.run")


def call_from_thread(fn: Callable[..., Any], args: tuple[Any, ...], runtime: object) -> Any:
    """``asyncio_bridge.run_sync(fn, *args, runtime=runtime)``: run it and block.

    Raises:
        TypeError: ``runtime`` is not a Runtime.
        RuntimeError: the caller is an asyncop task or runs an asyncio loop
            (the host loop itself, which would wait for itself forever).
    """
    state = thread_state()
    if state.task is not None:
        let_go((fn,))
        raise RuntimeError(
            f"asyncio_bridge.run_sync() would block the worker that steps task "
            f"{state.task.task.name!r}; write 'await asyncop.asyncio_bridge.run(fn, ...)' "
            "in the task instead"
        )
    op = state.op  # (a sync operation or a sync scope's block: its cancel cancels the call)
    if runtime is None:
        runtime = owner_of(op) if op is not None else _runtime_of_thread()
    elif not isinstance(runtime, Runtime):
        let_go((fn,))
        raise TypeError(
            f"asyncio_bridge.run_sync(runtime=...) needs a Runtime, got "
            f"{type(runtime).__name__}; pass the asyncop.Runtime whose host loop should "
            "run the coroutine, or None"
        )
    host = asyncio_host(runtime)
    if host.runs_on_current_thread():
        let_go((fn,))
        raise RuntimeError(
            f"asyncio_bridge.run_sync() was called on the host asyncio loop of Runtime "
            f"{runtime.name!r}, which would wait for itself forever; there, await the "
            "coroutine itself ('await fn(*args)')"
        )
    if asyncio._get_running_loop() is not None:
        let_go((fn,))
        raise RuntimeError(
            "asyncio_bridge.run_sync() would block the asyncio loop that runs in this "
            "thread; await the coroutine itself there ('await fn(*args)')"
        )
    call = AsyncioCall(host, fn, args, caller_context(), op, "asyncio_bridge.run_sync")
    return call.block()


def _runtime_of_thread() -> Runtime:
    """The runtime whose spawn_blocking thread this is; else the default runtime."""
    for runtime in live_runtimes():
        if runtime._blocking.runs_on_current_thread():
            return runtime
    return default_runtime()
