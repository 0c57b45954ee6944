"""The home thread: ``anyio.run()`` steps its tasks on the thread that called it.

anyio's other backends run their event loop on the thread that calls
``anyio.run()``, and code written for anyio counts on it: thread-local
state, ``threading.current_thread()``, a call that ``from_thread.run_sync``
or a blocking portal makes runs on the thread of the loop. So, while a
thread waits here for a tree, it is the runtime's *home*: a worker without a
thread of its own, that steps every coroutine task of the runtime, fires
timers and polls, but runs no sync callback; the runtime's worker threads
run those, and hand the home the tasks they queue (see "The home thread" in
``_core/_worker.py``). Blocking calls and ``to_thread`` still go to threads.
Once the tree has ended, the thread stops being the home, and the
runtime's tasks (of another run, of a ``runtime=`` given) go back to its
workers. A parallel runtime has no home; nor has one whose home is taken
already (a second ``anyio.run()`` on the same runtime from another thread).

Ctrl-C. Python raises KeyboardInterrupt on the main thread, at any bytecode:
in the home, it would land inside a task's step, in the runtime's
bookkeeping. While the main thread is the home, SIGINT's handler (if it is
Python's default one) only counts the Ctrl-C and wakes the home, which
leaves its loop at the next point between two steps; a Ctrl-C that finds
the home parked is raised there at once, as in any wait of asyncop. Then
the wait goes on as ``Runtime.run()``'s (``_interrupt.py``): the first
Ctrl-C cancels the tree and waits for it, on the worker threads, and a
second one gives up. A second Ctrl-C while a step runs is raised into it,
so that a step that never awaits cannot hold the run.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..operations import AsyncOperation, OperationState, thread_state
from ..platform import MAIN_SLICE, serve_main_calls, serving, thread_cpu_clock
from ._core._items import step_batch
from ._core._worker import (
    RETIRE,
    Worker,
    park_timeout_locked,
    poll_parked,
    polls_when_parked_locked,
)
from ._interrupt import add_tree_note, give_up, tree_note, wait_after_interrupt, wait_for_tree

if TYPE_CHECKING:
    from ._scheduler import Runtime

__all__ = ["ENDED", "FIRST_CTRL_C", "SECOND_CTRL_C", "drive_home", "run_here"]

_INF = float("inf")
# What ``drive_home`` returns: the tree ended, or a first or second Ctrl-C came.
ENDED, FIRST_CTRL_C, SECOND_CTRL_C = 0, 1, 2


def run_here(runtime: Runtime, fn: Callable[..., Any], *args: Any) -> Any:
    """``runtime.run(fn, *args)``, with the calling thread the home while it waits."""
    if thread_state().worker is not None or runtime._parallel:
        return runtime.run(fn, *args)  # (refuses a call from a task)
    spawned: list[AsyncOperation[Any]] = []

    def start() -> AsyncOperation[Any]:
        op = runtime.spawn(fn, *args)
        spawned.append(op)
        runtime._deadlocks.claim(op)  # stuck before the wait below: still ours to raise
        return op

    with serving():
        status = drive_home(runtime, lambda: spawned[0]._final, start)
        op = spawned[0]
        if status != ENDED:
            _interrupted(runtime, op, status)
        wait_for_tree(op)  # (the home's tree has ended: returns at once, unless taken)
    deadlock = runtime._deadlocks.take_error(op)
    if deadlock is not None:
        raise deadlock from (op.error if op.state is OperationState.FAILED else None)
    return op.result()


def _interrupted(runtime: Runtime, op: AsyncOperation[Any], status: int) -> None:
    """A Ctrl-C stopped the home: the rule of ``Runtime.run()``; always raises."""
    note = tree_note(op)  # before the cancel changes the tree
    if status == SECOND_CTRL_C:
        # Raised into a step, it may end the tree as its failure: that is
        # the KeyboardInterrupt raised below, which reaches the user.
        op._observe()
        give_up(runtime, op)
    else:
        try:
            wait_after_interrupt(op)
        except KeyboardInterrupt as second:
            add_tree_note(second, note)
            raise
    interrupt = KeyboardInterrupt()
    add_tree_note(interrupt, note)
    raise interrupt


def drive_home(
    runtime: Runtime,
    done: Callable[[], bool],
    start: Callable[[], AsyncOperation[Any] | None] | None = None,
) -> int:
    """Be ``runtime``'s home from ``start()`` on, until ``done()``.

    ``start`` may return an operation whose end makes ``done()`` true
    without a task of the home being stepped (its last child a callback):
    its end wakes the home.

    Returns ``ENDED`` (0), or ``FIRST_CTRL_C`` or ``SECOND_CTRL_C`` when a
    Ctrl-C stopped it first. Without a home (it is taken, the runtime is parallel
    or shut down, this thread is a worker), it only calls ``start()`` and
    returns ``ENDED``: the caller waits as it would have.
    """
    home = _take_home(runtime)
    if home is None:
        if start is not None:
            start()
        return ENDED
    state = thread_state()
    state.worker = home
    home.thread_state = state
    home.cpu_clock = thread_cpu_clock()
    ctrl_c = _CtrlC(home)
    watched: AsyncOperation[Any] | None = None

    def wake() -> None:  # (called once the runtime lock is free)
        with runtime._lock:
            runtime._hand_to_home_locked(True)

    try:
        ctrl_c.install()
        if start is not None:
            watched = start()
            if watched is not None:
                with runtime._lock:
                    if not watched._state.final:
                        watched._add_waiter_locked(wake)
        with runtime._asyncgens.installed():
            try:
                _loop(runtime, home, state, done, ctrl_c)
            except KeyboardInterrupt:
                ctrl_c.count = max(ctrl_c.count, 1)
        return min(ctrl_c.count, SECOND_CTRL_C)
    finally:
        if watched is not None and not watched._state.final:
            watched._remove_waiter(wake)
        ctrl_c.restore()
        state.worker = None
        _leave_home(runtime, home)


class _CtrlC:
    """SIGINT's handler while the main thread is the home; see the module docstring."""

    def __init__(self, home: Worker) -> None:
        self.home = home
        self.count = 0
        self.parked = False
        self.previous: Any = None

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # (Python runs signal handlers on the main thread only)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.previous = signal.signal(signal.SIGINT, self.handle)

    def restore(self) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None

    def handle(self, signum: int, frame: object) -> None:
        # At any bytecode of this thread: no lock, only a count and a wake.
        self.count += 1
        if self.parked or self.count > 1:
            raise KeyboardInterrupt
        self.home.event.set()


