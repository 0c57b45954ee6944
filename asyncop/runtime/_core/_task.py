"""Coroutine tasks: how a worker steps an ``async def`` operation.

A coroutine operation carries a :class:`TaskState`: its coroutine, its one
:class:`Waker`, and the stack of async scopes it has entered. A worker that
pops the operation from the ready queue calls :func:`step`, which resumes
the coroutine until it awaits an event that is not ready, then parks it
(waker WAITING) and returns; the event's firing queues the task again.

Cancellation points
-------------------
Every runtime awaitable yields its event to :func:`step`, which checks the
task's *effective* token (that of its innermost async scope, so a shielded
scope keeps a cancel out) twice:

1. on entry, before subscribing to the event;
2. just before suspending, under the runtime lock, after subscribing.

A cancel that arrives while the task is suspended wakes it at once with
``Cancelled`` (``on_cancel_running``). A cancel that arrives after an event
already handed over its value (the waker is QUEUED or RESULT) leaves the
value alone: the task gets it and leaves at its next await. Non-cancellable
waits (a blocking call in another thread, a scope waiting for its children)
are not interrupted; the task leaves at its next await after them.

A ``Cancelled`` raised into the task because of its own cancel (reaching
its innermost scope from the task's operation through no shield) marks the
task (``saw_cancel``): it ends CANCELLED even if it catches the exception
and returns, its value discarded. One that a scope's own cancel caused, and
that the scope absorbs, does not count.

What a coroutine may yield
--------------------------
An asyncop event (a ``WaitEvent``, or any object with ``_arm``,
``_disarm`` and ``cancellable``), or an operation. Anything else (an
asyncio Future, a bare ``yield``, an object whose ``repr`` or attributes
raise) gets a TypeError thrown in at that await, never an exception out of
``step``: an exception escaping here would leave the task RUNNING with
nobody to step it again.

Statistics
----------
``step`` counts each step in ``op.stats`` and charges it the time of the
task's code (``_usage.py``), each time the coroutine yields, before anything
can hand the task to another worker, and as it ends, before the operation
does: whoever the end wakes finds the counts complete.

Starvation
----------
An await whose event is ready at once does not suspend. So that a loop of
such awaits cannot keep a worker forever, a task that completes
``_MAX_INLINE`` waits in one step is requeued at the back of the ready queue.
"""

from __future__ import annotations

from collections.abc import Coroutine
from contextvars import Context
from functools import partial
from inspect import CO_COROUTINE
from types import CoroutineType, FunctionType, GeneratorType
from typing import TYPE_CHECKING, Any

from ...operations import (
    OWN_COROUTINE,
    OWN_GENERATOR,
    RAISE,
    SUSPEND_CODE,
    AsyncOperation,
    Cancelled,
    Outcome,
    Suspends,
    Suspension,
    ThreadState,
    cancelled_for,
    foreign_failure,
    run_after,
    transition_to_ended,
    transition_to_running,
    without_cancelled,
)
from ...platform import _coro, _gc
from ._abandon import close_open_scopes
from ._awaitables import CHECKPOINT, OpWait, awaiting, protocol_event
from ._scope_task import ScopeDone, suspend_for_children
from ._usage import CpuMeter, charge, wall_clock
from ._waker import (
    WaitEvent,
    WakerStatus,
    push_locked,
    resolve,
    set_up_waker,
)

try:
    import cython  # pyright: ignore[reportMissingImports]
except ImportError:  # run as Python, without Cython installed
    from ...platform import pure_cython as cython
if TYPE_CHECKING or not cython.compiled:  # (compiled, _task.pxd cimports it: TaskState's C base)
    from ._waker import Waker

if TYPE_CHECKING:
    from ...operations import After
    from ._kernel import Kernel

__all__ = ["TaskState", "on_cancel_running", "step", "strip_own_frame"]

_MAX_INLINE = 32
# A 32-bit count wraps to 0 (compiled, a C constant: see _task.pxd).
_WRAP = 0xFFFFFFFF
# The types of asyncop's own compiled generators and coroutines (none when
# it runs as Python, where they are the usual ones).
_COMPILED_AWAITING = frozenset({OWN_GENERATOR, OWN_COROUTINE} - {GeneratorType, CoroutineType})
# The send of a native coroutine, called with the coroutine first.
_SEND = CoroutineType.send


