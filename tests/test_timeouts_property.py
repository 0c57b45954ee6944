"""Random timeouts at every public call that takes one.

The rule: ``None`` (where a call allows it), ``inf``, or a length beyond
what an OS can wait for means "no limit"; zero or less means "poll"; NaN or
a non-number raises ValueError or TypeError before anything changes state.
Whatever the value, the runtime still runs new work afterwards.

Each call is tried in two situations: the thing waited for is already there
(any accepted value succeeds at once), and it is not (a poll gives up at
once, a wait without limit waits until another thread provides it, a
refused value leaves no waiter, item or permit behind). Positive finite
lengths are only tried where the answer is immediate or the clock virtual,
so the test never waits for them.
"""

from __future__ import annotations

import functools
import math
import numbers
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import asyncop
from asyncop import OperationState
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(300)

# The values users pass, good and bad, with the awkward ones made likely.
SPECIAL = [
    math.inf,
    -math.inf,
    math.nan,
    -1,
    -0.0,
    0,
    1e300,
    1e9,
    10**30,
    10**400,
    -(10**400),
    None,
    True,
    False,
    "1",
    "inf",
    b"1",
    [1],
    object(),
    complex(1, 0),
]
VALUES = st.one_of(
    st.sampled_from(SPECIAL),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**500), max_value=10**500),
    st.text(max_size=3),
)
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    # No shrinking: a failing value is printed as found, and a call that
    # hangs is not retried many times over.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
BOUND = 10.0  # seconds any run here may take; virtual-clock runs take milliseconds
# Calls whose timeouts are still being made to follow the rule.
LATER = 0.02  # how long after a no-limit wait starts another thread provides


