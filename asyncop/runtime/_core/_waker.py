"""The waker: how a suspended coroutine task is woken, exactly once.

Each coroutine task owns one :class:`Waker`, made with the task and reset by
``waker_new`` for every wait, so a wait allocates no waker. A wait subscribes
the waker to one or more *events* (a timer, an operation ending, a channel
slot, a socket becoming readable...); the first event to fire wins, stores
its result or error in the waker, and puts the task back in the ready queue.
Later events find the waker already claimed and are ignored: the task is
resumed once, with one result.

States
------
::

    NO_STATUS --suspend--> WAITING --event fires--> QUEUED --worker pops--> RESULT
        |   |
        |   +--event fires while still arming, or a cancel just before
        |      suspending--> RESULT (the task carries on without suspending)
        +--checkpoint--> QUEUED
        +--cancelled before the first step--> IGNORED

A resumed task (RESULT) runs as one that never waited: its next wait starts
from NO_STATUS again, and a checkpoint takes it straight to QUEUED.

- NO_STATUS: the task is running; the waker is not waiting.
- WAITING: the task is suspended on its events.
- QUEUED: an event fired; its result is stored and the task is in the ready
  queue.
- IGNORED: the task was queued for its first step but must not run (it was
  cancelled before it); the worker that pops it drops it without running it.
- RESULT: the task is being resumed; ``error`` is raised into the coroutine,
  or ``result`` is what ``await`` returns.

This module owns ``status``: it changes only in the ``_transition_to_*``
methods below (``__init__`` sets NO_STATUS), which test where they start
from and return whether they happened, and every caller acts on the answer:
an event that loses the race sees False and keeps its value (a channel
keeps the item, a lock keeps the permit), and a worker that pops a task
whose waker is not QUEUED drops the stale entry. Every transition happens
under the runtime lock but one: the running task's own reset for a new
wait (``_transition_to_no_status``, from ``waker_new`` or the stepper),
which bumps ``generation`` first, so that an event of the last wait firing
meanwhile finds the generation changed and loses. The transitions run on
every wait, and take the statuses they test and write as default arguments:
read through its class, an enum member costs ten times a local's load on
CPython 3.11.

Events
------
An event is any object with ``_arm(sub)``, ``_disarm(sub)`` and a
``cancellable`` attribute (see :class:`WaitEvent`, in ``_event.py``). ``_arm`` registers the
subscription and may fire it at once; ``_disarm`` takes it back and must be
idempotent. ``resume_when(task, event, callback)`` makes the subscription
(it and ``waker_new`` are in ``_subscribe.py``); the callback decides how a
firing resolves the waker: ``resolve`` hands over the result or error,
``cancel`` raises ``Cancelled``, ``timeout`` raises ``TimeoutError``. A
subscription that resolves, a task's every await, carries no callback; a
``CallbackSubscription`` carries any other (``subscription`` picks).

An event's code is user code, and runs on workers, the timer path and the
reactor thread, which must survive it: a ``_disarm`` that raises is logged
and the task still resumes; a callback that raises resumes the task with
its exception (``Subscription.fire`` never raises).

The push
--------
:func:`push_locked` puts a ready operation in its ready queue and wakes a
parked worker if one is needed: a woken task (``_complete``), a new one (a
spawn, ``_spawn.py``), one that yields at a checkpoint (``_task.py``), a
sync callback (``Kernel._push_locked``, the same function). It lives here,
below the stepper and the spawn, so that, compiled, they call it in C and
it reads the kernel's, the worker's and the node's fields in C.

A call that refuses its arguments lets go of every awaitable it was handed
(``let_go``), whichever argument it refused: the caller did not forget
them, and the exception already says what was wrong.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Iterable
from types import CoroutineType
from typing import TYPE_CHECKING, Any, ClassVar

from ...operations import (
    Cancelled,
    OpKind,
    ThreadState,
    _current,
    log_user_failure,
    thread_state,
)
from ...platform import is_main_thread
from ._event import SelfSuspendedEvent, WaitEvent
from ._fields import WorkerState
from ._never_awaited import describe_event

try:
    import cython  # pyright: ignore[reportMissingImports]
except ImportError:  # run as Python, without Cython installed
    from ...platform import pure_cython as cython

if TYPE_CHECKING:
    from ...operations import AsyncOperation
    from ._kernel import Kernel
    from ._worker import Worker

__all__ = [
    "CallbackSubscription",
    "SelfSuspendedEvent",
    "Subscription",
    "WaitEvent",
    "Waker",
    "WakerStatus",
    "cancel",
    "describe_event",
    "is_event",
    "let_go",
    "push_locked",
    "resolve",
    "set_up_waker",
    "subscription",
    "timeout",
]

# A 32-bit count wraps to 0 (compiled, a C constant: see _waker.pxd).
_WRAP = 0xFFFFFFFF


class WakerStatus(enum.Enum):
    """Where a waker is in one wait; see the module docstring."""

    __module__ = "asyncop"

    NO_STATUS = "no_status"
    WAITING = "waiting"
    QUEUED = "queued"
    IGNORED = "ignored"
    RESULT = "result"

    def __repr__(self) -> str:
        return f"WakerStatus.{self.name}"


# callback(waker, subscription, result, error) -> whether it won the waker
WakeCallback = Callable[["Waker", "Subscription", Any, "BaseException | None"], bool]


# Extended only by CallbackSubscription (see _waker.pxd).
class Subscription:
    """One waker subscribed to one event for one wait."""

    _made_by_runtime: ClassVar[bool] = True

    __slots__ = ("event", "generation", "handle", "waker")
    # (Set by set_up_subscription.)
    waker: Waker
    event: Any
    generation: int
    handle: Any

    def __init__(self, waker: Waker, event: Any) -> None:
        set_up_subscription(self, waker, event)

    @property
    def callback(self) -> WakeCallback:
        """How a firing resolves the waker (see ``resume_when``)."""
        return resolve

    def fire(self, result: Any = None, error: BaseException | None = None) -> bool:
        """Deliver the event: returns True if it won the waker.

        An event that loses must keep what it offered (an item, a permit).
        Never raises: a callback that fails (a user's, given to
        ``resume_when``) resumes the task with its exception instead, since
        an event may fire on a worker, a timer or the reactor thread, which
        must survive it, and the task must not be left waiting forever.
        """
        try:
            if type(self) is Subscription:  # (resolve's, called in C)
                return self.waker._complete(self, result, error)
            return self.callback(self.waker, self, result, error)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) and is_main_thread():
                raise  # a Ctrl-C is the user's, not the task's
            return self.waker._complete(self, None, exc)

    def __repr__(self) -> str:
        return f"<Subscription to {self.event!r}>"


# Final: an extension type when compiled (see _waker.pxd), which no class extends.
class CallbackSubscription(Subscription):
    """A subscription whose firing resolves the waker through another callback than ``resolve``.

    The commonest wait, a task's await, resolves: its subscription carries
    no callback, and fits a smaller allocator size class.
    """

    # The mark typing.final leaves, which an extension type cannot take as a decorator.
    __final__ = True

    __slots__ = ("_callback",)

    def __init__(self, waker: Waker, event: Any, callback: WakeCallback) -> None:
        Subscription.__init__(self, waker, event)
        self._callback = callback

    @property
    def callback(self) -> WakeCallback:
        """How a firing resolves the waker (see ``resume_when``)."""
        return self._callback


def set_up_subscription(sub: Subscription, waker: Waker, event: Any) -> None:
    """Set a new subscription's fields: ``Subscription.__init__`` (compiled, a C function)."""
    sub.waker = waker
    sub.event = event
    sub.generation = waker.generation
    # Whatever the event needs to take the subscription back (a timer, a
    # waiter entry); owned by the event.
    sub.handle = None