# Final: an extension type when compiled (see _task.pxd), which no class extends.
class TaskState(Waker):
    """The coroutine side of a coroutine operation, and its one waker."""

    # The operation is the waker's ``task``.
    __slots__ = ("cancellable", "checkpoints", "coro", "current", "outer", "saw_cancel")

    def __init__(self, op: AsyncOperation) -> None:
        set_up_waker(self, op)
        self.coro: Coroutine[Any, Any, Any] | None = None
        # The innermost async scope the task is in (its own operation when
        # none): its token is the one every await checks.
        self.current: AsyncOperation = op
        # The enclosing ones, innermost last; made when a scope is entered.
        self.outer: list[AsyncOperation] | None = None
        # Awaits passed, for assert_checkpoints(): compiled, a 32-bit count
        # that wraps (whoever counts from Python masks it: count_checkpoint).
        self.checkpoints = 0
        # Whether the current wait may be interrupted by a cancel.
        self.cancellable = True
        # Set once a Cancelled caused by the task's own cancel was raised
        # into the coroutine: from then on its result is discarded.
        self.saw_cancel = False
        # (Compiled, off the collector's lists once linked: see link_new_locked.)

    def suspension_point(self) -> tuple[str, int] | None:
        """Where the coroutine is suspended: its innermost awaiting frame.

        The innermost user frame, not asyncop's own ``__await__``, nor
        anyio's (an ``await event.wait()`` of anyio's names the line that
        awaits it); anyio's, if the task runs anyio's code alone.
        """
        coro: Any = self.coro
        user = other = None
        while coro is not None:
            inner = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
            # Not asyncop's own __await__ (whose frame, compiled, is a
            # stand-in with no line).
            if inner is not None and type(coro) not in _COMPILED_AWAITING:
                module = inner.f_globals.get("__name__", "")
                if not module.startswith("asyncop."):
                    other = inner
                    if not (module == "anyio" or module.startswith("anyio.")):
                        user = inner
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        frame = user or other
        if frame is None:
            return None
        return frame.f_code.co_filename, frame.f_lineno

    def count_checkpoint(self) -> None:
        """Count an await passed outside the stepper, wrapping as the compiled count does."""
        self.checkpoints = (self.checkpoints + 1) & _WRAP

    @property
    def waker(self) -> Waker:
        """The task's waker: the task state itself."""
        return self

    def __repr__(self) -> str:
        return f"<TaskState of {self.task.name!r} {self.status.name}>"


# What a task that returned yielded, for step(): it never reaches a coroutine.
_RETURNED: Any = object()

# Stands in a woken waker's error for a Cancelled still to be made; never raised.
CANCEL_LATER = Cancelled()


def on_cancel_running(
    op: AsyncOperation,
    after: After,
    _waiting: WakerStatus = WakerStatus.WAITING,
    _queued: WakerStatus = WakerStatus.QUEUED,
) -> bool:
    """A RUNNING coroutine task (or an async scope in one) was cancelled.

    Called by the cancel walk under the runtime lock. Wakes the task with
    ``Cancelled`` if it is suspended on a cancellable wait and its effective
    token is now cancelled; returns whether it did.
    """
    task: TaskState | None = op._task
    if task is None:
        return False
    waker = task
    if not (task.cancellable and task.current._cancelled):
        return False
    if waker.status is _waiting:
        waker.triggered = None
        waker.result = None
        # The exception itself is made when the task is stepped: a cancel
        # walk over many tasks then allocates nothing per task while it
        # holds the lock (and feeds the collector nothing in one burst).
        waker.error = CANCEL_LATER
        # Queue first, then mark QUEUED: a Ctrl-C landing in between (a
        # cancel from the main thread) leaves the waker WAITING, so the
        # next cancel walk wakes it again, and step() drops the stale
        # queue entry, as it runs only a QUEUED waker.
        node = waker.task
        runtime = node.runtime
        push_locked(runtime, node, None, None, True)  # type: ignore[arg-type]  # (resumed)
        if not waker._transition_to_queued():
            return False
        node._wakes = (node._wakes + 1) & _WRAP  # (see _stats.py)
        instruments = runtime._instruments
        if instruments is not None and instruments.woken:
            after.append(partial(instruments.tell, runtime, instruments.woken, node))
        return True
    if waker.error is CANCEL_LATER and waker.status is _queued:
        # Woken by a walk that a Ctrl-C cut short, perhaps before a worker
        # was woken for it: queue it again. A second copy in the ready
        # queue is harmless, its step finds the waker no longer QUEUED.
        push_locked(waker.task.runtime, waker.task, None, None, True)  # type: ignore[arg-type]
        return True
    return False


