# C declarations for the compiled form of _scope.py (see _waker.pxd): a
# scope's fields are the members of an extension type, which scope(), its
# entry and its exit read in C, with the thread's state, the task's and the
# operation's, and the entry makes the operation with a C call to the
# kernel's _new_operation. (Scope itself, the Python subclass that adds the
# methods, can take the public module's name.)

cimport cython

from asyncop.operations cimport _current
from asyncop.operations._current cimport ThreadState as CThreadState
from asyncop.operations._fields cimport OperationFields as CNode
from asyncop.operations._errors cimport cancelled_for
from asyncop.runtime._core._block cimport _running_task, enter_in_task
from asyncop.runtime._core._scope_task cimport raised_clean, scope_done
from asyncop.runtime._core._spawn cimport NodeHooks
from asyncop.runtime._core._task cimport TaskState as CTask


@cython.auto_pickle(False)
cdef class ScopeFields:
    cdef public object _deadline
    cdef public object _ident
    cdef public object _name
    cdef public object _op
    cdef public object _parent
    cdef public object _runtime
    cdef public object _saved
    cdef public object _shield
    cdef public object _supervise
    cdef public object _timeout
    cdef public object _watch


# Scope.__init__'s work, which scope() calls in C on a scope it allocates.
cdef _set_up(ScopeFields scope, runtime, name, timeout, deadline, shield, supervise)

cpdef _verdict(ScopeFields scope, CNode op, exc, interrupt, _failed=*)
