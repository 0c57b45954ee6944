# The C versions of _gc.py's untrack and track, for the compiled modules that cimport
# it (see asyncop/operations/_suspend.pxd): CPython's PyObject_GC_UnTrack,
# called in C. Header only: _gc.py itself is not compiled.

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void* op)
    void PyObject_GC_Track(void* op)
    int PyObject_GC_IsTracked(object op)


# Take obj off the cyclic collector's lists (a no-op if it is off them).
cdef inline object untrack(object obj):
    PyObject_GC_UnTrack(<void*>obj)
    return obj


# Put obj back on the collector's lists (a no-op if it is on them: tracking
# an object twice is a fatal error).
cdef inline void track(object obj):
    if not PyObject_GC_IsTracked(obj):
        PyObject_GC_Track(<void*>obj)


# Whether the collector visits obj (it is on its lists).
cdef inline bint is_tracked(object obj):
    return PyObject_GC_IsTracked(obj)
