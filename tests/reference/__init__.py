"""Reference tests: the same scenarios on trio and on asyncop, with their logs compared."""

from __future__ import annotations
