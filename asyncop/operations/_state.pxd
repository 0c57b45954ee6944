# C declarations for the compiled form of _state.py (see _fields.pxd): the
# transitions read and write the node's fields in C.

cimport cython

from asyncop.operations._fields cimport OperationFields as Node
from asyncop.operations._fields cimport RareFields as Rare


cpdef bint transition_to_pending(Node self, _created=*, _pending=*) except -1
cpdef bint transition_to_running(Node self, at=*, _pending=*, _running=*) except -1
@cython.locals(rare=Rare)
cpdef bint transition_to_final(Node self, state, error, bint taken_over, report, _completed=*) except -1
