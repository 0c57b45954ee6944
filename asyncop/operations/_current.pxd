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


# The calling thread's state, compiled: kept in the interpreter's own dict of
# the thread as well, keyed by the ThreadState type (hashed by its address),
# where a C lookup costs a fraction of reading a threading.local attribute.
# Put there on first use, from thread_state(): one state per thread either way.
# (Run as Python, the modules that cimport it use thread_state() instead.)
from cpython.object cimport PyObject
from cpython.pystate cimport PyThreadState_GetDict
from cpython.dict cimport PyDict_GetItem, PyDict_SetItem


cdef inline ThreadState state_here():
    cdef PyObject* thread_dict = PyThreadState_GetDict()
    cdef PyObject* found
    if thread_dict is not NULL:
        found = PyDict_GetItem(<object>thread_dict, ThreadState)
        if found is not NULL:
            return <ThreadState>found
    from asyncop.operations._current import thread_state
    state = thread_state()
    if thread_dict is not NULL:
        PyDict_SetItem(<object>thread_dict, ThreadState, state)
    return state
