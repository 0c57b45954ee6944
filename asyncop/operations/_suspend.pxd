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



# The base of WaitEvent (asyncop/runtime/_core/_waker.py): the flag and the
# place of a SuspendsItself's one wait share one 8-byte word.
@cython.auto_pickle(False)
cdef class Awaited:
    cdef public bint _awaited
    cdef int _at


@cython.auto_pickle(False)
cdef class SuspendsItself(Awaited):
    pass
