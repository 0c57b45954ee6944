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
       its value in *out once it returns; 2 and what it raised in *out,
       taken out of the thread's error state with its traceback, so that no
       C function on the way adds a frame of its own to it; -1 with an
       exception set, if the context could not be entered or left. */
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
        if (sent == PYGEN_ERROR) {
            PyObject *type, *error, *tb;
            PyErr_Fetch(&type, &error, &tb);
            PyErr_NormalizeException(&type, &error, &tb);
            if (tb != NULL && error != NULL)
                PyException_SetTraceback(error, tb);
            Py_XDECREF(type);
            Py_XDECREF(tb);
            if (error == NULL) {  /* (cannot happen: a send that fails sets an error) */
                PyErr_SetString(PyExc_SystemError, "a coroutine's send failed with no exception");
                return -1;
            }
            *out = error;
            return 2;
        }
        return sent == PYGEN_RETURN;
    }
    """
    int asyncop_send_in(object ctx, object coro, object value, PyObject** out) except -1


cdef inline object send_in(object ctx, object coro, object value, object holder, object returned):
    cdef PyObject* out
    cdef int ended = asyncop_send_in(ctx, coro, value, &out)
    result = <object>out
    Py_DECREF(result)  # (the reference the send handed over, now held by result)
    if ended == 1:
        holder.result = result
        return returned
    if ended:
        holder.error = result
        return returned
    return result
