# C declarations for the compiled form of _worker.py (see _waker.pxd): the
# types that cython.locals() names in the .py, so that the work cycle and
# parking read the kernel's and the worker's fields in C.

from asyncop.operations._current cimport ThreadState as CThreadState
from asyncop.runtime._core._fields cimport KernelFields as CKernel
from asyncop.runtime._core._fields cimport WorkerFields as CWorker
