"""The seam between ``spawn`` and remote executors.

``spawn(fn, *args, executor=ex)`` hands the call to ``ex._spawn_into``,
which makes an ordinary operation of the tree whose work runs in ``ex``
(see ``asyncop.runtime._executors._remote``). The operations package knows executors
only by that method, so it imports nothing from the runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._hooks import RuntimeHooks
    from ._node import AsyncOperation

__all__ = ["spawn_remote"]


def spawn_remote(
    runtime: RuntimeHooks,
    parent: AsyncOperation | None,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    name: str | None,
    supervise: bool,
    executor: object,
    abandon: bool,
) -> AsyncOperation:
    """Make and submit an operation whose work runs in ``executor``."""
    spawn_into = getattr(executor, "_spawn_into", None)
    if spawn_into is None:
        if executor is None:
            raise TypeError(
                "spawn(..., abandon=True) applies to remote work only; pass executor=... "
                "as well, or use spawn_blocking(fn, abandon=True) for a thread"
            )
        raise TypeError(
            f"spawn(executor=...) needs an asyncop.ProcessExecutor or "
            f"asyncop.dask.DaskExecutor, got {type(executor).__name__}; make one of those"
        )
    op: AsyncOperation = spawn_into(
        runtime, parent, fn, args, name=name, supervise=supervise, abandon=abandon
    )
    return op
