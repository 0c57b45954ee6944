"""One small concurrency vocabulary, implemented on trio and on asyncop.

A reference scenario is an ``async def scenario(ad, log)`` written once
against an :class:`Adapter`. :func:`run_trio` and :func:`run_asyncop` run it
on a virtual clock and return its log, so a test can compare what the two
libraries did.

The vocabulary, as trio / asyncop spell it:

- ``ad.scope(timeout=, shield=, supervise=)``: a shielding ``CancelScope``
  around a deadline ``CancelScope`` (like ``fail_after``) around a cancel
  ``CancelScope`` around a nursery / ``asyncop.scope(...)``.
- ``s.spawn(fn, *args, supervise=)``: ``nursery.start_soon`` of a wrapper
  with its own ``CancelScope`` / ``s.spawn(fn, *args, supervise=)``.
- ``s.cancel()``, ``s.deadline``: the cancel and deadline scopes /
  ``s.cancel()``, ``s.deadline``.
- ``task.cancel()``, ``task.error``: the wrapper's ``CancelScope`` and the
  exception it kept / ``op.cancel()``, ``op.error``.
- ``ad.move_on_after(t)``: ``trio.move_on_after`` around a nursery /
  ``scope(timeout=t)`` with its ``TimeoutError`` caught.
- ``ad.event()``: ``trio.Event`` / ``asyncop.Event``.
- ``ad.channel(n)``: ``open_memory_channel(n)`` / ``asyncop.Channel(n)``.
- ``ad.select_recv(*channels)``: receivers raced in a nursery, the first
  cancelling the rest (trio has no select) / ``asyncop.select`` of the
  ``recv_async()`` events.

``run_asyncop(..., workers=1)`` makes the interleaving of one instant exact
(a FIFO ready queue and one worker) for the few scenarios that need a cancel
to land between two particular steps; the others run on two workers.

Mapping decisions:

- A scope's own deadline raises the builtin ``TimeoutError`` on both sides:
  asyncop does so by contract (like ``trio.fail_after``, whose
  ``TooSlowError`` is not a ``TimeoutError``), so the trio side raises
  ``TimeoutError`` when its deadline scope caught the cancellation.
- The layering keeps asyncop's shield rule: a cancel from above does not
  enter a shielded scope, but the scope's own deadline and own ``cancel()``
  do (both sit *inside* the shielding ``CancelScope``).
- trio has no ``supervise``; the trio side catches the child's ``Exception``
  in its wrapper and keeps it on the task handle, which is what asyncop does
  with a supervised child's failure.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import trio
import trio.testing

import asyncop
from asyncop.testing import VirtualClock

__all__ = [
    "Adapter",
    "AsyncopAdapter",
    "Log",
    "Scenario",
    "TrioAdapter",
    "describe_error",
    "per_task",
    "run_asyncop",
    "run_both",
    "run_trio",
]

_runtime_names = itertools.count()


class Log:
    """A thread-safe event log shared by the tasks of one scenario.

    ``log(who, what)`` appends ``(t, who, what)`` where ``t`` is the
    scenario's virtual time (seconds since it started, rounded to the
    millisecond) and ``who`` names the task that logs.
    """

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._t0 = 0.0
        self._mutex = threading.Lock()
        self.entries: list[tuple[float, str, Hashable]] = []

    def start(self) -> None:
        """Take the current time as time zero; called as the scenario starts."""
        self._t0 = self._now()

    def elapsed(self) -> float:
        """Seconds of virtual time since the scenario started."""
        return round(self._now() - self._t0, 3)

    def __call__(self, who: str, what: Hashable) -> None:
        entry = (self.elapsed(), who, what)
        with self._mutex:
            self.entries.append(entry)


def per_task(entries: list[tuple[float, str, Hashable]]) -> dict[str, list[tuple[float, Hashable]]]:
    """Split a log by task: each task's own entries keep their order.

    The order *between* tasks that run in the same instant is not specified
    by either library (trio shuffles its run batches, asyncop runs them on
    several workers), so comparisons go task by task, with timestamps.
    """
    split: dict[str, list[tuple[float, Hashable]]] = {}
    for t, who, what in entries:
        split.setdefault(who, []).append((t, what))
    return split


def describe_error(exc: BaseException) -> Hashable:
    """A comparable summary of an exception: groups become a set of their leaves.

    Each leaf is ``(type name, message)``. A ``Cancelled`` of either library
    appears as ``("Cancelled", "")`` so that a test sees it if it leaks.
    """
    if isinstance(exc, BaseExceptionGroup):
        leaves: set[Hashable] = set()
        stack: list[BaseException] = list(exc.exceptions)
        while stack:
            inner = stack.pop()
            if isinstance(inner, BaseExceptionGroup):
                stack.extend(inner.exceptions)
            else:
                leaves.add(describe_error(inner))
        return ("group", frozenset(leaves))
    if isinstance(exc, trio.Cancelled | asyncop.Cancelled):
        return ("Cancelled", "")
    return (type(exc).__name__, str(exc))


class TaskHandle(Protocol):
    """A spawned child: it can be cancelled, and keeps a supervised failure."""

    def cancel(self) -> None: ...

    @property
    def error(self) -> BaseException | None: ...


class ScopeHandle(Protocol):
    """An open scope: spawn into it, cancel it, move its deadline."""

    def spawn(
        self, fn: Callable[..., Awaitable[Any]], *args: Any, supervise: bool = False
    ) -> TaskHandle: ...

    def cancel(self) -> None: ...

    deadline: float | None


class EventLike(Protocol):
    def set(self) -> None: ...

    async def wait(self) -> None: ...


class ChannelLike(Protocol):
    async def send(self, item: Any) -> None: ...

    async def recv(self) -> Any: ...

    def send_nowait(self, item: Any) -> None: ...

    def recv_nowait(self) -> Any: ...

    def close(self) -> None: ...


class Adapter(Protocol):
    """What a scenario may use; both libraries implement it."""

    name: str
    Cancelled: type[BaseException]
    WouldBlock: type[Exception]
    EndOfChannel: type[Exception]

    async def sleep(self, seconds: float) -> None: ...

    async def checkpoint(self) -> None: ...

    def now(self) -> float: ...

    def scope(
        self, *, timeout: float | None = None, shield: bool = False, supervise: bool = False
    ) -> Any: ...

    def move_on_after(self, seconds: float) -> Any: ...

    def event(self) -> EventLike: ...

    def channel(self, capacity: int) -> ChannelLike: ...

    async def select_recv(self, *channels: Any) -> tuple[int, Any]: ...


Scenario = Callable[[Adapter, Log], Awaitable[Any]]


# ----------------------------------------------------------------------
# trio
# ----------------------------------------------------------------------


class _TrioTask:
    __slots__ = ("cs", "error")

    def __init__(self) -> None:
        self.cs = trio.CancelScope()
        self.error: BaseException | None = None

    def cancel(self) -> None:
        self.cs.cancel()


class _TrioScope:
    __slots__ = ("cs", "dl", "nursery", "supervise")

    def __init__(
        self,
        nursery: trio.Nursery,
        cs: trio.CancelScope,
        dl: trio.CancelScope,
        supervise: bool,
    ) -> None:
        self.nursery = nursery
        self.cs = cs
        self.dl = dl
        self.supervise = supervise

    def spawn(
        self, fn: Callable[..., Awaitable[Any]], *args: Any, supervise: bool = False
    ) -> _TrioTask:
        handle = _TrioTask()
        keep = supervise or self.supervise

        async def child() -> None:
            with handle.cs:
                try:
                    await fn(*args)
                except Exception as exc:
                    if not keep:
                        raise
                    handle.error = exc

        self.nursery.start_soon(child)
        return handle

    def cancel(self) -> None:
        self.cs.cancel()

    @property
    def deadline(self) -> float | None:
        deadline = self.dl.deadline
        return None if math.isinf(deadline) else deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        self.dl.deadline = math.inf if value is None else value


class _TrioEvent:
    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()


class _TrioChannel:
    __slots__ = ("_recv", "_send")

    def __init__(self, capacity: int) -> None:
        self._send, self._recv = trio.open_memory_channel[Any](capacity)

    async def send(self, item: Any) -> None:
        await self._send.send(item)

    async def recv(self) -> Any:
        return await self._recv.receive()

    def send_nowait(self, item: Any) -> None:
        self._send.send_nowait(item)

    def recv_nowait(self) -> Any:
        return self._recv.receive_nowait()

    def close(self) -> None:
        self._send.close()


class TrioAdapter:
    """The vocabulary on trio."""

    name = "trio"
    Cancelled: type[BaseException] = trio.Cancelled
    WouldBlock: type[Exception] = trio.WouldBlock
    EndOfChannel: type[Exception] = trio.EndOfChannel

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)

    async def checkpoint(self) -> None:
        await trio.lowlevel.checkpoint()

    def now(self) -> float:
        return trio.current_time()

    @asynccontextmanager
    async def scope(
        self, *, timeout: float | None = None, shield: bool = False, supervise: bool = False
    ) -> AsyncIterator[_TrioScope]:
        deadline = math.inf if timeout is None else trio.current_time() + timeout
        with trio.CancelScope(shield=shield):
            with trio.CancelScope(deadline=deadline) as dl, trio.CancelScope() as cs:
                async with trio.open_nursery() as nursery:
                    yield _TrioScope(nursery, cs, dl, supervise)
            if dl.cancelled_caught:
                raise TimeoutError("the scope passed its deadline")

    @asynccontextmanager
    async def move_on_after(self, seconds: float) -> AsyncIterator[_TrioScope]:
        with trio.move_on_after(seconds) as dl:
            with trio.CancelScope() as cs:
                async with trio.open_nursery() as nursery:
                    yield _TrioScope(nursery, cs, dl, False)

    def event(self) -> _TrioEvent:
        return _TrioEvent()

    def channel(self, capacity: int) -> _TrioChannel:
        return _TrioChannel(capacity)

    async def select_recv(self, *channels: _TrioChannel) -> tuple[int, Any]:
        """trio's idiom for "first of several receives": race them in a nursery.

        The first receiver to get an item cancels the others. A receiver that
        was already handed an item in the same instant keeps it, and the
        item is lost: trio has no select that takes a losing receive back.
        """
        won: list[tuple[int, Any]] = []
        async with trio.open_nursery() as nursery:

            async def one(index: int, channel: _TrioChannel) -> None:
                item = await channel.recv()
                won.append((index, item))
                nursery.cancel_scope.cancel()

            for index, channel in enumerate(channels):
                nursery.start_soon(one, index, channel)
        return won[0]


def run_trio(scenario: Scenario) -> list[tuple[float, str, Hashable]]:
    """Run ``scenario`` on trio with an autojumping mock clock; return its log."""
    ad = TrioAdapter()
    log = Log(ad.now)

    async def main() -> None:
        log.start()
        await scenario(ad, log)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return log.entries


# ----------------------------------------------------------------------
# asyncop
# ----------------------------------------------------------------------


class _AsyncopTask:
    __slots__ = ("op",)

    def __init__(self, op: asyncop.AsyncOperation) -> None:
        self.op = op

    def cancel(self) -> None:
        self.op.cancel()

    @property
    def error(self) -> BaseException | None:
        if self.op.state is not asyncop.OperationState.FAILED:
            return None
        return self.op.error


class _AsyncopScope:
    __slots__ = ("op",)

    def __init__(self, op: asyncop.AsyncOperation) -> None:
        self.op = op

    def spawn(
        self, fn: Callable[..., Awaitable[Any]], *args: Any, supervise: bool = False
    ) -> _AsyncopTask:
        return _AsyncopTask(self.op.spawn(fn, *args, supervise=supervise))

    def cancel(self) -> None:
        self.op.cancel()

    @property
    def deadline(self) -> float | None:
        return self.op.deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        self.op.deadline = value


class _AsyncopEvent:
    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = asyncop.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait_async()


class _AsyncopChannel:
    __slots__ = ("channel",)

    def __init__(self, capacity: int) -> None:
        self.channel: asyncop.Channel[Any] = asyncop.Channel(capacity)

    async def send(self, item: Any) -> None:
        await self.channel.send_async(item)

    async def recv(self) -> Any:
        return await self.channel.recv_async()

    def send_nowait(self, item: Any) -> None:
        self.channel.try_send(item)

    def recv_nowait(self) -> Any:
        return self.channel.try_recv()

    def close(self) -> None:
        self.channel.close()


class AsyncopAdapter:
    """The vocabulary on asyncop."""

    name = "asyncop"
    Cancelled: type[BaseException] = asyncop.Cancelled
    WouldBlock: type[Exception] = asyncop.WouldBlock
    EndOfChannel: type[Exception] = asyncop.EndOfChannel

    async def sleep(self, seconds: float) -> None:
        await asyncop.sleep(seconds)

    async def checkpoint(self) -> None:
        await asyncop.checkpoint()

    def now(self) -> float:
        return asyncop.current_time()

    @asynccontextmanager
    async def scope(
        self, *, timeout: float | None = None, shield: bool = False, supervise: bool = False
    ) -> AsyncIterator[_AsyncopScope]:
        async with asyncop.scope(timeout=timeout, shield=shield, supervise=supervise) as op:
            yield _AsyncopScope(op)

    @asynccontextmanager
    async def move_on_after(self, seconds: float) -> AsyncIterator[_AsyncopScope]:
        # asyncop has no move_on: a scope's own expiry raises a bare
        # TimeoutError (failures come wrapped in a group), so catching it
        # gives trio's move_on_after.
        try:
            async with asyncop.scope(timeout=seconds) as op:
                yield _AsyncopScope(op)
        except TimeoutError:
            pass

    def event(self) -> _AsyncopEvent:
        return _AsyncopEvent()

    def channel(self, capacity: int) -> _AsyncopChannel:
        return _AsyncopChannel(capacity)

    async def select_recv(self, *channels: _AsyncopChannel) -> tuple[int, Any]:
        """``asyncop.select`` over the receives: the losers consume nothing."""
        index, item = await asyncop.select(*(c.channel.recv_async() for c in channels))
        return index, item


def run_asyncop(scenario: Scenario, *, workers: int = 2) -> list[tuple[float, str, Hashable]]:
    """Run ``scenario`` on an asyncop runtime with an autojumping virtual clock.

    Also fails if a worker logged an internal error while running it: such an
    error means asyncop broke an invariant even if the log looks right.
    """
    ad = AsyncopAdapter()
    log = Log(ad.now)

    async def main() -> None:
        log.start()
        await scenario(ad, log)

    internal = _InternalErrors()
    logger = logging.getLogger("asyncop")
    logger.addHandler(internal)
    runtime = asyncop.Runtime(
        workers, name=f"ref{next(_runtime_names)}", clock=VirtualClock(autojump=True)
    )
    try:
        op = runtime.spawn(main, name="scenario")
        op.wait(10)  # TimeoutError if the scenario hangs
        op.result()
    finally:
        assert runtime.shutdown(timeout=10), "the asyncop runtime did not shut down in 10 s"
        logger.removeHandler(internal)
    assert internal.messages == [], f"asyncop logged internal errors: {internal.messages}"
    return log.entries


class _InternalErrors(logging.Handler):
    """Collects the "worker failed" records of the ``asyncop`` logger."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "worker failed" in message:
            text = message
            if record.exc_info and record.exc_info[1] is not None:
                exc = record.exc_info[1]
                text += f" ({type(exc).__name__}: {exc})"
            self.messages.append(text)


def run_both(
    scenario: Scenario, *, workers: int = 2
) -> tuple[dict[str, list[tuple[float, Hashable]]], dict[str, list[tuple[float, Hashable]]]]:
    """Run ``scenario`` on trio, then on asyncop; return both logs split by task."""
    return per_task(run_trio(scenario)), per_task(run_asyncop(scenario, workers=workers))
