"""Iterative walks over the operation tree.

Trees can be 100,000 levels deep, far past Python's recursion limit, so no
walk in asyncop recurses: each keeps an explicit stack. The cancel walk,
which must also respect shields and skip cancelled subtrees, lives on the
node itself (``AsyncOperation._cancel_locked``); this module has the plain
pre-order walk that ``dump()`` and the tests use.

Callers hold the runtime lock, or accept a tree that changes under them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._node import AsyncOperation

__all__ = ["walk"]


def walk(roots: Iterable[AsyncOperation]) -> Iterator[tuple[AsyncOperation, int]]:
    """Yield ``(node, depth)`` for every live node below ``roots``, pre-order.

    Children come in the order they were added, and the roots in the order
    given; depth 0 is a root.
    """
    stack: list[tuple[AsyncOperation, int]] = [(op, 0) for op in reversed(list(roots))]
    while stack:
        node, depth = stack.pop()
        yield node, depth
        kids: list[AsyncOperation] = []
        child = node.first_child
        while child is not None:
            kids.append(child)
            child = child.sibling_next
        stack.extend((kid, depth + 1) for kid in reversed(kids))
