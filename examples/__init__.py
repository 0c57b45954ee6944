"""Example programs built on asyncop; run one with ``python -m examples.<name>``."""

from __future__ import annotations
