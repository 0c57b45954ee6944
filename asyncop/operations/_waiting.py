"""Waiting for an operation to end: blocking a thread, and the waiter list.

``AsyncOperation.wait()`` and ``await op`` (in ``_node.py``) are the public
ways to wait; the functions here are what they and the runtime build on,
bound by the class as its methods: ``_check_can_block`` refuses a wait that
would block a worker or wait for itself, ``_block_until_final`` parks the
calling thread through ``_park.park`` (so that a cancel of the calling
operation ends the wait), ``_add_waiter_locked`` and ``_remove_waiter``
keep the list of what to wake when the operation is final (a held lock to
release, or a callback to run once the runtime lock is free), and
``_snapshot`` and ``_observe`` read the result and mark a failure as seen,
and ``_settled`` lets a reader that saw the operation end without the
runtime lock go on only once its end is settled.
A thread that waits for its tree to end (``run()``, ``shutdown()``, a
scope's exit) is marked with a :class:`TreeWait`, which the runtime's
deadlock watch does not count as a thread that could wake a task.

The finalization (``_finalize.py``) takes the waiter list and wakes it, the
last waiter first.
"""

from __future__ import annotations

import _thread
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, final

from ._current import ThreadState, thread_state
from ._park import park, release_quietly
from ._state import AsyncResult, OperationState
from ._typing import V

if TYPE_CHECKING:
    from ._node import AsyncOperation

__all__ = [
    "TreeWait",
    "add_waiter_locked",
    "block_until_final",
    "check_can_block",
    "observe",
    "remove_waiter",
    "settled",
    "snapshot",
]

# The results that carry nothing but a state, made once: results are
# immutable, and a callback that returns None is the common case.
_NO_VALUE: dict[OperationState, AsyncResult[Any]] = {
    state: AsyncResult(state, None, None) for state in OperationState
}
_COMPLETED_NONE = _NO_VALUE[OperationState.COMPLETED]


def check_can_block(self: AsyncOperation, what: str, state: ThreadState | None = None) -> None:
    if state is None:
        state = thread_state()
    if state.task is not None:
        raise RuntimeError(
            f"{what} on operation {self.name!r} would block a worker thread inside a "
            "coroutine; write 'await op' instead"
        )
    node = state.op  # current_operation(), outside a coroutine
    while node is not None:
        if node is self:
            raise RuntimeError(
                f"{what} on operation {self.name!r} from its own code or a descendant's "
                "would wait forever; let the operation end, or wait from outside it"
            )
        node = node.parent


@final
class TreeWait:
    """A thread waiting for its tree to end: in ``run()``, ``shutdown()``, a scope's exit.

    What such a thread waits on (``ThreadState.waits_on``). It goes on only
    once the tree has moved, so the runtime's deadlock watch does not count
    it as a thread that could wake a task; ``call`` names the wait in the
    deadlock report. (``op.wait()`` without a timeout is the same kind of
    wait, marked with the operation itself.)
    """

    __slots__ = ("call", "op")

    def __init__(self, op: AsyncOperation, call: str) -> None:
        self.op = op
        self.call = call

    def _describe(self) -> str:
        return f"the end of operation {self.op.name!r}, in {self.call}"


def block_until_final(
    self: AsyncOperation,
    timeout: float | None,
    caller: AsyncOperation | None = None,
    what: TreeWait | None = None,
) -> bool:
    """Park the calling thread until the operation is final, or time out.

    ``timeout`` went through ``check_timeout``. With ``caller`` (the
    operation the thread runs), a cancel of the caller ends the wait
    early too: it returns False and the caller tells which from its
    token. A KeyboardInterrupt removes the waiter and propagates; the
    main thread waits in slices, so it notices one promptly. ``what``
    says which of the runtime's own waits for a tree this is; without it,
    a wait with no timeout is marked with the operation (an ``op.wait()``
    that goes on only once the tree moves) and a timed one with nothing.
    """
    waiter = _thread.allocate_lock()
    waiter.acquire()
    # With a caller, the lock has a second waker (the caller's cancel),
    # so the finalizer must release it quietly: queue a callable then.
    wake: Callable[[], object] | _thread.LockType = (
        waiter if caller is None else functools.partial(release_quietly, waiter)
    )
    try:
        # A with-statement: see _end_work.
        with self.runtime._lock:
            if self._state.final:
                return True
            self._add_waiter_locked(wake)
        park(waiter, timeout, caller, what if what is not None or timeout is not None else self)
    finally:
        # Also after a Ctrl-C that landed as the waiter was queued.
        if not self._state.final:  # else the finalizer took the list
            self._remove_waiter(wake)
    return self._state.final


def settled(self: AsyncOperation) -> None:
    """Return once the end of ``self``, which the caller saw final, is settled.

    For a reader that saw the final state without the runtime lock
    (``op.done``, ``op.state``, ``op.wait()``...): the finalizer writes the
    state first, then settles the node (stamps its end, unlinks it from its
    parent and hands it the failure, which may cancel the parent, drops its
    task state, clears ``parent``), and flags it (``_cancel_unfinished``)
    until it is done, under the runtime lock all along. With the GIL off, a
    reader on another thread can get between the two: seeing the flag, it
    takes the lock once, which the finalizer holds until the node is
    settled. Costs one field read when the node is settled (the flag is
    written before the state and cleared after the settling, so a reader
    that saw the state final and the flag clear saw the settled node).
    """
    if self._cancel_unfinished:
        with self.runtime._lock:  # (recursive: a caller may hold it)
            pass


def add_waiter_locked(self: AsyncOperation, fn: Callable[[], object] | _thread.LockType) -> None:
    """Wake ``fn`` when the operation is final: a held lock is released, a
    callable is called once the runtime lock is free."""
    if self._waiters is None:
        self._waiters = [fn]
    else:
        self._waiters.append(fn)


def remove_waiter(self: AsyncOperation, fn: Callable[[], object] | _thread.LockType) -> None:
    with self.runtime._lock:
        waiters = self._waiters
        if waiters is not None:
            try:
                waiters.remove(fn)
            except ValueError:
                pass


def snapshot(
    self: AsyncOperation[V],
    observe: bool,
    _completed: OperationState = OperationState.COMPLETED,
    _failed: OperationState = OperationState.FAILED,
) -> AsyncResult[V]:
    state = self._state
    if state is _completed:
        value = self._value
        return _COMPLETED_NONE if value is None else AsyncResult(state, value, None)
    if state is _failed:
        if observe:
            self._observe()
        return AsyncResult(state, None, self._error)
    return _NO_VALUE[state]


def observe(self: AsyncOperation) -> None:
    """Mark the failure as seen: it is not logged when the operation is collected."""
    self._observed = True
    report = self._unobserved
    if report is not None:
        self._unobserved = None
        report.error = None
