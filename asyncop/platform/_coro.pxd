# The C version of _coro.py's send_in, for the compiled modules that cimport
# it (see asyncop/runtime/_core/_task.pxd): CPython's PyIter_Send inside the
# context, called in C, so that a coroutine's return raises no StopIteration.
# Header only: _coro.py itself is not compiled.

from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF


cdef extern from *:
    """
    /* Send value into coro with ctx as the current context, as
       ctx.run(coro.send, value) does. 0 and what it yielded in *out; 1 and
       its value in *out once it returns; -1 with an exception set. */
    static int asyncop_send_in(PyObject *ctx, PyObject *coro, PyObject *value,
                               PyObject **out) {
        PySendResult sent;
        *out = NULL;
        if (PyContext_Enter(ctx) < 0)
            return -1;
        sent = PyIter_Send(coro, value, out);
        if (PyContext_Exit(ctx) < 0) {
            Py_CLEAR(*out);
            return -1;
        }
        if (sent == PYGEN_ERROR)
            return -1;
        return sent == PYGEN_RETURN;
    }
    """
    int asyncop_send_in(object ctx, object coro, object value, PyObject** out) except -1


cdef inline object send_in(object ctx, object coro, object value, object holder, object returned):
    cdef PyObject* out
    cdef int ended = asyncop_send_in(ctx, coro, value, &out)
    result = <object>out
    Py_DECREF(result)  # (the reference the send handed over, now held by result)
    if ended:
        holder.result = result
        return returned
    return result
