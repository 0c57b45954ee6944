"""The host asyncio loop: one thread per runtime that runs asyncio-only code.

Libraries such as asyncpg, aiohttp or redis.asyncio (and httpx, whose
httpcore knows only asyncio and trio) need a running asyncio loop; an
asyncop task is not one. ``asyncop.asyncio_bridge.run(fn, *args)`` runs the
coroutine ``fn(*args)`` on its runtime's *host loop*: an asyncio event loop
that a daemon thread (``<runtime name>-asyncio``) runs, started by the first
call and closed by ``Runtime.shutdown()`` once the tree has ended. Every call
of one runtime runs on the same loop, so an ``httpx.AsyncClient`` or a
connection pool made by one call serves the next ones.

This module is the host; ``_asyncio_call.py`` is one call and its waits.

States
------
::

    IDLE --first call--> STARTING --loop made--> RUNNING --shutdown()--> CLOSING --> CLOSED
      |                     |  \\--the factory failed--> IDLE (the next call tries again)
      |                     +--shutdown()--> CLOSING (the thread stops the loop it made)
      +--shutdown()--> CLOSED

- IDLE: no thread. STARTING: the thread makes the loop (with the runtime's
  ``asyncio_loop_factory``); calls that come meanwhile wait in ``_queued``.
- RUNNING: the loop runs; a call is handed over with
  ``loop.call_soon_threadsafe``. A coroutine that stops the loop, or lets
  SystemExit or KeyboardInterrupt out of it (asyncio does, after giving it
  to the task's caller), does not end it: the thread runs it again.
- CLOSING: ``shutdown()`` asked the loop to stop; new calls are refused. The
  thread cancels every task left on the loop and waits for them (as
  ``asyncio.run`` does), shuts down async generators and the default
  executor, closes the loop, and ends whatever call is still open with a
  RuntimeError.
- CLOSED: the thread has ended, or never started.

``_state``, ``_loop``, ``_threads`` and ``_queued`` are written under
``_lock``, by ``launch()``, ``shutdown()`` and the thread. ``_live`` (the
calls whose coroutine runs) and ``_stopping`` belong to the loop thread.
The handover to the loop happens under ``_lock`` too, so that a call
handed over before ``shutdown()`` reaches the loop before its stop does.

The runtime makes no host until a call needs one, and this module (with
asyncio, which imports ssl) loads only then: ``import asyncop`` stays light.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, final

from ..operations import describe_fn, safe_repr
from ..platform import ThreadHandle, join_by, start_thread
from ._core._kernel import RuntimeState

if TYPE_CHECKING:
    from ._asyncio_call import AsyncioCall
    from ._scheduler import Runtime

__all__ = ["AsyncioHost", "HostState", "asyncio_host"]

logger = logging.getLogger("asyncop")


class HostState(enum.Enum):
    """Where a runtime's host loop is; see the module docstring."""

    IDLE = "idle"
    STARTING = "starting"
    RUNNING = "running"
    CLOSING = "closing"
    CLOSED = "closed"


def asyncio_host(runtime: Runtime) -> AsyncioHost:
    """``runtime``'s host loop, made (not started) on first use.

    Raises:
        RuntimeError: the runtime is shut down.
    """
    host = runtime._asyncio_host
    if host is not None:
        return host
    with runtime._lock:
        host = runtime._asyncio_host
        if host is None:
            # A runtime that is closing still takes calls: its tasks' cleanup
            # may need the loop (an aclose() in a finally block).
            if runtime._state is RuntimeState.STOPPED:
                raise RuntimeError(
                    f"Runtime {runtime.name!r} is shut down and has no host asyncio loop "
                    "any more; run asyncio code before shutting the runtime down"
                )
            host = runtime._asyncio_host = AsyncioHost(runtime)
    return host


