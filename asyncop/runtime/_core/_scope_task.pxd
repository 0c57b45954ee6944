# C declarations for the compiled form of _scope_task.py (see _waker.pxd):
# the wait of a scope's exit for its children reads the scope's fields and
# the kernel's lock, and moves the task's waker, in C. ScopeDone is an
# extension type, made by scope_done without a call of its class.

cimport cython

from asyncop.operations._fields cimport OperationFields as CNode
from asyncop.operations._finalize cimport transition_to_ended
from asyncop.operations._hooks cimport run_after
from asyncop.runtime._core._event cimport WaitEvent
from asyncop.runtime._core._fields cimport KernelFields as CKernel
from asyncop.runtime._core._waker cimport Subscription as CSubscription
from asyncop.runtime._core._waker cimport Waker


@cython.final
@cython.auto_pickle(False)
cdef class ScopeDone(WaitEvent):
    cdef public CNode op
    cdef public bint end_block


cpdef ScopeDone scope_done(CNode op, bint end_block=*)

@cython.locals(op=CNode, waker=Waker, sub=CSubscription, runtime=CKernel)
cpdef bint suspend_for_children(ScopeDone ev, task, _value=*) except -1

cpdef bint raised_clean(error) except -1
