# C declarations for the compiled form of _items.py (see _waker.pxd): the
# batch loop reads the kernel's and the worker's fields, the thread's state,
# the meter, the nodes' fields, the tasks' queue numbers and the instruments
# in C, and calls the task step in C.

cimport cython

from asyncop.operations._current cimport ThreadState as CThreadState
from asyncop.runtime._core._fields cimport KernelFields as CKernel
from asyncop.runtime._core._fields cimport WorkerFields as CWorker
from asyncop.operations._fields cimport OperationFields as CNode
from asyncop.operations._finalize cimport end_work_on_worker
from asyncop.operations._state cimport transition_to_running
from asyncop.runtime._core._task cimport TaskState as CTaskState
from asyncop.runtime._core._task cimport step
from asyncop.runtime._core._instruments cimport Instruments as CInstruments
from asyncop.runtime._core._usage cimport CpuMeter as CCpuMeter
from asyncop.runtime._core._usage cimport charge


cdef unsigned long _WRAP
cdef unsigned long _HALF

cpdef bint queued_after(unsigned int later, unsigned int earlier)

@cython.locals(meter=CCpuMeter, head=CTaskState, task=CTaskState, overtaken=Py_ssize_t,
               instruments=CInstruments, op=CNode)
cpdef step_batch(CKernel rt, CWorker worker, CThreadState state, ready)

@cython.locals(task=CTaskState, steps=Py_ssize_t, current=CInstruments)
cpdef _step_instrumented(CKernel rt, CNode op, CThreadState state, CCpuMeter meter, CWorker worker,
                         CInstruments instruments, _waiting=*)

@cython.locals(op=CNode)
cpdef run_sync(CKernel rt, CWorker worker, CThreadState state)

cpdef _call_sync(CKernel rt, CNode op, CThreadState state, CWorker worker, _value=*, _error=*, _cancelled=*)
