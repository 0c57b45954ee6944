"""The runtime's awaitables: event objects a coroutine task can wait on.

They are events, not coroutines (``WaitEvent`` subclasses), so that
``select`` can wait on several at once and cancel the losers. Every one of
them is a cancellation point (see ``_task.py``), except where its docstring
says otherwise.

- ``checkpoint()``: go to the back of the ready queue. ``sleep(0)`` (or
  less) is one too.
- ``sleep(seconds)``, ``sleep_until(deadline)``: a timer in the heap; an
  infinite (or decades-long) one arms no timer and waits for a cancel, as
  ``sleep_forever()`` does.
- ``await op``: the operation ends (``OpWait``).

``timeout(seconds, op)``, ``race(*ops)`` and ``select(*events)``, which
wait on several of these at once, live in ``_compose.py``.

``spawn_blocking``, which waits for a call in another thread, lives with
the threads that run it, in ``_blocking.py``.

Every factory checks its arguments when called, before anything is made,
and every event made warns if it is collected without being awaited (see
``_waker.py``). Events an awaitable makes for itself (the parts of a
``timeout`` or ``race``) are marked used when made; a factory that refuses
one argument lets go of all of them (``let_go``). A sleep keeps the length
asked for, which ``dump()`` shows, even one that arms no timer.
"""

from __future__ import annotations

import numbers
from collections import deque
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, final

from ...operations import (
    AsyncOperation,
    OperationState,
    foreign_yield_error,
    no_result_error,
    suspend_on_constant,
    thread_state,
)
from ...platform import check_timeout
from .._introspect import runtime_of_caller
from ._reactor import READ, WRITE, IoWait, fileno_of
from ._timers import TimerState
from ._waker import (
    Subscription,
    WaitEvent,
    is_event,
)

if TYPE_CHECKING:  # (the stand-in's signatures, for cython.locals below)
    from ...platform import pure_cython as cython
else:
    try:
        import cython
    except ImportError:  # run as Python, without Cython installed
        from ...platform import pure_cython as cython

__all__ = [
    "CHECKPOINT",
    "Checkpoint",
    "OpWait",
    "SleepUntil",
    "checkpoint",
    "current_time",
    "notify_closing",
    "protocol_event",
    "readable",
    "sleep",
    "sleep_forever",
    "sleep_until",
    "task_maker",
    "writable",
]


# -- checkpoint -----------------------------------------------------------------


