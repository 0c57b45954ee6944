"""anyio's synchronization primitives on asyncop's."""

from __future__ import annotations

from typing import Any

from anyio import EventStatistics
from anyio._core._synchronization import Event as BaseEvent

from ..runtime import Event as _Event
from ._options import missing

__all__ = ["Event", "SyncMethods"]


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


class SyncMethods:
    """The backend's calls that make synchronization primitives; mixed into ``AsyncopBackend``."""

    @classmethod
    def create_event(cls) -> Any:
        return Event()

    @classmethod
    def create_lock(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("create_lock")

    @classmethod
    def create_semaphore(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("create_semaphore")

    @classmethod
    def create_capacity_limiter(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("create_capacity_limiter")
