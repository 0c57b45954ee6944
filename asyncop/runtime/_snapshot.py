"""What ``Runtime.snapshot()`` returns, and the text ``Runtime.dump()`` makes of it.

A snapshot is plain data (dicts, lists, strings, numbers, None), so that it
pickles, compares in tests and goes through ``json.dumps`` unchanged: the
console (``_console.py``) sends exactly this to ``python -m asyncop``.
It is read under the runtime's lock in one walk of the tree, so its rows
agree with each other at one instant; nothing in it refers back to a live
object. ``dump()`` renders its text from a snapshot, so the two never
disagree.

The runtime's fields
--------------------
``name``, ``pid``, ``state`` (``running``, ``closing``, ``stopped``),
``clock`` (``monotonic`` or ``virtual``), ``now`` (the runtime's clock, the
one deadlines are on), ``time`` (``time.time()``), ``workers``,
``max_threads``, ``parallel``, ``threads`` (counts) and ``threads_text``
(the line ``dump()`` ends with), ``warnings`` (sentences: slow steps, work
held at ``max_threads``, a stuck runtime the deadlock watch reported until
it moves again), and ``operations``, the rows, pre-order.

One row per live operation
--------------------------
``id`` (an int, unique among the live rows and stable while the operation
lives), ``parent`` (the parent's ``id`` or None), ``depth``, ``name``,
``kind``, ``state`` (an ``OperationState`` name), ``where`` (``file:line``
where it was made), ``waiting_on`` and ``waiting_at`` (what a parked task
or a remote job waits on, and the line of its ``await``; None otherwise),
``on_thread`` (the thread running it at this instant, or None),
``cancelling`` and ``cancel_reason``, ``stop`` (for one asked to stop by
``cancel(grace=...)``: the reason and when the grace ends, or None),
``deadline`` (on the runtime's clock)
and ``deadline_in_s``, ``shield``, ``warnings``, and the statistics
``steps``, ``busy_s``, ``cpu_s`` and ``age_s`` (None where unknown).

``kind`` is ``task`` (an ``async def``), ``callback`` (a plain function on a
worker), ``scope``, ``process`` (a ``ProcessExecutor`` job), ``cluster`` (a
Dask job), or ``blocking call``: a ``spawn_blocking`` call in flight, which
is no operation but has a row of its own under the task that awaits it, so
that a console shows how long it has run.
"""

from __future__ import annotations

import math
import os
import time
from typing import TYPE_CHECKING, Any

from ..operations import AsyncOperation, OpKind, safe_str, walk
from ._core._blocking import Blocking
from ._core._monitor import current_line
from ._core._waker import WakerStatus, describe_event
from ._core._worker import monotonic
from ._grace import describe_stop_locked

if TYPE_CHECKING:
    from ._core._kernel import Kernel
    from ._core._task import TaskState
    from ._core._worker import Worker

__all__ = ["DUMP_INDENT", "describe_locked", "describe_wait", "render_dump", "take_snapshot"]

# Levels of the tree dump() indents; deeper nodes show their depth instead.
DUMP_INDENT = 32

_KINDS = {
    OpKind.CORO: "task",
    OpKind.SYNC: "callback",
    OpKind.SCOPE: "scope",
    OpKind.REMOTE: "remote",
}

Row = dict[str, Any]


def take_snapshot(runtime: Kernel) -> dict[str, Any]:
    """Read the runtime's state and its live tree as plain data; see the module docstring.

    Takes the runtime's lock for one walk of the tree; never raises for a
    user's object whose ``str()`` raises. Not a cancellation point.
    """
    wall, mono = time.time(), monotonic()
    with runtime._lock:
        running = _running_locked(runtime, mono)
        now = runtime.now()
        rows: list[Row] = []
        for op, depth in walk(runtime._roots):
            row = _row_locked(runtime, op, depth, now)
            rows.append(row)
            if op._kind is OpKind.CORO and op._task is not None:
                rows.extend(_blocking_rows(op, row, mono))
        threads = _threads_locked(runtime)
        state = runtime._state.value
        held = bool(runtime._sync_ready) and len(runtime._workers) >= runtime._max_threads
        stuck = runtime._deadlocks.stuck_locked()
    warnings = _place_running(runtime, rows, running)
    if stuck is not None:
        warnings.append(stuck)
    warnings.extend(runtime._deadlocks.cycle_warnings())
    if held:
        warnings.append(
            f"sync callbacks wait for a worker: every one of max_threads="
            f"{runtime._max_threads} threads is busy"
        )
    return {
        "name": runtime.name,
        "pid": os.getpid(),
        "state": state,
        "clock": "virtual" if runtime._virtual else "monotonic",
        "now": now,
        "time": wall,
        "workers": runtime._target,
        "max_threads": runtime._max_threads,
        "parallel": runtime._parallel,
        "threads": threads,
        "threads_text": _threads_text(threads),
        "warnings": warnings,
        "operations": rows,
    }


