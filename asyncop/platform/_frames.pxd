# C versions of _frames.py's functions, for the compiled modules that
# cimport them (see asyncop/operations/_node.pxd): CPython's frame API,
# called in C. Header only: _frames.py itself is not compiled.

from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF


cdef extern from "Python.h":
    ctypedef struct PyFrameObject
    PyFrameObject* PyEval_GetFrame()  # borrowed, NULL outside Python code
    object PyFrame_GetCode(PyFrameObject* frame)  # new reference, never NULL
    int PyFrame_GetLasti(PyFrameObject* frame)
    PyObject* PyFrame_GetBack(PyFrameObject* frame)  # new reference, or NULL


# The innermost Python frame of the calling thread, or None.
cdef inline object current_frame():
    cdef PyFrameObject* frame = PyEval_GetFrame()
    if frame is NULL:
        return None
    return <object><PyObject*>frame


cdef inline object frame_code(object frame):
    return PyFrame_GetCode(<PyFrameObject*>frame)


cdef inline int frame_lasti(object frame) noexcept:
    return PyFrame_GetLasti(<PyFrameObject*>frame)


cdef inline object frame_back(object frame):
    cdef PyObject* back = PyFrame_GetBack(<PyFrameObject*>frame)
    if back is NULL:
        return None
    result = <object>back
    Py_DECREF(<object>back)
    return result
