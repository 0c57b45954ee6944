# C declarations for the compiled form of _suspend.py (see
# asyncop/runtime/_core/_waker.pxd): what a task awaits is an extension type
# of two C fields, stepped through C slots.

cimport cython


cdef int _FRESH
cdef int _WAITING
cdef int _OVER


@cython.final
@cython.auto_pickle(False)
cdef class Suspension:
    cdef object _yielded
    cdef int _at

