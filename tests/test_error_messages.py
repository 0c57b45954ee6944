"""Every error asyncop raises is one sentence that names its subject and says what to do.

The table ``CASES`` triggers each error, through the public API where it can
be reached (``public=False`` marks the few guards that only a race or an
internal caller can reach). Each case is checked three ways:

- the exception type, and that the message names the object involved (an
  operation's, runtime's or lock's name, the function called, or the
  offending value or type);
- the message is one sentence;
- a misuse error says what to do instead: a clause after ``;``, ``:`` or
  ``,`` that starts with an instruction ("pass a float", "make a new
  Runtime"), or the word "instead". Errors that report an outcome rather
  than a misuse (``kind="outcome"``: timeouts, a peer reset, a channel
  closed under a waiter) are exempt from this last rule.

``test_every_raise_site_is_covered`` reads asyncop's source: every exception
built with a message literal must be matched by a message this table
produced, so a new raise site needs a new case.
"""

from __future__ import annotations

import ast
import asyncio
import math
import os
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop import (
    BrokenResourceError,
    BusyResourceError,
    CancellationError,
    Channel,
    ClosedResourceError,
    EndOfChannel,
    Event,
    InvalidStateError,
    Lock,
    Semaphore,
    WouldBlock,
    current_operation,
    lowlevel,
)
from asyncop.lowlevel import Subscription, WaitEvent
from asyncop.net import accept_async, connect_async, recv_async, send_all_async
from asyncop.testing import VirtualClock, assert_checkpoints, wait_all_blocked

pytestmark = pytest.mark.timeout(30)

PACKAGE = Path(asyncop.__file__).resolve().parent

# Instructions a suggestion may start with.
VERBS = frozenset(
    {
        *("add", "await", "call", "cancel", "catch", "check", "choose", "close", "create", "do"),
        *("give", "join", "let", "make", "open", "pass", "read", "receive", "reconnect"),
        *("release", "retry", "run", "send", "set", "spawn", "start", "stop", "submit"),
        *("define", "use", "wait", "write"),
    }
)


# ----------------------------------------------------------------------
# The rules
# ----------------------------------------------------------------------


def message_of(exc: BaseException) -> str:
    """The message as written at the raise site (without ``[Errno N]``)."""
    if isinstance(exc, OSError) and exc.strerror:
        return str(exc.strerror)
    return str(exc)


def is_one_sentence(message: str) -> bool:
    return (
        bool(message.strip())
        and "\n" not in message
        and re.search(r"[.!?]\s+[A-Z]", message) is None
    )


def suggests_what_to_do(message: str) -> bool:
    if re.search(r"\binstead\b", message):
        return True
    if ";" not in message:
        return False
    advice = message.split(";", 1)[1]
    for clause in re.split(r"[;:,]|\bor\b|\band\b|\bthen\b", advice):
        words = [word.strip("'\"(").lower() for word in clause.split()]
        if words and words[0] in VERBS:
            return True
        # A rule that says who may do it: "only the holder may release it".
        if words[:1] == ["only"] and "may" in words[:-1] and words[words.index("may") + 1] in VERBS:
            return True
    return False


# ----------------------------------------------------------------------
# Helpers for the triggers
# ----------------------------------------------------------------------


@dataclass
class Ctx:
    rt: asyncop.Runtime  # real clock
    vrt: asyncop.Runtime  # autojumping virtual clock


def caught(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> BaseException:
    try:
        fn(*args, **kwargs)
    except BaseException as exc:
        return exc
    raise AssertionError(f"{fn!r} raised nothing")


def failure_of(rt: asyncop.Runtime, fn: Callable[..., Any], *args: Any) -> BaseException:
    """Run ``fn(*args)`` as a root operation; return the error it ended with."""
    op = rt.spawn(fn, *args)
    return caught(lambda: (op.wait(10), op.result()))


def noop_callback(op: asyncop.AsyncOperation, context: object) -> None:
    return None


async def async_callback(op: asyncop.AsyncOperation, context: object) -> None:
    return None


def noop() -> None:
    return None


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.001)


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, BaseException]]:
    """Start ``fn`` in a thread; the dict gets the exception it raised, under "error"."""
    box: dict[str, BaseException] = {}

    def main() -> None:
        try:
            fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    return thread, box


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def closed_socket() -> socket.socket:
    sock = socket.socket()
    sock.close()
    return sock


def fresh_runtime(name: str) -> asyncop.Runtime:
    return asyncop.Runtime(1, name=name)


# ----------------------------------------------------------------------
# Triggers, grouped as the package is
# ----------------------------------------------------------------------

# -- operations --------------------------------------------------------------


def t_result_unfinished(c: Ctx) -> BaseException:
    return caught(c.rt.create(noop_callback, name="unfinished").result)


def t_result_cancelled(c: Ctx) -> BaseException:
    op = c.rt.create(noop_callback, name="dropped")
    op.cancel()
    return caught(op.result)


def t_deadline_nan(c: Ctx) -> BaseException:
    op = c.rt.create(noop_callback, name="deadlined")
    return caught(setattr, op, "deadline", math.nan)


def t_wait_timeout(c: Ctx) -> BaseException:
    gate = threading.Event()
    op = c.rt.spawn(gate.wait, 10, name="slow_op")
    try:
        return caught(op.wait, 0.01)
    finally:
        gate.set()
        op.wait(5)


