# C declarations for the compiled form of _spawn.py (see _waker.pxd): making
# an operation reads the kernel's fields, the thread's state and the nodes'
# fields in C. NodeHooks overrides the node's calls of RuntimeBase (see
# asyncop/operations/_owner.pxd) with C methods.

cimport cython

from asyncop.operations cimport _current
from asyncop.operations._current cimport ThreadState as CThreadState
from asyncop.operations._fields cimport OperationFields as CNode
from asyncop.operations._fields cimport RareFields as CRare
from asyncop.operations._node cimport _user_frame
from asyncop.operations._hooks cimport run_after
from asyncop.platform cimport _gc
from asyncop.runtime._core._task cimport on_cancel_running
from asyncop.runtime._core._timer_calls cimport TimerCalls
from asyncop.runtime._core._waker cimport push_locked


# The node's calls on its runtime (RuntimeBase's), overridden in C.
cdef class NodeHooks(TimerCalls):
    @cython.locals(state=CThreadState, depth=int, op=CNode, node=CNode)
    cpdef _new_operation(self, fn, args, parent, name, submit=*, supervise=*, kind=*, shield=*,
                         seed_shape=*, task=*, _coro=*, _sync=*, _scope=*, _pending=*, _running=*,
                         _agen=*, _async=*)

    @cython.locals(node=CNode, rare=CRare)
    cpdef _on_final_locked(self, op, after, at=*)

    @cython.locals(node=CNode)
    cpdef bint _on_cancel_running_locked(self, op, after, _running=*) except -1


@cython.locals(scope=bint)
cdef _set_up(CNode op, task, bint supervise, bint shield, _scope=*)


@cython.locals(first=CNode, last=CNode)
cpdef link_new_locked(self, CNode op, CNode parent, bint shield, bint submit, CThreadState state, woken,
                      bint queue=*, _scope=*, _cancelled=*, _created=*, _coro=*)
