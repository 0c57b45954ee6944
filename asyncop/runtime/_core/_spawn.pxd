# C declarations for the compiled form of _spawn.py (see _waker.pxd): making
# an operation reads the thread's state in C.

cimport cython

from asyncop.operations._current cimport ThreadState as CThreadState


@cython.locals(state=CThreadState, depth=int)
cpdef new_operation(self, fn, args, parent, name, submit=*, supervise=*, kind=*, shield=*,
                    seed_shape=*, task=*, _coro=*, _sync=*, _scope=*, _pending=*, _running=*)
