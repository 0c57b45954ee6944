"""The runtime: ready queue, workers, timers, and the public ``Runtime``.

Pipeline
--------
``submit`` -> ready queue -> wake a parked worker -> the worker runs the
callback (or steps the coroutine). See ``_worker.py`` for the loop.

Locking
-------
One recursive lock per runtime (``_lock``, a platform ``RecursiveLock``)
protects the operation tree, the timer heap, the idle-worker stack and the
root set. It is held only for short, non-blocking bookkeeping; user code
never runs under it. Whatever must happen after a change but outside the
lock (on_cancel callbacks, waking waiters) is collected in an ``after`` list
and run once the lock is released. The ready queue is a ``deque``, whose
``append`` and ``popleft`` are atomic on every CPython, free-threaded builds
included; pushes still take the lock, because the push and the check of the
idle stack must be one step (see ``_worker.py``).

Roots
-----
``_roots`` holds the live top-level operations (submitted, or with
children), in insertion order, so that ``shutdown`` can cancel them and
``dump`` can show them. A root leaves the set when it becomes final.
"""

from __future__ import annotations

import atexit
import contextvars
import inspect
import logging
import math
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Coroutine
from inspect import CO_ASYNC_GENERATOR, CO_COROUTINE
from types import CoroutineType, FunctionType
from typing import TYPE_CHECKING, Any, overload

from ..operations import (
    AsyncOperation,
    C,
    OperationState,
    OpKind,
    Outcome,
    R,
    ThreadState,
    Ts,
    _is_final,
    _user_frame,
    run_after,
    safe_str,
    spawn_remote,
    thread_state,
    walk,
)
from ..platform import RecursiveLock, check_timeout, cpu_count, start_thread
from ._blocking import BlockingPool
from ._clock import MonotonicClock, VirtualClock
from ._interrupt import cancel_roots, shut_down, wait_for_tree
from ._monitor import Monitor
from ._reactor import Reactor
from ._scope import Scope
from ._task import TaskState, describe_wait, on_cancel_running
from ._timers import FAR, Timer, TimerHeap, is_far
from ._worker import (
    EXTRA_IDLE,
    IDLE_RETIRE,
    RETIRE,
    Worker,
    WorkerState,
    join_by,
    monotonic,
    worker_main,
)

if TYPE_CHECKING:
    from ..operations import After

__all__ = ["Runtime"]

logger = logging.getLogger("asyncop")

_RUNNING = OperationState.RUNNING
_CORO = OpKind.CORO
_BUSY = WorkerState.BUSY
_SYNC = OpKind.SYNC
_SCOPE = OpKind.SCOPE
# How long interpreter exit waits for cancelled work before abandoning it.
EXIT_GRACE = 1.0
# The most worker threads a Runtime takes. Far more than any CPU count; a
# number past it is a mistake (a count of tasks, not of threads) that would
# start threads until the OS refuses.
MAX_WORKERS = 1024
# Worker threads a runtime may start beyond ``workers`` by default, to keep
# work moving while workers are held by long callbacks or steps.
DEFAULT_EXTRA_THREADS = 8
_INF = float("inf")

_live_runtimes: weakref.WeakSet[Runtime] = weakref.WeakSet()


def _shutdown_all_at_exit() -> None:
    # One grace period for every runtime together: exit must stay prompt
    # however many runtimes were left running.
    end = time.monotonic() + EXIT_GRACE
    for runtime in list(_live_runtimes):
        try:
            runtime.shutdown(cancel=True, timeout=max(0.0, end - time.monotonic()))
        except Exception:  # pragma: no cover - exit must not fail
            logger.exception("asyncop: shutting down %r at exit failed", runtime)


atexit.register(_shutdown_all_at_exit)


def live_runtimes() -> list[Runtime]:
    """The runtimes not yet shut down."""
    return list(_live_runtimes)


def _noop() -> None:
    pass


def _log_exception(message: str, *args: object) -> None:
    """Log the exception being handled; never raise, whatever it or the args are.

    The args (an operation, a timer) are formatted by the logging module,
    which reports a ``__repr__`` that raises instead of raising itself.
    """
    try:
        logger.error(message, *args, exc_info=True)
    except BaseException:  # pragma: no cover - a broken handler or stream
        pass
def _async_generator_refused(fn: object) -> TypeError:
    return TypeError(
        f"cannot make an operation from async generator function {_describe(fn)!r}: it "
        "would only make a generator and never run its body; spawn an async def function "
        "that iterates it with 'async for'"
    )


# Levels of the tree dump() indents; deeper nodes show their depth instead.
DUMP_INDENT = 32


def _indent(depth: int) -> str:
    if depth <= DUMP_INDENT:
        return "  " * depth
    return "  " * DUMP_INDENT + f"(depth {depth}) "


