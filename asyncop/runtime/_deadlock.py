"""The deadlock watch: telling that a runtime is stuck, and saying why.

::

    Runtime(deadlock="warn")   # the default: one WARNING per stuck spell
    Runtime(deadlock="raise")  # cancel the tree; run() raises DeadlockError
    Runtime(deadlock="off")    # neither, and no lock-cycle check either

A runtime is *stuck* when nothing that could wake a task is left:

- no step or callback runs or is queued, no blocking call
  (``spawn_blocking``, the asyncio bridge), process or remote job is in
  flight (``_outside_work``), no timer is armed, and no socket or pipe is
  watched (a process's exit and a signal come through one);
- no thread outside the runtime waits in one of its calls (a plain thread
  in ``event.wait()`` or ``channel.recv()`` may go on and set something),
  save those waiting for the tree itself (``run()``, ``shutdown()``, a
  scope's exit, ``op.wait()`` without a timeout), and no thread runs the
  block of one of its sync scopes;
- and that has lasted ``deadlock_after`` seconds, with no task queued and
  no item run meanwhile. On an autojumping virtual clock it is at once
  (one look of the monitor later), where the clock would have jumped had a
  timer been armed.

A thread that sleeps outside asyncop's calls (``time.sleep``, ``input()``)
cannot be seen, which is why the default only warns. A tree whose every
wait ends only by a cancel (``sleep_forever()``, and the operations and
scopes waiting for such) waits for Ctrl-C on purpose and is not reported;
tasks that await one another in a cycle rest on no such wait, and are.

Who looks
---------
The monitor (``_monitor.py``), at each of its looks and nowhere else, so
that the watch costs nothing on the workers' paths: under the runtime lock
it asks :meth:`DeadlockWatch.plan_locked` how long until the quiet spell it
sees would count, and sleeps no longer than that (it sleeps without a
timeout otherwise, as before); after each look it calls
:meth:`DeadlockWatch.look`, which decides once the spell has lasted. A
spell is known by a *stamp* (the queue's sequence number, the items the
workers have run, the number of workers): any work in between changes it,
and the spell starts again. Once a spell is decided (reported, or found
waiting on purpose), it is not looked at again until the stamp moves.

What it does
------------
It builds the wait-for graph (``_waitgraph.py``) under the runtime lock,
then, outside it, logs one WARNING on the ``asyncop`` logger with the
report, or (``"raise"``) records a :class:`DeadlockError` for each root and
cancels the roots; ``run()`` and a sync scope's exit take the error
(:meth:`DeadlockWatch.take_error`) and raise it bare instead of what the
cancel made of the tree. A root that nothing will raise the error for (one
made by ``runtime.spawn()`` and waited for with ``op.wait()``, or by nobody)
would end CANCELLED with the report lost: for those, the report is logged
as in ``"warn"``, saying which roots were cancelled.
"""

from __future__ import annotations

import enum
import logging
import math
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any, final

from ..operations import AsyncOperation, DeadlockError, every_thread_state
from ._core._monitor import TICK
from ._core._worker import monotonic
from ._introspect import owner_of
from ._waitgraph import tree_wait, wait_graph_locked, waits_for_tree

if TYPE_CHECKING:
    from ._core._kernel import Kernel

__all__ = ["DeadlockMode", "DeadlockWatch", "check_deadlock_args", "deadlock_error_for"]

logger = logging.getLogger("asyncop")

_INF = float("inf")
_Stamp = tuple[int, int, int]


class DeadlockMode(enum.Enum):
    """What a runtime does when it finds itself stuck: ``Runtime(deadlock=...)``."""

    WARN = "warn"
    RAISE = "raise"
    OFF = "off"


def check_deadlock_args(deadlock: object, deadlock_after: object) -> tuple[DeadlockMode, float]:
    """Check ``Runtime(deadlock=..., deadlock_after=...)``; the mode and the seconds."""
    if not isinstance(deadlock, str):
        raise TypeError(
            f"Runtime(deadlock=...) needs 'warn', 'raise' or 'off', got "
            f"{type(deadlock).__name__}; pass one of those strings"
        )
    try:
        mode = DeadlockMode(deadlock)
    except ValueError:
        raise ValueError(
            f"Runtime(deadlock={deadlock!r}) is not a mode; pass 'warn' (log the report), "
            "'raise' (cancel the tree and raise DeadlockError) or 'off'"
        ) from None
    if isinstance(deadlock_after, bool) or not isinstance(deadlock_after, (int, float)):
        raise TypeError(
            f"Runtime(deadlock_after=...) needs a number of seconds, got "
            f"{type(deadlock_after).__name__}; pass a number such as 1.0"
        )
    if math.isnan(deadlock_after) or deadlock_after < 0:
        raise ValueError(
            f"Runtime(deadlock_after={deadlock_after}) needs 0 or more seconds; pass how "
            "long a runtime must stay stuck before it counts, or math.inf never to count"
        )
    return mode, float(deadlock_after)


