"""The operation node: one unit of work in the operation tree.

Map
---
- ``AsyncOperation``: the public face (state, result, cancel, wait, spawn).
- Transitions: ``_transition_to_pending``, ``_transition_to_running`` and
  ``_transition_to_final``; each asserts where it starts from.
- Completion: ``_end_work_locked`` records how the operation's own work
  ended; ``_try_finalize_locked`` makes it final once its children are gone,
  then climbs to the parent, iteratively.
- Cancellation: ``_cancel_locked`` walks the subtree with an explicit stack;
  a walk cut short by a Ctrl-C is redone by the next one, and so is a
  finalization that a Ctrl-C cut short (see ``_try_finalize_locked``).
- Waiting: ``wait`` and ``_block_until_final`` park the thread through
  ``_park.park``, so a cancel of the calling operation ends the wait.

Who writes what
---------------
Every field below the public ones is written only under the runtime lock,
except ``_fn``/``_args``/``_ctx``, which the worker running the operation
clears after the work ends, ``_observed``, a latch that only goes from
False to True, and ``_unobserved``, which whoever observes a failure drops.
Public readers (``state``, ``done``, ``token.cancelled``) read
one reference and need no lock.

Tree links
----------
A parent holds its live children in a doubly linked list (``first_child``,
``_last_child``, ``sibling_next``, ``_sibling_prev``) so that a child ending
among 100,000 siblings unlinks in O(1). A child that becomes final unlinks at
once and clears its own links, which also breaks the parent <-> child
reference cycle without the garbage collector's help.

Outcome of the operation's own work
-----------------------------------
``_outcome`` is NONE while the work has not ended, then VALUE, ERROR or
CANCELLED. The final state follows from it and from the failures the
children handed up (``_failures``):

- any failure (own error or a child's) -> FAILED;
- otherwise VALUE -> COMPLETED, even if a cancel arrived after the work
  finished (a value already produced is kept);
- otherwise CANCELLED.

A KeyboardInterrupt or SystemExit among the failures is never grouped: the
operation fails with it bare, the other failures in its ``__context__``, and
it is handed to the parent even from a supervised child.
"""

from __future__ import annotations

import _thread
import contextvars
import functools
import logging
import sys
from collections.abc import Callable, Coroutine, Generator, Iterator
from types import CodeType
from typing import TYPE_CHECKING, Any, Generic, final, overload

import attrs

from ..platform import check_deadline, check_timeout
from ._current import ThreadState, thread_state
from ._errors import CancellationError, Cancelled, InvalidStateError
from ._executor import spawn_remote
from ._foreign import awaited_outside_error
from ._guard import run_isolated
from ._hooks import start_child
from ._park import cancelled_error, park, release_quietly
from ._state import AsyncResult, OperationState, OpKind, Outcome
from ._token import CancelToken
from ._typing import R, T, Ts

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ._hooks import After

__all__ = ["AsyncOperation", "run_after"]

logger = logging.getLogger("asyncop")

_CREATED = OperationState.CREATED
_PENDING = OperationState.PENDING
_RUNNING = OperationState.RUNNING
_COMPLETED = OperationState.COMPLETED
_FAILED = OperationState.FAILED
_CANCELLED = OperationState.CANCELLED
# (An enum member read through its class costs a lookup: hot paths use these.)
_NO_OUTCOME, _VALUE, _ERROR = Outcome.NONE, Outcome.VALUE, Outcome.ERROR
_CANCELLED_OUTCOME, _SCOPE, _REMOTE = Outcome.CANCELLED, OpKind.SCOPE, OpKind.REMOTE


# The results that carry nothing but a state, made once: results are
# immutable, and a callback that returns None is the common case.
_NO_VALUE: dict[OperationState, AsyncResult[Any]] = {
    state: AsyncResult(state, None, None) for state in OperationState
}
_COMPLETED_NONE = _NO_VALUE[OperationState.COMPLETED]


def _is_final(state: OperationState) -> bool:
    # Identity tests: several times cheaper than the enum property on the
    # hot path (every operation checks this a few times).
    return state is _COMPLETED or state is _FAILED or state is _CANCELLED


def run_after(after: After) -> None:
    """Run the actions collected under the runtime lock, after releasing it.

    An exception from one action (a user's ``on_cancel`` callback), even
    SystemExit or KeyboardInterrupt, is logged and does not stop the others:
    they carry wakeups that must be delivered, and the cancel that triggered
    them has already happened and cannot be undone. A KeyboardInterrupt on
    the main thread is raised again once every action has run.
    """
    run_isolated(after, "a cancellation or completion callback")


_LockType = _thread.LockType


