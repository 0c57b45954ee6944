# C declarations for the compiled form of _node.py (see _fields.pxd): the
# walk that finds the user's frame, in C. The node's fields are its base's, OperationFields, whose C
# struct the runtime's core reads; AsyncOperation adds only methods. Those
# that name their node's type as CNode (cython.locals) read its fields,
# and call its runtime's (RuntimeBase's), in C.

from asyncop.operations._fields cimport OperationFields as CNode
from asyncop.operations._hooks cimport run_after
from asyncop.platform cimport _frames

cimport cython

# The user's code found last: a C variable.
cdef object _last_user_code

# Called in C by the runtime as it makes an operation (_spawn.pxd); the
# frames are read in C (asyncop/platform/_frames.pxd).
@cython.locals(known=tuple)
cpdef tuple _user_frame(int depth=*)
