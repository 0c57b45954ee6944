"""Awaitables made of other awaitables: ``select``, ``race`` and ``timeout``.

``select(*events)`` waits on several events at once: the first to fire wins,
the others are disarmed, so a losing receive consumes no item. ``race`` and
``timeout`` are made of a ``select`` over operation waits (and a sleep).
They spawn nothing: the operations they wait on keep running.

Every factory checks its arguments when called, before anything is made; one
that refuses an argument lets go of every awaitable it was handed
(``let_go``), so none of them warns that it was never awaited.
"""

from __future__ import annotations

from collections.abc import Callable
from types import CoroutineType
from typing import Any, NoReturn, final, overload

from ..operations import (
    A,
    AsyncOperation,
    B,
    C,
    D,
    E,
    V,
    safe_repr,
)
from ._core._awaitables import OpWait, SleepUntil, _seconds
from ._core._waker import (
    CallbackSubscription,
    Subscription,
    WaitEvent,
    Waker,
    WakerStatus,
    describe_event,
    is_event,
    let_go,
)

__all__ = ["Select", "race", "select", "timeout"]


# -- composition ----------------------------------------------------------------


@final
class Select(WaitEvent):
    """Wait on several events; the first to fire wins and the rest are disarmed.

    Gives ``(index, value)``; ``transform`` may reshape that.
    """

    __slots__ = ("events", "transform")

    def __init__(
        self,
        events: tuple[Any, ...],
        transform: Callable[[int, Any], Any] | None = None,
    ) -> None:
        if not events:
            self._awaited = True  # refused: nothing to warn about when it is collected
            raise ValueError(
                "select() got nothing to wait on; pass at least one awaitable, "
                "e.g. select(channel.recv_async(), asyncop.sleep(1))"
            )
        converted = []
        for event in events:
            if isinstance(event, AsyncOperation):
                event = OpWait(event)
            if isinstance(event, WaitEvent):
                event._awaited = True  # the select stands for it now
            elif not is_event(event):
                self._awaited = True
                let_go(events)  # the refused call stands for all of them
                raise TypeError(
                    f"select() can only wait on asyncop awaitables, got {_refused(event)}; "
                    "pass events such as asyncop.sleep(1), an operation, or "
                    "channel.recv_async()"
                )
            converted.append(event)
        self.events = tuple(converted)
        self.transform = transform

    @property
    def cancellable(self) -> bool:  # type: ignore[override]
        # Interruptible if any branch is: a cancel then wins like any event,
        # and the uninterruptible branches lose (a blocking call's late
        # result is dropped, as for a losing branch).
        return any(event.cancellable for event in self.events)

    def _arm(self, sub: Subscription) -> None:
        waker = sub.waker
        subs: list[Subscription] = []
        sub.handle = subs
        transform = self.transform
        for index, event in enumerate(self.events):

            def forward(
                waker: Waker,
                child: Subscription,
                result: Any,
                error: BaseException | None,
                index: int = index,
            ) -> bool:
                if error is not None:
                    return sub.fire(None, error)
                value = (index, result) if transform is None else transform(index, result)
                return sub.fire(value)

            child = CallbackSubscription(waker, event, forward)
            subs.append(child)
            event._arm(child)
            if waker.status is not WakerStatus.NO_STATUS:
                break  # already won: arming the rest would only be undone

    def _disarm(self, sub: Subscription) -> None:
        subs = sub.handle
        if subs is not None:
            sub.handle = None
            for child in subs:
                child.event._disarm(child)

    def _describe(self) -> str:
        return "select(" + ", ".join(describe_event(event) for event in self.events) + ")"


# The overloads give (index, value) with the value's type the union of the
# awaitables' (an operation gives its value, as for 'await op').
@overload
def select(a: WaitEvent[A] | AsyncOperation[A], /) -> WaitEvent[tuple[int, A]]: ...


@overload
def select(
    a: WaitEvent[A] | AsyncOperation[A], b: WaitEvent[B] | AsyncOperation[B], /
) -> WaitEvent[tuple[int, A | B]]: ...


@overload
def select(
    a: WaitEvent[A] | AsyncOperation[A],
    b: WaitEvent[B] | AsyncOperation[B],
    c: WaitEvent[C] | AsyncOperation[C],
    /,
) -> WaitEvent[tuple[int, A | B | C]]: ...


@overload
def select(
    a: WaitEvent[A] | AsyncOperation[A],
    b: WaitEvent[B] | AsyncOperation[B],
    c: WaitEvent[C] | AsyncOperation[C],
    d: WaitEvent[D] | AsyncOperation[D],
    /,
) -> WaitEvent[tuple[int, A | B | C | D]]: ...


@overload
def select(
    a: WaitEvent[A] | AsyncOperation[A],
    b: WaitEvent[B] | AsyncOperation[B],
    c: WaitEvent[C] | AsyncOperation[C],
    d: WaitEvent[D] | AsyncOperation[D],
    e: WaitEvent[E] | AsyncOperation[E],
    /,
) -> WaitEvent[tuple[int, A | B | C | D | E]]: ...


@overload
def select(
    *awaitables: WaitEvent[Any] | AsyncOperation[Any],
) -> WaitEvent[tuple[int, Any]]: ...


def select(*awaitables: Any) -> WaitEvent[tuple[int, Any]]:
    """Wait for the first of several awaitables; cancel the others.

    Spawns nothing. The losers are taken back before the task resumes, so a
    losing ``recv_async`` consumes no item and a losing ``lock_async`` takes
    no lock.

    Returns:
        When awaited, ``(index, value)`` of the first to fire.

    Raises:
        Cancelled: the task is cancelled while waiting.
        BaseException: the error of the first awaitable to fire, if it failed.
    """
    return Select(awaitables)


