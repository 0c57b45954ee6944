"""What a worker runs between two looks at its queues: steps and callbacks.

- :func:`step_batch` steps up to ``BATCH`` ready coroutine tasks while the
  worker holds the lane: woken tasks first, a new or yielding one after at
  most ``OVERTAKE`` woken ones queued behind it (see "Which task runs next"
  in ``_worker.py``). Meanwhile ``sniffio.current_async_library()`` on the
  thread is ``"asyncop"``, as it is nowhere else (a sync callback's thread
  runs no async library).
- :func:`run_sync` runs one ready sync callback, if a sync slot is free,
  and ends its operation with what it returned or raised. The hooks that
  :func:`add_callback_hook` installed run on the thread just before it (a
  library that lets a thread call back into its event loop, as anyio's
  ``from_thread`` does, marks the thread there).

Both mark the worker busy with the item (``item``, ``item_seq`` odd) for the
monitor, which times items by that number, and charge it to its
operation's ``op.stats`` (``_usage.py``). While an instrument listens to
steps, each step goes through ``_step_instrumented``, which tells it
(``_instruments.py``); a callback tells it itself. Neither raises: an error in
asyncop itself is logged (:func:`_log_exception`) and the worker goes on.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from collections.abc import Callable
from types import AsyncGeneratorType, CoroutineType
from typing import TYPE_CHECKING, Any

from ...operations import (
    Cancelled,
    Outcome,
    ThreadState,
    end_work_on_worker,
    transition_to_running,
)
from ._instruments import failed, flush_ended, park_reason, tell, tell_why
from ._task import step, strip_own_frame
from ._usage import CpuMeter, charge, wall_clock
from ._waker import WaitEvent, WakerStatus, describe_event

if TYPE_CHECKING:
    from ...operations import AsyncOperation
    from ._instruments import Instruments
    from ._kernel import Kernel
    from ._worker import Worker

__all__ = [
    "BATCH",
    "OVERTAKE",
    "add_callback_hook",
    "queued_after",
    "remove_callback_hook",
    "run_sync",
    "step_batch",
]

logger = logging.getLogger("asyncop")

# Coroutine steps a worker runs before it looks at the timers again.
BATCH = 64
# Woken tasks queued after the head of the ready queue that may run before
# it (see "Which task runs next" in _worker.py). tokio caps its LIFO slot,
# which lets a just-woken task jump its queue, at three in a row likewise.
OVERTAKE = 4
_INF = float("inf")
# Queue numbers: 32 bits, and half their range (compiled, C constants).
_WRAP = 0xFFFFFFFF
_HALF = 0x80000000
_modules = sys.modules


# The hooks run before each sync callback. A tuple, replaced whole under
# _hooks_lock, so that the worker reads it without a lock.
_callback_hooks: tuple[Callable[[Any], object], ...] = ()
_hooks_lock = threading.Lock()


def add_callback_hook(hook: Callable[[Any], object]) -> None:
    """Run ``hook(runtime)`` on a worker thread just before each sync callback it runs.

    For libraries that must know, in a thread, which runtime it belongs to
    (anyio's backend marks the thread so that ``anyio.from_thread`` finds
    its way back). A hook runs on every runtime's workers, must be quick,
    and should not raise: what it raises is logged and the callback runs
    anyway. Adding a hook twice adds it once. Not a cancellation point.

    Raises:
        TypeError: ``hook`` is not callable.
    """
    global _callback_hooks
    if not callable(hook):
        raise TypeError(
            f"add_callback_hook() needs a callable, got {type(hook).__name__}; "
            "pass a function taking the runtime"
        )
    with _hooks_lock:
        if hook not in _callback_hooks:
            _callback_hooks = (*_callback_hooks, hook)


def remove_callback_hook(hook: Callable[[Any], object]) -> None:
    """Stop running ``hook`` before sync callbacks; a hook not added is ignored."""
    global _callback_hooks
    with _hooks_lock:
        _callback_hooks = tuple(h for h in _callback_hooks if h is not hook)


def _run_callback_hooks(op: AsyncOperation[Any]) -> None:
    for hook in _callback_hooks:
        try:
            hook(op.runtime)
        except BaseException:
            _log_exception("asyncop: callback hook %r failed before %r", hook, op)


def _log_exception(message: str, *args: object) -> None:
    """Log the exception being handled; never raise, whatever it or the args are.

    The args (an operation, a timer) are formatted by the logging module,
    which reports a ``__repr__`` that raises instead of raising itself. The
    kernel and the monitor log their own failures with it too.
    """
    try:
        logger.error(message, *args, exc_info=True)
    except BaseException:  # pragma: no cover - a broken handler or stream
        pass


def queued_after(later: int, earlier: int) -> bool:
    """Whether queue number ``later`` was given after ``earlier``.

    Queue numbers (a task's ``queued_at``) count pushes modulo 2**32, so
    they are compared serial-number style: ``later`` is after ``earlier``
    when it is less than 2**31 pushes ahead, across a wrap too.
    """
    return 0 < (later - earlier) & _WRAP < _HALF


def step_batch(
    rt: Kernel, worker: Worker, state: ThreadState, ready: deque[AsyncOperation[Any]]
) -> None:
    worker.stepping = True
    # While it steps tasks, the thread's async library is asyncop, for
    # sniffio (which anyio, httpx and others ask), if anything loaded it.
    sniffio = _modules.get("sniffio")
    if sniffio is not None:
        sniffio.thread_local.name = "asyncop"
    woken = rt._woken
    meter = worker.meter
    meter.start_run()
    # (Kept in a local for the batch: in parallel mode each worker's count
    # is its own guess, which is all the bound needs there.)
    overtaken = rt._overtaken
    for _ in range(BATCH):
        # Woken tasks first, within OVERTAKE (see "Which task runs next" in
        # the module docstring). An IndexError means another worker took the item
        # (parallel mode): nothing was popped, the batch ends.
        try:
            if woken:
                if not ready:
                    op = woken.popleft()
                elif overtaken < OVERTAKE:
                    head = ready[0]._task
                    op = woken.popleft()
                    task = op._task
                    if head is None or (
                        task is not None and queued_after(task.queued_at, head.queued_at)
                    ):
                        overtaken += 1
                else:
                    op = ready.popleft()
                    overtaken = 0
            elif ready:
                op = ready.popleft()
                overtaken = 0
            else:
                break
        except IndexError:
            break
        # Odd while busy: the monitor times an item by seeing the same odd
        # number on its looks (no clock read here).
        worker.item = op
        worker.item_seq += 1
        try:
            instruments = rt._instruments
            if instruments is None or not instruments.stepping:
                step(rt, op, state, meter)
            else:
                _step_instrumented(rt, op, state, meter, worker, instruments)
        except BaseException:  # pragma: no cover - a bug in asyncop
            _log_exception("asyncop: worker failed stepping %r", op)
        # Do not keep the last item alive from this frame (an unobserved
        # failure is reported when it is collected); the worker's own
        # reference goes with the next item, or at the end of the batch.
        op = None  # type: ignore[assignment]
        worker.item_seq += 1
        worker.replaced = False
    rt._overtaken = overtaken
    meter.end_run()
    worker.item = None
    worker.stepping = False
    if sniffio is not None:
        sniffio.thread_local.name = None


def _step_instrumented(
    rt: Kernel,
    op: AsyncOperation[Any],
    state: ThreadState,
    meter: CpuMeter,
    worker: Worker,
    instruments: Instruments,
    _waiting: WakerStatus = WakerStatus.WAITING,
) -> None:
    """``step``, told to ``instruments``: ``step_started``, ``parked``, ``step_ended``.

    An operation that ends in the step is reported ``ended`` after it.
    """
    task = op._task
    if task is None:
        return  # already final: nothing runs
    steps = op._steps
    for hook in instruments.step_started:  # (tell(), inline)
        try:
            hook(op)
        except BaseException:  # (any: one that escaped would skip the runtime's bookkeeping)
            failed(rt, hook)
    try:
        step(rt, op, state, meter)
    finally:
        current = rt._instruments  # (one may have come or gone in the step)
        if current is not None:
            if (
                current.parked
                and op._steps != steps
                and (task.status is _waiting or task.triggered is not None)
            ):
                # (Not a yield: a checkpoint left it QUEUED with no event.)
                reason = park_reason(task)
                if reason is not None:
                    tell_why(rt, current.parked, op, reason)
            for hook in current.step_ended:
                try:
                    hook(op)
                except BaseException:
                    failed(rt, hook)
        if worker.ended_later:  # (it ended in this step: report it now)
            flush_ended(rt, worker.ended_later)


def run_sync(rt: Kernel, worker: Worker, state: ThreadState) -> None:
    """Run one ready sync callback, if a sync slot is free."""
    lock = rt._lock
    lock.acquire()  # (worker thread only: it never runs signal handlers)
    try:
        if not rt._sync_ready or not rt._sync_slot_free_locked():
            return
        op = rt._sync_ready.popleft()
        if not transition_to_running(op):
            return  # cancelled while queued: already finalized, never runs
        worker.in_sync = True
    finally:
        lock.release()
    worker.item = op
    worker.item_seq += 1
    try:
        if rt._next_deadline < _INF:
            # This worker may be the one to fire the next timer (it was
            # woken to park on it), and the callback may hold it past the
            # deadline: the monitor fires it then.
            rt._monitor.deadline_pending()
        _call_sync(rt, op, state, worker)
    except BaseException:  # pragma: no cover - a bug in asyncop
        _log_exception("asyncop: worker failed running %r", op)
    finally:
        worker.in_sync = False
        worker.item = None
        worker.item_seq += 1
        worker.replaced = False
    # A slot is free again: a callback that waits for one runs next, here.


def _call_sync(
    rt: Kernel,
    op: AsyncOperation[Any],
    state: ThreadState,
    worker: Worker,
    _value: Outcome = Outcome.VALUE,
    _error: Outcome = Outcome.ERROR,
    _cancelled: Outcome = Outcome.CANCELLED,
) -> None:
    fn = op._fn
    args = op._args
    ctx = op._ctx
    assert fn is not None and ctx is not None
    if _callback_hooks:
        _run_callback_hooks(op)
    state.op = op
    meter = worker.meter
    op._steps = 1
    instruments = rt._instruments
    if instruments is not None:
        tell(rt, instruments.step_started, op)
    start = meter.start_run()
    try:
        value = ctx.run(fn, *args)
        if value is not None and isinstance(value, _NOT_A_RESULT):
            raise _unrun_result_refused(op.name, value) from None
    except Cancelled:
        outcome, value, error = _cancelled, None, None
    except BaseException as exc:
        outcome, value, error = _error, None, strip_own_frame(exc)
    else:
        outcome, error = _value, None
    finally:
        state.op = None
    # (Charged before it ends: whoever it wakes finds its stats complete.)
    now = charge(op, meter, start)
    meter.end_run()
    instruments = rt._instruments
    if instruments is not None:
        tell(rt, instruments.step_ended, op)
    # Its waiters are woken before this worker looks for more work or
    # parks: a thread woken now has the OS's wake-up latency to cover, and
    # this worker's own bookkeeping then overlaps it instead of coming first.
    end_work_on_worker(op, outcome, value, error, now if rt._stamp is wall_clock else None)


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
