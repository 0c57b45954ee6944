# C declarations for the compiled form of _event.py (see _waker.pxd).
# WaitEvent is an extension type, so that the runtime's own events (a
# scope's wait for its children, a socket's) extend it as extension types
# made without a call of their class. (The finalizer is Watched's.)

cimport cython

from asyncop.operations._suspend cimport Watched


@cython.auto_pickle(False)
cdef class WaitEvent(Watched):
    pass
