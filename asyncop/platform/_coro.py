"""Resuming a coroutine in a context: what the stepper sends a task.

``send_in(ctx, coro, value, holder, returned)`` sends ``value`` into
``coro`` with ``ctx`` as the current context, as ``ctx.run(coro.send,
value)`` does, and returns what the coroutine yielded. When the coroutine
returns instead, it sets ``holder.result`` to the coroutine's value and
returns ``returned``, a marker of the caller's own that no coroutine can
yield; when it raises, it sets ``holder.error`` to the exception and
returns ``returned`` too. Run as Python, the return is a ``StopIteration``
caught here. Compiled, the modules that use it cimport ``_coro.pxd``
instead, whose function of the same name sends through CPython's
``PyIter_Send``: a return raises nothing, which saves making, raising and
catching the exception at the end of every task, and an exception is taken
as it leaves the coroutine, before any compiled caller adds a frame of its
own to its traceback (each costs a frame object, made and freed).
"""

from __future__ import annotations

from contextvars import Context
from types import CoroutineType
from typing import Any

__all__ = ["send_in"]

_SEND = CoroutineType.send


def send_in(ctx: Context, coro: Any, value: Any, holder: Any, returned: Any) -> Any:
    """What ``coro`` yielded; or ``returned``, once it returned (``holder.result``) or raised.

    What it raised is in ``holder.error``.
    """
    try:
        return ctx.run(_SEND, coro, value)
    except StopIteration as stop:
        holder.result = stop.value
        return returned
    except BaseException as exc:
        holder.error = exc
        return returned
