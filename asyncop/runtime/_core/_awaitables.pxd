# C declarations for the compiled form of _awaitables.py (see _waker.pxd):
# the types that cython.locals() names in the .py, so that a sleep reads its
# subscription, its runtime and its timer in C, and arms and cancels its
# timer with C calls on the kernel's base (TimerCalls, _timer_calls.pxd).

from asyncop.operations._suspend cimport suspend_on_constant
from asyncop.runtime._core._timer_calls cimport TimerCalls
from asyncop.runtime._core._timers cimport Timer as CTimer
from asyncop.runtime._core._waker cimport Subscription as CSubscription
