"""``move_on_after``, ``fail_after`` and their ``_at`` forms: scopes with a deadline.

The spellings trio and anyio users type first::

    async with asyncop.move_on_after(5) as cs:
        await fetch()
    if cs.cancelled_caught:
        print("gave up after 5 s")

    async with asyncop.fail_after(5):   # TimeoutError after 5 s
        await fetch()

Each is a ``scope(timeout=...)`` (or ``scope(deadline=...)``) in the tree,
with the same rules: the block is the scope operation's own work, children
spawned into it (``current_operation().spawn(...)``) are cancelled with it
and waited for at the exit, and a cancel from outside passes through as
``Cancelled``. The object they return, a :class:`TimeoutScope`, wraps that
``Scope`` and changes one thing only, what the scope's own expiry does:

- a ``Scope`` raises a bare ``TimeoutError`` from the ``Cancelled`` that
  ended the block, and only for its own deadline (rule 4 of ``_scope.py``:
  every other error of a scope's exit is a group, a ``Cancelled`` or an
  interrupt). ``fail_after`` lets it go; ``move_on_after`` swallows it, so
  the code after the block runs.
- ``cancelled_caught`` records that the scope's own cancel (its deadline,
  or ``cancel()``) interrupted the block or a child, and the exit stopped
  it there: True after a ``move_on_after`` that moved on or a ``fail_after``
  that raised; False when the block finished in time, failed, or was
  cancelled from outside.

Other errors keep the scope's rule too: an exception that leaves the
block comes out in an ``ExceptionGroup``, even alone (trio's cancel scopes
let it through bare), and so does an inner ``fail_after``'s ``TimeoutError``
that leaves an outer timeout block.

In a coroutine write ``async with``; ``with`` is for sync operations (a
callback on a worker, a thread inside a ``with runtime.scope()`` block). A
plain ``with`` in a coroutine is refused at once, where trio and anyio
accept it: the exit of an asyncop scope waits for the block's children,
which a coroutine cannot do without ``await``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, final

from ..operations import OperationState, check_flag, thread_state
from ..platform import check_deadline, check_timeout
from ._core._scope import Scope
from ._introspect import runtime_of_caller

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["TimeoutScope", "fail_after", "fail_at", "move_on_after", "move_on_at"]


@final
class TimeoutScope:
    """A scope with a deadline: what ``move_on_after``, ``fail_after`` and the ``_at`` forms give.

    Its block is a scope's block: ``current_operation()`` inside it is the
    scope's operation, and children spawned into it are cancelled with it
    and waited for at the exit. When the deadline interrupts the block,
    ``move_on_after``/``move_on_at`` go on after it and ``fail_after``/
    ``fail_at`` raise ``TimeoutError``; ``cancelled_caught`` then reads
    True. A cancel from outside passes through as ``Cancelled``.

    ``async with`` in a coroutine (a plain ``with`` there raises
    RuntimeError: the exit waits for the block's children); ``with`` in a
    sync operation.
    """

    __slots__ = ("_caught", "_move_on", "_scope")

    def __init__(self, scope: Scope, *, move_on: bool) -> None:
        self._scope = scope
        self._move_on = move_on
        self._caught = False

    @property
    def deadline(self) -> float:
        """When the block is cancelled, on the runtime's clock; ``math.inf`` for never.

        Settable before and while the block runs, as ``scope.deadline``:
        ``cs.deadline += 1`` moves it a second later, ``math.inf`` removes
        it, and one already passed cancels at once. Before the block is
        entered, a ``move_on_after(seconds)`` reads as ``seconds`` from now.

        Raises:
            TypeError: the new value is not a number.
            ValueError: the new value is NaN; the deadline stays as it was.
        """
        scope = self._scope
        op = scope._op
        if op is not None:
            deadline = op.deadline
            return math.inf if deadline is None else deadline
        planned = math.inf if scope._deadline is None else scope._deadline
        if scope._timeout is not None:
            planned = min(planned, scope._runtime.now() + scope._timeout)
        return planned

    @deadline.setter
    def deadline(self, value: float) -> None:
        scope = self._scope
        op = scope._op
        if op is not None:
            op.deadline = value
            return
        scope._deadline = check_deadline(value, f"deadline of {scope._name}")
        scope._timeout = None

    @property
    def cancelled_caught(self) -> bool:
        """Whether this scope's own cancel interrupted the block, and the exit stopped it.

        True after the deadline (or ``cancel()``) interrupted the block or
        a child: a ``move_on_after`` that moved on, a ``fail_after`` that
        raised. False while the block runs, and when it finished in time,
        failed, or was cancelled from outside.
        """
        return self._caught

    def cancel(self, reason: object = None, *, grace: float | None = None) -> None:
        """Cancel the block and its children; the exit then goes on after the block.

        Not a ``TimeoutError``, even for ``fail_after``: the block was
        cancelled on purpose. Callable from any thread. With ``grace``, the
        block and its children are first asked to stop, and cancelled only
        if they still run when the grace runs out (see
        ``AsyncOperation.cancel``); a block that ends by itself meanwhile
        leaves ``cancelled_caught`` False.

        Raises:
            RuntimeError: the block has not been entered yet.
            TypeError: ``grace`` is not a number.
            ValueError: ``grace`` is NaN or negative.
        """
        op = self._scope._op
        if op is None:
            raise RuntimeError(
                f"cancel() on {self._scope._name}, which was not entered; "
                "call it inside the 'async with' block"
            )
        op.cancel(reason, grace=grace)

    def __repr__(self) -> str:
        state = self._scope.state.name
        caught = " cancelled_caught" if self._caught else ""
        return f"<TimeoutScope {self._scope._name!r} {state}{caught}>"

    def _refuse_reentry(self) -> None:
        if self._scope._op is not None:
            raise RuntimeError(
                f"{self._scope._name} was already entered; call it again for a new block"
            )

    def _expired(self) -> bool:
        """The scope's exit raised the one bare TimeoutError it raises, for its own deadline.

        Returns whether to swallow it (``move_on_*``) rather than let it go.
        """
        self._caught = True
        return self._move_on

    def _exit_verdict(self, swallowed: bool) -> bool:
        """After a scope exit that raised no TimeoutError: record a caught own cancel."""
        op = self._scope._op
        assert op is not None
        # A scope ends CANCELLED when its block or a child was interrupted
        # by a cancel; not from outside, that cancel was the scope's own
        # (unless the scope was never cancelled: a Cancelled from elsewhere).
        self._caught = (
            op._state is OperationState.CANCELLED and not op._outside_cancel and op.token.cancelled
        )
        return swallowed

    # -- sync block ----------------------------------------------------------

    def __enter__(self) -> TimeoutScope:
        if thread_state().task is not None:
            name = self._scope._name
            raise RuntimeError(
                f"a sync 'with {name}' inside a coroutine would block its worker "
                f"while the block's children end; write 'async with asyncop.{name}' instead"
            )
        self._refuse_reentry()
        self._scope.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        """Leave the block as a scope does, then apply this scope's rule to its expiry.

        A cancellation point when the thread runs an operation (see
        ``Scope.__exit__``).

        Raises:
            TimeoutError: ``fail_after``/``fail_at``'s deadline interrupted the block.
        """
        try:
            swallowed = self._scope.__exit__(exc_type, exc, tb)
        except TimeoutError:
            if self._expired():
                return True
            raise
        finally:
            del exc, tb  # (the frame stays in a raised exception's traceback)
        return self._exit_verdict(swallowed)

    # -- async block ---------------------------------------------------------

    async def __aenter__(self) -> TimeoutScope:
        self._refuse_reentry()
        await self._scope.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        """Leave the block as a scope does, then apply this scope's rule to its expiry.

        Raises:
            TimeoutError: ``fail_after``/``fail_at``'s deadline interrupted the block.
        """
        try:
            swallowed = await self._scope.__aexit__(exc_type, exc, tb)
        except TimeoutError:
            if self._expired():
                return True
            raise
        finally:
            del exc, tb
        return self._exit_verdict(swallowed)


def _make(what: str, value: object, *, absolute: bool, shield: bool, move_on: bool) -> TimeoutScope:
    """Check the time, find the caller's runtime, make the scope: nothing is made on error."""
    if absolute:
        timeout, deadline = None, check_deadline(value, f"{what}()")
    else:
        timeout, deadline = check_timeout(value, f"{what}()"), None
    shield = check_flag(shield, f"{what}(shield=...)")
    runtime = runtime_of_caller(f"asyncop.{what}()")
    scope = Scope(runtime, f"{what}({value!r})", timeout, deadline, shield, False)
    return TimeoutScope(scope, move_on=move_on)


def move_on_after(seconds: float | None, *, shield: bool = False) -> TimeoutScope:
    """A scope cancelled after ``seconds``, whose expiry ends the block quietly.

    ``async with asyncop.move_on_after(5) as cs:`` in a coroutine; ``with``
    in a sync operation. When the deadline interrupts the block, the code
    after it runs and ``cs.cancelled_caught`` is True. ``math.inf`` (or
    None) means no limit, and 0 or less cancels at the first await.
    ``shield=True`` keeps cancels from outside out, as ``scope(shield=True)``.

    Raises:
        TypeError: ``seconds`` is not a number (or None), or ``shield`` not a bool.
        ValueError: ``seconds`` is NaN.
        RuntimeError: the calling thread runs no asyncop operation.
    """
    return _make("move_on_after", seconds, absolute=False, shield=shield, move_on=True)


def move_on_at(deadline: float | None, *, shield: bool = False) -> TimeoutScope:
    """A scope cancelled at ``deadline`` on the runtime's clock, then moving on.

    As :func:`move_on_after`, with an absolute time (``current_time() + 5``).

    Raises:
        TypeError: ``deadline`` is not a number (or None), or ``shield`` not a bool.
        ValueError: ``deadline`` is NaN.
        RuntimeError: the calling thread runs no asyncop operation.
    """
    return _make("move_on_at", deadline, absolute=True, shield=shield, move_on=True)


def fail_after(seconds: float | None, *, shield: bool = False) -> TimeoutScope:
    """A scope cancelled after ``seconds``, whose expiry raises ``TimeoutError``.

    ``async with asyncop.fail_after(5):`` in a coroutine; ``with`` in a sync
    operation. The ``TimeoutError`` is raised from the ``Cancelled`` that
    ended the block, as ``scope(timeout=...)`` raises it. ``math.inf`` (or
    None) means no limit.

    Raises:
        TypeError: ``seconds`` is not a number (or None), or ``shield`` not a bool.
        ValueError: ``seconds`` is NaN.
        RuntimeError: the calling thread runs no asyncop operation.
    """
    return _make("fail_after", seconds, absolute=False, shield=shield, move_on=False)


def fail_at(deadline: float | None, *, shield: bool = False) -> TimeoutScope:
    """A scope cancelled at ``deadline`` on the runtime's clock, raising ``TimeoutError``.

    As :func:`fail_after`, with an absolute time.

    Raises:
        TypeError: ``deadline`` is not a number (or None), or ``shield`` not a bool.
        ValueError: ``deadline`` is NaN.
        RuntimeError: the calling thread runs no asyncop operation.
    """
    return _make("fail_at", deadline, absolute=True, shield=shield, move_on=False)
