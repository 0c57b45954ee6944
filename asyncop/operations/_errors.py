"""The exceptions asyncop raises and delivers.

``Cancelled`` derives from ``BaseException`` so that a bare ``except
Exception`` in user code does not swallow a cancellation: it is delivered
into cancelled work and is meant to unwind it. Everything else derives from
``Exception``.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._guard import describe_fn

__all__ = [
    "BrokenResourceError",
    "BusyResourceError",
    "Cancelled",
    "CancellationError",
    "ClosedResourceError",
    "DeadlockError",
    "EndOfChannel",
    "InvalidStateError",
    "SPAWN_KEYWORDS",
    "WouldBlock",
    "blocking_in_task_error",
    "check_flag",
    "keywords_refused",
]


class Cancelled(BaseException):
    """Delivered into cancelled work to unwind it.

    A sync callback raises it through ``operation.token.check()``; a
    coroutine receives it at its next await. Letting it escape ends the
    operation CANCELLED. It is a ``BaseException`` so that ``except
    Exception`` does not catch it by accident.

    ``str()`` of one that asyncop delivered names the cancelled operation
    and its ``cancel_reason`` (``"deadline passed"`` when a deadline caused
    it), as ``asyncio.CancelledError`` shows its message::

        operation 'download' was cancelled: user pressed stop

    Attributes:
        reason: the ``cancel_reason`` of the cancelled operation, or None.
        operation_name: the name of the operation that saw the cancel, or
            None for a ``Cancelled`` made by user code.
    """

    __module__ = "asyncop"

    # Class-level defaults: a Cancelled made by user code (or the common
    # unreasoned one) carries no per-instance dictionary entries.
    reason: object = None
    operation_name: str | None = None

    def __str__(self) -> str:
        if self.args:
            return BaseException.__str__(self)
        name = self.operation_name
        what = "cancelled" if name is None else f"operation {name!r} was cancelled"
        reason = self.reason
        if reason is None:
            return what
        try:
            text = str(reason)
        except Exception:
            # A reason whose __str__ raises must not break error reports.
            text = f"<{type(reason).__name__} reason>"
        return f"{what}: {text}"


def only_cancelled(exc: BaseException) -> bool:
    """Tell whether ``exc`` is a ``Cancelled``, or a group of nothing else."""
    if isinstance(exc, Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(only_cancelled(inner) for inner in exc.exceptions)
    return False


def without_cancelled(exc: BaseException) -> BaseException | None:
    """``exc`` with every ``Cancelled`` taken out of it; None when nothing else is left.

    A group keeps its shape, message, traceback and notes (``split``); one
    with no ``Cancelled`` in it is returned as itself.
    """
    if isinstance(exc, Cancelled):
        return None
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(Cancelled)[1]
    return exc


def cancelled_for(name: str | None, reason: object) -> Cancelled:
    """Make the ``Cancelled`` delivered into the work of operation ``name``."""
    exc = Cancelled()
    exc.operation_name = name
    if reason is not None:  # (else the class's None: no second entry to make)
        exc.reason = reason
    return exc


def no_result_error(name: str, reason: object, instead: str) -> CancellationError:
    """The error for asking a CANCELLED operation ``name`` for its result.

    Args:
        name: the operation's name.
        reason: its ``cancel_reason`` (None: not shown).
        instead: what to do instead, e.g. ``"check op.state first"``.
    """
    if reason is None:
        why = ""
    else:
        try:
            why = f" ({reason})"
        except Exception:
            # A reason whose __str__ raises must not break error reports.
            why = f" (<{type(reason).__name__} reason>)"
    exc = CancellationError(f"operation {name!r} was cancelled{why} and has no result; {instead}")
    exc.reason = reason
    return exc


def blocking_in_task_error(call: str, instead: str) -> RuntimeError:
    """The refusal of a thread's blocking call made inside a coroutine task.

    The call would block the worker stepping the task, and with it every
    task of the runtime (their steps never overlap).

    Args:
        call: what the user called, on which object: ``"Lock.acquire() on 'db'"``.
        instead: the async form to write, quoted: ``"'await lock.lock_async()'"``.
    """
    return RuntimeError(f"{call} would block a worker inside a coroutine; write {instead} instead")


def check_flag(value: object, what: str) -> bool:
    """``value`` if it is True or False; else a TypeError naming ``what``.

    A flag such as ``shield`` or ``supervise`` takes a bool only, as
    trio's ``CancelScope.shield`` does: ``shield="no"`` would otherwise read
    as True, and ``shield=None`` as False, without a word.

    Args:
        what: the flag as the user wrote it: ``"scope(shield=...)"``.
    """
    if value is True or value is False:
        return value
    raise TypeError(f"{what} needs True or False, got {type(value).__name__}; pass a bool")


# The keywords of spawn() itself (AsyncOperation.spawn and Runtime.spawn).
SPAWN_KEYWORDS = ("name", "supervise", "executor", "abandon")


def keywords_refused(
    call: str, fn: object, keywords: Iterable[str], own: tuple[str, ...]
) -> TypeError:
    """The TypeError for keyword arguments that ``call`` would have to pass on to ``fn``.

    As trio's ``start_soon``, asyncop's spawning calls pass positional
    arguments only: their own keywords (``name=``...) would clash with the
    function's. ``functools.partial`` binds the function's keywords.

    Args:
        call: the call as the user wrote it, without parentheses (``"spawn"``).
        fn: the function it was given.
        keywords: the keywords that are not its own.
        own: its own keywords, which it does take.
    """
    name = describe_fn(fn)
    given = [f"{keyword}=" for keyword in keywords]
    first = given[0] if given else "key="
    takes = (
        "its own keywords are " + ", ".join(f"{keyword}=" for keyword in own)
        if own
        else "it takes none of its own"
    )
    plural = "s" if len(given) > 1 else ""
    return TypeError(
        f"{call}() got keyword argument{plural} {', '.join(given)} and passes only positional "
        f"arguments on to {name} ({takes}); bind keywords with functools.partial instead, "
        f"as in {call}(functools.partial({name}, {first}...))"
    )


class CancellationError(Exception):
    """Raised when asking a CANCELLED operation for its result.

    Its message names the operation and, when it has one, its
    ``cancel_reason``::

        operation 'download' was cancelled (user pressed stop) and has no result; ...

    Attributes:
        reason: the ``cancel_reason`` of the cancelled operation, or None.
    """

    __module__ = "asyncop"

    reason: object = None


class InvalidStateError(Exception):
    """Raised when an operation is asked for something its state forbids."""

    __module__ = "asyncop"


class ClosedResourceError(Exception):
    """Raised when using a resource (channel, socket) that was closed."""

    __module__ = "asyncop"


class BusyResourceError(Exception):
    """Raised when a second task waits on a resource that allows one waiter."""

    __module__ = "asyncop"


class BrokenResourceError(Exception):
    """Raised when a resource was left unusable, e.g. a lock whose holder died."""

    __module__ = "asyncop"


class WouldBlock(Exception):
    """Raised by ``try_*`` methods when the call would have to wait."""

    __module__ = "asyncop"


class EndOfChannel(Exception):
    """Raised by a receive on a channel that is closed and drained."""

    __module__ = "asyncop"


class DeadlockError(Exception):
    """Raised when work can never go on: a stuck runtime, or a lock cycle.

    ``Runtime(deadlock="raise")`` raises it from ``run()`` (and from the
    exit of a sync ``with runtime.scope()`` block) when every task of the
    runtime waits and nothing left can wake one; the tree was cancelled
    first. A ``Lock`` acquire that would close a cycle of holders and
    waiters raises it in the acquiring task or thread at once, unless the
    runtime says ``deadlock="off"``.

    ``str()`` is one sentence, what happened; the report comes as a note
    (PEP 678), so that a traceback shows it below that sentence.

    Attributes:
        report: the text that shows why: for a stuck runtime, each live
            operation, what it waits on and where (the wait-for graph); for
            a lock cycle, each lock of the cycle and its holder.
    """

    __module__ = "asyncop"

    def __init__(self, message: str, report: str = "") -> None:
        super().__init__(message)
        self.report = report
        if report:
            self.add_note(report)
