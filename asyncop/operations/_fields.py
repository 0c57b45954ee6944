"""The fields of an operation node, in a layout the compiled core reads in C.

``AsyncOperation`` (``_node.py``) is its public face and its methods; every
field it has is declared here, on its base :class:`OperationFields`, and
set by that base's constructor. Why a base of its own: compiled (see
``hatch_build.py``), this class is an extension type (``_fields.pxd``), so
the core modules that name it as the type of a node (``cython.locals``, or
the signatures of their ``.pxd``) read and write the node's fields as C
struct members, where an attribute of a plain class is a dictionary walk
through the type and a descriptor call. Run as Python, it is a plain class
with ``__slots__``, and the fields are the slots ``AsyncOperation`` had.

Compiled, a node's ``runtime`` is typed with ``RuntimeBase`` (``_owner.py``),
the base of every runtime: a node reads its runtime's lock and stamp clock,
and makes its calls on it, in C.

A Python class can extend an extension type, but an extension type cannot
take ``typing.Generic`` as a base, nor can a subclass declare the fields
again (its slots would hide the base's): so ``AsyncOperation`` adds only
``Generic`` and its methods, with no slots of its own.

Six fields that few operations ever set (a deadline and its timer, the
failures the children handed up, the token, the report of an unobserved
failure, the locks its coroutine holds) live in a :class:`RareFields` of
their own, made on the first write of one of them: a parked task pays one
pointer for them, not six. The node
reads and writes them as properties of the same names (``op._deadline``...);
the hot paths (the end of every operation, a cancel) read ``op._rare``.

What each field means, and who writes it, is told in ``_node.py`` (and, for
the counters behind ``op.stats``, in ``_stats.py``). ``_ended_at`` is set
later than the constructor: it stays unset (None, compiled) until the
operation becomes final. ``_started_at`` is NaN until the operation starts:
compiled, it is a C double, where a float object beside the node would cost
every started operation 32 bytes more.
"""

from __future__ import annotations

import _thread
import contextvars
import math
from collections.abc import Callable
from types import CodeType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._face import RuntimeFace
    from ._finalize import _Unobserved
    from ._node import AsyncOperation
    from ._state import OperationState, OpKind, Outcome
    from ._token import CancelToken

__all__ = ["OperationFields", "RareFields"]

# ``_started_at`` of an operation that has not started.
_NOT_STARTED = math.nan


