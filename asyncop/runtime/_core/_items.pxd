# C declarations for the compiled form of _items.py (see _waker.pxd): the
# batch loop reads the thread's state, the meter and the tasks' queue
# numbers in C.

cimport cython

from asyncop.operations._current cimport ThreadState as CThreadState
from asyncop.runtime._core._task cimport TaskState as CTaskState
from asyncop.runtime._core._usage cimport CpuMeter as CCpuMeter


@cython.locals(meter=CCpuMeter, head=CTaskState, task=CTaskState, overtaken=Py_ssize_t)
cpdef step_batch(rt, worker, CThreadState state, ready)
