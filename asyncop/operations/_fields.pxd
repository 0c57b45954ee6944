# C declarations for the compiled form of _fields.py (see
# asyncop/runtime/_core/_waker.pxd): an operation node's fields are the
# members of an extension type, which the core reads and writes in C
# wherever it names a node's type as OperationFields. A node holds a
# runtime and locks: it is not pickled.

cimport cython

from asyncop.operations._owner cimport RuntimeBase


cdef double _NOT_STARTED


@cython.final
@cython.auto_pickle(False)
cdef class RareFields:
    cdef public object deadline
    cdef public object deadline_timer
    cdef public object failures
    cdef public object token
    cdef public object unobserved
    cdef public list held


@cython.auto_pickle(False)
cdef class OperationFields:
    # Pointers first, then the flags together, one byte each (Python
    # reads them as 0 or 1: what it hands on as a bool goes through
    # bool()), then the numbers: eleven flags and _lasti fill 16 bytes, the
    # two 32-bit counters 8 more (op.stats counts modulo 2**32), so the node
    # fits a smaller allocator size class.
    cdef object __weakref__
    cdef public RuntimeBase runtime
    cdef public object name
    cdef public OperationFields parent
    cdef public OperationFields first_child
    cdef public OperationFields sibling_next
    cdef public object cancel_reason
    cdef public object _state
    cdef public OperationFields _sibling_prev
    cdef public object _kind
    cdef public object _fn
    cdef public object _args
    cdef public object _ctx
    cdef public object _outcome
    cdef public object _value
    cdef public object _error
    cdef public object _waiters
    cdef public RareFields _rare
    cdef public object _task
    cdef public object _code
    cdef public object _ended_at
    cdef public unsigned char _final
    cdef public unsigned char _observed
    cdef public unsigned char _propagates
    cdef public unsigned char _supervised
    cdef public unsigned char _supervise
    cdef public unsigned char _shield
    cdef public unsigned char _expired
    cdef public unsigned char _interrupted
    cdef public unsigned char _outside_cancel
    cdef public unsigned char _cancelled
    cdef public unsigned char _cancel_unfinished
    cdef public int _lasti
    cdef public unsigned int _steps
    cdef public unsigned int _wakes
    cdef public double _busy
    cdef public double _cpu
    cdef public double _created_at
    cdef public double _started_at