# Compiled, an extension type (see _fields.pxd) that AsyncOperation extends.
class OperationFields:
    """The fields of one operation node: the base of ``AsyncOperation``."""

    __slots__ = (
        "__weakref__",
        "_args",
        "_busy",
        "_cancel_unfinished",
        "_cancelled",
        "_code",
        "_cpu",
        "_created_at",
        "_ctx",
        "_ended_at",
        "_error",
        "_expired",
        "_final",
        "_fn",
        "_interrupted",
        "_kind",
        "_lasti",
        "_observed",
        "_outcome",
        "_outside_cancel",
        "_propagates",
        "_rare",
        "_shield",
        "_sibling_prev",
        "_started_at",
        "_state",
        "_steps",
        "_supervise",
        "_supervised",
        "_task",
        "_value",
        "_waiters",
        "_wakes",
        "cancel_reason",
        "first_child",
        "name",
        "parent",
        "runtime",
        "sibling_next",
    )

    def __init__(
        self,
        runtime: RuntimeFace,
        kind: OpKind,
        fn: Callable[..., Any] | None,
        args: tuple[Any, ...],
        name: str,
        ctx: contextvars.Context | None,
        code: CodeType | None,
        lasti: int,
        state: OperationState,
    ) -> None:
        # ``state``: the one it is born in (see _state.py).
        self.runtime: RuntimeFace = runtime
        self.name: str = name
        # Where the operation was made: code object and instruction offset.
        self._code: CodeType | None = code
        self._lasti: int = lasti
        self.parent: AsyncOperation[Any] | None = None
        self.first_child: AsyncOperation[Any] | None = None
        self.sibling_next: AsyncOperation[Any] | None = None
        self.cancel_reason: object = None
        self._state: OperationState = state
        # Whether the state is final (a node is never born final): written
        # with the state by its transition to final, and read where the
        # state's own ``final`` would be an attribute lookup on an enum
        # member (compiled, this is a C field).
        self._final: bool = False
        self._sibling_prev: AsyncOperation[Any] | None = None
        self._kind: OpKind = kind
        self._fn: Callable[..., Any] | None = fn
        self._args: tuple[Any, ...] = args
        self._ctx: contextvars.Context | None = ctx
        self._outcome: Outcome | None = None
        self._value: Any = None
        self._error: BaseException | None = None
        # The fields few operations ever set: a deadline and its timer, the
        # children's failures, the token, the report of an unobserved
        # failure, the locks its task holds (see RareFields). Made on the
        # first write of one of them.
        self._rare: RareFields | None = None
        # What to wake when the operation is final: the lock a thread blocked in
        # wait() sleeps on, or a callback to run once the runtime lock is free.
        self._waiters: list[Callable[[], object] | _thread.LockType] | None = None
        self._observed: bool = False
        self._propagates: bool = True
        self._supervised: bool = False
        self._supervise: bool = False
        self._shield: bool = False
        self._expired: bool = False
        self._interrupted: bool = False
        # True once a cancel walk that started above this node reached it (or
        # found it already cancelled) through no shield: the node was cancelled
        # from outside, whatever its own cancel() or deadline did. A scope's
        # exit reads it to decide whether its Cancelled passes on.
        self._outside_cancel: bool = False
        self._task: Any = None
        # The token (in _rare) is made on first use (most operations never hand
        # theirs out); until then, and always for the runtime, the flag is the truth.
        self._cancelled: bool = False
        # Set while a cancel walk from this node runs, and from the transition to
        # final until the node is settled: still set afterwards only if a Ctrl-C
        # cut either short, and then the next cancel() that meets it finishes it.
        self._cancel_unfinished: bool = False
        # The counters behind op.stats (see _stats.py).
        self._steps: int = 0
        self._wakes: int = 0
        self._busy: float = 0.0
        self._cpu: float = 0.0
        self._created_at: float = self.runtime._stamp()  # (compiled: a C field)
        # Set when the operation starts (NaN until then) and when it becomes final.
        self._started_at: float = _NOT_STARTED
        self._ended_at: float | None

    # -- the rare fields, read and written as if they were the node's own --------

    def _rare_fields(self) -> RareFields:
        rare = self._rare
        if rare is None:
            rare = self._rare = RareFields()
        return rare

    @property
    def _deadline(self) -> float | None:
        rare = self._rare
        return None if rare is None else rare.deadline

    @_deadline.setter
    def _deadline(self, value: float | None) -> None:
        if value is not None or self._rare is not None:
            self._rare_fields().deadline = value

    @property
    def _deadline_timer(self) -> Any:
        rare = self._rare
        return None if rare is None else rare.deadline_timer

    @_deadline_timer.setter
    def _deadline_timer(self, value: Any) -> None:
        if value is not None or self._rare is not None:
            self._rare_fields().deadline_timer = value

    @property
    def _failures(self) -> list[BaseException] | None:
        rare = self._rare
        return None if rare is None else rare.failures

    @_failures.setter
    def _failures(self, value: list[BaseException] | None) -> None:
        if value is not None or self._rare is not None:
            self._rare_fields().failures = value

    @property
    def _token(self) -> CancelToken | None:
        rare = self._rare
        return None if rare is None else rare.token

    @_token.setter
    def _token(self, value: CancelToken | None) -> None:
        if value is not None or self._rare is not None:
            self._rare_fields().token = value

    @property
    def _unobserved(self) -> _Unobserved | None:
        rare = self._rare
        return None if rare is None else rare.unobserved

    @_unobserved.setter
    def _unobserved(self, value: _Unobserved | None) -> None:
        if value is not None or self._rare is not None:
            self._rare_fields().unobserved = value

    @property
    def _held(self) -> list[Any] | None:
        rare = self._rare
        return None if rare is None else rare.held

    @_held.setter
    def _held(self, value: list[Any] | None) -> None:
        if value is not None or self._rare is not None:
            self._rare_fields().held = value


# Final: an extension type when compiled (see _fields.pxd), which no class extends.
class RareFields:
    """The fields of a node that few operations ever set, made on the first write of one."""

    # The mark typing.final leaves, which an extension type cannot take as a decorator.
    __final__ = True

    __slots__ = ("deadline", "deadline_timer", "failures", "held", "token", "unobserved")

    def __init__(self) -> None:
        self.deadline: float | None = None
        # The timer that expires the deadline, while one is armed.
        self.deadline_timer: Any = None
        self.failures: list[BaseException] | None = None
        self.token: CancelToken | None = None
        # Logs the failure when the operation is collected, unless it is
        # observed first; made only for a failure nobody has taken over.
        self.unobserved: _Unobserved | None = None
        # The locks the operation's coroutine holds (its task state's
        # ``held``), broken if it ends holding them; few tasks take one.
        self.held: list[Any] | None = None
