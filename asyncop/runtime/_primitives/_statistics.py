"""What ``statistics()`` of each primitive returns: frozen snapshots, as trio's.

::

    lock = asyncop.Lock()
    ...
    stats = lock.statistics()        # LockStatistics(locked=True, owner=..., tasks_waiting=2)

Each primitive (``Event``, ``Lock``, ``Semaphore``, ``Condition``,
``CapacityLimiter``, ``Channel`` and its ends) answers ``statistics()``
with one of these values, read under the primitive's mutex, so that the
fields agree with each other at one instant. They are values, not views:
the primitive moves on, the snapshot does not. The field names are trio's,
and "tasks" counts every waiter, a coroutine task or a blocked thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import threading

    from ...operations import AsyncOperation

__all__ = [
    "CapacityLimiterStatistics",
    "ChannelStatistics",
    "ConditionStatistics",
    "EventStatistics",
    "LockStatistics",
    "SemaphoreStatistics",
]


@attrs.frozen
class EventStatistics:
    """A snapshot of an ``Event``, from ``event.statistics()``.

    Attributes:
        tasks_waiting: how many tasks and threads wait for the event now.
    """

    __module__ = "asyncop"

    tasks_waiting: int


@attrs.frozen
class LockStatistics:
    """A snapshot of a ``Lock``, from ``lock.statistics()``.

    Attributes:
        locked: whether someone holds the lock.
        owner: who holds it: the task's ``AsyncOperation``, or the
            ``threading.Thread`` for a thread; None when nobody does.
        tasks_waiting: how many tasks and threads wait to acquire it.
    """

    __module__ = "asyncop"

    locked: bool
    owner: AsyncOperation[Any] | threading.Thread | None
    tasks_waiting: int


@attrs.frozen
class SemaphoreStatistics:
    """A snapshot of a ``Semaphore``, from ``sem.statistics()``.

    Attributes:
        tasks_waiting: how many tasks and threads wait for a permit.
    """

    __module__ = "asyncop"

    tasks_waiting: int


@attrs.frozen
class ConditionStatistics:
    """A snapshot of a ``Condition``, from ``cond.statistics()``.

    Attributes:
        tasks_waiting: how many tasks and threads wait to be notified.
        lock_statistics: the snapshot of the condition's ``Lock``.
    """

    __module__ = "asyncop"

    tasks_waiting: int
    lock_statistics: LockStatistics


@attrs.frozen
class CapacityLimiterStatistics:
    """A snapshot of a ``CapacityLimiter``, from ``limiter.statistics()``.

    Attributes:
        borrowed_tokens: how many tokens are lent now.
        total_tokens: how many may be lent at once (``math.inf``: no limit).
        borrowers: who holds the tokens lent: tasks' operations, threads,
            sync operations, or the objects given to
            ``acquire_on_behalf_of``.
        tasks_waiting: how many tasks and threads wait for a token.
    """

    __module__ = "asyncop"

    borrowed_tokens: int
    total_tokens: int | float
    borrowers: tuple[object, ...]
    tasks_waiting: int


@attrs.frozen
class ChannelStatistics:
    """A snapshot of a ``Channel``, from ``statistics()`` of the channel or of one of its ends.

    Attributes:
        current_buffer_used: how many items wait in the buffer now.
        max_buffer_size: the channel's capacity (0: a rendezvous,
            ``math.inf``: no limit).
        open_send_ends: how many ``ChannelSender`` ends are open (0 when
            none was made).
        open_receive_ends: how many ``ChannelReceiver`` ends are open (0
            when none was made).
        tasks_waiting_send: how many tasks and threads wait to send.
        tasks_waiting_receive: how many tasks and threads wait to receive.
    """

    __module__ = "asyncop"

    current_buffer_used: int
    max_buffer_size: int | float
    open_send_ends: int
    open_receive_ends: int
    tasks_waiting_send: int
    tasks_waiting_receive: int