def deliver_cancel(task: TaskState) -> Cancelled:
    """Make the ``Cancelled`` to raise into a task whose innermost scope is cancelled.

    It carries the scope's ``cancel_reason``. When the cancel reached that
    scope from the task's own operation (through no shield), the task is
    marked: it ends CANCELLED even if it catches the exception and returns.
    """
    current = task.current
    exc = cancelled_for(current.name, current.cancel_reason)
    note_cancel(task)
    return exc


def note_cancel(task: TaskState) -> None:
    """Mark ``task`` if the Cancelled being raised into it comes from its own cancel."""
    op = task.task
    if task.saw_cancel or not op._cancelled:
        return
    node = task.current
    outer = task.outer
    depth = len(outer) if outer else 0
    while node is not op:
        # A scope cancelled only by itself (or behind a shield) stops its
        # Cancelled: that one is not the task's.
        if not node._outside_cancel or depth == 0:
            return
        depth -= 1
        node = outer[depth]  # type: ignore[index]
    task.saw_cancel = True


def step(
    runtime: Kernel,
    op: AsyncOperation,
    state: ThreadState,
    meter: CpuMeter,
    _value: Outcome = Outcome.VALUE,
) -> None:
    """Resume a coroutine task until it suspends or ends; charge ``op.stats`` for it.

    ``state`` and ``meter`` are the stepping worker's. The path of a task that awaits
    checkpoints and returns a value stays in this function; see ``_first_coroutine``,
    ``_wait_on`` and ``_raised`` for the rest. The time is charged as the task yields (before
    anything hands it to another worker) and as it ends (before the operation does).

    The lock is taken with acquire()/release(), half a with's cost: safe only on a worker
    thread, which never runs signal handlers (on the main thread a Ctrl-C raised as acquire()
    returns would skip the release). Once the task has ended, this frame lets go of it:
    CPython 3.12 and 3.13 also link a finished coroutine's frame to the one that stepped it.
    """
    task: TaskState | None = op._task
    if task is None:
        return  # already final: cancelled while queued (its waker IGNORED)
    waker = task
    # The step starts at the worker's last reading; so does the task, if op.stats reads that clock.
    start = meter.last
    stamp = runtime._stamp is wall_clock
    lock = runtime._lock
    lock.acquire()
    try:
        # No coroutine yet: its first step, unless a cancel ended its work
        # while it was queued (its waker IGNORED), and then it never runs.
        # Else only a QUEUED waker resumes: any other queue entry is stale.
        first = task.coro is None
        if not (
            transition_to_running(op, start if stamp else None)
            if first
            else waker._transition_to_result()
        ):
            return
    finally:
        lock.release()
    op._steps = (op._steps + 1) & _WRAP  # (see _stats.py)
    ctx = op._ctx
    assert ctx is not None
    if not first:
        value, error = waker.result, waker.error
        if error is not None or waker._subs is not None:
            error = _resumed(task, error)
        waker.result = waker.error = None
        coro: Any = task.coro
    else:
        value = error = None
        coro = _first_coroutine(task, op, ctx, meter, start)
        if coro is None:
            # It ended at once: let go of the task here too (see _first_coroutine).
            del op, task, waker
            return
    native = type(coro) is CoroutineType  # (sent through _SEND: no bound method to make)
    inline = 0
    while True:
        state.task = task
        try:
            if cython.compiled and native and error is None:  # (C: no StopIteration, _coro.py)
                ev = _coro.send_in(ctx, coro, value, task, _RETURNED)
            elif error is None:
                ev = ctx.run(_SEND, coro, value) if native else ctx.run(coro.send, value)
            elif _hand_in(coro, error, state):
                ev = ctx.run(coro.send, RAISE)
            else:
                ev = ctx.run(coro.throw, error)
        except StopIteration as stop:
            ev, task.result = _RETURNED, stop.value  # (ended: charged first, below)
        except BaseException as exc:
            # This frame is in the exception's traceback, and ``error`` may be
            # that exception: drop it, or the task's frames and locals would
            # wait for the collector instead of going with the task.
            error = None
            _raised(task, exc, state, meter, start)
            del op, task, waker
            return
        now = charge(op, meter, start)
        if ev is _RETURNED:
            try:  # (it returned task.result; or, compiled, it raised task.error)
                _ended(task, now if stamp else None)
            finally:
                state.task = None
            return
        state.task = None
        start = now
        task.checkpoints += 1
        value = error = None
        if ev is CHECKPOINT:
            # The commonest await, on its own short path.
            if (error := _checkpoint(runtime, task, state)) is None:
                return
            continue
        value, error, inline = _wait_on(task, ev, inline)
        if value is _NOT_READY:
            return


