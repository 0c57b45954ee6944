"""Leaving an object out of the cyclic garbage collector, and putting it back.

Compiled, the modules that use ``untrack`` cimport ``_gc.pxd`` instead,
whose function of the same name calls CPython's ``PyObject_GC_UnTrack``:
the collector then neither counts the object in a pass nor visits it. That
is safe only while no garbage cycle can pass through the object (one
whose references all lead to objects that live as long as their module,
or one that something the collector cannot free holds, such as a running
runtime). ``track`` puts such an object back on the collector's lists
(``PyObject_GC_Track``) once a garbage cycle could pass through it.
Python itself has no call for either, so run as Python, both leave the
object as it is: it is then visited, as any object is.
"""

from __future__ import annotations

import gc
from typing import TypeVar

__all__ = ["is_tracked", "track", "untrack"]

_T = TypeVar("_T")


def untrack(obj: _T) -> _T:
    """Return ``obj`` (compiled, taken off the collector's lists first)."""
    return obj


def track(obj: object) -> None:
    """Compiled, put ``obj`` back on the collector's lists if it is off them."""


def is_tracked(obj: object) -> bool:
    """Whether the collector visits ``obj``: whether it is on the collector's lists."""
    return gc.is_tracked(obj)