def t_wait_in_coroutine(c: Ctx) -> BaseException:
    other = c.rt.create(noop_callback, name="other_op")

    async def waits_in_a_coroutine() -> None:
        other.wait(1)

    return failure_of(c.rt, waits_in_a_coroutine)


def t_wait_on_itself(c: Ctx) -> BaseException:
    def self_waiter() -> None:
        me = current_operation()
        assert me is not None
        me.wait(1)

    return failure_of(c.rt, self_waiter)


def t_run_in_coroutine(c: Ctx) -> BaseException:
    async def nested() -> None:
        return None

    async def runs_in_a_coroutine() -> None:
        c.rt.run(nested)

    return failure_of(c.rt, runs_in_a_coroutine)


def t_spawn_into_final_operation(c: Ctx) -> BaseException:
    op = c.rt.spawn(noop, name="finished_op")
    op.wait(5)
    return caught(op.spawn, noop)


def t_spawn_into_exited_scope(c: Ctx) -> BaseException:
    with c.rt.scope(name="exited_scope") as scope:
        pass
    return caught(scope.spawn, noop)


def t_on_cancel_not_callable(c: Ctx) -> BaseException:
    op = c.rt.create(noop_callback, name="tokened")
    return caught(op.token.on_cancel, 42)


# -- runtime -----------------------------------------------------------------


def t_workers_type(c: Ctx) -> BaseException:
    return caught(asyncop.Runtime, "2")


def t_workers_zero(c: Ctx) -> BaseException:
    return caught(asyncop.Runtime, 0)


def t_clock_type(c: Ctx) -> BaseException:
    return caught(asyncop.Runtime, 1, clock=object())


def t_spawn_not_callable(c: Ctx) -> BaseException:
    return caught(c.rt.spawn, 42)


def t_function_returning_a_coroutine(c: Ctx) -> BaseException:
    async def body() -> None:
        pass

    op = c.rt.spawn(lambda: body(), name="wrapped_body")
    op.wait(5)
    error = op.error
    assert error is not None
    return error


def t_create_not_callable(c: Ctx) -> BaseException:
    return caught(c.rt.create, "not a callback", name="loader")


def t_name_type(c: Ctx) -> BaseException:
    return caught(c.rt.spawn, noop, name=7)


def t_parent_type(c: Ctx) -> BaseException:
    return caught(c.rt.create, noop_callback, parent="root")


def t_parent_of_other_runtime(c: Ctx) -> BaseException:
    foreign = c.vrt.create(noop_callback, name="foreign_parent")
    return caught(c.rt.create, noop_callback, parent=foreign, name="orphan")


def t_submit_not_operation(c: Ctx) -> BaseException:
    return caught(c.rt.submit, "op")


def t_submit_to_other_runtime(c: Ctx) -> BaseException:
    op = c.vrt.create(noop_callback, name="elsewhere")
    return caught(c.rt.submit, op)


def t_submit_scope(c: Ctx) -> BaseException:
    with c.rt.scope(name="a_block") as scope:
        return caught(c.rt.submit, scope)


def t_submit_twice(c: Ctx) -> BaseException:
    op = c.rt.create(noop_callback, name="submitted_twice")
    c.rt.submit(op)
    try:
        return caught(c.rt.submit, op)
    finally:
        op.wait(5)


def t_submit_cancelled(c: Ctx) -> BaseException:
    op = c.rt.create(noop_callback, name="cancelled_first")
    op.cancel()
    return caught(c.rt.submit, op)


def t_submit_after_shutdown(c: Ctx) -> BaseException:
    closed = fresh_runtime("closed_rt_submit")
    op = closed.create(noop_callback, name="late")
    assert closed.shutdown(timeout=5)
    return caught(closed.submit, op)


def t_spawn_after_shutdown(c: Ctx) -> BaseException:
    closed = fresh_runtime("closed_rt_spawn")
    assert closed.shutdown(timeout=5)
    return caught(closed.spawn, noop)


def t_scope_after_shutdown(c: Ctx) -> BaseException:
    closed = fresh_runtime("closed_rt_scope")
    assert closed.shutdown(timeout=5)

    def enter() -> None:
        with closed.scope():
            pass

    return caught(enter)


def t_start_after_shutdown_race(c: Ctx) -> BaseException:
    # The guard inside _new_operation: spawn() checks first, so only a
    # shutdown racing the spawn reaches it.
    closed = fresh_runtime("closed_rt_race")
    assert closed.shutdown(timeout=5)
    return caught(closed._new_operation, noop, (), parent=None, name="raced", submit=True)


def t_shutdown_from_own_worker(c: Ctx) -> BaseException:
    return failure_of(c.rt, c.rt.shutdown)


def t_blocking_pool_shut_down(c: Ctx) -> BaseException:
    closed = fresh_runtime("closed_rt_blocking")
    assert closed.shutdown(timeout=5)
    return caught(closed._blocking.submit, noop)


def t_reactor_shut_down(c: Ctx) -> BaseException:
    closed = fresh_runtime("closed_rt_reactor")
    reactor = closed._get_reactor()
    assert closed.shutdown(timeout=5)
    a, b = socket.socketpair()
    with a, b:
        return caught(reactor.register, a.fileno(), 1, None)


# -- helpers of the default runtime -------------------------------------------


def t_worker_limit_type(c: Ctx) -> BaseException:
    return caught(asyncop.async_worker_limit, "2")


