# C declarations for the compiled form of _scope_task.py (see _waker.pxd):
# the wait of a scope's exit for its children reads the scope's fields and
# the kernel's lock, and moves the task's waker, in C. (ScopeDone stays a
# Python class: it extends WaitEvent.)

cimport cython

from asyncop.operations._fields cimport OperationFields as CNode
from asyncop.operations._finalize cimport transition_to_ended
from asyncop.operations._hooks cimport run_after
from asyncop.runtime._core._fields cimport KernelFields as CKernel
from asyncop.runtime._core._waker cimport Subscription as CSubscription
from asyncop.runtime._core._waker cimport Waker


@cython.locals(op=CNode, waker=Waker, sub=CSubscription, runtime=CKernel)
cpdef bint suspend_for_children(ev, task, _value=*) except -1

cpdef bint raised_clean(error) except -1
