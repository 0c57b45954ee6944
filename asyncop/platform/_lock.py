"""A recursive lock with the semantics of a Win32 ``CRITICAL_SECTION``.

- The owning thread may acquire it again without blocking; it must release
  it as many times as it acquired it before another thread can enter.
- Releasing from a thread that does not own it raises ``RuntimeError``.
- It protects one process's threads; it is not an inter-process lock.

CPython's ``_thread.RLock`` already implements exactly this, in C, with an
owner id and a recursion count, so :class:`RecursiveLock` is a subclass that
only adds ``owned()``. Subclassing rather than wrapping keeps ``with lock:``
on the C fast path; the runtime takes this lock several times per operation.
"""

from __future__ import annotations

import _thread

__all__ = ["RecursiveLock"]


class RecursiveLock(_thread.RLock):  # type: ignore[misc]
    """A re-entrant mutex: re-entry by the owner, matching release count."""

    __slots__ = ()

    def owned(self) -> bool:
        """Tell whether the calling thread holds the lock."""
        return bool(self._is_owned())  # type: ignore[attr-defined]
