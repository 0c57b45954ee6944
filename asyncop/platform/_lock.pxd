# C declarations for the compiled form of _lock.py (see
# asyncop/runtime/_core/_waker.pxd): the lock is an extension type with C
# fields over pythread.h's lock, and its acquire() and release() are C
# calls wherever the core names a lock's type as RecursiveLock (the
# runtime's lock: operations/_owner.pxd). Final, so that no subclass
# overrides them and the calls need no check.

cimport cython


cdef extern from "pythread.h":
    ctypedef void *PyThread_type_lock
    ctypedef enum PyLockStatus:
        PY_LOCK_FAILURE
        PY_LOCK_ACQUIRED
        PY_LOCK_INTR

    PyThread_type_lock PyThread_allocate_lock()
    void PyThread_free_lock(PyThread_type_lock)
    PyLockStatus PyThread_acquire_lock_timed(PyThread_type_lock, long long microseconds,
                                             int intr_flag) nogil
    void PyThread_release_lock(PyThread_type_lock) nogil
    unsigned long PyThread_get_thread_ident()


cdef extern from "Python.h":
    int PyErr_CheckSignals() except -1


# The owner field is read by threads that do not hold the lock; on a
# free-threaded interpreter they run in parallel with the holder's writes,
# so the field is loaded and stored whole, as C11's relaxed atomics do.
cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define asyncop_load_owner(p) __atomic_load_n((p), __ATOMIC_RELAXED)
    #define asyncop_store_owner(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
    #else
    #define asyncop_load_owner(p) (*(volatile unsigned long *)(p))
    #define asyncop_store_owner(p, v) (*(volatile unsigned long *)(p) = (v))
    #endif
    """
    unsigned long asyncop_load_owner(unsigned long *owner) nogil
    void asyncop_store_owner(unsigned long *owner, unsigned long value) nogil


@cython.final
@cython.auto_pickle(False)
cdef class RecursiveLock:
    cdef PyThread_type_lock _block
    cdef unsigned long _owner
    cdef unsigned long _count

    @cython.locals(me="unsigned long")
    cpdef bint acquire(self, bint blocking=*, double timeout=*) except -1
    @cython.locals(microseconds="long long", deadline=cython.double, status=PyLockStatus)
    cdef bint _wait(self, double timeout) except -1
    cpdef release(self)
    cpdef bint owned(self) except -1


cdef _refuse(blocking, timeout)
