"""Cython's pure-Python names, for the core modules when Cython is not installed.

asyncop's hot modules compile with Cython in pure-Python mode (see
``hatch_build.py``). Such a module starts with::

    try:
        import cython
    except ImportError:
        from ..platform import pure_cython as cython

Compiled, ``import cython`` is Cython's own: ``cython.compiled`` is True and
the decorators declare C types. Run as Python, it is Cython's ``Shadow``
module when Cython is installed, and this namespace when it is not: the
same names, doing nothing, with ``compiled`` False. Only the names asyncop
uses are here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["pure_cython"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _keep(fn: _F) -> _F:
    return fn


def _declare_nothing(**_types: object) -> Callable[[_F], _F]:
    return _keep


class pure_cython:  # (lower case: it stands in for the module ``cython``)
    """What ``import cython`` gives a pure-Python run: no C types, nothing compiled."""

    compiled = False

    # C types named in declarations: stand-ins only.
    bint = bool
    int = int
    Py_ssize_t = int
    double = float

    locals = staticmethod(_declare_nothing)
    cfunc = staticmethod(_keep)
    ccall = staticmethod(_keep)
    inline = staticmethod(_keep)
    final = staticmethod(_keep)