@final
class Checkpoint(WaitEvent):
    """Yield to the back of the ready queue (handled by the stepper)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, Any, Any]:
        # It yields the one CHECKPOINT, which the stepper tells apart by
        # identity, and hands itself back to checkpoint()'s spares. (A
        # constant's suspension: compiled, the collector need not visit it.)
        self._awaited = True
        _keep_spare(self)
        return suspend_on_constant(CHECKPOINT)

    def _await_description(self) -> str:
        return "checkpoint()"

    def _arm(self, sub: Subscription) -> None:
        sub.fire(None)

    def _describe(self) -> str:
        return "checkpoint()"


# What every awaited checkpoint yields to the stepper.
CHECKPOINT = Checkpoint()
CHECKPOINT._awaited = True

# Checkpoints already awaited, for checkpoint() to hand out again: making
# and finalizing one per await would cost more than the await itself. They
# hold no state but the flag, so sharing one with a caller that kept a
# reference is harmless. A bounded deque drops its oldest spare by itself
# when full, with no length test on the way. (deque.append and deque.pop
# are atomic, on free-threaded builds too.)
_spare: deque[Checkpoint] = deque(maxlen=64)
_keep_spare = _spare.append
_take_spare = _spare.pop


def checkpoint() -> WaitEvent[None]:
    """A cancellation point that also lets every other ready task run first.

    ``await checkpoint()`` puts the task at the back of the ready queue, so a
    loop of checkpoints cannot starve timers or other tasks.

    Raises:
        Cancelled: the task (or its innermost scope) is cancelled.
    """
    # A new object each time (or a spare), not one shared instance: one
    # that is never awaited must be told apart, to warn about the missing
    # await.
    try:
        event = _take_spare()
    except IndexError:
        return Checkpoint()
    event._awaited = False
    return event


# -- sleeping -------------------------------------------------------------------


@final
class SleepUntil(WaitEvent):
    """Wait until the runtime clock reads ``deadline`` (or later).

    ``deadline`` is what was asked for, as ``dump()`` shows it: a length
    with ``relative``, else a time on the clock. One of ``inf``, or decades
    away (``check_timeout``'s "no limit"), is never reached: no timer is
    armed, and only a cancel (or another event of a ``select``) ends it.
    """

    __slots__ = ("deadline", "relative")

    arms_locked = True

    def __init__(self, deadline: float, *, relative: bool = False) -> None:
        self.deadline = deadline
        self.relative = relative

    def _arm(self, sub: Subscription) -> None:
        with sub.waker.task.runtime._lock:
            self._arm_locked(sub)

    @cython.locals(sub="CSubscription", runtime="TimerCalls")
    def _arm_locked(self, sub: Subscription) -> None:
        deadline = self.deadline
        if self.relative:
            if deadline >= _NO_LIMIT:
                return  # never due (inf, or decades): nothing for a timer heap to hold
        elif deadline == _INF:
            return
        runtime = sub.waker.task.runtime
        now = runtime._now()
        if self.relative:
            deadline += now
        # A deadline already passed goes through the heap all the same:
        # the next timer pass wakes it in deadline order, behind the
        # sleeps that came due before it, woken or not yet.
        if deadline - now >= _NO_LIMIT:
            return  # decades away: the same as never, as check_timeout says
        sub.handle = runtime._add_timer_locked(deadline, sub.fire, inline=True)  # type: ignore[attr-defined]

    @cython.locals(sub="CSubscription", runtime="TimerCalls", timer="CTimer")
    def _disarm(self, sub: Subscription, _armed: TimerState = TimerState.ARMED) -> None:
        timer = sub.handle
        if timer is not None:
            sub.handle = None
            if timer.state is not _armed:
                return  # it fired (the usual end of a sleep): a timer never re-arms
            runtime = sub.waker.task.runtime
            # acquire() then try (C calls, compiled): a wait is disarmed on
            # the worker that resumes its task (see _task.step).
            lock = runtime._lock
            lock.acquire()
            try:
                runtime._cancel_timer_locked(timer)  # type: ignore[attr-defined]
            finally:
                lock.release()

    def _describe(self) -> str:
        kind = "sleep" if self.relative else "sleep_until"
        return f"{kind}({self.deadline:g})"


_INF = float("inf")
# How far away a deadline means "never" (what check_timeout treats as no limit).
_NO_LIMIT = 1e9


def _seconds(value: object, what: str, noun: str = "a number of seconds") -> float:
    """``value`` as a float number of seconds for a sleep: 0.0 for none.

    A length of ``_NO_LIMIT`` or more stays as written (``inf`` past float
    range). Raises TypeError for a non-number (``None`` included: a sleep
    needs a length) and ValueError for NaN, before anything is made.
    """
    if type(value) is float or type(value) is int:
        # The usual case, without the ABC check below (sleep is a hot path).
        # The same meanings as check_timeout's; NaN fails both tests.
        number: float = value
        if number > 0.0:
            return float(number) if number < _NO_LIMIT else _far(number)
        if number <= 0.0:
            return 0.0
    if value is None or isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{what} needs {noun}, got {type(value).__name__}; pass a float, "
            "or math.inf to wait until cancelled"
        )
    if value != value:
        raise ValueError(f"{what} got NaN; pass {noun}, or math.inf")
    seconds = check_timeout(value, what)
    return _far(value) if seconds is None else seconds


def _far(value: float | numbers.Real) -> float:
    """A length of "no limit" as a float (``inf`` for an int beyond float range)."""
    try:
        return float(value)
    except OverflowError:
        return _INF


def sleep(seconds: float) -> WaitEvent[None]:
    """Suspend the task for ``seconds`` on the runtime clock.

    A sleep of 0 or less is a ``checkpoint()``: the task goes to the back of
    the ready queue, so that other ready tasks run first. ``math.inf`` (or
    any length of decades) sleeps until the task is cancelled.

    Raises:
        TypeError: ``seconds`` is not a number (raised by the call itself).
        ValueError: ``seconds`` is NaN (raised by the call itself).
        Cancelled: the task is cancelled before or during the sleep.
    """
    value = _seconds(seconds, "sleep()")
    if value == 0.0:
        return checkpoint()
    return SleepUntil(value, relative=True)


def sleep_until(deadline: float) -> WaitEvent[None]:
    """Suspend the task until the runtime clock reads ``deadline``.

    A deadline already passed wakes the task at the next timer pass, in
    deadline order behind the sleeps that came due before it (as a
    checkpoint would, without jumping that queue); ``math.inf`` sleeps until
    the task is cancelled.

    Raises:
        TypeError: ``deadline`` is not a number (raised by the call itself).
        ValueError: ``deadline`` is NaN (raised by the call itself).
        Cancelled: the task is cancelled before or during the sleep.
    """
    if type(deadline) is float and deadline == deadline:
        return SleepUntil(deadline)  # (the usual case: not NaN, nothing to convert)
    _seconds(deadline, "sleep_until()", "a time on the runtime's clock")  # a length's checks
    try:
        value = float(deadline)
    except OverflowError:  # an int beyond float range: never, or long past
        value = _INF if deadline > 0 else -_INF
    return SleepUntil(value)


@final
class SleepForever(WaitEvent[NoReturn]):
    """Wait until cancelled: nothing is armed, and only a cancel ends the wait."""

    __slots__ = ()

    arms_locked = True
    # Only a cancel ends it: a tree waiting on nothing else is not stuck
    # but waiting for Ctrl-C (the deadlock watch, _waitgraph.py).
    ends_by_cancel = True

    def _arm(self, sub: Subscription) -> None:
        pass

    def _arm_locked(self, sub: Subscription) -> None:
        pass

    def _describe(self) -> str:
        return "sleep_forever()"


def sleep_forever() -> WaitEvent[NoReturn]:
    """Suspend the task until it is cancelled; it never returns.

    The same wait as ``sleep(math.inf)``, spelled as trio and anyio spell
    it. In ``select``, it is a branch that never wins.

    Raises:
        Cancelled: the task is cancelled, before or during the wait.
    """
    return SleepForever()


def current_time() -> float:
    """Read the clock of the runtime running the calling operation.

    Raises:
        RuntimeError: the calling thread is not running an operation.
    """
    task = thread_state().task
    if task is not None:
        now: float = task.runtime._now()  # (in a coroutine task: the common case)
        return now
    return runtime_of_caller("current_time()").now()


# -- waiting for operations ----------------------------------------------------


def _op_outcome(
    op: AsyncOperation,
    _completed: OperationState = OperationState.COMPLETED,
    _failed: OperationState = OperationState.FAILED,
) -> tuple[Any, BaseException | None]:
    state = op._state
    if state is _completed:
        return op._value, None
    if state is _failed:
        op._observe()
        return None, op._error
    return None, no_result_error(
        op.name, op.cancel_reason, "check op.state, or catch CancellationError"
    )


def when_ended(op: AsyncOperation, sub: Subscription, deliver: Callable[[], object]) -> None:
    """Run ``deliver()`` once ``op`` has ended: now if it has, else when it does."""
    with op.runtime._lock:
        if when_ended_locked(op, sub, deliver):
            return
    deliver()


def when_ended_locked(op: AsyncOperation, sub: Subscription, deliver: Callable[[], object]) -> bool:
    """Have the end of ``op`` run ``deliver()``; False if ``op`` has ended already.

    Under the runtime lock. The pending call is kept in ``sub.handle`` so
    that ``forget_end_waiter`` can take it back.
    """
    if op._final:
        return False
    sub.handle = deliver
    op._add_waiter_locked(deliver)
    return True


def forget_end_waiter(op: AsyncOperation, sub: Subscription) -> None:
    """Take back what ``when_ended`` registered for ``sub``, if it has not run."""
    deliver = sub.handle
    if deliver is not None:
        sub.handle = None
        # No list left: the operation ended and woke (and dropped) every
        # waiter, this one included. The list is never made again.
        if op._waiters is not None:
            op._remove_waiter(deliver)


@final
class OpWait(WaitEvent):
    """Wait for an operation to end; ``await op`` makes one.

    With ``as_op=True`` the event gives the operation itself, whatever its
    outcome (for ``race``); otherwise its value, or raises its error.
    """

    __slots__ = ("as_op", "op")

    def __init__(self, op: AsyncOperation, *, as_op: bool = False) -> None:
        # (Made only by asyncop, for an operation its caller has checked.)
        self.op = op
        self.as_op = as_op

    def _arm(self, sub: Subscription) -> None:
        op = self.op
        waiter = sub.waker.task
        task = sub.waker.task._task
        node: AsyncOperation | None = task.current if task is not None else waiter
        while node is not None:
            if node is op:
                raise RuntimeError(
                    f"operation {op.name!r} awaited itself (from its own code or a "
                    "descendant's), which would wait forever; await it from outside its subtree"
                )
            node = node.parent
        if self.as_op:
            when_ended(op, sub, lambda: sub.fire(op))
        else:
            when_ended(op, sub, lambda: sub.fire(*_op_outcome(op)))

    def _disarm(self, sub: Subscription) -> None:
        forget_end_waiter(self.op, sub)

    def _describe(self) -> str:
        return f"operation {self.op.name!r}"


# -- readiness ------------------------------------------------------------------


def readable(fd: Any) -> WaitEvent[None]:
    """Wait until ``fd`` (an int or an object with ``fileno()``) is readable.

    One-shot: the task re-registers for each wait. The wake may be spurious,
    so retry the read and wait again on ``BlockingIOError``. A cancellation
    point: a cancel wakes the task at once and removes its registration.

    Raises:
        BusyResourceError: another task already waits for ``fd`` to be readable.
        ClosedResourceError: ``fd`` is closed, or ``notify_closing(fd)`` was called.
    """
    return IoWait(fd, READ)


def writable(fd: Any) -> WaitEvent[None]:
    """Wait until ``fd`` is writable; see ``readable``."""
    return IoWait(fd, WRITE)


def notify_closing(fd: Any) -> None:
    """Tell waiters that ``fd`` is about to be closed; they get ``ClosedResourceError``.

    Call it before closing a socket that a task may be waiting on. A plain
    function, not an awaitable; it reaches the reactors of every runtime.
    """
    from .._scheduler import live_runtimes

    number = fileno_of(fd)
    for runtime in live_runtimes():
        reactor = runtime._reactor
        if reactor is not None:
            reactor.notify_closing(number)


def protocol_event(ev: object, name: str) -> tuple[bool, BaseException | None]:
    """Check an object yielded to the stepper that is not a ``WaitEvent``.

    Returns whether an already-cancelled task must not wait on it (the
    ``entry_checked`` of a ``WaitEvent``, true unless it says otherwise),
    and the error to throw into the task instead, if any. Never raises:
    whatever the object does (a ``__repr__`` or ``__getattr__`` that raises)
    must reach the task as an error, or the task would stay RUNNING with
    nobody to step it.
    """
    if not is_event(ev):
        return True, foreign_yield_error(ev, name)
    try:
        return bool(getattr(ev, "entry_checked", True)), None
    except BaseException as exc:
        return True, exc


# The factories a task may be made of, as in spawn(asyncop.sleep_forever),
# spawn(asyncop.sleep, 10) or spawn(event.wait_async): trio's and anyio's
# habit, where these are async functions. The task awaits the event its first
# call makes (``awaiting``). A method is listed by its function, marked with
# ``task_maker`` where its class is defined; the set is complete once
# asyncop is imported.
TASK_MAKERS: set[object] = {checkpoint, sleep, sleep_until, sleep_forever, readable, writable}

_Maker = TypeVar("_Maker", bound=Callable[..., Any])


def task_maker(fn: _Maker) -> _Maker:
    """Mark ``fn``, which returns an asyncop awaitable, as a function a task may be made of.

    For methods whose waits a task can stand for on its own: waiting for an
    event, sending or receiving one item. Not for acquiring a lock or a
    permit, which a task would take with it as it ends.
    """
    TASK_MAKERS.add(fn)
    return fn


async def awaiting(event: WaitEvent[Any]) -> Any:
    """Await ``event``: the coroutine of a task whose function returned an asyncop awaitable."""
    return await event
