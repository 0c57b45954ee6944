"""Reading the interpreter's frames: the code a frame runs, where, and its caller.

What asyncop reads of a frame to find the user's line that made an
operation (``operations/_node.py``). Run as Python, these read the frame's
attributes. Compiled, the modules that use them cimport ``_frames.pxd``
instead, whose functions of the same names call CPython's frame API in C:
the same values, without an attribute lookup each. ``current_frame`` there
is the innermost Python frame of the thread, which, called from compiled
code (that has no frames), is the nearest Python caller's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from operator import attrgetter
from types import CodeType, FrameType

__all__ = ["current_frame", "frame_back", "frame_code", "frame_lasti"]


def current_frame() -> FrameType:
    """The caller's frame."""
    return sys._getframe(1)


frame_code: Callable[[FrameType], CodeType] = attrgetter("f_code")
frame_lasti: Callable[[FrameType], int] = attrgetter("f_lasti")
frame_back: Callable[[FrameType], FrameType | None] = attrgetter("f_back")
