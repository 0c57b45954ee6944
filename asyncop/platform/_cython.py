"""Cython's pure-Python names, for the core modules when Cython is not installed.

asyncop's hot modules compile with Cython in pure-Python mode (see
``hatch_build.py``). Such a module starts with::

    try:
        import cython
    except ImportError:
        from ..platform import pure_cython as cython

Compiled, ``import cython`` is Cython's own: ``cython.compiled`` is True, and
its decorators would declare C types. Run as Python, it is Cython's
``Shadow`` module when Cython is installed, and this namespace when it is
not, with ``compiled`` False. Only the names asyncop uses are here
(``compiled``, ``locals``, ``address``, ``cast``, ``nogil``):
``tests/test_compiled.py`` checks that every ``cython.X`` in asyncop has its
stand-in, which does nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, TypeVar, cast

__all__ = ["pure_cython"]

_F = TypeVar("_F", bound=Callable[..., Any])
_T = TypeVar("_T")


def _unchanged(fn: _F) -> _F:
    return fn


class pure_cython:  # (lower case: it stands in for the module ``cython``)
    """What ``import cython`` gives a pure-Python run: nothing is compiled."""

    compiled = False

    #: ``with cython.nogil:``: the block runs without the interpreter's lock; here, with it.
    nogil = nullcontext()

    @staticmethod
    def locals(**types: object) -> Callable[[_F], _F]:
        """``@cython.locals(name=type)``: C types of a function's locals; none here."""
        return _unchanged

    @staticmethod
    def address(value: _T) -> _T:
        """``cython.address(field)``: a C pointer to ``field``; here, its value."""
        return value

    @staticmethod
    def cast(kind: type[_T], value: object) -> _T:
        """``cython.cast(kind, value)``: ``value`` taken for a ``kind``, unchecked; here, as is."""
        return cast(_T, value)
