"""Worker threads: the loop that steps tasks, runs sync callbacks and parks.

The loop::

    loop:
        1. step ready coroutine tasks (a bounded batch), holding the lane:
           woken tasks first (see "Which task runs next")
        2. run one ready sync callback, if a sync slot is free
        3. fire the timers that are due
        4. take the readiness of parked sockets (one zero-timeout poll)
        5. park until the next deadline, or until a push wakes us

Which task runs next
--------------------
A task woken by an event (a timer, a socket, a lock or a channel, an
operation's end, a cancel) goes to ``_woken``; a new task and a task that
yielded (``checkpoint()``, ``sleep(0)``) go to the back of ``_ready``. The
worker takes from ``_woken`` first: work under way finishes before new work
starts, so a sleep comes due on time even while thousands of tasks are being
spawned, where a single queue would make it wait for every one of their
first steps. The worker takes from ``_ready`` when ``_woken`` is empty, and
also once ``OVERTAKE`` (``_items.py``) woken tasks queued *after* the head of
``_ready`` ran before it: a task in ``_ready`` never waits behind more than
that many later tasks for each one ahead of it, so a loop of tasks waking
each other cannot starve it. Every queued task carries ``queued_at``, a
number that grows with each push, for that comparison (32 bits that wrap,
compared across the wrap by ``queued_after``). So whatever was
queued before a task yields runs before it resumes, as in a single queue.

The lane
--------
By default no two coroutine steps of one runtime overlap: a worker steps
tasks only while it holds the runtime's *lane* (a plain lock, taken without
blocking). A worker that finds the lane held leaves the coroutine queue to
its holder and runs sync callbacks instead, or parks. Code between two
awaits is then atomic with respect to every other task, as in asyncio and
trio. Under the GIL this costs no throughput: two threads stepping Python
code only take turns for the GIL. With ``Runtime(parallel=True)`` there is
no lane, and steps run on several workers at once (for free-threaded
CPython).

No wake is lost at the lane: a push made while the lane is held wakes
nobody, and the holder, once it has let the lane go, looks at the queue
again under the runtime lock before it parks (step 5).

Sync slots
----------
Sync callbacks are threads' work, and run in parallel with each other and
with the lane. At most ``workers`` of them run at once, as in a thread pool
of that size; one that waits inside asyncop's own blocking calls (a
channel, a lock, an operation's end) gives its slot up while it waits, so a
callback waiting for another callback cannot deadlock the pool.

The stepper
-----------
A callback that waits inside asyncop gives its slot up, so another callback
may start, on another thread; every thread up to ``max_threads`` may end up
holding a callback that waits for a task. Tasks must still be stepped: when
every worker runs a callback and tasks are queued, the runtime starts an
extra worker, and at the cap the *stepper*, one thread past the cap that
steps tasks and fires timers but never takes a callback. It parks off the
idle stack (a push for a callback never wakes it) and retires once a worker
outside callbacks can step tasks again. The cap thus holds callbacks only.

The home thread
---------------
``anyio.run()`` runs its tasks on the thread that called it, as anyio's other
backends do: while that thread waits for the tree, it is the runtime's
*home* (``runtime/_home.py``), a worker without a thread of its own, which
runs this loop but for the callbacks. While a home is set, it alone steps
coroutine tasks: the other workers run sync callbacks, fire timers and poll,
and wake the home for the tasks these queue, rather than step them
(``_hand_to_home_locked``); a push wakes the home for a task
(``_wake_with_home_locked``). Code between two awaits thus runs on the
thread that called ``anyio.run()``. A parallel runtime has no home.

Parking
-------
Parking is a wait on the worker's own auto-reset :class:`WakeEvent`; the
worker first puts itself on the runtime's idle stack, under the runtime
lock, and a push pops the stack and wakes it under the same lock. A push
therefore either finds the worker on the stack or happens before the
worker's last look at the queues: no wake is lost. The stack is LIFO so
that the most recently active (cache-warm) worker is woken first.

One parked worker at a time may park *in the I/O multiplexer* instead (the
*poller*): it waits in ``epoll_wait`` with the next timer deadline as its
timeout, and a push wakes it through the reactor's wake-up channel. A
readiness then reaches its task without crossing threads: the poller
fires the waker and steps the task itself. While no worker is parked, the
busy workers poll once per round (step 4), and the monitor covers a
runtime whose workers are all held by long work.

States
------
A worker is BUSY (running the loop), PARKED (on the idle stack, on its
wake event) or POLLING (on the idle stack, in the I/O multiplexer), and
RETIRED once it has left the pool::

    BUSY --park--> PARKED | POLLING --unpark--> BUSY
    any --retire--> RETIRED

Who writes what: this module owns ``state``: the ``_transition_to_*``
methods of :class:`Worker` are the only code that writes it, under the
runtime lock, and each says whether it happened (``_unpark_locked`` in
``_pool.py`` counts a worker active again only if it was parked). ``item``,
``item_seq``, ``stepping``, ``in_sync`` and ``replaced`` are written by the
worker itself and read by the monitor; ``cpu_clock``, ``thread_state`` and
``steps_only`` are set once when the thread starts; ``meter`` and
``ended_later`` are used by the worker's thread alone; everything else is
written under the runtime lock. The fields are declared on the base
:class:`~asyncop.runtime._core._fields.WorkerFields` (C struct members
when compiled, which the batch loop, the push and the work cycle below
read in C), and set here, in ``Worker.__init__``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, final

from ...operations import ThreadState, thread_state
from ...platform import ThreadHandle, WakeEvent, join_by, thread_cpu_clock
from ._fields import WorkerFields, WorkerState
from ._items import _log_exception, run_sync, step_batch
from ._usage import CpuMeter

if TYPE_CHECKING:
    from ...operations import AsyncOperation
    from ._kernel import Kernel

if TYPE_CHECKING:  # (the stand-in's signatures, for cython.locals below)
    from ...platform import pure_cython as cython
else:
    try:
        import cython
    except ImportError:  # run as Python, without Cython installed
        from ...platform import pure_cython as cython

__all__ = [
    "BLOCKED_AFTER",
    "COMPUTING",
    "EXTRA_IDLE",
    "IDLE_RETIRE",
    "Worker",
    "WorkerState",
    "join_by",
    "poll_parked",
    "polls_when_parked_locked",
    "worker_main",
]


# A worker busy with one item for this long, while work it could hand on
# waits, is replaced (see _monitor.py).
BLOCKED_AFTER = 0.05
# The share of one CPU above which a long coroutine step counts as computing.
COMPUTING = 0.5
# In dynamic mode, a worker parked this long with nothing to do retires.
IDLE_RETIRE = 2.0
# An extra worker re-checks this often whether the pool still needs it.
EXTRA_IDLE = 0.5
# How long a worker pauses after an error escaped its loop.
_RECOVER_PAUSE = 0.01
_INF = float("inf")


@final
class Worker(WorkerFields):
    """One worker thread's state, shared with the runtime and the monitor."""

    # Every field is its base's (see _fields.py): a slot here would hide it.
    __slots__ = ()

    def __init__(
        self, runtime: Kernel, index: int, *, extra: bool, steps_only: bool = False
    ) -> None:
        self.runtime = runtime
        self.index = index
        self.extra = extra
        # The runtime's stepper: it steps tasks and never takes a callback
        # (see "The stepper" in the module docstring).
        self.steps_only = steps_only
        self.event = WakeEvent()
        self.handle: ThreadHandle | None = None
        self.state = WorkerState.BUSY
        # Bumped when an item starts and when it ends: odd while busy. The
        # monitor times an item by seeing the same number on its looks.
        self.item_seq = 0
        # The operation being run, for the monitor's slow-step warning.
        self.item: AsyncOperation[Any] | None = None
        # Whether the current item is a coroutine step (not a sync callback).
        self.stepping = False
        # Whether the current item is a sync callback (holding a sync slot).
        self.in_sync = False
        # Reads the thread's CPU time from any thread; None where the OS
        # cannot, and then a long step always counts as blocked.
        self.cpu_clock: Callable[[], float] | None = None
        # The thread's ThreadState, to see whether it waits in asyncop.
        self.thread_state: ThreadState | None = None
        # True once the monitor started a replacement for the current item.
        self.replaced = False
        self.parked_at = 0.0
        # Charges each item's time to its operation (see _usage.py), and
        # hands the monitor a slow step as it ends (one it may not have seen).
        self.meter = meter = CpuMeter()
        meter.slow_after = runtime._monitor.slow_step
        meter.on_slow = runtime._monitor.slow_step_ended
        # Operations that ended in the step being run, for the instruments'
        # ended(), reported after the step's step_ended (see _instruments.py).
        self.ended_later: list[AsyncOperation[Any]] = []

    @property
    def parked(
        self,
        _parked: WorkerState = WorkerState.PARKED,
        _polling: WorkerState = WorkerState.POLLING,
    ) -> bool:
        """Whether the worker is on the idle stack (parked or polling)."""
        state = self.state
        return state is _parked or state is _polling

    # -- transitions (under the runtime lock) ------------------------------

    @cython.locals(self="CWorker")
    def _transition_to_parked(
        self,
        poll: bool,
        _busy: WorkerState = WorkerState.BUSY,
        _parked: WorkerState = WorkerState.PARKED,
        _polling: WorkerState = WorkerState.POLLING,
    ) -> bool:
        """BUSY -> PARKED, or POLLING with ``poll`` (it waits in the I/O multiplexer)."""
        # Invariant: only a busy worker parks.
        if self.state is not _busy:
            return False
        self.state = _polling if poll else _parked
        return True

    @cython.locals(self="CWorker")
    def _transition_to_busy(
        self,
        _parked: WorkerState = WorkerState.PARKED,
        _polling: WorkerState = WorkerState.POLLING,
        _busy: WorkerState = WorkerState.BUSY,
    ) -> bool:
        """PARKED or POLLING -> BUSY: popped and woken, or back from its wait."""
        # Invariant: a worker is unparked once per park, whoever gets there first.
        state = self.state
        if state is not _parked and state is not _polling:
            return False
        self.state = _busy
        return True

    def _transition_to_retired(self, _retired: WorkerState = WorkerState.RETIRED) -> bool:
        """-> RETIRED: the worker leaves the pool, and its thread ends."""
        # Invariant: a worker retires once.
        if self.state is _retired:
            return False
        self.state = _retired
        return True

    @cython.locals(self="CWorker")
    def holds_sync_slot(self) -> bool:
        """Whether it runs a sync callback that is not waiting inside asyncop."""
        if not self.in_sync:
            return False
        ts = self.thread_state
        return ts is None or not ts.blocked

    def on_blocked(self) -> None:
        """The thread's callback waits inside asyncop: hand its work on now.

        Its sync slot is free while it waits, and the work queued behind it
        (a callback it may be waiting for) should not wait for the monitor.
        """
        rt = self.runtime
        if not self.in_sync:
            return
        if rt._autojump or rt._idle_watchers:
            # One thread fewer can move the work on: should nothing else
            # run, the virtual clock jumps and wait_all_blocked() returns (a
            # parked worker re-parks and looks, as a worker that parked
            # while this callback still ran could not tell; with none
            # parked, this thread looks itself, as the last to sleep).
            with rt._lock:
                if rt._stopping:
                    pass
                elif rt._idle:
                    rt._wake_one_locked()
                else:
                    rt._look_if_every_thread_sleeps_locked()
        if not (rt._sync_ready or rt._ready or rt._woken):
            return
        with rt._lock:
            if not rt._work_for_worker_locked() or rt._stopping:
                return
            if rt._idle:
                rt._wake_one_locked()
            elif rt._grow_locked(extra=True):
                self.replaced = True
            else:
                # At max_threads: the tasks still get a thread.
                rt._give_steps_a_thread_locked(waiting_only=False)

    def __repr__(self) -> str:
        kind = "stepper" if self.steps_only else "extra" if self.extra else "base"
        busy = "busy" if self.item_seq & 1 else "idle"
        return f"<Worker {self.index} {kind} {busy} {self.state.value}>"


