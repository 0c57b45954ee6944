# C declarations for the compiled form of _block.py (see _waker.pxd): the
# entry of ``async with scope()`` reads and writes the running task's fields
# in C, and a scope's __aenter__ calls it in C.

cimport cython

from asyncop.operations cimport _current
from asyncop.operations._fields cimport OperationFields as CNode
from asyncop.runtime._core._task cimport TaskState as CTask


cpdef _running_task(what)

@cython.locals(task=CTask, parent=CNode, op=CNode, outer=list)
cpdef enter_in_task(scope)
