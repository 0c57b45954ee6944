"""A forgotten ``await``: every asyncop awaitable warns when collected unawaited.

As with a coroutine, the awaitable did nothing: a ``send_async(x)`` that is
never awaited has not sent ``x``. Awaited ones, and those handed to
``select``, ``race``, ``resume_when`` or to any call that refused them (or
another of its arguments), stay silent.
"""

from __future__ import annotations

import gc
import socket
import sys
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


def test_a_subclass_with_its_own_del_still_warns_through_the_base(vrt: asyncop.Runtime) -> None:
    collected: list[str] = []

    class Tracked(WaitEvent):
        """Records its collection, then lets the base warn as usual."""

        def _arm(self, sub: Subscription) -> None:
            sub.fire("armed")

        def __del__(self) -> None:
            collected.append("tracked")
            super().__del__()

    async def main() -> Any:
        Tracked()  # forgotten
        return await Tracked()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert vrt.run(main) == "armed"
        gc.collect()
    assert collected == ["tracked", "tracked"]
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
            vrt.run(lambda: asyncop.sleep(10))  # refused: a TypeError says it all
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


# -- a refused call lets go of what it was handed ---------------------------------


async def _coroutine() -> None:
    pass


async def _needs_task() -> None:
    await asyncop.sleep(1)


def _task_op() -> asyncop.AsyncOperation:
    me = asyncop.current_operation()
    assert me is not None
    return me


# Each call is refused for one argument (first, last or between valid ones,
# or the call itself), and was handed asyncop awaitables or coroutines
# besides: none of them may warn "never awaited".
REFUSED_IN_A_TASK: dict[str, Callable[[], Any]] = {
    "select-a-coroutine-between": lambda: asyncop.select(
        asyncop.sleep(1), _coroutine(), asyncop.Event().wait_async()
    ),
    "select-an-int-first": lambda: asyncop.select(
        3, asyncop.sleep(1), asyncop.Channel(1).recv_async()
    ),
    "race-an-event-after-an-op": lambda: asyncop.race(
        _task_op().spawn(_needs_task), asyncop.sleep(1)
    ),
    "race-a-coroutine": lambda: asyncop.race(_coroutine()),  # type: ignore[arg-type]
    "timeout-an-event": lambda: asyncop.timeout(1, asyncop.sleep(2)),  # type: ignore[arg-type]
    "timeout-arguments-swapped": lambda: asyncop.timeout(
        asyncop.sleep(2),
        _task_op().spawn(_needs_task),  # type: ignore[arg-type]
    ),
    "timeout-a-coroutine": lambda: asyncop.timeout(1, _coroutine()),  # type: ignore[arg-type]
    "spawn-an-event": lambda: _task_op().spawn(asyncop.sleep(1)),  # type: ignore[arg-type]
    "spawn-an-event-with-a-keyword": lambda: _task_op().spawn(
        asyncop.sleep(1),
        x=1,  # type: ignore[call-overload]
    ),
    "spawn_blocking-an-event-with-a-keyword": lambda: asyncop.spawn_blocking(
        asyncop.sleep(1),
        x=1,  # type: ignore[arg-type]
    ),
    "start-an-event": lambda: _task_op().start(asyncop.sleep(1)),
    "start-a-coroutine": lambda: _task_op().start(_coroutine()),
    "spawn_blocking-an-event": lambda: asyncop.spawn_blocking(asyncop.sleep(1)),  # type: ignore[arg-type]
    "spawn_blocking-a-coroutine": lambda: asyncop.spawn_blocking(_coroutine()),  # type: ignore[arg-type]
    "run-inside-a-task": lambda: _task_op().runtime.run(_needs_task),
    "run-an-event-inside-a-task": lambda: _task_op().runtime.run(asyncop.sleep(1)),  # type: ignore[arg-type]
    "resume_when-a-coroutine": lambda: lowlevel.resume_when(_task_op(), _coroutine()),
    "waker_new-a-bad-timeout": lambda: lowlevel.waker_new(
        _task_op(),
        "1",
        asyncop.sleep(1),  # type: ignore[arg-type]
    ),
    "waker_new-a-coroutine": lambda: lowlevel.waker_new(_task_op(), None, _coroutine()),
}

REFUSED_IN_A_THREAD: dict[str, Callable[[asyncop.Runtime], Any]] = {
    "run-an-event": lambda rt: rt.run(asyncop.sleep(1)),  # type: ignore[arg-type]
    "spawn-an-event": lambda rt: rt.spawn(asyncop.sleep(1)),  # type: ignore[arg-type]
    "create-an-event": lambda rt: rt.create(asyncop.sleep(1)),  # type: ignore[arg-type]
    "start-an-event": lambda rt: _noop_op(rt).start(asyncop.sleep(1)),
}


@pytest.mark.parametrize("kind", sorted(REFUSED_IN_A_TASK))
def test_a_refused_call_in_a_task_lets_go_of_every_awaitable_it_was_handed(
    vrt: asyncop.Runtime, kind: str
) -> None:
    async def main() -> BaseException:
        try:
            REFUSED_IN_A_TASK[kind]()
        except (TypeError, ValueError, RuntimeError) as exc:
            return exc
        raise AssertionError(f"{kind} was not refused at the call")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        error = vrt.run(main)
        del error
        gc.collect()
    assert _never_awaited(caught) == []


@pytest.mark.parametrize("kind", sorted(REFUSED_IN_A_THREAD))
def test_a_refused_call_in_a_thread_lets_go_of_the_awaitable_it_was_handed(
    vrt: asyncop.Runtime, kind: str
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError):
            REFUSED_IN_A_THREAD[kind](vrt)
        gc.collect()
    assert _never_awaited(caught) == []


def test_a_refused_anyio_wait_lets_go_of_the_awaitable_it_was_handed() -> None:
    pytest.importorskip("anyio")
    import asyncio

    import asyncop.anyio

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError):
            asyncio.run(asyncop.anyio.wait(asyncop.sleep(1)))  # type: ignore[arg-type]
        gc.collect()
    assert _never_awaited(caught) == []


def test_an_awaitable_collected_as_its_task_ends_names_the_task_not_a_thread(
    vrt: asyncop.Runtime,
) -> None:
    async def keeps_one_unawaited() -> None:
        pending = asyncop.sleep(1)  # collected when the coroutine ends, past the user's frames
        assert pending is not None

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        op = vrt.spawn(keeps_one_unawaited)
        line = sys._getframe().f_lineno - 1
        op.wait(10)
        gc.collect()
    messages = _never_awaited(caught)
    assert len(messages) == 1, messages
    assert "threading.py" not in messages[0]
    assert "in operation 'test_an_awaitable_collected_as_its_task_ends" in messages[0]
    assert f"{__file__}:{line}" in messages[0]
