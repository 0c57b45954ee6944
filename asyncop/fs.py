"""File I/O for coroutine operations.

Regular files cannot be waited on for readiness: epoll refuses them and
select/poll/kqueue always report them ready, because the kernel has no
notion of a disk read "not being ready yet" — a read just blocks until the
data is there. So these helpers run the blocking calls in a blocking-call
thread (``spawn_blocking``) while the task is suspended. As with any
blocking call, a cancel does not interrupt the call in progress: the task
gets its result and leaves at its next await.
"""

from __future__ import annotations

import os
from pathlib import Path

from .runtime import spawn_blocking

__all__ = ["read_bytes_async", "read_text_async", "write_bytes_async", "write_text_async"]

StrPath = str | os.PathLike[str]


async def read_bytes_async(path: StrPath) -> bytes:
    """Read a whole file as bytes."""
    data: bytes = await spawn_blocking(Path(path).read_bytes)
    return data


async def write_bytes_async(path: StrPath, data: bytes) -> None:
    """Write ``data`` to a file, replacing its contents."""
    await spawn_blocking(Path(path).write_bytes, data)


async def read_text_async(path: StrPath, encoding: str = "utf-8") -> str:
    """Read a whole file as text in ``encoding``."""
    text: str = await spawn_blocking(Path(path).read_text, encoding)
    return text


async def write_text_async(path: StrPath, data: str, encoding: str = "utf-8") -> None:
    """Write ``data`` to a file as text in ``encoding``, replacing its contents."""
    await spawn_blocking(Path(path).write_text, data, encoding)
