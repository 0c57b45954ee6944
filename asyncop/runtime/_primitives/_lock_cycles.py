"""Lock cycles: an acquire that would wait for itself through other holders.

::

    task a: holds lock x, acquires lock y      # waits: y is held by b
    task b: holds lock y, acquires lock x      # would close the cycle x -> a -> y -> b -> x

As a database does, the acquire that would close a cycle of holders and
waiters raises ``DeadlockError`` in its caller at once, naming the cycle
(each lock and its holder), instead of waiting forever; the waiters already
queued are untouched, and the caller's acquire leaves no trace (its waiter
is taken back out, so the lock is not handed to it later).

The check runs only when an acquire is about to wait: an uncontended
acquire never comes here. It follows the chain from the lock: its holder,
the lock that holder waits for, that lock's holder, and so on, until it
comes back to the caller (a cycle), or reaches a holder that waits for no
lock (ordinary contention). Each link is read without the other locks'
mutexes, so that no two mutexes are ever held together; the caller has
queued its own waiter before it looks, so of two acquires that close one
cycle at the same instant, at least one sees the other's wait.

A holder is a coroutine task (its ``TaskState``) or a thread. A task waits
for a lock when its one pending subscription is to a lock acquire (an
event whose ``lock`` has ``_cycle_link``); a wait that something else can end (a
``select`` with a timer, say) is no link. A thread waits for one when its
``ThreadState.waits_on`` is a pending waiter on a lock, which
``Lock.acquire`` sets before it queues that waiter.

The report gives each holder that waits the line where it waits (a
task's innermost frame outside asyncop, a thread's current one), and so
for the caller, the line of its acquire, as the deadlock report does.

``Runtime(deadlock="off")`` turns the check off for acquires made by its
tasks and operations, and for cycles that go through them.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from ...operations import DeadlockError, state_of
from .._core._task import TaskState
from .._core._waker import WakerStatus
from ._names import site_of_frame, site_text

__all__ = ["cycle_error", "holder_text"]

# Links followed at most: far more locks than any real cycle has.
_MAX_LINKS = 1000


def holder_text(owner: object) -> str:
    """Who holds a lock, for messages: ``task 'load'``, ``thread 'worker-2'``."""
    if isinstance(owner, TaskState):
        return f"task {owner.task.name!r}"
    if isinstance(owner, threading.Thread):
        state = state_of(owner.ident)
        op = None if state is None else state.op
        running = "" if op is None else f" running operation {op.name!r}"
        return f"thread {owner.name!r}{running}"
    return repr(owner)


def _lock_awaited_by(holder: object) -> Any:
    """The lock ``holder`` waits for right now, or None."""
    if isinstance(holder, TaskState):
        if holder.status is not WakerStatus.WAITING and holder.status is not WakerStatus.NO_STATUS:
            return None  # running after a wake, or queued: it waits for nothing
        events: Any = holder.events
        try:
            (sub,) = events  # (read while other threads may change it)
        except (TypeError, ValueError):
            return None  # no wait (None, or empty), or several: something else may end it
        lock = getattr(sub.event, "lock", None)
        if sub.generation != holder.generation or not getattr(lock, "_cycle_link", False):
            return None
        return lock
    if isinstance(holder, threading.Thread):
        state = state_of(holder.ident)
        waiter: Any = None if state is None else state.waits_on
        lock = getattr(waiter, "what", None)
        if not getattr(lock, "_cycle_link", False) or waiter.done:
            return None
        return lock
    return None


def _runtime_of(holder: object) -> Any:
    if isinstance(holder, TaskState):
        return holder.runtime
    if isinstance(holder, threading.Thread):
        state = state_of(holder.ident)
        op = None if state is None else state.op
        return None if op is None else op.runtime
    return None


def _checks_off(runtime: Any) -> bool:
    watch = getattr(runtime, "_deadlocks", None)
    return watch is not None and watch.off


def cycle_error(lock: Any, me: object, runtime: Any) -> DeadlockError | None:
    """The error for ``me`` acquiring ``lock``, if that would close a lock cycle.

    ``me`` is the acquiring task's ``TaskState`` or thread, whose waiter is
    queued on ``lock`` already; ``runtime`` is the caller's runtime (None
    for a plain thread). Returns None for ordinary contention.
    """
    if _checks_off(runtime):
        return None
    chain: list[tuple[Any, object]] = []
    seen: set[int] = set()
    current = lock
    for _ in range(_MAX_LINKS):
        holder = current._owner
        if holder is None:
            return None  # released meanwhile: the hand-over comes to us
        chain.append((current, holder))
        if holder is me:
            break
        if id(holder) in seen:
            return None  # a cycle we are not part of: not ours to break
        seen.add(id(holder))
        current = _lock_awaited_by(holder)
        if current is None:
            return None
    else:
        return None
    runtimes = [_runtime_of(holder) for _, holder in chain]
    if any(_checks_off(other) for other in runtimes):
        return None
    error = _error(lock, chain)
    # Shown in the snapshots (and ``top``) of each runtime the cycle runs through.
    for other in dict.fromkeys(candidate for candidate in [runtime, *runtimes] if candidate):
        watch = getattr(other, "_deadlocks", None)
        if watch is not None:
            watch.note_cycle(error)
    return error


def _waits_at(holder: object) -> str:
    """`` at file:line`` where ``holder`` waits, or nothing when that is unknown.

    Read without the holder's cooperation, as ``dump()`` reads it: a
    snapshot of a moment ago.
    """
    try:
        if isinstance(holder, TaskState):
            point = holder.suspension_point()
            return "" if point is None else f" at {point[0]}:{point[1]}"
        if isinstance(holder, threading.Thread) and holder.ident is not None:
            site = site_of_frame(sys._current_frames().get(holder.ident))
            return "" if site[0] is None else f" at {site_text(site)}"
    except Exception:  # a frame that went away meanwhile: leave the line out
        pass
    return ""


def _error(lock: Any, chain: list[tuple[Any, object]]) -> DeadlockError:
    me = chain[-1][1]
    lines: list[str] = []
    for index, (held, holder) in enumerate(chain):
        lines.append(f"{held._label()} is held by {holder_text(holder)}")
        if index + 1 < len(chain):
            lines.append(
                f"{holder_text(holder)}{_waits_at(holder)} waits for {chain[index + 1][0]._label()}"
            )
    # A task caller is suspended at its acquire by now, and a thread caller
    # runs this check itself: either way, the line is the acquire's.
    lines.append(
        f"{holder_text(me)} (the caller){_waits_at(me)} asks for {lock._label()}: the cycle closes"
    )
    report = "\n".join(f"  {line}" for line in lines)
    return DeadlockError(
        f"acquiring {lock._label()} would deadlock: {holder_text(me)} (the caller) would wait "
        f"for itself through a cycle of {len(chain)} lock{'s' if len(chain) > 1 else ''}; "
        "release the locks it holds before waiting, or take the locks in one order everywhere",
        report,
    )
