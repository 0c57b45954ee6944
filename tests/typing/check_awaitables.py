"""What a type checker sees for asyncop's awaitables and primitives.

Checked by ``mypy --strict`` and ``pyright`` (``test_typing.py``); never
imported or run.
"""

from __future__ import annotations

import ssl
import subprocess
from typing import Any, NoReturn, assert_type

import asyncop
import asyncop.lowlevel
import asyncop.testing
from asyncop import AsyncOperation, LockGuard, TaskStatus
from asyncop.net import SocketStream, Stream, TLSStream, open_tcp_stream
from asyncop.process import Process, open_process, run_process


async def number() -> int:
    return 1


async def text() -> str:
    return ""


def blocking_read(path: str, size: int) -> bytes:
    return b""


async def ready(port: int, *, task_status: TaskStatus[int] = asyncop.TASK_STATUS_IGNORED) -> None:
    task_status.started(port)


async def plain_waits() -> None:
    assert_type(await asyncop.testing.wait_all_blocked(), None)
    assert_type(await asyncop.sleep(1), None)
    assert_type(await asyncop.sleep_until(10.0), None)
    assert_type(await asyncop.checkpoint(), None)
    assert_type(asyncop.current_time(), float)
    assert_type(await asyncop.spawn_blocking(blocking_read, "f", 10), bytes)
    assert_type(await asyncop.spawn_blocking(blocking_read, "f", 10, abandon=True), bytes)
    limiter = asyncop.CapacityLimiter(2)
    assert_type(await asyncop.spawn_blocking(blocking_read, "f", 1, limiter=limiter), bytes)


async def stopping(a: AsyncOperation[int], rt: asyncop.Runtime) -> None:
    assert_type(a.cancel("deploying", grace=10), None)
    assert_type(a.cancel(grace=0.5), None)
    assert_type(asyncop.async_cancel(a, grace=1), None)
    assert_type(asyncop.stop_requested(), bool)
    assert_type(a.token.stop_requested, bool)
    assert_type(await asyncop.wait_stop_requested(), None)
    index, _ = await asyncop.select(asyncop.wait_stop_requested(), asyncop.sleep(1))
    assert_type(index, int)
    assert_type(rt.shutdown(timeout=5, grace=2), bool)
    async with asyncop.move_on_after(5) as cs:
        cs.cancel(grace=1)


async def operations(a: AsyncOperation[int], b: AsyncOperation[str]) -> None:
    assert_type(await a, int)
    assert_type(await asyncop.timeout(1, a), int)
    assert_type(await asyncop.race(a), AsyncOperation[int])
    assert_type(await asyncop.race(a, b), AsyncOperation[int | str])
    winner = await asyncop.race(a, b, a, b, a)
    assert_type(winner, AsyncOperation[int | str])
    assert_type(await winner, int | str)
    many = [a, a, a, a, a, a]
    assert_type(await asyncop.race(*many), AsyncOperation[Any])


async def selecting(a: AsyncOperation[int], ch: asyncop.Channel[bytes]) -> None:
    assert_type(await asyncop.select(ch.recv_async()), tuple[int, bytes])
    index, value = await asyncop.select(ch.recv_async(), asyncop.sleep(1))
    assert_type(index, int)
    assert_type(value, bytes | None)
    three = await asyncop.select(a, ch.recv_async(), asyncop.sleep(1))
    assert_type(three, tuple[int, int | bytes | None])


async def channels() -> None:
    ch: asyncop.Channel[int] = asyncop.Channel(10)
    assert_type(await ch.send_async(1), None)
    assert_type(await ch.recv_async(), int)
    assert_type(ch.recv(), int)
    tx = ch.sender()
    rx = ch.receiver()
    assert_type(tx, asyncop.ChannelSender[int])
    assert_type(rx, asyncop.ChannelReceiver[int])
    assert_type(tx.clone(), asyncop.ChannelSender[int])
    assert_type(await tx.send_async(2), None)
    assert_type(await rx.recv_async(), int)
    assert_type(rx.clone().recv(), int)
    async for item in ch:
        assert_type(item, int)
    async for received in rx:
        assert_type(received, int)
    for taken in rx:
        assert_type(taken, int)


