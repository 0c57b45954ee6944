"""Leaving an object out of the cyclic garbage collector.

Compiled, the modules that use ``untrack`` cimport ``_gc.pxd`` instead,
whose function of the same name calls CPython's ``PyObject_GC_UnTrack``:
the collector then neither counts the object in a pass nor visits it. That
is safe only for an object that no garbage cycle can pass through (one
whose references all lead to objects that live as long as their module).
Python itself has no call for it, so run as Python, ``untrack`` leaves the
object as it is: it is then visited, as any object is.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["untrack"]

_T = TypeVar("_T")


def untrack(obj: _T) -> _T:
    """Return ``obj`` (compiled, taken off the collector's lists first)."""
    return obj
