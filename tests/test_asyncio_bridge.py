"""asyncop.asyncio_bridge: asyncio code run from asyncop on the runtime's host loop.

The asyncio side runs on a real loop, so the cancellation tests use short
real timeouts and assert generous bounds; the figures they measure are
printed (``pytest -s`` shows them).
"""

from __future__ import annotations

import _thread
import asyncio
import contextvars
import functools
import random
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

import asyncop
import asyncop.asyncio_bridge as bridge
import asyncop.testing

from ._http_server import HttpServer
from .conftest import runtime_threads

pytestmark = pytest.mark.timeout(30)


def host_threads(runtime: asyncop.Runtime) -> list[str]:
    return [t.name for t in runtime_threads(runtime) if t.name.endswith("-asyncio")]


def host_loop(runtime: asyncop.Runtime) -> asyncio.AbstractEventLoop:
    async def current() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    return bridge.run_sync(current, runtime=runtime)


async def add(a: int, b: int) -> int:
    await asyncio.sleep(0.001)
    return a + b


class Parked:
    """An asyncio coroutine function that sleeps until cancelled, and records both ends."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = threading.Event()

    async def __call__(self) -> None:
        self.started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def run_on_host(fn: Any) -> Any:
    """An asyncop task that awaits ``fn()`` run on the host loop."""
    return await bridge.run(fn)


async def reporting_cancel(fn: Any, messages: list[str]) -> None:
    """An asyncop task that awaits ``fn()`` on the host loop and records its ``Cancelled``."""
    try:
        await bridge.run(fn)
    except asyncop.Cancelled as exc:
        messages.append(str(exc))
        raise


# ----------------------------------------------------------------------
# Values, errors, the loop
# ----------------------------------------------------------------------


def test_run_returns_the_value_of_a_coroutine_run_on_the_host_loop_thread(
    runtime: asyncop.Runtime,
) -> None:
    async def where() -> tuple[str, bool]:
        await asyncio.sleep(0)
        return threading.current_thread().name, asyncio.get_running_loop().is_running()

    async def main() -> tuple[int, tuple[str, bool]]:
        return await bridge.run(add, 2, 3), await bridge.run(where)

    assert host_threads(runtime) == []  # started on first use
    value, (thread, running) = runtime.run(main)
    assert value == 5
    assert thread == f"{runtime.name}-asyncio" and running
    assert host_threads(runtime) == [thread]


def test_run_raises_the_coroutines_own_exception_with_its_traceback(
    runtime: asyncop.Runtime,
) -> None:
    raised: list[BaseException] = []

    async def failing_deep_inside() -> None:
        await asyncio.sleep(0)
        error = KeyError("missing")
        raised.append(error)
        raise error

    async def main() -> BaseException:
        try:
            await bridge.run(failing_deep_inside)
        except KeyError as exc:
            return exc
        raise AssertionError("no error")

    error = runtime.run(main)
    assert error is raised[0]
    names = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
    assert names[0] == "main" and names[-1] == "failing_deep_inside"


def test_objects_made_on_the_host_loop_serve_later_calls(runtime: asyncop.Runtime) -> None:
    async def make() -> asyncio.Queue[int]:
        return asyncio.Queue()  # bound to the loop on first use

    async def put(queue: asyncio.Queue[int], item: int) -> None:
        await queue.put(item)

    async def get(queue: asyncio.Queue[int]) -> tuple[int, int]:
        return await queue.get(), id(asyncio.get_running_loop())

    async def main() -> tuple[int, int]:
        queue = await bridge.run(make)
        await bridge.run(put, queue, 7)
        return await bridge.run(get, queue)

    item, loop_id = runtime.run(main)
    assert item == 7
    assert loop_id == id(host_loop(runtime))  # run_sync reaches the same loop


def test_a_wait_does_not_hold_a_worker() -> None:
    # One worker: if the bridge's wait blocked it, the counter could not run.
    with asyncop.Runtime(1, name=f"rt{id(object()):x}") as runtime:
        ticks: list[int] = []

        async def counter() -> None:
            while True:
                ticks.append(1)
                await asyncop.sleep(0.005)

        async def main() -> int:
            async with asyncop.scope() as s:
                s.spawn(counter)
                await bridge.run(asyncio.sleep, 0.2)
                s.cancel()
            return len(ticks)

        assert runtime.run(main) >= 5
    assert runtime_threads(runtime) == []


def test_a_call_in_flight_holds_an_autojumping_virtual_clock(vruntime: asyncop.Runtime) -> None:
    # Work outside the workers: the clock must not jump to the scope's
    # deadline while the asyncio side runs, as it would for an idle runtime.
    async def main() -> tuple[str, float]:
        async with asyncop.fail_after(60):
            value = await bridge.run(asyncio.sleep, 0.05, "done")
        return value, asyncop.current_time()

    value, now = vruntime.run(main)
    assert value == "done" and now < 60


def test_context_variables_are_copied_into_the_coroutine(runtime: asyncop.Runtime) -> None:
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id")

    async def read_then_set() -> str:
        seen = request_id.get("unset")
        request_id.set("changed on the host loop")
        return seen

    async def main() -> tuple[str, str]:
        request_id.set("r-42")
        seen = await bridge.run(read_then_set)
        return seen, request_id.get()

    assert runtime.run(main) == ("r-42", "r-42")


def test_sniffio_names_asyncio_on_the_host_loop_whatever_the_caller_said(
    runtime: asyncop.Runtime,
) -> None:
    sniffio = pytest.importorskip("sniffio")

    async def library() -> str:
        return str(sniffio.current_async_library())

    async def main() -> tuple[str, str]:
        sniffio.current_async_library_cvar.set("asyncop")
        return await bridge.run(library), sniffio.current_async_library()

    assert runtime.run(main) == ("asyncio", "asyncop")


def test_dump_shows_what_a_task_waits_on(runtime: asyncop.Runtime) -> None:
    parked = Parked()
    op = runtime.spawn(run_on_host, parked)
    assert parked.started.wait(10)
    deadline = time.monotonic() + 10
    while "asyncio_bridge.run(" not in runtime.dump() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "waiting on asyncio_bridge.run(Parked" in runtime.dump()
    assert "on the host asyncio loop" in runtime.dump()
    op.cancel()
    assert op.wait(10).state is asyncop.OperationState.CANCELLED


@pytest.mark.parametrize("error", [SystemExit, KeyboardInterrupt])
def test_a_coroutine_raising_systemexit_reaches_its_caller_and_the_loop_goes_on(
    runtime: asyncop.Runtime, error: type[BaseException]
) -> None:
    async def exits() -> None:
        await asyncio.sleep(0)
        raise error(3)

    async def main() -> tuple[str, int]:
        try:
            await bridge.run(exits)
        except error as exc:
            return type(exc).__name__, await bridge.run(add, 1, 1)
        return "nothing raised", 0

    assert runtime.run(main) == (error.__name__, 2)


def test_many_calls_racing_their_timeouts_lose_no_wake(runtime: asyncop.Runtime) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    delays = [(rng.uniform(0, 0.02), rng.uniform(0, 0.02)) for _ in range(300)]
    outcomes: list[str] = []

    async def one(sleep: float, timeout: float) -> None:
        async with asyncop.move_on_after(timeout) as scope:
            await bridge.run(asyncio.sleep, sleep)
        outcomes.append("timed out" if scope.cancelled_caught else "done")

    async def sleeps_forever() -> None:
        await asyncop.sleep_forever()

    async def main() -> None:
        async with asyncop.scope() as s:
            for sleep, timeout in delays:
                s.spawn(one, sleep, timeout)
        # Nothing is left counted as in flight: every other task is blocked.
        async with asyncop.scope() as s:
            s.spawn(sleeps_forever)
            await asyncop.testing.wait_all_blocked()
            s.cancel()

    try:
        runtime.run(main)
    except BaseException:
        print(f"seed: {seed}")
        raise
    assert len(outcomes) == len(delays), f"seed: {seed}"


def test_uvloop_runs_the_host_loop_through_asyncio_loop_factory() -> None:
    uvloop = pytest.importorskip("uvloop")
    with asyncop.Runtime(
        2, name=f"rt{id(object()):x}", asyncio_loop_factory=uvloop.new_event_loop
    ) as runtime:

        async def main() -> int:
            return await bridge.run(add, 20, 22)

        assert runtime.run(main) == 42
        assert isinstance(host_loop(runtime), uvloop.Loop)
    assert runtime_threads(runtime) == []


# ----------------------------------------------------------------------
# Cancellation
# ----------------------------------------------------------------------


def test_a_scope_timeout_cancels_the_asyncio_task_and_waits_for_its_cleanup(
    runtime: asyncop.Runtime,
) -> None:
    log: list[str] = []

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            log.append("asyncio task cancelled")
            await asyncio.sleep(0.05)  # a cleanup that takes a while
            log.append("asyncio cleanup done")
            raise

    async def main() -> tuple[bool, float]:
        async with asyncop.move_on_after(0.05) as scope:
            await bridge.run(slow)
            log.append("not reached")
        log.append("scope left")
        return scope.cancelled_caught, asyncop.current_time() - scope.deadline

    caught, late = runtime.run(main)
    assert caught
    assert log == ["asyncio task cancelled", "asyncio cleanup done", "scope left"]
    print(f"\nscope left {late * 1000:.1f} ms after its deadline (cleanup: 50 ms)")
    assert 0.04 <= late < 1.0


def test_op_cancel_cancels_the_coroutine_and_the_task_ends_cancelled(
    runtime: asyncop.Runtime,
) -> None:
    parked = Parked()
    op = runtime.spawn(run_on_host, parked)
    assert parked.started.wait(10)
    op.cancel("enough")
    result = op.wait(10)
    assert result.state is asyncop.OperationState.CANCELLED
    assert parked.cancelled.is_set()


def test_the_cancelled_await_raises_cancelled_carrying_the_reason(
    runtime: asyncop.Runtime,
) -> None:
    parked = Parked()
    messages: list[str] = []
    op = runtime.spawn(reporting_cancel, parked, messages, name="waiter")
    assert parked.started.wait(10)
    op.cancel("user pressed stop")
    assert op.wait(10).state is asyncop.OperationState.CANCELLED
    assert messages == ["operation 'waiter' was cancelled: user pressed stop"]


def test_a_cancel_that_ends_the_call_before_the_task_parks_carries_the_reason(
    runtime: asyncop.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the GIL off, the host loop can start the coroutine, see it
    # cancelled and end it while the task's worker is still arming the
    # wait: the end then lands before the task parks. Slow the arming down
    # until the call has ended, so that order is certain.
    from asyncop.runtime._asyncio_call import AsyncioCall, CallState

    arm = AsyncioCall._arm

    def slow_arm(self: Any, sub: Any) -> None:
        arm(self, sub)
        deadline = time.monotonic() + 10
        while self.state is not CallState.DONE and time.monotonic() < deadline:
            time.sleep(0.001)

    monkeypatch.setattr(AsyncioCall, "_arm", slow_arm)
    parked = Parked()
    messages: list[str] = []
    op = runtime.spawn(reporting_cancel, parked, messages, name="waiter")
    assert parked.started.wait(10)
    op.cancel("user pressed stop")
    assert op.wait(10).state is asyncop.OperationState.CANCELLED
    assert parked.cancelled.is_set()
    assert messages == ["operation 'waiter' was cancelled: user pressed stop"]


def test_a_value_the_coroutine_returns_despite_the_cancel_is_kept(
    runtime: asyncop.Runtime,
) -> None:
    started = threading.Event()
    log: list[str] = []

    async def stubborn() -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "finished anyway"
        return "not cancelled"

    async def waiter() -> None:
        log.append(await bridge.run(stubborn))
        try:
            await asyncop.checkpoint()
        except asyncop.Cancelled:
            log.append("left at the next await")
            raise

    op = runtime.spawn(waiter)
    assert started.wait(10)
    op.cancel()
    assert op.wait(10).state is asyncop.OperationState.CANCELLED
    assert log == ["finished anyway", "left at the next await"]


def test_a_cancelled_task_does_not_start_the_coroutine(runtime: asyncop.Runtime) -> None:
    ran: list[str] = []

    async def record() -> None:
        ran.append("ran")

    async def main() -> None:
        asyncop.current_operation().cancel()  # type: ignore[union-attr]
        await bridge.run(record)

    op = runtime.spawn(main)
    assert op.wait(10).state is asyncop.OperationState.CANCELLED
    assert ran == []


def test_a_shielded_scope_keeps_an_outer_cancel_away_from_the_call(
    runtime: asyncop.Runtime,
) -> None:
    started = threading.Event()

    async def cleanup() -> str:
        started.set()
        await asyncio.sleep(0.1)
        return "closed"

    results: list[str] = []

    async def waiter() -> None:
        try:
            await asyncop.sleep_forever()
        finally:
            async with asyncop.scope(shield=True):
                results.append(await bridge.run(cleanup))

    op = runtime.spawn(waiter)
    time.sleep(0.05)
    op.cancel()
    assert op.wait(10).state is asyncop.OperationState.CANCELLED
    assert results == ["closed"]


# ----------------------------------------------------------------------
# run_sync
# ----------------------------------------------------------------------


def test_run_sync_from_a_plain_thread(runtime: asyncop.Runtime) -> None:
    results: list[int] = []
    thread = threading.Thread(
        target=lambda: results.append(bridge.run_sync(add, 1, 1, runtime=runtime))
    )
    thread.start()
    thread.join(10)
    assert results == [2]
    assert host_threads(runtime) == [f"{runtime.name}-asyncio"]


def test_run_sync_from_a_sync_callback_uses_its_runtime(runtime: asyncop.Runtime) -> None:
    async def where() -> str:
        return threading.current_thread().name

    def callback() -> tuple[int, str]:
        return bridge.run_sync(add, 2, 2), bridge.run_sync(where)

    assert runtime.run(callback) == (4, f"{runtime.name}-asyncio")


def test_run_sync_from_a_spawn_blocking_thread_uses_its_runtime(runtime: asyncop.Runtime) -> None:
    async def where() -> str:
        return threading.current_thread().name

    async def main() -> str:
        return await asyncop.spawn_blocking(bridge.run_sync, where)

    assert runtime.run(main) == f"{runtime.name}-asyncio"


def test_run_sync_in_a_sync_operation_is_a_cancellation_point(runtime: asyncop.Runtime) -> None:
    started = threading.Event()
    log: list[str] = []

    async def slow() -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0.02)
            log.append("asyncio cleanup done")
            raise

    def callback() -> None:
        try:
            bridge.run_sync(slow)
        except asyncop.Cancelled:
            log.append("run_sync raised Cancelled")
            raise

    op = runtime.spawn(callback)
    assert started.wait(10)
    op.cancel()
    assert op.wait(10).state is asyncop.OperationState.CANCELLED
    assert log == ["asyncio cleanup done", "run_sync raised Cancelled"]


def test_run_sync_in_a_sync_scope_ends_at_the_scopes_timeout(runtime: asyncop.Runtime) -> None:
    parked = Parked()
    began = time.monotonic()
    with pytest.raises(TimeoutError), runtime.scope(timeout=0.05):
        bridge.run_sync(parked)
    assert parked.cancelled.is_set()
    assert time.monotonic() - began < 5


def test_ctrl_c_in_run_sync_cancels_the_coroutine_and_propagates_at_once(
    runtime: asyncop.Runtime,
) -> None:
    parked = Parked()
    timer = threading.Timer(0.1, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            bridge.run_sync(parked, runtime=runtime)
    finally:
        timer.cancel()
    assert parked.cancelled.wait(5)


def test_run_sync_uses_the_default_runtime_from_a_plain_thread() -> None:
    async def where() -> str:
        return threading.current_thread().name

    assert bridge.run_sync(where) == f"{asyncop.default_runtime().name}-asyncio"


# ----------------------------------------------------------------------
# Misuse
# ----------------------------------------------------------------------


def test_run_awaited_on_an_asyncio_loop_says_to_await_the_coroutine_itself() -> None:
    with pytest.raises(RuntimeError, match="awaited on an asyncio loop, not in an asyncop task"):
        asyncio.run(bridge.run(add, 1, 2))


def test_run_refuses_a_coroutine_object_and_closes_it(
    runtime: asyncop.Runtime, recwarn: pytest.WarningsRecorder
) -> None:
    async def main() -> None:
        await bridge.run(add(1, 2))  # type: ignore[arg-type]

    with pytest.raises(TypeError, match=r"write asyncio_bridge.run\(add, arg\) instead of add"):
        runtime.run(main)
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


def test_run_refuses_a_function_that_returns_no_awaitable(runtime: asyncop.Runtime) -> None:
    def blocking() -> int:
        return 5

    async def main() -> None:
        await bridge.run(blocking)  # type: ignore[arg-type]

    with pytest.raises(TypeError, match=r"returned 5, not a coroutine.*spawn_blocking"):
        runtime.run(main)


def test_run_refuses_async_generators_non_callables_and_keywords(
    runtime: asyncop.Runtime,
) -> None:
    async def numbers() -> Any:
        yield 1

    async def main(fn: Any, **keywords: Any) -> None:
        await bridge.run(fn, **keywords)

    with pytest.raises(TypeError, match="async generator function"):
        runtime.run(main, numbers)
    with pytest.raises(TypeError, match="not callable"):
        runtime.run(main, 42)
    with pytest.raises(TypeError, match=r"functools.partial"):
        runtime.run(functools.partial(main, add, a=1))
    with pytest.raises(TypeError, match="asyncop awaitable"):
        runtime.run(main, lambda: asyncop.sleep(0))


def test_asyncio_code_awaited_in_an_asyncop_task_points_to_the_bridge(
    runtime: asyncop.Runtime,
) -> None:
    async def awaits_asyncio() -> None:
        await asyncio.sleep(0.01)

    async def needs_the_loop() -> None:
        await asyncio.Event().wait()

    for body in (awaits_asyncio, needs_the_loop):
        with pytest.raises(TypeError, match=r"await asyncop\.asyncio_bridge\.run\(fn, \*args\)"):
            runtime.run(body)


def test_run_sync_in_a_task_says_to_await_run(runtime: asyncop.Runtime) -> None:
    async def main() -> int:
        return bridge.run_sync(add, 1, 2)

    with pytest.raises(
        RuntimeError, match=r"would block the worker.*await asyncop\.asyncio_bridge"
    ):
        runtime.run(main)


def test_run_sync_on_the_host_loop_itself_is_refused_not_deadlocked(
    runtime: asyncop.Runtime,
) -> None:
    async def nested() -> int:
        return bridge.run_sync(add, 1, 2, runtime=runtime)

    with pytest.raises(RuntimeError, match=r"host asyncio loop .* wait for itself forever"):
        bridge.run_sync(nested, runtime=runtime)
    with pytest.raises(RuntimeError, match="would block the asyncio loop"):
        asyncio.run(nested())


def test_run_sync_refuses_a_runtime_that_is_not_one() -> None:
    with pytest.raises(TypeError, match=r"run_sync\(runtime=...\) needs a Runtime, got str"):
        bridge.run_sync(add, 1, 2, runtime="default")  # type: ignore[arg-type]


def test_runtime_checks_asyncio_loop_factory_at_construction() -> None:
    with pytest.raises(TypeError, match=r"got int 5, which is not callable"):
        asyncop.Runtime(1, asyncio_loop_factory=5)  # type: ignore[arg-type]
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(TypeError, match="got an event loop, not the function that makes one"):
            asyncop.Runtime(1, asyncio_loop_factory=loop)  # type: ignore[arg-type]
    finally:
        loop.close()


CLOSED_LOOP = asyncio.new_event_loop()
CLOSED_LOOP.close()


@pytest.mark.parametrize(
    ("factory", "cause"),
    [
        (lambda: "not a loop", TypeError),
        (lambda: 1 / 0, ZeroDivisionError),
        (lambda: CLOSED_LOOP, RuntimeError),
    ],
    ids=["returns-no-loop", "raises", "returns-a-closed-loop"],
)
def test_a_broken_loop_factory_fails_the_call_and_leaves_no_thread(
    factory: Any, cause: type[BaseException]
) -> None:
    with asyncop.Runtime(1, name=f"rt{id(object()):x}", asyncio_loop_factory=factory) as runtime:
        for _ in range(2):  # and the next call tries again
            with pytest.raises(RuntimeError, match="could not make its host asyncio loop") as info:
                bridge.run_sync(add, 1, 2, runtime=runtime)
            assert isinstance(info.value.__cause__, cause)
    assert runtime_threads(runtime) == []


# ----------------------------------------------------------------------
# Shutdown
# ----------------------------------------------------------------------


def test_shutdown_closes_the_loop_and_joins_its_thread() -> None:
    runtime = asyncop.Runtime(2, name=f"rt{id(object()):x}")
    loop = host_loop(runtime)
    background_cancelled = threading.Event()

    async def leave_a_task_behind() -> None:
        async def background() -> None:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                background_cancelled.set()
                raise

        asyncio.get_running_loop().create_task(background())

    bridge.run_sync(leave_a_task_behind, runtime=runtime)
    assert runtime.shutdown(timeout=10)
    assert loop.is_closed()
    assert background_cancelled.is_set()  # as asyncio.run() does
    assert runtime_threads(runtime) == []
    with pytest.raises(RuntimeError, match="shut down"):
        bridge.run_sync(add, 1, 2, runtime=runtime)


def test_shutdown_cancels_a_call_in_flight_and_its_task(runtime: asyncop.Runtime) -> None:
    parked = Parked()
    op = runtime.spawn(run_on_host, parked)
    assert parked.started.wait(10)
    assert runtime.shutdown(timeout=10)
    assert parked.cancelled.is_set()
    assert op.state is asyncop.OperationState.CANCELLED
    assert runtime_threads(runtime) == []


def test_shutdown_respects_its_timeout_with_a_coroutine_that_ignores_cancel() -> None:
    runtime = asyncop.Runtime(1, name=f"rt{id(object()):x}")
    started = threading.Event()

    async def deaf() -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + 1.5
        started.set()
        while loop.time() < end:
            try:
                await asyncio.sleep(end - loop.time())
            except asyncio.CancelledError:
                pass

    runtime.spawn(lambda: bridge.run_sync(deaf))
    assert started.wait(10)
    began = time.monotonic()
    assert not runtime.shutdown(timeout=0.3)
    assert time.monotonic() - began < 1.0
    assert runtime.shutdown(timeout=10)  # a second call waits for what is left
    assert runtime_threads(runtime) == []


def test_shutdown_from_the_host_loop_is_refused(runtime: asyncop.Runtime) -> None:
    async def shut() -> None:
        runtime.shutdown()

    with pytest.raises(RuntimeError, match="called on its host asyncio loop"):
        bridge.run_sync(shut, runtime=runtime)


def test_a_runtime_that_never_used_the_bridge_starts_no_loop(runtime: asyncop.Runtime) -> None:
    assert runtime.run(lambda: 1) == 1
    assert host_threads(runtime) == []


# ----------------------------------------------------------------------
# asyncio streams
# ----------------------------------------------------------------------


@pytest.fixture
def echo_server(runtime: asyncop.Runtime) -> Iterator[tuple[str, int]]:
    """An asyncio echo server, started on the runtime's host loop by one call."""

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        writer.close()

    async def start() -> asyncio.Server:
        return await asyncio.start_server(echo, "127.0.0.1", 0)

    server = bridge.run_sync(start, runtime=runtime)
    host, port = server.sockets[0].getsockname()[:2]
    yield host, port

    async def stop() -> None:
        server.close()
        await server.wait_closed()

    bridge.run_sync(stop, runtime=runtime)


