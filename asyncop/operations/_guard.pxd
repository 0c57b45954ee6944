# C declarations for the compiled form of _guard.py (see _fields.pxd): the
# actions collected under the runtime lock run from a C loop, which the
# compiled node and runtime call in C (through run_after, _hooks.pxd).

cpdef run_isolated(actions, what)
