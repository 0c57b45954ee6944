"""The wait-for graph of a runtime: who waits on what, and where.

What the deadlock report shows (``_deadlock.py``): the live tree, one line
per operation, indented as ``dump()`` indents it, and for each one that
waits, what it waits on and the user's line where it waits::

    task 'main' at app.py:31 waits on operation 'consumer' [RUNNING]
      task 'consumer' at app.py:14 waits on receive from channel 'jobs' (0 sender ends open)
    thread 'MainThread' at app.py:40 waits in run() for operation 'main'

- a coroutine task: the events of its wait, described as ``dump()``
  describes them (an event, a lock and its holder, a channel end and how
  many ends of the other side are open, an operation, a condition, a
  semaphore or capacity limiter), at its innermost frame outside asyncop;
- a sync callback, or a sync scope's block: what its thread waits on in a
  blocking call (``ThreadState.waits_on``), at the thread's innermost
  frame outside asyncop;
- last, the threads outside the runtime that wait for its tree
  (``run()``, ``shutdown()``, ``op.wait()``).

It also counts the waits that something could end other than a cancel:
a tree whose every wait is ``sleep_forever()`` or a thread's
``token.wait()`` (or an operation's or a scope's end, which come down to
those) waits for Ctrl-C on purpose, and is not reported. An event says it
ends by a cancel alone with a true ``ends_by_cancel`` attribute.

Built under the runtime lock, like ``dump()``; it reads the primitives
without their mutexes (the lock order forbids taking one here), so it is a
snapshot whose parts may be a moment apart.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

from ..operations import AsyncOperation, OpKind, TreeWait, every_thread_state, walk
from ._core._awaitables import OpWait
from ._core._scope_task import ScopeDone
from ._core._waker import WakerStatus, describe_event
from ._introspect import owner_of
from ._primitives._names import site_of_frame, site_text
from ._primitives._waiters import ThreadWaiter

if TYPE_CHECKING:
    from ..operations import ThreadState
    from ._core._kernel import Kernel

__all__ = ["WaitGraph", "tree_wait", "wait_graph_locked", "waits_for_tree"]

# Levels the report indents; deeper lines show their depth instead.
_INDENT = 32


class WaitGraph:
    """The report's lines, and how many waits something other than a cancel could end."""

    __slots__ = ("awaits", "lines", "rests", "waits")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.waits = 0
        # The operations each task awaits (``await op``), and the tasks whose
        # wait ends by a cancel alone in itself (``sleep_forever()``, say).
        self.awaits: dict[AsyncOperation, list[AsyncOperation]] = {}
        self.rests: set[AsyncOperation] = set()

    def text(self) -> str:
        return "\n".join(self.lines)

    def circular(self) -> bool:
        """Whether a task awaits operations that come down to nothing but a cycle.

        A wait for an operation ends when that operation's tree does; it is
        on purpose only if that tree rests, in the end, on a wait that ends
        by a cancel alone. Tasks that await one another (``a`` awaits ``b``,
        which awaits ``a``) rest on nothing: they are stuck, not idle.
        """
        settled: dict[AsyncOperation, bool] = {}

        def rests_on_purpose(task: AsyncOperation) -> bool:
            if task in self.rests:
                return True
            known = settled.get(task)
            if known is not None:
                return known
            settled[task] = False  # (met again on the way: a cycle)
            answer = any(
                rests_on_purpose(node)
                for target in self.awaits.get(task, ())
                for node, _ in walk([target])
            )
            settled[task] = answer
            return answer

        try:
            return not all(rests_on_purpose(task) for task in self.awaits)
        except RecursionError:  # a chain of awaits too long to follow: say nothing
            return False


def tree_wait(state: ThreadState) -> tuple[str, AsyncOperation] | None:
    """``(call, operation)`` if a blocked thread waits for an operation's tree to end.

    ``run()``, ``shutdown()``, a scope's exit, ``start()`` (a ``TreeWait``,
    on an Event's ``_purpose`` for ``start()``), and ``op.wait()`` without
    a timeout (marked with the operation itself).
    """
    what = state.waits_on
    if type(what) is ThreadWaiter:
        what = getattr(what.what, "_purpose", None)
    if type(what) is TreeWait:
        return what.call, what.op
    if type(what) is AsyncOperation:
        return "op.wait()", what
    return None


def waits_for_tree(state: ThreadState, runtime: Kernel) -> bool:
    """Whether a thread blocked in asyncop waits for ``runtime``'s tree to end.

    Such a thread goes on only once the tree has moved: it cannot wake a task.
    """
    wait = tree_wait(state)
    return wait is not None and owner_of(wait[1]) is runtime


def _ends_by_cancel(event: object) -> bool:
    if type(event) is OpWait or type(event) is ScopeDone or type(event) is AsyncOperation:
        return True  # it comes down to the waits of that operation's tree
    try:
        return getattr(event, "ends_by_cancel", False) is True
    except Exception:  # a user's event whose __getattr__ raises
        return False


