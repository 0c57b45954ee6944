"""Channel ends: sender and receiver handles that close the channel when the last one goes.

::

    channel = asyncop.Channel[int](10)
    tx, rx = channel.sender(), channel.receiver()
    for n in range(3):
        s.spawn(producer, tx.clone(), n)     # each producer closes its clone
    tx.close()
    async for item in rx:                    # ends when every producer is done
        ...

``channel.sender()`` and ``channel.receiver()`` make end handles; ``clone()``
makes another end of the same kind. Each end is closed once (``close()``,
or leaving ``with``/``async with``), and the channel counts the open ends
of each kind:

- When every sender end made so far is closed, the channel closes as
  ``Channel.close()`` would: receivers drain what is buffered, then get
  ``EndOfChannel``; senders still blocked get ``ClosedResourceError``.
- When every receiver end made so far is closed, nobody will ever receive:
  the buffer is dropped, every send, blocked or new, raises
  ``BrokenResourceError``, and a receive still blocked raises
  ``ClosedResourceError``.
- Using an end that was closed raises ``ClosedResourceError``, and so does
  a send or receive still blocked on an end when that end is closed, even
  while other ends stay open (a blocked send's item is not sent).

The ends only count; every send and receive is the channel's own, so they
keep its hand-over, cancellation and timeout rules, from tasks and threads.
The counts live under the channel's mutex.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, final

from ...operations import (
    BrokenResourceError,
    ClosedResourceError,
    EndOfChannel,
    blocking_in_task_error,
    thread_state,
)
from .._core._awaitables import checkpoint, task_maker
from ._waiters import remove_waiter

if TYPE_CHECKING:
    from .._core._waker import WaitEvent
    from ._channel import Channel
    from ._statistics import ChannelStatistics

__all__ = [
    "ChannelReceiver",
    "ChannelSender",
    "EndCounts",
    "Receiving",
    "new_receiver",
    "new_sender",
    "refuse_for_in_task",
]

T = TypeVar("T")


# How many ends of each kind ("sender", "receiver") a channel has open; under
# the channel's mutex.
EndCounts = dict[str, int]


def _counts(channel: Channel[T]) -> EndCounts:
    # Under the channel's mutex.
    counts = channel._ends
    if counts is None:
        counts = channel._ends = {"sender": 0, "receiver": 0}
    return counts


def _break(channel: Channel[T]) -> None:
    """Every receiver end is closed: drop the buffer and fail every send."""
    with channel._mutex:
        channel._broken = True
        channel._closed = True
        channel._buffer.clear()
        senders, channel._senders = channel._senders, type(channel._senders)()
        receivers, channel._receivers = channel._receivers, type(channel._receivers)()
        for waiter, _item in senders:
            # A send already paid for (the _PREPAID entry) takes no error.
            waiter.fire(None, channel._closed_error())
        for waiter in receivers:
            # Every receiver end is closed, so a receive still blocked was made
            # through one of them: as for any use of a closed end, that is
            # ClosedResourceError (EndOfChannel would claim the senders ended).
            waiter.fire(
                None,
                ClosedResourceError(
                    "the receiver end this receive waited on was closed; receive through "
                    "an open receiver (clone one before closing)"
                ),
            )


class _End(Generic[T]):
    __slots__ = ("_channel", "_closed", "_waiting")

    _kind = "end"
    _verb = "use"

    def __init__(self, channel: Channel[T]) -> None:
        self._channel = channel
        self._closed = False
        # The waiters (subscriptions, thread waiters) of the sends or
        # receives blocked on this end, under the channel's mutex.
        self._waiting: dict[Any, None] | None = None

    def _track(self, waiter: object) -> None:
        """A send or receive through this end queued ``waiter``; under the mutex."""
        if self._waiting is None:
            self._waiting = {}
        self._waiting[waiter] = None

    def _untrack(self, waiter: object) -> None:
        """The wait of ``waiter`` ended; under the mutex."""
        if self._waiting:
            self._waiting.pop(waiter, None)

    def _queue(self) -> Any:
        raise NotImplementedError  # pragma: no cover - overridden

    def _wake_waiting_locked(self) -> None:
        """This end was closed: its blocked sends and receives get ClosedResourceError."""
        waiting, self._waiting = self._waiting, None
        for waiter in waiting or ():
            remove_waiter(self._queue(), waiter)
            waiter.fire(
                None,
                ClosedResourceError(
                    f"the {self._kind} end this {self._verb} waited on was closed; "
                    f"{self._verb} through an open {self._kind} (clone one before closing)"
                ),
            )

    @property
    def closed(self) -> bool:
        """True once this end was closed (other ends may still be open)."""
        return self._closed

    def statistics(self) -> ChannelStatistics:
        """The channel's ``statistics()``, which every end shares. Not a cancellation point."""
        return self._channel.statistics()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedResourceError(
                f"this {self._kind} of the channel was closed; use another {self._kind} "
                f"(clone one before closing), or stop using it"
            )

    def _last_closed(self) -> None:
        raise NotImplementedError  # pragma: no cover - overridden

    def clone(self) -> Self:
        """Make another end of the same kind and channel, to be closed on its own.

        Raises:
            ClosedResourceError: this end is closed.
        """
        channel = self._channel
        with channel._mutex:
            self._check_open()
            _counts(channel)[self._kind] += 1
        return type(self)(channel)

    def close(self) -> None:
        """Close this end; closing it twice is harmless. Not a cancellation point.

        Closing the last open sender closes the channel (receivers drain,
        then get ``EndOfChannel``); closing the last open receiver breaks it
        (senders get ``BrokenResourceError``).
        """
        channel = self._channel
        with channel._mutex:
            if self._closed:
                return
            self._closed = True
            self._wake_waiting_locked()
            counts = _counts(channel)
            counts[self._kind] -= 1
            last = counts[self._kind] == 0
        if last:
            self._last_closed()

    async def aclose(self) -> None:
        """Close this end, then pass a cancellation point (as trio's ``aclose``).

        The end is closed even when the task is cancelled.
        """
        self.close()
        await checkpoint()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<{type(self).__name__} {state} of {self._channel!r}>"


