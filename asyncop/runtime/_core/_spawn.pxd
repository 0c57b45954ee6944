# C declarations for the compiled form of _spawn.py (see _waker.pxd): making
# an operation reads the kernel's fields, the thread's state and the nodes'
# fields in C.

cimport cython

from asyncop.operations._current cimport ThreadState as CThreadState
from asyncop.operations._fields cimport OperationFields as CNode
from asyncop.runtime._core._fields cimport KernelFields as CKernel
from asyncop.runtime._core._waker cimport push_locked


@cython.locals(state=CThreadState, depth=int, op=CNode, node=CNode)
cpdef new_operation(CKernel self, fn, args, parent, name, submit=*, supervise=*, kind=*, shield=*,
                    seed_shape=*, task=*, _coro=*, _sync=*, _scope=*, _pending=*, _running=*,
                    _agen=*, _async=*)

@cython.locals(last=CNode)
cpdef link_new_locked(self, CNode op, CNode parent, bint shield, bint submit, CThreadState state, woken,
                      bint queue=*, _scope=*, _cancelled=*, _created=*)