# Real time for the monitor, whatever clock the runtime uses.
monotonic = time.monotonic


# (Compiled, the kernel's and the worker's fields are read in C: see _worker.pxd.)
@cython.locals(rt="CKernel", worker="CWorker", state="CThreadState")
def worker_main(rt: Kernel, worker: Worker) -> None:
    """The body of a worker thread; returns when the worker retires."""
    ready = rt._ready
    woken = rt._woken
    sync_ready = rt._sync_ready
    parallel = rt._parallel
    lane = rt._lane
    takes_callbacks = not worker.steps_only
    state = thread_state()
    state.worker = worker
    worker.thread_state = state
    worker.cpu_clock = thread_cpu_clock()
    try:
        while True:
            # No exception ends a worker: one that escaped a phase below (a
            # bug in asyncop, or user code it calls into) is logged and the
            # loop goes on. A dead worker would take its share of the queue
            # and the timers with it, silently.
            try:
                # 1. Step ready tasks, holding the lane (the home's, while
                # a thread is the home: wake it if it is parked).
                if (woken or ready) and rt._home is not None:
                    with rt._lock:
                        rt._hand_to_home_locked()
                elif (woken or ready) and (parallel or lane.acquire(False)):
                    try:
                        step_batch(rt, worker, state, ready)
                    finally:
                        if not parallel:
                            lane.release()
                    if rt._home is not None:
                        # A home came while this batch ran, and parked at the
                        # lane: it looks again (its tree may have ended here).
                        with rt._lock:
                            rt._hand_to_home_locked(True)
                # 2. Run one sync callback.
                if sync_ready and takes_callbacks:
                    run_sync(rt, worker, state)
                # 3. Fire due timers (without reading the clock when none is set).
                next_deadline = rt._next_deadline
                if next_deadline < _INF and next_deadline <= rt._now():
                    rt._fire_due_timers()
                # 4. Take the readiness of parked fds, without a thread hop.
                reactor = rt._reactor
                if reactor is not None and reactor._table:
                    rt._polls += 1
                    reactor.poll_ready()
                    if (woken or ready) and (parallel or not lane.locked()) and rt._home is None:
                        continue  # it woke a task: no need to look at parking
                # 5. Park until the next deadline.
                if not _park(rt, worker, state):
                    return
            except BaseException:
                _recover(rt, worker, state)
    finally:
        with rt._lock:
            if worker in rt._workers:  # left without retire_locked (a bug)
                retire_locked(rt, worker)


