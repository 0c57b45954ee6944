"""Type variables shared by the public signatures (typing only).

``AsyncOperation[T]`` and ``WaitEvent[T]`` carry what awaiting them gives;
``spawn``-like calls check ``*args`` against the function with ``Ts`` and
give ``AsyncOperation[R]`` for a function returning ``R``, or an ``async
def`` returning ``R``. Nothing here exists at run time beyond the variables.
"""

from __future__ import annotations

from typing import TypeVar, TypeVarTuple

__all__ = ["A", "B", "C", "D", "E", "R", "T", "Ts", "V"]

# The value of an operation or awaitable: covariant, as it is only read.
T = TypeVar("T", covariant=True)
# A function's value, or an operation's passed through.
V = TypeVar("V")
R = TypeVar("R")
Ts = TypeVarTuple("Ts")
# The values of the awaitables handed to race() and select(), in order.
A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
D = TypeVar("D")
E = TypeVar("E")
