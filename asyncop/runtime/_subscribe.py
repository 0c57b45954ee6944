"""Subscribing a task's waker to events: ``waker_new`` and ``resume_when``.

The two calls of ``asyncop.lowlevel`` that a new awaitable is built from.
``waker_new(task)`` resets the task's waker for a new wait (optionally with
a timeout and a cancellation event); ``resume_when(task, event, callback)``
subscribes it to one more event, and ``callback`` (``resolve``, ``cancel``
or ``timeout`` of ``_waker.py``) decides how a firing resumes the task. The
waker itself, its states and the event protocol are in ``_waker.py``.
"""

from __future__ import annotations

from typing import Any

from ..operations import AsyncOperation
from ..platform import check_timeout
from ._core._awaitables import SleepUntil
from ._core._waker import (
    Subscription,
    WaitEvent,
    WakeCallback,
    Waker,
    cancel,
    is_event,
    let_go,
    resolve,
    subscription,
    timeout,
)

__all__ = ["resume_when", "waker_new"]


def _waker_of(task: object, what: str) -> Waker:
    if not isinstance(task, AsyncOperation):
        raise TypeError(
            f"{what} needs a coroutine task (an AsyncOperation) as 'task', got "
            f"{type(task).__name__}; pass sub.waker.task from inside an event's _arm()"
        )
    state = task._task
    if state is None:
        raise TypeError(
            f"{what}: operation {task.name!r} is not a coroutine task and has no waker; "
            "pass an operation made from an async def function"
        )
    waker: Waker = state
    return waker


def resume_when(
    task: AsyncOperation[Any], event: Any, callback: WakeCallback = resolve
) -> Subscription:
    """Subscribe ``task``'s waker to ``event``; ``callback`` decides the outcome.

    Call it between ``waker_new`` and the suspension. The event may fire at
    once (it was already ready): the waker then goes to RESULT and the task
    does not suspend. Not a cancellation point.

    Raises:
        TypeError: ``task`` is not a coroutine task, ``event`` is not an
            event (it lacks ``_arm``/``_disarm``), or ``callback`` is not
            callable.
        BaseException: what the event's ``_arm`` raised.
    """
    if isinstance(event, WaitEvent):
        # Handed over: the subscription stands for it (and a refusal below
        # says enough without a "never awaited" warning besides).
        event._awaited = True
    waker = _waker_of(task, "resume_when()")
    if not is_event(event):
        let_go((event,))  # a coroutine, say: refused, it must not warn besides
        raise TypeError(
            f"resume_when() needs an asyncop event as 'event', got {type(event).__name__}; "
            "pass an awaitable such as asyncop.sleep(1) or an operation"
        )
    if not callable(callback):
        raise TypeError(
            f"resume_when() needs a callable as 'callback', got {type(callback).__name__}; "
            "pass lowlevel.resolve, lowlevel.cancel or lowlevel.timeout"
        )
    sub = subscription(waker, event, callback)
    waker._add_subscription(sub)
    event._arm(sub)
    return sub


def waker_new(
    task: AsyncOperation[Any],
    timeout: float | None = None,
    cancellation: Any = None,
) -> Waker:
    """Reset ``task``'s waker for a new wait, with an optional timeout.

    Not a cancellation point.

    Args:
        task: a coroutine task.
        timeout: seconds after which the wait ends with ``TimeoutError``;
            None or ``inf`` for no limit.
        cancellation: an event whose firing ends the wait with ``Cancelled``.

    Returns:
        The task's waker, reset to NO_STATUS with no subscriptions.

    Raises:
        TypeError: ``task`` is not a coroutine task, ``timeout`` is not a
            number, or ``cancellation`` is not an event.
        ValueError: ``timeout`` is NaN.
        RuntimeError: ``task`` is not running (it is suspended or queued),
            so this call is not part of its own wait.
    """
    try:
        waker = _waker_of(task, "waker_new()")
        seconds = check_timeout(timeout, "waker_new(timeout=...)")
        if cancellation is not None and not is_event(cancellation):
            raise TypeError(
                "waker_new() needs an asyncop event as 'cancellation', got "
                f"{type(cancellation).__name__}; pass an awaitable such as event.wait_async()"
            )
    except BaseException:
        let_go((cancellation,))  # refused: it must not warn "never awaited" besides
        raise
    if not waker._transition_to_no_status():
        let_go((cancellation,))
        raise RuntimeError(
            f"waker_new() was called for task {task.name!r}, which is not running "
            f"(its waker is {waker.status.name}); call it from the task's own wait, "
            "in the _arm() of the event it awaits"
        )
    waker._disarm_all()
    if seconds is not None:
        resume_when(task, SleepUntil(seconds, relative=True), _timeout_callback)
    if cancellation is not None:
        resume_when(task, cancellation, cancel)
    return waker


_timeout_callback = timeout