def _describe(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _check_workers(workers: object) -> int:
    """The number of worker threads: ``workers``, or the CPU count for None."""
    if workers is None:
        return cpu_count()
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise TypeError(
            f"Runtime(workers=...) needs an int, got {type(workers).__name__}; "
            "pass a positive number of threads, or None for the CPU count"
        )
    if workers < 1:
        raise ValueError(
            f"Runtime(workers={workers}) needs at least one worker thread; "
            "pass a positive number, or None for the CPU count"
        )
    if workers > MAX_WORKERS:
        raise ValueError(
            f"Runtime(workers={workers}) asks for more than {MAX_WORKERS} worker "
            "threads; pass a smaller number (blocking calls belong in "
            "spawn_blocking, not in extra workers)"
        )
    return workers


def _check_max_threads(max_threads: object, workers: int) -> int:
    """The worker-thread cap: ``max_threads``, or the default for ``workers``."""
    if max_threads is None:
        return workers + DEFAULT_EXTRA_THREADS
    if isinstance(max_threads, bool) or not isinstance(max_threads, int):
        raise TypeError(
            f"Runtime(max_threads=...) needs an int, got {type(max_threads).__name__}; "
            "pass a number of threads at least as large as workers, or None"
        )
    if max_threads < workers:
        raise ValueError(
            f"Runtime(max_threads={max_threads}) is below workers={workers}: the cap "
            "counts the regular workers too; pass at least the number of workers, or None"
        )
    return max_threads


class Runtime:
    """An asyncop runtime: worker threads, a ready queue and a timer heap.

    Args:
        workers: the number of worker threads; defaults to the CPU count.
            At most this many sync callbacks run at once.
        name: shown in thread names and ``repr``.
        clock: a clock with ``now()``; ``asyncop.testing.VirtualClock`` for
            tests. Defaults to the monotonic clock.
        parallel: let coroutine steps run on several workers at once (for
            free-threaded CPython). By default no two steps of the runtime
            overlap: the code of a task between two awaits is atomic with
            respect to every other task, as in asyncio and trio.
        max_threads: the most worker threads the runtime runs, regular and
            replacement ones (started while workers are held by long work);
            defaults to ``workers + 8``. At the cap, work waits and one
            WARNING says so.

    Raises:
        ValueError: ``workers`` is less than 1 or more than ``MAX_WORKERS``
            (1024), or ``max_threads`` is below ``workers``.
        TypeError: ``workers`` or ``max_threads`` is not an integer, or
            ``parallel`` is not a bool.
        RuntimeError: the OS refused to start a thread; the threads already
            started are stopped first.

    Use it as a context manager: leaving the block calls ``shutdown()``.
    With ``ASYNCOP_DYNAMIC_WORKERS=1`` in the environment, workers start on
    demand up to ``workers``, and those idle for a while retire.
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        name: str | None = None,
        clock: Any = None,
        parallel: bool = False,
        max_threads: int | None = None,
    ) -> None:
        workers = _check_workers(workers)
        if not isinstance(parallel, bool):
            raise TypeError(
                f"Runtime(parallel=...) needs True or False, got {type(parallel).__name__}; "
                "pass parallel=True to let coroutine steps overlap, or leave it out"
            )
        self._max_threads = _check_max_threads(max_threads, workers)
        self.name = name if name is not None else f"asyncop-{id(self):x}"
        # ASYNCOP_PARALLEL=1 runs every runtime in parallel mode: for running
        # a test suite in both modes.
        self._parallel = parallel or os.environ.get("ASYNCOP_PARALLEL", "") == "1"
        self._lock = RecursiveLock()
        self._clock: Any = clock if clock is not None else MonotonicClock()
        if not callable(getattr(self._clock, "now", None)):
            raise TypeError(
                f"Runtime(clock=...) needs an object with a now() method, got "
                f"{type(self._clock).__name__}; pass asyncop.testing.VirtualClock() or None"
            )
        self._virtual = bool(getattr(self._clock, "virtual", False))
        self._autojump = self._virtual and bool(getattr(self._clock, "autojump", False))
        self._target = workers
        self._dynamic = os.environ.get("ASYNCOP_DYNAMIC_WORKERS", "") == "1"
        # Ready coroutine tasks, stepped by whoever holds the lane (by any
        # worker in parallel mode), and ready sync callbacks.
        self._ready: deque[AsyncOperation] = deque()
        self._sync_ready: deque[AsyncOperation] = deque()
        self._lane = threading.Lock()
        self._idle: list[Worker] = []
        # The parked worker that waits in the I/O multiplexer, if any, and
        # how many times workers have polled it (the monitor compares).
        self._poller: Worker | None = None
        self._polls = 0
        self._workers: list[Worker] = []
        self._worker_seq = 0
        self._active = 0  # workers not parked
        self._timers = TimerHeap()
        self._next_deadline = _INF  # cached earliest deadline, read without the lock
        # No deadline below this is far (the clock only moves forward).
        self._far_floor = self.now() + FAR
        self._roots: dict[AsyncOperation, None] = {}
        # Things that can make progress without a worker: autojump waits
        # for them (I/O waits, blocking calls in other threads).
        self._outside_work = 0
        self._closing = False
        self._stopping = False
        self._monitor = Monitor(self)
        self.idle_retire = IDLE_RETIRE
        self._blocking = BlockingPool(self.name)
        self._reactor: Reactor | None = None
        # Subscriptions of wait_all_blocked(), fired when the runtime idles.
        self._idle_watchers: list[Any] = []
        if isinstance(self._clock, VirtualClock):
            self._clock._subscribe(self)
        try:
            with self._lock:
                for _ in range(1 if self._dynamic else workers):
                    self._start_worker_locked(extra=False)
                self._monitor.start()
        except BaseException:
            # Half built (the OS refused a thread, or a Ctrl-C): nobody can
            # reach this runtime to shut it down, so stop what did start.
            self.shutdown(timeout=EXIT_GRACE)
            raise
        _live_runtimes.add(self)

    # ------------------------------------------------------------------
    # Public API
    # ------------------------------------------------------------------

    def now(self) -> float:
        """Read the runtime's clock, in seconds."""
        return float(self._clock.now())

    @property
    def workers(self) -> int:
        """The target number of worker threads."""
        return self._target

    # The callback gets the operation and the context; without a context it
    # gets None. An async def callback gives its coroutine's value.
    @overload
    def create(
        self,
        callback: Callable[[AsyncOperation[Any], C], Coroutine[Any, Any, R]],
        context: C,
        *,
        parent: AsyncOperation[Any] | None = None,
        name: str | None = None,
    ) -> AsyncOperation[R]: ...

    @overload
    def create(
        self,
        callback: Callable[[AsyncOperation[Any], None], Coroutine[Any, Any, R]],
        *,
        parent: AsyncOperation[Any] | None = None,
        name: str | None = None,
    ) -> AsyncOperation[R]: ...

    @overload
    def create(
        self,
        callback: Callable[[AsyncOperation[Any], C], R],
        context: C,
        *,
        parent: AsyncOperation[Any] | None = None,
        name: str | None = None,
    ) -> AsyncOperation[R]: ...

    @overload
    def create(
        self,
        callback: Callable[[AsyncOperation[Any], None], R],
        *,
        parent: AsyncOperation[Any] | None = None,
        name: str | None = None,
    ) -> AsyncOperation[R]: ...

    def create(
        self,
        callback: Callable[..., Any],
        context: Any = None,
        *,
        parent: AsyncOperation | None = None,
        name: str | None = None,
    ) -> AsyncOperation[Any]:
        """Make an operation that will run ``callback(operation, context)``.

        The operation is CREATED: nothing runs until ``submit(op)``. With a
        ``parent``, it is linked under it at once, so cancelling the parent
        cancels it even before it is submitted.

        Raises:
            TypeError: ``callback`` is not callable.
            RuntimeError: ``parent`` has ended or belongs to another runtime.
        """
        op = self._new_operation(callback, (), parent=parent, name=name, seed_shape=True)
        if op._outcome is Outcome.NONE:
            op._args = (op, context)
        return op

    def submit(self, op: AsyncOperation[R]) -> AsyncOperation[R]:
        """Queue a CREATED operation for a worker; returns it.

        Raises:
            RuntimeError: the operation was already submitted, was cancelled,
                has ended, is a scope, belongs to another runtime, or the
                runtime is shut down.
        """
        self._submit(op)
        return op

    # As AsyncOperation.spawn: *args checked against fn, AsyncOperation[R]
    # for a function or an async def returning R.
    @overload
    def spawn(
        self,
        fn: Callable[[*Ts], Coroutine[Any, Any, R]],
        *args: *Ts,
        name: str | None = None,
        supervise: bool = False,
        executor: object = None,
        abandon: bool = False,
    ) -> AsyncOperation[R]: ...

    @overload
    def spawn(
        self,
        fn: Callable[[*Ts], R],
        *args: *Ts,
        name: str | None = None,
        supervise: bool = False,
        executor: object = None,
        abandon: bool = False,
    ) -> AsyncOperation[R]: ...

    def spawn(
        self,
        fn: Callable[[*Ts], Any],
        *args: *Ts,
        name: str | None = None,
        supervise: bool = False,
        executor: object = None,
        abandon: bool = False,
    ) -> AsyncOperation[Any]:
        """Make and submit a top-level operation that runs ``fn(*args)``.

        A plain function runs on a worker thread; an ``async def`` function
        runs as a coroutine task. Inside an operation's code, spawn children
        with ``op.spawn`` (or ``current_operation().spawn``) instead, so that
        they belong to the tree. With ``executor`` (and ``abandon``), ``fn``
        runs there; see ``AsyncOperation.spawn``.

        Raises:
            TypeError: ``fn`` is not callable, or (with an executor) ``fn``
                or an argument cannot be pickled.
            RuntimeError: the runtime is shut down.
        """
        if executor is not None or abandon:
            return spawn_remote(
                self, None, fn, args, name=name, supervise=supervise,
                executor=executor, abandon=abandon,
            )
        return self._new_operation(
            fn, args, parent=None, name=name, submit=True, supervise=supervise
        )

    @overload
    def run(self, fn: Callable[[*Ts], Coroutine[Any, Any, R]], *args: *Ts) -> R: ...

    @overload
    def run(self, fn: Callable[[*Ts], R], *args: *Ts) -> R: ...

    def run(self, fn: Callable[[*Ts], Any], *args: *Ts) -> Any:
        """Run ``fn(*args)`` as a root operation, wait, and return its value.

        Like ``trio.run``: the call blocks until the operation and all its
        children have ended. A KeyboardInterrupt while waiting cancels the
        tree, waits for it to end, and is re-raised; a second one gets out
        at once, giving up on the runtime (see ``shutdown``).

        Raises:
            BaseException: the operation's failure.
            CancellationError: the operation was cancelled.
        """
        if thread_state().task is not None:
            raise RuntimeError(
                f"Runtime {self.name!r}.run() would block a worker inside a coroutine; "
                "write 'await runtime.spawn(fn)' instead"
            )
        op = self.spawn(fn, *args)
        op._check_can_block("Runtime.run()")
        wait_for_tree(op)
        return op.result()

    def scope(
        self,
        *,
        name: str | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        shield: bool = False,
        supervise: bool = False,
    ) -> Scope:
        """Open a nursery-style block: ``with runtime.scope() as root:``.

        The block is the scope operation's own work; children spawned with
        ``root.spawn`` run concurrently, and the block's exit waits for all
        of them. See the scopes section of the concepts guide for every rule.

        Args:
            name: the scope operation's name.
            timeout: seconds from now after which the scope is cancelled.
            deadline: an absolute time (``runtime.now()`` clock) for the same.
            shield: a cancel from above does not enter the scope.
            supervise: a failing child neither cancels its siblings nor makes
                the block raise; its error stays on the child.
        """
        return Scope(
            self,
            name=name,
            timeout=timeout,
            deadline=deadline,
            shield=shield,
            supervise=supervise,
        )

    def registrations(self) -> int:
        """Count the live wake-up registrations: armed timers, I/O waits, parked wakers."""
        with self._lock:
            return len(self._timers) + self._extra_registrations_locked()

    def _extra_registrations_locked(self) -> int:
        reactor = self._reactor
        return reactor.waits() if reactor is not None else 0

    def _get_reactor(self) -> Reactor:
        """The runtime's reactor, made on the first I/O wait."""
        reactor = self._reactor
        if reactor is None:
            with self._lock:
                if self._reactor is None:
                    self._reactor = Reactor(self)
                reactor = self._reactor
        return reactor

    def _io_waiting(self) -> bool:
        reactor = self._reactor
        return reactor is not None and reactor.waits() > 0

    def dump(self) -> str:
        """Return the live operation tree as indented text, one node per line.

        Each level indents by two spaces, up to ``DUMP_INDENT`` levels; a
        node deeper than that shows its depth instead (``(depth 153)``), so
        the text stays linear in the size of the tree however deep it is.
        A cancel reason or a wait whose ``str()`` raises is shown by its
        type. Takes the runtime lock for the walk; never raises.
        """
        with self._lock:
            lines = [_indent(depth) + self._describe_locked(op) for op, depth in walk(self._roots)]
            threads = self._threads_line_locked()
        if not lines:
            return f"{self.name}: no live operations\n  {threads}"
        return "\n".join([f"{self.name}:", *("  " + line for line in lines), "  " + threads])

    def _threads_line_locked(self) -> str:
        """The thread counts ``dump()`` shows first."""
        extra = sum(1 for worker in self._workers if worker.extra)
        parked = len(self._idle)
        regular = len(self._workers) - extra
        return (
            f"threads: {regular} workers + {extra} extra of max_threads={self._max_threads} "
            f"({parked} parked), {self._blocking.thread_count()} blocking-call threads"
        )

    def _describe_locked(self, op: AsyncOperation) -> str:
        text = f"{op.name} [{op.state.name}] {op.filename}:{op.lineno}"
        if op._cancelled and not op.done:
            reason = op.cancel_reason
            text += " cancelling" + (f" ({safe_str(reason)})" if reason is not None else "")
        if op._deadline is not None:
            deadline = op._deadline
            text += f" deadline={deadline:.3f}" if math.isfinite(deadline) else " deadline=never"
        if op._task is not None and op._task.task is op:
            try:
                text += describe_wait(op._task)
            except Exception:  # a user's event whose _describe() raises
                text += " waiting on <an event whose description raised>"
        return text

    def shutdown(self, cancel: bool = True, timeout: float | None = None) -> bool:
        """Stop the runtime: cancel live work, wait for it, join the threads.

        Not a cancellation point. Callable again: a second call waits for
        what the first left running.

        A KeyboardInterrupt while it waits cancels everything again and is
        raised once the shutdown is done. A second one (or a first while
        one is handled, as in the exit of ``with Runtime()`` it leaves)
        gives up: the runtime stops without waiting, and the threads still
        running operation code are abandoned and named in a WARNING. Later
        calls wait for them only as long as an explicit ``timeout`` says.

        Args:
            cancel: cancel every live operation first; with False, wait for
                the work to end by itself.
            timeout: seconds to wait at most, for the work and the threads
                together; None, ``inf`` or a value of 1e9 or more waits as
                long as it takes, and 0 or less does not wait.

        Returns:
            True if every operation ended and every thread was joined; False
            if the timeout passed first (the remaining threads are daemon
            threads and never keep the interpreter alive).

        Raises:
            TypeError: ``timeout`` is not a number or None.
            ValueError: ``timeout`` is NaN.
            RuntimeError: called from inside this runtime: one of its worker
                or blocking-call threads, or the block of one of its scopes,
                each of which the call would wait for forever.
        """
        limit = check_timeout(timeout, f"Runtime {self.name!r}.shutdown(timeout=...)")
        self._refuse_shutdown_from_inside()
        return shut_down(self, cancel, limit)

    def _shutdown(self, cancel: bool, limit: float | None) -> bool:
        """One pass of ``shutdown()``; a KeyboardInterrupt stops it where it lands."""
        with self._lock:
            self._closing = True
            roots = list(self._roots)
        end = None if limit is None else monotonic() + limit

        def remaining() -> float | None:
            return None if end is None else max(0.0, end - monotonic())

        if cancel:
            cancel_roots(roots)
        ended = True
        for root in roots:
            if not root._block_until_final(remaining()):
                ended = False
        with self._lock:
            self._stopping = True
            workers = list(self._workers)
            for worker in workers:
                worker.event.set()
            if self._poller is not None and self._reactor is not None:
                self._reactor.wake_poller()
            monitor = self._monitor.stop()
        for worker in workers:
            if worker.handle is not None and not join_by(worker.handle, end):
                ended = False
        if monitor is not None and not join_by(monitor, end):
            ended = False
        if not self._blocking.shutdown(end):
            ended = False
        reactor = self._reactor
        if reactor is not None and not reactor.shutdown(end):
            ended = False
        if isinstance(self._clock, VirtualClock):
            self._clock._unsubscribe(self)
        _live_runtimes.discard(self)
        return ended

    def _refuse_shutdown_from_inside(self) -> None:
        """Raise if the calling thread is part of what shutdown() waits for."""
        me = threading.get_ident()
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            if worker.handle is not None and worker.handle.ident == me:
                raise RuntimeError(
                    f"Runtime {self.name!r}.shutdown() was called from its own worker "
                    "thread, which it would have to join; call it from outside the runtime"
                )
        if self._blocking.runs_on_current_thread():
            raise RuntimeError(
                f"Runtime {self.name!r}.shutdown() was called from one of its "
                "spawn_blocking threads, whose task it would wait for forever; call it "
                "from outside the runtime, or cancel the work with op.cancel() instead"
            )
        running = thread_state().running()
        if running is not None and running.runtime is self:
            raise RuntimeError(
                f"Runtime {self.name!r}.shutdown() was called inside the block of scope "
                f"{running.name!r}, which it would wait for forever; call it after the "
                "with-block, or cancel the scope with scope.cancel() instead"
            )

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        state = "stopped" if self._stopping else "closing" if self._closing else "running"
        mode = " parallel" if self._parallel else ""
        return f"<Runtime {self.name!r} {state} workers={self._target}{mode}>"

    # ------------------------------------------------------------------
    # Making and submitting operations
    # ------------------------------------------------------------------

    def _new_operation(
        self,
        fn: Callable[..., Any] | None,
        args: tuple[Any, ...],
        *,
        parent: AsyncOperation | None,
        name: str | None,
        kind: OpKind | None = None,
        seed_shape: bool = False,
        shield: bool = False,
        submit: bool = False,
        supervise: bool = False,
    ) -> AsyncOperation:
        """Make an operation, link it under ``parent``, apply born-cancelled.

        With ``submit``, also queue it, in the same locked step as the link
        (``spawn``): one lock round trip per spawn, and no cancel can land
        between linking and queueing.
        """
        if kind is None:
            if type(fn) is FunctionType:  # fast path: read the code flags
                flags = fn.__code__.co_flags
                if flags & CO_COROUTINE:
                    kind = _CORO
                elif flags & CO_ASYNC_GENERATOR:
                    raise _async_generator_refused(fn)
                else:
                    kind = _SYNC
                if name is None:
                    name = fn.__qualname__
            elif not callable(fn):
                what = "callback" if seed_shape else "function"
                label = f"operation {name!r}" if isinstance(name, str) else "an operation"
                if isinstance(fn, CoroutineType):
                    # run(main()) or spawn(fetch(x)), the asyncio habit.
                    fn.close()
                    raise TypeError(
                        f"cannot make {label} from coroutine object {fn.__qualname__}(), "
                        f"a call already made; pass the async def function itself, as in "
                        f"run({fn.__name__}) or spawn({fn.__name__}, arg), instead of "
                        f"{fn.__name__}(...)"
                    )
                raise TypeError(
                    f"cannot make {label} from {fn!r}: the {what} is not callable; "
                    "pass a function (def or async def)"
                )
            elif inspect.iscoroutinefunction(fn):
                kind = _CORO
            elif inspect.isasyncgenfunction(fn):
                raise _async_generator_refused(fn)
            else:
                kind = _SYNC
        if name is None:
            name = _describe(fn) if fn is not None else "scope"
        elif type(name) is not str and not isinstance(name, str):
            raise TypeError(
                f"operation name must be a str, got {type(name).__name__}; pass name='...'"
            )
        if parent is not None:
            if type(parent) is not AsyncOperation:
                raise TypeError(
                    f"parent must be an AsyncOperation, got {type(parent).__name__}; "
                    "pass an operation made by this runtime"
                )
            if parent.runtime is not self:
                raise RuntimeError(
                    f"cannot link operation {name!r} under {parent.name!r}, which belongs "
                    f"to runtime {parent.runtime.name!r}; make it with that runtime"
                )
        state: ThreadState | None = None
        woken: Worker | None = None
        if submit and self._idle and kind is not _SCOPE:
            state = thread_state()
            if state.worker is None:
                # A user thread submits, and usually waits next. Wake a parked
                # worker first and build the operation while the OS wakes it
                # (tens of microseconds across CPUs), not before: the build
                # is then off the round trip's critical path. The push below
                # wakes nobody else, unless that worker has gone back to
                # sleep meanwhile (it looks at the queue under the lock first).
                with self._lock:
                    if self._idle and not self._closing:
                        woken = self._wake_one_locked()
        # spawn() or create() -> here: the user's frame is 3 up.
        code, lasti = _user_frame(3)
        if kind is _SCOPE:
            ctx = None
        elif parent is None or parent._ctx is None:
            ctx = contextvars.copy_context()
        else:
            state = thread_state()
            # From the parent's own code, the live context is the parent's
            # (with what the code set since); from elsewhere, copy the parent's.
            if state.running() is parent:
                ctx = contextvars.copy_context()
            else:
                ctx = parent._ctx.copy()
        op: AsyncOperation[Any] = AsyncOperation(self, kind, fn, args, name, ctx, code, lasti)
        if shield:
            op._shield = True
        if supervise:
            op._supervised = True
        if kind is _CORO:
            op._task = TaskState(op, self)
        if parent is None and kind is not _SCOPE and not submit:
            return op
        after: After = []
        # A with-statement, not acquire() then try: user threads come here,
        # and on the main thread a Ctrl-C raised as acquire() returns would
        # land before the try and leave the lock held for good.
        with self._lock:
            if parent is not None:
                parent._link_child_locked(op)
            elif submit and self._closing:
                raise RuntimeError(
                    f"Runtime {self.name!r} is shut down and takes no new operations; "
                    f"cannot start {name!r}, make a new Runtime"
                )
            if kind is OpKind.SCOPE:
                # A scope's work (its block) is already running: it is RUNNING
                # from birth, in the same step as the link, so no cancel can
                # find it unstarted. Entering it is not a cancellation point:
                # under a cancelled parent it is born with a cancelled token
                # (unless shielded) and still runs its block.
                op._transition_to_running()
                if parent is None:
                    self._track_root_locked(op)
                elif parent._cancelled and not shield:
                    op.cancel_reason = parent.cancel_reason
                    op._cancel_token_locked(after)
            elif parent is not None and parent._cancelled and not shield:
                # Born CANCELLED: it never runs, and unlinks at once.
                op.cancel_reason = parent.cancel_reason
                op._cancel_token_locked(after)
                op._end_work_locked(Outcome.CANCELLED, None, None, after)
            elif submit:
                if parent is None:
                    self._roots[op] = None
                op._transition_to_pending()
                self._push_locked(op, state, woken)
        if after:
            run_after(after)
        return op

    def _submit(self, op: AsyncOperation) -> None:
        if not isinstance(op, AsyncOperation):
            raise TypeError(
                f"submit() needs an AsyncOperation, got {type(op).__name__}; "
                "make one with create() first"
            )
        if op.runtime is not self:
            raise RuntimeError(
                f"operation {op.name!r} belongs to runtime {op.runtime.name!r}; submit it there"
            )
        with self._lock:
            if op._kind is OpKind.SCOPE:
                raise RuntimeError(
                    f"operation {op.name!r} is a scope, whose work is its with-block, "
                    "and cannot be submitted; spawn the work into the scope instead"
                )
            if op._outcome is not Outcome.NONE or _is_final(op._state):
                state = "cancelled" if op._cancelled else op._state.name
                raise RuntimeError(
                    f"cannot submit operation {op.name!r}: it is {state}; "
                    "create a new operation to run the callback again"
                )
            if op._state is not OperationState.CREATED:
                raise RuntimeError(
                    f"operation {op.name!r} was already submitted (it is {op._state.name}); "
                    "create a new operation to run the callback again"
                )
            if op.parent is None:
                if self._closing:
                    raise RuntimeError(
                        f"Runtime {self.name!r} is shut down and takes no new operations; "
                        f"cannot submit {op.name!r}, make a new Runtime"
                    )
                self._roots[op] = None
            op._transition_to_pending()
            self._push_locked(op)

    def _push_locked(
        self, op: AsyncOperation, state: ThreadState | None = None, woken: Worker | None = None
    ) -> None:
        """Queue ``op`` and wake a parked worker for it, if one is needed.

        ``state`` is the calling thread's state, for callers that hold it.
        ``woken`` is a worker the caller woke for this item beforehand: if it
        is still up, between items (it took none meanwhile), and this is the
        only item queued, it will find the item, and nobody else is woken.
        """
        if op._kind is _CORO:
            ready = self._ready
        else:
            ready = self._sync_ready
        ready.append(op)
        if (
            woken is not None
            and len(ready) == 1
            and not woken.parked
            and not woken.item_seq & 1
            and woken in self._workers
        ):
            return
        if state is None:
            state = thread_state()
        if state.keep_next_push:
            # This worker runs the queue next: waking another worker for
            # this item would only hand it across threads.
            state.keep_next_push = False
            return
        if ready is self._ready:
            worker = state.worker
            if (
                worker is not None
                and state.op is None
                and worker.runtime is self
                and worker.state is _BUSY
            ):
                # A task queued by this worker's own step (or its timers, or
                # its poll): the worker runs the queue when the step ends
                # (the test of _on_own_worker, inline: this is the hottest
                # path). Should the step not end, the monitor hands the
                # queue on (in parallel mode) or reports the slow step.
                return
            if not self._parallel and self._lane.locked():
                return  # the lane's holder steps it, before it parks
        elif not self._sync_slot_free_locked():
            return  # the callback that frees a slot runs it next
        if self._idle:
            self._wake_one_locked()
        elif self._dynamic and self._unstuck_locked() < self._target:
            self._grow_locked(extra=False)
        # Else every worker is busy: one takes it when its item ends, and
        # the monitor hands it on should none end soon.

    def _on_own_worker(self, state: Any) -> bool:
        """Whether the calling thread is a worker of this runtime that will
        look at the queue and the timers again before it parks.

        That is a worker stepping a coroutine or between items, not one
        inside a sync callback (which may block) nor one already parking.
        """
        worker = state.worker
        return (
            worker is not None and state.op is None and worker.runtime is self and not worker.parked
        )

    # ------------------------------------------------------------------
    # Hooks called by AsyncOperation (see operations/_hooks.py)
    # ------------------------------------------------------------------

    def _track_root_locked(self, op: AsyncOperation) -> None:
        self._roots[op] = None

    def _on_final_locked(self, op: AsyncOperation, after: After) -> None:
        timer = op._deadline_timer
        if timer is not None:
            op._deadline_timer = None
            self._timers.cancel(timer)
        if op.parent is None:
            self._roots.pop(op, None)
        # Break the operation <-> task state <-> waker cycle, and drop the
        # context: a finished operation is then freed by reference counting
        # alone, without waiting for (and feeding) the garbage collector.
        op._ctx = None
        op._task = None

    def _on_cancel_running_locked(self, op: AsyncOperation, after: After) -> None:
        """A RUNNING operation's token was cancelled: wake it if it is a parked task.

        Sync work polls its token instead.
        """
        task = op._task
        if task is None:
            return
        if op._state is OperationState.RUNNING:
            on_cancel_running(op, after)
        else:
            # Cancelled before its first step: if a worker pops it anyway,
            # it finalizes it without running it.
            task._transition_to_ignored()

    def _arm_deadline_locked(self, op: AsyncOperation) -> bool:
        timer = op._deadline_timer
        if timer is not None:
            op._deadline_timer = None
            self._timers.cancel(timer)
        deadline = op._deadline
        if deadline is None:
            return False
        if deadline <= self.now():
            return True
        op._deadline_timer = self._add_timer_locked(deadline, op._expire, inline=False)
        return False

    # ------------------------------------------------------------------
    # Timers
    # ------------------------------------------------------------------

    def _add_timer_locked(
        self, deadline: float, callback: Callable[[], object], *, inline: bool
    ) -> Any:
        if not deadline < self._far_floor and is_far(deadline, self.now()):
            # Never due (inf, or decades away): a dormant timer, which no
            # worker waits for and no autojump goes to. The test on
            # _far_floor first keeps the clock read off the common path.
            deadline = _INF
        timer = self._timers.push(deadline, callback, inline=inline)
        if deadline < self._next_deadline:
            self._next_deadline = deadline
            # A parked worker sleeps until the old earliest deadline; wake
            # one to re-park on the new one (or, on an autojumping virtual
            # clock, to notice that time may jump now). Unless this thread
            # is a worker that looks at the timers before it parks anyway:
            # the woken one would then fire them beside it, and two threads
            # stepping the woken tasks only take turns for the GIL.
            own = self._on_own_worker(thread_state())
            if self._idle and (self._virtual or not own):
                self._wake_one_locked()
            elif self._dynamic and self._unstuck_locked() < self._target and not own:
                # Every worker started so far is busy: start one to fire it.
                self._grow_locked(extra=False)
            else:
                # Should no worker look at the timers by the deadline (each
                # held by long work), the monitor fires it.
                self._monitor.deadline_pending()
        return timer

    def _cancel_timer_locked(self, timer: Timer) -> None:
        if self._timers.cancel(timer):
            timer.callback = _noop  # drop the reference to the waiter now

    def _fire_due_timers(self) -> None:
        after: After = []
        with self._lock:
            due = self._timers.pop_due(self.now())
            for timer in due:
                callback = timer.callback
                if timer.inline:
                    # Each on its own: the timers behind a failing one are
                    # already out of the heap and must fire all the same.
                    try:
                        callback()
                    except BaseException:
                        _log_exception("asyncop: timer %r failed", timer)
                else:
                    after.append(callback)
            nxt = self._timers.next_deadline()
            self._next_deadline = _INF if nxt is None else nxt
        for callback in after:
            try:
                callback()  # a deadline: cancels a subtree, runs its on_cancel
            except BaseException:
                _log_exception("asyncop: a deadline's cancel raised; the timers go on")

    def _clock_advanced(self) -> None:
        """The virtual clock moved: have a worker fire what became due."""
        with self._lock:
            if self._idle:
                self._wake_one_locked()
            else:
                self._monitor.deadline_pending()

    # ------------------------------------------------------------------
    # Workers
    # ------------------------------------------------------------------

    def _start_worker_locked(self, *, extra: bool) -> Worker:
        """Start a worker thread.

        Raises:
            RuntimeError: the OS refused the thread; the pool is unchanged.
        """
        self._worker_seq += 1
        worker = Worker(self, self._worker_seq, extra=extra)
        kind = "extra" if extra else "worker"
        # Start first, then count it: a refused thread leaves no worker
        # behind that the pool would wait for. The new thread cannot look
        # at the pool before this returns: it parks under the lock we hold.
        worker.handle = start_thread(
            lambda w: worker_main(self, w), worker, name=f"{self.name}-{kind}-{worker.index}"
        )
        self._workers.append(worker)
        self._active += 1
        return worker

    def _grow_locked(self, *, extra: bool) -> bool:
        """Start a worker for work that waits; False if refused or at ``max_threads``.

        The work stays queued either way: the monitor tries again on its
        next round while it waits, so a refusal is logged, never raised into
        the push or the timer that asked.
        """
        if len(self._workers) >= self._max_threads:
            return False
        try:
            self._start_worker_locked(extra=extra)
        except RuntimeError:
            _log_exception("asyncop: runtime %r could not start another worker thread", self)
            return False
        self._monitor.wake()
        return True

    def _unstuck_locked(self) -> int:
        return sum(1 for worker in self._workers if not worker.replaced)

    def _wake_one_locked(self) -> Worker:
        """Pop a parked worker and wake it: the most recently parked one.

        The poller (parked in the multiplexer) stays there while another
        worker is parked: it keeps socket readiness on the coroutine side.
        """
        idle = self._idle
        worker = idle.pop()
        if worker is self._poller and idle:
            other = idle.pop()
            idle.append(worker)
            worker = other
        polling = worker.state is WorkerState.POLLING
        self._unpark_locked(worker)
        if polling:
            reactor = self._reactor
            assert reactor is not None
            reactor.wake_poller()
        else:
            worker.event.set()
        return worker

    def _unpark_locked(self, worker: Worker) -> None:
        """``worker`` (already off the idle stack) is busy again."""
        worker.state = WorkerState.BUSY
        self._active += 1
        if self._monitor._asleep:
            self._monitor.wake()

    def _sync_slot_free_locked(self) -> bool:
        """Whether fewer than ``workers`` sync callbacks hold a slot."""
        busy = 0
        for worker in self._workers:
            if worker.in_sync and worker.holds_sync_slot():
                busy += 1
        return busy < self._target

    def _work_for_worker_locked(self) -> bool:
        """Whether a worker about to park has work it may take instead."""
        return bool(
            (self._ready and (self._parallel or not self._lane.locked()))
            or (self._sync_ready and self._sync_slot_free_locked())
        )

    def _work_waits_locked(self, timers: bool = True) -> bool:
        """Whether work or (with ``timers``) a due timer waits for a worker."""
        if self._work_for_worker_locked():
            return True
        return timers and self._next_deadline <= self.now()

    def _park_timeout_locked(self, worker: Worker) -> tuple[Any, bool]:
        """How long ``worker`` may park: ``(timeout, go_on)``.

        ``go_on`` is True when it must not park but loop again (a timer is
        due, the clock jumped, wait_all_blocked() was woken); ``timeout`` is
        ``RETIRE`` when the worker must leave the pool.
        """
        deadline = self._timers.next_deadline()
        self._next_deadline = _INF if deadline is None else deadline
        if self._active == 1 and self._idle_watchers and self._outside_work == 0:
            # This worker is the last one busy and is about to park: every
            # task is blocked. Wake the wait_all_blocked() waiters.
            watchers = self._idle_watchers
            self._idle_watchers = []
            for sub in watchers:
                sub.fire(None)
            return None, True
        # Retire only after the check above, and not when a clock jump is
        # due: the last busy worker must still wake wait_all_blocked() and
        # jump the clock, even when it is an extra one on its way out.
        jump_due = self._autojump and self._active == 1 and deadline is not None
        if worker.extra and not jump_due and self._unstuck_locked() > self._target:
            return RETIRE, False
        timeout: float | None
        if self._virtual:
            if deadline is not None and deadline <= self.now():
                return None, True
            if (
                self._autojump
                and deadline is not None
                and self._active == 1
                and self._outside_work == 0
                and not self._io_waiting()
            ):
                # Every other worker is parked and nothing outside the
                # workers can make progress: jump to the next deadline.
                self._clock._jump_to(deadline)
                return None, True
            timeout = None
        elif deadline is None:
            timeout = None
        else:
            timeout = deadline - self.now()
            if timeout <= 0:
                return None, True
        if worker.extra or (self._dynamic and len(self._workers) > 1):
            # May retire: look again after a while even if nobody pushes.
            # An extra worker parks while the worker it replaced is still
            # stuck; once that one is back, the LIFO idle stack never wakes
            # the extra, so it must notice the surplus by itself.
            limit = EXTRA_IDLE if worker.extra else self.idle_retire
            timeout = limit if timeout is None else min(timeout, limit)
        return timeout, False

    def _may_retire_locked(self, worker: Worker) -> bool:
        if worker.extra:
            return self._unstuck_locked() > self._target
        return (
            self._dynamic
            and len(self._workers) > 1
            and monotonic() - worker.parked_at >= self.idle_retire
        )
