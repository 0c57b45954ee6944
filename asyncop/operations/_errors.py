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
    """

    __module__ = "asyncop"


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