def _row_locked(runtime: Kernel, op: AsyncOperation, depth: int, now: float) -> Row:
    """The row of one live operation."""
    parent = op.parent
    reason = op.cancel_reason
    deadline = op._deadline
    if deadline is not None and not math.isfinite(deadline):
        deadline = None
    waiting_on = waiting_at = None
    task = op._task
    if task is not None and task.task is op:
        try:
            wait = describe_wait(task)
        except Exception:  # a user's event whose _describe() raises
            wait = ("<an event whose description raised>", None)
        if wait is not None:
            waiting_on, waiting_at = wait
    kind = _KINDS[op._kind]
    if op._kind is OpKind.REMOTE and task is not None:
        kind = getattr(task, "kind", kind)
    cancelling = bool(op._cancelled) and not op.done
    return {
        "id": id(op),
        "parent": None if parent is None else id(parent),
        "depth": depth,
        "name": safe_str(op.name),
        "kind": kind,
        "state": op.state.name,
        "where": f"{op.filename}:{op.lineno}",
        "waiting_on": waiting_on,
        "waiting_at": waiting_at,
        "on_thread": None,
        "running_s": None,
        "cancelling": cancelling,
        "cancel_reason": None if reason is None or not cancelling else safe_str(reason),
        "stop": describe_stop_locked(runtime, op).strip() or None,
        "deadline": deadline,
        "deadline_in_s": None if deadline is None else deadline - now,
        "shield": op.shield,
        "warnings": [],
        **_stats(op, now),
    }


def describe_wait(task: TaskState) -> tuple[str, str | None] | None:
    """What a parked task waits on, and where (``file:line``); None when it is not parked."""
    waker = task
    if waker.status is not WakerStatus.WAITING:
        return None
    what = ", ".join(describe_event(sub.event) for sub in waker.events) or "?"
    point = task.suspension_point()
    return what, (f"{point[0]}:{point[1]}" if point else None)


def _stats(op: AsyncOperation, now: float) -> Row:
    """The statistics columns of a row, from ``op.stats``; ``now`` is the runtime's clock."""
    stats = op.stats
    cpu = stats.cpu_s
    return {
        "steps": stats.steps,
        "wakes": stats.wakes,
        "busy_s": stats.busy_s,
        "cpu_s": cpu if math.isfinite(cpu) else None,
        "age_s": max(0.0, now - stats.created_at),
    }


def _blocking_rows(op: AsyncOperation, row: Row, mono: float) -> list[Row]:
    """Rows for the ``spawn_blocking`` calls a parked task waits for."""
    rows: list[Row] = []
    task = op._task
    if task.status is not WakerStatus.WAITING:  # (woken: the call has ended)
        return rows
    for sub in list(task.events or ()):
        event = sub.event
        if not isinstance(event, Blocking):
            continue
        started = event.started_at
        cancelling = row["cancelling"] and event.cancellable
        rows.append(
            {
                **row,
                "id": id(event),
                "parent": row["id"],
                "depth": row["depth"] + 1,
                "where": row["waiting_at"] or row["where"],
                "name": safe_str(event._describe()),
                "kind": "blocking call",
                "state": "PENDING" if started is None else "RUNNING",
                "waiting_on": "a token of its CapacityLimiter" if started is None else None,
                "waiting_at": None,
                "cancelling": cancelling,
                "cancel_reason": row["cancel_reason"] if cancelling else None,
                "stop": None,
                "deadline": None,
                "deadline_in_s": None,
                "shield": False,
                "warnings": [],
                "steps": None,
                "wakes": None,
                "busy_s": None if started is None else mono - started,
                "cpu_s": None,
                "age_s": None if started is None else mono - started,
            }
        )
    return rows


