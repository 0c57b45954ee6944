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
import contextlib
import dataclasses
import math
import os
import re
import signal
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
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
from asyncop.net import (
    DelimiterNotFound,
    IncompleteRead,
    accept_async,
    connect_async,
    recv_async,
    send_all_async,
)
from asyncop.operations import Suspension
from asyncop.platform import acquire_for, call_on_main_thread, can_call_on_main_thread
from asyncop.process import STDOUT, open_process, run_process
from asyncop.signals import SignalReceiver, open_signal_receiver
from asyncop.testing import VirtualClock, assert_checkpoints, wait_all_blocked
from tests.runtime import _remote_jobs as remote_jobs

from ._anyio_net_errors import ANYIO_NET_CASES
from ._bridge_errors import BRIDGE_CASES
from ._console_errors import CONSOLE_CASES
from ._net_errors import NET_CASES

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


def t_pickle_operation(c: Ctx) -> BaseException:
    import pickle

    return caught(pickle.dumps, c.rt.create(noop_callback, name="pickled"))


def t_send_before_start(c: Ctx) -> BaseException:
    # (What a wait suspends in, compiled; as Python, a generator with its own message.)
    awaiting = Suspension(asyncop.Event(name="unstarted"))
    return caught(awaiting.send, 1)


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


# -- scopes misused ----------------------------------------------------------


def t_scope_result_after_raise(c: Ctx) -> BaseException:
    try:
        with c.rt.scope(name="failed_scope") as scope:
            scope.spawn(lambda: 1 / 0)
    except ExceptionGroup:
        pass
    return caught(scope.result)


def t_scope_exit_not_entered(c: Ctx) -> BaseException:
    return caught(c.rt.scope().__exit__, None, None, None)


def t_scope_aexit_not_entered(c: Ctx) -> BaseException:
    async def main() -> None:
        await asyncop.scope().__aexit__(None, None, None)

    return failure_of(c.vrt, main)


async def _holds_scope(name: str) -> AsyncIterator[None]:
    async with asyncop.scope(name=name):
        yield


def t_scope_exited_out_of_order(c: Ctx) -> BaseException:
    async def main() -> None:
        gen = _holds_scope("inner_scope")
        async with asyncop.scope(name="outer_scope"):
            await gen.__anext__()

    return failure_of(c.vrt, main)


def t_scope_exited_twice(c: Ctx) -> BaseException:
    async def main() -> None:
        block = asyncop.scope(name="left_scope")
        await block.__aenter__()
        await block.__aexit__(None, None, None)
        await block.__aexit__(None, None, None)

    return failure_of(c.vrt, main)


def t_scope_exited_by_another_task(c: Ctx) -> BaseException:
    async def main() -> BaseException:
        held = asyncop.scope(name="other_task_scope")
        await held.__aenter__()
        try:
            helper = asyncop.current_runtime().spawn(held.__aexit__, None, None, None)
            try:
                await helper
            except RuntimeError as exc:
                return exc
            raise AssertionError("the exit in another task was not refused")
        finally:
            await held.__aexit__(None, None, None)

    return c.vrt.run(main)


def t_sync_scope_exited_by_another_thread(c: Ctx) -> BaseException:
    held = c.rt.scope(name="other_thread_scope")
    held.__enter__()
    seen: list[BaseException] = []

    def exit_it() -> None:
        seen.append(caught(held.__exit__, None, None, None))

    thread = threading.Thread(target=exit_it)
    thread.start()
    thread.join(10)
    held.__exit__(None, None, None)
    return seen[0]


def t_scope_exited_after_being_closed(c: Ctx) -> BaseException:
    async def main() -> None:
        gen = _holds_scope("closed_early")
        with contextlib.suppress(RuntimeError):
            async with asyncop.scope():
                await gen.__anext__()
        await gen.__anext__()

    return failure_of(c.vrt, main)


def t_task_ended_with_a_scope_open(c: Ctx) -> BaseException:
    keep: list[Any] = []

    async def scope_leaker() -> None:
        gen = _holds_scope("left_open")
        keep.append(gen)
        await gen.__anext__()

    return failure_of(c.vrt, scope_leaker)


# -- runtime -----------------------------------------------------------------


def t_workers_type(c: Ctx) -> BaseException:
    return caught(asyncop.Runtime, "2")


def t_workers_zero(c: Ctx) -> BaseException:
    return caught(asyncop.Runtime, 0)


def t_parallel_type(c: Ctx) -> BaseException:
    return caught(asyncop.Runtime, 1, parallel="yes")


def t_max_threads_type(c: Ctx) -> BaseException:
    return caught(asyncop.Runtime, 1, max_threads=2.5)


def t_max_threads_below_workers(c: Ctx) -> BaseException:
    return caught(asyncop.Runtime, 4, max_threads=2)


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
    # The callback is held until the second submit, which must find it
    # submitted, not already ended (a busy worker could finish it first).
    hold = threading.Event()

    def held(op: asyncop.AsyncOperation, context: object) -> None:
        hold.wait(5)

    op = c.rt.create(held, name="submitted_twice")
    c.rt.submit(op)
    try:
        return caught(c.rt.submit, op)
    finally:
        hold.set()
        op.wait(5)


def t_submit_cancelled(c: Ctx) -> BaseException:
    op = c.rt.create(noop_callback, name="cancelled_first")
    op.cancel()
    return caught(c.rt.submit, op)


def t_await_never_submitted(c: Ctx) -> BaseException:
    op = c.rt.create(noop_callback, name="never_submitted")
    try:
        return caught(asyncop.async_await, op)
    finally:
        op.cancel()


def t_submit_after_shutdown(c: Ctx) -> BaseException:
    closed = fresh_runtime("closed_rt_submit")
    op = closed.create(noop_callback, name="late")
    assert closed.shutdown(timeout=5)
    return caught(closed.submit, op)


def t_spawn_after_shutdown(c: Ctx) -> BaseException:
    closed = fresh_runtime("closed_rt_spawn")
    assert closed.shutdown(timeout=5)
    return caught(closed.spawn, noop)


def t_with_after_shutdown(c: Ctx) -> BaseException:
    closed = fresh_runtime("closed_rt_with")
    assert closed.shutdown(timeout=5)

    def enter() -> None:
        with closed:
            pass

    return caught(enter)


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


def t_workers_above_the_cap(c: Ctx) -> BaseException:
    return caught(asyncop.Runtime, 5000)


def t_shutdown_timeout_type(c: Ctx) -> BaseException:
    rt = fresh_runtime("shutdown_type_rt")
    try:
        return caught(rt.shutdown, timeout="1")
    finally:
        rt.shutdown(timeout=5)


def t_shutdown_timeout_nan(c: Ctx) -> BaseException:
    rt = fresh_runtime("shutdown_nan_rt")
    try:
        return caught(rt.shutdown, timeout=math.nan)
    finally:
        rt.shutdown(timeout=5)


def t_shutdown_from_blocking_thread(c: Ctx) -> BaseException:
    async def main() -> None:
        await asyncop.spawn_blocking(c.rt.shutdown)

    return failure_of(c.rt, main)


def t_shutdown_inside_scope(c: Ctx) -> BaseException:
    with c.rt.scope(name="shutdown_scope"):
        return caught(c.rt.shutdown)


def t_wait_on_regular_file(c: Ctx) -> BaseException:
    import tempfile

    if c.rt._get_reactor().backend != "epoll":
        pytest.skip("only epoll refuses regular files")

    async def main(f: Any) -> None:
        await asyncop.readable(f)

    with tempfile.TemporaryFile() as f:
        return failure_of(c.rt, main, f)


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


def t_timeout_without_op(c: Ctx) -> BaseException:
    return caught(asyncop.timeout, 5)


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


def t_module_scope_under_asyncio(c: Ctx) -> BaseException:
    async def on_asyncio() -> None:
        async with asyncop.scope():
            pass

    return caught(asyncio.run, on_asyncio())


def t_move_on_after_under_asyncio(c: Ctx) -> BaseException:
    async def on_asyncio() -> None:
        async with asyncop.move_on_after(1):
            pass

    return caught(asyncio.run, on_asyncio())


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


def t_lock_guard_released_twice(c: Ctx) -> BaseException:
    lock = Lock("guarded_lock")

    async def twice() -> None:
        guard = await lock.lock_async()
        guard.release()
        async with lock:
            guard.release()

    return failure_of(c.vrt, twice)


def t_shield_type(c: Ctx) -> BaseException:
    def set_shield() -> None:
        current_operation().shield = "yes"  # type: ignore[assignment]

    return failure_of(c.vrt, set_shield)


def t_scope_shield_type(c: Ctx) -> BaseException:
    return caught(c.rt.scope, shield=1)


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
    channel: Channel[int] = Channel(1, name="closed_jobs")
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
    wait_until(lambda: channel.statistics().tasks_waiting_send == 1)
    channel.close()
    thread.join(5)
    return box["error"]


def t_channel_closed_under_receiver(c: Ctx) -> BaseException:
    channel: Channel[int] = Channel(0)
    thread, box = in_thread(lambda: channel.recv(timeout=5))
    wait_until(lambda: channel.statistics().tasks_waiting_receive == 1)
    channel.close()
    thread.join(5)
    return box["error"]


# -- lowlevel and testing ------------------------------------------------------


def t_waker_new_sync_operation(c: Ctx) -> BaseException:
    return caught(lowlevel.waker_new, c.rt.create(noop_callback, name="plain_op"))


def t_waker_new_task_not_running(c: Ctx) -> BaseException:
    gate = Event()

    async def parked_task() -> None:
        await gate.wait_async()

    op = c.rt.spawn(parked_task, name="parked_op")
    wait_until(lambda: op._task is not None and op._task.status is asyncop.WakerStatus.WAITING)
    try:
        return caught(lowlevel.waker_new, op)
    finally:
        gate.set()
        op.wait(5)


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


def t_accept_not_listening(c: Ctx) -> BaseException:
    with socket.socket() as sock:
        return failure_of(c.rt, accept_async, sock)


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


# -- misused awaitables, foreign loops, bad input -------------------------------


def t_spawn_returns_awaitable(c: Ctx) -> BaseException:
    return failure_of(c.rt, lambda: asyncop.sleep(10))


async def _agen_body() -> Any:
    yield 1


def t_spawn_async_generator(c: Ctx) -> BaseException:
    return caught(c.rt.spawn, _agen_body)


def t_spawn_blocking_async_function(c: Ctx) -> BaseException:
    return caught(asyncop.spawn_blocking, async_callback)


def t_spawn_blocking_returns_coroutine(c: Ctx) -> BaseException:
    async def body() -> None:
        return None

    async def main() -> None:
        await asyncop.spawn_blocking(lambda: body())

    return failure_of(c.rt, main)


def t_asyncop_awaitable_under_asyncio(c: Ctx) -> BaseException:
    async def main() -> None:
        await asyncop.sleep(1)

    return caught(asyncio.run, main())