def _raised(
    task: TaskState, exc: BaseException, state: ThreadState, meter: CpuMeter, start: float
) -> None:
    """End the task with what its coroutine raised (``step``'s own path is for a return).

    The step is charged first, and the task stays the thread's until it has ended.
    """
    try:
        charge(task.task, meter, start)
        _end_raised(task, exc, True, None)
    finally:
        state.task = None


def _ended(task: TaskState, at: float | None, _value: Outcome = Outcome.VALUE) -> None:
    """End the task whose coroutine ended in a compiled send: see ``send_in`` in ``_coro.pxd``.

    It returned ``task.result``, or raised ``task.error``, which has no frame
    of asyncop's own on top: the send raised nothing, and added none.
    """
    exc = task.error
    if exc is None:
        _finish(task, _value, task.result, None, at)
    else:
        task.error = None
        _end_raised(task, exc, False, at)


def _end_raised(
    task: TaskState,
    exc: BaseException,
    strip: bool,
    at: float | None,
    _cancelled: Outcome = Outcome.CANCELLED,
) -> None:
    """End the task with what its coroutine raised; ``strip``: drop the stepper's frame on top."""
    if isinstance(exc, Cancelled):
        _finish(task, _cancelled, None, None, at)
    else:
        _fail(task, exc, strip)


def _hand_in(coro: Any, error: BaseException, state: ThreadState) -> bool:
    """Whether ``error`` is handed to the awaitable ``coro`` waits in, to raise it there.

    When the task waits in one of asyncop's awaitables (its await chain
    ends in what ``suspend()`` returned, or in a ``SuspendsItself``: both
    are ``Suspends``, see ``_suspend.py``), the error is left in
    ``state.thrown_in`` for it and the task is sent ``RAISE``: raised there,
    it chains to the exception being handled where the task waits, as in
    trio. Anything else (a user's awaitable, an async generator's ``asend``)
    gets it through ``throw()``, which sets the context again in every frame
    it passes. (Compiled, asyncop's own generators and coroutines are
    Cython's types, ``OWN_GENERATOR`` and ``OWN_COROUTINE``.)
    """
    inner: Any = coro
    while True:
        kind = type(inner)
        if kind is CoroutineType or kind is OWN_COROUTINE:
            inner = inner.cr_await
        elif kind is GeneratorType or kind is OWN_GENERATOR:
            awaited = inner.gi_yieldfrom
            if awaited is None and inner.gi_code is SUSPEND_CODE:
                state.thrown_in = error
                return True
            inner = awaited
        elif kind is Suspension or isinstance(inner, Suspends):
            state.thrown_in = error
            return True
        else:
            return False  # an async generator's asend, a user's iterator...


def _checkpoint(runtime: Kernel, task: TaskState, state: ThreadState) -> BaseException | None:
    """Put the task at the back of the ready queue; or the Cancelled to raise instead.

    A cancellation point (check 1). A deadline that passed during the step
    is fired first, so that it counts here.
    """
    if runtime._next_deadline <= runtime._now():
        runtime._fire_due_timers()
    if task.current._cancelled:
        return deliver_cancel(task)
    lock = runtime._lock
    lock.acquire()  # (worker thread only, see step)
    try:
        if task._transition_to_requeued():
            push_locked(runtime, task.task, state)
    finally:
        lock.release()
    return None


