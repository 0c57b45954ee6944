"""Stop requests: the gentle first half of a cancel with a grace period.

``op.cancel(reason, grace=G)`` first *asks* the subtree to stop, and
cancels it only when the grace runs out. The runtime keeps the requests
(``runtime._stop_requests``: operation -> request) and the timer that ends
each grace (see ``runtime/_grace.py``). Nothing in the tree is marked:
whether an operation was asked is read by walking up from it, so a child
spawned after the request sees it without any work at spawn time, and
nothing is left to undo when the request ends.

The rule, :func:`stop_requested_of`: an operation was asked to stop when it
is cancelled (a cancel is the firmest way to ask), or when it or one of its
ancestors has a stop request, looking no higher than the first shielded
operation on the way up, whose own request still counts. A shield keeps
the request out as it keeps out the cancel that the request announces:
shielded cleanup code is neither asked nor cancelled from above.

The walk reads ``parent`` links without the lock: the ancestors of an
operation that has not ended have not ended either (there are no orphans),
so its chain does not change under it; for one that has ended, the answer
no longer matters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..platform import check_grace

if TYPE_CHECKING:
    from ._node import AsyncOperation

__all__ = ["check_cancel_grace", "stop_requested_of"]


def stop_requested_of(op: AsyncOperation) -> bool:
    """Whether ``op`` was asked to stop: see the module docstring. Never blocks."""
    if op._cancelled:
        return True
    requests = op.runtime._stop_requests
    if not requests:
        return False
    node: AsyncOperation | None = op
    while node is not None:
        if node in requests:
            return True
        if node._shield:
            return False
        node = node.parent
    return False


def check_cancel_grace(grace: object, what: str) -> float | None:
    """The grace of a ``cancel(grace=...)``: None for never, else seconds (0: at once).

    Raises:
        TypeError: ``grace`` is not a real number (or is a bool).
        ValueError: ``grace`` is NaN or negative.
    """
    return check_grace(
        grace,
        what,
        "pass the seconds the work has to stop (0 to cancel at once, math.inf to only "
        "ask), or leave grace out to cancel at once",
    )