def _take_home(runtime: Runtime) -> Worker | None:
    if runtime._parallel or thread_state().worker is not None:
        return None
    with runtime._lock:
        if runtime._home is not None or runtime._closing:
            return None
        runtime._worker_seq += 1
        home = Worker(runtime, runtime._worker_seq, extra=False)
        runtime._workers.append(home)
        runtime._active += 1
        runtime._home = home
    return home


def _leave_home(runtime: Runtime, home: Worker) -> None:
    """The thread is no home any more: the workers step what is left."""
    with runtime._lock:
        runtime._home = None
        if home._transition_to_retired():
            runtime._workers.remove(home)
            if home in runtime._idle:
                runtime._idle.remove(home)
            else:
                runtime._active -= 1
        if (runtime._ready or runtime._woken) and runtime._idle:
            runtime._wake_one_locked()


def _loop(
    runtime: Runtime, home: Worker, state: Any, done: Callable[[], bool], ctrl_c: _CtrlC
) -> None:
    """The worker loop, for the home: steps, timers, polls and parks; no callbacks.

    As a worker's, each round fires the due timers and polls after its
    batch, also when tasks are still queued: while the home steps tasks,
    the parked workers leave the polling to it, and a task that loops on
    checkpoints would otherwise keep every readiness waiting for the
    monitor's look.
    """
    lane = runtime._lane
    while not done() and not ctrl_c.count:
        if (runtime._woken or runtime._ready) and lane.acquire(False):
            try:
                step_batch(runtime, home, state, runtime._ready)
            finally:
                lane.release()
            if done() or ctrl_c.count:
                return
        deadline = runtime._next_deadline
        if deadline < _INF and deadline <= runtime._now():
            runtime._fire_due_timers()
        reactor = runtime._reactor
        if reactor is not None and reactor._table:
            runtime._polls += 1
            reactor.poll_ready()
        if (runtime._woken or runtime._ready) and not lane.locked():
            continue
        _park(runtime, home, done, ctrl_c)


def _park(runtime: Runtime, home: Worker, done: Callable[[], bool], ctrl_c: _CtrlC) -> None:
    """Park the home until a push, a timer or the end of its tree wakes it."""
    with runtime._lock:
        if (runtime._ready or runtime._woken) and not runtime._lane.locked():
            return
        if done():
            return
        timeout, go_on = park_timeout_locked(runtime, home)
        if go_on:
            return
        if timeout is RETIRE:
            timeout = None  # (the home never retires: it leaves with its tree)
        poll = polls_when_parked_locked(runtime, home)
        if not home._transition_to_parked(poll):
            return
        runtime._idle.append(home)
        runtime._active -= 1
        if poll:
            runtime._poller = home
    ctrl_c.parked = True  # (from here on, a Ctrl-C is raised in the wait)
    try:
        if ctrl_c.count:
            pass  # (it came just before: the wait would not see its wake)
        elif poll:
            if threading.current_thread() is threading.main_thread():
                # As the event's wait does there: look at handed calls between slices.
                timeout = MAIN_SLICE if timeout is None else min(timeout, MAIN_SLICE)
            poll_parked(runtime, home, runtime._reactor, timeout)
        else:
            home.event.wait(timeout)
    finally:
        ctrl_c.parked = False
        with runtime._lock:
            if runtime._poller is home:
                runtime._poller = None
            if home in runtime._idle:
                runtime._idle.remove(home)
                runtime._unpark_locked(home)
    if threading.current_thread() is threading.main_thread():
        serve_main_calls()  # (a call handed by a thread is run at once)