def _first_coroutine(
    task: TaskState, op: AsyncOperation, ctx: Context, meter: CpuMeter, start: float
) -> Coroutine[Any, Any, Any] | None:
    """Make the coroutine of a task's first step; None if the task ended instead.

    The task ends at once when its function raises, or returns something
    other than a coroutine (a plain function's value); the step is charged
    to it first (``meter``, from ``start``).
    """
    fn = op._fn
    assert fn is not None
    try:
        if type(fn) is FunctionType and fn.__code__.co_flags & CO_COROUTINE:
            # Calling an async def function only binds its arguments and makes the coroutine:
            # no user code runs, so no context is needed yet (step()'s first send runs in it).
            coro = fn(*op._args)
        else:
            coro = ctx.run(fn, *op._args)
    except BaseException as exc:
        charge(op, meter, start)
        _finish(task, Outcome.ERROR, None, strip_own_frame(exc))
        # The failure's traceback keeps this frame (the raising frame's f_back) with its
        # locals: let go of the task, which keeps the failure, or the failure, its frames
        # and the task would wait for the collector.
        del op, task
        return None
    native = type(coro) is CoroutineType
    if not native:
        if isinstance(coro, WaitEvent):  # spawn(event.wait_async); some pass as a Coroutine
            coro = awaiting(coro)
        elif not isinstance(coro, Coroutine):
            charge(op, meter, start)
            _finish(task, Outcome.VALUE, coro, None)
            return None
    if cython.compiled and native and not _gc.is_tracked(op):
        # Reached through the runtime until _finish, as its linked node is: see link_new_locked.
        _gc.untrack(coro)
    task.coro = coro
    return task.coro


def _resumed(task: TaskState, error: BaseException | None) -> BaseException | None:
    """Disarm a resumed task's wait, and make the error to throw into it, if any.

    ``CANCEL_LATER`` becomes the ``Cancelled`` it stands for (as
    ``deliver_cancel`` makes it), and a ``Cancelled`` from its own cancel
    marks the task (``note_cancel``).
    """
    if task._subs is not None:
        task._disarm_all()
    if error is None:
        return None
    if error is CANCEL_LATER:
        current = task.current
        error = cancelled_for(current.name, current.cancel_reason)
    elif not isinstance(error, Cancelled):
        return error
    note_cancel(task)
    return error


def _fail(task: TaskState, exc: BaseException, strip: bool = True) -> None:
    """End the task with what its coroutine raised, other than a bare ``Cancelled``."""
    error = without_cancelled(exc)  # (a Cancelled beside real errors is dropped)
    if error is None:
        _finish(task, Outcome.CANCELLED, None, None)
    else:
        # (foreign_failure: asyncio or trio code that found no loop of its own.)
        error = foreign_failure(error)
        _finish(task, Outcome.ERROR, None, strip_own_frame(error) if strip else error)


class _NotReady:
    __slots__ = ()


_NOT_READY: Any = _NotReady()


