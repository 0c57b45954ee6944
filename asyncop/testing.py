"""Test support: the virtual clock.

``VirtualClock(autojump=True)`` makes a runtime's time jump to the next
deadline whenever all of its workers are idle; ``advance(seconds)`` moves it
by hand, from any thread.
"""

from __future__ import annotations

from .runtime._clock import VirtualClock as VirtualClock

__all__ = ["VirtualClock"]
