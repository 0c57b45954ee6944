"""Names of the sync primitives: the one given, or where the primitive was made.

Every primitive (``Event``, ``Lock``, ``Semaphore``, ``Condition``,
``CapacityLimiter``, ``Channel``) takes ``name=None``. ``dump()``, the
deadlock report, error messages and ``repr`` show it; an unnamed primitive
shows where it was made instead, the ``file:line`` of the user's
constructor call::

    lock 'db'                       # Lock(name="db")
    event (made at app.py:12)       # Event() on line 12 of app.py

Finding that line costs one frame lookup at construction: the code object
and instruction offset of the first frame outside asyncop (and outside
anyio, whose classes make asyncop's primitives for their users). The line
number is worked out from them only when somebody reads it, as for an
operation's ``lineno``.

In a task the walk ends with the task's coroutine: the frames past it step
the task and made nothing (on the thread of ``anyio.run()``, which steps
its tasks, they end in the user's line that called it, a wrong answer). A
task whose code is anyio's alone (``start_soon(receive_stream.receive)``)
shows the innermost line of anyio's instead.
"""

from __future__ import annotations

import inspect
import sys
from types import CodeType, FrameType

from ...operations import line_of

__all__ = [
    "Site",
    "check_name",
    "label",
    "made_at",
    "short_label",
    "site_of_frame",
    "site_text",
]

#: Where something was made: the user's code object and instruction offset.
Site = tuple[CodeType | None, int]

_NOWHERE: Site = (None, 0)
_getframe = sys._getframe

# What a frame's code is, for the walk: the user's, asyncop's (or
# threading's), or anyio's.
_USER, _OURS, _ANYIO = 0, 1, 2
# Frames of these kinds run a task's coroutines; a generator's may sit
# between two of them (a yield from in an __await__).
_COROUTINE = inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE | inspect.CO_ASYNC_GENERATOR
_IN_TASK = _COROUTINE | inspect.CO_GENERATOR
# id(code) -> (code, its kind); the entry keeps the code alive, so its id
# is not reused meanwhile. Emptied past _KNOWN_MAX.
_known: dict[int, tuple[CodeType, int]] = {}
_KNOWN_MAX = 4096


def _kind(frame: FrameType) -> int:
    code = frame.f_code
    known = _known.get(id(code))
    if known is None or known[0] is not code:
        module = frame.f_globals.get("__name__", "")
        top = module.split(".", 1)[0] if isinstance(module, str) else ""
        kind = (
            _ANYIO
            if top == "anyio"
            else _OURS
            if top == "asyncop" or module == "threading"
            else _USER
        )
        if len(_known) >= _KNOWN_MAX:
            _known.clear()
        known = _known[id(code)] = (code, kind)
    return known[1]


def site_of_frame(frame: FrameType | None) -> Site:
    """The first frame from ``frame`` outward that is the user's, as a ``Site``.

    The walk stops past the outermost coroutine frame (see the module
    docstring), where it gives the innermost frame of anyio's it met, if any.
    """
    in_task = False
    anyio_site = _NOWHERE
    while frame is not None:
        flags = frame.f_code.co_flags
        if in_task and not flags & _IN_TASK:
            return anyio_site  # (past the task's coroutines: the code stepping it)
        kind = _kind(frame)
        if kind == _USER:
            return frame.f_code, frame.f_lasti
        if kind == _ANYIO and anyio_site is _NOWHERE:
            anyio_site = frame.f_code, frame.f_lasti
        if flags & _COROUTINE:
            in_task = True
        frame = frame.f_back
    return anyio_site


def made_at(depth: int) -> Site:
    """Where the user's code made what is being made; ``depth`` frames up is the usual place.

    Counted from the caller of this function: 1 is the constructor's caller.
    """
    try:
        frame: FrameType | None = _getframe(depth + 1)
    except ValueError:  # pragma: no cover - called from the bottom of a stack
        return _NOWHERE
    return site_of_frame(frame)


def site_text(site: Site) -> str:
    """``file:line`` of ``site``, or ``an unknown place``."""
    code, lasti = site
    if code is None:
        return "an unknown place"
    return f"{code.co_filename}:{line_of(code, lasti)}"


def check_name(name: object, what: str) -> str | None:
    """``name`` if it is a str or None; a TypeError naming ``what`` otherwise."""
    if name is None or isinstance(name, str):
        return name
    raise TypeError(
        f"{what}(name=...) needs a str or None, got {type(name).__name__}; "
        "pass a short name such as name='db', or leave it out"
    )


def label(kind: str, name: str | None, site: Site, *details: str) -> str:
    """How a primitive is shown, with what else is worth saying about it now.

    ``lock 'db' (held by task 'b')``, or for an unnamed one
    ``lock (made at app.py:12; held by task 'b')``.
    """
    if name is None:
        details = (f"made at {site_text(site)}", *details)
        return f"{kind} ({'; '.join(details)})"
    if details:
        return f"{kind} {name!r} ({'; '.join(details)})"
    return f"{kind} {name!r}"


def short_label(name: str | None, site: Site) -> str:
    """The name or the place, last in a ``repr``: ``name='db'``, or ``made at app.py:12``."""
    return f"name={name!r}" if name is not None else f"made at {site_text(site)}"
