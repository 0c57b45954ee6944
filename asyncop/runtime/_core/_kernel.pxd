# C declarations for the compiled form of _kernel.py (see _waker.pxd): the
# types that cython.locals() names in the .py, for the push of a task.

from asyncop.operations._current cimport ThreadState as CThreadState
from asyncop.runtime._core._task cimport TaskState as CTaskState