@final
class AsyncioHost:
    """One runtime's host asyncio loop and the thread that runs it."""

    __slots__ = (
        "_factory",
        "_ident",
        "_live",
        "_lock",
        "_loop",
        "_queued",
        "_state",
        "_stopping",
        "_threads",
        "runtime",
    )

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        factory = runtime._asyncio_loop_factory
        self._factory: Callable[[], asyncio.AbstractEventLoop] = (
            factory if factory is not None else asyncio.new_event_loop
        )
        self._lock = threading.Lock()
        self._state = HostState.IDLE
        self._loop: asyncio.AbstractEventLoop | None = None
        # The thread that runs the loop, last; before it, any that found the
        # factory failing and are ending: shutdown() joins them all.
        self._threads: list[ThreadHandle] = []
        self._ident: int | None = None
        # Calls handed over while the thread makes the loop.
        self._queued: list[AsyncioCall] = []
        # Loop thread only: the calls whose coroutine runs, and whether
        # shutdown() stopped the loop (anything else that stops it, user
        # code calling loop.stop(), only makes it run again).
        self._live: set[AsyncioCall] = set()
        self._stopping = False

    @property
    def state(self) -> HostState:
        """Where the host is (read without the lock: for messages and tests)."""
        return self._state

    @property
    def stopping(self) -> bool:
        """Whether shutdown() has stopped the loop; read on the loop thread."""
        return self._stopping

    def running_loop(self) -> asyncio.AbstractEventLoop:
        """Loop thread: the loop (made before any call starts on it)."""
        loop = self._loop
        assert loop is not None
        return loop

    def runs_on_current_thread(self) -> bool:
        """Whether the caller is the host loop's own thread."""
        return self._ident == threading.get_ident()

    # -- calls ---------------------------------------------------------------

    def launch(self, call: AsyncioCall) -> None:
        """Hand ``call`` to the loop, starting the thread on the first call.

        Raises:
            RuntimeError: the host is shut down, or the OS refused the thread.
        """
        with self._lock:
            state = self._state
            if state is HostState.RUNNING:
                loop = self._loop
                assert loop is not None
                loop.call_soon_threadsafe(call.start_on_loop)
                return
            if state is HostState.IDLE:
                self._threads = [thread for thread in self._threads if thread.is_alive()]
                name = f"{self.runtime.name}-asyncio"
                self._threads.append(start_thread(self._main, None, name=name))
                self._state = HostState.STARTING
            elif state is not HostState.STARTING:
                raise RuntimeError(
                    f"the host asyncio loop of Runtime {self.runtime.name!r} is shut down; "
                    f"cannot run {call.label}; run asyncio code before shutting the "
                    "runtime down"
                )
            self._queued.append(call)

    def loop_for_cancel(self) -> asyncio.AbstractEventLoop | None:
        """The loop to send a cancel to; None while there is none (not made, or closed)."""
        with self._lock:
            return (
                self._loop
                if self._state is HostState.RUNNING or self._state is HostState.CLOSING
                else None
            )

    def track(self, call: AsyncioCall) -> None:
        """Loop thread: ``call``'s coroutine runs."""
        self._live.add(call)

    def untrack(self, call: AsyncioCall) -> None:
        """Loop thread: ``call``'s coroutine has ended."""
        self._live.discard(call)

    # -- the thread ----------------------------------------------------------

    def _main(self, _: object) -> None:
        try:
            loop = self._factory()
            if not isinstance(loop, asyncio.AbstractEventLoop):
                raise TypeError(
                    f"it returned {safe_repr(loop)}, not an asyncio event loop; pass a "
                    "function that makes a new loop, such as asyncio.new_event_loop"
                )
            if loop.is_closed() or loop.is_running():
                raise RuntimeError(
                    f"it returned {safe_repr(loop)}, which is closed or already running; "
                    "pass a function that makes a new loop each time it is called"
                )
        except BaseException as exc:
            self._factory_failed(exc)
            return
        asyncio.set_event_loop(loop)
        with self._lock:
            self._loop = loop
            self._ident = threading.get_ident()
            queued, self._queued = self._queued, []
            for call in queued:
                loop.call_soon(call.start_on_loop)
            if self._state is HostState.STARTING:
                self._state = HostState.RUNNING
            else:  # shutdown() came while the loop was being made
                loop.call_soon(self._stop)
        try:
            self._run(loop)
        except BaseException:
            logger.exception(
                "asyncop: the host asyncio loop of Runtime %r failed", self.runtime.name
            )
        finally:
            self._close(loop)

    def _factory_failed(self, exc: BaseException) -> None:
        """The loop factory raised: fail the calls that waited for it; the next call retries."""
        with self._lock:
            queued, self._queued = self._queued, []
            self._state = HostState.IDLE if self._state is HostState.STARTING else HostState.CLOSED
        factory = describe_fn(self._factory)
        for call in queued:
            error = RuntimeError(
                f"Runtime {self.runtime.name!r} could not make its host asyncio loop: "
                f"asyncio_loop_factory {factory} raised {safe_repr(exc)}; pass a factory "
                "that returns a new event loop, or leave it out for asyncio.new_event_loop"
            )
            error.__cause__ = exc
            call.finish(None, error, cancelled=False)

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        while not self._stopping:
            try:
                loop.run_forever()
            except (KeyboardInterrupt, SystemExit):
                # Raised by a coroutine (no signal reaches this thread): asyncio
                # stores it in the task, whose caller gets it, then lets it out
                # of run_forever. The loop goes on for the other calls.
                pass
        _cancel_all_tasks(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        try:
            loop.run_until_complete(loop.shutdown_default_executor())
        except RuntimeError:
            # At interpreter exit no new thread may start (Python 3.12 on),
            # and this one would only join the executor's threads, which
            # the interpreter joins by itself there.
            pass

    def _close(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close the loop; end any call still open; the thread ends after this."""
        try:
            loop.close()
        except BaseException:
            logger.exception(
                "asyncop: closing the host asyncio loop of Runtime %r failed", self.runtime.name
            )
        asyncio.set_event_loop(None)
        with self._lock:
            self._state = HostState.CLOSED
        left = list(self._live)
        self._live.clear()
        for call in left:
            call.finish(
                None,
                RuntimeError(
                    f"the host asyncio loop of Runtime {self.runtime.name!r} closed before "
                    f"{call.label} ended"
                ),
                cancelled=False,
            )

    def _stop(self) -> None:
        """Loop thread: leave ``run_forever`` for good (shutdown() asked)."""
        self._stopping = True
        loop = self._loop
        assert loop is not None
        loop.stop()

    # -- shutdown ------------------------------------------------------------

    def shutdown(self, end: float | None) -> bool:
        """Stop the loop, cancel its tasks, close it and join its thread.

        Callable again: a later call waits for the thread once more.

        Args:
            end: the ``time.monotonic()`` reading by which to give up on the
                thread (None: wait for it).

        Returns:
            True if the thread has ended (or never started).
        """
        with self._lock:
            state = self._state
            if state is HostState.IDLE:
                self._state = HostState.CLOSED
            elif state is HostState.RUNNING:
                self._state = HostState.CLOSING
                loop = self._loop
                assert loop is not None
                loop.call_soon_threadsafe(self._stop)
            elif state is HostState.STARTING:
                self._state = HostState.CLOSING  # the thread stops the loop once it is made
            threads = list(self._threads)
        return all([join_by(thread, end) for thread in threads])

    def __repr__(self) -> str:
        return f"<AsyncioHost of {self.runtime.name!r} {self._state.value}>"


def _cancel_all_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel every task left on ``loop`` and run it until they have ended, as asyncio.run does."""
    tasks = asyncio.all_tasks(loop)
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    for task in tasks:
        if task.cancelled():
            continue
        if task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception while the host loop shut down",
                    "exception": task.exception(),
                    "task": task,
                }
            )
