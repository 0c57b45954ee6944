# C declarations for the compiled form of _node.py (see _fields.pxd): none
# of its own. The node's fields are its base's, OperationFields, whose C
# struct the runtime's core reads; AsyncOperation adds only methods.
