# C declarations for the compiled form of _current.py (see
# asyncop/runtime/_core/_waker.pxd): a thread's state is an extension type, whose
# fields the worker and the stepper read and write in C.

cimport cython


@cython.final
cdef class ThreadState:
    cdef object __weakref__
    cdef public object op
    cdef public object task
    cdef public object worker
    cdef public bint blocked
    cdef public object parked_on
    cdef public object waits_on
    cdef public object thrown_in