def t_asyncio_future_in_asyncop_task(c: Ctx) -> BaseException:
    async def awaits_a_future() -> None:
        loop = asyncio.new_event_loop()
        try:
            await loop.create_future()
        finally:
            loop.close()

    return failure_of(c.rt, awaits_a_future)


def t_asyncio_sleep_in_asyncop_task(c: Ctx) -> BaseException:
    async def main() -> None:
        await asyncio.sleep(1)

    return failure_of(c.rt, main)


# -- processes and signals ------------------------------------------------


async def _on_cat(action: Callable[[Any], Any]) -> BaseException:
    """Run ``action(process)`` on a running ``cat``; return what it raised."""
    async with open_process(["cat"]) as process:
        try:
            await action(process)
        except BaseException as exc:
            return exc
    raise AssertionError(f"{action!r} raised nothing")


def on_cat(c: Ctx, action: Callable[[Any], Any]) -> BaseException:
    error: BaseException = c.rt.run(_on_cat, action)
    return error


async def _fed_then_closed(process: Any, data: bytes) -> Any:
    await process.stdin.send_all(data)
    await process.stdin.send_eof()
    return process.stdout


def t_pipe_closed(c: Ctx) -> BaseException:
    async def action(process: Any) -> None:
        await process.stdout.aclose()
        await process.stdout.receive_some()

    return on_cat(c, action)


def t_pipe_receive_on_write_end(c: Ctx) -> BaseException:
    return on_cat(c, lambda process: process.stdin.receive_some())


def t_pipe_send_on_read_end(c: Ctx) -> BaseException:
    return on_cat(c, lambda process: process.stdout.send_all(b"x"))


def t_pipe_busy(c: Ctx) -> BaseException:
    async def action(process: Any) -> None:
        error: BaseException | None = None
        async with asyncop.scope() as s:
            s.spawn(process.stdout.receive_some)
            await wait_all_blocked()
            try:
                await process.stdout.receive_some()
            except BaseException as exc:
                error = exc  # raised out of the scope below, not inside a group
            await process.stdin.send_all(b"x")  # lets the first receiver end
        if error is not None:
            raise error

    return on_cat(c, action)


def t_pipe_max_bytes(c: Ctx) -> BaseException:
    return on_cat(c, lambda process: process.stdout.receive_some(0))


def t_pipe_exactly_negative(c: Ctx) -> BaseException:
    return on_cat(c, lambda process: process.stdout.receive_exactly(-1))


def t_pipe_empty_delimiter(c: Ctx) -> BaseException:
    return on_cat(c, lambda process: process.stdout.receive_until(b"", 10))


def t_pipe_exactly_eof(c: Ctx) -> BaseException:
    async def action(process: Any) -> None:
        await (await _fed_then_closed(process, b"ab")).receive_exactly(5)

    return on_cat(c, action)


def t_pipe_until_eof(c: Ctx) -> BaseException:
    async def action(process: Any) -> None:
        await (await _fed_then_closed(process, b"ab")).receive_until(b"\n", 100)

    return on_cat(c, action)


def t_pipe_until_limit(c: Ctx) -> BaseException:
    async def action(process: Any) -> None:
        await (await _fed_then_closed(process, b"abcdef")).receive_until(b"\n", 4)

    return on_cat(c, action)


def t_pipe_broken(c: Ctx) -> BaseException:
    async def main() -> None:
        async with open_process(["true"]) as process:
            await process.wait()
            await process.stdin.send_all(b"x" * (1 << 20))  # type: ignore[union-attr]

    return failure_of(c.rt, main)


def t_clock_start_type(c: Ctx) -> BaseException:
    return caught(VirtualClock, start="0")


def t_clock_start_nan(c: Ctx) -> BaseException:
    return caught(VirtualClock, start=math.nan)


def t_waker_new_not_operation(c: Ctx) -> BaseException:
    return caught(lowlevel.waker_new, None)


def t_waker_new_cancellation_not_event(c: Ctx) -> BaseException:
    return caught(lowlevel.waker_new, c.rt.create(async_callback), cancellation=5)


def t_waker_new_timeout_type(c: Ctx) -> BaseException:
    return caught(lowlevel.waker_new, c.rt.create(async_callback), timeout="1")


def t_waker_new_timeout_nan(c: Ctx) -> BaseException:
    return caught(lowlevel.waker_new, c.rt.create(async_callback), timeout=math.nan)


def t_resume_when_callback_not_callable(c: Ctx) -> BaseException:
    return caught(lowlevel.resume_when, c.rt.create(async_callback), asyncop.sleep(1), 5)


def t_recv_not_socket(c: Ctx) -> BaseException:
    return failure_of(c.rt, recv_async, None, 1)


def _pair_failure(c: Ctx, fn: Callable[..., Any], *args: Any) -> BaseException:
    a, b = socket.socketpair()
    try:
        return failure_of(c.rt, fn, a, *args)
    finally:
        a.close()
        b.close()


def t_recv_count_type(c: Ctx) -> BaseException:
    return _pair_failure(c, recv_async, "10")


def t_recv_count_zero(c: Ctx) -> BaseException:
    return _pair_failure(c, recv_async, 0)


def t_send_all_text(c: Ctx) -> BaseException:
    return _pair_failure(c, send_all_async, "text")


def t_connect_host_type(c: Ctx) -> BaseException:
    return failure_of(c.rt, connect_async, None, 80)


def t_connect_port_type(c: Ctx) -> BaseException:
    return failure_of(c.rt, connect_async, "127.0.0.1", "80")


def t_connect_port_range(c: Ctx) -> BaseException:
    return failure_of(c.rt, connect_async, "127.0.0.1", 70000)


def t_process_string_command(c: Ctx) -> BaseException:
    return caught(open_process, "ls -l")


def t_process_list_with_shell(c: Ctx) -> BaseException:
    return caught(open_process, ["ls"], shell=True)


def t_process_command_type(c: Ctx) -> BaseException:
    return caught(open_process, 42)


def t_process_empty_command(c: Ctx) -> BaseException:
    return caught(open_process, [])


def t_process_stdout_to_stdout(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], stdout=STDOUT)


def t_process_kill_grace_type(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], kill_grace="5")


def t_process_kill_grace_nan(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], kill_grace=math.nan)


def t_process_kill_grace_negative(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], kill_grace=-1)


def t_process_session_type(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], start_new_session="yes")


def t_process_group_type(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], process_group="0")


def t_process_group_negative(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], process_group=-2)


def t_process_group_and_session(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], start_new_session=True, process_group=0)


def t_process_pass_fds_type(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], pass_fds=3)


def t_process_pass_fds_item(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], pass_fds=["3"])


def t_process_pass_fds_negative(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], pass_fds=[-1])


def t_process_user_type(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], user=1.5)


def t_process_user_negative(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], user=-1)


def t_process_group_unknown(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], group="no-such-group-here")


def t_process_extra_groups_type(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], extra_groups="wheel")


def t_process_umask_type(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], umask="022")


def t_process_umask_range(c: Ctx) -> BaseException:
    return caught(open_process, ["true"], umask=0o1000)


def t_process_input_text(c: Ctx) -> BaseException:
    async def main() -> None:
        await run_process(["true"], input="text")  # type: ignore[arg-type]

    return failure_of(c.rt, main)


def t_process_input_and_stdin(c: Ctx) -> BaseException:
    async def main() -> None:
        await run_process(["true"], input=b"x", stdin=None)

    return failure_of(c.rt, main)


def t_signals_off_main_thread(c: Ctx) -> BaseException:
    # A plain thread, while the main thread waits outside asyncop (join()).
    thread, box = in_thread(lambda: open_signal_receiver(signal.SIGUSR1))
    thread.join(10)
    return box["error"]


def t_main_call_interrupted(c: Ctx) -> BaseException:
    # A Ctrl-C lands on the main thread while it runs a call handed to it:
    # the Ctrl-C goes on up the main thread's wait, the caller is told.
    def interrupted() -> None:
        raise KeyboardInterrupt

    waited_on = threading.Lock()
    waited_on.acquire()

    def hand_over() -> None:
        while not can_call_on_main_thread():
            time.sleep(0.001)
        call_on_main_thread(interrupted, "refused")

    thread, box = in_thread(hand_over)
    with pytest.raises(KeyboardInterrupt):
        acquire_for(waited_on, 10.0)
    thread.join(10)
    return box["error"]


def t_at_shutdown_not_callable(c: Ctx) -> BaseException:
    return caught(c.rt.at_shutdown, "cleanup")


def t_at_shutdown_late(c: Ctx) -> BaseException:
    rt = fresh_runtime("late_rt")
    rt.shutdown(timeout=5)
    return caught(rt.at_shutdown, print)


class _Listener:
    def ended(self, op: asyncop.AsyncOperation[Any]) -> None:
        pass


def t_instrument_without_hooks(c: Ctx) -> BaseException:
    return caught(c.rt.add_instrument, object())


class _TrioInstrument:
    def before_task_step(self, task: object) -> None:
        pass

    def task_exited(self, task: object) -> None:
        pass


def t_instrument_with_trio_names(c: Ctx) -> BaseException:
    return caught(c.rt.add_instrument, _TrioInstrument())


def t_instrument_class(c: Ctx) -> BaseException:
    return caught(c.rt.add_instrument, _Listener)


def t_instrument_added_twice(c: Ctx) -> BaseException:
    listener = _Listener()
    c.rt.add_instrument(listener)
    try:
        return caught(c.rt.add_instrument, listener)
    finally:
        c.rt.remove_instrument(listener)


def t_instrument_after_shutdown(c: Ctx) -> BaseException:
    closed = fresh_runtime("closed_rt_instrument")
    assert closed.shutdown(timeout=5)
    return caught(closed.add_instrument, _Listener())


def t_otel_after_shutdown(c: Ctx) -> BaseException:
    from asyncop import otel

    closed = fresh_runtime("closed_rt_otel")
    assert closed.shutdown(timeout=5)
    return caught(otel.instrument, closed)


def t_instrument_not_added(c: Ctx) -> BaseException:
    return caught(c.rt.remove_instrument, _Listener())


def _anyio_failure(c: Ctx, main: Callable[[], Any]) -> BaseException:
    """The error ``main`` raises under ``anyio.run`` on the asyncop backend."""
    anyio = pytest.importorskip("anyio")
    return caught(anyio.run, main, backend="asyncop", backend_options={"runtime": c.rt})


