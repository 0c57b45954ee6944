"""Processes and signals: anyio's open_process and signal receivers, on asyncop's.

anyio's ``open_process`` and ``run_process`` (``anyio/_core/_subprocesses.py``)
are backend-neutral: they call the backend's ``open_process`` for an
``anyio.abc.Process``, and do the rest with its ``wait()``, ``kill()`` and
``aclose()``. Here that process is an ``asyncop.process.Process`` in an
anyio coat, and it behaves as it does on anyio's trio backend:

- **The process group is anyio's.** ``start_new_session`` goes to asyncop
  as anyio gives it, False by default, so the process stays in our process
  group, as on trio and asyncio: a Ctrl-C at the terminal reaches it too.
  (asyncop's own default would make it the leader of a group of its own,
  out of the terminal's reach, and stop the whole group on a cancel.)
- **A wait is only a wait.** A cancelled ``await process.wait()`` leaves
  the process running, as on trio and asyncio; ``aclose()`` (the exit of
  ``async with``, and so ``run_process``) is what kills it when it is
  cancelled. asyncop's own ``wait()`` stops the process when its wait is
  cancelled, so anyio's waits do not call it: each process has a *watcher*,
  an operation at the root of the runtime that waits for the process with
  asyncop's ``wait()`` and reaps it as soon as it exits, and ``wait()``
  awaits the watcher. ``open_process`` returns once the watcher runs (a
  watcher cancelled before it ran would stop nothing). A process still
  running when the runtime shuts down is stopped by the shutdown, which
  cancels its watcher: ``SIGTERM``, then ``SIGKILL`` after 5 seconds, and
  the reap. Nothing is left behind.
- **The streams raise anyio's errors**: ``EndOfStream`` once the process
  has closed its end, and anyio's ``ClosedResourceError``,
  ``BrokenResourceError`` and ``BusyResourceError`` for asyncop's.

``to_process`` keeps a pool of worker processes per runtime (a ``RunVar``),
and asks the backend to kill them at the end
(``setup_process_pool_exit_at_shutdown``): they are killed by a
``Runtime.at_shutdown`` callback, and their watchers reap them.

Signal receivers are ``asyncop.signals.open_signal_receiver``'s: opened in
a task, they have the main thread, which waits in ``runtime.run()`` (or in
anyio's test runner), install the handlers.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from signal import Signals
from typing import IO, Any

import anyio
from anyio import abc

from .. import process as aprocess
from .. import signals as asignals
from ..operations import (
    AsyncOperation,
    BrokenResourceError,
    BusyResourceError,
    ClosedResourceError,
)
from ..runtime import Event, checkpoint, current_runtime, scope, select

__all__ = ["Process", "ProcessMethods"]

StrOrBytesPath = str | bytes | os.PathLike[str] | os.PathLike[bytes]

# The most a receive takes by default, as anyio's streams.
_RECEIVE_SIZE = 65536


def _anyio_error(exc: Exception, action: str) -> Exception:
    """anyio's exception for asyncop's stream error ``exc``; ``action`` for a busy stream."""
    if isinstance(exc, ClosedResourceError):
        return anyio.ClosedResourceError(str(exc))
    if isinstance(exc, BrokenResourceError):
        return anyio.BrokenResourceError(str(exc))
    return anyio.BusyResourceError(action)


_STREAM_ERRORS = (ClosedResourceError, BrokenResourceError, BusyResourceError)


class _ReceiveStream(abc.ByteReceiveStream):
    """A process's stdout or stderr as anyio's ``ByteReceiveStream``."""

    __slots__ = ("_stream",)

    def __init__(self, stream: aprocess.PipeStream) -> None:
        self._stream = stream

    async def receive(self, max_bytes: int = _RECEIVE_SIZE) -> bytes:
        if max_bytes < 1:
            raise ValueError(
                f"max_bytes must be a positive integer, got {max_bytes}; pass e.g. 65536"
            )
        try:
            data = await self._stream.receive_some(max_bytes)
        except _STREAM_ERRORS as exc:
            raise _anyio_error(exc, "receiving from") from exc
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        await self._stream.aclose()


class _SendStream(abc.ByteSendStream):
    """A process's stdin as anyio's ``ByteSendStream``."""

    __slots__ = ("_stream",)

    def __init__(self, stream: aprocess.PipeStream) -> None:
        self._stream = stream

    async def send(self, item: bytes) -> None:
        try:
            await self._stream.send_all(item)
        except _STREAM_ERRORS as exc:
            raise _anyio_error(exc, "sending to") from exc

    async def aclose(self) -> None:
        await self._stream.aclose()


class Process(abc.Process):
    """anyio's ``Process`` on an ``asyncop.process.Process``; see the module docstring."""

    def __init__(self, process: aprocess.Process, watcher: AsyncOperation[int]) -> None:
        self._process = process
        # The root operation that waits for the process and reaps it.
        self._watcher = watcher
        self._stdin = None if process.stdin is None else _SendStream(process.stdin)
        self._stdout = None if process.stdout is None else _ReceiveStream(process.stdout)
        self._stderr = None if process.stderr is None else _ReceiveStream(process.stderr)

    def __repr__(self) -> str:
        return f"<anyio Process on {self._process!r}>"

    def _close_pipes(self) -> None:
        for stream in (self._process.stdin, self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()

    async def aclose(self) -> None:
        """Close the pipes and wait; a cancel or failure kills the process and waits for it."""
        self._close_pipes()
        try:
            await self.wait()
        except BaseException:
            self.kill()
            with anyio.CancelScope(shield=True):
                await self.wait()
            raise

    async def wait(self) -> int:
        """Wait for the exit; a cancel ends the wait and leaves the process running."""
        await checkpoint()
        return await self._watcher

    def terminate(self) -> None:
        self._process.terminate()

    def kill(self) -> None:
        self._process.kill()

    def send_signal(self, signal: Signals) -> None:
        self._process.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    @property
    def stdin(self) -> abc.ByteSendStream | None:
        return self._stdin

    @property
    def stdout(self) -> abc.ByteReceiveStream | None:
        return self._stdout

    @property
    def stderr(self) -> abc.ByteReceiveStream | None:
        return self._stderr


def _command(command: StrOrBytesPath | Sequence[StrOrBytesPath]) -> tuple[Any, bool]:
    """asyncop's command and ``shell`` for anyio's: one path is for the shell, as on trio."""
    if isinstance(command, str | bytes | os.PathLike):
        return _as_str(command), True
    return [_as_str(item) for item in command], False


def _as_str(item: StrOrBytesPath) -> str:
    path = os.fspath(item)
    return path if isinstance(path, str) else os.fsdecode(path)


async def _watch(process: aprocess.Process) -> AsyncOperation[int]:
    """Start the watcher of a process that was just started, and see it run.

    The watcher is a root operation: a shutdown that comes before any
    worker has started it cancels it unstarted, and a wait that never ran
    stops nothing. So this waits until the watcher runs (a wait it starts
    stops the process when cancelled); should the watcher end first, or
    not start at all, the process is killed and reaped here.
    """
    running = Event()

    async def watch() -> int:
        running.set()
        return await process.wait()

    watcher: AsyncOperation[int] | None = None
    try:
        watcher = current_runtime().spawn(watch, name=f"wait for process {process.pid}")
        async with scope(shield=True, name=f"watch process {process.pid}"):
            with suppress(Exception):  # the watcher ended: what matters is whether it ran
                await select(running.wait_async(), watcher)
    finally:
        if not running.is_set():
            # The runtime is shutting down: nobody would reap the process.
            process.kill()
            async with scope(shield=True, name=f"reap process {process.pid}"):
                await process.wait()
    return watcher


def _kill_pool(workers: set[abc.Process]) -> None:
    """At the runtime's shutdown: kill ``to_process``'s workers; their watchers reap them."""
    for worker in list(workers):
        if isinstance(worker, Process):
            worker._close_pipes()
        if worker.returncode is None:
            worker.kill()


class ProcessMethods:
    """The backend's calls about processes and signals; mixed into ``AsyncopBackend``."""

    @classmethod
    async def open_process(
        cls,
        command: StrOrBytesPath | Sequence[StrOrBytesPath],
        *,
        stdin: int | IO[Any] | None,
        stdout: int | IO[Any] | None,
        stderr: int | IO[Any] | None,
        cwd: StrOrBytesPath | None = None,
        env: Mapping[str, str] | None = None,
        startupinfo: Any = None,
        creationflags: int = 0,
        start_new_session: bool = False,
        pass_fds: Sequence[int] = (),
        user: str | int | None = None,
        group: str | int | None = None,
        extra_groups: Iterable[str | int] | None = None,
        umask: int = -1,
        **kwargs: Any,
    ) -> Process:
        if kwargs:
            raise TypeError(
                f"open_process() on the asyncop backend got {sorted(kwargs)}, which it does "
                "not take; pass the arguments of anyio.open_process()"
            )
        if startupinfo is not None or creationflags:
            raise ValueError(
                "open_process() got startupinfo or creationflags, which only Windows "
                "takes; pass them on Windows only"
            )
        args, shell = _command(command)
        await checkpoint()  # a cancelled task starts nothing, as on trio
        process = aprocess.open_process(
            args,
            shell=shell,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=None if env is None else dict(env),
            start_new_session=start_new_session,
            pass_fds=pass_fds,
            user=user,
            group=group,
            extra_groups=extra_groups,
            umask=None if umask < 0 else umask,
        )
        return Process(process, await _watch(process))

    @classmethod
    def setup_process_pool_exit_at_shutdown(cls, workers: set[abc.Process]) -> None:
        current_runtime().at_shutdown(_kill_pool, workers)

    @classmethod
    def open_signal_receiver(
        cls, *signals: Signals
    ) -> AbstractContextManager[AsyncIterator[Signals]]:
        return asignals.open_signal_receiver(*signals)