@final
class ChannelSender(_End[T]):
    """The sending end of a ``Channel``, made by ``channel.sender()``."""

    __slots__ = ()

    _kind = "sender"
    _verb = "send"

    def _queue(self) -> Any:
        return self._channel._senders

    def _last_closed(self) -> None:
        self._channel.close()

    @task_maker
    def send_async(self, item: T) -> WaitEvent[None]:
        """``Channel.send_async`` through this end: a cancellation point.

        Raises:
            ClosedResourceError: this end or the channel is closed.
            BrokenResourceError: every receiver end is closed.
            Cancelled: the task is cancelled while waiting; the item was not sent.
        """
        self._check_open()
        return self._channel._send_async(item, self)

    def send(self, item: T, timeout: float | None = None) -> None:
        """``Channel.send`` through this end, from a thread.

        Raises:
            ClosedResourceError: this end or the channel is closed.
            BrokenResourceError: every receiver end is closed.
            TimeoutError: no room (or receiver) within ``timeout``; not sent.
        """
        self._check_open()
        self._channel._send(item, timeout, self)

    def try_send(self, item: T) -> None:
        """``Channel.try_send`` through this end: send without waiting.

        Raises:
            WouldBlock: no receiver is waiting and the buffer is full.
            ClosedResourceError: this end or the channel is closed.
            BrokenResourceError: every receiver end is closed.
        """
        self._check_open()
        self._channel.try_send(item)


class Receiving(Generic[T]):
    """Iteration over what ``recv()`` and ``recv_async()`` return, until ``EndOfChannel``."""

    __slots__ = ()

    def recv(self, timeout: float | None = None) -> T:
        raise NotImplementedError  # pragma: no cover - overridden

    def recv_async(self) -> WaitEvent[T]:
        raise NotImplementedError  # pragma: no cover - overridden

    def __iter__(self) -> Iterator[T]:
        while True:
            try:
                yield self.recv()
            except EndOfChannel:
                return

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        try:
            item: T = await self.recv_async()
        except EndOfChannel:
            raise StopAsyncIteration from None
        return item


@final
class ChannelReceiver(_End[T], Receiving[T]):
    """The receiving end of a ``Channel``, made by ``channel.receiver()``."""

    __slots__ = ()

    _kind = "receiver"
    _verb = "receive"

    def _queue(self) -> Any:
        return self._channel._receivers

    def _last_closed(self) -> None:
        _break(self._channel)

    @task_maker
    def recv_async(self) -> WaitEvent[T]:
        """``Channel.recv_async`` through this end: a cancellation point.

        Raises:
            ClosedResourceError: this end is closed.
            EndOfChannel: every sender end is closed (or the channel was
                closed) and the buffer is drained.
            Cancelled: the task is cancelled while waiting; no item was taken.
        """
        self._check_open()
        return self._channel._recv_async(self)

    def recv(self, timeout: float | None = None) -> T:
        """``Channel.recv`` through this end, from a thread.

        Raises:
            ClosedResourceError: this end is closed.
            EndOfChannel: every sender end is closed and the buffer is drained.
            TimeoutError: nothing arrived within ``timeout``.
        """
        self._check_open()
        return self._channel._recv(timeout, self)

    def try_recv(self) -> T:
        """``Channel.try_recv`` through this end: receive without waiting.

        Raises:
            WouldBlock: nothing is available now.
            ClosedResourceError: this end is closed.
            EndOfChannel: every sender end is closed and the buffer is drained.
        """
        self._check_open()
        return self._channel.try_recv()

    def __iter__(self) -> Iterator[T]:
        """Receive in a thread until every sender is closed and the buffer drained.

        Each item is received through this end: closing it ends the loop
        with ``ClosedResourceError``.

        Raises:
            RuntimeError: the loop is inside a coroutine (use ``async for``).
        """
        refuse_for_in_task(self, "receiver")
        self._check_open()
        return Receiving.__iter__(self)

    def __aiter__(self) -> AsyncIterator[T]:
        """Receive in a task (``async for``) until every sender is closed and drained.

        Each item is received through this end: closing it ends the loop
        with ``ClosedResourceError``.
        """
        self._check_open()
        return self


def refuse_for_in_task(source: object, handle: str) -> None:
    """Refuse a plain ``for`` over ``source`` inside a coroutine: each step would block."""
    if thread_state().task is not None:
        raise blocking_in_task_error(
            f"a 'for' loop over {type(source).__name__}", f"'async for item in {handle}'"
        )


def new_sender(channel: Channel[T]) -> ChannelSender[T]:
    """``channel.sender()``: a new open sender end."""
    with channel._mutex:
        _counts(channel)["sender"] += 1
    return ChannelSender(channel)


def new_receiver(channel: Channel[T]) -> ChannelReceiver[T]:
    """``channel.receiver()``: a new open receiver end."""
    with channel._mutex:
        _counts(channel)["receiver"] += 1
    return ChannelReceiver(channel)


def broken_error() -> BrokenResourceError:
    """What a send gets once every receiver end is closed."""
    return BrokenResourceError(
        "send on a channel whose receivers are all closed; stop sending, as nobody will receive it"
    )