def t_worker_limit_zero(c: Ctx) -> BaseException:
    return caught(asyncop.async_worker_limit, 0)


def t_worker_limit_late(c: Ctx) -> BaseException:
    asyncop.default_runtime()
    return caught(asyncop.async_worker_limit, 3)


# -- awaitables ----------------------------------------------------------------


def t_sleep_type(c: Ctx) -> BaseException:
    return caught(asyncop.sleep, "1")


def t_sleep_nan(c: Ctx) -> BaseException:
    return caught(asyncop.sleep, math.nan)


def t_sleep_until_type(c: Ctx) -> BaseException:
    return caught(asyncop.sleep_until, None)


def t_timeout_op_type(c: Ctx) -> BaseException:
    return caught(asyncop.timeout, 1, "op")


def t_timeout_seconds_type(c: Ctx) -> BaseException:
    return caught(asyncop.timeout, "1", c.rt.create(noop_callback))


def t_timeout_expired(c: Ctx) -> BaseException:
    async def sleeper() -> None:
        await asyncop.sleep(60)

    async def main() -> BaseException:
        me = current_operation()
        assert me is not None
        slow = me.spawn(sleeper, name="sleeper")
        try:
            await asyncop.timeout(1, slow)
        except TimeoutError as exc:
            return exc
        finally:
            slow.cancel()
        raise AssertionError("timeout() did not time out")

    return c.vrt.run(main)  # type: ignore[no-any-return]


def t_await_cancelled(c: Ctx) -> BaseException:
    victim = c.rt.create(noop_callback, name="victim")
    victim.cancel()

    async def awaits_a_cancelled_operation() -> None:
        await victim

    return failure_of(c.rt, awaits_a_cancelled_operation)


def t_await_itself(c: Ctx) -> BaseException:
    async def self_awaiter() -> None:
        await current_operation()  # type: ignore[misc]

    return failure_of(c.rt, self_awaiter)


def t_race_empty(c: Ctx) -> BaseException:
    return caught(asyncop.race)


def t_race_not_operation(c: Ctx) -> BaseException:
    return caught(asyncop.race, 1)


def t_select_empty(c: Ctx) -> BaseException:
    return caught(asyncop.select)


def t_select_not_awaitable(c: Ctx) -> BaseException:
    return caught(asyncop.select, 5)


def t_spawn_blocking_not_callable(c: Ctx) -> BaseException:
    return caught(asyncop.spawn_blocking, 5)


def t_current_time_outside(c: Ctx) -> BaseException:
    return caught(asyncop.current_time)


def t_foreign_await(c: Ctx) -> BaseException:
    async def foreign_awaiter() -> None:
        await asyncio.sleep(0)

    return failure_of(c.rt, foreign_awaiter)


def t_wait_event_without_arm(c: Ctx) -> BaseException:
    class HalfBuiltEvent(WaitEvent):
        pass

    async def awaits_a_half_built_event() -> None:
        await HalfBuiltEvent()

    return failure_of(c.rt, awaits_a_half_built_event)


# -- scopes ------------------------------------------------------------------


def t_scope_timeout_type(c: Ctx) -> BaseException:
    return caught(c.rt.scope, timeout="5")


def t_scope_deadline_type(c: Ctx) -> BaseException:
    return caught(c.rt.scope, deadline="5")


def t_scope_timeout_nan(c: Ctx) -> BaseException:
    return caught(c.rt.scope, timeout=math.nan)


def t_scope_entered_twice(c: Ctx) -> BaseException:
    scope = c.rt.scope(name="entered_once")
    with scope:
        pass

    def again() -> None:
        with scope:
            pass

    return caught(again)


def t_sync_scope_in_coroutine(c: Ctx) -> BaseException:
    async def sync_scope_in_a_coroutine() -> None:
        with asyncop.scope():
            pass

    return failure_of(c.rt, sync_scope_in_a_coroutine)


def t_async_scope_outside_asyncop(c: Ctx) -> BaseException:
    async def on_asyncio() -> None:
        async with c.rt.scope():
            pass

    return caught(asyncio.run, on_asyncio())


def t_scope_of_other_runtime(c: Ctx) -> BaseException:
    async def enters_a_foreign_scope() -> None:
        async with c.vrt.scope():
            pass

    return failure_of(c.rt, enters_a_foreign_scope)


def t_scope_outside_operation(c: Ctx) -> BaseException:
    return caught(asyncop.scope)


def t_scope_deadline_passed(c: Ctx) -> BaseException:
    async def main() -> None:
        async with asyncop.scope(name="page_load", timeout=1):
            await asyncop.sleep(5)

    return failure_of(c.vrt, main)


# -- primitives ----------------------------------------------------------------


def t_lock_acquire_in_coroutine(c: Ctx) -> BaseException:
    lock = Lock("db_lock")

    async def acquires_in_a_coroutine() -> None:
        lock.acquire(1)

    return failure_of(c.rt, acquires_in_a_coroutine)


def t_lock_broken(c: Ctx) -> BaseException:
    lock = Lock("cache_lock")

    async def ends_holding_the_lock() -> None:
        await lock.lock_async()

    c.rt.spawn(ends_holding_the_lock).wait(5)
    return caught(lock.acquire, 1)


def t_lock_reentry(c: Ctx) -> BaseException:
    lock = Lock("reentered_lock")
    assert lock.acquire(1)
    try:
        return caught(lock.acquire, 1)
    finally:
        lock.release()