def _wait_on(task: TaskState, ev: Any, inline: int) -> tuple[Any, BaseException | None, int]:
    """Make the task wait on ``ev``, which its coroutine yielded (not a checkpoint).

    ``inline`` counts the waits of this step that were ready at once.
    Returns the value or error to deliver and the new count, or
    ``_NOT_READY`` first when the task suspended or went to the back of the
    ready queue: the caller must then return without touching the task.
    """
    entry_checked: bool | None
    error: BaseException | None
    locked = False
    if type(ev) is AsyncOperation:
        ev = OpWait(ev)
        ev._awaited = True
        entry_checked = True
    else:
        if type(ev) is ScopeDone and suspend_for_children(ev, task):
            # A scope's exit waiting for its children, in one locked step of
            # its own (_scope_task.py); no cancellation point: it must wait.
            return _NOT_READY, None, inline
        try:
            # (isinstance may run a user's __getattribute__ for __class__.)
            if isinstance(ev, WaitEvent):
                entry_checked, locked = ev.entry_checked, ev.arms_locked
            else:
                entry_checked = None
        except BaseException:
            entry_checked = None
        if entry_checked is None:
            entry_checked, error = protocol_event(ev, task.task.name)
            if error is not None:
                return None, error, inline
    # Cancellation point, check 1: on entry. Every runtime awaitable is
    # one, even those a cancel cannot interrupt once they wait (a
    # blocking call); only a scope's wait for its children is exempt.
    if entry_checked and task.current._cancelled:
        return None, deliver_cancel(task), inline
    inline += 1
    waker = task
    sub = waker._new_wait(ev, resolve)
    lock = waker.task.runtime._lock
    # (acquire/release: worker thread only, see step.) Every wait that
    # suspends takes the lock once after arming, or, for an event that
    # arms under the lock, once for both.
    try:
        if locked:
            lock.acquire()
            try:
                ev._arm_locked(sub)
                value, error = _suspend_locked(task, ev.cancellable)
            finally:
                lock.release()
        else:
            ev._arm(sub)
            cancellable = ev.cancellable
            lock.acquire()
            try:
                value, error = _suspend_locked(task, cancellable)
            finally:
                lock.release()
    except BaseException as exc:
        # The event's own code failed: the task gets the error at its
        # await, which is the one place it can be handled.
        waker._disarm_all()
        # Forget the wait: a late firing of it loses.
        forgot = waker._transition_to_no_status()
        assert forgot, f"{waker!r} armed a wait outside its running task"
        value, error = None, exc
    else:
        if value is _NOT_READY:
            return _NOT_READY, None, inline
        waker.result = waker.error = None
        waker._disarm_all()
        if error is not None:
            # Fired while arming: its error goes in as a resumed wait's does
            # (a CANCEL_LATER becomes the Cancelled it stands for).
            error = _resumed(task, error)
    if inline > _MAX_INLINE:
        # Too many ready-at-once waits in a row: deliver this one
        # after a trip through the ready queue.
        with lock:
            if waker._transition_to_requeued():
                # Delivered as the task resumes, as an event's result is.
                waker.result, waker.error = value, error
                push_locked(waker.task.runtime, task.task)  # type: ignore[arg-type]
                return _NOT_READY, None, inline
    return value, error, inline


def _suspend_locked(task: TaskState, cancellable: bool) -> tuple[Any, BaseException | None]:
    """Suspend the task on the wait just armed, under the runtime lock.

    Returns ``_NOT_READY`` first when it suspended, or the value or error
    to deliver at once: that of an event that fired while arming, or a
    ``Cancelled`` (cancellation point, check 2, just before suspending).
    """
    waker = task
    if cancellable and task.current._cancelled and waker._transition_to_result_early():
        return None, deliver_cancel(task)
    if waker._transition_to_waiting():
        task.cancellable = cancellable
        return _NOT_READY, None
    # An event fired while the wait was armed (RESULT): it wins, even
    # over a cancel, and the task goes on with it.
    return waker.result, waker.error


def strip_own_frame(exc: BaseException) -> BaseException:
    """Drop the worker's own frame from the top of a failure's traceback.

    The traceback then starts in user code, and it no longer keeps the
    worker frame (which references the operation) alive.
    """
    tb = exc.__traceback__
    if tb is not None and tb.tb_frame.f_globals.get("__name__", "").startswith("asyncop."):
        exc.__traceback__ = tb.tb_next
    return exc


def _finish(
    task: TaskState,
    outcome: Outcome,
    value: Any,
    error: BaseException | None,
    at: float | None = None,
    _value: Outcome = Outcome.VALUE,
    _cancelled: Outcome = Outcome.CANCELLED,
) -> None:
    if task.saw_cancel and outcome is _value:
        # Cancelled was delivered and caught: the value is discarded.
        outcome, value = _cancelled, None
    # Drop the finished coroutine now: its frames reference the operation. Compiled, back on the
    # collector's lists first (see _first_coroutine): CPython frees a coroutine as a tracked one.
    if cython.compiled and task.coro is not None:
        _gc.track(task.coro)
    task.coro = None
    if task.outer:
        # Scopes left open (an async generator holding one across a yield):
        # close them, or the task could never end.
        error = close_open_scopes(task, error)
        outcome, value = Outcome.ERROR, None
    op = task.task
    rare = op._rare
    if rare is not None:
        held = rare.held
        if held:
            rare.held = None
            for lock in list(held):
                lock._break(task)
    # The operation's own end, with the lock taken here (as
    # ``end_work_on_worker`` would, on a worker thread: see step).
    after: After = []
    runtime_lock = op.runtime._lock
    runtime_lock.acquire()
    try:
        ended = transition_to_ended(op, outcome, value, error, after, at)
    finally:
        runtime_lock.release()
    assert ended, f"{op.name!r} ended its work twice"
    if after:
        run_after(after)