def _recover(rt: Kernel, worker: Worker, state: ThreadState) -> None:
    """Log what escaped a worker's loop and put the worker back in shape."""
    _log_exception("asyncop: worker %r of runtime %r hit an error; it carries on", worker, rt)
    state.op = None
    state.task = None
    if worker.item_seq & 1:
        worker.item_seq += 1
    worker.replaced = False
    worker.stepping = False
    worker.in_sync = False
    worker.item = None
    with rt._lock:
        if worker in rt._idle:  # it failed between parking and waking
            rt._idle.remove(worker)
            rt._unpark_locked(worker)
        if rt._poller is worker:
            rt._poller = None
    # Should the same error come back at once, do not spin on it.
    time.sleep(_RECOVER_PAUSE)


@cython.locals(rt="CKernel", worker="CWorker")
def retire_locked(rt: Kernel, worker: Worker) -> None:
    """Take ``worker`` out of the pool, in the same locked step that decided it.

    Leaving the pool and the active count at once matters: a worker that
    still counted as active after deciding to leave would make the last
    parking worker think another one is busy, and it would then skip waking
    wait_all_blocked() or jumping the clock.
    """
    if not worker._transition_to_retired():
        return
    # Always called on the worker's own thread. From here on, what this
    # thread pushes must wake another worker: it runs no more queue.
    thread_state().worker = None
    if worker in rt._workers:
        rt._workers.remove(worker)
        if worker.handle is not None:
            rt._leaving = [handle for handle in rt._leaving if handle.is_alive()]
            rt._leaving.append(worker.handle)
    if worker in rt._idle:
        rt._idle.remove(worker)
    else:
        rt._active -= 1
    if rt._poller is worker:
        rt._poller = None
    if rt._stepper is worker:
        rt._stepper = None
    if rt._next_deadline < _INF and not rt._stopping and rt._idle:
        # This worker may be the one that was to fire the next timer: hand
        # it on to a parked worker, which re-parks on the current deadline.
        rt._wake_one_locked()