def t_wait_timeout_type(c: Ctx) -> BaseException:
    return caught(Event().wait, "5")


def t_wait_timeout_nan(c: Ctx) -> BaseException:
    return caught(Channel(1).send, "item", math.nan)


def t_deadline_type(c: Ctx) -> BaseException:
    op = c.rt.create(noop_callback, name="deadline_typed")
    return caught(setattr, op, "deadline", "soon")


def t_helper_not_operation(c: Ctx) -> BaseException:
    return caught(asyncop.async_await, None)


def t_lock_release_unheld(c: Ctx) -> BaseException:
    return caught(Lock("free_lock").release)


def t_lock_release_by_other(c: Ctx) -> BaseException:
    lock = Lock("held_lock")
    assert lock.acquire(1)
    try:
        thread, box = in_thread(lock.release)
        thread.join(5)
        return box["error"]
    finally:
        lock.release()


def t_event_wait_in_coroutine(c: Ctx) -> BaseException:
    event = Event()

    async def waits_for_an_event_in_a_coroutine() -> None:
        event.wait(1)

    return failure_of(c.rt, waits_for_an_event_in_a_coroutine)


def t_semaphore_type(c: Ctx) -> BaseException:
    return caught(Semaphore, "2")


def t_semaphore_negative(c: Ctx) -> BaseException:
    return caught(Semaphore, -1)


def t_semaphore_acquire_in_coroutine(c: Ctx) -> BaseException:
    sem = Semaphore(1)

    async def acquires_a_permit_in_a_coroutine() -> None:
        sem.acquire(1)

    return failure_of(c.rt, acquires_a_permit_in_a_coroutine)


# -- channels ----------------------------------------------------------------


def t_channel_capacity_type(c: Ctx) -> BaseException:
    return caught(Channel, "1")


def t_channel_capacity_negative(c: Ctx) -> BaseException:
    return caught(Channel, -1)


def t_channel_send_closed(c: Ctx) -> BaseException:
    channel: Channel[int] = Channel(1)
    channel.close()
    return caught(channel.send, 1)


def t_channel_recv_drained(c: Ctx) -> BaseException:
    channel: Channel[int] = Channel(1)
    channel.close()
    return caught(channel.recv, 1)


def t_channel_send_in_coroutine(c: Ctx) -> BaseException:
    channel: Channel[int] = Channel(1)

    async def sends_blocking() -> None:
        channel.send(1)

    return failure_of(c.rt, sends_blocking)


def t_channel_recv_in_coroutine(c: Ctx) -> BaseException:
    channel: Channel[int] = Channel(1)

    async def receives_blocking() -> None:
        channel.recv()

    return failure_of(c.rt, receives_blocking)


def t_channel_send_timeout(c: Ctx) -> BaseException:
    return caught(Channel(0).send, 1, timeout=0.01)


def t_channel_recv_timeout(c: Ctx) -> BaseException:
    return caught(Channel(0).recv, timeout=0.01)


def t_channel_try_send_full(c: Ctx) -> BaseException:
    return caught(Channel(0).try_send, 1)


def t_channel_try_recv_empty(c: Ctx) -> BaseException:
    return caught(Channel(0).try_recv)


def t_channel_closed_under_sender(c: Ctx) -> BaseException:
    channel: Channel[int] = Channel(0)
    thread, box = in_thread(lambda: channel.send(1, timeout=5))
    wait_until(lambda: len(channel._senders) == 1)
    channel.close()
    thread.join(5)
    return box["error"]


def t_channel_closed_under_receiver(c: Ctx) -> BaseException:
    channel: Channel[int] = Channel(0)
    thread, box = in_thread(lambda: channel.recv(timeout=5))
    wait_until(lambda: len(channel._receivers) == 1)
    channel.close()
    thread.join(5)
    return box["error"]


# -- lowlevel and testing ------------------------------------------------------


def t_waker_new_sync_operation(c: Ctx) -> BaseException:
    return caught(lowlevel.waker_new, c.rt.create(noop_callback, name="plain_op"))


def t_resume_when_not_event(c: Ctx) -> BaseException:
    task = c.rt.create(async_callback, name="coro_op")
    return caught(lowlevel.resume_when, task, 5)


