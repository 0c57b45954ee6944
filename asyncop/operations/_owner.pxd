# C declarations for the compiled form of _owner.py (see _fields.pxd): the
# fields and calls of a runtime that a node reads in C. The runtime's
# KernelFields extends this type, and its core overrides the methods.
# It holds a lock: it is not pickled. The lock is the platform's compiled
# RecursiveLock, so that the core takes and releases it with C calls.

cimport cython

from asyncop.platform._lock cimport RecursiveLock


@cython.auto_pickle(False)
cdef class RuntimeBase:
    cdef public RecursiveLock _lock
    cdef public object _stamp

    cpdef _new_operation(self, fn, args, parent, name, submit=*, supervise=*, kind=*, shield=*,
                         seed_shape=*, task=*)
    cpdef _on_final_locked(self, op, after, at=*)
    cpdef bint _on_cancel_running_locked(self, op, after) except -1