async def sync_primitives() -> None:
    lock = asyncop.Lock()
    guard = await lock.lock_async()
    assert_type(guard, LockGuard)
    async with lock as held:
        assert_type(held, LockGuard)
    event = asyncop.Event()
    assert_type(await event.wait_async(), None)
    assert_type(event.wait(1), bool)
    semaphore = asyncop.Semaphore(2, max_value=2)
    assert_type(await semaphore.acquire_async(), None)
    condition = asyncop.Condition()
    assert_type(await condition.acquire_async(), LockGuard)
    assert_type(await condition.wait_async(), None)
    async with condition as c:
        assert_type(c, asyncop.Condition)
    limiter = asyncop.CapacityLimiter(3)
    assert_type(await limiter.acquire_async(), None)
    async with limiter as borrowed:
        assert_type(borrowed, asyncop.CapacityLimiter)
    assert_type(limiter.borrowed_tokens, int)


async def starting() -> None:
    async with asyncop.scope() as s:
        # start() gives what the task handed to started(); annotate it.
        port: int = await s.start(ready, 8080)
        assert_type(port, int)
        assert_type(s.spawn(ready, 1), AsyncOperation[None])


async def streams(context: ssl.SSLContext, maybe: ssl.SSLContext | None) -> None:
    plain = await open_tcp_stream("example.com", 80)
    assert_type(plain, SocketStream)
    assert_type(await plain.receive_some(), bytes)
    assert_type(await plain.send_all(b"x"), None)
    secure = await open_tcp_stream("example.com", 443, ssl_context=context)
    assert_type(secure, TLSStream)
    assert_type(await open_tcp_stream("h", 1, ssl_context=maybe), SocketStream | TLSStream)


async def memory_streams() -> None:
    a, b = asyncop.testing.memory_stream_pair()
    assert_type(a, Stream)
    assert_type(await a.receive_some(), bytes)
    assert_type(await b.receive_until(b"\n", 100), bytes)
    assert_type(await b.send_all(b"x"), None)
    async with a:
        async for chunk in a:
            assert_type(chunk, bytes)


async def processes() -> None:
    done = await run_process(["true"])
    assert_type(done, subprocess.CompletedProcess[bytes])
    process = await open_process(["cat"])
    assert_type(process, Process)
    assert_type(await process.wait(), int)
    async with open_process(["cat"]) as p:
        assert_type(p, Process)


async def from_anyio() -> None:
    import asyncop.anyio

    assert_type(await asyncop.anyio.spawn(number), int)
    assert_type(await asyncop.anyio.spawn(blocking_read, "f", 1), bytes)


async def page(url: str, retries: int) -> bytes:
    return b""


async def through_the_asyncio_bridge() -> None:
    import asyncio

    import asyncop.asyncio_bridge

    assert_type(await asyncop.asyncio_bridge.run(page, "u", 1), bytes)
    assert_type(await asyncop.asyncio_bridge.run(asyncio.sleep, 1.0, "done"), str)
    assert_type(asyncop.asyncio_bridge.run_sync(page, "u", 1), bytes)
    assert_type(asyncop.asyncio_bridge.run_sync(number, runtime=asyncop.current_runtime()), int)
    asyncop.Runtime(asyncio_loop_factory=asyncio.new_event_loop)


async def runtime_and_scope() -> None:
    rt = asyncop.current_runtime()
    assert_type(rt, asyncop.Runtime)
    assert_type(await rt.spawn(text), str)


async def deadlines() -> None:
    async with asyncop.move_on_after(5) as cs:
        assert_type(cs, asyncop.TimeoutScope)
        cs.deadline += 1
        assert_type(cs.deadline, float)
    assert_type(cs.cancelled_caught, bool)
    async with asyncop.fail_after(None, shield=True) as failing:
        failing.cancel("enough")
    async with asyncop.move_on_at(asyncop.current_time() + 5), asyncop.fail_at(10.0):
        pass


def sync_deadlines() -> bool:
    with asyncop.move_on_after(1.5) as cs:
        pass
    return cs.cancelled_caught


async def never_returns() -> None:
    assert_type(asyncop.sleep_forever(), asyncop.lowlevel.WaitEvent[NoReturn])
    _index, value = await asyncop.select(asyncop.sleep_forever(), asyncop.sleep(1))
    assert_type(value, None)


async def waits_until_cancelled() -> None:
    assert_type(await asyncop.sleep_forever(), NoReturn)


def grace_clock() -> asyncop.testing.VirtualClock:
    clock = asyncop.testing.VirtualClock(autojump=True, io_grace=0.05)
    assert_type(clock.io_grace, float | None)
    return clock
