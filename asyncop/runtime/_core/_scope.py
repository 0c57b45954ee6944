"""Scopes: nursery-style blocks whose body is an operation's own work.

::

    with runtime.scope(name="load_page", timeout=5) as root:
        root.spawn(fetch_header, page_id)
        root.spawn(fetch_body, page_id)
    # leaves only when every child has ended

Entering makes a SCOPE operation, linked under the operation whose code the
thread is running (if any), and RUNNING at once: the block is its work. An
entry interrupted once the operation exists ends its block, so no RUNNING
scope is left with nobody to close it.

Leaving records how the block ended, waits for the children, and then
decides what the ``with`` statement raises, in this order:

1. KeyboardInterrupt and SystemExit (from the block, from a child, or a
   Ctrl-C while waiting at the exit) cancel the tree, wait for it, and are
   re-raised as themselves, carrying any failure group as ``__context__``;
   a KeyboardInterrupt also carries a note with ``dump()`` taken when it
   arrived (``_interrupt.tree_note``).
   So is the GeneratorExit that closes an async generator suspended in the
   block. A second Ctrl-C at a sync exit stops the wait and gives up on
   the runtime's work (``_interrupt.py``): the runtime shuts down without
   waiting, abandoning the threads stuck in operation code.
2. Failures (the block's exception and the failing children's) are raised as
   one ``ExceptionGroup``, even when there is only one.
3. A cancel that reached the scope from outside (the cancel walk marks the
   nodes it enters from above, ``_outside_cancel``; so does the cancel of a
   remote job's local operation for the roots the job started in its
   worker) raises ``Cancelled``: the code after the block must not run.
   What caused the cancel decides, not the value ``shield`` has now.
4. The scope's own deadline, if it cancelled something, raises a bare
   ``TimeoutError`` from the ``Cancelled`` that ended the block. It is the
   only bare ``TimeoutError`` an exit raises: ``move_on_after``
   (``_timeout_scope.py``) tells its expiry by that, and swallows it.
5. A ``Cancelled`` (or a group of nothing else) from the scope's own cancel
   stops here. One that no cancel of the scope caused (another operation's
   ``token.check()``, or raised by hand) goes on, as out of a task.

A root scope that ``Runtime(deadlock="raise")`` cancelled because the runtime
was stuck raises the ``DeadlockError`` instead of 2 to 5 (``_deadlock.py``).

A scope's error is raised out of its block only: it is not handed to the
enclosing operation as a failing child, so code that catches it goes on.
The scope keeps no reference to it, and the exit's frames drop theirs: the
traceback holds the user's frame, which holds the scope, so any reference
back would make a cycle only the collector could free.

A Ctrl-C may land anywhere in a sync scope's entry or exit, even as the
exit is called, before its first line runs: CPython runs a signal handler
as any Python function starts. The entry ends the block of the operation it
made before the KeyboardInterrupt propagates; the exit does the same from
inside its guarded loop, and for the first line, which no ``try`` can
guard, through what ``with`` holds for the length of the block (see
``ExitAttribute`` in ``_abandon.py``). Either way the thread is left outside the block and
the scope ends. Async scopes need none of this: a signal handler runs on
the main thread only, and no worker thread is the main one.

A sync exit inside an operation is a cancellation point through the tree:
that operation's cancel reaches the scope and its children, and rule 3
raises once they have ended. It waits in slices (``acquire_for``), so the
main thread notices a Ctrl-C, and a Ctrl-C there walks the tree again with
``again=True``, finishing any cancel an earlier Ctrl-C tore.
"""

from __future__ import annotations

import _thread
import enum
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Never, final

from ...operations import (
    AsyncOperation,
    Cancelled,
    OperationState,
    OpKind,
    Outcome,
    TreeWait,
    _current,
    _thread_local,
    cancelled_for,
    check_flag,
    keywords_refused,
    only_cancelled,
    outside_advice,
    park,
    thread_state,
    without_cancelled,
)
from ...platform import check_deadline, check_timeout
from .._deadlock import deadlock_error_for
from .._interrupt import add_tree_note, gave_up, give_up, interrupt_tree, tree_note
from .._introspect import owner_of
from ._abandon import ExitAttribute, abandon_scope, made_before, unwind_to
from ._block import _running_task, enter_in_task
from ._scope_task import ScopeDone, raised_clean, scope_done, throw_clean
from ._spawn import new_operation