class _NeverWithTimeout(WaitEvent):
    """Waits for an event nobody sets, for at most ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def _arm(self, sub: Subscription) -> None:
        task = sub.waker.task
        lowlevel.waker_new(task, timeout=self.seconds)
        lowlevel.resume_when(task, Event().wait_async(), lowlevel.resolve)


def t_lowlevel_timeout(c: Ctx) -> BaseException:
    async def timed_waiter() -> None:
        await _NeverWithTimeout(1)

    return failure_of(c.vrt, timed_waiter)


def t_clock_backwards(c: Ctx) -> BaseException:
    return caught(VirtualClock().advance, -1)


def t_assert_checkpoints_outside(c: Ctx) -> BaseException:
    def enter() -> None:
        with assert_checkpoints():
            pass

    return caught(enter)


def t_assert_checkpoints_without_await(c: Ctx) -> BaseException:
    async def passes_no_checkpoint() -> None:
        with assert_checkpoints():
            pass

    return failure_of(c.rt, passes_no_checkpoint)


# -- readiness and sockets -------------------------------------------------------


def t_fd_type(c: Ctx) -> BaseException:
    return caught(asyncop.notify_closing, "fd")


def t_fd_closed(c: Ctx) -> BaseException:
    return caught(asyncop.notify_closing, closed_socket())


def t_second_waiter_busy(c: Ctx) -> BaseException:
    a, b = socket.socketpair()

    async def first_waiter() -> None:
        await asyncop.readable(a)

    async def second_waiter() -> BaseException:
        me = current_operation()
        assert me is not None
        first = me.spawn(first_waiter)
        await wait_all_blocked()
        try:
            await asyncop.readable(a)
        except BusyResourceError as exc:
            return exc
        finally:
            first.cancel()
        raise AssertionError("the second wait was accepted")

    with a, b:
        return c.rt.spawn(second_waiter).wait(10).value  # type: ignore[no-any-return]


def t_closed_while_waiting(c: Ctx) -> BaseException:
    a, b = socket.socketpair()

    async def waiter() -> BaseException:
        try:
            await asyncop.readable(a)
        except ClosedResourceError as exc:
            return exc
        raise AssertionError("woken without an error")

    async def closer() -> BaseException:
        me = current_operation()
        assert me is not None
        op = me.spawn(waiter)
        await wait_all_blocked()
        asyncop.notify_closing(a)
        return await op  # type: ignore[no-any-return]

    with a, b:
        return c.rt.spawn(closer).wait(10).value  # type: ignore[no-any-return]


def t_unknown_multiplexer(c: Ctx) -> BaseException:
    saved = os.environ.get("ASYNCOP_SELECTOR")
    os.environ["ASYNCOP_SELECTOR"] = "carrier_pigeon"
    rt = fresh_runtime("selector_rt")
    a, b = socket.socketpair()
    try:

        async def waits() -> None:
            await asyncop.readable(a)

        return failure_of(rt, waits)
    finally:
        if saved is None:
            del os.environ["ASYNCOP_SELECTOR"]
        else:
            os.environ["ASYNCOP_SELECTOR"] = saved
        rt.shutdown(timeout=5)
        a.close()
        b.close()


def t_recv_closed(c: Ctx) -> BaseException:
    return failure_of(c.rt, recv_async, closed_socket(), 1)


def t_accept_closed(c: Ctx) -> BaseException:
    return failure_of(c.rt, accept_async, closed_socket())


def t_send_closed(c: Ctx) -> BaseException:
    return failure_of(c.rt, send_all_async, closed_socket(), b"x")


def t_connect_refused(c: Ctx) -> BaseException:
    return failure_of(c.rt, connect_async, "127.0.0.1", REFUSED_PORT)


def t_connect_unreachable(c: Ctx) -> BaseException:
    op = c.rt.spawn(connect_async, "255.255.255.255", 9)
    try:
        result = op.wait(10)
    except TimeoutError:
        op.cancel()
        pytest.skip("connecting to the broadcast address hangs on this machine")
    if result.error is None:
        result.value.close()
        pytest.skip("this machine connects to the broadcast address")
    return result.error


def reset_pair() -> tuple[socket.socket, socket.socket]:
    """A connected TCP client whose server side was closed with a reset (RST)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.create_connection(listener.getsockname(), timeout=5)
        server, _ = listener.accept()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return client, server


def t_recv_reset(c: Ctx) -> BaseException:
    client, server = reset_pair()
    server.close()
    with client:
        return failure_of(c.rt, recv_async, client, 10)


def t_send_reset(c: Ctx) -> BaseException:
    client, server = reset_pair()
    server.close()

    async def sends_after_the_reset() -> None:
        await asyncop.readable(client)  # the reset has arrived
        await send_all_async(client, b"x" * 100_000)

    with client:
        return failure_of(c.rt, sends_after_the_reset)


# -- the bridge ----------------------------------------------------------------


def t_anyio_wait_type(c: Ctx) -> BaseException:
    import asyncop.anyio

    return caught(asyncio.run, asyncop.anyio.wait(5))  # type: ignore[arg-type]


def t_anyio_unknown_loop(c: Ctx) -> BaseException:
    # anyio itself refuses an unknown library before asyncop can look.
    import sniffio

    import asyncop.anyio

    token = sniffio.current_async_library_cvar.set("curio")
    try:
        return caught(asyncop.anyio._threadsafe, noop)
    finally:
        sniffio.current_async_library_cvar.reset(token)


# -- platform ------------------------------------------------------------------


def t_thread_joins_itself(c: Ctx) -> BaseException:
    from asyncop.platform import start_thread

    box: dict[str, Any] = {}
    ready = threading.Event()
    done = threading.Event()

    def entry(_: object) -> None:
        ready.wait(5)
        try:
            box["handle"].join(1)
        except BaseException as exc:
            box["error"] = exc
        done.set()

    box["handle"] = start_thread(entry, None, name="self_joiner")
    ready.set()
    done.wait(5)
    return box["error"]  # type: ignore[no-any-return]


def t_thread_entry_not_callable(c: Ctx) -> BaseException:
    from asyncop.platform import start_thread

    return caught(start_thread, 5, None, name="no_entry")


# ----------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    trigger: Callable[[Ctx], BaseException]
    error: type[BaseException]
    names: str  # must appear in the message
    kind: str = "misuse"  # or "outcome"
    public: bool = True  # reachable through the public API


