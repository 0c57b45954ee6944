"""The pure-Python cost floor of spawn_join: the least scheduler that runs it.

``spawn_join`` asks how fast a scheduler spawns n coroutine tasks that
each await one checkpoint, and joins them. Part of every figure is what any
scheduler written in Python pays for that, whatever its design: a task
object, a context copy, a coroutine, two ``send`` calls with their
``StopIteration``, a ready queue. This module measures that part alone, so
the benchmark can tell it from what asyncop's semantics add.

``run_floor(n, locked=False)`` is a scheduler of about thirty lines, in one
thread, with the same shape of work as asyncop's spawn path:

- a slotted task per child, linked into and unlinked from its parent's
  child list in O(1), with a copy of the context it was spawned in;
- a deque as the ready queue; each step runs ``coro.send`` in the task's
  context; a checkpoint puts the task at the back of the queue;
- the parent counts its live children, and the join ends at zero.

It has none of what a real runtime must do: no states or
transitions, no waker, no cancellation, no failure handling, no deadline,
no creation point, no wake-up of parked workers. With ``locked``, every
spawn, step and end also takes and releases a lock, as a queue shared by
worker threads must: the difference between the two is the price of
threads alone.
"""

from __future__ import annotations

import contextvars
import threading
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from typing import Any

from ._coro_common import WARMUP, Counter, expect
from ._registry import Metrics
from ._timing import Stopwatch

__all__ = ["run_floor"]


class _Checkpoint:
    """``await CHECKPOINT`` yields once to the scheduler."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        yield None


_CHECKPOINT = _Checkpoint()


class _Task:
    __slots__ = ("coro", "ctx", "next", "parent", "prev")

    def __init__(self, coro: Coroutine[Any, Any, Any], parent: _Parent) -> None:
        self.coro = coro
        self.ctx = contextvars.copy_context()
        self.parent = parent
        self.prev: _Task | None = None
        self.next = parent.first_child
        if self.next is not None:
            self.next.prev = self
        parent.first_child = self
        parent.live += 1


class _Parent:
    __slots__ = ("first_child", "live")

    def __init__(self) -> None:
        self.first_child: _Task | None = None
        self.live = 0


def _spawn_and_join(n: int, locked: bool, bump: Callable[[], int]) -> None:
    ready: deque[_Task] = deque()
    lock = threading.Lock()
    parent = _Parent()

    async def child() -> None:
        await _CHECKPOINT
        bump()

    for _ in range(n):
        task = _Task(child(), parent)
        if locked:
            lock.acquire()
            ready.append(task)
            lock.release()
        else:
            ready.append(task)
    pop, push = ready.popleft, ready.append
    while ready:
        task = pop()
        if locked:
            lock.acquire()
            lock.release()
        try:
            task.ctx.run(task.coro.send, None)
        except StopIteration:
            if locked:
                lock.acquire()
            prev, nxt = task.prev, task.next
            if prev is None:
                parent.first_child = nxt
            else:
                prev.next = nxt
            if nxt is not None:
                nxt.prev = prev
            task.prev = task.next = None
            parent.live -= 1
            if locked:
                lock.release()
        else:
            if locked:
                lock.acquire()
            push(task)
            if locked:
                lock.release()
    expect(parent.live == 0 and parent.first_child is None, "the floor left a child linked")


def run_floor(n: int, locked: bool = False) -> Metrics:
    """Spawn and join ``n`` checkpointing children on the floor scheduler."""
    ran = Counter()
    _spawn_and_join(WARMUP, locked, ran.bump)
    with Stopwatch() as watch:
        _spawn_and_join(n, locked, ran.bump)
    expect(ran.value() == n + WARMUP, "not every child ran to its end")
    return watch.metrics()
