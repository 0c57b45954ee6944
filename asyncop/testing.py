"""Test support: the virtual clock, quiescence, checkpoint checks, in-memory streams.

- ``VirtualClock(autojump=True)`` makes a runtime's time jump to the next
  deadline whenever all of its workers are idle and no I/O is awaited (with
  ``io_grace=S``, also over I/O waits that stayed quiet for ``S`` seconds of
  real time); ``advance(seconds)`` moves it by hand, from any thread.
- ``await wait_all_blocked()`` returns once every other task of the runtime
  is parked.
- ``with assert_checkpoints():`` fails if the block passed no cancellation
  point.
- ``memory_stream_pair()`` gives two streams connected in memory, to test
  a protocol without sockets (``runtime/_net/_memory_streams.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import final

from ._exports import publish as _publish
from .operations import thread_state
from .runtime import Subscription, WaitEvent
from .runtime import VirtualClock as VirtualClock
from .runtime import memory_stream_pair as memory_stream_pair

__all__ = ["VirtualClock", "assert_checkpoints", "memory_stream_pair", "wait_all_blocked"]


@final
class _AllBlocked(WaitEvent[None]):
    __slots__ = ("_threads",)

    def __init__(self, threads: bool) -> None:
        self._threads = threads

    def _arm(self, sub: Subscription) -> None:
        runtime = sub.waker.runtime
        with runtime._lock:
            runtime._idle_watchers.append((sub, self._threads))
        # A worker that is about to park fires the watchers; if every worker
        # is already parked, nudge one so that it looks.
        runtime._clock_advanced()

    def _disarm(self, sub: Subscription) -> None:
        runtime = sub.waker.runtime
        with runtime._lock:
            runtime._idle_watchers = [w for w in runtime._idle_watchers if w[0] is not sub]

    def _describe(self) -> str:
        return "wait_all_blocked()"


def wait_all_blocked(*, threads: bool = True) -> WaitEvent[None]:
    """Wait until every other task of this runtime is parked.

    "Parked" means suspended on an event with no worker running anything and
    no blocking call in flight, so nothing can happen until an outside event
    (a timer, I/O, another thread) fires. A sync callback asleep in one of
    asyncop's waits (``Event.wait()``, ``op.wait()``...) runs nothing: it
    counts as parked. A cancellation point.

    Args:
        threads: with False, a blocking call running in another thread
            (``spawn_blocking``, anyio's ``to_thread``) does not count as
            busy: a task waiting for one is parked, as trio's and anyio's
            ``wait_all_tasks_blocked()`` count it.
    """
    return _AllBlocked(bool(threads))


@contextmanager
def assert_checkpoints() -> Iterator[None]:
    """Fail with AssertionError if the block did not pass a cancellation point.

    Use it inside a coroutine operation.

    Raises:
        RuntimeError: not inside a coroutine operation.
    """
    task = thread_state().task
    if task is None:
        raise RuntimeError(
            "assert_checkpoints() checks the awaits of a coroutine operation; "
            "use it inside an async def operation"
        )
    before = task.checkpoints
    yield
    if task.checkpoints == before:
        raise AssertionError("the block passed no cancellation point (no await of asyncop)")


_publish("asyncop.testing", globals(), __all__)
