# C declarations for the compiled form of _timer_calls.py (see _waker.pxd):
# the kernel's timer calls are C methods of an extension type, which the
# kernel extends (through NodeHooks, _spawn.pxd) and a sleep names as the
# type of its runtime (_awaitables.pxd).

from asyncop.runtime._core._fields cimport KernelFields
from asyncop.runtime._core._timers cimport Timer as CTimer


cdef class TimerCalls(KernelFields):
    cpdef CTimer _add_timer_locked(self, double deadline, callback, bint inline)
    cpdef bint _cancel_timer_locked(self, CTimer timer) except -1
