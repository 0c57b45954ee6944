# C declarations for the compiled form of _fields.py (see _waker.pxd): the
# kernel's hot fields and a worker's are the members of extension types,
# which the core reads and writes in C wherever it names a runtime's type
# as KernelFields or a worker's as WorkerFields. Neither is pickled (they
# hold locks and threads). Its Python subclasses (the pool, the kernel, the
# Runtime) have a __dict__ for the rest, and weak references.

cimport cython

from asyncop.operations._current cimport ThreadState as CThreadState
from asyncop.operations._owner cimport RuntimeBase
from asyncop.runtime._core._timers cimport TimerHeap
from asyncop.runtime._core._usage cimport CpuMeter as CCpuMeter


@cython.auto_pickle(False)
cdef class KernelFields(RuntimeBase):
    cdef public object _now
    cdef public bint _parallel
    cdef public bint _dynamic
    cdef public bint _virtual
    cdef public bint _autojump
    cdef public Py_ssize_t _target
    cdef public object _ready
    cdef public object _woken
    cdef public object _sync_ready
    cdef public Py_ssize_t _queue_seq
    cdef public Py_ssize_t _overtaken
    cdef public object _lane
    cdef public list _idle
    cdef public list _workers
    cdef public Py_ssize_t _active
    cdef public Py_ssize_t _polls
    cdef public double _next_deadline
    cdef public double _far_floor
    cdef public object _instruments
    cdef public object _reactor
    cdef public object _poller
    cdef public object _home
    cdef public object _monitor
    cdef public TimerHeap _timers


@cython.auto_pickle(False)
cdef class WorkerFields:
    cdef public KernelFields runtime
    cdef public Py_ssize_t index
    cdef public bint extra
    cdef public bint steps_only
    cdef public object event
    cdef public object handle
    cdef public object state
    cdef public Py_ssize_t item_seq
    cdef public object item
    cdef public bint stepping
    cdef public bint in_sync
    cdef public object cpu_clock
    cdef public CThreadState thread_state
    cdef public bint replaced
    cdef public double parked_at
    cdef public CCpuMeter meter
    cdef public list ended_later
