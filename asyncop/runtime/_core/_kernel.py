"""The kernel: the state every part of the runtime shares, and its calls.

A :class:`Kernel` holds:

- the **lock** (``_lock``, a platform ``RecursiveLock``), which protects
  everything below. It is held only for short, non-blocking bookkeeping;
  user code never runs under it. Whatever must happen after a change but
  outside the lock (``on_cancel`` callbacks, waking waiters) is collected in
  an ``after`` list and run once the lock is released;
- the **ready queues**: two for coroutine tasks, stepped by the worker that
  holds the ``_lane`` (by any worker in parallel mode): ``_woken`` for tasks
  an event woke, ``_ready`` for new tasks and tasks that yielded (see "Which
  task runs next" in ``_worker.py``); and ``_sync_ready`` for sync callbacks, at most
  ``workers`` at once;
- the **timer heap** (``_timers``) and its cached earliest deadline;
- the **workers**: the pool, the idle stack (LIFO) and the poller, the one
  parked worker waiting in the I/O multiplexer; and the home, the thread
  that steps every coroutine task while it waits in ``anyio.run()``;
- the **roots**: the live top-level operations, in insertion order, so that
  ``shutdown`` can cancel them and ``dump`` can show them;
- the **instruments** (``_instruments``): None while none is installed,
  which is all an event then costs (``add_instrument``; see
  ``_instruments.py``).
- the **deadlock watch** (``_deadlocks``, ``_deadlock.py``), which the
  monitor asks at each look whether the runtime is stuck.

``Kernel.__init__`` sets every field. Those that every task reads (the
queues and their numbers, the lock, the clock readers, the idle stack and
the workers...) are declared on the base ``KernelFields``
(``_fields.py``): compiled, the push (``push_locked``, in ``_waker.py``,
which the stepper, a spawn and a wake call in C), the batch loop, the
stepper, a wake and the work cycle read them as C struct members.

The modules below it (``_task``, ``_waker``, ``_awaitables``, ``_reactor``,
``_scope``, the work cycle in ``_worker`` and ``_monitor``) reach the
runtime through these calls alone:

=============================  ===============================================
``now()``                      read the clock
``_new_operation(...)``        make a node, link it, and maybe queue it (``_spawn.py``)
``_push_locked(op)``           queue a ready operation, waking a worker if needed
``_add_timer_locked(...)``     arm a timer; ``_cancel_timer_locked(timer)``
``_fire_due_timers()``         fire what is due (workers and the monitor)
``_get_reactor()``             the socket-readiness table, made on first use
``_wake_one_locked()``         unpark a worker; ``_unpark_locked(worker)``
``_work_for_worker_locked()``  whether a worker about to park has work
``_sync_slot_free_locked()``   whether a sync callback may start
``_grow_locked(extra=...)``    start a worker, up to ``max_threads``
=============================  ===============================================

(the calls about the worker threads are the kernel's part in ``_pool.py``;
arming and cancelling a timer are C methods of its base ``TimerCalls``,
``_timer_calls.py``, which a sleep calls in C)

and the node hooks the operations layer calls (``operations/_hooks.py``):
``_track_root_locked``, ``_on_final_locked`` and ``_on_cancel_running_locked``
(with ``_new_operation``, C methods of the base ``NodeHooks``, ``_spawn.py``),
``_arm_deadline_locked``, and for a cancel with a grace ``_request_stop``
and ``_wake_stop_waiters_locked`` (``_grace.py``, which keeps its requests
and waiting tasks in ``_stop_requests`` and ``_stop_waiters``). ``Runtime``
(``_scheduler.py``) builds on the kernel: it starts the threads, and it
is the public face (``spawn``, ``run``, ``scope``, ``shutdown``, ``dump``).

Pipeline: ``submit`` -> a ready queue -> wake a parked worker -> the worker
steps the task or runs the callback (``_worker.py``).

The runtime's state (``RuntimeState``) is this module's: RUNNING, then
CLOSING once ``shutdown()`` begins (no new top-level work), then STOPPED
(the threads are told to stop). Only ``_transition_to_closing_locked`` and
``_transition_to_stopped_locked`` write it, under the lock; the first
says whether this was the first ``shutdown()`` pass, which alone runs the
``at_shutdown`` callbacks. Readers ask ``_closing`` and ``_stopping``.
"""

