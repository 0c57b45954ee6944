# C declarations for the compiled form of _task.py (see _waker.pxd): the task
# state is an extension type, and the stepper's helpers are C functions that
# read its fields, and the kernel's, in C.

cimport cython

from asyncop.operations._current cimport ThreadState as CThreadState
from asyncop.operations._fields cimport OperationFields as CNode
from asyncop.operations._fields cimport RareFields as CRare
from asyncop.operations._errors cimport cancelled_for
from asyncop.operations._finalize cimport transition_to_ended
from asyncop.operations._hooks cimport run_after
from asyncop.operations._state cimport transition_to_running
from asyncop.platform cimport _coro
from asyncop.platform cimport _gc
from asyncop.runtime._core._fields cimport KernelFields as CKernel
from asyncop.runtime._core._usage cimport CpuMeter as CCpuMeter
from asyncop.runtime._core._usage cimport charge
from asyncop.runtime._core._waker cimport Subscription as CSubscription
from asyncop.runtime._core._waker cimport Waker
from asyncop.runtime._core._scope_task cimport suspend_for_children
from asyncop.runtime._core._waker cimport push_locked
from asyncop.runtime._core._waker cimport set_up_waker


cdef unsigned long _WRAP

# The count and the two flags share 8 bytes (Python reads the flags as 0 or
# 1), and the locks held live with the operation's rare fields: the task
# state fits a smaller allocator size class.
@cython.final
cdef class TaskState(Waker):
    cdef public object coro
    cdef public CNode current
    cdef public list outer
    cdef public unsigned int checkpoints
    cdef public unsigned char cancellable
    cdef public unsigned char saw_cancel


@cython.locals(task=TaskState, waker=TaskState, node=CNode, runtime=CKernel)
cpdef bint on_cancel_running(CNode op, after, _waiting=*, _queued=*) except -1

@cython.locals(current=CNode)
cpdef deliver_cancel(TaskState task)

@cython.locals(depth=Py_ssize_t, op=CNode, node=CNode)
cpdef note_cancel(TaskState task)

@cython.locals(task=TaskState, waker=TaskState, first=bint, stamp=bint, native=bint, inline=Py_ssize_t,
               start=double, now=double)
cpdef step(CKernel runtime, CNode op, CThreadState state, CCpuMeter meter, _value=*)

cpdef _raised(TaskState task, BaseException exc, CThreadState state, CCpuMeter meter, double start)

cpdef _ended(TaskState task, at, _value=*)

cpdef _end_raised(TaskState task, BaseException exc, bint strip, at, _cancelled=*)

cpdef bint _hand_in(coro, BaseException error, CThreadState state) except -1

cpdef _checkpoint(CKernel runtime, TaskState task, CThreadState state)

@cython.locals(native=bint)
cpdef _first_coroutine(TaskState task, CNode op, ctx, CCpuMeter meter, double start)

cpdef _resumed(TaskState task, error)

cpdef _fail(TaskState task, BaseException exc, bint strip=*)

@cython.locals(waker=TaskState, sub=CSubscription, locked=bint, entry_checked=object)
cpdef tuple _wait_on(TaskState task, ev, Py_ssize_t inline)

@cython.locals(waker=TaskState)
cpdef tuple _suspend_locked(TaskState task, bint cancellable)

@cython.locals(held=list, op=CNode, rare=CRare, ended=bint)
cpdef _finish(TaskState task, outcome, value, error, at=*, _value=*, _cancelled=*)
