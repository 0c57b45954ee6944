"""Channel: a FIFO queue between coroutines and threads, bounded or rendezvous.

``Channel(capacity)`` buffers up to ``capacity`` items; ``Channel(0)`` is a
rendezvous, where a send completes only when a receiver takes the item.

Hand-over rules (see ``_sync.py`` for the waiter protocol):

- A send first offers its item to the queued receivers, oldest first; a
  receiver that was cancelled refuses it, and the next one is tried. Only
  then does the item go into the buffer, or the sender queue up with it.
- A receive takes from the buffer, then refills the buffer from the oldest
  live sender; in a rendezvous it takes the item straight from a sender.
- So an item is never handed to a waiter that is no longer waiting: a
  cancelled receive eats nothing, and a cancelled send leaves no item behind.
- The blocking ``send``/``recv`` of a thread follow ``_sync.py``'s waiter
  protocol: inside an operation they end at its cancel (keeping an item
  already handed over), and a Ctrl-C puts a received item back in front.
  Inside a coroutine they (and a plain ``for`` loop) are refused, naming
  what was called, ``Channel.send()`` or the end's ``ChannelSender.send()``,
  and its async form.
- ``close()``: later sends raise ``ClosedResourceError``; receives drain the
  buffer, then raise ``EndOfChannel``. Queued senders get
  ``ClosedResourceError`` (their items were not delivered) and queued
  receivers ``EndOfChannel``.
- ``statistics()`` (of the channel or any end) reads the buffer, the
  queues and the end counts at one instant, under the mutex.
- ``name=`` (or where an unnamed channel was made) and, for a blocked send
  or receive, how many ends of the other side are open show in ``dump()``
  and the deadlock report (``_wait_text``).
- ``sender()`` and ``receiver()`` make counted end handles
  (``_channel_ends.py``): the last sender end closed closes the channel, and
  the last receiver end closed breaks it (``_broken``: the buffer is dropped
  and sends raise ``BrokenResourceError``).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any, TypeVar, final

from ...operations import (
    BrokenResourceError,
    ClosedResourceError,
    EndOfChannel,
    ThreadState,
    WouldBlock,
    blocking_in_task_error,
    thread_state,
)
from ...platform import check_timeout
from .._core._awaitables import task_maker
from .._core._waker import Subscription, WaitEvent
from ._channel_ends import (
    ChannelReceiver,
    ChannelSender,
    EndCounts,
    Receiving,
    broken_error,
    new_receiver,
    new_sender,
    refuse_for_in_task,
)
from ._channel_ends import _End as End
from ._names import check_name, label, made_at, short_label
from ._statistics import ChannelStatistics
from ._waiters import ThreadWaiter, live_waiters, remove_waiter, waiter_is_live

__all__ = ["Channel"]

T = TypeVar("T")

_NOTHING: Any = object()


class _Prepaid:
    """A sender entry whose send has already completed (see ``_Send._arm``)."""

    __slots__ = ()

    def fire(self, value: Any = None, error: BaseException | None = None) -> bool:
        return True


_PREPAID = _Prepaid()


@final
class _Send(WaitEvent):
    __slots__ = ("channel", "end", "item")

    def __init__(self, channel: Channel[Any], item: Any, end: End[Any] | None) -> None:
        self.channel = channel
        self.item = item
        self.end = end  # the sender end it goes through, if any

    def _arm(self, sub: Subscription) -> None:
        channel = self.channel
        with channel._mutex:
            if channel._closed:
                sub.fire(None, channel._closed_error())
                return
            if not channel._receivers and len(channel._buffer) >= channel.capacity:
                channel._senders.append((sub, self.item))
                if self.end is not None:
                    self.end._track(sub)
                return
            # Claim our own waker before the item moves: inside a select,
            # another event may have won, and then nothing must be sent.
            if not sub.fire(None):
                return
            if not channel._offer_locked(self.item):
                # Every queued receiver had gone and the buffer is full: the
                # send has completed, so queue the item as already paid for.
                channel._senders.append((_PREPAID, self.item))

    def _disarm(self, sub: Subscription) -> None:
        channel = self.channel
        with channel._mutex:
            remove_waiter(channel._senders, sub)
            if self.end is not None:
                self.end._untrack(sub)

    def _describe(self) -> str:
        return self.channel._wait_text(receiving=False)


@final
class _Recv(WaitEvent):
    __slots__ = ("channel", "end")

    def __init__(self, channel: Channel[Any], end: End[Any] | None) -> None:
        self.channel = channel
        self.end = end  # the receiver end it goes through, if any

    def _arm(self, sub: Subscription) -> None:
        channel = self.channel
        with channel._mutex:
            from_buffer = bool(channel._buffer)
            try:
                item = channel._take_locked()
            except EndOfChannel as exc:
                sub.fire(None, exc)
                return
            if item is _NOTHING:
                channel._receivers.append(sub)
                if self.end is not None:
                    self.end._track(sub)
            elif not sub.fire(item):
                # Inside a select another event won while we armed: the item
                # goes back in front, for the next receiver. One taken from a
                # sender (who was told it was delivered) goes back as a
                # paid-for send, since a rendezvous keeps no buffer.
                if from_buffer:
                    channel._buffer.appendleft(item)
                else:
                    channel._senders.appendleft((_PREPAID, item))

    def _disarm(self, sub: Subscription) -> None:
        channel = self.channel
        with channel._mutex:
            remove_waiter(channel._receivers, sub)
            if self.end is not None:
                self.end._untrack(sub)

    def _describe(self) -> str:
        return self.channel._wait_text(receiving=True)


def _names(end: End[Any] | None) -> tuple[str, str]:
    """What the user called, and what its code likely calls it: ``("ChannelSender", "sender")``."""
    if end is None:
        return "Channel", "channel"
    return type(end).__name__, end._kind


class Channel(Receiving[T]):
    """A FIFO channel for coroutines and threads; see the module docstring.

    Args:
        capacity: how many items the buffer holds; 0 makes a rendezvous and
            ``math.inf`` a buffer without limit, whose sends never wait.
        name: shown in ``dump()``, deadlock reports and ``repr``; without
            one, those show where the channel was made.
    """

    def __init__(self, capacity: int | float = 0, *, name: str | None = None) -> None:
        self.name = check_name(name, "Channel")
        self._site = made_at(1) if name is None else (None, 0)
        if capacity != math.inf and (isinstance(capacity, bool) or not isinstance(capacity, int)):
            raise TypeError(
                f"Channel() needs an int capacity or math.inf, got {type(capacity).__name__}; "
                "pass 0 for a rendezvous, a positive buffer size, or math.inf for no limit"
            )
        if capacity < 0:
            raise ValueError(
                f"Channel({capacity}) needs a capacity of 0 or more; "
                "pass 0 for a rendezvous, a positive buffer size, or math.inf for no limit"
            )
        self.capacity = capacity
        self._mutex = threading.Lock()
        self._buffer: deque[T] = deque()
        self._senders: deque[tuple[Any, T]] = deque()
        self._receivers: deque[Any] = deque()
        self._closed = False
        # Set when every receiver end was closed; counts of ends (see
        # _channel_ends.py), made by the first sender() or receiver().
        self._broken = False
        self._ends: EndCounts | None = None

    def _wait_text(self, *, receiving: bool) -> str:
        """What a blocked send or receive waits on, for ``dump()`` and reports.

        Read without the mutex (the runtime lock may be held): a snapshot.
        """
        side = "sender" if receiving else "receiver"
        details: list[str] = []
        ends = self._ends
        if self._closed:
            details.append("broken" if self._broken else "closed")
        elif ends is not None:
            count = ends.get(side, 0)
            # (With none of its ends open, the channel itself may still be used.)
            details.append(
                f"{count} {side} end{'' if count == 1 else 's'} open"
                if count
                else f"no {side} end open, and the channel is not closed"
            )
        if not receiving and self.capacity:
            details.append(f"{len(self._buffer)} of {self.capacity:g} buffered")
        what = label("channel", self.name, self._site, *details)
        return f"receive from {what}" if receiving else f"send to {what}"

    # -- the hand-over core, under the mutex ----------------------------------

    def _offer_locked(self, item: T) -> bool:
        """Deliver ``item`` to a receiver or the buffer; False if it must wait."""
        if self._closed:
            raise self._closed_error()
        receivers = self._receivers
        while receivers:
            if receivers.popleft().fire(item):
                return True
        if len(self._buffer) < self.capacity:
            self._buffer.append(item)
            return True
        return False

    def _closed_error(self) -> ClosedResourceError | BrokenResourceError:
        if self._broken:
            return broken_error()
        return ClosedResourceError(
            f"send on {label('channel', self.name, self._site)}, which is closed; "
            "stop sending once close() was called"
        )

    def _take_locked(self) -> Any:
        """Take the next item, or ``_NOTHING`` if a receive must wait."""
        senders = self._senders
        if self._buffer:
            item = self._buffer.popleft()
            while senders:
                waiter, queued = senders.popleft()
                if waiter.fire(None):
                    self._buffer.append(queued)
                    break
            return item
        while senders:
            waiter, queued = senders.popleft()
            if waiter.fire(None):
                return queued
        if self._closed:
            raise EndOfChannel("the channel is closed and drained; stop receiving")
        return _NOTHING

    # -- coroutines ----------------------------------------------------------------

    @task_maker
    def send_async(self, item: T) -> WaitEvent[None]:
        """Send from a coroutine, waiting for room (or a receiver). A cancellation point.

        Raises:
            ClosedResourceError: the channel is closed (the item was not sent).
            Cancelled: the task is cancelled while waiting; the item was not sent.
        """
        return _Send(self, item, None)

    def _send_async(self, item: T, end: End[T]) -> WaitEvent[None]:
        return _Send(self, item, end)

    @task_maker
    def recv_async(self) -> WaitEvent[T]:
        """Receive in a coroutine, waiting for an item. A cancellation point.

        Raises:
            EndOfChannel: the channel is closed and drained.
            Cancelled: the task is cancelled while waiting; no item was taken.
        """
        return _Recv(self, None)

    def _recv_async(self, end: End[T]) -> WaitEvent[T]:
        return _Recv(self, end)

    # -- threads -------------------------------------------------------------------

    def _blocking_caller(self, end: End[T] | None, method: str, instead: str) -> ThreadState:
        """The calling thread's state; refuses a coroutine, naming what it called."""
        state = thread_state()
        if state.task is not None:
            owner, handle = _names(end)
            raise blocking_in_task_error(f"{owner}.{method}()", f"'await {handle}.{instead}'")
        return state

    def send(self, item: T, timeout: float | None = None) -> None:
        """Send from a thread, blocking up to ``timeout`` seconds for room.

        Called from inside an operation (a plain function running as one,
        or the block of a sync scope), it is a cancellation point: it raises
        ``Cancelled`` within milliseconds when that operation is cancelled
        while the call waits, or at once if it would have to wait, with the item not
        sent. An item taken just before the cancel counts as sent (the call
        returns). From any other thread it only blocks. A KeyboardInterrupt
        while waiting leaves the item either sent or not queued at all.

        Args:
            item: what to send.
            timeout: seconds to wait at most; None, ``math.inf`` or a huge
                value wait without limit, and 0 or less only tries.

        Raises:
            ClosedResourceError: the channel is closed.
            TimeoutError: no room (or receiver) within ``timeout``; not sent.
            Cancelled: the calling operation is cancelled; not sent.
            RuntimeError: called from a coroutine (use ``send_async``).
            TypeError: ``timeout`` is not a number.
            ValueError: ``timeout`` is NaN.
        """
        self._send(item, timeout, None)

    def _send(self, item: T, timeout: float | None, end: End[T] | None) -> None:
        state = self._blocking_caller(end, "send", "send_async(item)")
        limit = None
        if timeout is not None:
            limit = check_timeout(timeout, f"{_names(end)[0]}.send(timeout=...)")
        op = state.op  # the operation whose cancel ends the wait, if any
        waiter: ThreadWaiter | None = None
        try:
            with self._mutex:
                if self._offer_locked(item):
                    return
                if limit != 0.0:
                    waiter = ThreadWaiter(self, receiving=False)
                    self._senders.append((waiter, item))
                    if end is not None:
                        end._track(waiter)
            if waiter is not None and waiter.wait(self._mutex, self._senders, limit, op):
                if waiter.error is not None:
                    raise waiter.error
                return
        except BaseException:
            # A Ctrl-C while waiting: the item leaves the queue unsent (one
            # already taken by a receiver stays sent: it cannot be unsent).
            if waiter is not None:
                waiter.abandon(self._mutex, self._senders)
            raise
        finally:
            if end is not None and waiter is not None:
                with self._mutex:
                    end._untrack(waiter)
        raise TimeoutError(f"send did not complete within {timeout} s; the item was not sent")

    def recv(self, timeout: float | None = None) -> T:
        """Receive in a thread, blocking up to ``timeout`` seconds.

        Called from inside an operation (a plain function running as one,
        or the block of a sync scope), it is a cancellation point: it raises
        ``Cancelled`` within milliseconds when that operation is cancelled
        while the call waits, or at once if it would have to wait, taking no item. An
        item handed over just before the cancel is returned. From any other
        thread it only blocks. A KeyboardInterrupt while waiting puts an
        item it was handed back at the front of the channel.

        Args:
            timeout: seconds to wait at most; None, ``math.inf`` or a huge
                value wait without limit, and 0 or less only tries.

        Raises:
            EndOfChannel: the channel is closed and drained.
            TimeoutError: nothing arrived within ``timeout``.
            Cancelled: the calling operation is cancelled; no item was taken.
            RuntimeError: called from a coroutine (use ``recv_async``).
            TypeError: ``timeout`` is not a number.
            ValueError: ``timeout`` is NaN.
        """
        return self._recv(timeout, None)

    def _recv(self, timeout: float | None, end: End[T] | None) -> T:
        state = self._blocking_caller(end, "recv", "recv_async()")
        limit = None
        if timeout is not None:
            limit = check_timeout(timeout, f"{_names(end)[0]}.recv(timeout=...)")
        op = state.op  # the operation whose cancel ends the wait, if any
        item: Any = _NOTHING
        waiter: ThreadWaiter | None = None
        try:
            with self._mutex:
                item = self._take_locked()
                if item is _NOTHING and limit != 0.0:
                    waiter = ThreadWaiter(self, receiving=True)
                    self._receivers.append(waiter)
                    if end is not None:
                        end._track(waiter)
            if item is not _NOTHING:
                return item  # type: ignore[no-any-return]
            if waiter is not None and waiter.wait(self._mutex, self._receivers, limit, op):
                if waiter.error is not None:
                    raise waiter.error
                return waiter.value  # type: ignore[no-any-return]
        except BaseException:
            # A Ctrl-C landing anywhere above: what this call took goes back.
            if waiter is None:
                if item is not _NOTHING:
                    self._give_back(item)
            elif waiter.abandon(self._mutex, self._receivers):
                self._give_back(waiter.value)
            raise
        finally:
            if end is not None and waiter is not None:
                with self._mutex:
                    end._untrack(waiter)
        raise TimeoutError(f"nothing was received within {timeout} s")

    def _give_back(self, item: T) -> None:
        """Put back an item a receive took but will not return: it is next."""
        with self._mutex:
            receivers = self._receivers
            while receivers:
                if receivers.popleft().fire(item):
                    return
            if self.capacity or self._buffer or self._closed:
                self._buffer.appendleft(item)
            else:
                # A rendezvous keeps no buffer: a paid-for send at the front.
                self._senders.appendleft((_PREPAID, item))

    def try_send(self, item: T) -> None:
        """Send without waiting.

        Raises:
            WouldBlock: no receiver is waiting and the buffer is full.
            ClosedResourceError: the channel is closed.
        """
        with self._mutex:
            if not self._offer_locked(item):
                raise WouldBlock("the channel is full; send later, or use send_async()")

    def try_recv(self) -> T:
        """Receive without waiting.

        Raises:
            WouldBlock: nothing is available now.
            EndOfChannel: the channel is closed and drained.
        """
        with self._mutex:
            item = self._take_locked()
        if item is _NOTHING:
            raise WouldBlock("the channel is empty; receive later, or use recv_async()")
        return item  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the channel; see the module docstring. Closing twice is harmless."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            while self._senders:
                waiter, item = self._senders.popleft()
                if waiter is _PREPAID:
                    self._buffer.append(item)  # already sent: it stays to be drained
                    continue
                waiter.fire(
                    None,
                    ClosedResourceError("the channel was closed before this item was taken"),
                )
            while self._receivers:
                self._receivers.popleft().fire(
                    None, EndOfChannel("the channel is closed and drained; stop receiving")
                )

    def sender(self) -> ChannelSender[T]:
        """Make a sender end; when every sender end made is closed, the channel closes.

        See ``ChannelSender``: ends have ``clone()``, ``close()`` and the send
        methods, and using a closed end raises ``ClosedResourceError``.
        """
        return new_sender(self)

    def receiver(self) -> ChannelReceiver[T]:
        """Make a receiver end; when every receiver end made is closed, sends break.

        See ``ChannelReceiver``: ends have ``clone()``, ``close()``, the
        receive methods and iteration. Once all are closed, sends raise
        ``BrokenResourceError``.
        """
        return new_receiver(self)

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._closed

    def __len__(self) -> int:
        """Items in the buffer now."""
        return len(self._buffer)

    def statistics(self) -> ChannelStatistics:
        """A snapshot: items buffered, capacity, open ends, and who waits to send or receive.

        A send that has completed but whose item is not received yet counts
        as buffered, even in a rendezvous (an item a cancelled receive gave
        back waits there too), not as a waiting sender. Not a cancellation
        point.
        """
        with self._mutex:
            senders = self._senders
            prepaid = sum(1 for waiter, _item in senders if waiter is _PREPAID)
            waiting = sum(
                1 for entry in senders if entry[0] is not _PREPAID and waiter_is_live(entry)
            )
            ends = self._ends or {}
            return ChannelStatistics(
                len(self._buffer) + prepaid,
                self.capacity,
                ends.get("sender", 0),
                ends.get("receiver", 0),
                waiting,
                live_waiters(self._receivers),
            )

    # -- iteration -----------------------------------------------------------------

    def __iter__(self) -> Iterator[T]:
        """Receive in a thread until the channel is closed and drained.

        Raises:
            RuntimeError: the loop is inside a coroutine (use ``async for``).
        """
        refuse_for_in_task(self, "channel")
        return Receiving.__iter__(self)

    def __repr__(self) -> str:
        # Open ends once sender()/receiver() made any; waiters are the
        # blocked sends and receives, as other primitives count theirs.
        state = "closed" if self._closed else "open"
        ends = self._ends
        open_ends = (
            ""
            if ends is None
            else f"sender_ends={ends.get('sender', 0)} receiver_ends={ends.get('receiver', 0)} "
        )
        return (
            f"<Channel {state} capacity={self.capacity} buffered={len(self._buffer)} "
            f"{open_ends}send_waiters={len(self._senders)} "
            f"receive_waiters={len(self._receivers)} {short_label(self.name, self._site)}>"
        )
