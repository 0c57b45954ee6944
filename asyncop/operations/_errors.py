"""The exceptions asyncop raises and delivers.

``Cancelled`` derives from ``BaseException`` so that a bare ``except
Exception`` in user code does not swallow a cancellation: it is delivered
into cancelled work and is meant to unwind it. Everything else derives from
``Exception``.
"""

from __future__ import annotations

__all__ = [
    "BrokenResourceError",
    "BusyResourceError",
    "Cancelled",
    "CancellationError",
    "ClosedResourceError",
    "EndOfChannel",
    "InvalidStateError",
    "WouldBlock",
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


def cancelled_for(name: str | None, reason: object) -> Cancelled:
    """Make the ``Cancelled`` delivered into the work of operation ``name``."""
    exc = Cancelled()
    exc.operation_name = name
    exc.reason = reason
    return exc


class CancellationError(Exception):
    """Raised when asking a CANCELLED operation for its result."""

    __module__ = "asyncop"


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
