# C declarations for the compiled form of _timers.py (see _waker.pxd): a
# timer and the heap are extension types, so that the kernel arms, cancels
# and fires timers with C calls, and reads a due timer's fields in C. The
# kernel's fields name the heap's type (_fields.pxd).

cimport cython


@cython.final
cdef class Timer:
    cdef public double deadline
    cdef public object callback
    cdef public bint inline
    cdef public object state

    cpdef bint _transition_to_fired(self, _armed=*, _fired=*)
    cpdef bint _transition_to_cancelled(self, _armed=*, _cancelled=*)


@cython.final
cdef class TimerHeap:
    cdef list _heap
    cdef Py_ssize_t _seq
    cdef Py_ssize_t _live
    cdef Py_ssize_t _cancelled

    cpdef Timer push(self, double deadline, callback, bint inline)
    cpdef bint cancel(self, Timer timer)
    cpdef object next_deadline(self, _armed=*)
    @cython.locals(timer=Timer)
    cpdef list pop_due(self, double now)
