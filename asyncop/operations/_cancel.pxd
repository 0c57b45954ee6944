# C declarations for the compiled form of _cancel.py (see _fields.pxd): the
# cancel walk reads and writes the nodes' fields in C.

cimport cython

from asyncop.operations._fields cimport OperationFields as Node
from asyncop.operations._fields cimport RareFields as Rare
from asyncop.operations._hooks cimport run_after


@cython.locals(node=Node, child=Node, nxt=Node, stack=list, unstarted=list, redo=bint)
cpdef cancel_locked(Node self, reason, after, bint again=*, _running=*, _cancelled=*, _remote=*)

cpdef expire(Node self)

@cython.locals(target=Node, node=Node)
cpdef expire_locked(Node self, after)

@cython.locals(rare=Rare)
cpdef bint cancel_token_locked(Node self, after) except -1

cpdef finish_token_cancel_locked(Node self, after)
