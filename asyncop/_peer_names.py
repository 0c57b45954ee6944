"""What a name from trio, anyio or asyncio is called in asyncop.

``asyncop.run(main)``, ``asyncop.open_nursery()`` or ``asyncop.gather(...)``
are the first lines a user of those libraries writes, and a bare
``AttributeError`` leaves them to search the docs. :func:`missing` builds the
error ``asyncop``'s module ``__getattr__`` raises: for a name in
:data:`HINTS`, one that says what to write instead; for any other name,
Python's own message. Either is an ``AttributeError`` with ``name`` and
``obj`` set, so ``hasattr`` and Python's "did you mean" still work.
The names of :data:`SUBMODULES` are not missing: the module ``__getattr__``
imports them.
"""

from __future__ import annotations

from types import ModuleType

__all__ = ["HINTS", "SUBMODULES", "missing"]

#: The public submodules that ``asyncop.<name>`` imports on first use, so that
#: ``asyncop.net.open_tcp_stream`` works after a plain ``import asyncop``, as
#: ``trio.lowlevel`` does after ``import trio``. Not the ones that need an
#: optional extra (``anyio``, ``otel``, ``dask``): a missing package would
#: make ``hasattr(asyncop, ...)`` raise ImportError.
SUBMODULES = frozenset({"asyncio_bridge", "fs", "lowlevel", "net", "process", "signals", "testing"})

_SCOPE = "open a scope and spawn into it: 'async with asyncop.scope() as s: s.spawn(fn, *args)'"
_CHANNEL = "use asyncop.Channel(capacity), with channel.sender() and channel.receiver() for ends"
_TCP = "use asyncop.net.open_tcp_stream(host, port)"
_LISTEN = "use asyncop.net.serve_tcp(handler, port) or asyncop.net.open_tcp_listeners(port)"
_PROCESS = "use asyncop.process.open_process(argv) or asyncop.process.run_process(argv)"
_THREAD = "await asyncop.spawn_blocking(fn, *args) instead"
_SPAWN = "spawn it: 'asyncop.current_operation().spawn(fn, *args)', or into a scope"

#: Each name from trio, anyio or asyncio that asyncop spells otherwise, and
#: what to write instead (a clause that starts with what to do).
HINTS: dict[str, str] = {
    "run": "make a Runtime and call its run(): "
    "'with asyncop.Runtime() as runtime: runtime.run(main)'",
    "open_nursery": _SCOPE,
    "create_task_group": _SCOPE,
    "TaskGroup": _SCOPE,
    "gather": _SCOPE + ", then read each operation's result()",
    "create_task": _SPAWN,
    "start_soon": _SPAWN,
    "CancelScope": "use 'async with asyncop.move_on_after(math.inf) as cs:' and cs.cancel(), "
    "or asyncop.scope(shield=True) for a shield",
    "shield": "use 'async with asyncop.scope(shield=True):' around the code to protect",
    "wait_for": "use 'async with asyncop.fail_after(seconds):', "
    "or 'await asyncop.timeout(seconds, op)' on a spawned operation",
    "get_cancelled_exc_class": "use asyncop.Cancelled",
    "CancelledError": "use asyncop.Cancelled",
    "current_task": "use asyncop.current_operation()",
    "current_effective_deadline": "use asyncop.lowlevel.effective_deadline()",
    "to_thread": _THREAD,
    "run_sync": _THREAD,
    "open_memory_channel": _CHANNEL,
    "create_memory_object_stream": _CHANNEL,
    "Queue": _CHANNEL,
    "open_tcp_stream": _TCP,
    "connect_tcp": _TCP,
    "open_connection": _TCP,
    "serve_tcp": _LISTEN,
    "create_tcp_listener": _LISTEN,
    "start_server": _LISTEN,
    "open_process": _PROCESS,
    "run_process": _PROCESS,
    "create_subprocess_exec": _PROCESS,
}


def missing(module: ModuleType, name: str) -> AttributeError:
    """The error for ``module.name``, which does not exist."""
    hint = HINTS.get(name)
    if hint is None:
        return AttributeError(
            f"module {module.__name__!r} has no attribute {name!r}", name=name, obj=module
        )
    return AttributeError(
        f"module {module.__name__!r} has no attribute {name!r}; {hint}", name=name, obj=module
    )