def subscription(waker: Waker, event: Any, callback: WakeCallback) -> Subscription:
    """A new subscription of ``waker`` to ``event``, whose firing calls ``callback``."""
    if callback is resolve:
        # Made without calling the class: compiled, its allocation then a C set-up.
        sub = Subscription.__new__(Subscription)
        set_up_subscription(sub, waker, event)
        return sub
    return CallbackSubscription(waker, event, callback)


# Not final: the runtime's task state subclasses it, so that a task and its
# waker are one object (one allocation, one object for the collector).
class Waker:
    """The wake-up state of one coroutine task; see the module docstring."""

    _made_by_runtime: ClassVar[bool] = True

    # Kept for code that reads them: always empty. Where a task is suspended
    # is read from its coroutine when asked (TaskState.suspension_point), so
    # a parked task carries no copy of it.
    filename = ""
    lineno = 0

    __slots__ = (
        "_subs",
        "error",
        "generation",
        "queued_at",
        "result",
        "status",
        "task",
        "triggered",
    )
    # (Set by set_up_waker.)
    task: AsyncOperation
    status: WakerStatus
    _subs: Subscription | list[Subscription] | None
    triggered: Any
    result: Any
    error: BaseException | None
    generation: int
    queued_at: int

    def __init__(self, task: AsyncOperation) -> None:
        set_up_waker(self, task)

    @property
    def runtime(self) -> Kernel:
        """The runtime the task runs in (its operation's: the waker keeps no copy)."""
        return self.task.runtime  # type: ignore[return-value]

    # -- transitions ---------------------------------------------------------

    def _transition_to_no_status(
        self,
        _no_status: WakerStatus = WakerStatus.NO_STATUS,
        _result: WakerStatus = WakerStatus.RESULT,
    ) -> bool:
        """NO_STATUS or RESULT -> NO_STATUS: forget the last wait, for a new one.

        By the running task itself, without the lock (see the module
        docstring); the last wait's events are disarmed (``_disarm_all``)
        by whoever ended it. False, and no change, when the task is not
        running.
        """
        # Invariant: only a running task starts a wait.
        status = self.status
        if status is not _no_status and status is not _result:
            return False
        self.generation += 1  # (first: a late firing of the last wait loses)
        self.status = _no_status
        self.triggered = None
        self.result = None
        self.error = None
        return True

    def _transition_to_waiting(
        self,
        _no_status: WakerStatus = WakerStatus.NO_STATUS,
        _waiting: WakerStatus = WakerStatus.WAITING,
    ) -> bool:
        """NO_STATUS -> WAITING: the task suspends on the events it armed."""
        # Invariant: only a running task suspends; an event that fired
        # while it was arming (RESULT) means it must not suspend.
        if self.status is not _no_status:
            return False
        self.status = _waiting
        return True

    def _transition_to_queued(
        self, _waiting: WakerStatus = WakerStatus.WAITING, _queued: WakerStatus = WakerStatus.QUEUED
    ) -> bool:
        """WAITING -> QUEUED: an event fired, and the task goes to the ready queue."""
        # Invariant: only a WAITING waker can be queued; a second event loses.
        if self.status is not _waiting:
            return False
        self.status = _queued
        return True

    def _transition_to_requeued(
        self,
        _no_status: WakerStatus = WakerStatus.NO_STATUS,
        _result: WakerStatus = WakerStatus.RESULT,
        _queued: WakerStatus = WakerStatus.QUEUED,
    ) -> bool:
        """NO_STATUS or RESULT -> QUEUED: a running task yields (a checkpoint).

        It goes straight back to the queue, with no event to wait for: the
        commonest transition of all. Under the runtime lock. (The last
        wait's result went to the task as it resumed, and its events were
        disarmed then; a late firing of it finds the generation changed.)
        """
        # Invariant: only a running task yields, and a running task's waker
        # is NO_STATUS (first step) or RESULT (resumed from a wait).
        status = self.status
        if status is not _no_status and status is not _result:
            return False
        self.generation += 1
        self.triggered = None
        self.status = _queued
        return True

    def _transition_to_result_early(
        self,
        _no_status: WakerStatus = WakerStatus.NO_STATUS,
        _result: WakerStatus = WakerStatus.RESULT,
    ) -> bool:
        """NO_STATUS -> RESULT: the task goes on without suspending.

        An event fired while the task was still arming its wait, or a
        cancel was seen just before it suspended.
        """
        # Invariant: only a running task that has not suspended yet.
        if self.status is not _no_status:
            return False
        self.status = _result
        return True

    def _transition_to_ignored(
        self, _result: WakerStatus = WakerStatus.RESULT, _ignored: WakerStatus = WakerStatus.IGNORED
    ) -> bool:
        """-> IGNORED: the task was cancelled before its first step, and never runs."""
        # Invariant: only a waker that is not being resumed can be ignored.
        if self.status is _result:
            return False
        self.status = _ignored
        return True

    def _transition_to_result(
        self, _queued: WakerStatus = WakerStatus.QUEUED, _result: WakerStatus = WakerStatus.RESULT
    ) -> bool:
        """QUEUED -> RESULT: the worker that popped the task resumes it."""
        # Invariant: only a QUEUED waker is resumed by a worker. (An event
        # that fires while the task is still arming sets RESULT itself.)
        if self.status is not _queued:
            return False
        self.status = _result
        return True

    def _complete(self, sub: Subscription, result: Any, error: BaseException | None) -> bool:
        """Let ``sub``'s event win this wait, if nothing has won it yet."""
        op = self.task
        runtime = op.runtime
        # A with-statement: an event may fire from a user thread (see
        # AsyncOperation._end_work).
        with runtime._lock:
            if sub.generation != self.generation:
                return False  # a firing of an earlier wait
            if self._transition_to_queued():
                op._wakes = (op._wakes + 1) & _WRAP  # (see _stats.py)
                self.triggered = sub.event
                self.result = result
                self.error = error
                push_locked(runtime, op, None, None, True)  # type: ignore[arg-type]  # (resumed)
                instruments = runtime._instruments
                if instruments is None:
                    return True
            elif self._transition_to_result_early():
                # Fired while the task is still arming its events: it will
                # see RESULT and carry on without suspending.
                self.triggered = sub.event
                self.result = result
                self.error = error
                return True
            else:
                return False
        # Woken, and an instrument listens: tell it, outside the lock.
        instruments.tell(runtime, instruments.woken, self.task)
        return True

    @property
    def events(self) -> list[Subscription]:
        """The subscriptions of the current wait (a new list; empty when none)."""
        subs = self._subs
        if subs is None:
            return []
        return list(subs) if type(subs) is list else [subs]  # type: ignore[list-item]

    def _add_subscription(self, sub: Subscription) -> None:
        subs = self._subs
        if subs is None:
            self._subs = sub
        elif type(subs) is list:
            subs.append(sub)
        else:
            self._subs = [subs, sub]  # type: ignore[list-item]

    def _new_wait(self, event: Any, callback: WakeCallback) -> Subscription:
        """Start a wait on one event: forget the last wait, then subscribe to ``event``."""
        started = self._transition_to_no_status()
        assert started, f"{self!r} started a wait outside its running task"
        # (subscription(), inline: this is every await's)
        if callback is resolve:
            sub = Subscription.__new__(Subscription)
            set_up_subscription(sub, self, event)
        else:
            sub = CallbackSubscription(self, event, callback)
        self._subs = sub
        return sub

    def _disarm_all(self) -> None:
        """Take every subscription of the current wait back from its event."""
        subs = self._subs
        if subs is None:
            return
        if type(subs) is list:
            for sub in subs:
                _take_back(sub)
        else:
            _take_back(subs)  # type: ignore[arg-type]
        self._subs = None

    def __repr__(self) -> str:
        return f"<Waker of {self.task.name!r} {self.status.name}>"