CASES = [
    # operations
    Case("result-unfinished", t_result_unfinished, InvalidStateError, "'unfinished'"),
    Case("result-cancelled", t_result_cancelled, CancellationError, "'dropped'"),
    Case("deadline-nan", t_deadline_nan, ValueError, "'deadlined'"),
    Case("deadline-type", t_deadline_type, TypeError, "'deadline_typed'"),
    Case("wait-timeout", t_wait_timeout, TimeoutError, "'slow_op'", "outcome"),
    Case("wait-in-coroutine", t_wait_in_coroutine, RuntimeError, "'other_op'"),
    Case("wait-on-itself", t_wait_on_itself, RuntimeError, "self_waiter"),
    Case("run-in-coroutine", t_run_in_coroutine, RuntimeError, "'errors_rt'"),
    Case("spawn-into-final", t_spawn_into_final_operation, RuntimeError, "'finished_op'"),
    Case("spawn-into-exited-scope", t_spawn_into_exited_scope, RuntimeError, "'exited_scope'"),
    Case("on-cancel-not-callable", t_on_cancel_not_callable, TypeError, "int"),
    # runtime
    Case("workers-type", t_workers_type, TypeError, "str"),
    Case("workers-zero", t_workers_zero, ValueError, "workers=0"),
    Case("clock-type", t_clock_type, TypeError, "object"),
    Case("spawn-not-callable", t_spawn_not_callable, TypeError, "42"),
    Case(
        "function-returns-coroutine", t_function_returning_a_coroutine, TypeError, "'wrapped_body'"
    ),
    Case("create-not-callable", t_create_not_callable, TypeError, "'loader'"),
    Case("name-type", t_name_type, TypeError, "int"),
    Case("parent-type", t_parent_type, TypeError, "str"),
    Case("parent-other-runtime", t_parent_of_other_runtime, RuntimeError, "'foreign_parent'"),
    Case("submit-not-operation", t_submit_not_operation, TypeError, "str"),
    Case("submit-other-runtime", t_submit_to_other_runtime, RuntimeError, "'elsewhere'"),
    Case("submit-scope", t_submit_scope, RuntimeError, "'a_block'"),
    Case("submit-twice", t_submit_twice, RuntimeError, "'submitted_twice'"),
    Case("submit-cancelled", t_submit_cancelled, RuntimeError, "'cancelled_first'"),
    Case("submit-after-shutdown", t_submit_after_shutdown, RuntimeError, "'closed_rt_submit'"),
    Case("spawn-after-shutdown", t_spawn_after_shutdown, RuntimeError, "'closed_rt_spawn'"),
    Case("scope-after-shutdown", t_scope_after_shutdown, RuntimeError, "'closed_rt_scope'"),
    Case(
        "start-after-shutdown-race",
        t_start_after_shutdown_race,
        RuntimeError,
        "'closed_rt_race'",
        public=False,
    ),
    Case("shutdown-from-own-worker", t_shutdown_from_own_worker, RuntimeError, "'errors_rt'"),
    Case(
        "blocking-pool-shut-down",
        t_blocking_pool_shut_down,
        RuntimeError,
        "'closed_rt_blocking'",
        public=False,
    ),
    Case(
        "reactor-shut-down",
        t_reactor_shut_down,
        RuntimeError,
        "'closed_rt_reactor'",
        public=False,
    ),
    # helpers
    Case("worker-limit-type", t_worker_limit_type, TypeError, "async_worker_limit()"),
    Case("worker-limit-zero", t_worker_limit_zero, ValueError, "async_worker_limit(0)"),
    Case("worker-limit-late", t_worker_limit_late, RuntimeError, "async_worker_limit(3)"),
    Case("helper-not-operation", t_helper_not_operation, TypeError, "async_await(op)"),
    # awaitables
    Case("sleep-type", t_sleep_type, TypeError, "sleep()"),
    Case("sleep-nan", t_sleep_nan, ValueError, "sleep()"),
    Case("sleep-until-type", t_sleep_until_type, TypeError, "sleep_until()"),
    Case("timeout-op-type", t_timeout_op_type, TypeError, "timeout()"),
    Case("timeout-seconds-type", t_timeout_seconds_type, TypeError, "timeout()"),
    Case("timeout-expired", t_timeout_expired, TimeoutError, "'sleeper'", "outcome"),
    Case("await-cancelled", t_await_cancelled, CancellationError, "'victim'"),
    Case("await-itself", t_await_itself, RuntimeError, "self_awaiter'"),
    Case("race-empty", t_race_empty, ValueError, "race()"),
    Case("race-not-operation", t_race_not_operation, TypeError, "int"),
    Case("select-empty", t_select_empty, ValueError, "select()"),
    Case("select-not-awaitable", t_select_not_awaitable, TypeError, "select()"),
    Case("spawn-blocking-not-callable", t_spawn_blocking_not_callable, TypeError, "spawn_blocking"),
    Case("current-time-outside", t_current_time_outside, RuntimeError, "current_time()"),
    Case("foreign-await", t_foreign_await, TypeError, "foreign_awaiter"),
    Case("wait-event-without-arm", t_wait_event_without_arm, NotImplementedError, "_arm"),
    # scopes
    Case("scope-timeout-type", t_scope_timeout_type, TypeError, "timeout="),
    Case("scope-deadline-type", t_scope_deadline_type, TypeError, "deadline="),
    Case("scope-timeout-nan", t_scope_timeout_nan, ValueError, "timeout=nan"),
    Case("scope-entered-twice", t_scope_entered_twice, RuntimeError, "'entered_once'"),
    Case("sync-scope-in-coroutine", t_sync_scope_in_coroutine, RuntimeError, "scope()"),
    Case("async-scope-outside", t_async_scope_outside_asyncop, RuntimeError, "scope()"),
    Case("scope-other-runtime", t_scope_of_other_runtime, RuntimeError, "'errors_vrt'"),
    Case("scope-outside-operation", t_scope_outside_operation, RuntimeError, "asyncop.scope()"),
    Case("scope-deadline-passed", t_scope_deadline_passed, TimeoutError, "'page_load'", "outcome"),
    # primitives
    Case("lock-acquire-in-coroutine", t_lock_acquire_in_coroutine, RuntimeError, "'db_lock'"),
    Case("lock-broken", t_lock_broken, BrokenResourceError, "'cache_lock'"),
    Case("lock-release-unheld", t_lock_release_unheld, RuntimeError, "'free_lock'"),
    Case("lock-reentry", t_lock_reentry, RuntimeError, "'reentered_lock'"),
    Case("wait-timeout-type", t_wait_timeout_type, TypeError, "Event.wait(timeout=...)"),
    Case("wait-timeout-nan", t_wait_timeout_nan, ValueError, "Channel.send(timeout=...)"),
    Case("lock-release-by-other", t_lock_release_by_other, RuntimeError, "'held_lock'"),
    Case("event-wait-in-coroutine", t_event_wait_in_coroutine, RuntimeError, "Event.wait()"),
    Case("semaphore-type", t_semaphore_type, TypeError, "str"),
    Case("semaphore-negative", t_semaphore_negative, ValueError, "Semaphore(-1)"),
    Case(
        "semaphore-acquire-in-coroutine",
        t_semaphore_acquire_in_coroutine,
        RuntimeError,
        "Semaphore.acquire()",
    ),
    # channels
    Case("channel-capacity-type", t_channel_capacity_type, TypeError, "str"),
    Case("channel-capacity-negative", t_channel_capacity_negative, ValueError, "Channel(-1)"),
    Case("channel-send-closed", t_channel_send_closed, ClosedResourceError, "channel"),
    Case("channel-recv-drained", t_channel_recv_drained, EndOfChannel, "channel"),
    Case("channel-send-in-coroutine", t_channel_send_in_coroutine, RuntimeError, "Channel.send()"),
    Case("channel-recv-in-coroutine", t_channel_recv_in_coroutine, RuntimeError, "Channel.recv()"),
    Case("channel-send-timeout", t_channel_send_timeout, TimeoutError, "send", "outcome"),
    Case("channel-recv-timeout", t_channel_recv_timeout, TimeoutError, "receive", "outcome"),
    Case("channel-try-send-full", t_channel_try_send_full, WouldBlock, "channel"),
    Case("channel-try-recv-empty", t_channel_try_recv_empty, WouldBlock, "channel"),
    Case(
        "channel-closed-under-sender",
        t_channel_closed_under_sender,
        ClosedResourceError,
        "channel",
        "outcome",
    ),
    Case(
        "channel-closed-under-receiver",
        t_channel_closed_under_receiver,
        EndOfChannel,
        "channel",
        "outcome",
    ),
    # lowlevel and testing
    Case("waker-new-sync-operation", t_waker_new_sync_operation, TypeError, "'plain_op'"),
    Case("resume-when-not-event", t_resume_when_not_event, TypeError, "int"),
    Case("lowlevel-timeout", t_lowlevel_timeout, TimeoutError, "timed_waiter'", "outcome"),
    Case("clock-backwards", t_clock_backwards, ValueError, "VirtualClock.advance()"),
    Case(
        "assert-checkpoints-outside",
        t_assert_checkpoints_outside,
        RuntimeError,
        "assert_checkpoints()",
    ),
    Case(
        "assert-checkpoints-without-await",
        t_assert_checkpoints_without_await,
        AssertionError,
        "cancellation point",
        "outcome",
    ),
    # readiness and sockets
    Case("fd-type", t_fd_type, TypeError, "str"),
    Case("fd-closed", t_fd_closed, ClosedResourceError, "socket"),
    Case("second-waiter-busy", t_second_waiter_busy, BusyResourceError, "fd "),
    Case("closed-while-waiting", t_closed_while_waiting, ClosedResourceError, "fd ", "outcome"),
    Case("unknown-multiplexer", t_unknown_multiplexer, ValueError, "'carrier_pigeon'"),
    Case("recv-closed-socket", t_recv_closed, ClosedResourceError, "recv_async()"),
    Case("accept-closed-socket", t_accept_closed, ClosedResourceError, "accept_async()"),
    Case("send-closed-socket", t_send_closed, ClosedResourceError, "send_all_async()"),
    Case("connect-refused", t_connect_refused, ConnectionRefusedError, "127.0.0.1:", "outcome"),
    Case("connect-unreachable", t_connect_unreachable, OSError, "255.255.255.255:9", "outcome"),
    Case("recv-reset", t_recv_reset, ConnectionResetError, "peer", "outcome"),
    Case("send-reset", t_send_reset, OSError, "peer", "outcome"),
    # the bridge
    Case("anyio-wait-type", t_anyio_wait_type, TypeError, "int"),
    Case(
        "anyio-unknown-loop",
        t_anyio_unknown_loop,
        RuntimeError,
        "'curio'",
        public=False,
    ),
    # platform
    Case(
        "thread-joins-itself",
        t_thread_joins_itself,
        RuntimeError,
        "'self_joiner'",
        public=False,
    ),
    Case(
        "thread-entry-not-callable",
        t_thread_entry_not_callable,
        TypeError,
        "'no_entry'",
        public=False,
    ),
]