if TYPE_CHECKING:  # (the stand-in's signatures, for cython.locals below)
    from ...platform import pure_cython as cython
else:
    try:
        import cython
    except ImportError:  # run as Python, without Cython installed
        from ...platform import pure_cython as cython

if TYPE_CHECKING:
    from types import TracebackType

    from ._kernel import Kernel
    from ._task import TaskState

__all__ = ["Scope", "ScopeDone", "ScopeState", "scope"]


class ScopeState(enum.Enum):
    """Where a scope is: NEW -> OPEN -> EXITING -> CLOSED.

    Read from the scope's operation, which is the one place that changes:
    OPEN while the block runs, EXITING while its exit waits for the children,
    CLOSED once the operation is final.
    """

    NEW = "new"  # made by scope(), not entered yet
    OPEN = "open"  # the block runs
    EXITING = "exiting"  # the block has ended; the exit waits for the children
    CLOSED = "closed"  # every child has ended and the exit is done


class ScopeFields:
    """A scope's fields: an extension type when compiled (see _scope.pxd).

    The entry and exit read and write them in C; ``Scope`` adds the methods
    (a Python class, which takes the name of the module users import it from).
    """

    __slots__ = (
        "_deadline",
        "_ident",
        "_name",
        "_op",
        "_parent",
        "_runtime",
        "_saved",
        "_shield",
        "_supervise",
        "_timeout",
        "_watch",
    )

    _runtime: Kernel
    _name: str | None
    _timeout: float | None
    _deadline: float | None
    _shield: bool
    _supervise: bool
    _op: AsyncOperation | None
    _saved: AsyncOperation | None
    _ident: int | None  # the thread that entered a sync block
    _parent: AsyncOperation | None
    # The weak reference that watches the with-statement's exit (see
    # ExitAttribute in _abandon.py); None once the exit has ended the block.
    _watch: weakref.ref[Any] | None