def set_up_waker(
    waker: Waker, task: AsyncOperation, _no_status: WakerStatus = WakerStatus.NO_STATUS
) -> None:
    """Set a new waker's fields, its first status among them: ``Waker.__init__``.

    The task state, a waker itself, calls it from its own ``__init__``: compiled, a C call
    (a call of ``Waker.__init__`` from there is a Python call).
    """
    waker.task = task
    waker.status = _no_status
    # The subscription of the current wait, or None; a list of them only for a
    # wait on several events (resume_when added to it): one event costs no list.
    waker._subs = None
    waker.triggered = None  # the event that won the current wait, or None
    waker.result = waker.error = None
    # Bumped by every reset, so a late firing of an old wait is ignored;
    # compiled, 32 bits that wrap (only its equality matters).
    waker.generation = 0
    # When the task was last queued, in pushes (see push_locked): compiled, 32
    # bits that wrap, compared serial-number style (queued_after).
    waker.queued_at = 0


# (Compiled, the kernel's, the node's, the thread's and the workers' fields
# are read in C, and the step, a spawn and a wake call it in C: see _waker.pxd.)
def push_locked(
    runtime: Kernel,
    op: AsyncOperation,
    state: ThreadState | None = None,
    woken: Worker | None = None,
    resumed: bool = False,
    _coro: OpKind = OpKind.CORO,
    _busy: WorkerState = WorkerState.BUSY,
) -> None:
    """Queue ``op`` and wake a parked worker for it, if one is needed: ``Kernel._push_locked``.

    Under the runtime lock. ``state`` is the calling thread's state, for
    callers that hold it. ``woken`` is a worker the caller woke for this item
    beforehand: if it is still up, between items (it took none meanwhile),
    and this is the only item queued, it will find the item, and nobody else
    is woken. ``resumed``: a coroutine task that an event woke, which goes to
    ``_woken`` (see "Which task runs next" in ``_worker.py``).
    """
    if op._kind is _coro:
        ready = runtime._woken if resumed else runtime._ready
        # (A task is queued only while it is live: it has its task state.)
        task = op._task
        runtime._queue_seq = task.queued_at = runtime._queue_seq + 1
    else:
        ready = runtime._sync_ready
    ready.append(op)
    if (
        woken is not None
        and len(ready) == 1
        and not woken.parked
        and not woken.item_seq & 1
        and woken in runtime._workers
    ):
        return
    if state is None:  # (compiled, a C lookup: a function of _current.pxd)
        state = _current.state_here() if cython.compiled else thread_state()  # type: ignore[attr-defined]
    if ready is not runtime._sync_ready:
        worker = state.worker
        if (
            worker is not None
            and state.op is None
            and worker.runtime is runtime
            and worker.state is _busy
        ):
            # A task queued by this worker's own step (or its timers, or its
            # poll): the worker runs the queue when the step ends (the test
            # of Kernel._on_own_worker, inline: this is the hottest path).
            # Should the step not end, the monitor hands the queue on (in
            # parallel mode) or reports the slow step.
            return
        if not runtime._parallel and runtime._lane.locked():
            return  # the lane's holder steps it, before it parks
    elif not runtime._sync_slot_free_locked():
        return  # the callback that frees a slot runs it next
    if runtime._idle:
        runtime._wake_one_locked()
    elif runtime._dynamic and runtime._unstuck_locked() < runtime._target:
        runtime._grow_locked(extra=False)
    elif ready is not runtime._sync_ready:
        # Every worker is busy. Those inside callbacks that wait for
        # asyncop may wait for this very task: give it a thread now.
        runtime._give_steps_a_thread_locked(waiting_only=True)
    # Else one takes it when its item ends, and the monitor hands it on
    # should none end soon.


