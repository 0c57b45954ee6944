# C declarations for the compiled form of _usage.py (see _waker.pxd): a
# worker's meter is an extension type with C doubles, and charge() a C
# function the stepper calls directly.

cimport cython

from asyncop.operations._fields cimport OperationFields as CNode


@cython.final
cdef class CpuMeter:
    cdef public double cpu_mark
    cdef public double wall_mark
    cdef public double since
    cdef public double run_start
    cdef public double last
    cdef public double ratio
    cdef public double slow_after
    cdef public object on_slow

    cpdef double start_run(self) except? -1.0
    cpdef end_run(self)
    cpdef _refresh(self, double now)
    cpdef charge_long(self, CNode op, double wall, double now)


@cython.locals(now=double, wall=double)
cpdef double charge(CNode op, CpuMeter meter, double start) except? -1.0
