cimport cython

# C declarations for the compiled form of _waker.py (Cython's pure-Python
# mode: this file types the classes and locals of the .py beside it, which
# runs unchanged as Python). The waker and its subscriptions are extension
# types, so that the stepper reads and writes their fields in C. A waker's
# runtime (its task's) is the kernel's fields: a wake reads them in C too, and so does
# the push, which the step, a spawn and a wake call in C.

from asyncop.operations cimport _current
from asyncop.operations._current cimport ThreadState as CThreadState
from asyncop.operations._fields cimport OperationFields as CNode
from asyncop.runtime._core._fields cimport KernelFields
from asyncop.runtime._core._fields cimport WorkerFields as CWorker

cdef unsigned long _WRAP

# Four fields: the commonest subscription (a task's await, which resolves)
# fits 64 bytes; one with another callback is a CallbackSubscription.
cdef class Subscription:
    cdef public Waker waker
    cdef public object event
    cdef public unsigned int generation
    cdef public object handle


@cython.final
cdef class CallbackSubscription(Subscription):
    cdef object _callback


# The runtime is the task's (its operation's): no field of its own. The
# two counters are 32-bit and wrap (see _waker.py): the task state that
# extends the waker fits a smaller allocator size class.
cdef class Waker:
    cdef public CNode task
    cdef public object status
    cdef public object _subs
    cdef public object triggered
    cdef public object result
    cdef public object error
    cdef public unsigned int generation
    cdef public unsigned int queued_at

    cpdef bint _transition_to_no_status(self, _no_status=*, _result=*)
    cpdef bint _transition_to_waiting(self, _no_status=*, _waiting=*)
    cpdef bint _transition_to_queued(self, _waiting=*, _queued=*)
    cpdef bint _transition_to_requeued(self, _no_status=*, _result=*, _queued=*)
    cpdef bint _transition_to_result_early(self, _no_status=*, _result=*)
    cpdef bint _transition_to_ignored(self, _result=*, _ignored=*)
    cpdef bint _transition_to_result(self, _queued=*, _result=*)
    @cython.locals(runtime=KernelFields, op=CNode)
    cpdef bint _complete(self, Subscription sub, result, error)
    @cython.locals(sub=Subscription)
    cpdef Subscription _new_wait(self, event, callback)
    cpdef _disarm_all(self)


cdef _take_back(Subscription sub)

cdef set_up_subscription(Subscription sub, Waker waker, event)

cpdef set_up_waker(Waker waker, CNode task, _no_status=*)

cpdef Subscription subscription(Waker waker, event, callback)

@cython.locals(task=Waker, worker=CWorker)
cpdef push_locked(KernelFields runtime, CNode op, CThreadState state=*, CWorker woken=*,
                  bint resumed=*, _coro=*, _busy=*)