@final
class Scope(ScopeFields):
    """The context manager returned by ``Runtime.scope()``; see the module docstring."""

    __slots__ = ()

    def __init__(
        self,
        runtime: Kernel,
        name: str | None,
        timeout: float | None,
        deadline: float | None,
        shield: bool,
        supervise: bool,
    ) -> None:
        _set_up(self, runtime, name, timeout, deadline, shield, supervise)

    @property
    def state(self) -> ScopeState:
        """Where the scope is: see :class:`ScopeState`."""
        op = self._op
        if op is None:
            return ScopeState.NEW
        if op._final:
            if op._cancel_unfinished:  # (see AsyncOperation._settled)
                op._settled()
            return ScopeState.CLOSED
        if op._outcome is None:
            return ScopeState.OPEN
        return ScopeState.EXITING

    def __repr__(self) -> str:
        op = self._op
        name = op.name if op is not None else (self._name or "scope")
        return f"<Scope {name!r} {self.state.name}>"

    @cython.locals(self="ScopeFields", op="CNode", runtime="NodeHooks")
    def _open(
        self,
        parent: AsyncOperation | None,
        task: TaskState | None = None,
        _scope: OpKind = OpKind.SCOPE,
    ) -> AsyncOperation:
        """Make the scope operation under ``parent`` and start its block.

        ``task`` is the coroutine task whose scope it is, for ``async
        with``. Whatever interrupts this after the operation exists (a
        Ctrl-C) ends the operation's block before it propagates: no RUNNING
        scope is left behind with nobody to close it.
        """
        if self._op is not None:
            raise RuntimeError(
                f"scope {self._op.name!r} was already entered; call scope() again for a new block"
            )
        runtime = self._runtime
        if parent is None and runtime._closing:
            raise RuntimeError(
                f"Runtime {runtime.name!r} is shut down and takes no new operations; "
                "make a new Runtime"
            )
        op: AsyncOperation | None = None
        name = self._name
        try:
            # (Called by its arguments' places: compiled, a C call, with no
            # method to bind and no keywords to match.)
            op = runtime._new_operation(
                None,
                (),
                parent,
                name if name is not None else "scope",
                False,
                bool(self._supervise),
                _scope,
                self._shield,
                False,
                task,
            )
            deadline = self._deadline
            if self._timeout is not None:
                by_timeout = runtime.now() + self._timeout
                deadline = by_timeout if deadline is None else min(deadline, by_timeout)
            if deadline is not None:
                op.deadline = deadline
        except BaseException as exc:
            if op is None:
                op = made_before(exc, new_operation.__code__)
            if op is not None:
                abandon_scope(op, "the scope's entry was interrupted")
            raise
        self._op = op
        self._parent = parent
        return op

    @staticmethod
    def _end_block(op: AsyncOperation, exc: BaseException | None) -> None:
        """Record how the block ended; a failed block cancels the children.

        Idempotent: an exit interrupted by a Ctrl-C calls it again. A group's
        ``Cancelled`` beside real errors is dropped, as a bare one is.
        """
        if op._outcome is not None:
            return
        if exc is None:
            op._end_work(Outcome.VALUE, None, None)
        elif (error := without_cancelled(exc)) is None:
            op._end_work(Outcome.CANCELLED, None, None)
        elif isinstance(error, _INTERRUPTS):
            # Not a failure of the scope: the exit re-raises it as itself.
            op.cancel(type(error).__name__)
            op._end_work(Outcome.CANCELLED, None, None)
        else:
            op.cancel(f"the block of scope {op.name!r} raised {type(error).__name__}")
            op._end_work(Outcome.ERROR, None, error)

    def start(
        self, fn: Callable[..., Any], *args: Any, name: str | None = None, **keywords: Never
    ) -> Any:
        """Start ``fn`` in the scope and wait until it is ready: see ``AsyncOperation.start``.

        Raises:
            RuntimeError: the scope has not been entered yet.
            TypeError: ``fn`` takes no ``task_status`` keyword, or a keyword
                argument is meant for ``fn`` (bind it with ``functools.partial``).
        """
        if keywords and callable(fn):  # (else refused by op.start(), for what fn is)
            raise keywords_refused("start", fn, keywords, ("name",))
        op = self._op
        if op is None:
            raise RuntimeError(
                "start() on a scope that was not entered; write 'with runtime.scope() as s:' "
                "and call s.start() inside the block"
            )
        return op.start(fn, *args, name=name)

    # -- sync block ----------------------------------------------------------

    def __enter__(self) -> AsyncOperation[None]:
        state = thread_state()
        if state.task is not None:
            raise RuntimeError(
                "a sync 'with scope()' inside a coroutine would block its worker; "
                "write 'async with asyncop.scope()' instead"
            )
        current = state.op
        runtime = self._runtime
        parent = current if current is not None and owner_of(current) is runtime else None
        op = self._open(parent)
        try:
            self._saved = current
            self._ident = _thread.get_ident()
            state.op = op
        except BaseException:
            state.op = current
            abandon_scope(op, "the scope's entry was interrupted")
            raise
        return op

    if TYPE_CHECKING:

        def __exit__(
            self,
            exc_type: type[BaseException] | None,
            exc: BaseException | None,
            tb: TracebackType | None,
        ) -> bool: ...

    else:
        __exit__ = ExitAttribute()

    def _leave(self, exc: BaseException | None) -> bool:
        """Leave the block: wait for the children, then raise what the block came to.

        What ``with`` calls on leaving (``Scope.__exit__``: see
        ``ExitAttribute`` in ``_abandon.py``). A cancellation point when the
        thread runs an operation: a cancel of that operation cancels the
        children, and once they have ended the
        exit raises ``Cancelled``. On the main thread it notices a Ctrl-C
        while it waits; a first one (or one raised by the block) cancels
        the tree and waits for it, a second one stops waiting at once, shuts
        the runtime down without waiting and abandons the threads still
        running operation code, named in a WARNING on the ``asyncop``
        logger. Either is re-raised as itself. An exit from a thread other
        than the one that entered the block raises RuntimeError and leaves
        the scope as it was.
        """
        op = self._op
        if op is None:
            raise RuntimeError("scope exited without being entered; use it in a with statement")
        if op._outcome is None and self._ident != _thread.get_ident():
            # Another thread's current operation is not this one's to change.
            raise RuntimeError(
                f"scope {op.name!r} was exited by a thread other than the one that "
                "entered it; exit it in the thread that entered it instead"
            )
        interrupt = exc if isinstance(exc, _INTERRUPTS) else None
        # The tree as the first Ctrl-C found it, for the KeyboardInterrupt's note.
        note = tree_note(op) if isinstance(interrupt, KeyboardInterrupt) else None
        waited = False
        while True:
            # Everything, the first line included, inside the try: a Ctrl-C
            # lands after any call, and the block must end wherever it does.
            try:
                _leave_thread(self, op)
                self._end_block(op, exc if interrupt is None else interrupt)
                self._watch = None  # the block has ended: nothing to watch for
                if interrupt is not None and not waited:
                    waited = True
                    interrupt_tree(op)
                if interrupt is None or not gave_up(owner_of(op)):
                    _wait_final(op)
                break
            except KeyboardInterrupt as caught:
                if interrupt is not None and waited:
                    # A second Ctrl-C: stop waiting, and give up on the
                    # runtime's work (see _interrupt.py). The tree is
                    # cancelled and the scope ends once its children have.
                    interrupt = caught
                    give_up(owner_of(op), op)
                    break
                # A first Ctrl-C, wherever it landed: the next round ends
                # the block (if it was not yet), cancels the tree and waits.
                interrupt = caught if interrupt is None else interrupt
                note = note if note is not None else tree_note(op)
        if op._cancel_unfinished:  # seen final without the lock: see AsyncOperation._settled
            op._settled()
        verdict = _verdict(self, op, exc, interrupt)
        if isinstance(verdict, KeyboardInterrupt):
            add_tree_note(verdict, note)
        elif interrupt is None:
            # A root scope that deadlock="raise" cancelled leaves with the DeadlockError.
            verdict = deadlock_error_for(owner_of(op), op) or verdict
        try:
            if isinstance(verdict, BaseException):
                if raised_clean(verdict):
                    raise verdict
                throw_clean(verdict)
            return verdict
        finally:
            # The frame stays in the raised exception's traceback: drop what
            # it holds that could lead back to the exception.
            del exc, interrupt, verdict

    def _exit_freed(self, ref: weakref.ref[Any]) -> None:
        """The with-statement's exit was freed before it ended the block.

        A Ctrl-C landed as the exit was called, before its first line: the
        block is ended cancelled and the thread leaves it, without waiting
        for the children (the KeyboardInterrupt is on its way up already).
        """
        if ref is not self._watch:
            return
        self._watch = None
        op = self._op
        if op is None:
            return  # the statement ended before the block was entered
        _leave_thread(self, op)
        if op._outcome is None:
            abandon_scope(op, "a KeyboardInterrupt landed as the block was left")

    # -- async block ---------------------------------------------------------

    async def __aenter__(self) -> AsyncOperation[None]:
        return enter_in_task(self)

    @cython.locals(self="ScopeFields", op="CNode")
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        _value: Outcome = Outcome.VALUE,
        _completed: OperationState = OperationState.COMPLETED,
    ) -> bool:
        """Leave the block: wait for the children, then raise what the block came to.

        The wait for the children is not interrupted by a cancel (the cancel
        reaches them instead). Once they have ended, a cancel of the
        enclosing operation from outside the scope raises ``Cancelled``.

        Raises:
            RuntimeError: scopes were exited out of order (an async generator
                holding one open); the scopes inside this one are closed
                first, so that the task still ends. Or the exit runs in a
                task other than the one that entered the scope, which leaves
                the scope as it was.
        """
        op = self._op
        if op is None:
            raise RuntimeError("scope exited without being entered; use it in an async with")
        task = op._task
        misuse: RuntimeError | None = None
        if op._outcome is not None:
            # Closed already: exited before, or by an out-of-order exit of
            # an enclosing scope (an async generator holding it open).
            if exc is not None:
                return False
            raise RuntimeError(
                f"scope {op.name!r} was already exited, or closed because a scope around "
                "it was exited first; exit each scope once, and do not keep one open "
                "across a yield of an async generator"
            )
        if task is not _running_task("leaving 'async with scope()'"):
            # Another task's stack of scopes is not this one's to change.
            raise RuntimeError(
                f"scope {op.name!r} was exited by a task other than the one that "
                "entered it; exit it in the task that entered it instead"
            )
        if task.current is not op:
            misuse = unwind_to(task, op)
        else:
            task.current = task.outer.pop()
        # What this frame raises holds it in its traceback: it must not hold
        # the task, which holds the task's operation and, should the task
        # fail with what is raised here, the error itself.
        del task
        if exc is None and misuse is None:
            # The common exit, on its own short path: the block ended with
            # no error (this runs on a worker, stepping the task). Read
            # without the lock, first_child only picks the road: either
            # one finds out under the lock whether a child is left.
            if op.first_child is not None:
                # Children to wait for: the wait ends the block in the
                # locked step that suspends the task (_scope_task.py).
                await scope_done(op, True)
            else:
                # No child left: ending the block makes the scope final.
                op._end_work_on_worker(_value, None, None)
            if op._state is _completed and not op._outside_cancel:
                return False
        else:
            self._end_block(op, misuse if misuse is not None else exc)
        if not op._final:
            # (A scope with no child left is final already: no wait to
            # make, as an await whose event is ready does not suspend.)
            await scope_done(op)
        if op._cancel_unfinished:  # seen final without the lock: see AsyncOperation._settled
            op._settled()
        # (Tested for None first: an isinstance() with a tuple is a slow call.)
        interrupt = exc if exc is not None and isinstance(exc, _INTERRUPTS) else None
        if misuse is not None:
            op._observe()
            op._error = None
            try:
                raise misuse
            finally:
                del misuse, exc, tb
        verdict = _verdict(self, op, exc, interrupt)
        try:
            if isinstance(verdict, BaseException):
                if raised_clean(verdict):
                    raise verdict
                throw_clean(verdict)
            return verdict
        finally:
            del exc, tb, interrupt, verdict