def _user_frame(depth: int = 2) -> tuple[CodeType | None, int]:
    """Find the first frame outside asyncop: where the user made the operation.

    ``depth`` is where the caller expects the user's frame to be (counted
    from this function), so the usual case costs one look; the walk goes on
    outward from there if that frame is still asyncop's. Returns the frame's
    code and instruction offset: the line number is worked out from them
    only when somebody reads it (it is not free, and rarely read).
    """
    frame = sys._getframe(depth)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module == "asyncop" or module.startswith("asyncop.")):
            return frame.f_code, frame.f_lasti
        frame = frame.f_back  # type: ignore[assignment]
    return None, 0


@final
@attrs.define(eq=False, slots=True, init=False, repr=False, weakref_slot=True)
class AsyncOperation(Generic[T]):
    """One node of the operation tree: a unit of work and its children.

    Only the runtime makes operations, through ``Runtime.create``,
    ``Runtime.spawn``, ``AsyncOperation.spawn`` and ``Runtime.scope``.
    """

    runtime: Runtime
    name: str
    parent: AsyncOperation[Any] | None
    first_child: AsyncOperation[Any] | None
    sibling_next: AsyncOperation[Any] | None
    cancel_reason: object
    _state: OperationState
    _sibling_prev: AsyncOperation | None
    _last_child: AsyncOperation | None
    _kind: OpKind
    _fn: Callable[..., Any] | None
    _args: tuple[Any, ...]
    _ctx: contextvars.Context | None
    _outcome: Outcome
    _value: Any
    _error: BaseException | None
    _failures: list[BaseException] | None
    # What to wake when the operation is final: the lock a thread blocked in
    # wait() sleeps on, or a callback to run once the runtime lock is free.
    _waiters: list[Callable[[], object] | _thread.LockType] | None
    _observed: bool
    # Logs the failure when the operation is collected, unless it is
    # observed first; made only for a failure nobody has taken over.
    _unobserved: _Unobserved | None
    _propagates: bool
    _supervised: bool
    _supervise: bool
    _shield: bool
    _deadline: float | None
    _deadline_timer: Any
    _expired: bool
    _interrupted: bool
    # True once a cancel walk that started above this node reached it (or
    # found it already cancelled) through no shield: the node was cancelled
    # from outside, whatever its own cancel() or deadline did. A scope's
    # exit reads it to decide whether its Cancelled passes on.
    _outside_cancel: bool
    _task: Any
    # The token is made on first use (most operations never hand theirs
    # out); until then, and always for the runtime, the flag is the truth.
    _cancelled: bool
    _token: CancelToken | None
    # Set while a cancel walk from this node runs, and from the transition to
    # final until the node is settled: still set afterwards only if a Ctrl-C
    # cut either short, and then the next cancel() that meets it finishes it.
    _cancel_unfinished: bool
    # Where the operation was made: code object and instruction offset.
    _code: CodeType | None
    _lasti: int

    def __init__(
        self,
        runtime: Runtime,
        kind: OpKind,
        fn: Callable[..., Any] | None,
        args: tuple[Any, ...],
        name: str,
        ctx: contextvars.Context | None,
        code: CodeType | None,
        lasti: int,
    ) -> None:
        self.runtime = runtime
        self.name = name
        self._code = code
        self._lasti = lasti
        self.parent = None
        self.first_child = None
        self.sibling_next = None
        self.cancel_reason = None
        self._state = _CREATED
        self._sibling_prev = None
        self._last_child = None
        self._kind = kind
        self._fn = fn
        self._args = args
        self._ctx = ctx
        self._outcome = _NO_OUTCOME
        self._value = None
        self._error = None
        self._failures = None
        self._waiters = None
        self._observed = False
        self._unobserved = None
        self._propagates = True
        self._supervised = False
        self._supervise = False
        self._shield = False
        self._deadline = None
        self._deadline_timer = None
        self._expired = False
        self._interrupted = False
        self._outside_cancel = False
        self._task = None
        self._cancelled = False
        self._token = None
        self._cancel_unfinished = False

    # ------------------------------------------------------------------
    # Public reading
    # ------------------------------------------------------------------

    @property
    def filename(self) -> str:
        """The file of the user code that made the operation."""
        code = self._code
        return "<unknown>" if code is None else code.co_filename

    @property
    def lineno(self) -> int:
        """The line of the user code that made the operation (0 if unknown)."""
        return _line_of(self._code, self._lasti)

    @property
    def token(self) -> CancelToken:
        """The operation's cancellation token: sync work polls it."""
        token = self._token
        if token is None:
            lock = self.runtime._lock
            with lock:
                token = self._token
                if token is None:
                    token = self._token = CancelToken(lock)
                    if self._cancelled:
                        token._cancelled = True
                        token._about = (self.name, self.cancel_reason)
        return token

    def _finish_token_cancel_locked(self, after: After) -> None:
        """Redo the token side of a cancel that a Ctrl-C cut short."""
        token = self._token
        if token is not None:
            if token._cancelled:
                token._release_waiters_locked()
            else:
                token._cancel_locked(after)

    def _cancel_token_locked(self, after: After) -> bool:
        """Mark this operation's token cancelled; False if it already was."""
        if self._cancelled:
            return False
        self._cancelled = True
        token = self._token
        if token is not None:
            token._about = (self.name, self.cancel_reason)
            token._cancel_locked(after)
        return True

    @property
    def state(self) -> OperationState:
        """Where the operation is in its life (see ``OperationState``)."""
        return self._state

    @property
    def done(self) -> bool:
        """True once the operation is COMPLETED, FAILED or CANCELLED."""
        return _is_final(self._state)

    @property
    def expired(self) -> bool:
        """True if the operation's own deadline passed and cancelled it."""
        return self._expired

    @property
    def error(self) -> BaseException | None:
        """The failure of a FAILED operation, else None. Reading it observes it."""
        if self._state is _FAILED:
            self._observe()
            return self._error
        return None

    def result(self) -> T:
        """Return the operation's value, or raise how it ended.

        Raises:
            InvalidStateError: the operation has not ended; ``wait()`` first.
            CancellationError: the operation ended CANCELLED.
            BaseException: the operation's failure, when it ended FAILED.
        """
        state = self._state
        if state is _COMPLETED:
            return self._value  # type: ignore[no-any-return]
        if state is _FAILED:
            self._observe()
            if self._error is None:
                raise InvalidStateError(
                    f"scope {self.name!r} failed, and its error was raised out of its "
                    "block, which keeps no copy of it; catch the error around the block"
                )
            raise self._error
        if state is _CANCELLED:
            raise CancellationError(
                f"operation {self.name!r} was cancelled and has no result; "
                "check op.state before asking for the result"
            )
        raise InvalidStateError(
            f"operation {self.name!r} is {state.name} and has no result yet; "
            "call op.wait() (or 'await op' in a coroutine) first"
        )

    def children(self) -> list[AsyncOperation[Any]]:
        """Return the live children, oldest first."""
        with self.runtime._lock:
            return list(self._iter_children())

    def _iter_children(self) -> Iterator[AsyncOperation]:
        child = self.first_child
        while child is not None:
            yield child
            child = child.sibling_next

    # ------------------------------------------------------------------
    # Settable knobs: deadline and shield
    # ------------------------------------------------------------------

    @property
    def deadline(self) -> float | None:
        """When the operation's subtree is cancelled, on the runtime's clock.

        Setting it (or None, to clear it) re-arms the timer; a deadline that
        has already passed cancels at once. ``math.inf`` clears it, as a
        deadline that never comes; a far-away one such as ``now() + 1e12``
        is kept and simply never fires.

        Raises:
            TypeError: the new value is not a number (or None).
            ValueError: the new value is NaN.
        """
        return self._deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        value = check_deadline(value, f"deadline of operation {self.name!r}")
        with self.runtime._lock:
            self._deadline = value
            if _is_final(self._state):
                return
            due = self.runtime._arm_deadline_locked(self)
        if due:
            self._expire()

    @property
    def shield(self) -> bool:
        """True if a cancel from above does not enter this subtree."""
        return self._shield

    @shield.setter
    def shield(self, value: bool) -> None:
        after: After = []
        with self.runtime._lock:
            self._shield = bool(value)
            parent = self.parent
            # Dropping the shield lets in a cancel that is already pending
            # above: the subtree must not stay live under a cancelled parent.
            if not value and parent is not None and parent._cancelled:
                self._outside_cancel = True
                self._cancel_locked(parent.cancel_reason, after)
        run_after(after)

    # ------------------------------------------------------------------
    # Cancellation
    # ------------------------------------------------------------------

    def cancel(self, reason: object = None) -> None:
        """Cancel this operation and its whole subtree.

        CREATED and PENDING nodes end CANCELLED at once and never run;
        RUNNING nodes have their token cancelled and stop at their next
        cancellation point. Shielded subtrees below this node are left alone.
        Idempotent, callable from any thread, and it never kills a thread.

        Args:
            reason: kept as ``cancel_reason`` and shown by ``dump()``.
        """
        after: After = []
        try:
            with self.runtime._lock:
                self._cancel_locked(reason, after)
        finally:
            # Also when a Ctrl-C cut the walk short: the wake-ups it queued
            # still run (the walk itself is redone by the next cancel).
            run_after(after)

    def _cancel_locked(self, reason: object, after: After, *, again: bool = False) -> None:
        """Walk the subtree iteratively and cancel every live node.

        A node whose token is already cancelled is skipped with its subtree:
        every non-shielded node below a cancelled one is cancelled too (a
        child born under a cancelled parent is born cancelled), so the walk
        would find nothing to do there. This makes a repeated cancel O(1).

        The exception is a walk that did not finish: on the main thread a
        Ctrl-C can land anywhere in it, after a token is marked but before
        the task parked under it is woken, or before its children are
        reached. ``_cancel_unfinished`` stays set on the walk's first node
        until the walk ends, and any later walk that meets such a node
        redoes its whole subtree; every step below is idempotent. With
        ``again`` (a Ctrl-C at a scope's exit) the walk redoes the whole
        subtree whatever its marks say.

        A redo also finishes the finalizations a Ctrl-C cut short (see
        ``_try_finalize_locked``): a node whose work has ended but which is
        not final, and a final node still flagged, which is still linked
        where the walk meets it, or is this node.
        """
        if _is_final(self._state):
            if self._cancel_unfinished:
                self._try_finalize_locked(after)
            return
        if self._cancelled and not self._cancel_unfinished and not again:
            return
        redo = again or self._cancel_unfinished
        self._cancel_unfinished = True
        stack: list[AsyncOperation] = [self]
        unstarted: list[AsyncOperation] = []
        while stack:
            node = stack.pop()
            if node.cancel_reason is None:
                node.cancel_reason = reason
            if not node._cancel_token_locked(after) and redo:
                node._finish_token_cancel_locked(after)
            state = node._state
            if state is _CREATED or state is _PENDING:
                if node._outcome is _NO_OUTCOME:
                    node._outcome = _CANCELLED_OUTCOME
                    node._fn = None
                    node._args = ()
                    unstarted.append(node)
                    node.runtime._on_cancel_running_locked(node, after)
                elif redo and node._outcome is _CANCELLED_OUTCOME:
                    unstarted.append(node)
                    node.runtime._on_cancel_running_locked(node, after)
            elif state is _RUNNING:
                if node._kind is _REMOTE:
                    # Its job (see OpKind.REMOTE) applies its executor's rule,
                    # once the lock is released, like an on_cancel callback.
                    job = node._task
                    if job is not None:
                        after.append(job._on_cancel)
                else:
                    node.runtime._on_cancel_running_locked(node, after)
                if redo and node._outcome is not _NO_OUTCOME:
                    unstarted.append(node)  # its work has ended: finalize it if it can
            else:
                # Final yet linked: a Ctrl-C cut its settling short.
                unstarted.append(node)
            child = node.first_child
            while child is not None:
                # Read first: a cancel of the child may unlink it.
                nxt = child.sibling_next
                if not child._shield:
                    # Cancelled from outside, even if its own cancel came first.
                    child._outside_cancel = True
                    if not child._cancelled or redo:
                        stack.append(child)
                    elif child._cancel_unfinished:
                        child._cancel_locked(reason, after)
                child = nxt
        # Deepest first, so that a CREATED parent whose children were all
        # unstarted becomes final in the same call. (A node that a climb
        # has finalized meanwhile returns at once.)
        for node in reversed(unstarted):
            node._try_finalize_locked(after)
        self._cancel_unfinished = False

    def _expire(self) -> None:
        """The deadline timer fired: cancel the subtree and mark it expired."""
        after: After = []
        runtime = self.runtime
        with runtime._lock:
            if _is_final(self._state):
                return
            now = runtime.now()
            # When an outer deadline is due at the same instant, the outer
            # scope owns the timeout: it is the one that must raise
            # TimeoutError, and the inner one lets Cancelled pass.
            target = self
            node = self
            while not node._shield and node.parent is not None:
                node = node.parent
                if node._deadline is not None and node._deadline <= now and not node._cancelled:
                    target = node
            if target._cancelled:
                return
            target._expired = True
            target._cancel_locked("deadline passed", after)
        run_after(after)

    # ------------------------------------------------------------------
    # Waiting
    # ------------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> AsyncResult[T]:
        """Block the calling thread until the operation ends.

        Inside a coroutine operation use ``await op`` instead. Called from
        inside an operation (a plain function running as one, or the block
        of a sync scope), it is a cancellation point: if the caller is
        cancelled while the operation has not ended, it raises ``Cancelled``
        at once. From any other thread it only blocks.

        Args:
            timeout: seconds to wait at most; None, ``math.inf`` or a huge
                value wait without limit, and 0 or less only looks.

        Returns:
            The ``AsyncResult`` the operation ended with.

        Raises:
            TimeoutError: the operation had not ended after ``timeout``.
            Cancelled: the calling operation is cancelled.
            TypeError: ``timeout`` is not a number.
            ValueError: ``timeout`` is NaN.
            RuntimeError: called from a coroutine, or from the operation's own
                code or a descendant's, which would wait for itself forever.
        """
        limit = (
            None if timeout is None else check_timeout(timeout, "AsyncOperation.wait(timeout=...)")
        )
        if not _is_final(self._state):
            state = thread_state()
            self._check_can_block("wait()", state)
            caller = state.op  # the operation whose cancel ends the wait, if any
            if not self._block_until_final(limit, caller):
                if caller is not None and caller._cancelled:
                    raise cancelled_error(caller)
                raise TimeoutError(
                    f"operation {self.name!r} did not end within {timeout} s; "
                    "wait again, or cancel it with op.cancel()"
                )
        return self._snapshot(observe=True)

    def __await__(self) -> Generator[Any, Any, T]:
        """``await op``: suspend the calling task until ``op`` ends.

        A cancellation point. Returns the operation's value.

        Raises:
            BaseException: the operation's failure.
            CancellationError: the operation ended CANCELLED.
            RuntimeError: ``op`` is the awaiting task or one of its ancestors.
        """
        # The worker stepping the task turns the operation into an event.
        try:
            return (yield self)  # type: ignore[no-any-return]
        except (RuntimeError, TypeError) as exc:
            # What asyncio or trio throws back at an object it cannot run.
            if thread_state().task is None:
                raise awaited_outside_error(f"operation {self.name!r}", exc) from None
            raise

    def _check_can_block(self, what: str, state: ThreadState | None = None) -> None:
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

    def _block_until_final(
        self, timeout: float | None, caller: AsyncOperation | None = None
    ) -> bool:
        """Park the calling thread until the operation is final, or time out.

        ``timeout`` went through ``check_timeout``. With ``caller`` (the
        operation the thread runs), a cancel of the caller ends the wait
        early too: it returns False and the caller tells which from its
        token. A KeyboardInterrupt removes the waiter and propagates; the
        main thread waits in slices, so it notices one promptly.
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
                if _is_final(self._state):
                    return True
                self._add_waiter_locked(wake)
            park(waiter, timeout, caller)
        finally:
            # Also after a Ctrl-C that landed as the waiter was queued.
            if not _is_final(self._state):  # else the finalizer took the list
                self._remove_waiter(wake)
        return _is_final(self._state)

    def _add_waiter_locked(self, fn: Callable[[], object] | _thread.LockType) -> None:
        """Wake ``fn`` when the operation is final: a held lock is released, a
        callable is called once the runtime lock is free."""
        if self._waiters is None:
            self._waiters = [fn]
        else:
            self._waiters.append(fn)

    def _remove_waiter(self, fn: Callable[[], object] | _thread.LockType) -> None:
        with self.runtime._lock:
            waiters = self._waiters
            if waiters is not None:
                try:
                    waiters.remove(fn)
                except ValueError:
                    pass

    def _snapshot(self, *, observe: bool) -> AsyncResult[T]:
        state = self._state
        if state is _COMPLETED:
            value = self._value
            return _COMPLETED_NONE if value is None else AsyncResult(state, value, None)
        if state is _FAILED:
            if observe:
                self._observe()
            return AsyncResult(state, None, self._error)
        return _NO_VALUE[state]

    # ------------------------------------------------------------------
    # Children
    # ------------------------------------------------------------------

    # The overloads give AsyncOperation[T] for an async def returning T (not
    # for its coroutine) and check *args against fn's parameters.
    @overload
    def spawn(
        self,
        fn: Callable[[*Ts], Coroutine[Any, Any, R]],
        *args: *Ts,
        name: str | None = None,
        supervise: bool = False,
        executor: object = None,
        abandon: bool = False,
    ) -> AsyncOperation[R]: ...

    @overload
    def spawn(
        self,
        fn: Callable[[*Ts], R],
        *args: *Ts,
        name: str | None = None,
        supervise: bool = False,
        executor: object = None,
        abandon: bool = False,
    ) -> AsyncOperation[R]: ...

    def spawn(
        self,
        fn: Callable[[*Ts], Any],
        *args: *Ts,
        name: str | None = None,
        supervise: bool = False,
        executor: object = None,
        abandon: bool = False,
    ) -> AsyncOperation[Any]:
        """Make a child that runs ``fn(*args)`` and submit it.

        A plain function runs on a worker thread; an ``async def`` function
        runs as a coroutine task.

        Args:
            fn: the work.
            *args: its positional arguments.
            name: shown in ``dump()`` and error messages; defaults to the
                function's name.
            supervise: keep this child's failure on the child instead of
                failing this operation and cancelling its siblings.
            executor: run ``fn`` there instead (a ``ProcessExecutor`` or an
                ``asyncop.dask.DaskExecutor``); the call crosses by pickling.
            abandon: with an executor, a cancel of a running job ends the
                child at once and its late result is dropped.

        Returns:
            The child. If this operation is cancelled but still running, the
            child is born CANCELLED and never runs.

        Raises:
            TypeError: ``fn`` is not callable, or (with an executor) ``fn``
                or an argument cannot be pickled.
            RuntimeError: this operation has ended (a scope that exited).
        """
        if executor is not None or abandon:
            return spawn_remote(
                self.runtime, self, fn, args, name=name, supervise=supervise,
                executor=executor, abandon=abandon,
            )
        return self.runtime._new_operation(
            fn, args, parent=self, name=name, submit=True, supervise=supervise
        )

    def start(self, fn: Callable[..., Any], *args: Any, name: str | None = None) -> Any:
        """Spawn ``fn(*args, task_status=...)`` as a child and wait until it is ready.

        In a coroutine write ``value = await op.start(fn, *args)``; from a
        thread, ``value = op.start(fn, *args)`` blocks. ``fn`` (async def or
        plain) receives a ``task_status`` keyword and calls
        ``task_status.started(value)`` once it is ready; ``start`` then
        returns ``value`` and the child keeps running under this operation,
        like a spawned one. Until then its failure is raised from ``start``
        and does not touch this operation or its other children.

        A cancellation point: if the caller is cancelled before the child is
        ready, the child is cancelled, waited for, and ``Cancelled`` goes on.

        Returns:
            The value passed to ``task_status.started()`` (None by default).

        Raises:
            BaseException: what ``fn`` raised before calling ``started()``.
            RuntimeError: ``fn`` ended without calling ``started()``, or this
                operation has ended (a scope that exited).
            TypeError: ``fn`` is not callable.
        """
        # The runtime sits above the operations package: it installed its
        # start() in _hooks when it was imported.
        return start_child(self, fn, args, name)

    def _link_child_locked(self, child: AsyncOperation) -> None:
        """Append ``child`` to the live children; refuses a final parent."""
        if _is_final(self._state):
            if self._kind is _SCOPE:
                raise RuntimeError(
                    f"cannot spawn into scope {self.name!r}: its block has exited and its "
                    "children have ended; spawn into a scope that is still open"
                )
            raise RuntimeError(
                f"cannot add child {child.name!r} to operation {self.name!r}, which is "
                f"already {self._state.name}; add it to a live operation instead"
            )
        child.parent = self
        last = self._last_child
        if last is None:
            self.first_child = child
        else:
            last.sibling_next = child
            child._sibling_prev = last
        self._last_child = child
        if self.parent is None and self._state is _CREATED:
            # A root that was made but not started yet: a started one is
            # tracked already (a scope from birth, other work from submit).
            self.runtime._track_root_locked(self)

    # ------------------------------------------------------------------
    # Transitions (each asserts where it starts from)
    # ------------------------------------------------------------------

    def _transition_to_pending(self) -> None:
        # Invariant: only a CREATED operation whose work is still to run.
        assert self._state is _CREATED and self._outcome is _NO_OUTCOME, self._state
        self._state = _PENDING

    def _transition_to_running(self) -> bool:
        """PENDING -> RUNNING (CREATED -> RUNNING for a scope or a remote operation).

        Returns False when a cancel got there first: the worker that popped
        the operation must then drop it without running it.
        """
        if self._outcome is not _NO_OUTCOME:
            return False
        assert self._state is _PENDING or (
            self._state is _CREATED and (self._kind is _SCOPE or self._kind is _REMOTE)
        ), self._state
        self._state = _RUNNING
        return True

    def _transition_to_final(
        self,
        state: OperationState,
        error: BaseException | None,
        taken_over: bool,
        report: _Unobserved | None,
    ) -> None:
        """CREATED, PENDING or RUNNING -> COMPLETED, FAILED or CANCELLED.

        Writes every field of the outcome with no call in between: a Ctrl-C
        on the main thread lands only as a call starts or a C call returns,
        so it stops the transition before it begins or lets it through
        whole. Flags the node until it is settled (see
        ``_try_finalize_locked``), and writes the state last: a reader
        without the lock that sees it final finds the rest.
        """
        # Invariant: exactly one final state, set once.
        old = self._state
        assert old is _CREATED or old is _PENDING or old is _RUNNING, (
            f"{self.name!r} is already {old.name}"
        )
        assert state is _COMPLETED or state is _FAILED or state is _CANCELLED, state
        if state is not _COMPLETED:
            self._value = None
        self._error = error
        self._failures = None
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

    # ------------------------------------------------------------------
    # Completion
    # ------------------------------------------------------------------

    def _end_work(self, outcome: Outcome, value: Any, error: BaseException | None) -> None:
        """Record how the own work ended; finalize if no child is live.

        From any thread (a sync scope's exit comes here on the user's).
        """
        after: After = []
        # A with-statement, not acquire() then try, wherever a user thread
        # may take the lock: on the main thread, a Ctrl-C raised as acquire()
        # returns would land before the try and leave the lock held for good.
        with self.runtime._lock:
            self._end_work_locked(outcome, value, error, after)
        if after:
            run_after(after)

    def _end_work_on_worker(
        self, outcome: Outcome, value: Any, error: BaseException | None
    ) -> None:
        """``_end_work`` for the worker that ran the work: every operation ends here.

        A worker thread never runs signal handlers, so it may take the lock
        with acquire() then try, which costs half a with-statement.
        """
        after: After = []
        lock = self.runtime._lock
        lock.acquire()
        try:
            self._end_work_locked(outcome, value, error, after)
        finally:
            lock.release()
        if after:
            run_after(after)

    def _end_work_locked(
        self, outcome: Outcome, value: Any, error: BaseException | None, after: After
    ) -> None:
        assert self._outcome is _NO_OUTCOME, f"{self.name!r} ended its work twice"
        self._outcome = outcome
        self._value = value
        self._error = error
        self._fn = None
        self._args = ()
        if outcome is _CANCELLED_OUTCOME:
            self._interrupted = True
        self._try_finalize_locked(after)

    def _try_finalize_locked(self, after: After) -> None:
        """Make this node final if its work and children have ended; climb up.

        Iterative: a chain of nodes each waiting only for its last child
        finalizes bottom-up in one loop, however deep. (Finalizing one node
        is written out in the loop: this runs for every operation.)

        On the main thread (a ``cancel()`` that ends unstarted nodes, a sync
        scope's exit) a Ctrl-C can land at any call, so each node goes
        through three steps that a cut leaves in a state the next call
        finishes:

        1. Deciding how the node ends only reads: cut, the node is as it was.
        2. ``_transition_to_final`` writes every field in one call, which a
           Ctrl-C can stop only before it starts.
        3. Settling: the runtime's bookkeeping, waking the waiters (each one
           off the list before it is woken), then unlinking from the parent
           and handing it the outcome, in one step with no call inside. Until
           it is done the node is flagged (``_cancel_unfinished``) and still
           linked, where a later cancel walk meets it; this method, given a
           flagged final node, settles it again.

        A climb that finalizes a node whose cancel walk has not ended (the
        walk's own node, flagged) keeps the parent links from there up until
        the climb ends: a later ``cancel()`` of that node then finds what is
        left to finish above it.
        """
        node: AsyncOperation | None = self
        kept: AsyncOperation | None = None  # first node of the climb whose links stay
        error: BaseException | None
        while node is not None and node._outcome is not _NO_OUTCOME and node.first_child is None:
            state = node._state
            if state is _COMPLETED or state is _FAILED or state is _CANCELLED:
                if not node._cancel_unfinished:
                    break  # final and settled
                # A Ctrl-C cut its settling short: settle it again.
                parent = node.parent
                error = node._error
                taken_over = (
                    state is _FAILED and parent is not None and _taken_over(node, parent, error)
                )
                if kept is None:
                    kept = node
            else:
                failures = node._failures
                own = node._error if node._outcome is _ERROR else None
                if own is not None and isinstance(own, Cancelled):
                    own = None
                error = None
                report: _Unobserved | None = None
                if own is not None or failures:
                    state = _FAILED
                    if not node._observed:
                        report = _Unobserved(node)
                    if own is None:
                        errors = list(failures)  # type: ignore[arg-type]
                    else:
                        errors = [own, *failures] if failures else [own]
                    error = _failure(node, errors, bool(failures))
                elif node._outcome is _VALUE and not (
                    # A scope's block has no value worth keeping: a scope whose cancel
                    # interrupted its children ended CANCELLED, however its block left.
                    node._kind is _SCOPE and node._cancelled and node._interrupted
                ):
                    state = _COMPLETED
                else:
                    state = _CANCELLED
                parent = node.parent
                taken_over = (
                    state is _FAILED and parent is not None and _taken_over(node, parent, error)
                )
                if node._cancel_unfinished and kept is None:
                    kept = node  # its cancel walk is still under way
                node._transition_to_final(state, error, taken_over, report)
            node.runtime._on_final_locked(node, after)
            waiters = node._waiters
            if waiters is not None:
                # In reverse order since the transition: the last is the first
                # to wake. Each leaves the list before it is woken.
                while waiters:
                    waiter = waiters[-1]
                    if type(waiter) is _LockType:
                        del waiters[-1]
                        # A thread blocked in wait(): release it now, under
                        # the lock (one C call), so that its OS wake-up
                        # starts before this worker's remaining bookkeeping.
                        waiter.release()  # pyright: ignore[reportFunctionMemberAccess]
                    else:
                        del waiters[-1]
                        after.append(waiter)  # type: ignore[arg-type]
                node._waiters = None
            if parent is not None:
                prev = node._sibling_prev
                if prev is not None or parent.first_child is node:  # still linked
                    # Unlink from the parent's child list, in O(1), and hand
                    # it the outcome: no call before the last line.
                    nxt = node.sibling_next
                    if prev is None:
                        parent.first_child = nxt
                    else:
                        prev.sibling_next = nxt
                    if nxt is None:
                        parent._last_child = prev
                    else:
                        nxt._sibling_prev = prev
                    node.sibling_next = None
                    node._sibling_prev = None
                    if state is _CANCELLED:
                        parent._interrupted = True
                    elif taken_over:
                        if parent._failures is None:
                            parent._failures = [node._error]  # type: ignore[list-item]
                        else:
                            parent._failures.append(node._error)  # type: ignore[arg-type]
                if taken_over:
                    parent._cancel_locked(f"child {node.name!r} failed", after)
            if kept is None:
                node.parent = None
                node._cancel_unfinished = False
            node = parent
        while kept is not None and kept is not node:
            above = kept.parent
            kept.parent = None
            kept._cancel_unfinished = False
            kept = above

    # ------------------------------------------------------------------
    # Debugging
    # ------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<AsyncOperation {self.name!r} {self._state.name} at {self.filename}:{self.lineno}>"

    def _observe(self) -> None:
        """Mark the failure as seen: it is not logged when the operation is collected."""
        self._observed = True
        report = self._unobserved
        if report is not None:
            self._unobserved = None
            report.error = None


_INTERRUPTS = (KeyboardInterrupt, SystemExit)


def _taken_over(node: AsyncOperation, parent: AsyncOperation, error: BaseException | None) -> bool:
    """Whether ``parent`` takes over ``error``, the failure ``node`` ends with."""
    return node._propagates and (
        not (node._supervised or parent._supervise)
        # Ctrl-C and SystemExit are never kept on a supervised child.
        or isinstance(error, _INTERRUPTS)
    )


def _failure(node: AsyncOperation, errors: list[BaseException], grouped: bool) -> BaseException:
    """The error a node that failed with ``errors`` ends with.

    One error of a plain operation's own work stays bare; otherwise (and
    always for a scope, whose block's error is wrapped even alone) they are
    grouped. A KeyboardInterrupt or SystemExit is never grouped: the first
    one wins over the rest, which it carries as its ``__context__``, as
    asyncio's TaskGroup re-raises it bare.
    """
    for exc in errors:
        if isinstance(exc, _INTERRUPTS):
            rest = [other for other in errors if other is not exc]
            context = exc.__context__
            if (
                rest
                and isinstance(context, BaseExceptionGroup)
                and list(context.exceptions) == rest
            ):
                # Carried already: a Ctrl-C cut the node's finalization short
                # after this, and the node is finalized again.
                return exc
            if rest:
                group = BaseExceptionGroup(f"operation {node.name!r} failed", rest)
                if (
                    context is not None
                    and context not in rest
                    and not isinstance(context, Cancelled)
                ):
                    # Keep what the interrupt was raised over, one link further.
                    group.__context__ = context
                exc.__context__ = group
            return exc
    if len(errors) == 1 and not grouped and node._kind is not _SCOPE:
        return errors[0]
    return BaseExceptionGroup(f"operation {node.name!r} failed", errors)


def _line_of(code: CodeType | None, lasti: int) -> int:
    """The line of instruction offset ``lasti`` in ``code`` (0 if unknown)."""
    if code is None:
        return 0
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line if line is not None else code.co_firstlineno
    return code.co_firstlineno


@final
class _Unobserved:
    """Logs a failure nobody observed, when its operation is collected.

    Only a failed operation has one, so the operations that end well carry
    no finalizer: collecting them runs no Python code.
    """

    __slots__ = ("code", "error", "lasti", "name")

    def __init__(self, op: AsyncOperation) -> None:
        self.name = op.name
        self.code = op._code
        self.lasti = op._lasti
        # Set by the transition to FAILED; None again once observed.
        self.error: BaseException | None = None

    def __del__(self) -> None:
        try:
            error = self.error
        except AttributeError:  # a Ctrl-C stopped __init__: it was never armed
            return
        if error is not None:
            code = self.code
            logger.error(
                "asyncop: operation %r failed and nobody observed the failure (made at %s:%d)",
                self.name,
                "<unknown>" if code is None else code.co_filename,
                _line_of(code, self.lasti),
                exc_info=error,
            )


AsyncOperation.__module__ = "asyncop"
