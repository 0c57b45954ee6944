"""Remember every operation of a load, so the view can show the ones that ended too.

The live tree only holds operations that have not ended: a child that ends
unlinks itself from its parent, so ``op.children()`` forgets it. To show
the whole story (which fetches completed, which were cancelled), the loader
spawns its operations through an ``OpRecorder``, which keeps a ``Node`` for
each one: the operation itself (for its name and live ``state``), its child
nodes, and when its code started and stopped running.

``spawn_root`` spawns a top-level operation on a runtime. ``spawn`` spawns a
child of the operation whose code calls it: the recorder finds the caller's
node through a context variable, which asyncop copies into every operation
it makes, so no lookup table is needed and no spawn can race its parent's
registration.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

import asyncop

__all__ = ["Node", "OpRecorder", "Row"]

T = TypeVar("T")

_current_node: ContextVar[Node] = ContextVar("page_loader_current_node")


@dataclass(eq=False)
class Node:
    """One recorded operation and its recorded children."""

    name: str
    op: asyncop.AsyncOperation | None = None  # set once spawn() returns
    started_at: float | None = None  # when its code began to run
    ended_at: float | None = None  # when its code finished (returned, raised, cancelled)
    children: list[Node] = field(default_factory=list)

    def seconds(self, now: float) -> float | None:
        """How long the operation's code has run, or None if it never started."""
        if self.started_at is None:
            return None
        end = self.ended_at if self.ended_at is not None else now
        return end - self.started_at


@dataclass(frozen=True)
class Row:
    """One line of a tree snapshot: a node's place, name, state and running time."""

    depth: int
    path: str  # names from the root, joined with "/": unique within a load
    name: str
    state: asyncop.OperationState
    seconds: float | None


class OpRecorder:
    """Spawns a load's operations and keeps a ``Node`` for each of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roots: list[Node] = []
        self.started_at = time.monotonic()

    def spawn_root(
        self,
        runtime: asyncop.Runtime,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        name: str,
    ) -> asyncop.AsyncOperation:
        """Spawn ``fn(*args)`` as a top-level coroutine operation of ``runtime``."""
        node = Node(name)
        with self._lock:
            self._roots.append(node)
        node.op = runtime.spawn(_run_recorded, node, fn, args, name=name)
        return node.op

    def spawn(
        self, fn: Callable[..., Awaitable[T]], *args: Any, name: str
    ) -> asyncop.AsyncOperation:
        """Spawn ``fn(*args)`` as a child of the calling operation.

        Raises:
            RuntimeError: the caller is not an operation this recorder spawned.
        """
        parent_op = asyncop.current_operation()
        parent = _current_node.get(None)
        if parent_op is None or parent is None:
            raise RuntimeError(
                f"OpRecorder.spawn({name!r}) must be called from an operation that the "
                "recorder spawned; use spawn_root() for the first one"
            )
        node = Node(name)
        with self._lock:
            parent.children.append(node)
        node.op = parent_op.spawn(_run_recorded, node, fn, args, name=name)
        return node.op

    def rows(self) -> list[Row]:
        """A snapshot of the recorded tree, depth first, in spawn order."""
        now = time.monotonic()
        rows: list[Row] = []
        with self._lock:
            stack = [(node, 0, "") for node in reversed(self._roots)]
            while stack:
                node, depth, prefix = stack.pop()
                if node.op is None:
                    continue  # spawn() has not returned yet: show it next tick
                path = f"{prefix}/{node.name}" if prefix else node.name
                rows.append(Row(depth, path, node.name, node.op.state, node.seconds(now)))
                stack.extend((child, depth + 1, path) for child in reversed(node.children))
        return rows

    def nodes(self) -> list[Node]:
        """Every recorded node, depth first, in spawn order."""
        with self._lock:
            found: list[Node] = []
            stack = list(reversed(self._roots))
            while stack:
                node = stack.pop()
                found.append(node)
                stack.extend(reversed(node.children))
        return found


async def _run_recorded(node: Node, fn: Callable[..., Awaitable[T]], args: tuple[Any, ...]) -> T:
    """The code of every recorded operation: time ``fn(*args)`` and run it.

    Setting the context variable here, inside the operation, makes ``node``
    the parent of whatever ``fn`` spawns through the recorder.
    """
    _current_node.set(node)
    node.started_at = time.monotonic()
    try:
        return await fn(*args)
    finally:
        node.ended_at = time.monotonic()
