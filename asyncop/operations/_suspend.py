"""The one generator every asyncop awaitable suspends its task in.

``await event`` calls ``event.__await__()``, which returns
``suspend(yielded, event)``: the generator yields ``yielded`` (the event
itself, or ``CHECKPOINT``) to the worker stepping the task, and returns
what the worker sends back once the wait is over. A wait that ends with an
error is sent ``RAISE`` instead, and the error (in the worker's
``thread_state().thrown_in``) is raised here, in the innermost frame of the
task: there it chains to the exception being handled where the task waits,
as in trio. A ``coro.throw()`` would set the context again in every frame it
passes, and end with the outermost one. The worker recognises this
generator by its code object (``SUSPEND_CODE``) before it sends ``RAISE``.

Compiled, this generator is not a ``types.GeneratorType`` but Cython's
generator type, and asyncop's own ``async def`` functions make Cython's
coroutines: ``OWN_GENERATOR`` and ``OWN_COROUTINE`` are the types of
asyncop's own generators and coroutines either way, for the worker's walk
down a task's await chain.

The same generator refuses another event loop: asyncio and trio throw an
error back at an object they cannot run, which becomes a TypeError naming
the awaitable and ``asyncop.anyio``.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ._current import RAISE, _thread_local, thread_state
from ._foreign import awaited_outside_error

__all__ = ["OWN_COROUTINE", "OWN_GENERATOR", "SUSPEND_CODE", "suspend"]


def suspend(yielded: Any, awaited: Any) -> Generator[Any, Any, Any]:
    """Yield ``yielded`` to the stepping worker; return what it sends back.

    ``awaited`` is what the task awaits, described (``_await_description()``)
    when a foreign loop refuses it.

    Raises:
        BaseException: the error the wait ended with.
        TypeError: awaited outside an asyncop task.
    """
    try:
        value = yield yielded
    except (RuntimeError, TypeError) as exc:
        # What asyncio ("Task got bad yield") and trio ("unrecognized yield
        # message") throw back at an object they cannot run. An asyncop task
        # is stepped with thread_state().task set.
        if thread_state().task is None:
            raise awaited_outside_error(awaited._await_description(), exc) from None
        raise
    if value is RAISE:
        state = _thread_local.state  # (the worker that sent RAISE set it)
        error = state.thrown_in
        state.thrown_in = None
        try:
            raise error
        finally:
            del error, state
    return value


SUSPEND_CODE = suspend.__code__


async def _own_coroutine() -> None:
    """Never run: its coroutine's type is that of asyncop's own coroutines."""


def _own_types() -> tuple[type, type]:
    generator = suspend(None, None)
    coroutine = _own_coroutine()
    try:
        return type(generator), type(coroutine)
    finally:
        generator.close()
        coroutine.close()


# types.GeneratorType and types.CoroutineType, or Cython's when compiled.
OWN_GENERATOR, OWN_COROUTINE = _own_types()
