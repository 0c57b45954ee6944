# C declarations for the compiled form of _items.py (see _waker.pxd): the
# batch loop reads the thread's state, the meter, the tasks' queue numbers
# and the instruments in C, and calls the task step in C.

cimport cython

from asyncop.operations._current cimport ThreadState as CThreadState
from asyncop.runtime._core._task cimport TaskState as CTaskState
from asyncop.runtime._core._task cimport step
from asyncop.runtime._core._instruments cimport Instruments as CInstruments
from asyncop.runtime._core._usage cimport CpuMeter as CCpuMeter


@cython.locals(meter=CCpuMeter, head=CTaskState, task=CTaskState, overtaken=Py_ssize_t,
               instruments=CInstruments)
cpdef step_batch(rt, worker, CThreadState state, ready)

@cython.locals(task=CTaskState, steps=Py_ssize_t, current=CInstruments)
cpdef _step_instrumented(rt, op, CThreadState state, CCpuMeter meter, worker,
                         CInstruments instruments, _waiting=*)
