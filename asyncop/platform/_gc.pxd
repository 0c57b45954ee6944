# The C version of _gc.py's untrack, for the compiled modules that cimport
# it (see asyncop/operations/_suspend.pxd): CPython's PyObject_GC_UnTrack,
# called in C. Header only: _gc.py itself is not compiled.

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void* op)


# Take obj off the cyclic collector's lists (a no-op if it is off them).
cdef inline object untrack(object obj):
    PyObject_GC_UnTrack(<void*>obj)
    return obj
