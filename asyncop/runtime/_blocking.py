"""The blocking-call pool behind ``spawn_blocking``.

Blocking calls must not occupy the workers, so they run on their own
threads. Threads are started on demand up to ``limit``, park on their own
wake event when idle (0 % CPU), and retire after ``IDLE_RETIRE`` seconds
without work. Jobs beyond ``limit`` wait in a FIFO queue.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from ..platform import ThreadHandle, WakeEvent, join_by, start_thread

__all__ = ["BlockingPool"]

IDLE_RETIRE = 10.0

logger = logging.getLogger("asyncop")


class _Thread:
    __slots__ = ("event", "handle")

    def __init__(self) -> None:
        self.event = WakeEvent()
        self.handle: ThreadHandle | None = None


class BlockingPool:
    """Threads for blocking calls; ``submit(job)`` runs ``job()`` on one of them."""

    def __init__(self, name: str, limit: int = 64) -> None:
        self._name = name
        self._limit = limit
        self._lock = threading.Lock()
        self._jobs: deque[Callable[[], None]] = deque()
        self._idle: list[_Thread] = []
        self._threads: list[_Thread] = []
        self._seq = 0
        self._closed = False

    def thread_count(self) -> int:
        """The threads running or parked, for ``Runtime.dump()``."""
        return len(self._threads)

    def submit(self, job: Callable[[], None]) -> None:
        """Queue ``job``; wake an idle thread or start one.

        Raises:
            RuntimeError: the pool was shut down.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError(
                    f"the blocking-call threads of {self._name!r} are shut down; "
                    "run blocking calls before shutting the runtime down"
                )
            self._jobs.append(job)
            if self._idle:
                self._idle.pop().event.set()
            elif len(self._threads) < self._limit:
                self._seq += 1
                thread = _Thread()
                self._threads.append(thread)
                thread.handle = start_thread(
                    self._main, thread, name=f"{self._name}-blocking-{self._seq}"
                )

    def _main(self, thread: _Thread) -> None:
        while True:
            with self._lock:
                job = self._jobs.popleft() if self._jobs else None
                if job is None:
                    if self._closed:
                        self._threads.remove(thread)
                        return
                    self._idle.append(thread)
            if job is not None:
                try:
                    job()
                except BaseException:
                    # A job reports its own outcome; what escapes it is a bug,
                    # and must not end the thread with the pool still counting it.
                    try:
                        logger.error("asyncop: a blocking-call job failed", exc_info=True)
                    except BaseException:  # pragma: no cover - a broken log handler
                        pass
                continue
            if not thread.event.wait(IDLE_RETIRE):
                with self._lock:
                    if thread in self._idle and not self._jobs:
                        self._idle.remove(thread)
                        self._threads.remove(thread)
                        return
                    if thread in self._idle:
                        self._idle.remove(thread)

    def runs_on_current_thread(self) -> bool:
        """Tell whether the caller is one of this pool's threads."""
        me = threading.get_ident()
        with self._lock:
            return any(
                thread.handle is not None and thread.handle.ident == me for thread in self._threads
            )

    def shutdown(self, end: float | None) -> bool:
        """Stop taking jobs, let queued ones finish, join the threads.

        Args:
            end: the ``time.monotonic()`` reading by which to give up on the
                threads still running (None: wait for all of them). One
                bound for the whole pool, not one per thread: a call stuck
                in each thread must not multiply the wait.

        Returns:
            True if every thread ended.
        """
        with self._lock:
            self._closed = True
            threads = list(self._threads)
            for thread in self._idle:
                thread.event.set()
            self._idle.clear()
        ended = True
        for thread in threads:
            if thread.handle is not None and not join_by(thread.handle, end):
                ended = False
        return ended
