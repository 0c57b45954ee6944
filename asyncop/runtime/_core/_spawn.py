"""Making an operation: the one method that makes a node, links it and queues it.

Every operation the runtime makes comes from ``_new_operation``, a method
of :class:`NodeHooks`, the kernel's base (``new_operation`` names the same
function): a child spawned by
``AsyncOperation.spawn`` (the commonest, a coroutine task spawning into its
own scope), a root (``Runtime.spawn``, ``Runtime.create``), a child made by
``start`` or ``spawn_shielded``, a scope's operation (``with`` and
``async with``) and a remote operation. It works out what the work is
(``OpKind``) and its name, finds the user's line that made it, picks the
context its code will run in, and makes the node (with a coroutine's task
state, or the task whose scope it is). Then, under the runtime lock and in
one step, :func:`link_new_locked` links it under its parent, applies a
cancel already pending above it, and queues it: one lock round trip per
spawn, and no cancel can land between linking and queueing.

The state a new operation is born in follows from its kind:

- a scope is born RUNNING: its work, the block, is already running in the
  caller's thread, and no cancel can find it unstarted. Entering it is not
  a cancellation point: under a cancelled parent it is born with a
  cancelled token (unless shielded), marked as cancelled from outside, and
  still runs its block;
- submitted work is born PENDING, and goes into a ready queue in the same
  locked step as it is linked; nothing sees it before;
- work made with ``create`` (or a remote operation, which its job starts)
  is born CREATED.

Other work under a cancelled parent (and not shielded) is born cancelled:
its work ends CANCELLED at once, it never runs, and it unlinks at once.

Why a class: ``_new_operation`` is one of the calls every operation makes
on its runtime, as it is made; another is ``_on_final_locked``, the
runtime's part of its end (cancel its deadline timer, forget a root, stamp
the end, tell the instruments, drop the task state and the context), and
the cancel walk makes the third on every node it cancels,
``_on_cancel_running_locked`` (wake a parked task, or mark one that never
started never to run): :class:`NodeHooks` holds all three. The operations
package declares them on
``RuntimeBase`` (``operations/_owner.py``), which ``KernelFields`` extends;
compiled, ``NodeHooks`` is an extension type that overrides them with C
methods, so that a node calls them in C, through its type, without naming
the runtime. ``NodeHooks`` extends ``TimerCalls`` (``_timer_calls.py``,
arming and cancelling a timer), and ``WorkerPool``, and so the kernel and
``Runtime``, extend ``NodeHooks``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from inspect import CO_ASYNC_GENERATOR, CO_COROUTINE
from types import FunctionType
from typing import TYPE_CHECKING, Any, NoReturn

from ...operations import (
    AsyncOperation,
    OperationState,
    OpKind,
    Outcome,
    ThreadState,
    _current,
    _user_frame,
    run_after,
    thread_state,
)
from ...platform import _gc
from .._kinds import describe_fn, kind_of
from ._awaitables import TASK_MAKERS
from ._instruments import note_ended_locked, tell
from ._task import TaskState, on_cancel_running
from ._waker import push_locked

try:
    import cython  # pyright: ignore[reportMissingImports]
except ImportError:  # run as Python, without Cython installed
    from ...platform import pure_cython as cython
if TYPE_CHECKING or not cython.compiled:  # (compiled, _spawn.pxd cimports it: the C base)
    from ._timer_calls import TimerCalls
if TYPE_CHECKING:
    from ...operations import After
    from ._instruments import Instruments
    from ._kernel import Kernel
    from ._worker import Worker

__all__ = ["NodeHooks", "link_new_locked", "new_operation"]

_copy_context = contextvars.copy_context


# Compiled, an extension type (see _spawn.pxd) that WorkerPool extends.
class NodeHooks(TimerCalls):
    """The kernel's calls that every operation makes on it: the base of ``WorkerPool``."""

    __slots__ = ()

    def _new_operation(  # type: ignore[misc]  # (self: the kernel this is the base of)
        self: Kernel,  # pyright: ignore[reportGeneralTypeIssues]
        fn: Callable[..., Any] | None,
        args: tuple[Any, ...],
        parent: AsyncOperation | None,
        name: str | None,
        submit: bool = False,
        supervise: bool = False,
        kind: OpKind | None = None,
        shield: bool = False,
        seed_shape: bool = False,
        task: TaskState | None = None,
        _coro: OpKind = OpKind.CORO,
        _sync: OpKind = OpKind.SYNC,
        _scope: OpKind = OpKind.SCOPE,
        _pending: OperationState = OperationState.PENDING,
        _running: OperationState = OperationState.RUNNING,
        _agen: int = CO_ASYNC_GENERATOR,
        _async: int = CO_COROUTINE,
    ) -> AsyncOperation:
        """Make an operation, link it under ``parent``, and with ``submit`` queue it.

        ``kind`` is worked out from ``fn`` unless given (SCOPE, REMOTE). ``supervise`` keeps a
        scope's children's failures on them, other work's failure off its parent; a scope's
        ``task`` (``async with``) is woken by its cancel. ``seed_shape``: ``fn`` is a ``create``
        callback, for the messages.

        Raises:
            TypeError: ``fn`` is no function asyncop can run (see ``kind_of``), ``name`` is
                not a str, or ``parent`` is not an operation.
            RuntimeError: ``parent`` has ended or belongs to another runtime, or (``submit``,
                no parent) the runtime is shut down.
        """
        # The user's frame: spawn(), create() -> here -> _user_frame(); a with, an executor: +1.
        depth = 3 if kind is None else 4
        if kind is None and type(fn) is FunctionType and not (f := fn.__code__.co_flags) & _agen:
            # The common case: read the code flags.
            kind = _coro if f & _async or fn in TASK_MAKERS else _sync
            if name is None:
                name = fn.__qualname__
            elif type(name) is not str:
                name = _name_of(fn, name)
        else:
            if kind is None:
                kind, name = kind_of(fn, name, seed_shape)
            if type(name) is not str:
                name = _name_of(fn, name)
        owner: Any = self  # (the node's runtime: the Runtime this kernel is the core of)
        node = None  # (the parent once checked: compiled, a node, whose fields are read in C)
        if parent is not None:
            node = parent if type(parent) is AsyncOperation else None
            if node is None or node.runtime is not owner:
                self._check_parent(parent, name)  # raises
        # (Compiled, a C lookup: a function of _current.pxd.)
        state = _current.state_here() if cython.compiled else thread_state()  # type: ignore[attr-defined]
        # Instruments hear of an operation before its first step: it is queued once told, unless a
        # task of the default mode spawns a task (it cannot run before that step, holding the lane).
        instruments = self._instruments
        queue = instruments is None or not submit
        queue = queue or (kind is _coro and state.task is not None and not self._parallel)
        woken = None
        if state.worker is None and submit and queue and self._idle:
            woken = self._wake_early()  # a user thread's submit (not a worker's)
        code, lasti = _user_frame(depth)
        if kind is not _coro and kind is not _sync:
            ctx = None  # a scope, remote work: no code (a scope's child copies its spawner's)
        elif node is None or node._ctx is None:
            ctx = _copy_context()
        else:
            # The live context in the parent's own code, else a copy of the parent's.
            running = state.op if state.task is None else state.task.current
            ctx = _copy_context() if running is node else node._ctx.copy()
        born = _running if kind is _scope else _pending if submit else OperationState.CREATED
        op: AsyncOperation[Any]
        op = AsyncOperation(owner, kind, fn, args, name, ctx, code, lasti, born)
        if kind is _coro:
            op._task = TaskState(op)
        if supervise or shield or kind is _scope:
            _set_up(op, task, supervise, shield)
        if parent is not None or kind is _scope or submit:  # (else nothing to link)
            # A worker runs no signal handlers: acquire() then try, half a with's cost (_task.step).
            lock = self._lock
            if state.worker is not None:
                lock.acquire()
                try:
                    after = link_new_locked(self, op, node, shield, submit, state, woken, queue)
                finally:
                    lock.release()
            else:
                with lock:
                    after = link_new_locked(self, op, node, shield, submit, state, woken, queue)
            if after:
                run_after(after)
        if instruments is not None:
            _tell_spawned(self, instruments, op, state, queue)
        return op

    def _on_final_locked(  # type: ignore[misc]  # (self: the kernel this is the base of)
        self: Kernel,  # pyright: ignore[reportGeneralTypeIssues]
        op: AsyncOperation,
        after: After,
        at: float | None = None,
    ) -> None:
        """The runtime's part of ``op``'s end, under the lock: as the node becomes final."""
        node: AsyncOperation = op  # (compiled, typed: the fields are read in C)
        rare = node._rare
        if rare is not None and rare.deadline_timer is not None:
            # Cancel first: a Ctrl-C in between leaves the field set, and a
            # repeat call (cancelling twice is harmless) finishes the job.
            self._timers.cancel(rare.deadline_timer)
            rare.deadline_timer = None
        if node.parent is None:
            self._roots.pop(node, None)
        # (At the reading the finalizing caller has, if any: see try_finalize_locked.)
        node._ended_at = self._stamp() if at is None else at
        instruments = self._instruments
        if instruments is not None:
            note_ended_locked(instruments, node, after)
        # Break the operation <-> task state <-> waker cycle, and drop the
        # context: a finished operation is then freed by reference counting
        # alone, without waiting for (and feeding) the garbage collector.
        ctx = node._ctx
        if cython.compiled and ctx is not None:
            # A linked task's context is off the collector's lists (see
            # link_new_locked): back on them before this reference goes,
            # which may be its last (CPython frees a context as a tracked
            # object), and before a cycle through a value in it can be garbage.
            _gc.track(ctx)
        node._ctx = None
        node._task = None

    def _on_cancel_running_locked(  # type: ignore[misc]  # (self: the kernel this is the base of)
        self: Kernel,  # pyright: ignore[reportGeneralTypeIssues]
        op: AsyncOperation,
        after: After,
        _running: OperationState = OperationState.RUNNING,
    ) -> bool:
        """An operation's token was cancelled: wake it if it is a parked task.

        Sync work polls its token instead. A coroutine task cancelled before
        its first step (its work ended CANCELLED while CREATED or PENDING)
        never runs: a worker that pops it anyway drops it. Returns whether
        the task was woken or marked so.
        """
        node: AsyncOperation = op  # (compiled, typed: the fields are read in C)
        task = node._task
        if task is None:
            return False
        if node._state is _running:
            return on_cancel_running(node, after)
        ignored: bool = task._transition_to_ignored()
        return ignored


