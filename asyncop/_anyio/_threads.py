"""Threads: anyio's to_thread and from_thread, and its blocking portals, on asyncop's threads."""

from __future__ import annotations

from typing import Any

from ._options import missing

__all__ = ["ThreadMethods"]


class ThreadMethods:
    """The backend's calls about threads; mixed into ``AsyncopBackend``."""

    @classmethod
    async def run_sync_in_worker_thread(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("run_sync_in_worker_thread")

    @classmethod
    def check_cancelled(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("check_cancelled")

    @classmethod
    def run_async_from_thread(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("run_async_from_thread")

    @classmethod
    def run_sync_from_thread(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("run_sync_from_thread")

    @classmethod
    def run_sync_soon(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("run_sync_soon")

    @classmethod
    def current_default_thread_limiter(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("current_default_thread_limiter")