from __future__ import annotations

import enum
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from ...operations import (
    AsyncOperation,
    OperationState,
    OpKind,
)
from ...platform import RecursiveLock, ThreadHandle
from .._deadlock import DeadlockMode, DeadlockWatch
from .._grace import StopRequest, request_stop, wake_stop_waiters_locked
from .._introspect import owner_of
from ._blocking import BlockingPool
from ._clock import MonotonicClock, clock_reader, stamp_reader
from ._instruments import Instruments
from ._instruments import add_instrument as _add_instrument
from ._instruments import remove_instrument as _remove_instrument
from ._items import _log_exception
from ._monitor import Monitor
from ._pool import WorkerPool
from ._reactor import Reactor
from ._timers import FAR, TimerHeap
from ._waker import push_locked
from ._worker import IDLE_RETIRE, Worker

if TYPE_CHECKING:  # (the stand-in's signatures, for cython.locals below)
    from ...platform import pure_cython as cython
else:
    try:
        import cython
    except ImportError:  # run as Python, without Cython installed
        from ...platform import pure_cython as cython

if TYPE_CHECKING:
    from ...operations import After

__all__ = ["DEFAULT_EXTRA_THREADS", "Kernel", "RuntimeState"]

# Worker threads a runtime may start beyond ``workers`` by default, to keep
# work moving while workers are held by long callbacks or steps.
DEFAULT_EXTRA_THREADS = 8
_INF = float("inf")


class RuntimeState(enum.Enum):
    """A runtime's life: RUNNING, then CLOSING (no new work), then STOPPED."""

    RUNNING = "running"
    # shutdown() began: no new top-level work; live work is being ended.
    CLOSING = "closing"
    # The threads are told to stop.
    STOPPED = "stopped"