# The overloads give the winner as AsyncOperation[A | B | ...]: any of them
# may win, whatever its outcome.
@overload
def race(a: AsyncOperation[A], /) -> WaitEvent[AsyncOperation[A]]: ...


@overload
def race(a: AsyncOperation[A], b: AsyncOperation[B], /) -> WaitEvent[AsyncOperation[A | B]]: ...


@overload
def race(
    a: AsyncOperation[A], b: AsyncOperation[B], c: AsyncOperation[C], /
) -> WaitEvent[AsyncOperation[A | B | C]]: ...


@overload
def race(
    a: AsyncOperation[A], b: AsyncOperation[B], c: AsyncOperation[C], d: AsyncOperation[D], /
) -> WaitEvent[AsyncOperation[A | B | C | D]]: ...


@overload
def race(
    a: AsyncOperation[A],
    b: AsyncOperation[B],
    c: AsyncOperation[C],
    d: AsyncOperation[D],
    e: AsyncOperation[E],
    /,
) -> WaitEvent[AsyncOperation[A | B | C | D | E]]: ...


@overload
def race(*ops: AsyncOperation[Any]) -> WaitEvent[AsyncOperation[Any]]: ...


def race(*ops: AsyncOperation[Any]) -> WaitEvent[AsyncOperation[Any]]:
    """Wait for the first of several operations to end; the others keep running.

    Returns:
        When awaited, the first operation to end (whatever its outcome).
    """
    if not ops:
        raise ValueError("race() got no operation; pass at least one operation to race")
    for op in ops:
        if not isinstance(op, AsyncOperation):
            let_go(ops)  # the refused call stands for all of them
            raise TypeError(
                f"race() races operations, got {_refused(op)}; pass operations made by "
                "spawn(), or wait for the first of several events with select()"
            )
    waits = []
    for op in ops:
        wait = OpWait(op, as_op=True)
        wait._awaited = True  # part of the race, which warns for itself
        waits.append(wait)
    return Select(tuple(waits), lambda _i, op: op)


@final
class _Timeout(WaitEvent):
    __slots__ = ("op", "seconds")

    def __init__(self, seconds: float, op: AsyncOperation) -> None:
        self.seconds = seconds
        self.op = op

    def _arm(self, sub: Subscription) -> None:
        op = self.op
        # (An infinite timeout arms no timer: SleepUntil(inf) arms nothing.)
        inner = Select((OpWait(op), SleepUntil(self.seconds, relative=True)))
        inner._awaited = True

        def forward(
            waker: Waker, child: Subscription, result: Any, error: BaseException | None
        ) -> bool:
            if error is not None:
                return sub.fire(None, error)
            index, value = result
            if index == 1:
                return sub.fire(
                    None,
                    TimeoutError(
                        f"operation {op.name!r} did not end within {self.seconds:g} s; "
                        "it keeps running: cancel it with op.cancel() if needed"
                    ),
                )
            return sub.fire(value)

        child = CallbackSubscription(sub.waker, inner, forward)
        sub.handle = child
        inner._arm(child)

    def _disarm(self, sub: Subscription) -> None:
        child = sub.handle
        if child is not None:
            sub.handle = None
            child.event._disarm(child)

    def _describe(self) -> str:
        return f"timeout({self.seconds:g}, {self.op.name!r})"


# Stands for the operation left out, as in asyncio's ``async with timeout(5):``.
_NO_OP: Any = object()
_INF = float("inf")


@overload
def timeout(seconds: float | None, op: AsyncOperation[V]) -> WaitEvent[V]: ...


@overload
def timeout(seconds: float | None) -> NoReturn: ...


def timeout(seconds: float | None, op: AsyncOperation[V] = _NO_OP) -> WaitEvent[V]:
    """Wait for ``op`` for at most ``seconds``; it keeps running after a timeout.

    ``None`` (or ``math.inf``) sets no limit, as for ``move_on_after`` and
    asyncio's ``wait_for``.

    ``timeout(seconds)`` alone, asyncio's ``async with timeout(5):``, raises
    TypeError: the block form is ``fail_after`` (or ``move_on_after``).

    Returns:
        When awaited, the operation's value.

    Raises:
        TimeoutError: ``op`` had not ended in time.
        BaseException: the operation's error.
        TypeError: ``op`` is left out or is not an operation.
    """
    try:
        if op is _NO_OP:
            raise TypeError(
                f"timeout({safe_repr(seconds)}) got no operation to wait for; to limit a "
                "block, as asyncio's 'async with timeout(...)' does, write 'async with "
                "asyncop.fail_after(seconds):' (or move_on_after), or pass the operation: "
                "'await asyncop.timeout(seconds, op)'"
            )
        if not isinstance(op, AsyncOperation):
            raise TypeError(
                f"timeout() needs an operation as 'op', got {_refused(op)}; "
                "pass the result of spawn() or create()"
            )
        return _Timeout(_INF if seconds is None else _seconds(seconds, "timeout()"), op)
    except BaseException:
        let_go((seconds, op))  # (the arguments may be swapped: either can be an event)
        raise


def _refused(value: object) -> str:
    """What a refused argument is, for a message: an awaitable by what it stands for."""
    if isinstance(value, WaitEvent):
        return f"asyncop awaitable {describe_event(value)}"
    if isinstance(value, CoroutineType):
        return f"coroutine {value.__qualname__}() (spawn its function to get an operation)"
    return f"{type(value).__name__} {safe_repr(value)}"
