"""Timing helpers used inside the measuring functions (in the subprocess)."""

from __future__ import annotations

import gc
import time
from types import TracebackType

__all__ = ["Stopwatch", "full_collections"]


def full_collections() -> int:
    """How many full (generation 2) garbage collections have run so far."""
    return int(gc.get_stats()[2]["collections"])


class Stopwatch:
    """Wall time and full GC passes over a ``with`` block.

    The collector stays on: it is part of what a user pays, on every
    system alike. ``gc_full`` tells how many full passes fell inside the
    block.
    """

    __slots__ = ("_gc0", "_t0", "gc_full", "seconds")

    def __init__(self) -> None:
        self._t0 = 0.0
        self._gc0 = 0
        self.seconds = 0.0
        self.gc_full = 0

    def start(self) -> None:
        """Start timing (what ``with`` does on entry)."""
        self._gc0 = full_collections()
        self._t0 = time.perf_counter()

    def stop(self) -> None:
        """Stop timing (what ``with`` does on exit)."""
        self.seconds = time.perf_counter() - self._t0
        self.gc_full = full_collections() - self._gc0

    def elapsed(self) -> float:
        """Seconds since ``start``, without stopping."""
        return time.perf_counter() - self._t0

    def __enter__(self) -> Stopwatch:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def metrics(self, **extra: float) -> dict[str, float]:
        """The block's ``seconds`` and ``gc_full``, plus ``extra``."""
        return {"seconds": self.seconds, "gc_full": float(self.gc_full), **extra}
