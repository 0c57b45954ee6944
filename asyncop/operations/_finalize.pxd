# C declarations for the compiled form of _finalize.py (see _fields.pxd):
# the end of the work and the climb read and write the nodes' fields in C.

cimport cython

from asyncop.operations._fields cimport OperationFields as Node
from asyncop.operations._hooks cimport run_after
from asyncop.operations._state cimport transition_to_final
from asyncop.platform cimport _gc


cpdef end_work_on_worker(Node self, outcome, value, error, at=*)

cpdef bint transition_to_ended(Node self, outcome, value, error, after=*, at=*, _cancelled=*, _error=*) except -1

@cython.locals(node=Node, parent=Node, kept=Node, prev=Node, nxt=Node, first=Node)
cpdef try_finalize_locked(Node self, after, at=*, _value=*, _error=*, _scope=*, _completed=*, _failed=*, _cancelled=*)

cpdef _wake_waiters_locked(Node node, after)

@cython.locals(above=Node)
cpdef _drop_kept_links(Node kept, Node end)

cpdef bint _taken_over(Node node, Node parent, error) except -1
