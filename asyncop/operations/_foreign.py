"""Telling asyncop's awaitables apart from other event loops' objects.

An ``async def`` function does not say which event loop it needs, so
asyncop, asyncio, trio and anyio code look alike until they run. Each loop
then fails in its own way when it meets another's object: asyncio says
"Task got bad yield", trio "received unrecognized yield message", and the
foreign code called inside an asyncop task says "no running event loop" or
"must be called from async context". This module turns each of those into
one ``TypeError`` that names the object, the loop it belongs to, and the
way across (``asyncop.anyio``; for asyncio code in an asyncop task,
``asyncop.asyncio_bridge`` too):

- :func:`foreign_yield_error`: a task yielded something that is not an
  asyncop event (an asyncio Future or Task, a bare ``yield``...).
- :func:`awaited_outside_error`: an asyncop awaitable was awaited by some
  other loop (it receives the error that loop threw back in).
- :func:`foreign_failure`: a task ends with the error foreign code raised
  because no loop of its own was running.
- :func:`outside_advice`: what to do instead, for a call that needs an
  asyncop operation (``async with asyncop.scope()``, ``move_on_after()``,
  ``current_time()``...) made in another loop's task, where "call it from an
  operation's code" would not help.

Nothing here runs on a hot path: each function is called once something
has already gone wrong.
"""

from __future__ import annotations

import sys
from types import FrameType, TracebackType

from ._guard import safe_repr

__all__ = [
    "awaited_outside_error",
    "foreign_failure",
    "foreign_yield_error",
    "outside_advice",
    "running_loop",
]

# Top-level packages whose objects and failures belong to another loop.
_FOREIGN = {
    "asyncio": "asyncio",
    "_asyncio": "asyncio",
    "trio": "trio",
    "anyio": "anyio",
    "sniffio": "anyio",
    "curio": "curio",
    "tornado": "tornado",
    "twisted": "twisted",
    "gevent": "gevent",
    "uvloop": "asyncio",
}

_WAY_ACROSS = (
    "from asyncio or trio code use asyncop.anyio ('await asyncop.anyio.spawn(fn)' to run "
    "asyncop work, 'await asyncop.anyio.wait(op)' to wait for an operation)"
)
# The way the other way round, for asyncio code met in an asyncop task.
_ASYNCIO_FROM_TASK = (
    "; an asyncop task runs asyncio code (asyncio-only libraries) on its runtime's host "
    "loop with 'await asyncop.asyncio_bridge.run(fn, *args)'"
)


