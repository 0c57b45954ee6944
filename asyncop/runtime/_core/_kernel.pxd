# C declarations for the compiled form of _kernel.py (see _waker.pxd): the
# types that cython.locals() names in the .py, for the push of a task (the
# kernel's and the workers' fields in C), the timers, the end of an
# operation and its cancel, which calls on_cancel_running in C.

from asyncop.operations._current cimport ThreadState as CThreadState
from asyncop.runtime._core._fields cimport KernelFields as CKernel
from asyncop.runtime._core._fields cimport WorkerFields as CWorker
from asyncop.operations._fields cimport OperationFields as CNode
from asyncop.operations._fields cimport RareFields as CRare
from asyncop.runtime._core._task cimport TaskState as CTaskState
from asyncop.runtime._core._task cimport on_cancel_running