# Passed through bare, never grouped: Ctrl-C, SystemExit, and the
# GeneratorExit that closes an async generator suspended inside the block.
_INTERRUPTS = (KeyboardInterrupt, SystemExit, GeneratorExit)


def _verdict(
    scope: Scope,
    op: AsyncOperation,
    exc: BaseException | None,
    interrupt: BaseException | None,
    _failed: OperationState = OperationState.FAILED,
) -> BaseException | bool:
    """What ``scope``'s exit raises, or whether it swallows ``exc``.

    Returned, not raised: a frame that raises stays in the traceback,
    and this one's locals would lead back to the exception.
    """
    error: BaseException | None = None
    if op._state is _failed:
        error = op.error  # reading it marks it observed
        # The error leaves through the block only, and the scope does not keep
        # it: its traceback holds the frame holding the scope (a cycle).
        op._error = None
    if interrupt is not None:
        if error is not None and error is not interrupt:
            interrupt.__context__ = error
        return interrupt
    if error is not None:
        return error
    if op._outside_cancel:
        # Cancelled from outside the scope: leave as a cancelled
        # operation does, so the code after the block never runs. (A
        # root scope is cancelled from outside only in remote work, by
        # the job's local operation: see _remote_call.py.)
        if exc is not None and only_cancelled(exc):
            return False
        outside = scope._parent or op
        return cancelled_for(outside.name, outside.cancel_reason)
    if op.expired and op._interrupted:
        timeout = TimeoutError(f"scope {op.name!r} passed its deadline and was cancelled")
        if isinstance(exc, Cancelled):
            timeout.__cause__ = exc
        else:
            timeout.__suppress_context__ = True
        return timeout
    # Swallow the Cancelled that this scope's own cancel caused. One that no
    # cancel of this scope caused (another operation's token.check(), or
    # raised by hand) goes on, as it would leave a task without the scope.
    return exc is not None and op.token.cancelled and only_cancelled(exc)