# What runs on a worker at the snapshot's instant: the operation, the
# thread's name, how long it has run (None: not yet timed), the worker, and
# whether it is a coroutine step (not a callback).
_Running = tuple[AsyncOperation, str, float | None, "Worker", bool]


def _running_locked(runtime: Kernel, mono: float) -> list[_Running]:
    """The operations that workers run at this instant."""
    found = []
    monitor = runtime._monitor
    for worker in runtime._workers:
        op = worker.item
        handle = worker.handle
        if op is None or not worker.item_seq & 1 or handle is None:
            continue
        age = monitor.item_age(worker, mono)
        found.append((op, handle.name, age, worker, worker.stepping))
    return found


def _place_running(runtime: Kernel, rows: list[Row], running: list[_Running]) -> list[str]:
    """Mark the rows of running operations; returns the warnings about slow steps."""
    warnings = []
    by_id = {row["id"]: row for row in rows} if running else {}
    slow = runtime._monitor.slow_step
    for op, thread, age, worker, stepping in running:
        row = by_id.get(id(op))
        if row is None:
            continue
        row["on_thread"] = thread
        row["running_s"] = age
        if stepping and age is not None and age >= slow:
            # Read outside the lock: it walks the worker's stack.
            text = (
                f"task {row['name']!r} has run for {age:.2f} s without awaiting, "
                f"at {current_line(worker)}"
            )
            row["warnings"].append(text)
            warnings.append(text)
    return warnings


def _threads_locked(runtime: Kernel) -> dict[str, int]:
    """The thread counts of the runtime."""
    workers = runtime._workers
    extra = sum(1 for worker in workers if worker.extra and not worker.steps_only)
    stepper = 0 if runtime._stepper is None else 1
    return {
        "workers": len(workers) - extra - stepper,
        "extra": extra,
        "stepper": stepper,
        "parked": len(runtime._idle),
        "blocking": runtime._blocking.thread_count(),
        "max_threads": runtime._max_threads,
    }


def _threads_text(threads: dict[str, int]) -> str:
    """The thread counts as ``dump()`` shows them last."""
    steps = (
        " + 1 stepping tasks past the cap while every worker runs a callback"
        if threads["stepper"]
        else ""
    )
    return (
        f"threads: {threads['workers']} workers + {threads['extra']} extra of "
        f"max_threads={threads['max_threads']}{steps} ({threads['parked']} parked), "
        f"{threads['blocking']} blocking-call threads"
    )


# -- dump() ------------------------------------------------------------------------


def _indent(depth: int) -> str:
    if depth <= DUMP_INDENT:
        return "  " * depth
    return "  " * DUMP_INDENT + f"(depth {depth}) "


def describe_locked(runtime: Kernel, op: AsyncOperation) -> str:
    """One operation as ``dump()`` shows it, without its indent; the runtime lock is held."""
    return describe_row(_row_locked(runtime, op, 0, runtime.now()))


def describe_row(row: Row) -> str:
    """One operation as ``dump()`` shows it, without its indent."""
    if row["kind"] == "blocking call":
        text = f"{row['name']} [{row['state']}] blocking call"
        age = row["age_s"]
        return text + (f" for {age:.2f} s" if age is not None else " waiting for a token")
    text = f"{row['name']} [{row['state']}] {row['where']}"
    if row["cancelling"]:
        reason = row["cancel_reason"]
        text += " cancelling" + (f" ({reason})" if reason is not None else "")
    if row.get("stop"):
        text += f" {row['stop']}"
    if row["deadline"] is not None:
        text += f" deadline={row['deadline']:.3f}"
    if row["waiting_on"] is not None:
        text += f" waiting on {row['waiting_on']}"
        if row["waiting_at"] is not None:
            text += f" at {row['waiting_at']}"
    return text


def render_dump(snap: dict[str, Any]) -> str:
    """The text of ``Runtime.dump()`` for snapshot ``snap``."""
    threads = snap["threads_text"]
    rows = snap["operations"]
    lines = [f"{snap['name']}:" if rows else f"{snap['name']}: no live operations"]
    lines.extend("  " + _indent(row["depth"]) + describe_row(row) for row in rows)
    lines.extend(f"  warning: {text}" for text in snap["warnings"])
    lines.append("  " + threads)
    return "\n".join(lines)
