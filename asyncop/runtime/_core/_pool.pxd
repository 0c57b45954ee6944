# C declarations for the compiled form of _pool.py (see _waker.pxd): the
# types that cython.locals() names in the .py, so that waking a worker and
# counting the sync slots read the kernel's and the workers' fields in C.

from asyncop.runtime._core._fields cimport KernelFields as CKernel
from asyncop.runtime._core._fields cimport WorkerFields as CWorker
