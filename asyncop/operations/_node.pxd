# C declarations for the compiled form of _node.py (see _fields.pxd): the
# type that cython.locals() names in the .py, for linking a child.

from asyncop.operations._fields cimport OperationFields as Node
