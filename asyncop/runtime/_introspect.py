"""``current_runtime()``: which runtime the calling code runs on.

Like trio's ``current_*`` functions, it raises RuntimeError outside the
library's own code (a thread that runs no operation) rather than returning
None: code that asks needs a runtime, and a None would only fail later,
further from the cause. ``current_operation()`` (which returns None there)
is the way to ask "am I inside asyncop at all?".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..operations import AsyncOperation, current_operation, outside_advice

if TYPE_CHECKING:
    from ._scheduler import Runtime

__all__ = ["current_runtime", "owner_of", "runtime_of_caller"]


def current_runtime() -> Runtime:
    """Return the ``Runtime`` running the calling operation.

    Works in coroutine operations, sync callbacks and scope blocks. Not a
    cancellation point.

    Raises:
        RuntimeError: the calling thread runs no asyncop operation (check
            ``asyncop.current_operation()`` for None to test that first).
    """
    return runtime_of_caller("current_runtime()")


_INSIDE = "call it from inside an operation's code"


def runtime_of_caller(what: str) -> Runtime:
    """The runtime of the operation the calling thread is running."""
    op = current_operation()
    if op is None:
        raise RuntimeError(
            f"{what} needs a running asyncop operation, and this thread is not running one; "
            f"{outside_advice(_INSIDE)}"
        )
    return owner_of(op)


def owner_of(op: AsyncOperation[Any]) -> Runtime:
    """``op.runtime`` as the ``Runtime`` it is.

    The node types it with the protocol its package owns (``RuntimeFace``),
    since the operations package names nothing of the runtime; every
    operation is made by a ``Runtime``, which the runtime's own code may rely on.
    """
    runtime: Any = op.runtime
    return runtime  # type: ignore[no-any-return]
