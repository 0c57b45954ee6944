# C declarations for the compiled form of _errors.py (see _fields.pxd): the
# runtime's core makes the Cancelled it raises into a task with a C call.
# The exception classes stay Python classes.

cpdef cancelled_for(name, reason)
