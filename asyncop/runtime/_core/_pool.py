"""The worker pool: starting, waking and counting the runtime's worker threads.

:class:`WorkerPool` is a part of the :class:`~asyncop.runtime._core._kernel.Kernel`
(its base class), and reads and writes the kernel's fields under the
runtime lock, as every ``_locked`` method does:

- ``_workers``: every live worker (regular, extra and the stepper);
  ``_idle``, the parked ones (LIFO, the poller among them); ``_active``,
  the count of workers not parked;
- growing: ``_grow_locked`` starts an extra worker for work that waits, up
  to ``max_threads``; ``_give_steps_a_thread_locked`` gives queued tasks a
  thread when every worker runs a callback, past the cap if need be (the
  *stepper*, see ``_worker.py``);
- waking: ``_wake_one_locked`` pops the most recently parked worker (the
  home for coroutine tasks while a thread is the home, ``_wake_with_home_locked``);
  ``_unpark_locked`` counts a worker active again only if its transition
  to BUSY happened (``_worker.py`` owns a worker's state), so a worker
  that two threads unpark is counted once;
- counting: whether a sync callback may start (``_sync_slot_free_locked``),
  whether a worker about to park has work (``_work_for_worker_locked``),
  and how many workers could still move work on
  (``_effectively_active_locked``, for the virtual clock's jump and
  ``wait_all_blocked()``, whose waiters ``_fire_idle_watchers_locked``
  wakes: the last worker to park, or the last callback to fall asleep
  inside asyncop while none is parked, ``_look_if_every_thread_sleeps_locked``).

The workers themselves (their loop and how they park) are ``_worker.py``;
a worker thread runs ``_run_worker``, which ``Runtime`` extends with the
thread's async generator hooks (``runtime/_asyncgens.py``).
The fields that every task reads (the queues, the idle stack, the worker
list...) are declared on :class:`~asyncop.runtime._core._fields.KernelFields`,
the base of its base ``NodeHooks`` (``_spawn.py``), C struct members when
compiled; the kernel sets them all in its ``__init__``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...platform import start_thread
from ._items import _log_exception
from ._spawn import NodeHooks
from ._worker import Worker, WorkerState, worker_main

if TYPE_CHECKING:
    from ...operations import AsyncOperation
    from ._monitor import Monitor
    from ._timers import TimerHeap

if TYPE_CHECKING:  # (the stand-in's signatures, for cython.locals below)
    from ...platform import pure_cython as cython
else:
    try:
        import cython
    except ImportError:  # run as Python, without Cython installed
        from ...platform import pure_cython as cython

__all__ = ["WorkerPool"]


class WorkerPool(NodeHooks):
    """The kernel's calls about its worker threads; see the module docstring."""

    if TYPE_CHECKING:
        # The kernel's fields and calls this part uses (set in Kernel.__init__).
        name: str
        _workers: list[Worker]
        _idle: list[Worker]
        _active: int
        _worker_seq: int
        _max_threads: int
        _target: int
        _parallel: bool
        _lane: threading.Lock
        _stepper: Worker | None
        _poller: Worker | None
        _home: Worker | None
        _ready: deque[AsyncOperation]
        _woken: deque[AsyncOperation]
        _sync_ready: deque[AsyncOperation]
        _monitor: Monitor
        _timers: TimerHeap
        _outside_work: int
        _autojump: bool
        # wait_all_blocked()'s subscriptions, each with its ``threads`` flag.
        _idle_watchers: list[tuple[Any, bool]]
        _clock: Any
        _reactor: Any
        _next_deadline: float

        @property
        def _stopping(self) -> bool: ...

        _now: Callable[[], float]

        def _io_waiting(self) -> bool: ...

    def _start_worker_locked(self, *, extra: bool, steps_only: bool = False) -> Worker:
        """Start a worker thread.

        Raises:
            RuntimeError: the OS refused the thread; the pool is unchanged.
        """
        self._worker_seq += 1
        owner: Any = self  # (the Kernel this pool is part of)
        worker = Worker(owner, self._worker_seq, extra=extra, steps_only=steps_only)
        kind = "stepper" if steps_only else "extra" if extra else "worker"
        # Start first, then count it: a refused thread leaves no worker
        # behind that the pool would wait for. The new thread cannot look
        # at the pool before this returns: it parks under the lock we hold.
        worker.handle = start_thread(
            owner._run_worker, worker, name=f"{self.name}-{kind}-{worker.index}"
        )
        self._workers.append(worker)
        self._active += 1
        return worker

    def _run_worker(self, worker: Worker) -> None:
        """The body of a worker thread (``Runtime`` adds its async generator hooks)."""
        owner: Any = self  # (the Kernel this pool is part of)
        worker_main(owner, worker)

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
        """The workers that take callbacks and are not held by one long item."""
        return sum(1 for worker in self._workers if not worker.replaced and not worker.steps_only)

    def _every_worker_in_callbacks_locked(self) -> bool:
        """Whether every worker but the stepper runs a sync callback (or waits in one)."""
        return all(worker.in_sync or worker.steps_only for worker in self._workers)

    def _give_steps_a_thread_locked(self, *, waiting_only: bool) -> bool:
        """Give queued tasks a thread when every worker runs a callback.

        Coroutine steps never wait for a callback to end: a callback may be
        waiting, inside asyncop, for the very task that waits for a thread.
        Below ``max_threads`` this starts an extra worker; at the cap it
        starts the *stepper*, one thread past the cap that steps tasks and
        never takes a callback, so that the cap holds callbacks only. With
        ``waiting_only``, it acts only when every callback waits inside
        asyncop (one that runs will end by itself: the monitor covers it).

        Returns:
            Whether it woke or started a thread.
        """
        if not (self._ready or self._woken) or self._stopping:
            return False
        if self._home is not None:
            return False  # they wait for the home, which runs no callback
        if not self._parallel and self._lane.locked():
            return False  # its holder steps them
        for worker in self._workers:
            if worker.steps_only:
                continue
            if not worker.in_sync:
                return False  # it comes back to the queue (or was just woken for it)
            if waiting_only and worker.holds_sync_slot():
                return False
        stepper = self._stepper
        if stepper is not None:
            if not self._unpark_locked(stepper):
                return False  # it is not parked: it comes back to the queue
            stepper.event.set()
            return True
        if len(self._workers) < self._max_threads:
            return self._grow_locked(extra=True)
        try:
            self._stepper = self._start_worker_locked(extra=True, steps_only=True)
        except RuntimeError:
            _log_exception("asyncop: runtime %r could not start a thread to step tasks", self)
            return False
        self._monitor.wake()
        return True

    def _look_if_every_thread_sleeps_locked(self) -> None:
        """Do what the last worker to park does, for a callback falling asleep.

        For a callback about to sleep inside asyncop while no worker is
        parked (a parking worker makes the same test itself): when every
        worker sleeps in a callback, nothing runs, so the
        ``wait_all_blocked()`` waiters are woken; failing that, only a timer
        can move the work on, so a virtual clock jumps to the next deadline.
        """
        if (
            self._ready
            or self._woken
            # (Callbacks queued at max_threads wait for these very threads.)
            or (self._sync_ready and len(self._workers) < self._max_threads)
            or self._effectively_active_locked() != 0
        ):
            return
        if self._idle_watchers and self._fire_idle_watchers_locked():
            return  # a task was woken: no time need pass
        if not self._autojump:
            return
        deadline = self._timers.next_deadline()
        if deadline is not None and self._outside_work == 0 and not self._io_waiting():
            self._clock._jump_to(deadline)

    def _fire_idle_watchers_locked(self) -> bool:
        """Every task is blocked: wake the ``wait_all_blocked()`` waiters; False if none woke.

        Those that count a blocking call in another thread as busy wake
        only once none runs.
        """
        outside = self._outside_work
        due = [w for w in self._idle_watchers if outside == 0 or not w[1]]
        if not due:
            return False
        self._idle_watchers = [w for w in self._idle_watchers if outside and w[1]]
        for sub, _ in due:
            sub.fire(None)
        return True

    def _effectively_active_locked(self) -> int:
        """The workers not parked, less those whose callback sleeps inside asyncop.

        Such a callback waits for something a task or another thread does:
        when every other worker is parked, nothing will wake it but a timer
        (for wait_all_blocked() and the virtual clock's jump).
        """
        active = self._active
        for worker in self._workers:
            ts = worker.thread_state
            if worker.in_sync and ts is not None and ts.waits_in_asyncop():
                active -= 1
        return active

    # (Compiled, the kernel's and the workers' fields are read in C: see _pool.pxd.)
    @cython.locals(self="CKernel", idle="list", worker="CWorker", other="CWorker")
    def _wake_one_locked(self) -> Worker:
        """Pop a parked worker and wake it: the most recently parked one.

        The poller (parked in the multiplexer) stays there while another
        worker is parked: it keeps socket readiness on the coroutine side.
        """
        idle = self._idle
        if self._home is not None:
            return self._wake_with_home_locked()
        worker = idle.pop()
        if worker is self._poller and idle:
            other = idle.pop()
            idle.append(worker)
            worker = other
        self._rouse_locked(worker)
        return worker

    @cython.locals(self="CKernel", idle="list", worker="CWorker")
    def _wake_with_home_locked(self) -> Worker:
        """``_wake_one_locked`` while a thread is the home (see ``runtime/_home.py``).

        Coroutine tasks are the home's alone: it is woken while one waits, and
        when it is the only worker parked (a timer may be due); otherwise the
        most recently parked other worker is, for a callback or a timer.
        """
        idle = self._idle
        home = self._home
        assert home is not None
        others = [other for other in idle if other is not home]
        if not others or (home in idle and (self._ready or self._woken)):
            worker = home
        else:
            worker = others[-1]
            if worker is self._poller and len(others) > 1:
                worker = others[-2]  # (the poller stays in the multiplexer)
        idle.remove(worker)
        self._rouse_locked(worker)
        return worker

    @cython.locals(self="CKernel", worker="CWorker")
    def _rouse_locked(self, worker: Worker, _polling: WorkerState = WorkerState.POLLING) -> None:
        """Wake ``worker``, just taken off the idle stack, where it parked.

        The poller is parked in the multiplexer, and the wake-up channel
        ends its wait; any other worker waits on its own event.
        """
        polling = worker.state is _polling
        self._unpark_locked(worker)
        if polling:
            reactor = self._reactor
            assert reactor is not None
            reactor.wake_poller()
        else:
            worker.event.set()

    @cython.locals(self="CKernel")
    def _hand_to_home_locked(self, always: bool = False) -> None:
        """Wake the home for the coroutine tasks queued (``always``: at all), if it is parked.

        For a worker that is not the home and finds tasks queued: a task it
        queued itself (from a timer or a poll) woke nobody, as the push
        counts on the queuing worker to step it.
        """
        home = self._home
        if home is not None and (always or self._ready or self._woken) and home in self._idle:
            self._idle.remove(home)
            self._rouse_locked(home)

    @cython.locals(self="CKernel", worker="CWorker")
    def _unpark_locked(self, worker: Worker) -> bool:
        """``worker`` (already off the idle stack) is busy again; False if it was not parked."""
        if not worker._transition_to_busy():
            return False
        self._active += 1
        if self._monitor._asleep:
            self._monitor.wake()
        return True

    @cython.locals(self="CKernel", worker="CWorker", busy="Py_ssize_t")
    def _sync_slot_free_locked(self) -> bool:
        """Whether fewer than ``workers`` sync callbacks hold a slot."""
        busy = 0
        for worker in self._workers:
            if worker.in_sync and worker.holds_sync_slot():
                busy += 1
        return busy < self._target

    @cython.locals(self="CKernel")
    def _work_for_worker_locked(self) -> bool:
        """Whether a worker about to park has work it may take instead."""
        return bool(
            (
                (self._ready or self._woken)
                and (self._parallel or not self._lane.locked())
                and self._home is None  # (else the home's, see _hand_to_home_locked)
            )
            or (self._sync_ready and self._sync_slot_free_locked())
        )

    def _work_waits_locked(self, timers: bool = True) -> bool:
        """Whether work or (with ``timers``) a due timer waits for a worker."""
        if self._work_for_worker_locked():
            return True
        return timers and self._next_deadline <= self._now()
