"""The operation state machine, the result snapshot, and the node's kinds.

States
------
``CREATED -> PENDING -> RUNNING -> COMPLETED | FAILED | CANCELLED``

- CREATED: made by ``Runtime.create``; not submitted. Only ``submit`` moves
  it on (to PENDING), or ``cancel`` (to CANCELLED).
- PENDING: submitted and in the ready queue. A worker moves it to RUNNING;
  ``cancel`` moves it to CANCELLED, and then it never runs. Work that is
  spawned (made and submitted in one step) is born PENDING: nothing can see
  it before it is linked and queued, under the runtime lock.
- RUNNING: its own work (callback, coroutine or scope body) is running, or
  has ended while children are still live. It leaves RUNNING only when both
  its own work and every child have ended.
- COMPLETED, FAILED, CANCELLED: final. Set exactly once, by the runtime,
  under the runtime lock; never changed afterwards.

A scope operation is born RUNNING: its work is the body of a ``with`` block
that is already running in the caller's thread, and no cancel may find it
unstarted. A remote operation goes from CREATED straight to RUNNING: its
work runs in another process, and never in a queue.

Who writes what
---------------
This module owns ``AsyncOperation._state``: the three transitions below are
the only code that writes it (``OperationFields.__init__`` sets the state it
is born in), and the class binds them as its methods. Each one tests where
it starts from and says whether it happened, and its callers act on that
answer; all of them run under the runtime lock:

- ``_transition_to_pending``: CREATED -> PENDING, by ``submit``; False
  once the work has ended (a cancel came first) or it was submitted.
- ``_transition_to_running``: PENDING -> RUNNING, by the worker that pops
  the operation (CREATED -> RUNNING for a remote operation, by its job);
  False when a cancel got there first, and then it must not run.
- ``_transition_to_final``: to the final state ``_finalize.py`` decided,
  with every field of the result in one call.

Each state says whether it is final (``state.final``, a plain attribute),
and the node keeps the answer beside its state (``_final``, written with it
by ``_transition_to_final``): the hot paths read that field, which the
compiled core reads in C where ``state.final`` is a lookup on an enum
member. The transitions take the states they test and
write as default arguments, bound once and read as locals: on CPython 3.11,
reading an enum member through its class goes through the enum metaclass's
``__getattr__`` hook and costs ten times a local's load, on paths every
operation takes several times. (The runtime's hot paths do the same.)

Besides its state, a node records what its own work is (``OpKind``) and how
that work ended (``Outcome``, None until then); ``_finalize.py`` derives the
final state from the outcome and the failures the children handed up.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Generic

import attrs

from ._typing import T

if TYPE_CHECKING:
    from ._finalize import _Unobserved
    from ._node import AsyncOperation

__all__ = [
    "AsyncResult",
    "OpKind",
    "OperationState",
    "Outcome",
    "transition_to_final",
    "transition_to_pending",
    "transition_to_running",
]


class OperationState(enum.Enum):
    """Where an operation is in its life; see the module docstring.

    Attributes:
        final: True for COMPLETED, FAILED and CANCELLED.
    """

    __module__ = "asyncop"

    CREATED = "created"
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    final: bool

    def __init__(self, value: str) -> None:
        # A plain attribute of each member, not a property: every operation
        # asks it several times.
        self.final = value in ("completed", "failed", "cancelled")

    def __repr__(self) -> str:
        return f"OperationState.{self.name}"


class Outcome(enum.Enum):
    """How an operation's own work ended (children not included).

    An operation whose work has not ended has no outcome: its ``_outcome``
    is None.
    """

    VALUE = "value"
    ERROR = "error"
    CANCELLED = "cancelled"


class OpKind(enum.Enum):
    """What an operation's own work is."""

    SYNC = "sync"  # a plain function, run on a worker thread
    CORO = "coroutine"  # an async def function, stepped by the workers
    SCOPE = "scope"  # the body of a with block, run by the caller's thread
    # A plain function run by an executor in another process: made with
    # submit=False and started by its remote job, never run by a worker.
    # Its ``_task`` slot holds that job once it is sent, and a cancel of the
    # operation calls the job's ``_on_cancel()`` (see runtime/_executors/_remote.py).
    REMOTE = "remote"


@attrs.frozen
class AsyncResult(Generic[T]):
    """What an operation ended with: its state, value and error.

    COMPLETED results carry ``value`` and no ``error``; FAILED results carry
    ``error`` and no ``value``; CANCELLED results carry neither. A snapshot of
    an unfinished operation (``async_result``) carries its current state and
    neither.
    """

    __module__ = "asyncop"

    state: OperationState
    value: T | None = None
    error: BaseException | None = None


# -- the transitions, bound as AsyncOperation's methods ------------------------


def transition_to_pending(
    self: AsyncOperation,
    _created: OperationState = OperationState.CREATED,
    _pending: OperationState = OperationState.PENDING,
) -> bool:
    """CREATED -> PENDING: submitted, for a worker to run.

    Returns False, and changes nothing, when the operation was submitted
    before or its work has ended (a cancel came first).
    """
    # Invariant: only a CREATED operation whose work is still to run is queued.
    if self._state is not _created or self._outcome is not None:
        return False
    self._state = _pending
    return True


def transition_to_running(
    self: AsyncOperation,
    at: float | None = None,
    _pending: OperationState = OperationState.PENDING,
    _running: OperationState = OperationState.RUNNING,
) -> bool:
    """PENDING -> RUNNING (CREATED -> RUNNING for a remote operation).

    Returns False, and changes nothing, when a cancel got there first: the
    worker that popped the operation must then drop it without running it.
    ``at``: a reading of the runtime's clock for ``started_at`` that the
    caller has (a worker's, as its step starts); else the clock is read.
    """
    # Invariant: work that ended (cancelled while queued) never starts, and
    # only a remote operation's work starts unqueued.
    if self._outcome is not None:
        return False
    state = self._state
    if state is not _pending and not (
        state is OperationState.CREATED and self._kind is OpKind.REMOTE
    ):
        return False
    if at is None:
        at = self.runtime._stamp()
    elif at < self._created_at:
        at = self._created_at  # a worker's reading from before another thread made it
    self._started_at = at
    self._state = _running
    return True


def transition_to_final(
    self: AsyncOperation,
    state: OperationState,
    error: BaseException | None,
    taken_over: bool,
    report: _Unobserved | None,
    _completed: OperationState = OperationState.COMPLETED,
) -> bool:
    """CREATED, PENDING or RUNNING -> ``state``: COMPLETED, FAILED or CANCELLED.

    Writes every field of the outcome with no call in between: a Ctrl-C
    on the main thread lands only as a call starts or a C call returns,
    so it stops the transition before it begins or lets it through
    whole. Flags the node until it is settled (see
    ``_try_finalize_locked``), and writes the state and ``_final``
    last: a reader without the lock that sees it final finds the rest.

    Returns False, and changes nothing, when the operation is final already.
    """
    # Invariant: exactly one final state, set once.
    if self._final:
        return False
    assert state.final, state
    if state is not _completed:
        self._value = None
    self._error = error
    rare = self._rare
    if rare is not None:
        rare.failures = None
    if taken_over:
        # The parent takes the failure over: it is observed there.
        self._observed = True
    elif report is not None:
        # Armed before the state reads FAILED: whoever sees FAILED and
        # observes the failure then finds it, and disarms it.
        report.error = error
        self._unobserved = report
    waiters = self._waiters
    if waiters is not None:
        self._waiters = waiters[::-1]
    self._cancel_unfinished = True
    self._state = state
    self._final = True
    return True
