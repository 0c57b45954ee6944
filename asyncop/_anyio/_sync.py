"""anyio's synchronization primitives on asyncop's."""

from __future__ import annotations

from anyio import EventStatistics
from anyio._core._synchronization import Event as BaseEvent

from ..runtime import Event as _Event

__all__ = ["Event"]


class Event(BaseEvent):
    """anyio's ``Event`` on an ``asyncop.Event``."""

    __slots__ = ("_event",)

    def __new__(cls) -> Event:
        return object.__new__(cls)

    def __init__(self) -> None:
        self._event = _Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait_async()

    def statistics(self) -> EventStatistics:
        return EventStatistics(len(self._event._waiters))