def _leave_thread(scope: Scope, op: AsyncOperation) -> None:
    """The calling thread no longer runs ``op``'s block; idempotent."""
    state = thread_state()
    if state.op is op:
        state.op = scope._saved


def _wait_final(op: AsyncOperation) -> None:
    """Block the calling thread until the scope operation is final.

    Waits in slices (``acquire_for``), so the main thread notices a Ctrl-C
    within a fraction of a second; an interrupted wait takes its waiter back.
    """
    waiter = _thread.allocate_lock()
    waiter.acquire()
    with op.runtime._lock:
        if op.done:
            return
        op._add_waiter_locked(waiter)
    try:
        # (Marks the thread blocked: a worker's sync slot is free. A wait for
        # the tree: no thread that could wake a task, for the deadlock watch.)
        park(waiter, None, None, TreeWait(op, "the exit of its with-block"))
    except BaseException:
        op._remove_waiter(waiter)
        raise


def _set_up(
    scope: ScopeFields,
    runtime: Kernel,
    name: str | None,
    timeout: float | None,
    deadline: float | None,
    shield: bool,
    supervise: bool,
) -> None:
    """Set a new scope's fields: ``Scope.__init__``'s work (compiled, a C function)."""
    # Checked before anything is made: a bad value leaves nothing behind.
    if timeout is not None:
        timeout = check_timeout(timeout, "scope(timeout=...)")
    if deadline is not None:
        deadline = check_deadline(deadline, "scope(deadline=...)")
    shield = check_flag(shield, "scope(shield=...)")
    supervise = check_flag(supervise, "scope(supervise=...)")
    scope._runtime = runtime
    scope._name = name
    scope._timeout = timeout
    scope._deadline = deadline
    scope._shield = shield
    scope._supervise = supervise
    scope._op = None
    scope._saved = None
    scope._ident = None
    scope._parent = None
    scope._watch = None