@cython.locals(rt="CKernel", worker="CWorker", state="CThreadState")
def _park(rt: Kernel, worker: Worker, state: ThreadState) -> bool:
    """Park until woken or the next deadline; False when the worker must exit."""
    if worker.steps_only:
        return _park_stepper(rt, worker)
    lock = rt._lock
    lock.acquire()  # (worker thread only, see step): a worker parks after every burst
    try:
        if rt._home is not None:
            rt._hand_to_home_locked()
        if rt._work_for_worker_locked():
            return True
        if rt._stopping:
            retire_locked(rt, worker)
            return False
        timeout, go_on = park_timeout_locked(rt, worker)
        if go_on:
            return True
        if timeout is _RETIRE:
            retire_locked(rt, worker)
            return False
        reactor = rt._reactor
        poll = polls_when_parked_locked(rt, worker)
        if not worker._transition_to_parked(poll):
            return True  # (not busy: nothing to park)
        rt._idle.append(worker)
        rt._active -= 1
        if rt._dynamic:
            worker.parked_at = monotonic()  # for may_retire_locked
        if poll:
            rt._poller = worker
    finally:
        lock.release()
    if poll:
        return poll_parked(rt, worker, reactor, timeout)
    woken = worker.event.wait(timeout)
    if woken and not worker.parked:
        return True  # popped and woken by a push: nothing to undo
    with lock:
        if worker in rt._idle:
            # Timed out (or a stale wake-up): nobody popped us.
            rt._idle.remove(worker)
            rt._unpark_locked(worker)
            if (
                not woken
                and not rt._ready
                and not rt._woken
                and not rt._sync_ready
                and not rt._next_deadline <= rt._now()
                and may_retire_locked(rt, worker)
            ):
                retire_locked(rt, worker)
                return False
    return True


