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
from types import AsyncGeneratorType, CoroutineType, FunctionType
from typing import TYPE_CHECKING, Any, overload

from ..operations import AsyncOperation, Cancelled, OperationState
from ..operations._current import ThreadState, thread_state
from ..operations._executor import spawn_remote
from ..operations._guard import safe_str
from ..operations._node import OpKind, Outcome, _is_final, _user_frame, run_after
from ..operations._tree import walk
from ..operations._typing import C, R, Ts
from ..platform import (
    RecursiveLock,
    WakeEvent,
    check_timeout,
    cpu_count,
    start_thread,
    thread_cpu_clock,
)
from ._blocking import BlockingPool
from ._clock import MonotonicClock, VirtualClock
from ._interrupt import cancel_roots, shut_down, wait_for_tree
from ._reactor import Reactor
from ._task import TaskState, describe_wait, on_cancel_running, step, strip_own_frame
from ._timers import FAR, Timer, TimerHeap, is_far
from ._waker import WaitEvent, describe_event
from ._worker import (
    BLOCKED_AFTER,
    COMPUTING,
    EXTRA_IDLE,
    IDLE_RETIRE,
    Worker,
    join_by,
    monotonic,
)

if TYPE_CHECKING:
    from ..operations._hooks import After
    from ._scope import Scope

__all__ = ["Runtime"]

logger = logging.getLogger("asyncop")

_RUNNING = OperationState.RUNNING
_CORO = OpKind.CORO
_SYNC = OpKind.SYNC
_SCOPE = OpKind.SCOPE
# Ready items a worker runs before it looks at the timers again.
_BATCH = 64
# How long interpreter exit waits for cancelled work before abandoning it.
EXIT_GRACE = 1.0
# The most worker threads a Runtime takes. Far more than any CPU count; a
# number past it is a mistake (a count of tasks, not of threads) that would
# start threads until the OS refuses.
MAX_WORKERS = 1024
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


# How long a worker pauses after an error escaped its loop.
_RECOVER_PAUSE = 0.01


def _log_exception(message: str, *args: object) -> None:
    """Log the exception being handled; never raise, whatever it or the args are.

    The args (an operation, a timer) are formatted by the logging module,
    which reports a ``__repr__`` that raises instead of raising itself.
    """
    try:
        logger.error(message, *args, exc_info=True)
    except BaseException:  # pragma: no cover - a broken handler or stream
        pass
# What a plain function may not return: work that would never run.
_NOT_A_RESULT = (CoroutineType, AsyncGeneratorType, WaitEvent)


def _unrun_result_refused(name: str, value: object) -> TypeError:
    """Refuse an operation's result that is work which would never run."""
    if isinstance(value, WaitEvent):
        value._awaited = True  # refused here: no second warning when collected
        what = f"an asyncop awaitable ({describe_event(value)})"
        fix = (
            "spawn an async def function that awaits it, "
            "e.g. 'async def nap(): await asyncop.sleep(10)'"
        )
    else:
        if isinstance(value, CoroutineType):
            value.close()
            what = "a coroutine"
        else:
            what = "an async generator"
        fix = "pass the async def function itself, as in spawn(fn, arg), not a lambda or wrapper"
    return TypeError(
        f"operation {name!r} ran a plain function that returned {what}, which would never "
        f"run; {fix}"
    )


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


