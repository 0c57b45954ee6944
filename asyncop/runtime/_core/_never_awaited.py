"""What an event is, and the warning an asyncop awaitable gives when it is collected unawaited.

:func:`describe_event` names an event for messages, ``dump()`` and the
warning. ``WaitEvent.__del__`` (``_waker.py``) calls :func:`warn_never_awaited`
for an event that was never awaited nor handed over; see "Never awaited"
there. The warning names the innermost frame outside asyncop, or, when
asyncop's own code collected the event (a task's locals, freed as its
coroutine ended), the operation running there and where that was made."""

from __future__ import annotations

import sys
import warnings
from types import FrameType
from typing import Any

from ...operations import current_operation, made_by_user, safe_repr

__all__ = ["describe_event", "warn_never_awaited"]


def describe_event(event: Any) -> str:
    """What ``event`` is, for messages and ``dump()``; never raises."""
    try:
        describe = getattr(event, "_describe", None)
        if describe is not None:
            text = describe()
            if type(text) is str:
                return text
    except BaseException:
        pass
    return safe_repr(event)


def _user_frame() -> FrameType | None:
    """The innermost frame outside asyncop (the walk passes asyncop's own)."""
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        if made_by_user(frame.f_globals.get("__name__", "")):
            return frame
        frame = frame.f_back
    return None


def warn_never_awaited(event: Any) -> None:
    """Warn that ``event`` was collected without being awaited, naming the user's line."""
    try:
        what = describe_event(event)
        frame = _user_frame()
        op = None if frame is not None else current_operation()
    except BaseException:  # pragma: no cover - interpreter shutdown
        return
    where = ""
    if frame is not None:
        filename = frame.f_code.co_filename
        lineno = frame.f_lineno or 0
        module = frame.f_globals.get("__name__", "?")
        registry = frame.f_globals.setdefault("__warningregistry__", {})
    elif op is not None:
        # Collected by asyncop's own code, past the user's frames: when a
        # task's coroutine ended, say. The task is the best clue left.
        filename, lineno, module, registry = op.filename, op.lineno, "asyncop", None
        where = f"in operation {op.name!r}, made "
    else:
        filename, lineno, module, registry = "sys", 1, "sys", None
    # A warning turned into an error (-W error) escapes to sys.unraisablehook,
    # as it does for a coroutine that was never awaited.
    warnings.warn_explicit(
        f"asyncop awaitable {what} was never awaited ({where}at {filename}:{lineno}); write "
        "'await' before it: until it is awaited, it does nothing",
        RuntimeWarning,
        filename,
        lineno,
        module=module,
        registry=registry,
    )
