"""The operation node: one unit of work in the operation tree.

Map
---
``AsyncOperation`` is defined here: its public face (state, result,
cancel, wait, spawn, start), its deadline and shield, and its children. Its
fields are declared and first set in ``_fields.py``, on its base
``OperationFields``, which the compiled core reads in C. The machinery
behind the face lives in four modules, as plain functions that the class
binds as its methods (``_cancel_locked = cancel_locked``), so a call costs
what a method defined here would:

- ``_state.py``: the states and their transitions (``_transition_to_pending``,
  ``_transition_to_running``, ``_transition_to_final``), the only code that
  writes ``_state``; each says whether it happened.

- ``_cancel.py``: ``cancel()`` itself (with a grace it hands the node to
  the runtime, which asks the subtree to stop first: see ``_stop.py``),
  and the cancel walk (``_cancel_locked``), which goes down the
  subtree with an explicit stack; a walk cut short by a Ctrl-C is redone by
  the next one. Also a deadline's expiry (``_expire``, ``_expire_locked``) and the token side of
  a cancel.
- ``_waiting.py``: blocking a thread until the node is final
  (``_block_until_final``, through ``_park.park``, so a cancel of the
  calling operation ends the wait), the waiter list, and the result
  snapshot.
- ``_finalize.py``: completion. ``_transition_to_ended`` records how the
  operation's own work ended, the only code that writes ``_outcome``;
  ``_try_finalize_locked`` makes it final once its children are gone, then
  climbs to the parent, iteratively; the final state follows from the
  outcome and the children's failures (see that module). A finalization a
  Ctrl-C cut short is finished by the next call.

``OpKind`` and ``Outcome`` are in ``_state.py``; ``op.stats`` and its counters in ``_stats.py``.

``_user_frame`` finds the user's code that makes an operation (for
``filename`` and ``lineno``), skipping asyncop's frames; ``_warn.py`` uses
its cache of which code is asyncop's to point warnings at the user's line.

Who writes what
---------------
``_state`` is written only by its transitions in ``_state.py``, and
``_outcome`` only by ``_transition_to_ended`` in ``_finalize.py``; the
constructor (``OperationFields.__init__``) sets the first of each (the state
the runtime says the node is born in, and None: no outcome yet).
Every field but the public ones is written only under the runtime lock,
except ``_ctx``, which the runtime drops once the operation is final,
``_observed``, a latch that only goes from False to True, and
``_unobserved``, which whoever observes a failure drops. Public readers
(``state``, ``done``, ``token.cancelled``) read one reference and need no
lock.

Tree links
----------
A parent holds its live children in a doubly linked list (``first_child``,
``sibling_next``, ``_sibling_prev``) so that a child ending among 100,000
siblings unlinks in O(1). The back links are circular: the first child's
``_sibling_prev`` is the last child (itself, if it is the only one), so that
a child is appended in O(1) with no link to the last child in the parent,
and a linked child's ``_sibling_prev`` is never None; the forward links end
at None, and every walk of the children follows them. A child that becomes
final unlinks at once and clears its own links, which also breaks the parent
<-> child reference cycle without the garbage collector's help. A child is appended
where every operation is made and linked, the runtime's ``link_new_locked``,
and unlinked in ``_try_finalize_locked`` (``_finalize.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine, Generator, Iterator
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any, Generic, Never, NoReturn, SupportsIndex, final, overload

from ..platform import _frames, check_deadline, check_timeout

if TYPE_CHECKING:  # (the stand-in's signatures, for cython.compiled below)
    from ..platform import pure_cython as cython
else:
    try:
        import cython
    except ImportError:  # run as Python, without Cython installed
        from ..platform import pure_cython as cython
from ._cancel import cancel as cancel_operation
from ._cancel import (
    cancel_locked,
    cancel_token_locked,
    expire,
    expire_locked,
    finish_token_cancel_locked,
)
from ._current import thread_state
from ._errors import (
    SPAWN_KEYWORDS,
    InvalidStateError,
    check_flag,
    keywords_refused,
    no_result_error,
)
from ._executor import spawn_remote
from ._fields import OperationFields
from ._finalize import (
    end_work,
    end_work_on_worker,
    line_of,
    transition_to_ended,
    try_finalize_locked,
)
from ._hooks import run_after, start_child
from ._park import cancelled_error
from ._state import (
    AsyncResult,
    OperationState,
    transition_to_final,
    transition_to_pending,
    transition_to_running,
)
from ._stats import OperationStatistics, statistics
from ._suspend import suspend
from ._token import CancelToken
from ._typing import R, T, Ts
from ._waiting import (
    add_waiter_locked,
    block_until_final,
    check_can_block,
    observe,
    remove_waiter,
    settled,
    snapshot,
)

if TYPE_CHECKING:
    from ._face import RuntimeFace
    from ._hooks import After

__all__ = ["AsyncOperation"]


def _user_frame(depth: int = 2) -> tuple[CodeType | None, int]:
    """Find where the user made the operation: the first frame outside asyncop.

    ``depth`` is where the caller expects the user's frame (counted from
    here), so the usual case costs one look (compiled, asyncop's functions
    have no frames: the walk starts at the innermost Python frame, and
    reads the frames in C, see ``platform/_frames.py``). Returns the
    frame's code and instruction offset; the line is worked out only when
    read. An operation asyncop's own code makes on a worker thread (a
    server's connection, say), with no user frame on the stack, gets the
    place of the operation whose code made it: in the end, the user's line
    that started it all (the ``serve_tcp`` call).
    """
    global _last_user_code
    # (Compiled, _node.pxd cimports _frames: its functions are C calls.)
    frame: FrameType | None = _frames.current_frame() if cython.compiled else _getframe(depth)
    while frame is not None:
        code = _frames.frame_code(frame)
        # The code found last is the user's: no look in the cache for it.
        if code is not _last_user_code:
            # Whether a code object is asyncop's is remembered by its id; the
            # entry keeps the code alive, so its id is not reused meanwhile.
            known = _known_code(id(code))
            if known is None or known[0] is not code:
                known = _learn_code(frame)
            if known[1]:
                frame = _frames.frame_back(frame)
                continue
            _last_user_code = code
        return code, _frames.frame_lasti(frame)
    state = thread_state()
    task = state.task
    maker = state.op if task is None else task.current
    if maker is not None:
        return maker._code, maker._lasti
    return None, 0


def made_by_user(module: object) -> bool:
    """Whether code of ``module`` (a ``__name__``) can be where a user made something.

    Not asyncop's own modules, nor ``threading``, whose frames start every
    thread: a worker's stack has them below asyncop's and nothing else. Nor
    anyio's: on the ``"asyncop"`` backend its ``start_soon()`` and ``run()``
    make operations for the user's call of them.
    """
    if not isinstance(module, str):
        return True
    return not (module.partition(".")[0] in ("asyncop", "anyio") or module == "threading")


# id(code) -> (code, whether it is asyncop's), for _user_frame.
_OWN_CODE: dict[int, tuple[CodeType, bool]] = {}
_OWN_CODE_MAX = 4096  # emptied when it grows past this (code made at run time)
_known_code = _OWN_CODE.get
_getframe = sys._getframe
# The code of the frame _user_frame found last (the user's, and kept alive
# by this reference: no other code object can take its place meanwhile).
_last_user_code: CodeType | None = None


def _learn_code(frame: FrameType) -> tuple[CodeType, bool]:
    module = frame.f_globals.get("__name__", "")
    own = not made_by_user(module)
    if len(_OWN_CODE) >= _OWN_CODE_MAX:
        _OWN_CODE.clear()
    known = _OWN_CODE[id(frame.f_code)] = (frame.f_code, own)
    return known


@final
class AsyncOperation(OperationFields, Generic[T]):
    """One node of the operation tree: a unit of work and its children.

    Only the runtime makes operations, through ``Runtime.create``,
    ``Runtime.spawn``, ``AsyncOperation.spawn`` and ``Runtime.scope``.
    """

    # Every field is its base's (see _fields.py): a slot here would hide it.
    __slots__ = ()

    # The public fields, for the reader (set by OperationFields.__init__).
    runtime: RuntimeFace
    name: str
    parent: AsyncOperation[Any] | None
    first_child: AsyncOperation[Any] | None
    sibling_next: AsyncOperation[Any] | None
    cancel_reason: object

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
        return line_of(self._code, self._lasti)

    @property
    def token(self) -> CancelToken:
        """The operation's cancellation token: sync work polls it."""
        token = self._token
        if token is None:
            lock = self.runtime._lock
            with lock:
                token = self._token
                if token is None:
                    token = self._token = CancelToken(lock, self.runtime, self)
                    if self._cancelled:
                        token._cancelled = True
                        token._about = (self.name, self.cancel_reason)
        return token

    @property
    def stats(self) -> OperationStatistics:
        """What the operation has cost so far: a snapshot (see ``OperationStatistics``)."""
        return statistics(self)

    # A reader that finds the operation final without the lock, and still
    # flagged, calls _settled() before it goes on: see _waiting.py.

    @property
    def state(self) -> OperationState:
        """Where the operation is in its life (see ``OperationState``)."""
        state = self._state
        if state.final and self._cancel_unfinished:
            self._settled()
        return state

    @property
    def done(self) -> bool:
        """True once the operation is COMPLETED, FAILED or CANCELLED."""
        if self._state.final:
            if self._cancel_unfinished:
                self._settled()
            return True
        return False

    @property
    def expired(self) -> bool:
        """True if the operation's own deadline passed and cancelled it."""
        return bool(self._expired)

    @property
    def error(self) -> BaseException | None:
        """The failure of a FAILED operation, else None. Reading it observes it."""
        if self._state is OperationState.FAILED:
            if self._cancel_unfinished:
                self._settled()
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
        if state.final and self._cancel_unfinished:
            self._settled()
        if state is OperationState.COMPLETED:
            return self._value  # type: ignore[no-any-return]
        if state is OperationState.FAILED:
            self._observe()
            if self._error is None:
                raise InvalidStateError(
                    f"scope {self.name!r} failed, and its error was raised out of its "
                    "block, which keeps no copy of it; catch the error around the block"
                )
            raise self._error
        if state is OperationState.CANCELLED:
            raise no_result_error(
                self.name, self.cancel_reason, "check op.state before asking for the result"
            )
        raise InvalidStateError(
            f"operation {self.name!r} is {state.name} and has no result yet; "
            "call op.wait() (or 'await op' in a coroutine) first"
        )

    def __repr__(self) -> str:
        return f"<AsyncOperation {self.name!r} {self._state.name} at {self.filename}:{self.lineno}>"

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        # pickle and copy ask this first: a node of a live tree has no copy.
        raise TypeError(
            f"operation {self.name!r} cannot be pickled or copied: it is a node of its "
            "runtime's tree; pass its result (op.result()) or its name instead"
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
            if self._state.final:
                return
            due = self.runtime._arm_deadline_locked(self)
        if due:
            self._expire()

    @property
    def shield(self) -> bool:
        """True if a cancel (or a stop request) from above does not enter this subtree.

        Settable, to True or False only.

        Raises:
            TypeError: the new value is not True or False.
        """
        return bool(self._shield)

    @shield.setter
    def shield(self, value: bool) -> None:
        # Checked first: a bad value changes nothing.
        value = check_flag(value, f"the shield of operation {self.name!r}")
        after: After = []
        with self.runtime._lock:
            self._shield = value
            parent = self.parent
            # Dropping the shield lets in a cancel that is already pending
            # above: the subtree must not stay live under a cancelled parent.
            if not value and parent is not None and parent._cancelled:
                self._outside_cancel = True
                self._cancel_locked(parent.cancel_reason, after)
            elif not value:
                # A stop request above now reaches the subtree too.
                self.runtime._wake_stop_waiters_locked()
        run_after(after)

    # ------------------------------------------------------------------
    # Cancellation
    # ------------------------------------------------------------------

    # cancel() (the public call), the walk and its helpers: see _cancel.py.
    cancel = cancel_operation
    _cancel_locked = cancel_locked
    _expire = expire
    _expire_locked = expire_locked
    _cancel_token_locked = cancel_token_locked
    _finish_token_cancel_locked = finish_token_cancel_locked

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
        if not self._state.final:
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
        if self._cancel_unfinished:
            self._settled()
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
        return suspend(self)

    def _await_description(self) -> str:
        return f"operation {self.name!r}"

    # Blocking, the waiter list and the snapshot: see _waiting.py.
    _check_can_block = check_can_block
    _block_until_final = block_until_final
    _add_waiter_locked = add_waiter_locked
    _remove_waiter = remove_waiter
    _settled = settled
    _snapshot = snapshot
    _observe = observe

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

    @cython.locals(self="CNode")  # (compiled: the runtime's calls are C methods, see _owner.py)
    def spawn(
        self,
        fn: Callable[[*Ts], Any],
        *args: *Ts,
        name: str | None = None,
        supervise: bool = False,
        executor: object = None,
        abandon: bool = False,
        **keywords: Any,
    ) -> AsyncOperation[Any]:
        """Make a child that runs ``fn(*args)`` and submit it.

        A plain function runs on a worker thread; an ``async def`` function
        runs as a coroutine task.

        Args:
            fn: the work.
            *args: its positional arguments; bind keyword arguments with
                ``functools.partial(fn, key=value)``.
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
            TypeError: ``fn`` is not callable, a keyword argument is meant
                for ``fn``, ``supervise`` is not a bool, or (with an
                executor) ``fn`` or an argument cannot be pickled.
            RuntimeError: this operation has ended (a scope that exited).
        """
        if keywords and callable(fn):  # (else refused below, for what fn is)
            raise keywords_refused("spawn", fn, keywords, SPAWN_KEYWORDS)
        if supervise is not False and supervise is not True:
            check_flag(supervise, "spawn(supervise=...)")
        if executor is not None or abandon:
            return spawn_remote(
                self.runtime,
                self,
                fn,
                args,
                name=name,
                supervise=supervise,
                executor=executor,
                abandon=abandon,
            )
        # (Positional: the commonest call of all, and a keyword call costs more.)
        return self.runtime._new_operation(fn, args, self, name, True, supervise)

    def start(
        self, fn: Callable[..., Any], *args: Any, name: str | None = None, **keywords: Never
    ) -> Any:
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
            TypeError: ``fn`` is not callable or takes no ``task_status``
                keyword, or a keyword argument is meant for ``fn`` (bind it
                with ``functools.partial``).
        """
        if keywords and callable(fn):  # (else refused below, for what fn is)
            raise keywords_refused("start", fn, keywords, ("name",))
        # The runtime sits above the operations package: it installed its
        # start() in _hooks when it was imported.
        return start_child(self, fn, args, name)

    # ------------------------------------------------------------------
    # Transitions: see _state.py (and _finalize.py for the outcome)
    # ------------------------------------------------------------------

    _transition_to_pending = transition_to_pending
    _transition_to_running = transition_to_running
    _transition_to_final = transition_to_final
    _transition_to_ended = transition_to_ended

    # ------------------------------------------------------------------
    # Completion: see _finalize.py
    # ------------------------------------------------------------------

    _end_work = end_work
    _end_work_on_worker = end_work_on_worker
    _try_finalize_locked = try_finalize_locked


AsyncOperation.__module__ = "asyncop"