class Runtime:
    """An asyncop runtime: worker threads, a ready queue and a timer heap.

    Args:
        workers: the number of worker threads; defaults to the CPU count.
        name: shown in thread names and ``repr``.
        clock: a clock with ``now()``; ``asyncop.testing.VirtualClock`` for
            tests. Defaults to the monotonic clock.

    Raises:
        ValueError: ``workers`` is less than 1 or more than ``MAX_WORKERS``
            (1024).
        TypeError: ``workers`` is not an integer.
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
    ) -> None:
        if workers is None:
            workers = cpu_count()
        elif isinstance(workers, bool) or not isinstance(workers, int):
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
        self.name = name if name is not None else f"asyncop-{id(self):x}"
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
        self._ready: deque[AsyncOperation] = deque()
        self._idle: list[Worker] = []
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
        self._watchdog_event = WakeEvent()
        self._watchdog_armed = False
        self._watchdog: Any = None
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
        from ._scope import Scope

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
        if not lines:
            return f"{self.name}: no live operations"
        return "\n".join([f"{self.name}:", *("  " + line for line in lines)])

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
            self._watchdog_event.set()
            watchdog = self._watchdog
        for worker in workers:
            if worker.handle is not None and not join_by(worker.handle, end):
                ended = False
        if watchdog is not None and not join_by(watchdog, end):
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
        return f"<Runtime {self.name!r} {state} workers={self._target}>"

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
                        woken = self._idle[-1]
                        self._wake_one_locked()
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
        """Queue ``op`` and wake a parked worker (or arrange for one).

        ``state`` is the calling thread's state, for callers that hold it.
        ``woken`` is a worker the caller woke for this item beforehand: if it
        is still up, between items (it took none meanwhile), and this is the
        only item queued, it will find the item, and nobody else is woken.
        """
        ready = self._ready
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
        worker = state.worker
        if (
            op._kind is _CORO
            and worker is not None
            and state.op is None
            and worker.runtime is self
            and not worker.parked
        ):
            # A coroutine task queued by this worker's own step (or timers):
            # the worker runs the queue when the step ends (the test of
            # _on_own_worker, inline: this is the hottest path). Should the
            # step not end, the watchdog hands the queue to another worker.
            if not self._watchdog_armed and not self._stopping:
                self._arm_watchdog_locked()
        elif self._idle:
            self._wake_one_locked()
        elif self._dynamic and self._unstuck_locked() < self._target:
            self._grow_locked(extra=False)
        elif not self._watchdog_armed and not self._stopping:
            self._arm_watchdog_locked()

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

    def _watch_soon(self) -> None:
        """``_watch_locked`` from a worker thread that does not hold the lock."""
        lock = self._lock
        lock.acquire()  # (worker thread only: it never runs signal handlers)
        try:
            self._watch_locked()
        finally:
            lock.release()

    def _watch_locked(self) -> None:
        """Make sure the watchdog looks: work waits on a busy worker."""
        if not self._watchdog_armed and not self._stopping:
            self._arm_watchdog_locked()

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
            if self._idle:
                if not self._virtual and self._on_own_worker(thread_state()):
                    self._watch_locked()
                else:
                    self._wake_one_locked()
            elif (
                self._dynamic
                and self._unstuck_locked() < self._target
                and not self._on_own_worker(thread_state())
            ):
                # Every worker started so far is busy: start one to fire it.
                self._grow_locked(extra=False)
            else:
                # Every worker is busy. Should none look at the timers by the
                # deadline (each stuck in a long callback), the watchdog hands
                # the due timer to an extra worker.
                self._watch_locked()
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
            self._worker_main, worker, name=f"{self.name}-{kind}-{worker.index}"
        )
        self._workers.append(worker)
        self._active += 1
        return worker

    def _grow_locked(self, *, extra: bool) -> bool:
        """Start a worker for work that waits; False if the OS refused the thread.

        The work stays queued either way: the watchdog tries again on its
        next round while it waits, so a refusal is logged, never raised into
        the push or the timer that asked.
        """
        try:
            self._start_worker_locked(extra=extra)
        except RuntimeError:
            _log_exception("asyncop: runtime %r could not start another worker thread", self)
            self._watch_locked()
            return False
        return True

    def _unstuck_locked(self) -> int:
        return sum(1 for worker in self._workers if not worker.replaced)

    def _wake_one_locked(self) -> None:
        """Pop the most recently parked worker and wake it."""
        worker = self._idle.pop()
        worker.parked = False
        self._active += 1
        worker.event.set()

    def _worker_main(self, worker: Worker) -> None:
        ready = self._ready
        state = thread_state()
        state.worker = worker
        worker.cpu_clock = thread_cpu_clock()
        try:
            while True:
                # No exception ends a worker: one that escaped a phase below
                # (a bug in asyncop, or user code it calls into) is logged
                # and the loop goes on. A dead worker would take its share
                # of the queue and the timers with it, silently. (A try
                # costs nothing until something raises.)
                try:
                    # 1. Run ready work.
                    for _ in range(_BATCH):
                        if not ready:
                            break  # (cheaper than the IndexError below)
                        try:
                            op = ready.popleft()
                        except IndexError:
                            break  # another worker took it
                        # Odd while busy: the watchdog times an item by seeing
                        # the same odd number on its looks (no clock read here).
                        worker.item_seq += 1
                        coro = worker.stepping = op._kind is _CORO
                        try:
                            if coro:
                                step(self, op, state)
                            else:
                                if self._next_deadline < _INF and not self._watchdog_armed:
                                    # This worker may be the one to fire the next
                                    # timer (it was woken to park on it), and the
                                    # callback may hold it past the deadline: have
                                    # the watchdog hand the timer on if so.
                                    self._watch_soon()
                                self._run_item(op, state)
                        except BaseException:  # pragma: no cover - a bug in asyncop
                            _log_exception("asyncop: worker failed running %r", op)
                        # Do not keep the last item alive from this frame: an
                        # unobserved failure is reported when it is collected.
                        op = None  # type: ignore[assignment]
                        worker.item_seq += 1
                        worker.replaced = False
                    # 2. Fire due timers (without reading the clock when none is set).
                    next_deadline = self._next_deadline
                    if next_deadline < _INF and next_deadline <= self.now():
                        self._fire_due_timers()
                    # 2b. Take the readiness of parked fds without the reactor's
                    # two thread hops, if that wakes something to run.
                    reactor = self._reactor
                    if reactor is not None and reactor._table:
                        state.keep_next_push = True
                        try:
                            woke = reactor.poll_ready()
                        finally:
                            state.keep_next_push = False
                        if woke:
                            continue
                    # 3. Park until the next deadline.
                    if not self._park(worker):
                        return
                except BaseException:
                    self._recover_worker(worker, state)
        finally:
            with self._lock:
                if worker in self._workers:  # left without _retire_locked (a bug)
                    self._retire_locked(worker)

    def _recover_worker(self, worker: Worker, state: ThreadState) -> None:
        """Log what escaped a worker's loop and put the worker back in shape."""
        _log_exception("asyncop: worker %r of runtime %r hit an error; it carries on", worker, self)
        state.op = None
        state.task = None
        state.keep_next_push = False
        if worker.item_seq & 1:
            worker.item_seq += 1
        worker.replaced = False
        with self._lock:
            if worker in self._idle:  # it failed between parking and waking
                self._idle.remove(worker)
                worker.parked = False
                self._active += 1
        # Should the same error come back at once, do not spin on it.
        time.sleep(_RECOVER_PAUSE)

    def _retire_locked(self, worker: Worker) -> None:
        """Take ``worker`` out of the pool, in the same locked step that decided it.

        Leaving the pool and the active count at once matters: a worker that
        still counted as active after deciding to leave would make the last
        parking worker think another one is busy, and it would then skip
        waking wait_all_blocked() or jumping the clock. Likewise two workers
        timing out together cannot both count the other as staying.
        """
        # Always called on the worker's own thread. From here on, what this
        # thread pushes must wake another worker: it runs no more queue.
        thread_state().worker = None
        if worker in self._workers:
            self._workers.remove(worker)
        if worker in self._idle:
            self._idle.remove(worker)
        else:
            self._active -= 1
        if self._next_deadline < _INF and not self._stopping:
            # This worker may be the one that was to fire the next timer:
            # it armed it from a step (which wakes nobody, the arming worker
            # looks at the timers before it parks), or a push of an earlier
            # deadline woke it to re-park on that deadline. The parked
            # workers still sleep towards the deadline they saw when they
            # parked, maybe later or none: hand the timer on, or the timer
            # waits for an unrelated wake-up, if one ever comes.
            if self._idle:
                self._wake_one_locked()
            elif self._active:
                self._watch_locked()

    def _park(self, worker: Worker) -> bool:
        """Park until woken or the next deadline; False when the worker must exit."""
        lock = self._lock
        lock.acquire()  # (worker thread only, see step): a worker parks after every burst
        try:
            if self._ready:
                return True
            if self._stopping:
                self._retire_locked(worker)
                return False
            deadline = self._timers.next_deadline()
            self._next_deadline = _INF if deadline is None else deadline
            timeout: float | None
            if self._active == 1 and self._idle_watchers and self._outside_work == 0:
                # This worker is the last one busy and is about to park:
                # every task is blocked. Wake the wait_all_blocked() waiters.
                watchers = self._idle_watchers
                self._idle_watchers = []
                for sub in watchers:
                    sub.fire(None)
                return True
            # Retire only after the check above, and not when a clock jump
            # is due: the last busy worker must still wake wait_all_blocked()
            # and jump the clock, even when it is an extra one on its way out.
            jump_due = self._autojump and self._active == 1 and deadline is not None
            if worker.extra and not jump_due and self._unstuck_locked() > self._target:
                self._retire_locked(worker)
                return False
            if self._virtual:
                if deadline is not None and deadline <= self.now():
                    return True
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
                    return True
                timeout = None
            elif deadline is None:
                timeout = None
            else:
                timeout = deadline - self.now()
                if timeout <= 0:
                    return True
            if worker.extra or (self._dynamic and len(self._workers) > 1):
                # May retire: look again after a while even if nobody pushes.
                # An extra worker parks while the worker it replaced is still
                # stuck; once that one is back, the LIFO idle stack never
                # wakes the extra, so it must notice the surplus by itself.
                limit = EXTRA_IDLE if worker.extra else self.idle_retire
                timeout = limit if timeout is None else min(timeout, limit)
            self._idle.append(worker)
            worker.parked = True
            self._active -= 1
            if self._dynamic:
                worker.parked_at = monotonic()  # for _may_retire_locked
        finally:
            lock.release()
        woken = worker.event.wait(timeout)
        if woken and not worker.parked:
            return True  # popped and woken by a push: nothing to undo
        with self._lock:
            if worker in self._idle:
                # Timed out (or a stale wake-up): nobody popped us.
                self._idle.remove(worker)
                worker.parked = False
                self._active += 1
                if (
                    not woken
                    and not self._ready
                    and not self._next_deadline <= self.now()
                    and self._may_retire_locked(worker)
                ):
                    self._retire_locked(worker)
                    return False
        return True

    def _may_retire_locked(self, worker: Worker) -> bool:
        if worker.extra:
            return self._unstuck_locked() > self._target
        return (
            self._dynamic
            and len(self._workers) > 1
            and monotonic() - worker.parked_at >= self.idle_retire
        )

    def _run_item(self, op: AsyncOperation, state: ThreadState) -> None:
        """Run one ready sync item. (The worker loop steps a coroutine item itself.)"""
        lock = self._lock
        lock.acquire()  # (worker thread only, see step)
        try:
            if not op._transition_to_running():
                return  # cancelled while queued: already finalized, never runs
        finally:
            lock.release()
        fn = op._fn
        args = op._args
        ctx = op._ctx
        assert fn is not None and ctx is not None
        state.op = op
        try:
            value = ctx.run(fn, *args)
            if value is not None and isinstance(value, _NOT_A_RESULT):
                raise _unrun_result_refused(op.name, value) from None
        except Cancelled:
            outcome, value, error = Outcome.CANCELLED, None, None
        except BaseException as exc:
            outcome, value, error = Outcome.ERROR, None, strip_own_frame(exc)
        else:
            outcome, error = Outcome.VALUE, None
        finally:
            state.op = None
        # Its waiters are woken before this worker looks for more work or
        # parks: a thread woken now has the OS's wake-up latency to cover,
        # and this worker's own bookkeeping then overlaps it instead of
        # coming first.
        op._end_work_on_worker(outcome, value, error)

    # ------------------------------------------------------------------
    # Watchdog: replace workers stuck in long synchronous calls
    # ------------------------------------------------------------------

    def _arm_watchdog_locked(self) -> None:
        if self._watchdog is None:
            try:
                self._watchdog = start_thread(
                    lambda _: self._watchdog_main(), None, name=f"{self.name}-watchdog"
                )
            except RuntimeError:
                # Called from pushes and timers, which must not fail for it:
                # stay disarmed, so that the next one tries again.
                _log_exception("asyncop: runtime %r could not start its watchdog thread", self)
                return
        self._watchdog_armed = True
        self._watchdog_event.set()

    def _watchdog_main(self) -> None:
        event = self._watchdog_event
        # Per worker: the item, when it was first seen, and the real time
        # and CPU time when last looked at.
        seen: dict[Worker, _Look] = {}
        while True:
            event.wait()
            # Look at once, then every half BLOCKED_AFTER: work that starts
            # waiting behind a stuck worker is handed on BLOCKED_AFTER later.
            while True:
                if self._stopping:
                    return
                # Look without the lock first: a worker steps tasks under it
                # many times a millisecond, and taking it from this thread
                # each round would make the two trade the GIL for it.
                if not self._work_waits() and self._disarm_watchdog():
                    # Keep the looks at items still running: one that was
                    # running then has run at least since, so it is judged
                    # by its whole age when the watchdog is armed again.
                    for worker, look in list(seen.items()):
                        if worker.item_seq != look[0]:
                            del seen[worker]
                    break
                try:
                    stuck = self._find_stuck(seen)
                    if stuck is not None:
                        self._replace(*stuck)
                except BaseException:
                    # The watchdog is what fires timers when every worker is
                    # stuck: it must outlive any error, like the workers.
                    _log_exception("asyncop: the watchdog of %r hit an error; it carries on", self)
                event.wait(BLOCKED_AFTER / 2)

    def _disarm_watchdog(self) -> bool:
        """Stop watching unless work or a timer still needs it; False if one does.

        Only tries the lock: a worker that holds it is busy, and waiting
        for it here would hold that worker up.
        """
        lock = self._lock
        if not lock.acquire(blocking=False):
            return False
        try:
            if self._work_waits() or (self._next_deadline < _INF and self._active):
                # A timer that a busy worker may be the only one to fire (it
                # was to fire it itself, or every worker is busy): keep watching.
                return False
            self._watchdog_armed = False
            return True
        finally:
            lock.release()

    def _work_waits(self) -> bool:
        """Whether queued work or a due timer waits for a worker."""
        return bool(self._ready) or self._next_deadline <= self.now()

    def _find_stuck(self, seen: dict[Worker, _Look]) -> tuple[Worker, int] | None:
        """A worker held by one item too long, with the item's number, or None.

        A worker is timed by sampling: the item it was busy with when first
        seen has run at least since then, so one still running
        ``BLOCKED_AFTER`` later is stuck (found within one more round).
        Reads what the workers publish without the lock; ``_replace`` checks
        again under it.
        """
        now = monotonic()
        for worker in list(self._workers):
            seq = worker.item_seq
            if not seq & 1 or worker.replaced:
                continue  # between items, or already replaced
            look = seen.get(worker)
            if look is None or look[0] != seq:
                seen[worker] = (seq, now, now, _cpu_time(worker))
                continue  # first look at this item
            if worker.stepping and _computing(worker, now, seen, look):
                continue
            if now - look[1] >= BLOCKED_AFTER:
                return worker, seq
        return None

    def _replace(self, worker: Worker, item: int) -> None:
        """Hand the queue behind ``worker``'s item to a parked or an extra worker."""
        with self._lock:
            if (
                self._stopping
                or not self._work_waits()
                or worker.item_seq != item
                or worker.replaced
                or worker not in self._workers
            ):
                return  # it moved on meanwhile
            if self._idle:
                # The queue waits behind this worker's item while another
                # worker is parked: wake that one.
                self._wake_one_locked()
            elif self._grow_locked(extra=True):
                worker.replaced = True


# What the watchdog saw of one worker: the item's number, when it first saw
# that item, and the real time and the thread's CPU time at its last look.
_Look = tuple[int, float, float, float]


def _cpu_time(worker: Worker) -> float:
    """The worker thread's CPU time, or NaN where it cannot be read."""
    clock = worker.cpu_clock
    if clock is None:
        return math.nan
    try:
        return clock()
    except OSError:  # pragma: no cover - the thread is just ending
        return math.nan


def _computing(worker: Worker, now: float, seen: dict[Worker, _Look], look: _Look) -> bool:
    """Whether ``worker``'s current coroutine step kept its thread on the CPU.

    Compares the thread's CPU time with real time since the watchdog last
    looked at the same item (``look``), and records this look.
    """
    cpu = _cpu_time(worker)
    seen[worker] = (look[0], look[1], now, cpu)
    if now <= look[2]:
        return True  # nothing to compare with yet: look again next round
    # NaN (no CPU clock) compares false: the step counts as blocked.
    return (cpu - look[3]) / (now - look[2]) >= COMPUTING
