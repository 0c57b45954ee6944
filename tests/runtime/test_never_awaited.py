"""A forgotten ``await``: every asyncop awaitable warns when collected unawaited.

As with a coroutine, the awaitable did nothing: a ``send_async(x)`` that is
never awaited has not sent ``x``. Awaited ones, and those handed to
``select``, ``race``, ``resume_when`` or refused by a spawn, stay silent.
"""

from __future__ import annotations

import gc
import socket
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import asyncop
from asyncop import lowlevel
from asyncop.lowlevel import Subscription, WaitEvent
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def vrt() -> Iterator[asyncop.Runtime]:
    rt = asyncop.Runtime(2, name=f"nev{id(object()):x}", clock=VirtualClock(autojump=True))
    try:
        yield rt
    finally:
        assert rt.shutdown(timeout=10)


def _noop_op(rt: asyncop.Runtime) -> asyncop.AsyncOperation:
    return rt.create(lambda op, ctx: None, name="some_op")


# Each maker builds one awaitable the way a user would, and forgets the await.
MAKERS: dict[str, Callable[[asyncop.Runtime], Any]] = {
    "checkpoint": lambda rt: asyncop.checkpoint(),
    "sleep": lambda rt: asyncop.sleep(1),
    "sleep-zero": lambda rt: asyncop.sleep(0),
    "sleep-inf": lambda rt: asyncop.sleep(float("inf")),
    "sleep_forever": lambda rt: asyncop.sleep_forever(),
    "sleep_until": lambda rt: asyncop.sleep_until(5),
    "send_async": lambda rt: asyncop.Channel(1).send_async("item"),
    "recv_async": lambda rt: asyncop.Channel(1).recv_async(),
    "lock_async": lambda rt: asyncop.Lock().lock_async(),
    "acquire_async": lambda rt: asyncop.Semaphore(1).acquire_async(),
    "wait_async": lambda rt: asyncop.Event().wait_async(),
    "timeout": lambda rt: asyncop.timeout(1, _noop_op(rt)),
    "race": lambda rt: asyncop.race(_noop_op(rt)),
    "select": lambda rt: asyncop.select(asyncop.sleep(1), asyncop.Event().wait_async()),
    "spawn_blocking": lambda rt: asyncop.spawn_blocking(print),
    "readable": lambda rt: asyncop.readable(0),
    "writable": lambda rt: asyncop.writable(1),
    "wait_all_blocked": lambda rt: wait_all_blocked(),
}


