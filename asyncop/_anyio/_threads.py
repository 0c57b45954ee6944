"""Threads: anyio's to_thread and from_thread, and its blocking portals, on asyncop's threads.

``to_thread.run_sync(fn)`` is ``await spawn_blocking(fn)``: it borrows a
token from the anyio ``CapacityLimiter`` given (the asyncop limiter under
it), or from the runtime's default one, which ``spawn_blocking`` shares (40
tokens), so waiting for a token is a cancellation point and the call then
runs to its end unless ``abandon_on_cancel``. The thread is *claimed*, as
anyio's other backends claim theirs: anyio's thread-local token names the
runtime, and a link records the task's innermost scope, whose cancel
``from_thread.check_cancelled()`` reports.

``from_thread.run(afn)`` and ``run_sync(fn)`` start a task of the runtime
and block the thread until it ends. Where the task goes in the tree:

- from a thread that ``to_thread`` started (without ``abandon_on_cancel``),
  ``from_thread.run`` runs ``afn`` as a child of the waiting task's
  innermost scope, as trio runs it in that task: a cancel of the task
  reaches it, and ``dump()`` shows it under the task. It is spawned
  shielded and drops the shield as it starts (``lowlevel.spawn_shielded``),
  so that, as on trio, it starts even under a scope cancelled meanwhile
  and the cancel lands at its first await;
- from an asyncop worker thread running a sync callback, as a child of
  that callback's operation, for the same reasons (a hook of
  ``asyncop.lowlevel.add_callback_hook`` claims each worker thread for its
  runtime, so that anyio finds its way back without a token);
- with an explicit token (the ``Runtime``, from ``current_token()``), or
  from a thread started with ``abandon_on_cancel=True`` (its task may be
  gone), as a new root operation of the runtime: trio's system context,
  which only the runtime's shutdown cancels.

``from_thread.run_sync(fn)`` always runs ``fn`` in a new root task: it has
no await, so no cancel could stop it once it started, and one born under a
cancelled scope would not run at all, where trio runs it. Each call runs in
a copy of the calling thread's context variables, and
``sniffio.current_async_library()`` is ``"asyncop"`` there. A call from an
asyncop task is refused (it would block a worker), and a runtime that was
shut down raises ``RunFinishedError``. ``run_sync_soon`` spawns a root task
and returns at once; ``BlockingPortal`` is anyio's own, on these calls.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar, copy_context
from inspect import iscoroutine
from typing import Any

import sniffio
from anyio import RunFinishedError
from anyio._core._eventloop import claim_worker_thread, threadlocals
from anyio.abc._tasks import get_callable_name
from anyio.lowlevel import EventLoopToken

from .. import lowlevel
from ..operations import AsyncOperation, Cancelled, current_operation
from ..runtime import Runtime, current_runtime, spawn_blocking
from ._sync import asyncop_limiter, default_thread_limiter

__all__ = ["ThreadMethods"]


class _Link:
    """What a thread that ``to_thread`` started knows of the task waiting for it."""

    __slots__ = ("abandon", "runtime", "scope")

    def __init__(self, runtime: Runtime, scope: AsyncOperation[Any], abandon: bool) -> None:
        self.runtime = runtime
        self.scope = scope  # the task's innermost scope when it started the thread
        self.abandon = abandon


# The link of the to_thread call the thread runs, while it runs it.
_links = threading.local()


class _Stopped:
    """A StopIteration the thread's function raised, carried to the task."""

    __slots__ = ("exc",)

    def __init__(self, exc: StopIteration) -> None:
        self.exc = exc


class _Outcome:
    """What a call from a thread ended with, handed back to the thread."""

    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None

    def unwrap(self, op: AsyncOperation[Any]) -> Any:
        """The call's value, or raise its error; ``op`` ran the call."""
        if self.error is None:
            if self.done:
                return self.value
            # Cancelled before its first step (a root, at the runtime's
            # shutdown): it never ran.
            op.token.check()
            raise Cancelled(f"{op.name!r} was cancelled before it ran")
        error, self.error = self.error, None
        try:
            raise error
        finally:
            del error  # (no cycle through this frame)


async def _run_async(
    func: Callable[..., Awaitable[Any]],
    args: tuple[Any, ...],
    context: tuple[tuple[ContextVar[Any], Any], ...],
    outcome: _Outcome,
) -> None:
    """The task of ``from_thread.run``: ``await func(*args)`` in the thread's context."""
    me = lowlevel.current_task()
    assert me is not None
    me.shield = False  # (spawned shielded, to start whatever happened above)
    del me
    for var, value in context:
        var.set(value)
    try:
        outcome.value = await func(*args)
    except BaseException as exc:  # handed to the calling thread, raised there
        outcome.error = exc
    finally:
        outcome.done = True


async def _run_sync(
    func: Callable[..., Any], args: tuple[Any, ...], context: Any, outcome: _Outcome
) -> None:
    """The task of ``from_thread.run_sync``: ``func(*args)`` in the thread's context."""
    try:
        value = context.run(func, *args)
        if iscoroutine(value):
            value.close()
            raise TypeError(
                f"from_thread.run_sync() expected a synchronous function, but "
                f"{get_callable_name(func, None)!r} returned a coroutine; "
                "use from_thread.run() for async functions"
            )
        outcome.value = value
    except BaseException as exc:  # handed to the calling thread, raised there
        outcome.error = exc
    finally:
        outcome.done = True


async def _call_soon(func: Callable[..., object], args: tuple[Any, ...], context: Any) -> None:
    """The task of ``run_sync_soon``: a failure is the task's, logged if nobody looks."""
    context.run(func, *args)