class Kernel(WorkerPool):
    """The runtime's shared state and the calls the modules below it use.

    Built by ``Runtime.__init__`` with checked arguments; starts no thread.
    """

    def __init__(
        self,
        workers: int,
        *,
        name: str,
        clock: Any,
        parallel: bool,
        max_threads: int,
        deadlock: DeadlockMode = DeadlockMode.WARN,
        deadlock_after: float = 1.0,
    ) -> None:
        self.name = name
        self._max_threads = max_threads
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
        # The clock read on the hot paths: time.monotonic itself for the
        # real clock, without the two calls of now() below.
        self._now: Callable[[], float] = clock_reader(self._clock)
        # The clock read for the timestamps of op.stats: _now, unless a
        # user's clock could raise (see stamp_reader).
        self._stamp: Callable[[], float] = stamp_reader(self._clock)
        self._virtual = bool(getattr(self._clock, "virtual", False))
        self._autojump = self._virtual and bool(getattr(self._clock, "autojump", False))
        # With it, an autojump also passes over I/O waits once nothing has
        # woken a task for that long in real time (see _worker.py): the
        # _queue_seq last seen idle, and since when (time.monotonic()).
        self._io_grace: float | None = (
            getattr(self._clock, "io_grace", None) if self._autojump else None
        )
        self._quiet_seq = -1
        self._quiet_since = 0.0
        self._target = workers
        self._dynamic = os.environ.get("ASYNCOP_DYNAMIC_WORKERS", "") == "1"
        # Ready coroutine tasks, stepped by whoever holds the lane (by any
        # worker in parallel mode), and ready sync callbacks.
        self._ready: deque[AsyncOperation] = deque()
        self._woken: deque[AsyncOperation] = deque()
        self._queue_seq = 0  # the last queued_at given to a queued task
        self._overtaken = 0  # woken tasks run ahead of the head of _ready
        self._sync_ready: deque[AsyncOperation] = deque()
        self._lane = threading.Lock()
        self._idle: list[Worker] = []
        # The parked worker that waits in the I/O multiplexer, if any, and
        # how many times workers have polled it (the monitor compares).
        self._poller: Worker | None = None
        self._polls = 0
        # Started past max_threads for the tasks (_give_steps_a_thread_locked).
        self._stepper: Worker | None = None
        self._home: Worker | None = None  # anyio.run()'s thread, while set (_home.py)
        self._workers: list[Worker] = []
        # Threads of workers that left the pool and may still be on their
        # way out: shutdown() joins them too (the dead ones are dropped).
        self._leaving: list[ThreadHandle] = []
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
        self._state = RuntimeState.RUNNING
        # Whether the runtime is stuck, looked at by the monitor (_deadlock.py).
        self._deadlocks = DeadlockWatch(self, deadlock, deadlock_after)
        self._monitor = Monitor(self)
        self.idle_retire = IDLE_RETIRE
        self._blocking = BlockingPool(self.name)
        self._reactor: Reactor | None = None
        # Subscriptions of wait_all_blocked(), fired when the runtime idles, each
        # with whether a blocking call running in another thread counts as busy.
        self._idle_watchers: list[tuple[Any, bool]] = []
        # The callbacks of Runtime.at_shutdown(), run (and dropped) by the
        # first shutdown() pass. Invariant: none is added once CLOSING.
        self._at_shutdown: list[Callable[[], object]] = []
        # The instruments (see _instruments.py): None while none is installed,
        # which every event tests, and all it costs then.
        self._instruments: Instruments | None = None
        # cancel(grace=...): the pending requests, and the tasks parked in
        # wait_stop_requested() with where they wait (see _grace.py).
        self._stop_requests: dict[AsyncOperation, StopRequest] = {}
        self._stop_waiters: dict[Any, AsyncOperation] = {}

    def now(self) -> float:
        """Read the runtime's clock, in seconds."""
        return self._now()

    def add_instrument(self, obj: object) -> None:
        """Tell ``obj`` of every operation's life in this runtime, from now on.

        ``obj`` has any of the methods ``spawned(op)``, ``step_started(op)``,
        ``step_ended(op)``, ``parked(op, reason)``, ``woken(op)``,
        ``cancelled(op, reason)`` and ``ended(op)``; each is called on the
        thread where its event happens, outside the runtime lock. A park's
        ``reason`` describes what the task waits on when made a ``str``. A method
        that raises (any exception, a ``BaseException`` too) gets its
        instrument removed, and the error logged on the ``asyncop`` logger;
        the event goes on as without it. May be called from any thread, while the runtime
        runs; with no instrument installed the runtime pays nothing for them.
        Not a cancellation point.

        Raises:
            TypeError: ``obj`` has none of those methods, or is a class
                rather than an instance of one.
            ValueError: ``obj`` is installed already.
            RuntimeError: the runtime is shut down.
        """
        _add_instrument(self, obj)

    def remove_instrument(self, obj: object) -> None:
        """Stop telling ``obj`` of the runtime's operations (see ``add_instrument``).

        A hook that another thread has already picked up may still run once.
        Not a cancellation point.

        Raises:
            ValueError: ``obj`` is not installed (never added, removed already,
                or removed when one of its methods raised).
        """
        _remove_instrument(self, obj)

    def _extra_registrations_locked(self) -> int:
        reactor = self._reactor
        return (reactor.waits() if reactor is not None else 0) + len(self._stop_waiters)

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

    # Making an operation, linking it and queueing it: see _spawn.py.
    # AsyncOperation.cancel(grace=...), and a shield dropped: see _grace.py.
    _request_stop = request_stop
    _wake_stop_waiters_locked = wake_stop_waiters_locked

    def _wake_early(self) -> Worker | None:
        """Wake a parked worker for an operation a user thread is about to queue.

        A user thread submits, and usually waits next. Waking a worker first
        and building the operation while the OS wakes it (tens of
        microseconds across CPUs) takes the build off the round trip's
        critical path. The push then wakes nobody else, unless that worker
        has gone back to sleep meanwhile (it looks at the queue under the
        lock first). Returns the worker woken, if any. Not for a worker's
        own submits: the worker runs the queue itself, or wakes one then.
        """
        with self._lock:
            if self._idle and not self._closing:
                return self._wake_one_locked()
        return None

    # -- the runtime's state -------------------------------------------------

    @property
    def _closing(self, _running: RuntimeState = RuntimeState.RUNNING) -> bool:
        """Whether the runtime takes no new top-level work (CLOSING or STOPPED)."""
        return self._state is not _running

    @property
    def _stopping(self, _stopped: RuntimeState = RuntimeState.STOPPED) -> bool:
        """Whether the threads are told to stop (STOPPED)."""
        return self._state is _stopped

    def _transition_to_closing_locked(self) -> bool:
        """RUNNING -> CLOSING; False, and no change, if it was closing or stopped."""
        if self._state is not RuntimeState.RUNNING:
            return False
        self._state = RuntimeState.CLOSING
        return True

    def _transition_to_stopped_locked(self) -> bool:
        """RUNNING or CLOSING -> STOPPED; False, and no change, if it was stopped.

        A shutdown() that found the runtime closing already (a second one)
        comes here from CLOSING.
        """
        if self._state is RuntimeState.STOPPED:
            return False
        self._state = RuntimeState.STOPPED
        return True

    def _check_parent(self, parent: object, name: str) -> NoReturn:
        """Refuse a parent that is no operation of this runtime (the caller found it so)."""
        if type(parent) is not AsyncOperation:
            raise TypeError(
                f"parent must be an AsyncOperation, got {type(parent).__name__}; "
                "pass an operation made by this runtime"
            )
        raise RuntimeError(
            f"cannot link operation {name!r} under {parent.name!r}, which belongs "
            f"to runtime {parent.runtime.name!r}; make it with that runtime"
        )

    def _submit(self, op: AsyncOperation) -> None:
        if not isinstance(op, AsyncOperation):
            raise TypeError(
                f"submit() needs an AsyncOperation, got {type(op).__name__}; "
                "make one with create() first"
            )
        if owner_of(op) is not self:
            raise RuntimeError(
                f"operation {op.name!r} belongs to runtime {op.runtime.name!r}; submit it there"
            )
        with self._lock:
            if op._kind is OpKind.SCOPE:
                raise RuntimeError(
                    f"operation {op.name!r} is a scope, whose work is its with-block, "
                    "and cannot be submitted; spawn the work into the scope instead"
                )
            root = op.parent is None
            if (
                root
                and self._closing
                and op._state is OperationState.CREATED
                and op._outcome is None
            ):
                raise RuntimeError(
                    f"Runtime {self.name!r} is shut down and takes no new operations; "
                    f"cannot submit {op.name!r}, make a new Runtime"
                )
            if not op._transition_to_pending():
                if op._outcome is not None or op._final:
                    state = "cancelled" if op._cancelled else op._state.name
                    raise RuntimeError(
                        f"cannot submit operation {op.name!r}: it is {state}; "
                        "create a new operation to run the callback again"
                    )
                raise RuntimeError(
                    f"operation {op.name!r} was already submitted (it is {op._state.name}); "
                    "create a new operation to run the callback again"
                )
            if root:
                self._track_root_locked(op)
            self._push_locked(op)

    # Queueing a ready operation and waking a worker for it: see push_locked
    # in _waker.py (compiled, the step, a spawn and a wake call it in C).
    _push_locked = push_locked

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

    def _track_root_locked(self, op: AsyncOperation) -> None:
        self._roots[op] = None

    @cython.locals(self="CTimerCalls", op="CNode")
    def _arm_deadline_locked(self, op: AsyncOperation) -> bool:
        timer = op._deadline_timer
        if timer is not None:
            op._deadline_timer = None
            self._timers.cancel(timer)
        deadline = op._deadline
        if deadline is None:
            return False
        if deadline <= self._now():
            return True
        op._deadline_timer = self._add_timer_locked(deadline, op._expire_locked, inline=False)
        return False

    @cython.locals(self="CKernel", timer="CTimer")
    def _fire_due_timers(self) -> None:
        after: After = []
        with self._lock:
            due = self._timers.pop_due(self._now())
            for timer in due:
                callback = timer.callback
                # Each on its own: the timers behind a failing one are
                # already out of the heap and must fire all the same.
                try:
                    if timer.inline:
                        callback()
                    else:
                        # A deadline's cancel: marked in this same hold of
                        # the lock as the timer left the heap, so that no
                        # checkpoint sees neither (its on_cancel runs after).
                        callback(after)
                except BaseException:
                    _log_exception("asyncop: timer %r failed", timer)
            nxt = self._timers.next_deadline()
            self._next_deadline = _INF if nxt is None else nxt
        for action in after:
            try:
                action()  # the wake-ups and on_cancel callbacks of a deadline's cancel
            except BaseException:
                _log_exception("asyncop: a deadline's cancel raised; the timers go on")

    def _clock_advanced(self) -> None:
        """The virtual clock moved: have a worker fire what became due."""
        with self._lock:
            if self._idle:
                self._wake_one_locked()
            else:
                self._monitor.deadline_pending()