@cython.locals(rt="CKernel", worker="CWorker")
def _park_stepper(rt: Kernel, worker: Worker) -> bool:
    """The stepper's park: off the idle stack, until tasks need it again.

    It retires once a worker outside callbacks can step tasks again; until
    then it parks on its own event, which ``_give_steps_a_thread_locked``
    sets, and fires the timers and jumps a virtual clock as any worker does.
    """
    with rt._lock:
        if rt._home is not None:
            rt._hand_to_home_locked()
        elif (rt._ready or rt._woken) and (rt._parallel or not rt._lane.locked()):
            return True
        if rt._stopping or rt._home is not None or not rt._every_worker_in_callbacks_locked():
            retire_locked(rt, worker)
            return False
        timeout, go_on = park_timeout_locked(rt, worker)
        if go_on:
            return True
        if timeout is _RETIRE or timeout is None:
            timeout = EXTRA_IDLE
        if not worker._transition_to_parked(False):
            return True  # (not busy: nothing to park)
        rt._active -= 1
    worker.event.wait(timeout)
    with rt._lock:
        rt._unpark_locked(worker)  # (unless _give_steps_a_thread_locked did)
    return True


@cython.locals(rt="CKernel", worker="CWorker")
def polls_when_parked_locked(rt: Kernel, worker: Worker) -> bool:
    """Whether ``worker``, about to park, is to park in the multiplexer as the poller.

    On epoll, while fds are known to it, one parked worker waits there
    (none while another worker runs its loop and so polls soon); the
    home too, when it parks while the workers are parked already.
    """
    reactor = rt._reactor
    return (
        reactor is not None
        and reactor.drives_epoll
        and rt._poller is None
        and bool(reactor._table or reactor._used)
        and not _another_polls_soon(rt, worker)
    )


@cython.locals(rt="CKernel", other="CWorker")
def _another_polls_soon(rt: Kernel, worker: Worker, _busy: WorkerState = WorkerState.BUSY) -> bool:
    """Whether another worker runs the loop, and so polls at its next round.

    Then this one parks on its own event: two threads taking turns at the
    multiplexer would hand every readiness across threads. One inside a
    sync callback polls only once the callback ends.
    """
    for other in rt._workers:
        if other is not worker and other.state is _busy and not other.in_sync:
            return True
    return False


