"""The OS layer: the few primitives the runtime needs from the platform.

Everything above this package talks to the operating system only through
these names, so that porting asyncop means porting this package alone. It
uses nothing but the standard library.

- :class:`WakeEvent` is an auto-reset event (a Win32 ``CreateEvent(FALSE,
  FALSE)``): one ``set()`` releases one ``wait()``, and a ``set()`` that
  lands before the ``wait()`` is not lost.
- :class:`RecursiveLock` has ``CRITICAL_SECTION`` semantics: the owner may
  re-enter, every ``acquire`` needs its ``release``, and a thread that does
  not own the lock cannot release it.
- :func:`start_thread` starts a named thread on an entry function and its
  context, and returns a handle to join it.
- :func:`cpu_count` counts the CPUs this process may run on, and
  :func:`thread_cpu_clock` lets another thread read how much CPU a thread
  has used.
- :func:`choose_selector` picks the best I/O multiplexer (epoll, kqueue,
  poll or select), and :class:`WakeupChannel` lets any thread interrupt a
  thread blocked in it.
"""

from __future__ import annotations

from ._cpu import cpu_count as cpu_count
from ._cpu import thread_cpu_clock as thread_cpu_clock
from ._event import WakeEvent as WakeEvent
from ._event import acquire_for as acquire_for
from ._lock import RecursiveLock as RecursiveLock
from ._selector import WakeupChannel as WakeupChannel
from ._selector import choose_selector as choose_selector
from ._selector import selector_name as selector_name
from ._thread import ThreadHandle as ThreadHandle
from ._thread import start_thread as start_thread

__all__ = [
    "RecursiveLock",
    "ThreadHandle",
    "WakeEvent",
    "WakeupChannel",
    "acquire_for",
    "choose_selector",
    "cpu_count",
    "selector_name",
    "start_thread",
    "thread_cpu_clock",
]
