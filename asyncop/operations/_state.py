"""The operation state machine, the result snapshot, and the node's kinds.

States
------
``CREATED -> PENDING -> RUNNING -> COMPLETED | FAILED | CANCELLED``

- CREATED: made by ``Runtime.create``; not submitted. Only ``submit`` moves
  it on (to PENDING), or ``cancel`` (to CANCELLED).
- PENDING: submitted and in the ready queue. A worker moves it to RUNNING;
  ``cancel`` moves it to CANCELLED, and then it never runs.
- RUNNING: its own work (callback, coroutine or scope body) is running, or
  has ended while children are still live. It leaves RUNNING only when both
  its own work and every child have ended.
- COMPLETED, FAILED, CANCELLED: final. Set exactly once, by the runtime,
  under the runtime lock; never changed afterwards.

A scope operation goes from CREATED straight to RUNNING: its work is the body
of a ``with`` block that is already running in the caller's thread.

Besides its state, a node records what its own work is (``OpKind``) and how
that work ended (``Outcome``); ``_finalize.py`` derives the final state from
the outcome and the failures the children handed up.
"""

from __future__ import annotations

import enum
from typing import Generic

import attrs

from ._typing import T

__all__ = ["FINAL_STATES", "AsyncResult", "OpKind", "OperationState", "Outcome"]


class OperationState(enum.Enum):
    """Where an operation is in its life; see the module docstring."""

    __module__ = "asyncop"

    CREATED = "created"
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        """True for COMPLETED, FAILED and CANCELLED."""
        return self in FINAL_STATES

    def __repr__(self) -> str:
        return f"OperationState.{self.name}"


FINAL_STATES = frozenset(
    {OperationState.COMPLETED, OperationState.FAILED, OperationState.CANCELLED}
)

_COMPLETED = OperationState.COMPLETED
_FAILED = OperationState.FAILED
_CANCELLED = OperationState.CANCELLED


def _is_final(state: OperationState) -> bool:
    # Identity tests: several times cheaper than the enum property on the
    # hot path (every operation checks this a few times).
    return state is _COMPLETED or state is _FAILED or state is _CANCELLED


class Outcome(enum.Enum):
    """How an operation's own work ended (children not included)."""

    NONE = "none"
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
    # operation calls the job's ``_on_cancel()`` (see runtime/_remote.py).
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