@cython.locals(rt="CKernel", worker="CWorker")
def poll_parked(rt: Kernel, worker: Worker, reactor: Any, timeout: float | None) -> bool:
    """Park in the I/O multiplexer as the poller; fire what became ready once unparked.

    ``worker`` is on the idle stack, in the POLLING state, and ``rt._poller``.
    """
    fired: Any = None
    try:
        fired = reactor.wait_ready(timeout)
    finally:
        with rt._lock:
            if rt._poller is worker:
                rt._poller = None
            if worker in rt._idle:
                rt._idle.remove(worker)
                rt._unpark_locked(worker)
    if fired:
        # This worker is active again: the tasks these wakes queue are its
        # own to step next, not another worker's.
        rt._polls += 1
        reactor.deliver(fired)
    return True


class _Retire:
    __slots__ = ()


# What park_timeout_locked returns for a worker that must retire.
_RETIRE: Any = _Retire()
RETIRE = _RETIRE


@cython.locals(rt="CKernel", worker="CWorker")
def park_timeout_locked(rt: Kernel, worker: Worker) -> tuple[Any, bool]:
    """How long ``worker`` may park: ``(timeout, go_on)``.

    ``go_on`` is True when it must not park but loop again (a timer is
    due, the clock jumped, wait_all_blocked() was woken); ``timeout`` is
    ``RETIRE`` when the worker must leave the pool. On an autojumping
    virtual clock held only by I/O waits, it is what is left of the
    clock's ``io_grace``, in real seconds (see ``_io_grace_left_locked``).
    """
    deadline = rt._timers.next_deadline()
    rt._next_deadline = _INF if deadline is None else deadline
    active = rt._active
    if active > 1 and (rt._idle_watchers or rt._autojump):
        active = rt._effectively_active_locked()
    if active == 1 and rt._idle_watchers and rt._fire_idle_watchers_locked():
        # This worker is the last one busy and is about to park: every
        # task is blocked, and a waiter woke.
        return None, True
    # Retire only after the check above, and not when a clock jump is
    # due: the last busy worker must still wake wait_all_blocked() and
    # jump the clock, even when it is an extra one on its way out.
    jump_due = rt._autojump and active == 1 and deadline is not None
    if worker.extra and not jump_due and rt._unstuck_locked() > rt._target:
        return _RETIRE, False
    timeout: float | None
    if rt._virtual:
        if deadline is not None and deadline <= rt._now():
            return None, True
        timeout = None
        if rt._autojump and deadline is not None and active == 1 and rt._outside_work == 0:
            # Every other worker is parked and nothing outside the workers
            # can make progress: jump to the next deadline. An I/O wait
            # can (its peer is outside): it holds the clock, for no longer
            # than the clock's io_grace if it has one.
            timeout = _io_grace_left_locked(rt) if rt._io_waiting() else 0.0
            if timeout is not None and timeout <= 0.0:
                rt._clock._jump_to(deadline)
                return None, True
    elif deadline is None:
        timeout = None
    else:
        timeout = deadline - rt._now()
        if timeout <= 0:
            return None, True
    if worker.extra or (rt._dynamic and len(rt._workers) > 1):
        # May retire: look again after a while even if nobody pushes.
        # An extra worker parks while the worker it replaced is still
        # stuck; once that one is back, the LIFO idle stack never wakes
        # the extra, so it must notice the surplus by itself.
        limit = EXTRA_IDLE if worker.extra else rt.idle_retire
        timeout = limit if timeout is None else min(timeout, limit)
    return timeout, False


def _io_grace_left_locked(rt: Kernel) -> float | None:
    """Real seconds before an autojump may pass over the I/O waits; None: never.

    The ``io_grace`` of the clock counts from when the runtime was first
    found idle with I/O waits pending, and starts again whenever a task
    was queued since (a readiness, a timer, a push from a thread all queue
    one): ``_queue_seq`` moves on with each. Quiet for the whole grace, the
    peer is taken not to answer; the worker parks for what is left of it,
    then looks again.
    """
    grace = rt._io_grace
    if grace is None:
        return None
    now = monotonic()
    if rt._quiet_seq != rt._queue_seq:
        rt._quiet_seq = rt._queue_seq
        rt._quiet_since = now
    return rt._quiet_since + grace - now


def may_retire_locked(rt: Kernel, worker: Worker) -> bool:
    if worker.extra:
        return rt._unstuck_locked() > rt._target
    return rt._dynamic and len(rt._workers) > 1 and monotonic() - worker.parked_at >= rt.idle_retire