def running_loop() -> str | None:
    """The name of the event loop (other than asyncop) running in this thread, if any."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        try:
            if asyncio._get_running_loop() is not None:
                return "asyncio"
        except Exception:  # pragma: no cover - asyncio half torn down at exit
            pass
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_task()
        except Exception:
            pass
        else:
            return "trio"
    return None


def _loop_of_type(obj: object) -> str | None:
    try:
        # (trio yields some of its messages as classes, not instances.)
        module = (obj if isinstance(obj, type) else type(obj)).__module__
    except BaseException:
        return None
    return _FOREIGN.get(module.partition(".")[0]) if isinstance(module, str) else None


def awaited_outside_error(what: str, thrown: BaseException | None = None) -> TypeError:
    """The error for an asyncop awaitable awaited by something other than an asyncop task.

    Args:
        what: the awaitable, as its ``_describe()`` or ``repr`` shows it.
        thrown: what the foreign loop threw back into the awaitable, if anything.
    """
    loop = running_loop()
    if loop is None and thrown is not None:
        loop = _loop_of_type(thrown)
    where = f"under {loop}" if loop is not None else "outside an asyncop task"
    error = TypeError(
        f"asyncop awaitable {what} was awaited {where}, which cannot run it; asyncop "
        f"awaitables only run in tasks of an asyncop Runtime: {_WAY_ACROSS}"
    )
    return error


def outside_advice(advice: str) -> str:
    """``advice``, or the way across when another event loop runs in this thread.

    For the errors of calls that need a running asyncop operation: under
    asyncio or trio, the caller is in that loop's task, and only
    ``asyncop.anyio`` gets it to asyncop code.
    """
    loop = running_loop()
    if loop is None:
        return advice
    return f"it is in a task of {loop}, which cannot run asyncop code: {_WAY_ACROSS}"


def foreign_yield_error(obj: object, task_name: str) -> TypeError:
    """The error thrown into task ``task_name``, which yielded ``obj`` to asyncop."""
    if obj is None:
        what = "a bare yield (what asyncio.sleep(0) or a generator-based coroutine makes)"
        loop: str | None = "asyncio"
    else:
        what = safe_repr(obj)
        loop = _loop_of_type(obj)
    owner = f"which belongs to {loop}, not asyncop" if loop else "which asyncop cannot wait on"
    return TypeError(
        f"coroutine operation {task_name!r} awaited {what}, {owner}; an asyncop task can "
        "only await asyncop awaitables (asyncop.sleep(), an operation, "
        "channel.recv_async()...), or run blocking code with asyncop.spawn_blocking(); "
        f"to use another loop's code, run it on that loop and {_WAY_ACROSS}"
        + (_ASYNCIO_FROM_TASK if loop == "asyncio" else "")
    )


def _module_of(frame: FrameType) -> str:
    name = frame.f_globals.get("__name__", "")
    return name if isinstance(name, str) else ""


# Failures for want of a loop that leave no frame of the loop's package in
# the traceback: raised by a C function (asyncio's), or by a library that
# asked sniffio for the running library, got "asyncop", and refused it.
# Message -> (the package whose innermost frame must have raised it, or
# None for any, the loop, the call named).
_KNOWN_MESSAGES = {
    "no running event loop": (None, "asyncio", "asyncio.get_running_loop()"),
    "Running under an unsupported async environment.": (
        "httpcore",
        "asyncio",
        "httpx's transport (httpcore)",
    ),
}


def _known_failure(exc: BaseException) -> tuple[str, str] | None:
    """``(loop, call)`` when ``exc`` is a known failure for want of a loop; else None."""
    if type(exc) is not RuntimeError or len(exc.args) != 1:
        return None
    known = _KNOWN_MESSAGES.get(exc.args[0]) if isinstance(exc.args[0], str) else None
    if known is None:
        return None
    package, loop, call = known
    if package is not None:
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is None or _module_of(tb.tb_frame).partition(".")[0] != package:
            return None
    return loop, call


def foreign_failure(exc: BaseException) -> BaseException:
    """``exc``, or a TypeError in its place if foreign code raised it for want of its loop.

    A RuntimeError raised inside asyncio, trio, anyio (or sniffio) code
    called from an asyncop task means that code looked for its own loop and
    found none: the message it carries ("no running event loop") says
    nothing of asyncop. So does an AttributeError on None there (an
    ``asyncio.Event`` takes None for its loop and fails on it), and a
    RuntimeError of a known message raised where no such frame is left
    (``asyncio.get_running_loop()``, httpx's transport). The
    TypeError names the call and the way across, with the original as its
    cause.
    """
    if not isinstance(exc, RuntimeError) and not (
        isinstance(exc, AttributeError) and "'NoneType'" in safe_repr(exc)
    ):
        return exc
    tb: TracebackType | None = exc.__traceback__
    entry: FrameType | None = None  # the outermost frame of the innermost foreign run
    loop: str | None = None
    while tb is not None:
        frame = tb.tb_frame
        owner = _FOREIGN.get(_module_of(frame).partition(".")[0])
        if owner is None:
            entry = None
            loop = None
        elif entry is None:
            entry = frame
            loop = owner
        tb = tb.tb_next
    if entry is None or loop is None:
        known = _known_failure(exc)
        if known is None:
            return exc
        loop, call = known
    else:
        package = _module_of(entry).partition(".")[0].lstrip("_")
        call = f"{package}.{entry.f_code.co_qualname}()"
    error = TypeError(
        f"{call} needs a running {loop} event loop, and an asyncop task is not one "
        f"(it raised {safe_repr(exc)}); an asyncop task can only await asyncop awaitables "
        f"(asyncop.sleep(), an operation, channel.recv_async()...): {_WAY_ACROSS}"
        + (_ASYNCIO_FROM_TASK if loop == "asyncio" else "")
    )
    error.__cause__ = exc
    return error.with_traceback(exc.__traceback__)
