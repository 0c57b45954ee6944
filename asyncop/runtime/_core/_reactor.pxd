# C declarations for the compiled form of _reactor.py (see _waker.pxd): the
# reactor is an extension type, so that the fields a socket wait and a
# worker's poll read on every round trip are C struct members.

cimport cython

from asyncop.platform._lock cimport RecursiveLock


@cython.final
cdef class Reactor:
    cdef public object _runtime
    cdef public RecursiveLock _lock
    cdef public dict _table
    cdef public dict _armed
    cdef public set _known
    cdef public object _adds
    cdef public dict _added
    cdef public object backend
    cdef public bint drives_epoll
    cdef public bint _used
    cdef public object _wakeup
    cdef public object _wake_fd
    cdef public object _epoll
    cdef public object _selector
    cdef public bint _stopping
    cdef public object _thread
    cdef public double _swept
    cdef public Py_ssize_t _sweep_looks
    cdef public double _busy_at
    cdef public bint _registered
    cdef public bint _forever
