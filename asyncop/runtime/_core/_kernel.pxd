# C declarations for the compiled form of _kernel.py (see _waker.pxd): the
# types that cython.locals() names in the .py, for the timers, the end of an
# operation and its cancel, which calls on_cancel_running in C. (The push of
# a task is push_locked, in _waker.py.)

from asyncop.runtime._core._fields cimport KernelFields as CKernel
from asyncop.operations._fields cimport OperationFields as CNode
from asyncop.operations._fields cimport RareFields as CRare
from asyncop.runtime._core._task cimport on_cancel_running
from asyncop.runtime._core._timer_calls cimport TimerCalls as CTimerCalls
from asyncop.runtime._core._timers cimport Timer as CTimer
