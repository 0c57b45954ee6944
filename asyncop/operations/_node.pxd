# C declarations for the compiled form of _node.py (see _fields.pxd): none
# of its own. The node's fields are its base's, OperationFields, whose C
# struct the runtime's core reads; AsyncOperation adds only methods. Those
# that name their node's type as CNode (cython.locals) read its fields,
# and call its runtime's (RuntimeBase's), in C.

from asyncop.operations._fields cimport OperationFields as CNode
from asyncop.operations._hooks cimport run_after
