# C declarations for the compiled form of _instruments.py (see _waker.pxd):
# the callers in the core call these in C, and the thread's state and the
# stepped task are read in C.

cimport cython

from asyncop.operations._current cimport ThreadState as CThreadState
from asyncop.runtime._core._task cimport TaskState as CTaskState


@cython.final
cdef class Instruments:
    cdef public tuple objects
    cdef public tuple spawned
    cdef public tuple step_started
    cdef public tuple parked
    cdef public tuple woken
    cdef public tuple step_ended
    cdef public tuple cancelled
    cdef public tuple ended
    cdef public bint stepping


cpdef tell(runtime, tuple hooks, op)

cpdef tell_why(runtime, tuple hooks, op, reason)

@cython.locals(state=CThreadState, task=CTaskState)
cpdef note_ended_locked(Instruments instruments, op, list after)

@cython.locals(ops=list)
cpdef flush_ended(runtime, list deferred)

cpdef park_reason(CTaskState task, _waiting=*, _queued=*, _result=*)
