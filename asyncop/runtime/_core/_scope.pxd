# C declarations for the compiled form of _scope.py (see _waker.pxd): a
# scope's entry makes its operation with a C call to new_operation. (Scope
# stays a Python class: its exit is a descriptor, see _abandon.py.)

from asyncop.runtime._core._spawn cimport new_operation
