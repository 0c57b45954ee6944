"""The OS layer: the few primitives the runtime needs from the platform.

Everything above this package talks to the operating system only through
these names, so that porting asyncop means porting this package alone. It
uses nothing but the standard library (and Cython, for the compiled form of
its lock, when the core is compiled: see ``_lock.py``).

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
- :func:`check_timeout` says what a user's timeout means (``None``,
  ``inf`` and huge values are "no limit"; NaN and non-numbers raise), and
  :func:`acquire_for` blocks on a lock for any such timeout, in slices, so
  that the main thread notices a Ctrl-C promptly. :func:`check_grace`
  does the same for a grace period (before a cancel, or ``SIGKILL`` with
  :func:`check_kill_grace`), and refuses a negative one.
- :func:`call_on_main_thread` hands a short call to the main thread, which
  runs it between two slices of such a wait (installing a signal handler,
  which only the main thread may do); :func:`can_call_on_main_thread` says
  whether it would be taken, and :func:`serving` keeps the main thread
  serving over a stretch that ends in such a wait.
- :func:`choose_selector` picks the best I/O multiplexer (epoll, kqueue,
  poll or select), and :class:`WakeupChannel` lets any thread interrupt a
  thread blocked in it.
- :class:`pure_cython` stands in for the ``cython`` module that the core
  modules import, when they run as Python without Cython installed.
"""

from __future__ import annotations

from ._cpu import cpu_count as cpu_count
from ._cpu import thread_cpu_clock as thread_cpu_clock
from ._cython import pure_cython as pure_cython
from ._event import WakeEvent as WakeEvent
from ._lock import RecursiveLock as RecursiveLock
from ._main_calls import call_on_main_thread as call_on_main_thread
from ._main_calls import can_call_on_main_thread as can_call_on_main_thread
from ._main_calls import serve_main_calls as serve_main_calls
from ._main_calls import serving as serving
from ._selector import WakeupChannel as WakeupChannel
from ._selector import choose_selector as choose_selector
from ._selector import selector_name as selector_name
from ._thread import ThreadHandle as ThreadHandle
from ._thread import join_by as join_by
from ._thread import start_thread as start_thread
from ._timeout import MAIN_SLICE as MAIN_SLICE
from ._timeout import acquire_for as acquire_for
from ._timeout import check_deadline as check_deadline
from ._timeout import check_grace as check_grace
from ._timeout import check_kill_grace as check_kill_grace
from ._timeout import check_timeout as check_timeout
from ._timeout import is_main_thread as is_main_thread

__all__ = [
    "MAIN_SLICE",
    "RecursiveLock",
    "ThreadHandle",
    "WakeEvent",
    "WakeupChannel",
    "acquire_for",
    "call_on_main_thread",
    "can_call_on_main_thread",
    "check_deadline",
    "check_grace",
    "check_kill_grace",
    "check_timeout",
    "choose_selector",
    "cpu_count",
    "is_main_thread",
    "join_by",
    "pure_cython",
    "selector_name",
    "serve_main_calls",
    "serving",
    "start_thread",
    "thread_cpu_clock",
]