_OUTSIDE = "outside an operation, write 'with runtime.scope()'"


@cython.locals(state="CThreadState", task="CTask", op="CNode")
def scope(
    *,
    name: str | None = None,
    timeout: float | None = None,
    deadline: float | None = None,
    shield: bool = False,
    supervise: bool = False,
) -> Scope:
    """Open a scope under the calling operation: ``async with asyncop.scope():``.

    Inside a coroutine operation use ``async with``; inside a sync callback,
    ``with`` works too. See ``Runtime.scope`` for the arguments.

    Raises:
        RuntimeError: the calling thread is not running an operation; outside
            one, use ``runtime.scope()``.
        TypeError: ``shield`` or ``supervise`` is not True or False.
    """
    if cython.compiled:
        state = _current.state_here()  # type: ignore[attr-defined]  # (a C lookup: _current.pxd)
    else:
        try:
            state = _thread_local.state  # (thread_state(), inline)
        except AttributeError:
            state = thread_state()
    task = state.task
    op = state.op if task is None else task.current
    if op is None:
        raise RuntimeError(
            "asyncop.scope() needs a running operation to attach to, and this thread runs "
            f"none; {outside_advice(_OUTSIDE)}"
        )
    runtime: Any = op.runtime  # (owner_of(op), inline)
    # Made without calling the class: compiled, its allocation then a C set-up.
    made = ScopeFields.__new__(Scope)
    _set_up(made, runtime, name, timeout, deadline, shield, supervise)
    return made