def _where_thread(frames: dict[int, Any], ident: int | None) -> str:
    site = site_of_frame(frames.get(ident) if ident is not None else None)
    return "" if site[0] is None else f" at {site_text(site)}"


def _task_line(op: AsyncOperation, graph: WaitGraph) -> str:
    task = op._task
    if task.coro is None:
        return f"task {op.name!r} has returned; it waits for its children to end"
    if task.status is not WakerStatus.WAITING:
        return f"task {op.name!r} is {task.status.name}"
    events = [sub.event for sub in list(task.events or ())]
    # (A scope's end is its children's: they say where they wait.)
    shield = "" if events and type(events[0]) is ScopeDone else _shield_above(task.current)
    for event in events:
        if type(event) is OpWait and owner_of(event.op) is owner_of(op):
            graph.awaits.setdefault(op, []).append(event.op)
        elif not _ends_by_cancel(event):
            graph.waits += 1
        elif type(event) is ScopeDone:
            pass
        elif shield and type(event) is not OpWait and type(event) is not AsyncOperation:
            graph.waits += 1  # it waits for a cancel, and no cancel can reach it
        else:
            graph.rests.add(op)
    what = ", ".join(describe_event(event) for event in events) or "?"
    point = task.suspension_point()
    where = f" at {point[0]}:{point[1]}" if point else ""
    if shield:
        what += f" inside {shield}, which keeps every cancel and request to stop out"
    return f"task {op.name!r}{where} waits on {what}"


def _shield_above(node: AsyncOperation | None) -> str:
    """The innermost shielded scope (or task) from ``node`` up, described; ``""`` if none.

    A cancel from above (Ctrl-C's, a deadlock's, a grace's end) stops there,
    and so does a request to stop.
    """
    while node is not None:
        if node._shield:
            kind = "shielded scope" if node._kind is OpKind.SCOPE else "shielded task"
            return f"{kind} {node.name!r}"
        node = node.parent
    return ""


def _thread_line(
    kind: str,
    op: AsyncOperation,
    thread: tuple[str, int | None, Any],
    graph: WaitGraph,
    frames: dict[int, Any],
) -> str:
    name, ident, state = thread
    where = _where_thread(frames, ident)
    if state is None or not state.blocked:
        return f"{kind} {op.name!r} on thread {name!r}{where} runs"
    what = state.waits_on
    if what is None:
        graph.waits += 1
        return f"{kind} {op.name!r} on thread {name!r}{where} waits in a blocking call"
    if type(what) is not TreeWait and not _ends_by_cancel(what):
        graph.waits += 1
    else:
        graph.rests.add(op)  # (a thread's op.wait(): left to the thread)
    text = f"operation {what.name!r}" if type(what) is AsyncOperation else describe_event(what)
    return f"{kind} {op.name!r} on thread {name!r}{where} waits on {text}"


def wait_graph_locked(runtime: Kernel) -> WaitGraph:
    """The wait-for graph of ``runtime``'s live tree; under the runtime lock."""
    graph = WaitGraph()
    frames = sys._current_frames()
    # The thread that runs each sync callback or sync scope block.
    threads: dict[AsyncOperation, tuple[str, int | None, Any]] = {}
    for worker in runtime._workers:
        item = worker.item
        if item is not None and item._kind is OpKind.SYNC and worker.handle is not None:
            threads[item] = (worker.handle.name, worker.handle.ident, worker.thread_state)
    outside: list[tuple[int, ThreadState]] = []
    # (threading.enumerate() takes threading's own lock only: safe under ours.)
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    for ident, state in every_thread_state():
        op = state.op
        if op is not None and op._kind is OpKind.SCOPE and op not in threads:
            threads[op] = (names.get(ident, f"{ident}"), ident, state)
        elif state.worker is None and state.blocked and waits_for_tree(state, runtime):
            outside.append((ident, state))
    for op, depth in walk(runtime._roots):
        indent = "  " * min(depth, _INDENT) + (f"(depth {depth}) " if depth > _INDENT else "")
        graph.lines.append("  " + indent + _op_line(op, threads, graph, frames))
    for ident, state in outside:
        wait = tree_wait(state)
        if wait is not None:
            where = _where_thread(frames, ident)
            graph.lines.append(
                f"  thread {names.get(ident, ident)!r}{where} waits in {wait[0]} "
                f"for operation {wait[1].name!r}"
            )
    return graph


def _op_line(
    op: AsyncOperation, threads: dict[AsyncOperation, Any], graph: WaitGraph, frames: dict[int, Any]
) -> str:
    task = op._task
    if task is not None and task.task is op:
        return _task_line(op, graph)
    thread = threads.get(op)
    if op._kind is OpKind.SYNC:
        if thread is None:
            return f"callback {op.name!r} [{op.state.name}]"
        return _thread_line("callback", op, thread, graph, frames)
    if op._kind is OpKind.SCOPE:
        if task is not None:
            return f"scope {op.name!r} in task {task.task.name!r}"
        if thread is not None:
            return _thread_line("scope", op, thread, graph, frames)
        return f"scope {op.name!r} waits at its exit for its children"
    return f"operation {op.name!r} [{op.state.name}]"
