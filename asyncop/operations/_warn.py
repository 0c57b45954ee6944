"""Warnings about a user's call, pointing at the user's line.

``warnings.warn`` with a fixed ``stacklevel`` points into asyncop when the
warning is issued a few calls deep, which tells the user nothing. Python
3.12's ``skip_file_prefixes`` would skip asyncop's files, but not on 3.11,
and it cannot tell a task's await chain from the runtime that steps it, so
:func:`warn_user` counts the ``stacklevel`` itself, with ``_node.py``'s
cache of which code objects are asyncop's.
"""

from __future__ import annotations

import warnings
from inspect import CO_ASYNC_GENERATOR, CO_COROUTINE, CO_GENERATOR, CO_ITERABLE_COROUTINE
from types import FrameType

from ._current import thread_state
from ._node import _getframe, _known_code, _learn_code

__all__ = ["warn_user"]


def _is_own(frame: FrameType) -> bool:
    """Whether ``frame`` runs asyncop's code (``_node._user_frame`` inlines this: it is hot)."""
    code = frame.f_code
    known = _known_code(id(code))
    if known is None or known[0] is not code:
        known = _learn_code(frame)
    return known[1]


# The frames of an await chain: coroutines, and the generators of __await__.
_AWAITING = CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR | CO_GENERATOR


def warn_user(message: str, category: type[Warning] = RuntimeWarning) -> None:
    """Issue a warning about a call the user made, pointing at the user's line.

    ``warnings.warn`` with a fixed ``stacklevel`` points into asyncop, which
    tells the user nothing. The line is the first frame outside asyncop,
    walking out through the awaiting coroutines (so with ``stacklevel``
    counted here, on every Python version). A task whose whole await chain
    is asyncop's, such as ``scope.spawn(run_process, command)``, has no such
    frame: the walk leaves the chain into the worker that steps it. The
    warning then points where that task was made, the line that spawned it.
    """
    frame: FrameType | None = _getframe(1)
    level = 2  # the caller's frame, for warnings.warn
    in_chain = False
    while frame is not None:
        if not _is_own(frame):
            warnings.warn(message, category, stacklevel=level)
            return
        awaiting = bool(frame.f_code.co_flags & _AWAITING)
        if in_chain and not awaiting:
            break  # out of the task's await chain, into the runtime stepping it
        in_chain = in_chain or awaiting
        frame = frame.f_back
        level += 1
    task = thread_state().task
    op = task.task if task is not None else None
    if op is None or op._code is None:
        warnings.warn(message, category, stacklevel=2)
    else:
        warnings.warn_explicit(message, category, op.filename, op.lineno)
