"""Helpers shared by the network tests."""

from __future__ import annotations

import time
from typing import Any

import asyncop


class Status:
    """A ``task_status`` that records what a server reported, and an event to await it."""

    def __init__(self) -> None:
        self.value: Any = None
        self.event = asyncop.Event()

    def started(self, value: Any = None) -> None:
        self.value = value
        self.event.set()


def finish(runtime: asyncop.Runtime) -> None:
    """Assert that nothing the test did is left registered (waiting briefly for stragglers)."""
    deadline = time.monotonic() + 5
    while runtime.registrations() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert runtime.registrations() == 0
