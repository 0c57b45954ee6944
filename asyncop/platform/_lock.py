"""A recursive lock with the semantics of a Win32 ``CRITICAL_SECTION``.

- The owning thread may acquire it again without blocking; it must release
  it as many times as it acquired it before another thread can enter.
- Releasing from a thread that does not own it raises ``RuntimeError``.
- It protects one process's threads; it is not an inter-process lock.
- ``acquire(blocking=True, timeout=-1)``, ``release()`` and ``with lock:``
  behave as ``threading.RLock``'s, errors included; ``owned()`` tells
  whether the calling thread holds it.

The runtime takes this lock several times per task, so it comes in two
forms from this one file:

- Compiled with the core (``hatch_build.py``, typed by ``_lock.pxd``), the
  first class below is an extension type: an owner thread id and a count
  in front of an OS lock (``pythread.h``'s, a mutex and condition or a
  semaphore: a thread that waits sleeps, with the interpreter released,
  and a Ctrl-C reaches the main thread as it waits). The core names the
  runtime's lock with this type (``operations/_owner.pxd``), so that its
  ``acquire()`` and ``release()`` are C calls there: re-entry and an
  uncontended acquire take neither an argument tuple nor a method lookup.
- Run as Python, the class at the end replaces it: a subclass of
  ``_thread.RLock``, which is the same thing written in C by CPython, and
  only adds ``owned()``. (Subclassing rather than wrapping keeps
  ``with lock:`` on RLock's C methods.) The first class's C calls do not
  exist then; the stand-ins below only name them for the type checkers.

Errors are RLock's own in both forms: the compiled lock has a misused
call raise from a fresh ``_thread.RLock`` (see ``_refuse``).
"""

from __future__ import annotations

import _thread
import time
from typing import TYPE_CHECKING, Any

try:
    import cython  # pyright: ignore[reportMissingImports]
except ImportError:  # run as Python, without Cython installed
    from ._cython import pure_cython as cython

__all__ = ["RecursiveLock"]

if not cython.compiled:  # (compiled, _lock.pxd declares these C calls)
    PY_LOCK_ACQUIRED = 1
    PY_LOCK_INTR = 2

    def PyThread_allocate_lock() -> Any:
        return _thread.allocate_lock()

    def PyThread_free_lock(block: Any) -> None:
        return None

    def PyThread_get_thread_ident() -> int:
        return _thread.get_ident()

    def PyThread_acquire_lock_timed(block: Any, microseconds: int, intr_flag: int) -> int:
        return int(block.acquire(microseconds != 0, max(microseconds, -1) / 1e6))

    def PyThread_release_lock(block: Any) -> None:
        block.release()

    def PyErr_CheckSignals() -> int:
        return 0

    def asyncop_load_owner(owner: int) -> int:
        return owner

    def asyncop_store_owner(owner: int, value: int) -> None:
        return None


class RecursiveLock:
    """A re-entrant mutex: re-entry by the owner, matching release count."""

    # _block: the OS lock, held while _count > 0. _owner: the holder's
    # thread id, 0 when free. _count: the holder's acquires not yet released.
    __slots__ = ("_block", "_count", "_owner")

    def __cinit__(self) -> None:
        self._block = PyThread_allocate_lock()
        if not self._block:
            raise MemoryError()
        self._owner = 0
        self._count = 0

    def __dealloc__(self) -> None:
        if self._block:
            PyThread_free_lock(self._block)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock, or enter it again; False if ``timeout`` passed first.

        As ``threading.RLock.acquire``: ``blocking=False`` only tries, and a
        ``timeout`` in seconds (``-1``: none) bounds a blocking wait.
        """
        if timeout != -1 and (not blocking or not 0 <= timeout <= _thread.TIMEOUT_MAX):
            _refuse(blocking, timeout)
        me = PyThread_get_thread_ident()
        # Only a holder writes _owner, and clears it before it lets go: a
        # thread finds its own id there only while it holds the lock. Other
        # threads read it meanwhile (see _lock.pxd); _count is the holder's.
        if asyncop_load_owner(cython.address(self._owner)) == me:
            self._count += 1
            return True
        if PyThread_acquire_lock_timed(self._block, 0, 0) != PY_LOCK_ACQUIRED and (
            not blocking or not self._wait(timeout)
        ):
            return False
        asyncop_store_owner(cython.address(self._owner), me)
        self._count = 1
        return True

    def _wait(self, timeout: float) -> bool:
        """Wait for the OS lock, the interpreter released; False if ``timeout`` passed first.

        A signal interrupts the wait on the main thread: its handler runs
        here (a Ctrl-C raises, the lock not taken), and the wait goes on for
        what is left of the timeout.
        """
        microseconds = -1 if timeout == -1 else int(timeout * 1e6)
        deadline = time.monotonic() + timeout
        while True:
            with cython.nogil:
                status = PyThread_acquire_lock_timed(self._block, microseconds, 1)
            if status != PY_LOCK_INTR:
                return status == PY_LOCK_ACQUIRED
            PyErr_CheckSignals()
            if microseconds > 0:
                microseconds = max(0, int((deadline - time.monotonic()) * 1e6))

    def release(self) -> None:
        """Undo one ``acquire`` by the holder; the last one frees the lock."""
        if asyncop_load_owner(cython.address(self._owner)) != PyThread_get_thread_ident():
            _thread.RLock().release()  # raises RLock's RuntimeError (see _refuse)
        self._count -= 1
        if not self._count:
            asyncop_store_owner(cython.address(self._owner), 0)
            PyThread_release_lock(self._block)

    def owned(self) -> bool:
        """Tell whether the calling thread holds the lock."""
        return asyncop_load_owner(cython.address(self._owner)) == PyThread_get_thread_ident()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _refuse(blocking: bool, timeout: float) -> None:
    """Raise what ``threading.RLock.acquire`` raises for these arguments.

    Called only with arguments it refuses (a timeout given to a
    non-blocking call, a negative one, one too long for the OS lock), on a
    fresh lock: the compiled lock's errors are the Python form's.
    """
    _thread.RLock().acquire(blocking, timeout)


if not cython.compiled and not TYPE_CHECKING:  # run as Python: RLock's C methods

    class RecursiveLock(_thread.RLock):  # type: ignore[no-redef]
        """A re-entrant mutex: re-entry by the owner, matching release count."""

        __slots__ = ()

        def owned(self) -> bool:
            """Tell whether the calling thread holds the lock."""
            return bool(self._is_owned())
