"""What a shutdown waits for, and saying so.

``Runtime.shutdown()`` waits for the live tree to end before it joins the
threads. A wait that drags on is where users ask "what is it waiting
for?", so the wait answers in its log lines (``asyncop`` logger):

- with a grace, one INFO line as it asks the roots to stop, and one
  WARNING per root still running when the grace runs out, naming what it
  cancels then;
- every ``REPORT_EVERY`` seconds of waiting, one WARNING naming what it
  still waits for;
- one WARNING when ``timeout`` passes first, naming what is left running.

Each name is a line of ``dump()`` (name, state, where it was made, whether
it is cancelling or asked to stop, and what a parked task waits on, where),
after its kind: the work still running its own code, not the operations
that only wait for their children. A shutdown whose timeout passes also
cancels, at once, work it had only asked to stop: nothing is left asked
but never cancelled when the threads are told to stop.

A shutdown called from what it would wait for (a worker of the runtime,
its host asyncio loop, a ``spawn_blocking`` thread, a scope's block) is
refused at once (``refuse_shutdown_from_inside``).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from ..operations import (
    AsyncOperation,
    OperationState,
    OpKind,
    TreeWait,
    check_cancel_grace,
    thread_state,
    walk,
)
from ._grace import request_stop
from ._snapshot import describe_locked

if TYPE_CHECKING:
    from ._scheduler import Runtime

__all__ = [
    "REPORT_EVERY",
    "ask_roots",
    "check_shutdown_grace",
    "refuse_shutdown_from_inside",
    "wait_for_roots",
    "waited_for",
]

logger = logging.getLogger("asyncop")

#: Seconds between two log lines of a shutdown that is still waiting.
REPORT_EVERY = 5.0
#: The most operations one log line names; the rest are counted.
MAX_NAMED = 8

_INF = float("inf")
_KINDS = {
    OpKind.CORO: "task",
    OpKind.SYNC: "callback",
    OpKind.SCOPE: "scope block",
    OpKind.REMOTE: "remote job",
}


def check_shutdown_grace(name: str, cancel: bool, grace: object) -> float | None:
    """The grace of ``shutdown(grace=...)``: None to cancel at once, else seconds (inf: only ask).

    Raises:
        TypeError: ``grace`` is not a number or None.
        ValueError: ``grace`` is NaN or negative, or comes with ``cancel=False``.
    """
    if grace is None:
        return None
    seconds = check_cancel_grace(grace, f"Runtime {name!r}.shutdown(grace=...)")
    if not cancel:
        raise ValueError(
            f"Runtime {name!r}.shutdown(cancel=False, grace=...) would ask the work to "
            "stop and then never cancel it; pass cancel=True with the grace (grace=math.inf "
            "only asks), or leave grace out to wait for the work as it is"
        )
    if seconds == 0.0:
        return None
    return _INF if seconds is None else seconds


def ask_roots(runtime: Runtime, roots: list[AsyncOperation], grace: float) -> None:
    """Ask every root to stop, cancelling what still runs after ``grace`` seconds.

    A root made but never submitted is cancelled at once: a closing
    runtime refuses its submit, so it would only hold the wait up.
    """
    asked = 0
    for root in roots:
        if root.state is OperationState.CREATED and root._kind is not OpKind.SCOPE:
            root.cancel("runtime shut down")
            continue
        request = request_stop(runtime, root, "runtime shut down", grace)
        if request is not None:
            request.on_expire = _announce_expiry
            asked += 1
    if asked:
        logger.info(
            "asyncop: shutdown of runtime %r asked %d operation tree%s to stop; what "
            "still runs in %g s is cancelled",
            runtime.name,
            asked,
            "" if asked == 1 else "s",
            grace,
        )


def _announce_expiry(root: AsyncOperation) -> None:
    runtime: Runtime = root.runtime  # type: ignore[assignment]
    logger.warning(
        "asyncop: the grace of the shutdown of runtime %r ran out; cancelling %s",
        runtime.name,
        _summary(waited_for(runtime, [root])),
    )


def wait_for_roots(runtime: Runtime, roots: list[AsyncOperation], end: float | None) -> bool:
    """Wait until every root has ended, or until ``end`` (``time.monotonic()``).

    Logs what it waits for every ``REPORT_EVERY`` seconds, and what is
    left when ``end`` comes first (unless it was not meant to wait at all).
    Returns whether every root ended. Not a cancellation point; a
    KeyboardInterrupt propagates, for the caller's Ctrl-C rule.
    """
    started = time.monotonic()
    report_at = started + REPORT_EVERY
    for root in roots:
        while True:
            until = report_at if end is None else min(end, report_at)
            if root._block_until_final(
                max(0.0, until - time.monotonic()), None, TreeWait(root, "shutdown()")
            ):
                break
            now = time.monotonic()
            if end is not None and now >= end:
                if end > started:
                    logger.warning(
                        "asyncop: shutdown of runtime %r stopped waiting after %.1f s; "
                        "still running: %s",
                        runtime.name,
                        now - started,
                        _summary(waited_for(runtime, roots)),
                    )
                return False
            if now >= report_at:
                logger.warning(
                    "asyncop: shutdown of runtime %r has waited %.1f s for: %s",
                    runtime.name,
                    now - started,
                    _summary(waited_for(runtime, roots)),
                )
                report_at = now + REPORT_EVERY
    return True


def waited_for(runtime: Runtime, roots: list[AsyncOperation]) -> list[str]:
    """One line per operation below ``roots`` whose own work still runs, as ``dump()`` shows it.

    An operation whose own work has ended and that only waits for its
    children is left out (its children are named), and so is a scope
    opened by work that still runs (that work is named, with what it
    waits on).
    """
    lines: list[str] = []
    with runtime._lock:
        for op, _depth in walk(roots):
            if op.done or op._outcome is not None or _opened_by_running_work(op):
                continue
            lines.append(f"{_KINDS[op._kind]} {describe_locked(runtime, op)}")
    return lines


def _opened_by_running_work(op: AsyncOperation) -> bool:
    """Whether ``op`` is a scope that a task or callback still running opened.

    A scope's parent is the operation whose code opened it (or the scope
    it was opened in): the first ancestor that is not a scope.
    """
    if op._kind is not OpKind.SCOPE:
        return False
    node = op.parent
    while node is not None and node._kind is OpKind.SCOPE:
        node = node.parent
    return node is not None and node._outcome is None


def _summary(lines: list[str]) -> str:
    if not lines:
        return "nothing (the last operations are ending)"
    named = "; ".join(lines[:MAX_NAMED])
    more = len(lines) - MAX_NAMED
    return named if more <= 0 else f"{named}; and {more} more"


def refuse_shutdown_from_inside(runtime: Runtime) -> None:
    """Raise if the calling thread is part of what shutdown() waits for."""
    me = threading.get_ident()
    with runtime._lock:
        workers = list(runtime._workers)
    for worker in workers:
        if worker.handle is not None and worker.handle.ident == me:
            raise RuntimeError(
                f"Runtime {runtime.name!r}.shutdown() was called from its own worker "
                "thread, which it would have to join; call it from outside the runtime"
            )
    host = runtime._asyncio_host
    if host is not None and host.runs_on_current_thread():
        raise RuntimeError(
            f"Runtime {runtime.name!r}.shutdown() was called on its host asyncio loop, "
            "whose thread it would have to join; call it from outside the runtime"
        )
    if runtime._blocking.runs_on_current_thread():
        raise RuntimeError(
            f"Runtime {runtime.name!r}.shutdown() was called from one of its "
            "spawn_blocking threads, whose task it would wait for forever; call it "
            "from outside the runtime, or cancel the work with op.cancel() instead"
        )
    running = thread_state().running()
    if running is not None and running.runtime is runtime:
        raise RuntimeError(
            f"Runtime {runtime.name!r}.shutdown() was called inside the block of scope "
            f"{running.name!r}, which it would wait for forever; call it after the "
            "with-block, or cancel the scope with scope.cancel() instead"
        )