def t_anyio_process_max_bytes(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        async with await anyio.open_process(["true"]) as process:
            assert process.stdout is not None
            await process.stdout.receive(0)

    return _anyio_failure(c, main)


def t_anyio_process_extra_keyword(c: Ctx) -> BaseException:
    from anyio._core._eventloop import get_async_backend

    async def main() -> None:
        await get_async_backend().open_process(
            ["true"], stdin=None, stdout=None, stderr=None, close_fds=False
        )

    return _anyio_failure(c, main)


def t_anyio_process_windows_only(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        await anyio.open_process(["true"], creationflags=4)

    return _anyio_failure(c, main)


def t_signals_not_open(c: Ctx) -> BaseException:
    return caught(c.rt.run, open_signal_receiver(signal.SIGUSR1).__anext__)


def t_signals_entered_twice(c: Ctx) -> BaseException:
    with open_signal_receiver(signal.SIGUSR1) as received:
        return caught(received.__enter__)


def t_signals_busy(c: Ctx) -> BaseException:
    async def main(received: SignalReceiver) -> BaseException:
        async with asyncop.scope() as s:
            s.spawn(received.__anext__)
            await wait_all_blocked()
            error: BaseException | None = None
            try:
                await received.__anext__()
            except BaseException as exc:
                error = exc
            s.cancel()
        assert error is not None, "the second __anext__ raised nothing"
        return error

    with open_signal_receiver(signal.SIGUSR1) as received:
        result: BaseException = c.rt.run(main, received)
    return result


def t_signals_none(c: Ctx) -> BaseException:
    return caught(open_signal_receiver)


def t_signals_not_a_number(c: Ctx) -> BaseException:
    return caught(open_signal_receiver, "SIGTERM")


def t_signals_unknown_number(c: Ctx) -> BaseException:
    return caught(open_signal_receiver, 10_000)


def t_signals_uncatchable(c: Ctx) -> BaseException:
    return caught(open_signal_receiver, signal.SIGKILL)


# ----------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------


# -- executors ---------------------------------------------------------------------


def _in_process(c: Ctx, fn: Callable[..., Any], *args: Any) -> BaseException:
    """Run ``fn`` on a one-process executor; the error its operation ended with."""
    with asyncop.ProcessExecutor(1, kill_grace=1) as ex:
        op = c.rt.spawn(fn, *args, executor=ex)
        op.wait(30)
        return caught(op.result)


def t_spawn_abandon_without_executor(c: Ctx) -> BaseException:
    return caught(c.rt.spawn, noop, abandon=True)


def t_spawn_bad_executor(c: Ctx) -> BaseException:
    return caught(c.rt.spawn, noop, executor="pool")


def t_process_workers_type(c: Ctx) -> BaseException:
    return caught(asyncop.ProcessExecutor, "2")


def t_process_workers_zero(c: Ctx) -> BaseException:
    return caught(asyncop.ProcessExecutor, 0)


def t_process_closed(c: Ctx) -> BaseException:
    ex = asyncop.ProcessExecutor(1)
    ex.shutdown()
    return caught(c.rt.spawn, remote_jobs.square, 2, executor=ex)


def t_process_closed_at_first_step(c: Ctx) -> BaseException:
    from asyncop.runtime._executors._executors import _ProcessJob

    ex = asyncop.ProcessExecutor(1)
    ex.shutdown()
    return caught(_ProcessJob(ex, 0, b"", b"", "late_job", False)._send)


def t_process_worker_died(c: Ctx) -> BaseException:
    return _in_process(c, remote_jobs.die, 3)


def t_process_pool_broke_under_a_started_job(c: Ctx) -> BaseException:
    # pebble gave up its pool while this job ran (see ProcessExecutor._renew_pool):
    # the job cannot be resent, so it fails.
    with asyncop.ProcessExecutor(1, kill_grace=1) as ex:
        op = c.rt.spawn(remote_jobs.poll_token, 30, executor=ex)
        while not ex._jobs or not next(iter(ex._jobs))._started():
            time.sleep(0.01)
        next(iter(ex._jobs))._rescue()
        op.wait(10)
        return caught(op.result)


def t_remote_token_outside(c: Ctx) -> BaseException:
    return caught(asyncop.remote_token)


def t_remote_result_unpicklable(c: Ctx) -> BaseException:
    return _in_process(c, remote_jobs.make_generator)


def t_remote_error_unpicklable(c: Ctx) -> BaseException:
    return _in_process(c, remote_jobs.raise_unpicklable)


def t_remote_result_not_rebuilt(c: Ctx) -> BaseException:
    return _in_process(c, remote_jobs.return_load_refused)


def t_remote_error_not_rebuilt(c: Ctx) -> BaseException:
    return _in_process(c, remote_jobs.raise_pair_error)


def t_remote_call_not_rebuilt(c: Ctx) -> BaseException:
    return _in_process(c, remote_jobs.echo, remote_jobs.LoadRefused())


def t_remote_not_callable(c: Ctx) -> BaseException:
    with asyncop.ProcessExecutor(1) as ex:
        return caught(c.rt.spawn, 42, executor=ex)


def t_remote_async_function(c: Ctx) -> BaseException:
    async def async_job() -> None:
        pass

    with asyncop.ProcessExecutor(1) as ex:
        return caught(c.rt.spawn, async_job, executor=ex)


def t_remote_function_unpicklable(c: Ctx) -> BaseException:
    def local_job() -> None:
        pass

    with asyncop.ProcessExecutor(1) as ex:
        return caught(c.rt.spawn, local_job, executor=ex)


def t_remote_argument_unpicklable(c: Ctx) -> BaseException:
    with asyncop.ProcessExecutor(1) as ex:
        return caught(c.rt.spawn, remote_jobs.square, threading.Lock(), executor=ex)


def t_remote_call_unpicklable(c: Ctx) -> BaseException:
    from asyncop.runtime._executors._remote_call import pack_call

    def dumps(obj: object) -> bytes:
        if isinstance(obj, tuple):
            raise TypeError("tuples refused")
        return b""

    return caught(pack_call, dumps, remote_jobs.square, (1,), "a worker process")


def t_runtime_no_such_name(c: Ctx) -> BaseException:
    import asyncop.runtime

    return caught(getattr, asyncop.runtime, "no_such_name")


def _import_without(module: str, dependency: str) -> BaseException:
    """Import ``module`` as if ``dependency`` were not installed; return the ImportError."""
    import importlib
    import sys

    saved = {name: sys.modules.pop(name) for name in (module,) if name in sys.modules}
    real = sys.modules.get(dependency)
    sys.modules[dependency] = None  # type: ignore[assignment]
    try:
        importlib.import_module(module)
    except ImportError as exc:
        return exc
    finally:
        if real is None:
            del sys.modules[dependency]
        else:
            sys.modules[dependency] = real
        sys.modules.update(saved)
    raise AssertionError(f"{module} imported without {dependency}")


def t_dask_missing(c: Ctx) -> BaseException:
    return _import_without("asyncop.dask", "distributed")


def t_otel_missing(c: Ctx) -> BaseException:
    return _import_without("asyncop.otel", "opentelemetry")


def t_otel_not_a_runtime(c: Ctx) -> BaseException:
    from asyncop import otel

    return caught(otel.instrument, "errors_rt")


def t_otel_select_not_callable(c: Ctx) -> BaseException:
    from asyncop import otel

    return caught(otel.instrument, c.rt, select="everything")


def t_otel_tracer_provider_wrong(c: Ctx) -> BaseException:
    from asyncop import otel

    return caught(otel.instrument, c.rt, tracer_provider=42)


def _fake_client(status: str, asynchronous: bool) -> Any:
    import types

    import distributed

    class FakeClient(distributed.Client):
        scheduler = types.SimpleNamespace(address="tcp://fake-scheduler")

        def __init__(self) -> None:
            pass

        def __del__(self) -> None:
            pass

    FakeClient.status = status  # type: ignore[assignment]
    FakeClient.asynchronous = asynchronous  # type: ignore[assignment]
    return FakeClient()


def t_dask_client_type(c: Ctx) -> BaseException:
    from asyncop.dask import DaskExecutor

    return caught(DaskExecutor, "tcp://127.0.0.1:8786")


def t_dask_client_async(c: Ctx) -> BaseException:
    from asyncop.dask import DaskExecutor

    return caught(DaskExecutor, _fake_client("running", True))


def t_dask_client_closed(c: Ctx) -> BaseException:
    from asyncop.dask import DaskExecutor

    ex = DaskExecutor(_fake_client("closed", False))
    return caught(c.rt.spawn, remote_jobs.square, 1, executor=ex)


def t_dask_shut_down(c: Ctx) -> BaseException:
    from asyncop.dask import DaskExecutor

    ex = DaskExecutor(_fake_client("running", False))
    ex.shutdown()
    return caught(c.rt.spawn, remote_jobs.square, 1, executor=ex)


def t_dask_lost(c: Ctx) -> BaseException:
    from asyncop.dask import DaskExecutor, _DaskJob

    job = _DaskJob(DaskExecutor(_fake_client("closed", False)), b"", "lost_task", False)
    return job._lost(RuntimeError("the connection closed"))


def t_dask_broken(c: Ctx) -> BaseException:
    from asyncop.dask import _broken

    return _broken("lost_task", RuntimeError("worker lost"))


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
    Case("pickle-operation", t_pickle_operation, TypeError, "'pickled'"),
    Case("send-before-start", t_send_before_start, TypeError, "Suspension"),
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
    Case("parallel-type", t_parallel_type, TypeError, "str"),
    Case("max-threads-type", t_max_threads_type, TypeError, "float"),
    Case("max-threads-below-workers", t_max_threads_below_workers, ValueError, "workers=4"),
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
    Case("with-after-shutdown", t_with_after_shutdown, RuntimeError, "'closed_rt_with'"),
    Case("scope-after-shutdown", t_scope_after_shutdown, RuntimeError, "'closed_rt_scope'"),
    Case(
        "scope-result-after-raise", t_scope_result_after_raise, InvalidStateError, "'failed_scope'"
    ),
    Case("scope-exit-not-entered", t_scope_exit_not_entered, RuntimeError, "with statement"),
    Case("scope-aexit-not-entered", t_scope_aexit_not_entered, RuntimeError, "async with"),
    Case("scope-out-of-order", t_scope_exited_out_of_order, RuntimeError, "'outer_scope'"),
    Case("scope-exited-twice", t_scope_exited_twice, RuntimeError, "'left_scope'"),
    Case("scope-other-task", t_scope_exited_by_another_task, RuntimeError, "'other_task_scope'"),
    Case(
        "scope-other-thread",
        t_sync_scope_exited_by_another_thread,
        RuntimeError,
        "'other_thread_scope'",
    ),
    Case("scope-closed-early", t_scope_exited_after_being_closed, RuntimeError, "'closed_early'"),
    Case("task-left-scope-open", t_task_ended_with_a_scope_open, RuntimeError, "'left_open'"),
    Case(
        "start-after-shutdown-race",
        t_start_after_shutdown_race,
        RuntimeError,
        "'closed_rt_race'",
        public=False,
    ),
    Case("shutdown-from-own-worker", t_shutdown_from_own_worker, RuntimeError, "'errors_rt'"),
    Case("workers-above-the-cap", t_workers_above_the_cap, ValueError, "workers=5000"),
    Case("shutdown-timeout-type", t_shutdown_timeout_type, TypeError, "'shutdown_type_rt'"),
    Case("shutdown-timeout-nan", t_shutdown_timeout_nan, ValueError, "'shutdown_nan_rt'"),
    Case("shutdown-from-blocking", t_shutdown_from_blocking_thread, RuntimeError, "'errors_rt'"),
    Case("shutdown-inside-scope", t_shutdown_inside_scope, RuntimeError, "'shutdown_scope'"),
    Case("wait-on-regular-file", t_wait_on_regular_file, OSError, "fd "),
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
    Case("await-never-submitted", t_await_never_submitted, RuntimeError, "'never_submitted'"),
    # awaitables
    Case("sleep-type", t_sleep_type, TypeError, "sleep()"),
    Case("sleep-nan", t_sleep_nan, ValueError, "sleep()"),
    Case("sleep-until-type", t_sleep_until_type, TypeError, "a time on the runtime's clock"),
    Case("timeout-op-type", t_timeout_op_type, TypeError, "timeout()"),
    Case("timeout-without-op", t_timeout_without_op, TypeError, "timeout(5)"),
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
    Case("scope-timeout-nan", t_scope_timeout_nan, ValueError, "scope(timeout=...)"),
    Case("scope-entered-twice", t_scope_entered_twice, RuntimeError, "'entered_once'"),
    Case("sync-scope-in-coroutine", t_sync_scope_in_coroutine, RuntimeError, "scope()"),
    Case("async-scope-outside", t_async_scope_outside_asyncop, RuntimeError, "scope()"),
    Case("scope-other-runtime", t_scope_of_other_runtime, RuntimeError, "'errors_vrt'"),
    Case("scope-outside-operation", t_scope_outside_operation, RuntimeError, "asyncop.scope()"),
    Case("scope-under-asyncio", t_module_scope_under_asyncio, RuntimeError, "asyncio"),
    Case("move-on-after-under-asyncio", t_move_on_after_under_asyncio, RuntimeError, "asyncio"),
    Case("scope-deadline-passed", t_scope_deadline_passed, TimeoutError, "'page_load'", "outcome"),
    # primitives
    Case("lock-acquire-in-coroutine", t_lock_acquire_in_coroutine, RuntimeError, "'db_lock'"),
    Case("lock-broken", t_lock_broken, BrokenResourceError, "'cache_lock'"),
    Case("lock-release-unheld", t_lock_release_unheld, RuntimeError, "'free_lock'"),
    Case("lock-reentry", t_lock_reentry, RuntimeError, "'reentered_lock'"),
    Case("lock-guard-released-twice", t_lock_guard_released_twice, RuntimeError, "'guarded_lock'"),
    Case("shield-type", t_shield_type, TypeError, "set_shield'"),
    Case("scope-shield-type", t_scope_shield_type, TypeError, "scope(shield=...)"),
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
    Case("channel-send-closed", t_channel_send_closed, ClosedResourceError, "'closed_jobs'"),
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
    Case("waker-new-not-running", t_waker_new_task_not_running, RuntimeError, "'parked_op'"),
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
    Case("accept-not-listening", t_accept_not_listening, OSError, "<socket.socket fd="),
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
    # executors
    Case("spawn-abandon-alone", t_spawn_abandon_without_executor, TypeError, "abandon=True"),
    Case("spawn-bad-executor", t_spawn_bad_executor, TypeError, "str"),
    Case("process-workers-type", t_process_workers_type, TypeError, "str"),
    Case("process-workers-zero", t_process_workers_zero, ValueError, "max_workers=0"),
    Case("process-closed", t_process_closed, RuntimeError, "'square'"),
    Case(
        "process-closed-at-step",
        t_process_closed_at_first_step,
        RuntimeError,
        "'late_job'",
        public=False,
    ),
    Case("process-died", t_process_worker_died, BrokenResourceError, "'die'", "outcome"),
    Case(
        "process-pool-broke",
        t_process_pool_broke_under_a_started_job,
        BrokenResourceError,
        "'poll_token'",
        "outcome",
    ),
    Case("remote-token-outside", t_remote_token_outside, RuntimeError, "remote_token()"),
    Case(
        "remote-result-unpicklable",
        t_remote_result_unpicklable,
        TypeError,
        "'make_generator'",
        "outcome",
    ),
    Case(
        "remote-error-unpicklable",
        t_remote_error_unpicklable,
        RuntimeError,
        "UnpicklableError",
        "outcome",
    ),
    Case(
        "remote-result-not-rebuilt",
        t_remote_result_not_rebuilt,
        TypeError,
        "'return_load_refused'",
        "outcome",
    ),
    Case(
        "remote-error-not-rebuilt",
        t_remote_error_not_rebuilt,
        RuntimeError,
        "'raise_pair_error'",
        "outcome",
    ),
    Case("remote-call-not-rebuilt", t_remote_call_not_rebuilt, TypeError, "echo"),
    Case("remote-not-callable", t_remote_not_callable, TypeError, "42"),
    Case("remote-async-function", t_remote_async_function, TypeError, "async_job"),
    Case("remote-function-unpicklable", t_remote_function_unpicklable, TypeError, "local_job"),
    Case("remote-argument-unpicklable", t_remote_argument_unpicklable, TypeError, "'square'"),
    Case(
        "remote-call-unpicklable",
        t_remote_call_unpicklable,
        TypeError,
        "square",
        public=False,
    ),
    Case("dask-missing", t_dask_missing, ImportError, "asyncop[dask]"),
    Case("otel-missing", t_otel_missing, ImportError, "asyncop[otel]"),
    Case("otel-not-a-runtime", t_otel_not_a_runtime, TypeError, "str"),
    Case("otel-select-not-callable", t_otel_select_not_callable, TypeError, "str"),
    Case("otel-tracer-provider-wrong", t_otel_tracer_provider_wrong, TypeError, "int"),
    Case("dask-client-type", t_dask_client_type, TypeError, "str"),
    Case("dask-client-async", t_dask_client_async, TypeError, "asynchronous"),
    Case("dask-client-closed", t_dask_client_closed, RuntimeError, "'square'"),
    Case("dask-shut-down", t_dask_shut_down, RuntimeError, "'square'"),
    Case("dask-lost", t_dask_lost, BrokenResourceError, "'lost_task'", "outcome", False),
    Case("dask-broken", t_dask_broken, BrokenResourceError, "'lost_task'", "outcome", False),
    Case(
        "runtime-no-such-name",
        t_runtime_no_such_name,
        AttributeError,
        "'no_such_name'",
        public=False,
    ),
]


# -- start(), channel ends ---------------------------------------------------


def t_start_twice(c: Ctx) -> BaseException:
    seen: list[BaseException] = []

    async def starts_twice(*, task_status: asyncop.TaskStatus[None]) -> None:
        task_status.started()
        seen.append(caught(task_status.started))

    with c.vrt.scope() as root:
        root.start(starts_twice)
    return seen[0]


def t_start_after_end(c: Ctx) -> BaseException:
    kept: list[asyncop.TaskStatus[None]] = []

    def keeps_its_status(*, task_status: asyncop.TaskStatus[None]) -> None:
        kept.append(task_status)
        raise ValueError("gave up before it was ready")

    with c.vrt.scope() as root:
        caught(root.start, keeps_its_status)
    return caught(kept[0].started)


def t_start_without_started(c: Ctx) -> BaseException:
    def never_ready(*, task_status: asyncop.TaskStatus[None]) -> None:
        return None

    with c.vrt.scope() as root:
        return caught(root.start, never_ready)


def t_start_not_callable(c: Ctx) -> BaseException:
    with c.vrt.scope() as root:
        return caught(root.start, 42)


def t_start_without_task_status(c: Ctx) -> BaseException:
    def reports_nothing() -> None:
        return None

    with c.vrt.scope() as root:
        return caught(root.start, reports_nothing)


def t_start_on_unentered_scope(c: Ctx) -> BaseException:
    return caught(c.vrt.scope().start, noop)


def t_channel_end_closed(c: Ctx) -> BaseException:
    channel: Channel[int] = Channel(1)
    tx = channel.sender()
    tx.clone()
    tx.close()
    return caught(tx.send, 1)


def t_channel_receivers_closed(c: Ctx) -> BaseException:
    channel: Channel[int] = Channel(1)
    tx = channel.sender()
    channel.receiver().close()
    return caught(tx.try_send, 1)


def t_limiter_type(c: Ctx) -> BaseException:
    return caught(asyncop.CapacityLimiter, 2.5)


def t_limiter_too_few(c: Ctx) -> BaseException:
    return caught(asyncop.CapacityLimiter, -1)


def t_limiter_twice(c: Ctx) -> BaseException:
    limiter = asyncop.CapacityLimiter(2)
    limiter.acquire_on_behalf_of("greedy_borrower")
    return caught(limiter.acquire_on_behalf_of, "greedy_borrower")


def t_limiter_release_unheld(c: Ctx) -> BaseException:
    return caught(asyncop.CapacityLimiter(1).release_on_behalf_of, "idle_borrower")


def t_limiter_acquire_in_coroutine(c: Ctx) -> BaseException:
    limiter = asyncop.CapacityLimiter(1)

    async def borrows_in_a_coroutine() -> None:
        limiter.acquire()

    return failure_of(c.rt, borrows_in_a_coroutine)


def t_spawn_blocking_bad_limiter(c: Ctx) -> BaseException:
    return caught(asyncop.spawn_blocking, noop, limiter=3)


def t_condition_not_held(c: Ctx) -> BaseException:
    return caught(asyncop.Condition().notify)


def t_condition_wait_in_coroutine(c: Ctx) -> BaseException:
    cond = asyncop.Condition()

    async def waits_in_a_coroutine() -> None:
        async with cond:
            cond.wait()

    return failure_of(c.rt, waits_in_a_coroutine)


def t_condition_lock_type(c: Ctx) -> BaseException:
    return caught(asyncop.Condition, threading.Lock())


def t_semaphore_past_max(c: Ctx) -> BaseException:
    return caught(Semaphore(1, max_value=1).release)


def t_semaphore_max_type(c: Ctx) -> BaseException:
    return caught(Semaphore, 1, "2")


def t_semaphore_max_below_value(c: Ctx) -> BaseException:
    return caught(Semaphore, 3, 2)


def t_current_operation_required(c: Ctx) -> BaseException:
    return caught(asyncop.current_operation, require=True)


def _start_yield_fixture(c: Ctx, fixture: Callable[[], Any]) -> BaseException:
    from asyncop.pytest_plugin import _yield_fixture

    teardown = asyncop.Event()
    with c.vrt.scope(supervise=True) as root:
        try:
            _value, op = root.start(_yield_fixture, fixture, {}, teardown)
        except RuntimeError as exc:
            return exc
        teardown.set()
    op.wait(10)
    return caught(op.result)


def t_plugin_fixture_never_yields(c: Ctx) -> BaseException:
    async def never_yields() -> AsyncIterator[int]:
        return
        yield 1  # an async generator that ends before its first yield

    return _start_yield_fixture(c, never_yields)


def t_plugin_fixture_yields_twice(c: Ctx) -> BaseException:
    async def yields_twice() -> AsyncIterator[int]:
        yield 1
        yield 2

    return _start_yield_fixture(c, yields_twice)


def t_plugin_call_without_runtime(c: Ctx) -> BaseException:
    from types import SimpleNamespace

    from asyncop.pytest_plugin import pytest_pyfunc_call

    async def test_lonely() -> None:
        return None

    item = SimpleNamespace(
        name="test_lonely",
        obj=test_lonely,
        stash=pytest.Stash(),
        get_closest_marker=lambda name: name,
    )
    return caught(pytest_pyfunc_call, item)


def t_plugin_wide_async_fixture(c: Ctx) -> BaseException:
    from types import SimpleNamespace

    from asyncop.pytest_plugin import pytest_fixture_setup

    async def shared() -> int:
        return 1

    fixturedef = SimpleNamespace(func=shared, scope="module", argname="shared")
    request = SimpleNamespace(fixturenames=["asyncop_runtime", "shared"])
    return caught(next, pytest_fixture_setup(fixturedef, request))  # type: ignore[arg-type]


def t_anyio_extra_missing(c: Ctx) -> BaseException:
    import importlib
    import sys

    saved = {name: sys.modules.pop(name) for name in ("asyncop.anyio",) if name in sys.modules}
    blocked = {name: sys.modules.get(name) for name in ("anyio", "anyio.lowlevel", "sniffio")}
    try:
        for name in blocked:
            sys.modules[name] = None  # type: ignore[assignment]  # import raises ImportError
        return caught(importlib.import_module, "asyncop.anyio")
    finally:
        for name, module in blocked.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        sys.modules.pop("asyncop.anyio", None)
        sys.modules.update(saved)


def t_limiter_timeout_type(c: Ctx) -> BaseException:
    return caught(asyncop.CapacityLimiter(1).acquire, timeout="1")


def t_condition_timeout_nan(c: Ctx) -> BaseException:
    cond = asyncop.Condition()
    with cond:
        return caught(cond.wait, timeout=math.nan)


CASES += [
    Case("start-started-twice", t_start_twice, RuntimeError, "'t_start_twice"),
    Case("start-started-after-end", t_start_after_end, RuntimeError, "keeps_its_status'"),
    Case("start-never-started", t_start_without_started, RuntimeError, "never_ready'"),
    Case("start-not-callable", t_start_not_callable, TypeError, "int"),
    Case("start-no-task-status", t_start_without_task_status, TypeError, "reports_nothing'"),
    Case("start-scope-not-entered", t_start_on_unentered_scope, RuntimeError, "start()"),
    Case("channel-end-closed", t_channel_end_closed, ClosedResourceError, "sender"),
    Case("channel-receivers-closed", t_channel_receivers_closed, BrokenResourceError, "receivers"),
    Case("limiter-type", t_limiter_type, TypeError, "float"),
    Case("limiter-too-few", t_limiter_too_few, ValueError, "total_tokens=-1"),
    Case("limiter-twice", t_limiter_twice, RuntimeError, "'greedy_borrower'"),
    Case("limiter-release-unheld", t_limiter_release_unheld, RuntimeError, "'idle_borrower'"),
    Case("limiter-in-coroutine", t_limiter_acquire_in_coroutine, RuntimeError, "CapacityLimiter"),
    Case("spawn-blocking-limiter", t_spawn_blocking_bad_limiter, TypeError, "int"),
    Case("condition-not-held", t_condition_not_held, RuntimeError, "notify()"),
    Case("condition-wait-in-coroutine", t_condition_wait_in_coroutine, RuntimeError, "Condition"),
    Case("condition-lock-type", t_condition_lock_type, TypeError, "lock"),
    Case("semaphore-past-max", t_semaphore_past_max, ValueError, "max_value=1"),
    Case("semaphore-max-type", t_semaphore_max_type, TypeError, "str"),
    Case("semaphore-max-below", t_semaphore_max_below_value, ValueError, "max_value=2"),
    # misused awaitables, foreign loops, bad input
    Case("spawn-returns-awaitable", t_spawn_returns_awaitable, TypeError, "sleep(10)"),
    Case("spawn-async-generator", t_spawn_async_generator, TypeError, "'_agen_body'"),
    Case(
        "spawn-blocking-async-function",
        t_spawn_blocking_async_function,
        TypeError,
        "'async_callback'",
    ),
    Case(
        "spawn-blocking-returns-coroutine",
        t_spawn_blocking_returns_coroutine,
        TypeError,
        "spawn_blocking()",
    ),
    Case("asyncop-under-asyncio", t_asyncop_awaitable_under_asyncio, TypeError, "sleep(1)"),
    Case("asyncio-future-in-task", t_asyncio_future_in_asyncop_task, TypeError, "Future"),
    Case("asyncio-sleep-in-task", t_asyncio_sleep_in_asyncop_task, TypeError, "asyncio.sleep()"),
    Case("clock-start-type", t_clock_start_type, TypeError, "VirtualClock(start=...)"),
    Case("clock-start-nan", t_clock_start_nan, ValueError, "VirtualClock(start=...)"),
    Case("waker-new-not-operation", t_waker_new_not_operation, TypeError, "NoneType"),
    Case(
        "waker-new-cancellation-not-event",
        t_waker_new_cancellation_not_event,
        TypeError,
        "'cancellation'",
    ),
    Case("waker-new-timeout-type", t_waker_new_timeout_type, TypeError, "waker_new(timeout=...)"),
    Case("waker-new-timeout-nan", t_waker_new_timeout_nan, ValueError, "waker_new(timeout=...)"),
    Case(
        "resume-when-callback-not-callable",
        t_resume_when_callback_not_callable,
        TypeError,
        "'callback'",
    ),
    Case("recv-not-socket", t_recv_not_socket, TypeError, "NoneType"),
    Case("recv-count-type", t_recv_count_type, TypeError, "'n'"),
    Case("recv-count-zero", t_recv_count_zero, ValueError, "n=0"),
    Case("send-all-text", t_send_all_text, TypeError, "'data'"),
    Case("connect-host-type", t_connect_host_type, TypeError, "'host'"),
    Case("connect-port-type", t_connect_port_type, TypeError, "'port'"),
    Case("connect-port-range", t_connect_port_range, ValueError, "70000"),
]

CASES += [
    # processes and their pipes: the pipes of a process are the socket streams' implementation: the
    # same errors as the net cases, named after the pipe.
    Case("pipe-closed", t_pipe_closed, ClosedResourceError, "stdout of"),
    Case("pipe-receive-write-end", t_pipe_receive_on_write_end, RuntimeError, "stdin of"),
    Case("pipe-send-read-end", t_pipe_send_on_read_end, RuntimeError, "stdout of"),
    Case("pipe-busy", t_pipe_busy, BusyResourceError, "stdout of"),
    Case("pipe-max-bytes", t_pipe_max_bytes, ValueError, "got 0"),
    Case("pipe-exactly-negative", t_pipe_exactly_negative, ValueError, "receive_exactly(-1)"),
    Case("pipe-empty-delimiter", t_pipe_empty_delimiter, ValueError, "receive_until()"),
    Case("pipe-exactly-eof", t_pipe_exactly_eof, IncompleteRead, "2 of the 5", "outcome"),
    Case("pipe-until-eof", t_pipe_until_eof, IncompleteRead, "b'\\n'", "outcome"),
    Case("pipe-until-limit", t_pipe_until_limit, DelimiterNotFound, "max_bytes=4", "outcome"),
    Case("pipe-broken", t_pipe_broken, BrokenResourceError, "stdin of", "outcome"),
    Case("process-string-command", t_process_string_command, TypeError, "'ls -l'"),
    Case("process-list-with-shell", t_process_list_with_shell, TypeError, "list command"),
    Case("process-command-type", t_process_command_type, TypeError, "int"),
    Case("process-empty-command", t_process_empty_command, ValueError, "open_process()"),
    Case("process-stdout-stdout", t_process_stdout_to_stdout, ValueError, "stdout=STDOUT"),
    Case("process-input-text", t_process_input_text, TypeError, "str"),
    Case("process-input-and-stdin", t_process_input_and_stdin, ValueError, "run_process()"),
    Case("process-kill-grace-type", t_process_kill_grace_type, TypeError, "kill_grace"),
    Case("process-kill-grace-nan", t_process_kill_grace_nan, ValueError, "kill_grace"),
    Case("process-kill-grace-negative", t_process_kill_grace_negative, ValueError, "-1"),
    Case("process-session-type", t_process_session_type, TypeError, "start_new_session"),
    Case("process-group-type", t_process_group_type, TypeError, "process_group"),
    Case("process-group-negative", t_process_group_negative, ValueError, "process_group=-2"),
    Case("process-group-and-session", t_process_group_and_session, ValueError, "process_group=0"),
    Case("process-pass-fds-type", t_process_pass_fds_type, TypeError, "pass_fds"),
    Case("process-pass-fds-item", t_process_pass_fds_item, TypeError, "pass_fds"),
    Case("process-pass-fds-negative", t_process_pass_fds_negative, ValueError, "descriptor -1"),
    Case("process-user-type", t_process_user_type, TypeError, "user"),
    Case("process-user-negative", t_process_user_negative, ValueError, "user -1"),
    Case("process-group-unknown", t_process_group_unknown, ValueError, "'no-such-group-here'"),
    Case("process-extra-groups-type", t_process_extra_groups_type, TypeError, "extra_groups"),
    Case("process-umask-type", t_process_umask_type, TypeError, "umask"),
    Case("process-umask-range", t_process_umask_range, ValueError, "umask=0o1000"),
    # signals
    Case("signals-off-main-thread", t_signals_off_main_thread, RuntimeError, "Thread-"),
    Case("at-shutdown-not-callable", t_at_shutdown_not_callable, TypeError, "'errors_rt'"),
    Case("at-shutdown-late", t_at_shutdown_late, RuntimeError, "'late_rt'"),
    Case("instrument-without-hooks", t_instrument_without_hooks, TypeError, "'errors_rt'"),
    Case("instrument-class", t_instrument_class, TypeError, "_Listener()"),
    Case(
        "instrument-with-trio-names",
        t_instrument_with_trio_names,
        TypeError,
        "before_task_step is step_started, task_exited is ended",
    ),
    Case("instrument-added-twice", t_instrument_added_twice, ValueError, "'errors_rt'"),
    Case("instrument-not-added", t_instrument_not_added, ValueError, "'errors_rt'"),
    Case(
        "instrument-after-shutdown",
        t_instrument_after_shutdown,
        RuntimeError,
        "'closed_rt_instrument'",
    ),
    Case("otel-after-shutdown", t_otel_after_shutdown, RuntimeError, "'closed_rt_otel'"),
    Case("anyio-process-max-bytes", t_anyio_process_max_bytes, ValueError, "max_bytes"),
    Case("anyio-process-extra-keyword", t_anyio_process_extra_keyword, TypeError, "close_fds"),
    Case("anyio-process-windows-only", t_anyio_process_windows_only, ValueError, "creationflags"),
    Case(
        "main-call-interrupted",
        t_main_call_interrupted,
        RuntimeError,
        "main thread",
        kind="outcome",
        public=False,
    ),
    Case("signals-not-open", t_signals_not_open, RuntimeError, "SIGUSR1"),
    Case("signals-entered-twice", t_signals_entered_twice, RuntimeError, "SIGUSR1"),
    Case("signals-busy", t_signals_busy, BusyResourceError, "SIGUSR1"),
    Case("signals-none", t_signals_none, TypeError, "open_signal_receiver()"),
    Case("signals-not-a-number", t_signals_not_a_number, TypeError, "'SIGTERM'"),
    Case("signals-unknown-number", t_signals_unknown_number, ValueError, "10000"),
    Case("signals-uncatchable", t_signals_uncatchable, ValueError, "SIGKILL"),
    Case("current-operation-required", t_current_operation_required, RuntimeError, "require"),
    Case("limiter-timeout-type", t_limiter_timeout_type, TypeError, "str"),
    Case("condition-timeout-nan", t_condition_timeout_nan, ValueError, "Condition.wait"),
    Case("anyio-extra-missing", t_anyio_extra_missing, ImportError, "asyncop[anyio]"),
    Case("plugin-never-yields", t_plugin_fixture_never_yields, RuntimeError, "'never_yields'"),
    Case("plugin-yields-twice", t_plugin_fixture_yields_twice, RuntimeError, "'yields_twice'"),
    Case(
        "plugin-no-runtime",
        t_plugin_call_without_runtime,
        RuntimeError,
        "test_lonely",
        public=False,
    ),
    Case(
        "plugin-wide-fixture",
        t_plugin_wide_async_fixture,
        pytest.UsageError,
        "'shared'",
        public=False,
    ),
]

REFUSED_PORT = free_port()
# The network's cases live beside its tests.
CASES += [Case(*row) for row in NET_CASES]
# So do the asyncio bridge's, and those of anyio's networking on asyncop.
CASES += [Case(*row) for row in BRIDGE_CASES]
CASES += [Case(*row) for row in ANYIO_NET_CASES]
CASES += [Case(*row) for row in CONSOLE_CASES]
# A name asyncop spells otherwise than trio, anyio or asyncio, and any other
# missing name, which keeps Python's own message.
CASES += [
    Case(
        "peer-name",
        lambda c: caught(getattr, asyncop, "open_nursery"),
        AttributeError,
        "'open_nursery'",
    ),
    Case(
        "missing-name",
        lambda c: caught(getattr, asyncop, "nothing_here"),
        AttributeError,
        "'nothing_here'",
        "outcome",
    ),
]


def t_token_wait_in_coroutine(c: Ctx) -> BaseException:
    async def waits_on_a_token() -> None:
        me = asyncop.current_operation(require=True)
        me.token.wait(0.1)

    return failure_of(c.rt, waits_on_a_token)


def t_run_a_coroutine_object(c: Ctx) -> BaseException:
    async def main() -> None:
        pass

    return caught(c.rt.run, main())


def t_receive_on_an_end_closed_under_it(c: Ctx) -> BaseException:
    channel: asyncop.Channel[int] = asyncop.Channel()
    receiver = channel.receiver()

    async def close_soon() -> None:
        await wait_all_blocked()
        receiver.close()

    async def main() -> BaseException:
        async with asyncop.scope() as s:
            s.spawn(close_soon)
            try:
                await receiver.recv_async()
            except ClosedResourceError as exc:
                return exc
        raise AssertionError("the receive was not woken")

    error: BaseException = c.vrt.run(main)
    return error


CASES += [
    Case(
        "receive-on-closed-end",
        t_receive_on_an_end_closed_under_it,
        ClosedResourceError,
        "receiver end",
    ),
    Case("token-wait-in-coroutine", t_token_wait_in_coroutine, RuntimeError, "CancelToken.wait()"),
    Case("run-coroutine-object", t_run_a_coroutine_object, TypeError, "main()"),
]


def t_clock_io_grace_type(c: Ctx) -> BaseException:
    return caught(VirtualClock, io_grace="0.1")


def t_clock_io_grace_value(c: Ctx) -> BaseException:
    return caught(VirtualClock, io_grace=0)


def t_clock_io_grace_without_autojump(c: Ctx) -> BaseException:
    return caught(VirtualClock, autojump=False, io_grace=0.1)


def t_move_on_sync_with_in_coroutine(c: Ctx) -> BaseException:
    async def main() -> None:
        with asyncop.move_on_after(5):
            pass  # pragma: no cover

    return failure_of(c.vrt, main)


def t_fail_after_entered_twice(c: Ctx) -> BaseException:
    async def main() -> None:
        cs = asyncop.fail_after(5)
        async with cs:
            pass
        async with cs:
            pass  # pragma: no cover

    return failure_of(c.vrt, main)


def t_move_on_cancel_before_entry(c: Ctx) -> BaseException:
    async def main() -> None:
        asyncop.move_on_after(5).cancel()

    return failure_of(c.vrt, main)


def t_fail_after_expired(c: Ctx) -> BaseException:
    async def main() -> None:
        async with asyncop.fail_after(1):
            await asyncop.sleep_forever()

    return failure_of(c.vrt, main)


CASES += [
    Case("clock-io-grace-type", t_clock_io_grace_type, TypeError, "VirtualClock(io_grace=...)"),
    Case("clock-io-grace-value", t_clock_io_grace_value, ValueError, "VirtualClock(io_grace=...)"),
    Case(
        "clock-io-grace-no-autojump",
        t_clock_io_grace_without_autojump,
        ValueError,
        "VirtualClock(io_grace=...)",
    ),
    Case("move-on-sync-with", t_move_on_sync_with_in_coroutine, RuntimeError, "move_on_after(5)"),
    Case("fail-after-twice", t_fail_after_entered_twice, RuntimeError, "fail_after(5)"),
    Case("move-on-cancel-early", t_move_on_cancel_before_entry, RuntimeError, "move_on_after(5)"),
    Case("fail-after-expired", t_fail_after_expired, TimeoutError, "'fail_after(1)'", "outcome"),
]


def fetch_page(page: int, *, verbose: bool = False) -> str:
    return f"page {page}"


def t_spawn_keyword_argument(c: Ctx) -> BaseException:
    return caught(c.rt.spawn, fetch_page, 1, verbose=True)


def t_spawn_an_awaitable(c: Ctx) -> BaseException:
    return caught(c.rt.spawn, asyncop.sleep(7))


def t_notify_type(c: Ctx) -> BaseException:
    cond = asyncop.Condition()
    with cond:
        return caught(cond.notify, 1.5)


def t_notify_negative(c: Ctx) -> BaseException:
    cond = asyncop.Condition()
    with cond:
        return caught(cond.notify, -1)


CASES += [
    Case("spawn-keyword-argument", t_spawn_keyword_argument, TypeError, "functools.partial"),
    Case("spawn-an-awaitable", t_spawn_an_awaitable, TypeError, "sleep(7)"),
    Case("condition-notify-type", t_notify_type, TypeError, "float"),
    Case("condition-notify-negative", t_notify_negative, ValueError, "notify(-1)"),
]

# -- the anyio backend -------------------------------------------------------------


def _anyio_run(c: Ctx, main: Callable[[], Any]) -> BaseException:
    """What ``main`` raises when run on the asyncop backend, on ``c.vrt``."""
    import anyio

    return caught(anyio.run, main, backend="asyncop", backend_options={"runtime": c.vrt})


def t_anyio_unknown_option(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        pass  # pragma: no cover

    return caught(anyio.run, main, backend="asyncop", backend_options={"wokers": 2})


def t_anyio_runtime_option_type(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        pass  # pragma: no cover

    return caught(anyio.run, main, backend="asyncop", backend_options={"runtime": "rt"})


def t_anyio_runtime_and_options(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        pass  # pragma: no cover

    options = {"runtime": c.vrt, "workers": 2}
    return caught(anyio.run, main, backend="asyncop", backend_options=options)


def t_anyio_current_task_outside(c: Ctx) -> BaseException:
    from asyncop._anyio import AsyncopBackend

    return caught(AsyncopBackend.get_current_task)


def t_anyio_cancel_scope_outside(c: Ctx) -> BaseException:
    from asyncop._anyio._tasks import CancelScope

    def enter() -> None:
        with CancelScope():
            pass  # pragma: no cover

    return caught(enter)


def t_anyio_cancel_scope_twice(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        scope = anyio.CancelScope()
        with scope:
            pass
        with scope:
            pass  # pragma: no cover

    return _anyio_run(c, main)


def t_anyio_cancel_scope_exit_unentered(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        anyio.CancelScope().__exit__(None, None, None)

    return _anyio_run(c, main)


def t_anyio_cancel_scope_other_task(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        scope = anyio.CancelScope()
        scope.__enter__()

        async def other() -> None:
            scope.__exit__(None, None, None)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(other)
        finally:
            scope.__exit__(None, None, None)

    error = _anyio_run(c, main)
    assert isinstance(error, ExceptionGroup)
    return error.exceptions[0]


def t_anyio_cancel_reason(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        anyio.CancelScope().cancel(42)  # type: ignore[arg-type]

    return _anyio_run(c, main)


def t_anyio_deadline_nan(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        anyio.CancelScope().deadline = math.nan

    return _anyio_run(c, main)


def t_anyio_shield_type(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        anyio.CancelScope().shield = 1  # type: ignore[assignment]

    return _anyio_run(c, main)


def t_anyio_group_scope_entered(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            with tg.cancel_scope:
                pass  # pragma: no cover

    error = _anyio_run(c, main)
    assert isinstance(error, ExceptionGroup)
    return error.exceptions[0]


def t_anyio_group_scope_left(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.cancel_scope.__exit__(None, None, None)

    error = _anyio_run(c, main)
    assert isinstance(error, ExceptionGroup)
    return error.exceptions[0]


def t_anyio_started_twice(c: Ctx) -> BaseException:
    import anyio

    async def twice(*, task_status: Any) -> None:
        task_status.started()
        task_status.started()

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(twice)

    error = _anyio_run(c, main)
    assert isinstance(error, ExceptionGroup)
    return error.exceptions[0]


def t_anyio_started_after_end(c: Ctx) -> BaseException:
    import anyio

    kept: list[Any] = []

    async def keeps_its_status(*, task_status: Any) -> None:
        kept.append(task_status)
        raise ValueError("ends before it is ready")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            with contextlib.suppress(ValueError):
                await tg.start(keeps_its_status)
        kept[0].started()

    return _anyio_run(c, main)


def t_anyio_group_not_entered(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        anyio.create_task_group().cancel_scope.cancel()

    return _anyio_run(c, main)


def t_anyio_group_entered_twice(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        tg = anyio.create_task_group()
        async with tg:
            pass
        async with tg:
            pass  # pragma: no cover

    return _anyio_run(c, main)


def t_anyio_group_inactive(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            pass
        tg.start_soon(anyio.sleep, 0)

    return _anyio_run(c, main)


def t_anyio_create_task_not_coro(c: Ctx) -> BaseException:
    import anyio

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.create_task(42)  # type: ignore[arg-type]

    error = _anyio_run(c, main)
    assert isinstance(error, ExceptionGroup)
    return error.exceptions[0]


def t_anyio_never_started(c: Ctx) -> BaseException:
    import anyio

    async def never(*, task_status: Any) -> None:
        pass

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(never)

    error = _anyio_run(c, main)
    assert isinstance(error, ExceptionGroup)
    return error.exceptions[0]


def t_anyio_fixture_did_not_stop(c: Ctx) -> BaseException:
    from asyncop._anyio._testing import TestRunner

    async def fixture() -> Any:
        yield 1
        yield 2

    with TestRunner(runtime=c.vrt) as runner:
        values = runner.run_asyncgen_fixture(fixture, {})
        next(iter(values))
        return caught(lambda: list(values))


def t_leave_in_task_unentered(c: Ctx) -> BaseException:
    async def main() -> None:
        asyncop.lowlevel.leave_in_task(asyncop.scope(), None)

    return failure_of(c.vrt, main)


CASES += [
    Case("anyio-unknown-option", t_anyio_unknown_option, TypeError, "'wokers'"),
    Case("anyio-runtime-type", t_anyio_runtime_option_type, TypeError, "runtime="),
    Case("anyio-runtime-and-options", t_anyio_runtime_and_options, TypeError, "runtime="),
    Case("anyio-current-task", t_anyio_current_task_outside, RuntimeError, "get_current_task"),
    Case("anyio-scope-outside", t_anyio_cancel_scope_outside, RuntimeError, "CancelScope"),
    Case("anyio-scope-twice", t_anyio_cancel_scope_twice, RuntimeError, "CancelScope"),
    Case("anyio-scope-unentered", t_anyio_cancel_scope_exit_unentered, RuntimeError, "CancelScope"),
    Case("anyio-scope-other-task", t_anyio_cancel_scope_other_task, RuntimeError, "cancel scope"),
    Case("anyio-cancel-reason", t_anyio_cancel_reason, TypeError, "CancelScope.cancel()"),
    Case("anyio-deadline-nan", t_anyio_deadline_nan, ValueError, "CancelScope"),
    Case("anyio-shield-type", t_anyio_shield_type, TypeError, "CancelScope.shield"),
    Case("anyio-group-scope-enter", t_anyio_group_scope_entered, RuntimeError, "cancel_scope"),
    Case("anyio-group-scope-exit", t_anyio_group_scope_left, RuntimeError, "cancel_scope"),
    Case("anyio-started-twice", t_anyio_started_twice, RuntimeError, "'started'"),
    Case("anyio-started-after-end", t_anyio_started_after_end, RuntimeError, "task ended"),
    Case("anyio-group-unentered", t_anyio_group_not_entered, RuntimeError, "task group"),
    Case("anyio-group-twice", t_anyio_group_entered_twice, RuntimeError, "TaskGroup"),
    Case("anyio-group-inactive", t_anyio_group_inactive, RuntimeError, "task group"),
    Case("anyio-create-task", t_anyio_create_task_not_coro, TypeError, "int"),
    Case("anyio-never-started", t_anyio_never_started, RuntimeError, "task_status.started()"),
    Case("anyio-fixture-stop", t_anyio_fixture_did_not_stop, RuntimeError, "fixture"),
    Case("leave-in-task-unentered", t_leave_in_task_unentered, RuntimeError, "enter_in_task"),
]

# -- non-blocking acquires, callback hooks, and the anyio backend's primitives and threads


def t_lock_nowait_held(c: Ctx) -> BaseException:
    lock = Lock("busy_lock")
    assert lock.acquire(1)
    try:
        thread, box = in_thread(lock.acquire_nowait)
        thread.join(5)
        return box["error"]
    finally:
        lock.release()


def t_semaphore_nowait_empty(c: Ctx) -> BaseException:
    return caught(Semaphore(0).acquire_nowait)


def t_limiter_nowait_empty(c: Ctx) -> BaseException:
    return caught(asyncop.CapacityLimiter(0).acquire_on_behalf_of_nowait, "late_borrower")


def t_callback_hook_type(c: Ctx) -> BaseException:
    return caught(lowlevel.add_callback_hook, 42)


def on_anyio(c: Ctx, main: Callable[[], Any]) -> BaseException:
    """Run ``main`` with anyio on the ``"asyncop"`` backend; it returns the error it caught."""
    error: BaseException = anyio.run(main, backend="asyncop", backend_options={"runtime": c.rt})
    return error


def t_anyio_lock_reacquired(c: Ctx) -> BaseException:
    async def main() -> BaseException:
        lock = anyio.Lock()
        await lock.acquire()
        try:
            await lock.acquire()
        except RuntimeError as exc:
            return exc
        finally:
            lock.release()
        raise AssertionError("re-acquired a held lock")

    return on_anyio(c, main)


def t_anyio_limiter_type(c: Ctx) -> BaseException:
    async def main() -> BaseException:
        return caught(anyio.CapacityLimiter, 1.5)

    return on_anyio(c, main)


def t_anyio_limiter_negative(c: Ctx) -> BaseException:
    async def main() -> BaseException:
        return caught(anyio.CapacityLimiter, -1)

    return on_anyio(c, main)


def t_anyio_limiter_acquire_in_thread(c: Ctx) -> BaseException:
    async def main() -> BaseException:
        limiter = anyio.CapacityLimiter(1)
        return await anyio.to_thread.run_sync(caught, limiter.acquire_nowait)

    return on_anyio(c, main)


def t_anyio_thread_limiter_type(c: Ctx) -> BaseException:
    async def main() -> BaseException:
        try:
            await anyio.to_thread.run_sync(noop, limiter=3)  # type: ignore[arg-type]
        except TypeError as exc:
            return exc
        raise AssertionError("an int was taken for a limiter")

    return on_anyio(c, main)


async def later_work() -> None:
    return None


def t_anyio_to_thread_coroutine(c: Ctx) -> BaseException:
    async def main() -> BaseException:
        try:
            await anyio.to_thread.run_sync(later_work)  # type: ignore[arg-type]
        except TypeError as exc:
            return exc
        raise AssertionError("an async function ran in a thread")

    return on_anyio(c, main)


def t_anyio_from_thread_run_sync_coroutine(c: Ctx) -> BaseException:
    async def main() -> BaseException:
        return await anyio.to_thread.run_sync(caught, anyio.from_thread.run_sync, later_work)

    return on_anyio(c, main)


def t_anyio_from_thread_in_task(c: Ctx) -> BaseException:
    async def main() -> BaseException:
        return caught(anyio.from_thread.run_sync, noop, token=anyio.lowlevel.current_token())

    return on_anyio(c, main)


def t_anyio_token_type(c: Ctx) -> BaseException:
    async def main() -> anyio.lowlevel.EventLoopToken:
        return anyio.lowlevel.current_token()

    token = anyio.run(main, backend="asyncop", backend_options={"runtime": c.rt})
    forged = dataclasses.replace(token, native_token="not a runtime")
    return caught(anyio.from_thread.run_sync, noop, token=forged)


CASES += [
    Case("lock-nowait-held", t_lock_nowait_held, WouldBlock, "'busy_lock'", "outcome"),
    Case("semaphore-nowait-empty", t_semaphore_nowait_empty, WouldBlock, "semaphore", "outcome"),
    Case("limiter-nowait-empty", t_limiter_nowait_empty, WouldBlock, "0/0 borrowed", "outcome"),
    Case("callback-hook-type", t_callback_hook_type, TypeError, "int"),
    Case("anyio-lock-reacquired", t_anyio_lock_reacquired, RuntimeError, "already held Lock"),
    Case("anyio-limiter-type", t_anyio_limiter_type, TypeError, "float"),
    Case("anyio-limiter-negative", t_anyio_limiter_negative, ValueError, "got -1"),
    Case(
        "anyio-limiter-acquire-in-thread",
        t_anyio_limiter_acquire_in_thread,
        RuntimeError,
        "CapacityLimiter.acquire()",
    ),
    Case("anyio-thread-limiter-type", t_anyio_thread_limiter_type, TypeError, "int"),
    Case("anyio-to-thread-coroutine", t_anyio_to_thread_coroutine, TypeError, "later_work'"),
    Case(
        "anyio-from-thread-run-sync-coroutine",
        t_anyio_from_thread_run_sync_coroutine,
        TypeError,
        "later_work'",
    ),
    Case("anyio-from-thread-in-task", t_anyio_from_thread_in_task, RuntimeError, "run_sync()"),
    Case("anyio-token-type", t_anyio_token_type, TypeError, "str"),
]


# -- cancel with a grace --------------------------------------------------------------


def t_cancel_grace_type(c: Ctx) -> BaseException:
    op = c.rt.create(noop, name="graced")
    try:
        return caught(op.cancel, grace="5")
    finally:
        op.cancel()


def t_cancel_grace_negative(c: Ctx) -> BaseException:
    op = c.rt.create(noop, name="graced")
    try:
        return caught(op.cancel, grace=-1)
    finally:
        op.cancel()


def t_stop_requested_outside(c: Ctx) -> BaseException:
    return caught(asyncop.stop_requested)


def t_shutdown_grace_without_cancel(c: Ctx) -> BaseException:
    return caught(c.rt.shutdown, cancel=False, grace=5)


CASES += [
    Case("cancel-grace-type", t_cancel_grace_type, TypeError, "'graced'"),
    Case("cancel-grace-negative", t_cancel_grace_negative, ValueError, "'graced'"),
    Case("stop-requested-outside", t_stop_requested_outside, RuntimeError, "stop_requested()"),
    Case(
        "shutdown-grace-without-cancel",
        t_shutdown_grace_without_cancel,
        ValueError,
        "'errors_rt'",
    ),
]


# -- deadlocks ------------------------------------------------------------------


def t_deadlock_mode_type(c: Ctx) -> BaseException:
    return caught(asyncop.Runtime, 1, deadlock=True)


def t_deadlock_mode_unknown(c: Ctx) -> BaseException:
    return caught(asyncop.Runtime, 1, deadlock="loud")


def t_deadlock_after_type(c: Ctx) -> BaseException:
    return caught(asyncop.Runtime, 1, deadlock_after="1")


def t_deadlock_after_negative(c: Ctx) -> BaseException:
    return caught(asyncop.Runtime, 1, deadlock_after=-1)


def t_primitive_name_type(c: Ctx) -> BaseException:
    return caught(Event, name=3)


def t_lock_cycle(c: Ctx) -> BaseException:
    first, second = Lock("cycle_a"), Lock("cycle_b")
    assert second.acquire(1)
    try:

        def holds_first_then_waits_for_second() -> None:
            with first:
                assert second.acquire(5)
                second.release()

        thread, box = in_thread(holds_first_then_waits_for_second)
        deadline = time.monotonic() + 5
        while second.statistics().tasks_waiting == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        return caught(first.acquire, 1)
    finally:
        second.release()
        thread.join(5)
        assert "error" not in box, box


def t_deadlock_stuck(c: Ctx) -> BaseException:
    rt = asyncop.Runtime(1, name="stuck_rt", deadlock="raise", clock=VirtualClock(autojump=True))
    never_set = Event(name="never_set")

    async def waits_for_nobody() -> None:
        await never_set.wait_async()

    try:
        return caught(rt.run, waits_for_nobody)
    finally:
        rt.shutdown(timeout=5)


CASES += [
    Case("deadlock-mode-type", t_deadlock_mode_type, TypeError, "bool"),
    Case("deadlock-mode-unknown", t_deadlock_mode_unknown, ValueError, "'loud'"),
    Case("deadlock-after-type", t_deadlock_after_type, TypeError, "str"),
    Case("deadlock-after-negative", t_deadlock_after_negative, ValueError, "=-1"),
    Case("primitive-name-type", t_primitive_name_type, TypeError, "Event(name=...)"),
    Case("lock-cycle", t_lock_cycle, asyncop.DeadlockError, "'cycle_a'"),
    Case("deadlock-stuck", t_deadlock_stuck, asyncop.DeadlockError, "'stuck_rt'", "outcome"),
]


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
    assert uncovered == [], f"raise sites no case triggers (add a case to CASES): {uncovered}"


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
        assert rt.dump().splitlines()[0] == "refusing_rt: no live operations"
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


# ----------------------------------------------------------------------
# A blocking call in a coroutine names what was called, and its async form
# ----------------------------------------------------------------------


def _hold(manager: Any) -> None:
    with manager:
        pass


def _me() -> asyncop.AsyncOperation:
    return current_operation(require=True)


# (the call, the name its refusal must give, the async form it must suggest)
BLOCKING_IN_A_TASK: dict[str, tuple[Callable[[], object], str, str]] = {
    "Channel.send": (
        lambda: Channel[int](1).send(1),
        "Channel.send()",
        "await channel.send_async(item)",
    ),
    "Channel.recv": (
        lambda: Channel[int](1).recv(),
        "Channel.recv()",
        "await channel.recv_async()",
    ),
    "ChannelSender.send": (
        lambda: Channel[int](1).sender().send(1),
        "ChannelSender.send()",
        "await sender.send_async(item)",
    ),
    "ChannelReceiver.recv": (
        lambda: Channel[int](1).receiver().recv(),
        "ChannelReceiver.recv()",
        "await receiver.recv_async()",
    ),
    "for-over-Channel": (
        lambda: list(Channel[int](1)),
        "'for' loop over Channel",
        "async for item in channel",
    ),
    "for-over-ChannelReceiver": (
        lambda: list(Channel[int](1).receiver()),
        "'for' loop over ChannelReceiver",
        "async for item in receiver",
    ),
    "Lock.acquire": (lambda: Lock().acquire(), "Lock.acquire()", "await lock.lock_async()"),
    "with-Lock": (lambda: _hold(Lock()), "Lock.acquire()", "async with lock"),
    "Semaphore.acquire": (
        lambda: Semaphore(1).acquire(),
        "Semaphore.acquire()",
        "await sem.acquire_async()",
    ),
    "with-Semaphore": (lambda: _hold(Semaphore(1)), "Semaphore.acquire()", "async with sem"),
    "Event.wait": (lambda: Event().wait(), "Event.wait()", "await event.wait_async()"),
    "Condition.wait": (
        lambda: asyncop.Condition().wait(),
        "Condition.wait()",
        "await cond.wait_async()",
    ),
    "Condition.acquire": (
        lambda: asyncop.Condition().acquire(),
        "Condition.acquire()",
        "async with cond",
    ),
    "with-Condition": (lambda: _hold(asyncop.Condition()), "'with cond:'", "async with cond"),
    "CapacityLimiter.acquire": (
        lambda: asyncop.CapacityLimiter(1).acquire(),
        "CapacityLimiter.acquire()",
        "await limiter.acquire_async()",
    ),
    "with-CapacityLimiter": (
        lambda: _hold(asyncop.CapacityLimiter(1)),
        "CapacityLimiter.acquire()",
        "async with limiter",
    ),
    "CapacityLimiter.acquire_on_behalf_of": (
        lambda: asyncop.CapacityLimiter(1).acquire_on_behalf_of("job"),
        "CapacityLimiter.acquire_on_behalf_of()",
        "await limiter.acquire_on_behalf_of_async(borrower)",
    ),
    "op.wait": (lambda: _me().wait(), "wait() on operation", "await op"),
    "token.wait": (lambda: _me().token.wait(), "CancelToken.wait()", "await asyncop.sleep()"),
    "Runtime.run": (lambda: _me().runtime.run(noop), ".run()", "await runtime.spawn(fn)"),
    "with-scope": (lambda: _hold(_me().runtime.scope()), "with scope()", "async with"),
}


@pytest.mark.parametrize("call", sorted(BLOCKING_IN_A_TASK))
def test_a_blocking_call_in_a_coroutine_names_what_was_called_and_its_async_form(
    ctx: Ctx, call: str
) -> None:
    blocking, name, instead = BLOCKING_IN_A_TASK[call]

    async def main() -> BaseException:
        return caught(blocking)

    exc = ctx.vrt.run(main)
    assert isinstance(exc, RuntimeError), repr(exc)
    message = str(exc)
    assert name in message, message
    assert instead in message, message
    assert suggests_what_to_do(message) and is_one_sentence(message), message


# (how to make the primitive, named or not; how it is shown; the refused call)
PRIMITIVE_REFUSALS: dict[str, tuple[Callable[[str | None], Any], str, Callable[[Any], object]]] = {
    "Lock.acquire": (lambda name: Lock(name), "lock", lambda p: p.acquire()),
    "with-Lock": (lambda name: Lock(name), "lock", _hold),
    "Semaphore.acquire": (lambda name: Semaphore(1, name=name), "semaphore", lambda p: p.acquire()),
    "with-Semaphore": (lambda name: Semaphore(1, name=name), "semaphore", _hold),
    "Event.wait": (lambda name: Event(name=name), "event", lambda p: p.wait()),
    "Condition.acquire": (
        lambda name: asyncop.Condition(name=name),
        "condition",
        lambda p: p.acquire(),
    ),
    "with-Condition": (lambda name: asyncop.Condition(name=name), "condition", _hold),
    "Condition.wait": (lambda name: asyncop.Condition(name=name), "condition", lambda p: p.wait()),
    "Condition.notify": (
        lambda name: asyncop.Condition(name=name),
        "condition",
        lambda p: p.notify(),
    ),
}


@pytest.mark.parametrize("call", sorted(PRIMITIVE_REFUSALS))
@pytest.mark.parametrize("name", [None, "jobs"])
def test_a_primitive_refusing_a_call_names_the_primitive_by_its_name_or_its_place(
    ctx: Ctx, call: str, name: str | None
) -> None:
    make, kind, refused = PRIMITIVE_REFUSALS[call]

    async def main() -> BaseException:
        primitive = make(name)
        return caught(lambda: refused(primitive))

    exc = ctx.vrt.run(main)
    assert isinstance(exc, RuntimeError), repr(exc)
    message = str(exc)
    shown = f"{kind} 'jobs'" if name else f"{kind} (made at {__file__}:"
    assert shown in message, message
    assert "None" not in message and "<" not in message, message
    assert suggests_what_to_do(message) and is_one_sentence(message), message


@pytest.mark.parametrize("name", [None, "slots"])
def test_a_semaphore_past_its_bound_or_out_of_permits_is_named(name: str | None) -> None:
    full = Semaphore(1, max_value=1, name=name)
    empty = Semaphore(0, name=name)
    for exc in (caught(full.release), caught(empty.acquire_nowait)):
        assert isinstance(exc, ValueError | WouldBlock), repr(exc)
        message = str(exc)
        shown = "semaphore 'slots'" if name else f"semaphore (made at {__file__}:"
        assert shown in message, message
        assert suggests_what_to_do(message) and is_one_sentence(message), message


# ----------------------------------------------------------------------
# Keyword arguments for the function go through functools.partial
# ----------------------------------------------------------------------


def _anyio_spawn(rt: asyncop.Runtime) -> object:
    pytest.importorskip("anyio")
    import asyncop.anyio

    coroutine = asyncop.anyio.spawn(fetch_page, 1, verbose=True, runtime=rt)  # type: ignore[call-overload]
    return asyncio.run(coroutine)


# Every call that runs fn(*args), given a keyword meant for fn.
KEYWORD_CALLS: dict[str, Callable[[asyncop.Runtime], object]] = {
    "Runtime.spawn": lambda rt: rt.spawn(fetch_page, 1, verbose=True),  # type: ignore[call-overload]
    "Runtime.run": lambda rt: rt.run(fetch_page, 1, verbose=True),  # type: ignore[call-overload]
    "AsyncOperation.spawn": lambda rt: rt.create(noop_callback).spawn(
        fetch_page,
        1,
        verbose=True,  # type: ignore[call-overload]
    ),
    "AsyncOperation.start": lambda rt: rt.create(noop_callback).start(
        fetch_page,
        1,
        verbose=True,  # type: ignore[arg-type]
    ),
    "Scope.start": lambda rt: rt.scope().start(fetch_page, 1, verbose=True),  # type: ignore[arg-type]
    "spawn_blocking": lambda rt: asyncop.spawn_blocking(fetch_page, 1, verbose=True),  # type: ignore[arg-type]
    "anyio.spawn": _anyio_spawn,
}


@pytest.mark.parametrize("call", sorted(KEYWORD_CALLS))
def test_a_keyword_argument_for_the_function_points_to_functools_partial(
    ctx: Ctx, call: str
) -> None:
    exc = caught(KEYWORD_CALLS[call], ctx.rt)
    assert isinstance(exc, TypeError), repr(exc)
    message = str(exc)
    for part in ("verbose=", "fetch_page", "functools.partial(fetch_page, verbose=..."):
        assert part in message, message
    assert suggests_what_to_do(message) and is_one_sentence(message), message
    assert "fetch_page" not in ctx.rt.dump()  # refused before anything was made