REFUSED_PORT = free_port()
MISUSE = [case for case in CASES if case.kind == "misuse"]


# ----------------------------------------------------------------------
# Fixtures
# ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ctx() -> Iterator[Ctx]:
    rt = asyncop.Runtime(2, name="errors_rt")
    vrt = asyncop.Runtime(2, name="errors_vrt", clock=VirtualClock(autojump=True))
    try:
        yield Ctx(rt, vrt)
    finally:
        assert rt.shutdown(timeout=10)
        assert vrt.shutdown(timeout=10)


_raised: dict[str, BaseException] = {}


def raised(case: Case, ctx: Ctx) -> BaseException:
    """The error the case triggers; triggered once per session."""
    if case.id not in _raised:
        _raised[case.id] = case.trigger(ctx)
    return _raised[case.id]


def ids(cases: list[Case]) -> list[str]:
    return [case.id for case in cases]


# ----------------------------------------------------------------------
# The tests
# ----------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_error_has_the_right_type_and_names_its_subject(case: Case, ctx: Ctx) -> None:
    exc = raised(case, ctx)
    assert isinstance(exc, case.error), f"{type(exc).__name__}: {exc}"
    message = message_of(exc)
    assert case.names in message, f"the message does not name {case.names!r}: {message!r}"


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_error_message_is_one_sentence(case: Case, ctx: Ctx) -> None:
    message = message_of(raised(case, ctx))
    assert is_one_sentence(message), repr(message)