def _never_awaited(caught: list[warnings.WarningMessage]) -> list[str]:
    return [
        str(w.message)
        for w in caught
        if issubclass(w.category, RuntimeWarning) and "never awaited" in str(w.message)
    ]


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_an_awaitable_collected_unawaited_warns_naming_where(
    vrt: asyncop.Runtime, kind: str
) -> None:
    make = MAKERS[kind]

    async def forgets() -> None:
        make(vrt)  # the forgotten await: this line is named

    line = forgets.__code__.co_firstlineno + 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vrt.run(forgets)
        gc.collect()
    messages = _never_awaited(caught)
    assert len(messages) == 1, messages
    assert messages[0].startswith("asyncop awaitable ")
    assert f"{__file__}:{line}" in messages[0]
    assert [w.lineno for w in caught if "never awaited" in str(w.message)] == [line]


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_an_awaitable_made_in_a_plain_thread_warns_too(vrt: asyncop.Runtime, kind: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        MAKERS[kind](vrt)
        gc.collect()
    assert len(_never_awaited(caught)) == 1


@pytest.mark.parametrize("kind", ["sleep", "sleep-zero", "checkpoint", "select", "sleep_until"])
def test_only_the_unawaited_one_of_two_warns(vrt: asyncop.Runtime, kind: str) -> None:
    async def awaits_one() -> None:
        await MAKERS[kind](vrt)
        MAKERS[kind](vrt)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vrt.run(awaits_one)
        gc.collect()
    assert len(_never_awaited(caught)) == 1


def test_awaited_primitives_stay_silent(vrt: asyncop.Runtime) -> None:
    async def main() -> None:
        channel: asyncop.Channel[int] = asyncop.Channel(1)
        await channel.send_async(1)
        assert await channel.recv_async() == 1
        lock = asyncop.Lock()
        guard = await lock.lock_async()
        guard.release()
        sem = asyncop.Semaphore(1)
        await sem.acquire_async()
        sem.release()
        event = asyncop.Event()
        event.set()
        await event.wait_async()
        me = asyncop.current_operation()
        assert me is not None
        op = me.spawn(_child)
        assert await asyncop.timeout(10, op) == 7
        assert await asyncop.race(op) is op
        assert await asyncop.spawn_blocking(int, "3") == 3
        a, b = socket.socketpair()
        try:
            await asyncop.writable(a)
        finally:
            a.close()
            b.close()
        channel.send_async(2)  # the one forgotten await

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vrt.run(main)
        gc.collect()
    assert len(_never_awaited(caught)) == 1


async def _child() -> int:
    await asyncop.sleep(1)
    return 7


def test_events_given_to_select_or_resume_when_stay_silent(vrt: asyncop.Runtime) -> None:
    class Both(WaitEvent):
        """Waits through resume_when on a sleep it makes and never awaits."""

        def _arm(self, sub: Subscription) -> None:
            lowlevel.resume_when(sub.waker.task, asyncop.sleep(1), lowlevel.resolve)
            sub.fire("armed")

    async def main() -> Any:
        first = await asyncop.select(asyncop.sleep(1), asyncop.sleep(2), asyncop.checkpoint())
        Both()  # forgotten: a user's own WaitEvent subclass warns too
        return first, await Both()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert vrt.run(main) == ((2, None), "armed")
        gc.collect()
    assert len(_never_awaited(caught)) == 1


def test_a_forgotten_send_has_not_sent(vrt: asyncop.Runtime) -> None:
    channel: asyncop.Channel[str] = asyncop.Channel(5)

    async def forgets() -> None:
        channel.send_async("lost?")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vrt.run(forgets)
        gc.collect()
    assert len(_never_awaited(caught)) == 1
    with pytest.raises(asyncop.WouldBlock):
        channel.try_recv()


def test_a_forgotten_lock_async_takes_no_lock(vrt: asyncop.Runtime) -> None:
    lock = asyncop.Lock()

    async def forgets() -> None:
        lock.lock_async()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vrt.run(forgets)
        gc.collect()
    assert len(_never_awaited(caught)) == 1
    assert not lock.locked()


def test_the_warning_can_be_made_an_error_like_a_coroutines(vrt: asyncop.Runtime) -> None:
    # With -W error the warning escapes __del__ to sys.unraisablehook, as
    # Python's own "coroutine ... was never awaited" does.
    seen: list[BaseException | None] = []

    def hook(args: Any) -> None:
        seen.append(args.exc_value)

    import sys

    old = sys.unraisablehook
    sys.unraisablehook = hook
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            asyncop.sleep(3)
            gc.collect()
    finally:
        sys.unraisablehook = old
    assert len(seen) == 1 and isinstance(seen[0], RuntimeWarning)
    assert "sleep(3) was never awaited" in str(seen[0])


def test_refused_awaitables_do_not_warn_again(vrt: asyncop.Runtime) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError):
            vrt.run(asyncop.sleep, 10)  # refused: a TypeError says it all
        with pytest.raises(TypeError):
            asyncop.race("not an op")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            asyncop.select(asyncop.sleep(1), "nothing")
        with pytest.raises(TypeError):
            asyncop.spawn_blocking(42)  # type: ignore[arg-type]
        gc.collect()
    assert _never_awaited(caught) == []
    # ...while one that was simply dropped does warn.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncop.race(_noop_op(vrt))
        gc.collect()
    assert len(_never_awaited(caught)) == 1
