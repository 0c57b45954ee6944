"""Find a test file's line by a marker comment, for asserting on ``file:line`` texts."""

from __future__ import annotations


def line_of(path: str, marker: str) -> int:
    """The number of the line of ``path`` that ends with ``# <marker>``."""
    with open(path, encoding="utf-8") as source:
        for number, line in enumerate(source, 1):
            if line.rstrip().endswith(f"# {marker}"):
                return number
    raise AssertionError(f"no line of {path} is marked {marker!r}")