def _take_back(sub: Subscription) -> None:
    """Take ``sub`` back from its event: a failing ``_disarm`` is logged, not raised."""
    try:
        sub.event._disarm(sub)
    except BaseException as exc:
        # A custom event's _disarm failed. The wait is over either way (a
        # late firing is ignored by its generation), so the task must still
        # resume, and the other events be disarmed.
        log_user_failure(f"_disarm() of {describe_event(sub.event)}", exc)


# -- the standard callbacks ---------------------------------------------------


def resolve(waker: Waker, sub: Subscription, result: Any, error: BaseException | None) -> bool:
    """Resume the task with the event's result, or raise its error."""
    return waker._complete(sub, result, error)


def cancel(waker: Waker, sub: Subscription, result: Any, error: BaseException | None) -> bool:
    """Resume the task by raising ``Cancelled`` into it."""
    return waker._complete(sub, None, Cancelled())


def timeout(waker: Waker, sub: Subscription, result: Any, error: BaseException | None) -> bool:
    """Resume the task by raising ``TimeoutError`` into it."""
    return waker._complete(sub, None, TimeoutError(f"{waker.task.name!r} timed out"))


# -- subscribing --------------------------------------------------------------


def is_event(obj: object) -> bool:
    """Whether ``obj`` follows the event protocol (``_arm`` and ``_disarm``); never raises."""
    if issubclass(type(obj), WaitEvent):  # (isinstance would read obj.__class__)
        return True
    try:
        return callable(getattr(obj, "_arm", None)) and callable(getattr(obj, "_disarm", None))
    except BaseException:  # a __getattr__ that raises something else
        return False


# -- events that were never awaited ---------------------------------------------


def let_go(handed: Iterable[object]) -> None:
    """Dispose of what a refused call was handed, so that none of it warns when collected.

    The caller did hand these over: a "never awaited" warning would blame
    it for a forgotten ``await`` on top of the exception that says what was
    wrong. An asyncop awaitable is marked used; a coroutine not started yet
    is closed, which is all Python would do with it besides warning. Never
    raises.
    """
    for obj in handed:
        try:
            if isinstance(obj, WaitEvent):
                obj._awaited = True
            elif (
                isinstance(obj, CoroutineType)
                and inspect.getcoroutinestate(obj) == inspect.CORO_CREATED
            ):
                obj.close()
        except Exception:  # pragma: no cover - a user's subclass with odd slots
            pass
