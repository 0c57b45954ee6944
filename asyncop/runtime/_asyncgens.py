"""Async generators: closing the ones a task dropped, and those left at shutdown.

An async generator whose ``finally`` awaits (``await asyncop.sleep(0)``, an
``async with lock:``) cannot be closed by the garbage collector alone: the
collector closes it synchronously, and Python reports "async generator
ignored GeneratorExit". Python lets an event loop take that over with two
per-thread hooks (``sys.set_asyncgen_hooks``), which asyncio and trio both
install; a runtime installs them on each of its worker threads, the only
threads that step its tasks:

- *firstiter* runs when a generator is first iterated. One first iterated
  by a task of the runtime is recorded, weakly, in the runtime's set. Any
  other (a thread without a task, such as a sync callback running its own
  loop) is marked foreign and handed to the thread's previous hooks, if
  any: the generator belongs to whoever iterates it.
- *finalizer* runs when a recorded generator is dropped unfinished (on any
  thread: the collector runs where it runs). It queues ``aclose()`` as a
  top-level task of the runtime: a root of its own, so no cancel of the
  task that dropped the generator reaches it, and an error from its
  ``finally`` is logged on the ``asyncop`` logger, never raised into a
  worker. A thread inside the runtime's lock when its collector runs hands
  the spawn to a short-lived thread instead, since the lock's state is
  half-changed there.
- ``close_all()``, called by ``shutdown()`` once the operation tree has
  ended, waits for those tasks and closes the recorded generators still
  alive (as trio does at the end of ``run``), again until no new one comes,
  then seals the set: a generator dropped later is closed on the spot, and
  a ``finally`` that awaits then is cut short with a WARNING.

A generator first iterated under another loop's hooks (the host asyncio
loop of ``asyncio_bridge``, anyio on asyncio there) carries that loop's
finalizer, which Python fixes at its first iteration: it never reaches
these hooks. Each worker thread restores the hooks it found when it ends.

Nothing here runs per task: firstiter runs once per generator (an
``@asynccontextmanager`` is one), and costs a set insertion.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..operations import AsyncOperation, thread_state
from ..platform import ThreadHandle, join_by, start_thread

if TYPE_CHECKING:
    from ._scheduler import Runtime

__all__ = ["AsyncGenerators"]

logger = logging.getLogger("asyncop")

# The frame-local name that marks a generator as foreign: the finalizer
# cannot ask a weak set, whose references die before it is called.
_FOREIGN = "@asyncop_foreign_asyncgen"

AnyGen = AsyncGenerator[Any, Any]


def _name(agen: AnyGen) -> str:
    return getattr(agen, "__qualname__", None) or type(agen).__name__


def _frame(agen: AnyGen) -> FrameType | None:
    frame: FrameType | None = getattr(agen, "ag_frame", None)  # (None once it ended)
    return frame


def _is_foreign(agen: AnyGen) -> bool:
    frame = _frame(agen)
    return frame is not None and bool(frame.f_locals.get(_FOREIGN, False))


def close_now(agen: AnyGen, why: str) -> None:
    """Close ``agen`` synchronously, as Python does when no loop finalizes it.

    A ``finally`` that awaits is cut short there, and a WARNING says so.
    """
    closer = agen.aclose()
    try:
        closer.send(None)
    except StopIteration:
        return
    except BaseException:
        logger.exception("asyncop: async generator %s raised while it was closed", _name(agen))
        return
    closer.close()
    logger.warning(
        "asyncop: async generator %s awaited in its cleanup %s, where nothing can "
        "run the await; its cleanup was cut short (close it with 'await agen.aclose()', "
        "or iterate it in an 'async with contextlib.aclosing(agen)' block)",
        _name(agen),
        why,
    )


async def _close(agen: AnyGen) -> None:
    """The task that closes a dropped generator; logs what its cleanup raises."""
    try:
        await agen.aclose()
    except Exception:
        logger.exception("asyncop: async generator %s raised while it was closed", _name(agen))


class _ThreadHooks:
    """The hooks of one worker thread, with the hooks it found there."""

    __slots__ = ("gens", "previous")

    def __init__(self, gens: AsyncGenerators, previous: Any) -> None:
        self.gens = gens
        self.previous = previous

    def firstiter(self, agen: AnyGen) -> None:
        if thread_state().task is not None:
            gens = self.gens
            with gens._alive_lock:
                gens._alive.add(agen)
            return
        frame = _frame(agen)
        if frame is not None:
            frame.f_locals[_FOREIGN] = True
        if self.previous.firstiter is not None:
            self.previous.firstiter(agen)

    def finalizer(self, agen: AnyGen) -> None:
        if not _is_foreign(agen):
            self.gens.dropped(agen)
        elif self.previous.finalizer is not None:
            self.previous.finalizer(agen)
        else:
            close_now(agen, "outside any event loop")


class AsyncGenerators:
    """The async generators first iterated by one runtime's tasks."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._alive: weakref.WeakSet[AnyGen] = weakref.WeakSet()
        # (A WeakSet is not safe across threads without the GIL.)
        self._alive_lock = threading.Lock()
        # Dropped generators waiting for a thread that may take the runtime's lock.
        self._dropped: deque[AnyGen] = deque()
        # The closing tasks (the ended ones are dropped by close_all()), and
        # the threads that spawn them.
        self._closing: set[AsyncOperation[None]] = set()
        self._prune_at = 16
        self._helpers: list[ThreadHandle] = []
        self._sealed = False

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Install the hooks on the calling thread; restore the previous ones after."""
        previous = sys.get_asyncgen_hooks()
        hooks = _ThreadHooks(self, previous)
        sys.set_asyncgen_hooks(hooks.firstiter, hooks.finalizer)
        try:
            yield
        finally:
            sys.set_asyncgen_hooks(*previous)

    def dropped(self, agen: AnyGen) -> None:
        """The finalizer of a recorded generator: close it in a task of the runtime."""
        self._dropped.append(agen)
        if self._runtime._lock.owned():
            # (Not here: the collector ran inside the runtime's own locked step.)
            self._helpers.append(
                start_thread(lambda _: self._spawn_dropped(), name=f"{self._runtime.name}-aclose")
            )
        else:
            self._spawn_dropped()

    def _spawn_dropped(self) -> None:
        while True:
            try:
                agen = self._dropped.popleft()
            except IndexError:
                return
            self._spawn(agen)

    def _spawn(self, agen: AnyGen) -> None:
        """Start ``aclose()`` of ``agen`` as a root task, even while the runtime closes."""
        rt = self._runtime
        op: AsyncOperation[None] = rt._new_operation(
            _close, (agen,), None, f"aclose({_name(agen)})"
        )
        with rt._lock:
            if not self._sealed and not rt._stopping and op._transition_to_pending():
                self._closing.add(op)
                if len(self._closing) >= self._prune_at:
                    self._closing = {other for other in self._closing if not other.done}
                    self._prune_at = 2 * len(self._closing) + 16
                rt._track_root_locked(op)
                rt._push_locked(op)
                return
        op.cancel()
        close_now(agen, f"after runtime {rt.name!r} shut down")

    def close_all(self, end: float | None) -> bool:
        """Close every recorded generator, then seal; for ``shutdown()``.

        Returns False if ``end`` (``time.monotonic()``) came first.
        """
        while True:
            for handle in self._helpers[:]:
                if not join_by(handle, end):
                    return False
                self._helpers.remove(handle)
            self._spawn_dropped()
            for agen in self._take_alive():
                self._spawn(agen)
            with self._runtime._lock:
                self._closing = {op for op in self._closing if not op.done}
                closing = list(self._closing)
                if not (closing or self._dropped or self._helpers or self._alive):
                    self._sealed = True
                    return True
            for op in closing:
                left = None if end is None else max(0.0, end - time.monotonic())
                try:
                    op.wait(left)
                except TimeoutError:
                    return False

    def _take_alive(self) -> list[AnyGen]:
        with self._alive_lock:
            gens = list(self._alive)
            self._alive.clear()
        return gens