# The waits of a thread that raise the DeadlockError of the root they wait
# for (``take_error``): ``run()`` (``_interrupt.py``) and the exit of a
# sync scope's block (``_core/_scope.py``), as their ``TreeWait`` names them.
_RAISING_WAITS = frozenset({"run()", "the exit of its with-block"})

# How many lock cycles a runtime keeps, and for how long its snapshots show
# one: long enough for ``python -m asyncop top`` to show it for a while.
CYCLES_KEPT = 5
CYCLES_SHOWN_S = 60.0


@final
class DeadlockWatch:
    """One runtime's deadlock watch, driven by its monitor; see the module docstring."""

    def __init__(self, runtime: Kernel, mode: DeadlockMode, after: float) -> None:
        self.runtime = runtime
        self.mode = mode
        self.after = after
        # Read by the lock-cycle check (_lock_cycles.py).
        self.off = mode is DeadlockMode.OFF
        # How long a quiet spell must last: on an autojumping clock, one look.
        self._delay = TICK if runtime._autojump else after
        # While above 0, the runtime never counts as stuck: something this
        # module cannot see drives it (the pytest plugin between a test's
        # phases). Written under the runtime lock.
        self.holds = 0
        # The quiet spell being timed: since when (real time), and its stamp;
        # and the stamp of the last spell decided.
        self._since: float | None = None
        self._stamp: _Stamp | None = None
        self._settled: _Stamp | None = None
        # The headline of the stuck spell reported last (see stuck_locked).
        self._stuck: str | None = None
        # The error each root cancelled by "raise" leaves with.
        self._errors: weakref.WeakKeyDictionary[AsyncOperation, DeadlockError] = (
            weakref.WeakKeyDictionary()
        )
        # The roots whose error a caller will take without waiting in asyncop
        # (the pytest plugin): see claim().
        self._claimed: weakref.WeakSet[AsyncOperation] = weakref.WeakSet()
        # The lock cycles refused lately (real time, message), newest last.
        self._cycles: deque[tuple[float, str]] = deque(maxlen=CYCLES_KEPT)

    # -- the monitor's calls -------------------------------------------------------

    def plan_locked(self) -> float | None:
        """Seconds until the quiet spell seen now would count; None: nothing to time.

        Called by the monitor at each look, under the runtime lock.
        """
        if self.off or self.after == _INF or not self._quiet_locked():
            self._since = None
            return None
        stamp = self._stamp_locked()
        if stamp == self._settled:
            return None
        now = monotonic()
        if self._since is None or stamp != self._stamp:
            self._since, self._stamp = now, stamp
        return max(0.0, self._since + self._delay - now)

    def look(self) -> None:
        """Decide a quiet spell that has lasted: report it, or time it again.

        Called by the monitor after each look, outside the runtime lock.
        Never raises into the monitor (which logs what escapes anyway).
        """
        since = self._since
        if since is None or monotonic() < since + self._delay:
            return
        rt = self.runtime
        with rt._lock:
            if not self._quiet_locked():
                self._since = None
                return
            stamp = self._stamp_locked()
            if stamp != self._stamp or self._outside_can_act_locked():
                # Something moved, or may: time a new spell from now.
                self._since, self._stamp = monotonic(), stamp
                return
            self._since = None
            self._settled = stamp
            graph = wait_graph_locked(rt)
            if graph.waits == 0 and not graph.circular():
                return  # every wait ends by a cancel alone: waiting for Ctrl-C on purpose
            roots = list(rt._roots)
            taken = self._taken_locked(roots) if self.mode is DeadlockMode.RAISE else roots
        self._report(graph.text(), roots, taken)

    # -- what counts ------------------------------------------------------------

    def _quiet_locked(self) -> bool:
        """Whether nothing inside the runtime can wake a task now (cheap tests first)."""
        rt = self.runtime
        return bool(
            rt._roots
            and not (rt._ready or rt._woken or rt._sync_ready)
            and rt._outside_work == 0
            and self.holds == 0
            and not rt._stopping
            and rt._timers.next_deadline() is None
            and not rt._io_waiting()
            and rt._effectively_active_locked() == 0
        )

    def _stamp_locked(self) -> _Stamp:
        rt = self.runtime
        workers = rt._workers
        return rt._queue_seq, sum(worker.item_seq for worker in workers), len(workers)

    def _outside_can_act_locked(self) -> bool:
        """Whether a thread outside the runtime may still wake a task.

        One blocked in an asyncop call other than a wait for this tree, or
        one running the block of one of this runtime's sync scopes.
        """
        rt = self.runtime
        for _, state in every_thread_state():
            worker = state.worker
            if worker is not None and worker.runtime is rt:
                continue  # the runtime's own: counted by the tests above
            if state.blocked:
                if not waits_for_tree(state, rt):
                    return True
            elif state.op is not None and owner_of(state.op) is rt:
                return True  # a sync scope's block, running
        return False

    # -- reporting ----------------------------------------------------------------

    def _headline(self) -> str:
        rt = self.runtime
        spell = (
            "on a virtual clock with no timer to jump to"
            if rt._autojump
            else (f"for {self.after:g} s")
        )
        return (
            f"runtime {rt.name!r} is stuck {spell}: every task waits and nothing left can "
            "wake one (no step, callback, blocking call, process or remote job runs or is "
            "ready, no timer is armed, no socket is watched, and no thread outside the "
            "runtime waits in one of its calls); the report below shows each live "
            "operation, what it waits on and where"
        )

    def _taken_locked(self, roots: list[AsyncOperation]) -> list[AsyncOperation]:
        """The roots whose DeadlockError a caller will raise: ``run()``, a scope's exit."""
        waited = set()
        for _, state in every_thread_state():
            wait = tree_wait(state) if state.blocked else None
            if wait is not None and wait[0] in _RAISING_WAITS:
                waited.add(wait[1])
        return [root for root in roots if root in waited or root in self._claimed]

    def _report(
        self, report: str, roots: list[AsyncOperation], taken: list[AsyncOperation]
    ) -> None:
        headline = self._stuck = self._headline()
        if self.mode is DeadlockMode.WARN:
            logger.warning("asyncop: %s\n%s", headline, report)
            return
        if any(root in self._errors for root in roots):
            # Stuck again after the cancel of an earlier report: the cancel
            # cannot reach what waits (a shield keeps it out), and the
            # thread in run() would wait on without a word.
            logger.warning(
                "asyncop: %s; deadlock='raise' cancelled the tree, but the cancel cannot "
                "reach the waits below (a shielded scope keeps it out, say), so run() still "
                "waits: end those waits (set the event, release the lock), or drop the "
                "shield\n%s",
                headline,
                report,
            )
            return
        error = DeadlockError(headline, report)
        for root in roots:  # (all: a run() about to wait takes it too)
            self._errors[root] = error
        untaken = [root for root in roots if root not in taken]
        if untaken:
            # Nothing will raise the error for these: say it here, or the
            # report is lost and they just end CANCELLED.
            names = ", ".join(repr(root.name) for root in untaken)
            logger.warning(
                "asyncop: %s; deadlock='raise' cancels %s, for which no run() or sync "
                "scope waits to raise the DeadlockError\n%s",
                headline,
                names,
                report,
            )
        for root in roots:
            reason = (
                "deadlock: the runtime is stuck (see the DeadlockError)"
                if root in taken
                else "deadlock: the runtime is stuck (see the report on the asyncop logger)"
            )
            try:
                root.cancel(reason)
            except Exception:
                logger.exception("asyncop: cancelling %r for a deadlock raised", root)
        # Look again even if nothing moves: a cancel that wakes nothing (the
        # waits sit under a shield) leaves the same stamp, and is told then.
        self._settled = None

    def stuck_locked(self) -> str | None:
        """The headline of the stuck spell reported last, while nothing has moved since.

        For snapshots' warnings; the runtime lock is held.
        """
        if self._stuck is None or self._settled is None:
            return None
        if not self._quiet_locked() or self._stamp_locked() != self._settled:
            return None
        return self._stuck

    def hold(self, held: bool) -> None:
        """Keep the runtime from counting as stuck (True), or end one such hold (False).

        For what drives the runtime from outside, unseen by the watch: the
        pytest plugin between a test's phases, the thread of an anyio
        blocking portal between its calls. Holds nest.
        """
        with self.runtime._lock:
            self.holds += 1 if held else -1

    def note_cycle(self, error: DeadlockError) -> None:
        """Keep a lock cycle just refused, for the snapshots' warnings (and ``top``)."""
        self._cycles.append((monotonic(), str(error)))

    def cycle_warnings(self) -> list[str]:
        """The lock cycles refused in the last ``CYCLES_SHOWN_S`` seconds, oldest first."""
        now = monotonic()
        return [
            f"lock cycle refused {now - at:.1f} s ago: {text}"
            for at, text in list(self._cycles)
            if now - at <= CYCLES_SHOWN_S
        ]

    def claim(self, op: AsyncOperation) -> None:
        """Say that the caller will take root ``op``'s error with ``take_error``.

        For a caller that waits for ``op`` outside asyncop's calls (the
        pytest plugin), which the watch cannot see waiting, and for
        ``run()`` between its spawn and its wait; a sync scope's exit need
        not (the thread running the block keeps the runtime from counting
        as stuck).
        """
        self._claimed.add(op)

    def take_error(self, op: AsyncOperation) -> DeadlockError | None:
        """The error ``"raise"`` left for root ``op``, once; None if none."""
        return self._errors.pop(op, None)


def deadlock_error_for(runtime: Any, op: AsyncOperation) -> DeadlockError | None:
    """What ``run()`` or a root scope's exit raises for ``op`` after a deadlock, if anything."""
    watch: DeadlockWatch | None = getattr(runtime, "_deadlocks", None)
    return None if watch is None else watch.take_error(op)
