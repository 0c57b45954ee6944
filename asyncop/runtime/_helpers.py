"""The C-style helpers (the ``ASYNC_*`` macros of the C API), on a default runtime.

::

    op = async_create(task, context)    # ASYNC_CREATE
    async_submit(op)                    # ASYNC_SUBMIT
    result = async_await(op)            # ASYNC_AWAIT -> AsyncResult
    async_cancel(op)                    # ASYNC_CANCEL

The default runtime is made on first use, with ``async_worker_limit(n)``
workers if that was called before, and is shut down at interpreter exit:
live work is cancelled and given a short grace period, then abandoned (its
threads are daemon threads), so exit never hangs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..operations import AsyncOperation, AsyncResult, OperationState, V
from ..platform import check_timeout
from ._scheduler import Runtime

__all__ = [
    "async_await",
    "async_cancel",
    "async_create",
    "async_result",
    "async_state",
    "async_submit",
    "async_worker_limit",
    "default_runtime",
]

_lock = threading.Lock()
_default: Runtime | None = None
_worker_limit: int | None = None


def default_runtime() -> Runtime:
    """Return the default runtime, making it on first use."""
    global _default
    runtime = _default
    if runtime is not None:
        return runtime
    with _lock:
        if _default is None:
            _default = Runtime(_worker_limit, name="asyncop-default")
        return _default


def async_worker_limit(n: int) -> None:
    """Set the default runtime's worker count; call it before first use.

    Raises:
        ValueError: ``n`` is less than 1.
        TypeError: ``n`` is not an int.
        RuntimeError: the default runtime already exists.
    """
    global _worker_limit
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(
            f"async_worker_limit() needs an int, got {type(n).__name__}; "
            "pass a positive number of worker threads"
        )
    if n < 1:
        raise ValueError(
            f"async_worker_limit({n}) needs at least one worker; pass a positive number"
        )
    with _lock:
        if _default is not None:
            raise RuntimeError(
                f"async_worker_limit({n}) came after the default runtime was made with "
                f"{_default.workers} workers; call it before the first async_* call"
            )
        _worker_limit = n


def async_create(
    callback: Callable[[AsyncOperation[Any], Any], Any],
    context: Any = None,
    *,
    parent: AsyncOperation[Any] | None = None,
) -> AsyncOperation[Any]:
    """Make a CREATED operation that will run ``callback(operation, context)``."""
    return default_runtime().create(callback, context, parent=parent)


def _operation(op: object, call: str) -> AsyncOperation:
    """Return ``op`` if it is an operation; raise TypeError naming ``call`` if not."""
    if not isinstance(op, AsyncOperation):
        raise TypeError(
            f"{call}(op) needs an AsyncOperation, got {type(op).__name__}; "
            "pass an operation made by async_create() or spawn()"
        )
    return op


def async_submit(op: AsyncOperation[V]) -> AsyncOperation[V]:
    """Queue a CREATED operation on its runtime; returns it.

    Raises:
        TypeError: ``op`` is not an operation.
    """
    return _operation(op, "async_submit").runtime.submit(op)


def async_cancel(op: AsyncOperation[Any], *, grace: float | None = None) -> None:
    """Cancel an operation and its subtree (see ``AsyncOperation.cancel``).

    With ``grace``, the subtree is first asked to stop, and cancelled after
    ``grace`` seconds if it still runs.

    Raises:
        TypeError: ``op`` is not an operation, or ``grace`` not a number.
        ValueError: ``grace`` is NaN or negative.
    """
    _operation(op, "async_cancel").cancel(grace=grace)


def async_await(op: AsyncOperation[V], timeout: float | None = None) -> AsyncResult[V]:
    """Block until the operation ends and return its ``AsyncResult``.

    The same wait as ``op.wait(timeout)``: a cancellation point when called
    from inside an operation, and ``math.inf`` or None wait without limit.

    Raises:
        TimeoutError: the operation had not ended after ``timeout`` seconds.
        TypeError: ``op`` is not an operation, or ``timeout`` not a number.
        ValueError: ``timeout`` is NaN.
        Cancelled: the calling operation was cancelled while it waited.
        RuntimeError: ``op`` was never submitted, so it could never end.
    """
    _operation(op, "async_await")
    if timeout is not None:
        check_timeout(timeout, "async_await(timeout=...)")  # named as the call the user made
    if op.state is OperationState.CREATED:
        raise RuntimeError(
            f"async_await() on operation {op.name!r}, which was never submitted, would "
            "wait forever; call async_submit(op) first"
        )
    return op.wait(timeout)


def async_result(op: AsyncOperation[V]) -> AsyncResult[V]:
    """Return the operation's result now: a snapshot if it has not ended.

    Raises:
        TypeError: ``op`` is not an operation.
    """
    return _operation(op, "async_result")._snapshot(observe=True)


def async_state(op: AsyncOperation[Any]) -> OperationState:
    """Return the operation's current state.

    Raises:
        TypeError: ``op`` is not an operation.
    """
    return _operation(op, "async_state").state