# The function that makes every operation, for the code that names it (read
# from the class's namespace: compiled, the attribute names the C method).
new_operation = vars(NodeHooks)["_new_operation"]


def _name_of(fn: Callable[..., Any] | None, name: object) -> str:
    """The name of a new operation: ``name``, checked, or one made from ``fn``."""
    if name is None:
        return describe_fn(fn) if fn is not None else "scope"
    if not isinstance(name, str):
        raise TypeError(f"operation name must be a str, got {type(name).__name__}; pass name='...'")
    return name


def _set_up(
    op: AsyncOperation,
    task: TaskState | None,
    supervise: bool,
    shield: bool,
    _scope: OpKind = OpKind.SCOPE,
) -> None:
    """Set a new scope's fields, and what ``supervise`` and ``shield`` ask of any node.

    Compiled, a C function (see _spawn.pxd) that writes the node's fields in C.
    """
    scope = op._kind is _scope
    if shield:
        op._shield = True
    if scope:
        op._propagates = False  # its error leaves through the block, not to the parent
        op._task = task
        op._started_at = op._created_at  # (born RUNNING)
    if supervise:
        if scope:
            op._supervise = True
        else:
            op._supervised = True


def _tell_spawned(
    self: Kernel,
    instruments: Instruments,
    op: AsyncOperation,
    state: ThreadState,
    queued: bool,
    _pending: OperationState = OperationState.PENDING,
) -> None:
    """Tell the instruments of new ``op``, then queue it if it is not yet.

    A cancel in between ends a PENDING operation at once: it is not queued.
    (A root made by ``create``, or a remote root, is linked nowhere.)
    """
    tell(self, instruments.spawned, op)
    if not queued:
        with self._lock:
            if op._state is _pending and op._outcome is None:
                push_locked(self, op, state)