def number(value: Any) -> float:
    """A real number as a float, an int too large for one as an infinity."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def kind(value: Any, *, none: str) -> str:
    """What the rule says ``value`` means: refused, poll, finite or forever."""
    if value is None:
        return none
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return "type"
    number_ = number(value)
    if math.isnan(number_):
        return "value"
    if number_ <= 0:
        return "poll"
    if number_ >= 1e9:
        return "forever"
    return "finite"


def refused(call: Callable[[], Any], what: str) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert not isinstance(info.value, OverflowError), f"{what}: {info.value!r}"


def later(fn: Callable[[], Any]) -> threading.Thread:
    def main() -> None:
        time.sleep(LATER)
        fn()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    return thread


@pytest.fixture(scope="module")
def rt() -> Iterator[asyncop.Runtime]:
    runtime = asyncop.Runtime(2, name="timeouts_rt")
    try:
        yield runtime
    finally:
        stop(runtime)


def run(runtime: asyncop.Runtime, fn: Callable[..., Any], *args: Any) -> Any:
    """``run(runtime, fn, *args)``, failing after BOUND seconds instead of hanging."""
    op = runtime.spawn(fn, *args)
    try:
        op.wait(BOUND)
    except TimeoutError:
        op.cancel()
        raise AssertionError(f"{fn.__name__} did not end within {BOUND} s") from None
    return op.result()


def bounded(body: Callable[[], None]) -> None:
    """Run ``body`` in a thread and fail, instead of hanging, if it takes too long."""
    box: list[BaseException] = []

    def main() -> None:
        try:
            body()
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    thread.join(3 * BOUND)
    assert not thread.is_alive(), f"the call did not return within {3 * BOUND} s"
    if box:
        raise box[0]


def still_works(runtime: asyncop.Runtime) -> None:
    async def small() -> int:
        await asyncop.sleep(0)
        return 42

    assert run(runtime, small) == 42


def stop(runtime: asyncop.Runtime) -> None:
    assert runtime.shutdown(timeout=BOUND), f"{runtime!r} did not shut down"


def vruntime() -> asyncop.Runtime:
    return asyncop.Runtime(1, name=f"vto{id(object()):x}", clock=VirtualClock(autojump=True))


def done_op(runtime: asyncop.Runtime) -> asyncop.AsyncOperation:
    op = runtime.spawn(lambda: "value")
    op.wait(10)
    return op


# -- awaitables, on a virtual clock --------------------------------------------------


@SETTINGS
@given(value=VALUES)
def test_sleep(value: Any) -> None:
    def body() -> None:
        meaning = kind(value, none="type")
        runtime = vruntime()
        try:
            if meaning in ("type", "value"):
                refused(lambda: asyncop.sleep(value), "sleep()")
            elif meaning == "forever":

                async def sleeper() -> None:
                    await asyncop.sleep(value)

                async def main() -> tuple[int, OperationState]:
                    me = asyncop.current_operation()
                    assert me is not None
                    op = me.spawn(sleeper)
                    await wait_all_blocked()
                    armed = runtime.registrations()
                    op.cancel()
                    await asyncop.race(op)
                    return armed, op.state

                assert run(runtime, main) == (0, OperationState.CANCELLED)
            else:

                async def timed() -> float:
                    start = asyncop.current_time()
                    await asyncop.sleep(value)
                    return asyncop.current_time() - start

                slept = run(runtime, timed)
                assert slept == pytest.approx(max(0.0, number(value)), rel=1e-6, abs=1e-6)
            still_works(runtime)
        finally:
            stop(runtime)

    bounded(body)


@SETTINGS
@given(value=VALUES)
def test_sleep_until(value: Any) -> None:
    def body() -> None:
        meaning = kind(value, none="type")
        runtime = vruntime()
        try:
            if meaning in ("type", "value"):
                refused(lambda: asyncop.sleep_until(value), "sleep_until()")
            elif meaning == "forever":

                async def main() -> OperationState:
                    me = asyncop.current_operation()
                    assert me is not None
                    op = me.spawn(_sleep_until, value)
                    await wait_all_blocked()
                    assert runtime.registrations() == 0
                    op.cancel()
                    await asyncop.race(op)
                    return op.state

                assert run(runtime, main) is OperationState.CANCELLED
            else:

                async def timed() -> float:
                    await asyncop.sleep_until(value)
                    return asyncop.current_time()

                assert run(runtime, timed) == pytest.approx(max(0.0, number(value)), rel=1e-6)
            still_works(runtime)
        finally:
            stop(runtime)

    bounded(body)


async def _sleep_until(deadline: Any) -> None:
    await asyncop.sleep_until(deadline)


async def _nap(seconds: float) -> str:
    await asyncop.sleep(seconds)
    return "napped"


async def _nap_seed_shape(op: asyncop.AsyncOperation[str], seconds: float) -> str:
    return await _nap(seconds)


@SETTINGS
@given(value=VALUES)
def test_timeout_awaitable(value: Any) -> None:
    def body() -> None:
        meaning = kind(value, none="type")
        runtime = vruntime()
        try:

            async def main() -> str:
                me = asyncop.current_operation()
                assert me is not None
                op = me.spawn(_nap, 5)
                if meaning in ("type", "value"):
                    refused(lambda: asyncop.timeout(value, op), "timeout()")
                    return await op
                try:
                    return await asyncop.timeout(value, op)
                except TimeoutError:
                    await op
                    return "timed out"

            result = run(runtime, main)
            if meaning in ("type", "value", "forever") or number(value) > 5:
                assert result == "napped"
            elif number(value) < 5:
                assert result == "timed out"
            still_works(runtime)
        finally:
            stop(runtime)

    bounded(body)


@SETTINGS
@given(value=VALUES, which=st.sampled_from(["timeout", "deadline"]))
def test_async_scope_timeout_and_deadline(value: Any, which: str) -> None:
    def body() -> None:
        meaning = kind(value, none="forever")
        runtime = vruntime()  # the clock reads 0: a deadline and a timeout agree
        try:

            async def main() -> str:
                try:
                    async with asyncop.scope(**{which: value}):
                        await asyncop.sleep(5)
                except TimeoutError:
                    return "timed out"
                return "ran"

            if meaning in ("type", "value"):
                with pytest.raises((TypeError, ValueError)) as info:
                    run(runtime, main)
                assert not isinstance(info.value, OverflowError)
            else:
                result = run(runtime, main)
                if meaning == "forever" or number(value) > 5:
                    assert result == "ran"
                elif number(value) < 5:
                    assert result == "timed out"
            still_works(runtime)
        finally:
            stop(runtime)

    bounded(body)


@SETTINGS
@given(value=VALUES)
def test_sync_scope_timeout(value: Any) -> None:
    def body() -> None:
        meaning = kind(value, none="forever")
        runtime = vruntime()
        try:
            if meaning in ("type", "value"):

                def enter() -> None:
                    with runtime.scope(timeout=value):
                        pass

                refused(enter, "scope(timeout=...)")
                assert runtime.dump().splitlines()[0].endswith("no live operations")
            else:
                # The clock jumps as soon as the worker idles, even between two
                # statements of this thread: straight to the scope's deadline if
                # the child has not armed its own timer yet. A callback that
                # holds the worker until the child is spawned keeps it still.
                gate = threading.Event()
                runtime.spawn(gate.wait)
                try:
                    with runtime.scope(timeout=value) as s:
                        child = s.spawn(_nap, 5)
                        gate.set()
                    timed_out = False
                except TimeoutError:
                    timed_out = True
                finally:
                    gate.set()
                if meaning == "forever" or number(value) > 5:
                    assert not timed_out and child.result() == "napped"
                elif number(value) < 5:
                    assert timed_out
            still_works(runtime)
        finally:
            stop(runtime)

    bounded(body)


@SETTINGS
@given(value=VALUES)
def test_operation_deadline(value: Any) -> None:
    def body() -> None:
        meaning = kind(value, none="forever")  # None clears the deadline
        runtime = vruntime()
        try:
            parent = runtime.create(_nap_seed_shape, 0, name="parent")
            op = runtime.create(_nap_seed_shape, 5, parent=parent, name="deadlined")
            if meaning in ("type", "value"):

                def set_it() -> None:
                    op.deadline = value

                refused(set_it, "deadline")
                assert op.deadline is None
            else:
                # Set while CREATED: a deadline already passed cancels it at once.
                op.deadline = value
            if op.state is OperationState.CREATED:
                try:
                    runtime.submit(op)
                except RuntimeError:
                    # The clock jumped to a deadline a hair ahead before the submit.
                    assert op.state is OperationState.CANCELLED and op.expired
            op.wait(30)
            if meaning in ("type", "value", "forever") or number(value) > 5:
                assert op.state is OperationState.COMPLETED
            elif number(value) < 5:
                assert op.state is OperationState.CANCELLED and op.expired
            runtime.submit(parent)
            parent.wait(30)
            still_works(runtime)
        finally:
            stop(runtime)

    bounded(body)


# -- blocking waits from threads, on the real clock -----------------------------------


def _no_wait_value(value: Any) -> bool:
    """Values that are tried with the thing waited for missing: they answer at once."""
    return kind(value, none="forever") in ("poll", "forever", "type", "value")


@SETTINGS
@given(value=VALUES, ready=st.booleans())
def test_operation_wait_and_async_await(rt: asyncop.Runtime, value: Any, ready: bool) -> None:
    def body() -> None:
        meaning = kind(value, none="forever")
        for wait in (lambda op: op.wait(value), lambda op: asyncop.async_await(op, value)):
            if ready:
                op = done_op(rt)
                if meaning in ("type", "value"):
                    refused(functools.partial(wait, op), "wait()")
                else:
                    assert wait(op).value == "value"
            elif _no_wait_value(value):
                gate = threading.Event()
                op = rt.spawn(gate.wait, 10)
                try:
                    if meaning in ("type", "value"):
                        refused(functools.partial(wait, op), "wait()")
                    elif meaning == "poll":
                        with pytest.raises(TimeoutError):
                            wait(op)
                    else:
                        later(gate.set)
                        assert wait(op).value is True
                finally:
                    gate.set()
                    op.wait(10)
        still_works(rt)

    bounded(body)


@SETTINGS
@given(value=VALUES, ready=st.booleans())
def test_token_and_event_wait(rt: asyncop.Runtime, value: Any, ready: bool) -> None:
    def body() -> None:
        meaning = kind(value, none="forever")
        if not ready and not _no_wait_value(value):
            return
        op = rt.create(lambda o, c: None, name="token_owner")
        event = asyncop.Event()
        waits: list[tuple[Callable[[], bool], Callable[[], Any]]] = [
            (lambda: op.token.wait(value), op.cancel),
            (lambda: event.wait(value), event.set),
        ]
        for wait, provide in waits:
            if ready:
                provide()
            if meaning in ("type", "value"):
                refused(wait, "wait()")
            elif ready:
                assert wait() is True
            elif meaning == "poll":
                assert wait() is False
            else:
                later(provide)
                assert wait() is True
        still_works(rt)

    bounded(body)


@SETTINGS
@given(value=VALUES, ready=st.booleans())
def test_channel_send_and_recv(rt: asyncop.Runtime, value: Any, ready: bool) -> None:
    def body() -> None:
        meaning = kind(value, none="forever")
        if not ready and not _no_wait_value(value):
            return
        # send: ready means room in the buffer.
        channel: asyncop.Channel[str] = asyncop.Channel(1)
        if not ready:
            channel.try_send("first")
        if meaning in ("type", "value"):
            refused(lambda: channel.send("second", timeout=value), "send()")
        elif ready:
            channel.send("second", timeout=value)
        elif meaning == "poll":
            with pytest.raises(TimeoutError):
                channel.send("second", timeout=value)
        else:
            taker = later(channel.try_recv)
            channel.send("second", timeout=value)
            taker.join(10)
        accepted = meaning not in ("type", "value")
        if ready:
            expected = ["second"] if accepted else []
        else:  # a wait without limit got room when the other thread took "first"
            expected = ["second"] if accepted and meaning != "poll" else ["first"]
        got = []
        while True:
            try:
                got.append(channel.try_recv())
            except asyncop.WouldBlock:
                break
        assert got == expected  # a refused or timed-out send sent nothing, now or later

        # recv: ready means an item is there.
        channel = asyncop.Channel(1)
        if ready:
            channel.try_send("item")
        if meaning in ("type", "value"):
            refused(lambda: channel.recv(timeout=value), "recv()")
        elif ready:
            assert channel.recv(timeout=value) == "item"
        elif meaning == "poll":
            with pytest.raises(TimeoutError):
                channel.recv(timeout=value)
        else:
            later(lambda: channel.try_send("late"))
            assert channel.recv(timeout=value) == "late"
        # No receiver was left behind to eat the next item.
        while True:
            try:
                channel.try_recv()
            except asyncop.WouldBlock:
                break
        channel.try_send("next")
        assert channel.try_recv() == "next"
        still_works(rt)

    bounded(body)


@SETTINGS
@given(value=VALUES, ready=st.booleans(), which=st.sampled_from(["Lock", "Semaphore"]))
def test_lock_and_semaphore_acquire(
    rt: asyncop.Runtime, value: Any, ready: bool, which: str
) -> None:
    def body() -> None:
        meaning = kind(value, none="forever")
        if not ready and not _no_wait_value(value):
            return
        prim: Any = asyncop.Lock() if which == "Lock" else asyncop.Semaphore(1)
        holder_done = threading.Event()
        if not ready:
            took = threading.Event()

            def hold() -> None:
                prim.acquire()
                took.set()
                holder_done.wait(10)
                prim.release()

            threading.Thread(target=hold, daemon=True).start()
            assert took.wait(10)
        got: bool | None = None
        if meaning in ("type", "value"):
            refused(lambda: prim.acquire(timeout=value), "acquire()")
        elif ready:
            got = prim.acquire(timeout=value)
            assert got is True
        elif meaning == "poll":
            assert prim.acquire(timeout=value) is False
        else:
            later(holder_done.set)
            got = prim.acquire(timeout=value)
            assert got is True
        if got:
            prim.release()
        holder_done.set()
        # Nothing was left held, and no ghost waiter takes the next release.
        assert prim.acquire(timeout=10) is True
        prim.release()
        still_works(rt)

    bounded(body)


@SETTINGS
@given(value=VALUES)
def test_shutdown_timeout(value: Any) -> None:
    def body() -> None:
        meaning = kind(value, none="forever")
        runtime = asyncop.Runtime(1, name=f"sdt{id(object()):x}")
        try:
            if meaning in ("type", "value"):
                refused(lambda: runtime.shutdown(timeout=value), "shutdown()")
                still_works(runtime)  # a refused shutdown stopped nothing
            else:
                assert runtime.shutdown(timeout=value) in (True, False)
        finally:
            stop(runtime)

    bounded(body)
