# C declarations for the compiled form of _suspend.py (see
# asyncop/runtime/_core/_waker.pxd): what a task awaits is an extension type
# of C fields, stepped through C slots.

cimport cython

from asyncop.platform cimport _gc


cdef int _FRESH
cdef int _WAITING
cdef int _OVER


# The base of WaitEvent (asyncop/runtime/_core/_waker.py): the flag and the
# place of a suspension's one wait share one 8-byte word.
@cython.auto_pickle(False)
cdef class Awaited:
    cdef public bint _awaited
    cdef int _at


# WaitEvent's base: its __del__ is the events' C finalizer, which a
# suspension, below, has none of. (No field: the same size as Awaited.)
@cython.auto_pickle(False)
cdef class Watched(Awaited):
    pass


# The iterator protocol, once, for both kinds below. (No cdef method: one
# would give every object a pointer to its table.)
@cython.auto_pickle(False)
cdef class Suspends(Awaited):
    pass


@cython.final
@cython.auto_pickle(False)
cdef class Suspension(Suspends):
    cdef object _yielded


@cython.auto_pickle(False)
cdef class SuspendsItself(Suspends):
    pass


cdef inline object _yielded_by(Suspends suspension)


cpdef suspend_on_constant(yielded)