def link_new_locked(
    self: Kernel,
    op: AsyncOperation,
    parent: AsyncOperation | None,
    shield: bool,
    submit: bool,
    state: ThreadState,
    woken: Worker | None,
    queue: bool = True,
    _scope: OpKind = OpKind.SCOPE,
    _cancelled: Outcome = Outcome.CANCELLED,
    _created: OperationState = OperationState.CREATED,
    _coro: OpKind = OpKind.CORO,
) -> After | None:
    """Link new ``op`` under ``parent``, apply a cancel pending there, maybe queue it.

    Under the runtime lock; ``op`` is in the state it was born in (see the
    module docstring). Returns what to run once the lock is released, if
    anything. ``woken`` is a worker the caller woke early for ``op``;
    without ``queue``, submitted work is left PENDING for the caller to queue.

    Raises:
        RuntimeError: ``parent`` has ended, or (``submit``, no parent) the
            runtime is shut down.
    """
    if parent is not None:
        if parent._final:
            _refuse_child(parent, op)
        # Appended to the parent's live children, in O(1): the first
        # child's back link is the last child.
        op.parent = parent
        first = parent.first_child
        if first is None:
            parent.first_child = op
            op._sibling_prev = op
        else:
            last = first._sibling_prev
            last.sibling_next = op  # type: ignore[union-attr]  # (linked: never None)
            op._sibling_prev = last
            first._sibling_prev = op
        if parent.parent is None and parent._state is _created:
            # A root that was made but not started yet: a started one is
            # tracked already (a scope from birth, other work from submit).
            self._track_root_locked(parent)
    elif submit and self._closing:
        raise RuntimeError(
            f"Runtime {self.name!r} is shut down and takes no new operations; "
            f"cannot start {op.name!r}, make a new Runtime"
        )
    if cython.compiled and op._kind is _coro:
        # Linked, a task is reached through the runtime until it is final:
        # its node, its state and its context go off the collector's lists,
        # a pass then has three objects fewer per task to count and visit
        # (its first step takes its coroutine off too: ``_task._first_coroutine``).
        # The node's end puts it back (see "The collector" in
        # operations/_finalize.py); the state's one cycle, through the
        # node's ``_task``, is broken as the node becomes final
        # (``_on_final_locked``, which puts the context back before it lets
        # go of it), and its end drops the coroutine and the last wait
        # (``_task._finish``).
        _gc.untrack(op)
        _gc.untrack(op._task)
        if op._ctx is not None:
            _gc.untrack(op._ctx)
    after: After | None = None
    if op._kind is _scope:
        if parent is None:
            self._track_root_locked(op)
        elif parent._cancelled and not shield:
            after = []
            op.cancel_reason = parent.cancel_reason
            op._cancel_token_locked(after)
            # Born cancelled: only a cancel of the enclosing operation does that.
            op._outside_cancel = True
    elif parent is not None and parent._cancelled and not shield:
        after = []
        op.cancel_reason = parent.cancel_reason
        op._cancel_token_locked(after)
        ended = op._transition_to_ended(_cancelled, None, None, after)
        assert ended, f"{op.name!r} was born ended"
    elif submit:
        if parent is None:
            self._track_root_locked(op)
        if queue:
            push_locked(self, op, state, woken)
    return after


def _refuse_child(parent: AsyncOperation, op: AsyncOperation) -> NoReturn:
    """Refuse to link ``op`` under ``parent``, which is final."""
    if parent._kind is OpKind.SCOPE:
        raise RuntimeError(
            f"cannot spawn into scope {parent.name!r}: its block has exited and its "
            "children have ended; spawn into a scope that is still open"
        )
    raise RuntimeError(
        f"cannot add child {op.name!r} to operation {parent.name!r}, which is "
        f"already {parent._state.name}; add it to a live operation instead"
    )
