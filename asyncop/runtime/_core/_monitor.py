"""The monitor: one thread per runtime that watches the workers.

While any worker is busy, the monitor looks at them every ``tick`` seconds
(sooner when a timer falls due before that), and:

1. **fires due timers** that no worker has fired: a deadline of a sync
   operation or of a scope lands on time even while every worker runs
   CPU-bound or blocked sync code;
2. **takes socket readiness** when no worker polls the multiplexer (every
   worker held by long work), so that it is not left waiting;
3. **hands work on** from a worker held by one item for ``blocked_after``
   seconds, when that work could run elsewhere: it wakes a parked worker,
   or starts an *extra* one, up to the runtime's ``max_threads`` (at the
   cap callbacks wait, and one WARNING says so; tasks get the *stepper*,
   a thread past the cap that never takes a callback). In the default mode the
   coroutine queue behind a long step waits for it, as in asyncio and trio:
   no other worker may step tasks while the lane is held. A step that keeps
   its thread computing (it used at least ``COMPUTING`` of a CPU since the
   last look) is never given an extra thread: under the GIL the two would
   only take turns;
4. **reports slow steps**: a coroutine step that has run for ``slow_step``
   seconds without awaiting logs one WARNING on the ``asyncop`` logger,
   naming the task and the line it is on. The monitor only samples, and on
   a loaded machine it may not look during a step just over the threshold;
   the worker times every step, and one that ran ``slow_step`` or longer
   unseen is reported as it ends (:meth:`Monitor.slow_step_ended`), naming
   the line of the await that ended it: the slow code is just before it, in
   the same function, where its own line is no longer known;
5. **watches for a stuck runtime** (``_deadlock.py``): each look asks the
   deadlock watch whether nothing can wake a task any more, and for how
   long that must last before it counts.

When every worker is parked, the monitor sleeps without a timeout (0 %
CPU), or until the deadlock watch needs its next look; the first worker to
wake up wakes it. Its thresholds are attributes
of the :class:`Monitor`, passed in when the runtime makes it.

The monitor never runs user code other than what a due deadline runs (the
cancel walk and its ``on_cancel`` callbacks), which a worker would run in
its place.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
from typing import TYPE_CHECKING, Any

from ...operations import every_thread_state, safe_str
from ...platform import ThreadHandle, WakeEvent, start_thread
from ._items import _log_exception
from ._worker import BLOCKED_AFTER, COMPUTING, Worker, monotonic

if TYPE_CHECKING:
    from ...operations import AsyncOperation
    from ._kernel import Kernel

__all__ = ["SLOW_STEP", "TICK", "Monitor", "current_line"]

logger = logging.getLogger("asyncop")

# How often the monitor looks while a worker is busy.
TICK = 0.025
# A coroutine step running this long without awaiting is reported.
SLOW_STEP = 0.1
# Looks in a row with every worker parked before the monitor sleeps for good.
IDLE_LOOKS = 4
# How long past a deadline the monitor fires a timer that no worker fired:
# a busy worker fires it at the end of its batch, usually well before.
SLACK = 0.002
_INF = float("inf")

# What the monitor saw of one worker: the item's number, when it first saw
# that item, and the real time and the thread's CPU time at its last look.
_Look = tuple[int, float, float, float]


class Monitor:
    """The monitor thread of one runtime; see the module docstring."""

    def __init__(
        self,
        runtime: Kernel,
        *,
        tick: float = TICK,
        blocked_after: float = BLOCKED_AFTER,
        slow_step: float = SLOW_STEP,
    ) -> None:
        self.runtime = runtime
        self.tick = tick
        self.blocked_after = blocked_after
        self.slow_step = slow_step
        self._event = WakeEvent()
        self._thread: ThreadHandle | None = None
        self._lock = threading.Lock()
        # True while it sleeps without a timeout (every worker parked), and
        # before its thread is started.
        self._asleep = True
        # When it means to look next, on the runtime's clock (inf: asleep).
        self._next_look_at = _INF
        self._seen: dict[Worker, _Look] = {}
        # The item each worker was last reported slow for (by the monitor,
        # or by the worker as the step ended): one report per step.
        self._warned: dict[Worker, int] = {}
        self._cap_warned = False
        # Looks in a row that found every worker parked.
        self._idle_looks = 0
        # The runtime's poll count at the last look: unchanged for a whole
        # tick means no worker polled the multiplexer meanwhile.
        self._polls_seen = -1

    # -- called by the runtime ------------------------------------------------

    def start(self) -> None:
        """Start the thread (the runtime's workers are starting, busy).

        Raises:
            RuntimeError: the OS refused the thread.
        """
        self._thread = start_thread(self._main, None, name=f"{self.runtime.name}-monitor")

    def wake(self) -> None:
        """A worker became busy: start looking, if asleep."""
        if self._asleep and self._thread is not None:
            self._asleep = False
            self._idle_looks = 0
            self._event.set()

    def deadline_pending(self) -> None:
        """The earliest deadline may come before the monitor's next look."""
        nd = self.runtime._next_deadline
        if nd == _INF:
            return
        if self._asleep:
            self.wake()
        elif nd + SLACK < self._next_look_at:
            self._event.set()

    def item_age(self, worker: Worker, now: float) -> float | None:
        """How long ``worker`` has run its current item, as the monitor timed it.

        None while the monitor has not looked at that item yet (it looks
        every tick while a worker is busy). ``now`` is a ``monotonic()``
        reading. Any thread may ask; the answer is a lower bound.
        """
        look = self._seen.get(worker)
        if look is None or look[0] != worker.item_seq:
            return None
        return max(0.0, now - look[1])

    def slow_step_ended(self, op: AsyncOperation[Any], wall: float) -> None:
        """A step or callback of ``op`` ended that ran ``wall`` seconds (``slow_step`` or more).

        Called by the worker's meter (``_usage.py``) on its own thread, as
        the item's time is charged. A coroutine step the monitor has not
        reported is reported now, naming the await that ended it. Never
        raises: the worker goes on.
        """
        try:
            for worker in list(self.runtime._workers):
                if worker.item is op and worker.stepping:
                    if self._claim(worker, worker.item_seq):
                        self._warn_slow(worker, wall, where=_await_line(op))
                    return
        except Exception:
            _log_exception("asyncop: reporting the slow step of %r failed", op)

    def stop(self) -> ThreadHandle | None:
        """Make the thread end; returns it, to join."""
        self._event.set()
        return self._thread

    # -- the thread -----------------------------------------------------------

    def _main(self, _: object) -> None:
        rt = self.runtime
        while not rt._stopping:
            try:
                timeout = self._plan()
                self._event.wait(timeout)
                self._asleep = False
                if rt._stopping:
                    return
                self._round()
                rt._deadlocks.look()
            except BaseException:
                # The monitor is what fires timers when every worker is
                # held: it must outlive any error, like the workers.
                _log_exception("asyncop: the monitor of %r hit an error; it carries on", rt)
                self._event.wait(self.tick)

    def _plan(self) -> float | None:
        """How long to sleep: not at all past a tick while a worker is busy.

        Nor past the time the deadlock watch needs its next look, if it
        times a quiet spell (``_deadlock.py``).
        """
        rt = self.runtime
        with rt._lock:
            if rt._active == 0 and not rt._work_waits_locked():
                self._idle_looks += 1
            else:
                self._idle_looks = 0
            watch = rt._deadlocks.plan_locked()
            if self._idle_looks > IDLE_LOOKS:
                # Every worker has been parked for a while: they time the
                # deadlines themselves. (Not at the first idle look: a
                # runtime that parks and wakes many times a second would
                # wake the monitor as often.)
                self._asleep = True
                self._next_look_at = _INF
                # Forget the looks: the items they were about have ended.
                self._seen.clear()
                self._warned.clear()
                return watch
            timeout = self.tick if watch is None else min(self.tick, watch)
            nd = rt._next_deadline
            if rt._virtual:
                self._next_look_at = _INF
            else:
                now = rt._now()
                if nd < _INF:
                    timeout = min(timeout, max(0.0, nd + SLACK - now))
                self._next_look_at = now + timeout
            return timeout

    def _round(self) -> None:
        rt = self.runtime
        # 1. Timers no worker has fired.
        nd = rt._next_deadline
        if nd < _INF and nd <= rt._now():
            rt._fire_due_timers()
        # 2. Readiness nobody polls for.
        reactor = rt._reactor
        polls = rt._polls
        if (
            reactor is not None
            and reactor.drives_epoll
            and reactor._table
            and rt._poller is None
            and polls == self._polls_seen
        ):
            with rt._lock:
                woke = bool(rt._idle) and rt._poller is None
                if woke:
                    rt._wake_one_locked()  # it parks again, in the multiplexer
            if not woke:
                reactor.poll_ready()
        self._polls_seen = polls
        # 3 and 4. Held workers.
        now = monotonic()
        for worker in list(rt._workers):
            self._look(worker, now)

    def _look(self, worker: Worker, now: float) -> None:
        seq = worker.item_seq
        seen = self._seen
        if not seq & 1:
            seen.pop(worker, None)
            return  # between items
        look = seen.get(worker)
        if look is None or look[0] != seq:
            seen[worker] = (seq, now, now, _cpu_time(worker))
            return  # first look at this item
        age = now - look[1]
        stepping = worker.stepping
        if stepping and age >= self.slow_step and self._claim(worker, seq):
            self._warn_slow(worker, age)
        computing = stepping and _computing(worker, now, seen, look)
        # The item started up to a tick before it was first seen: hand its
        # queue on a tick early, so that work waits blocked_after at most.
        if age >= self.blocked_after - self.tick and not worker.replaced:
            self._hand_on(worker, seq, grow=not computing)

    def _hand_on(self, worker: Worker, seq: int, *, grow: bool) -> None:
        """Hand the work waiting behind ``worker``'s item to another worker.

        A parked worker is woken for it; with ``grow``, an extra one is
        started when none is parked. A computing step never gets an extra
        thread: under the GIL the two would only take turns.
        """
        rt = self.runtime
        with rt._lock:
            if rt._stopping or worker.item_seq != seq or not rt._work_waits_locked(timers=False):
                return
            if rt._idle:
                rt._wake_one_locked()
                return
            if not grow:
                return
            if len(rt._workers) >= rt._max_threads:
                # The cap holds callbacks only: tasks still get a thread.
                rt._give_steps_a_thread_locked(waiting_only=False)
                if not rt._sync_ready:
                    return
                if not self._cap_warned:
                    self._cap_warned = True
                    logger.warning(
                        "asyncop: runtime %r has reached max_threads=%d; work waits for "
                        "a worker to finish (%s). Blocking calls belong in "
                        "spawn_blocking; raise Runtime(max_threads=...) if this is expected",
                        rt.name,
                        rt._max_threads,
                        ", ".join(_busy_with(w) for w in list(rt._workers)),
                    )
                return
            if rt._grow_locked(extra=True):
                worker.replaced = True

    def _claim(self, worker: Worker, seq: int) -> bool:
        """Whether item ``seq`` of ``worker`` is still to be reported slow; marks it reported."""
        with self._lock:
            if self._warned.get(worker) == seq:
                return False
            self._warned[worker] = seq
            return True

    def _warn_slow(self, worker: Worker, age: float, where: str | None = None) -> None:
        """Log the slow step: still running (at the line it is on), or ended (``where``)."""
        op = worker.item
        if op is None:
            return
        if where is None:
            verb, where = "has run", f"at {current_line(worker)}"
        else:
            verb = "ran"
        mode = (
            "other tasks run beside it on other workers"
            if self.runtime._parallel
            else "no other task of this runtime runs until it awaits"
        )
        logger.warning(
            "asyncop: task %r %s for %.2f s without awaiting, %s; %s. Await "
            "asyncop.checkpoint() in long loops, and run blocking calls with "
            "spawn_blocking",
            safe_str(op.name),
            verb,
            age,
            where,
            mode,
        )


def _busy_with(worker: Worker) -> str:
    op = worker.item
    return f"{worker.handle.name if worker.handle else worker!r} runs {op.name!r}" if op else "?"


def current_line(worker: Worker) -> str:
    """The innermost user line ``worker``'s thread runs, as ``file:line``."""
    ident = _thread_id(worker)
    frame: Any = sys._current_frames().get(ident) if ident is not None else None
    while frame is not None:
        if not frame.f_globals.get("__name__", "").startswith("asyncop."):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "an unknown line"


def _thread_id(worker: Worker) -> int | None:
    """The id of ``worker``'s thread: its handle's, or the thread whose state it holds.

    The home (``runtime/_home.py``) runs on a thread the runtime did not
    start, and has no handle, which the runtime would join: its thread is
    found by its state.
    """
    handle = worker.handle
    if handle is not None:
        return handle.ident
    mine = worker.thread_state
    if mine is None:
        return None
    for ident, state in every_thread_state():
        if state is mine:
            return ident
    return None


def _await_line(op: AsyncOperation[Any]) -> str:
    """Where a task's step just ended, for the report of a slow one: ``up to <await> at file:line``.

    The innermost user frame of the task's suspended coroutines (the
    await the step ended at); the step's slow code comes just before it.
    """
    task = op._task
    coro: Any = task.coro if task is not None else None
    where = None
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None and not frame.f_globals.get("__name__", "").startswith("asyncop."):
            where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    if where is None:
        return "up to its end (it returned or raised)"
    return f"up to the await at {where}"


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
    """Whether ``worker``'s current step kept its thread on the CPU since the last look."""
    cpu = _cpu_time(worker)
    seen[worker] = (look[0], look[1], now, cpu)
    if now <= look[2]:
        return True  # nothing to compare with yet: look again next round
    # NaN (no CPU clock) compares false: the step counts as blocked.
    return (cpu - look[3]) / (now - look[2]) >= COMPUTING
