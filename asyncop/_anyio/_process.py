"""Processes and signals: anyio's open_process and signal receivers, on asyncop's."""

from __future__ import annotations

from typing import Any

from ._options import missing

__all__ = ["ProcessMethods"]


class ProcessMethods:
    """The backend's calls about processes and signals; mixed into ``AsyncopBackend``."""

    @classmethod
    async def open_process(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("open_process")

    @classmethod
    def setup_process_pool_exit_at_shutdown(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("setup_process_pool_exit_at_shutdown")

    @classmethod
    def open_signal_receiver(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("open_signal_receiver")
