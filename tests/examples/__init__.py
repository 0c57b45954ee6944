"""Tests of the example programs."""

from __future__ import annotations
