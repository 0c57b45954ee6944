# C declarations for the compiled form of _event.py (see _waker.pxd). The
# module's functions compile to C; WaitEvent stays a Python class.