@pytest.mark.parametrize("case", MISUSE, ids=ids(MISUSE))
def test_misuse_error_says_what_to_do_instead(case: Case, ctx: Ctx) -> None:
    message = message_of(raised(case, ctx))
    assert suggests_what_to_do(message), f"no instruction in {message!r}"


@dataclass(frozen=True)
class Site:
    where: str  # path:line
    pattern: re.Pattern[str]


def _template(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.escape(node.value)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(re.escape(str(value.value)))
            else:
                parts.append(".*?")
        return "".join(parts)
    return None


def _exception_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "type":
        return "type(...)"
    return None


def raise_sites() -> list[Site]:
    """Every exception asyncop builds with a message literal."""
    sites = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _exception_name(node.func)
            if name is None or not (
                name.endswith("Error") or name in ("WouldBlock", "EndOfChannel", "type(...)")
            ):
                continue
            for arg in node.args:
                template = _template(arg)
                if template is not None:
                    where = f"{path.relative_to(PACKAGE.parent).as_posix()}:{node.lineno}"
                    sites.append(Site(where, re.compile(template, re.DOTALL)))
                    break
    return sites


def test_every_raise_site_is_covered(ctx: Ctx) -> None:
    messages = []
    skipped = []
    for case in CASES:
        try:
            messages.append(message_of(raised(case, ctx)))
        except pytest.skip.Exception:
            skipped.append(case.id)
    sites = raise_sites()
    assert len(sites) > 50, "the scan of the raise sites found too few"
    uncovered = [
        site.where for site in sites if not any(site.pattern.fullmatch(m) for m in messages)
    ]
    if uncovered and skipped:
        pytest.skip(f"cases {skipped} cannot run on this machine; uncovered: {uncovered}")
    assert uncovered == [], "raise sites no case triggers (add a case to CASES)"


# ----------------------------------------------------------------------
# A refused call leaves nothing behind
# ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{"timeout": "5"}, {"timeout": math.nan}, {"deadline": math.nan}],
    ids=["timeout-type", "timeout-nan", "deadline-nan"],
)
def test_a_refused_scope_leaves_no_live_operation(kwargs: dict[str, Any]) -> None:
    rt = fresh_runtime("refusing_rt")
    try:

        def enter() -> None:
            with rt.scope(name="refused_scope", **kwargs):
                pass

        assert isinstance(caught(enter), TypeError | ValueError)
        assert rt.dump() == "refusing_rt: no live operations"
    finally:
        rt.shutdown(timeout=1)


def test_a_refused_run_inside_a_coroutine_starts_nothing(ctx: Ctx) -> None:
    gate = Event()

    async def never_started() -> None:
        await gate.wait_async()  # keeps a wrongly started operation live

    async def runs_in_a_coroutine() -> None:
        ctx.rt.run(never_started)

    try:
        assert isinstance(failure_of(ctx.rt, runs_in_a_coroutine), RuntimeError)
        assert "never_started" not in ctx.rt.dump()
    finally:
        gate.set()


def test_the_rules_accept_a_good_message_and_refuse_bad_ones() -> None:
    good = "operation 'x' was already submitted; create a new operation to run it again"
    assert is_one_sentence(good) and suggests_what_to_do(good)
    assert not suggests_what_to_do("select() needs at least one awaitable")
    assert not suggests_what_to_do("Channel(-1) needs a capacity of 0 or more; 0 makes one")
    assert not is_one_sentence("bad state. Try again")
    assert not is_one_sentence("")