def _refuse_in_task(call: str) -> None:
    if lowlevel.current_task() is not None:
        raise RuntimeError(
            f"This method cannot be called from the event loop thread: {call} blocks until "
            "the call is done, which an asyncop task must not do; await the function instead"
        )


def _runtime_of(token: object) -> Runtime:
    if not isinstance(token, Runtime):
        raise TypeError(
            f"the 'asyncop' backend's event loop token is an asyncop.Runtime, got "
            f"{type(token).__name__}; pass the token that anyio.lowlevel.current_token() gave"
        )
    return token


def _target(token: object) -> tuple[Runtime, AsyncOperation[Any] | None]:
    """The runtime a call from this thread goes to, and the operation it runs under.

    None for a root operation; see the module docstring.
    """
    if token is not None:
        return _runtime_of(token), None
    link: _Link | None = getattr(_links, "link", None)
    if link is not None:
        return link.runtime, None if link.abandon else link.scope
    # (anyio found this thread's token before it called the backend.)
    runtime = _runtime_of(threadlocals.current_token.native_token)
    op = current_operation()  # a sync callback's operation, on a claimed worker
    return runtime, op if op is not None and op.runtime is runtime else None


def _spawn(
    runtime: Runtime,
    parent: AsyncOperation[Any] | None,
    fn: Callable[..., Coroutine[Any, Any, None]],
    args: tuple[Any, ...],
    name: str,
) -> AsyncOperation[None]:
    if parent is not None:
        return lowlevel.spawn_shielded(parent, fn, *args, name=name)
    try:
        return runtime.spawn(fn, *args, name=name)
    except RuntimeError as exc:  # (the one refusal of a root: the runtime is shut down)
        raise RunFinishedError from exc


def _claim_callback_thread(backend: type, runtime: Runtime) -> None:
    """Mark a worker thread about to run a sync callback as ``runtime``'s, for anyio."""
    token = getattr(threadlocals, "current_token", None)
    if token is None or token.native_token is not runtime:
        threadlocals.current_token = EventLoopToken(backend, runtime)


class ThreadMethods:
    """The backend's calls about threads; mixed into ``AsyncopBackend``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The backend class is made: from now on, threads running sync
        # callbacks know their way back for anyio.from_thread.
        backend = cls

        def claim(runtime: Runtime) -> None:
            _claim_callback_thread(backend, runtime)

        lowlevel.add_callback_hook(claim)

    @classmethod
    async def run_sync_in_worker_thread(
        cls,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        abandon_on_cancel: bool = False,
        limiter: Any = None,
    ) -> Any:
        runtime = current_runtime()
        scope = current_operation()
        assert scope is not None  # (anyio calls it in a task)
        link = _Link(runtime, scope, bool(abandon_on_cancel))
        tokens = None if limiter is None else asyncop_limiter(limiter)

        def in_thread() -> Any:
            # (In the thread's own copy of the task's context.)
            sniffio.current_async_library_cvar.set(None)
            with claim_worker_thread(cls, runtime):  # type: ignore[arg-type]
                _links.link = link
                try:
                    value = func(*args)
                except StopIteration as exc:
                    # Raised from this coroutine's frame below, as trio does,
                    # not from inside the awaitable's generator.
                    return _Stopped(exc)
                finally:
                    del _links.link
            if iscoroutine(value):
                value.close()
                raise TypeError(
                    f"to_thread.run_sync() expected a synchronous function, but "
                    f"{get_callable_name(func, None)!r} returned a coroutine; "
                    "await the async function in the task instead"
                )
            return value

        in_thread.__qualname__ = get_callable_name(func, None)  # (what dump() shows)
        value = await spawn_blocking(in_thread, abandon=link.abandon, limiter=tokens)
        if type(value) is _Stopped:
            raise value.exc  # (which Python turns into RuntimeError, as in any coroutine)
        return value

    @classmethod
    def check_cancelled(cls) -> None:
        link: _Link | None = getattr(_links, "link", None)
        if link is not None:
            link.scope.token.check()
            return
        _refuse_in_task("from_thread.check_cancelled()")
        op = current_operation()  # a sync callback's operation
        if op is not None:
            op.token.check()

    @classmethod
    def run_async_from_thread(
        cls, func: Callable[..., Awaitable[Any]], args: tuple[Any, ...], token: object
    ) -> Any:
        _refuse_in_task("from_thread.run()")
        runtime, parent = _target(token)
        outcome = _Outcome()
        context = tuple(copy_context().items())
        name = get_callable_name(func, None)
        op = _spawn(runtime, parent, _run_async, (func, args, context, outcome), name)
        op.wait()
        return outcome.unwrap(op)

    @classmethod
    def run_sync_from_thread(
        cls, func: Callable[..., Any], args: tuple[Any, ...], token: object
    ) -> Any:
        _refuse_in_task("from_thread.run_sync()")
        runtime, _ = _target(token)
        outcome = _Outcome()
        name = get_callable_name(func, None)
        op = _spawn(runtime, None, _run_sync, (func, args, copy_context(), outcome), name)
        op.wait()
        return outcome.unwrap(op)

    @classmethod
    def run_sync_soon(
        cls, func: Callable[..., object], args: tuple[Any, ...], token: object
    ) -> None:
        runtime = _runtime_of(token)
        name = f"run_sync_soon({get_callable_name(func, None)})"
        _spawn(runtime, None, _call_soon, (func, args, copy_context()), name)

    @classmethod
    def current_default_thread_limiter(cls) -> Any:
        return default_thread_limiter()