def test_asyncio_streams_reach_a_server_on_the_host_loop(
    runtime: asyncop.Runtime, echo_server: tuple[str, int]
) -> None:
    async def connect(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(host, port)

    async def ask(streams: tuple[asyncio.StreamReader, asyncio.StreamWriter], line: bytes) -> bytes:
        reader, writer = streams
        writer.write(line)
        await writer.drain()
        return await reader.readline()

    async def close(streams: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        streams[1].close()
        await streams[1].wait_closed()

    async def main() -> list[bytes]:
        streams = await bridge.run(connect, *echo_server)  # kept across calls
        try:
            first = await bridge.run(ask, streams, b"one\n")
            return [first, await bridge.run(ask, streams, b"two\n")]
        finally:
            await bridge.run(close, streams)

    assert runtime.run(main) == [b"one\n", b"two\n"]


# ----------------------------------------------------------------------
# Client libraries: httpx and aiohttp, against a local HTTP server
# ----------------------------------------------------------------------


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    with HttpServer() as server:
        yield server


async def count_streamed(response_chunks: Any, received: list[int]) -> None:
    async for chunk in response_chunks:
        received[0] += len(chunk)


def test_httpx_get_post_and_a_download_share_one_connection_across_calls(
    runtime: asyncop.Runtime, http_server: HttpServer
) -> None:
    httpx = pytest.importorskip("httpx")

    async def make_client() -> Any:
        return httpx.AsyncClient(base_url=http_server.url)

    async def get(client: Any, path: str) -> str:
        response = await client.get(path)
        response.raise_for_status()
        return str(response.text)

    async def post(client: Any, path: str, body: bytes) -> bytes:
        response = await client.post(path, content=body)
        return bytes(response.content)

    async def download(client: Any, path: str) -> int:
        received = [0]
        async with client.stream("GET", path) as response:
            await count_streamed(response.aiter_bytes(), received)
        return received[0]

    async def main() -> tuple[str, bytes, int, str]:
        client = await bridge.run(make_client)  # made on the host loop, used by every call
        try:
            return (
                await bridge.run(get, client, "/hello"),
                await bridge.run(post, client, "/echo", b"payload"),
                await bridge.run(download, client, "/bytes/1048576"),
                await bridge.run(get, client, "/hello"),
            )
        finally:
            await bridge.run(client.aclose)

    assert runtime.run(main) == ("hello", b"payload", 1 << 20, "hello")
    assert http_server.connections == 1


def test_httpx_stream_cancelled_by_a_scope_timeout_ends_at_once_and_closes_its_socket(
    runtime: asyncop.Runtime, http_server: HttpServer
) -> None:
    httpx = pytest.importorskip("httpx")
    received = [0]

    async def make_client() -> Any:
        return httpx.AsyncClient(base_url=http_server.url)

    async def stream_forever(client: Any) -> None:
        async with client.stream("GET", "/stream") as response:
            await count_streamed(response.aiter_bytes(), received)

    async def hello(client: Any) -> str:
        return str((await client.get("/hello")).text)

    async def main() -> tuple[bool, float, float, str]:
        client = await bridge.run(make_client)
        try:
            async with asyncop.move_on_after(0.3) as scope:
                await bridge.run(stream_forever, client)
            late = asyncop.current_time() - scope.deadline
            assert http_server.client_left.wait(5), "the server never saw the client leave"
            closed = http_server.closed_at[0] - scope.deadline  # (the same monotonic clock)
            return scope.cancelled_caught, late, closed, await bridge.run(hello, client)
        finally:
            await bridge.run(client.aclose)

    caught, late, closed, after = runtime.run(main)
    print(
        f"\nhttpx stream cancelled: the scope left {late * 1000:.1f} ms after its deadline, "
        f"the server saw the socket closed {closed * 1000:.1f} ms after it "
        f"({received[0]} bytes received)"
    )
    assert caught and received[0] > 0
    assert late < 0.5 and closed < 0.5
    assert after == "hello"  # the client is still usable


def test_aiohttp_session_across_calls_and_a_cancelled_stream(
    runtime: asyncop.Runtime, http_server: HttpServer
) -> None:
    aiohttp = pytest.importorskip("aiohttp")
    received = [0]

    async def make_session() -> Any:
        return aiohttp.ClientSession(base_url=http_server.url)

    async def get(session: Any, path: str) -> str:
        async with session.get(path) as response:
            return str(await response.text())

    async def post(session: Any, path: str, body: bytes) -> bytes:
        async with session.post(path, data=body) as response:
            return bytes(await response.read())

    async def stream_forever(session: Any) -> None:
        async with session.get("/stream") as response:
            await count_streamed(response.content.iter_any(), received)

    async def main() -> tuple[str, bytes, bool, str]:
        session = await bridge.run(make_session)
        try:
            first = await bridge.run(get, session, "/hello")
            echoed = await bridge.run(post, session, "/echo", b"payload")
            assert http_server.connections == 1  # kept alive between calls
            async with asyncop.move_on_after(0.2) as scope:
                await bridge.run(stream_forever, session)
            assert http_server.client_left.wait(5), "the server never saw the client leave"
            return first, echoed, scope.cancelled_caught, await bridge.run(get, session, "/hello")
        finally:
            await bridge.run(session.close)

    assert runtime.run(main) == ("hello", b"payload", True, "hello")
    assert received[0] > 0


@pytest.mark.asyncop
async def test_the_pytest_plugin_runs_bridged_calls_and_finds_no_thread_left() -> None:
    # The plugin fails a test that leaves a thread behind: the runtime it
    # made closes the host loop's thread when the test ends.
    assert await bridge.run(add, 2, 2) == 4
