# C declarations for the compiled form of _hooks.py (see _fields.pxd): the
# compiled node and runtime run what they collected under the runtime lock
# with a C call.

from asyncop.operations._guard cimport run_isolated


cpdef run_after(after)
