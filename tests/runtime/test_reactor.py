"""The reactor: readiness waits, the parking table and the reactor thread, on every multiplexer."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import asyncop
from asyncop import BusyResourceError, Cancelled, ClosedResourceError, OperationState
from asyncop.platform import selector_name
from asyncop.testing import VirtualClock, wait_all_blocked
from tests.conftest import needs_default_mode, runtime_threads

pytestmark = pytest.mark.timeout(20)


def _available_selectors() -> list[str]:
    names = []
    for name in ("epoll", "kqueue", "poll", "select"):
        try:
            selector_name(name)
        except ValueError:
            continue
        names.append(name)
    return names


SELECTORS = _available_selectors()

MakeRuntime = Callable[..., asyncop.Runtime]


@pytest.fixture(params=SELECTORS, ids=SELECTORS)
def selector(request: pytest.FixtureRequest) -> str:
    """The multiplexer the runtimes of this test must use."""
    name: str = request.param
    return name


@pytest.fixture
def make_runtime(selector: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeRuntime]:
    """Make runtimes whose reactor runs on ``selector``; shut them down and check for leaks.

    ``ASYNCOP_SELECTOR`` is set before the runtime exists: the reactor reads it
    when it is made (on the first I/O wait), and the variable stays set for the
    whole test.
    """
    monkeypatch.setenv("ASYNCOP_SELECTOR", selector)
    made: list[asyncop.Runtime] = []

    def make(workers: int = 2, clock: Any = None) -> asyncop.Runtime:
        rt = asyncop.Runtime(workers, name=f"io{selector}{len(made)}x{id(object()):x}", clock=clock)
        made.append(rt)
        return rt

    try:
        yield make
    finally:
        for rt in made:
            assert rt.shutdown(timeout=10), f"{rt.name} did not shut down in 10 s"
            assert runtime_threads(rt) == []


@pytest.fixture
def rt(make_runtime: MakeRuntime) -> asyncop.Runtime:
    """A 2-worker runtime on the real clock whose reactor runs on ``selector``."""
    return make_runtime()


@pytest.fixture
def pairs() -> Iterator[Callable[[], tuple[socket.socket, socket.socket]]]:
    """Make non-blocking socket pairs that are closed at the end of the test."""
    made: list[socket.socket] = []

    def make() -> tuple[socket.socket, socket.socket]:
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)
        made.extend((a, b))
        return a, b

    try:
        yield make
    finally:
        for sock in made:
            sock.close()


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Poll ``predicate`` from the test thread until it holds; fail after ``timeout``."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting until {what}")
        time.sleep(0.001)


def reactor_threads(rt: asyncop.Runtime) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"{rt.name}-reactor" and t.is_alive()]


def fill(sock: socket.socket) -> int:
    """Send into ``sock`` until its buffer is full; returns the bytes sent."""
    total = 0
    chunk = b"\0" * 65536
    while True:
        try:
            total += sock.send(chunk)
        except BlockingIOError:
            return total


def drain(sock: socket.socket) -> int:
    """Read everything ``sock`` holds now; returns the bytes read."""
    total = 0
    while True:
        try:
            data = sock.recv(1 << 20)
        except BlockingIOError:
            return total
        if not data:
            return total
        total += len(data)


def me() -> asyncop.AsyncOperation:
    op = asyncop.current_operation()
    assert op is not None
    return op


async def read_when_ready(sock: socket.socket) -> bytes:
    """Wait until ``sock`` is readable, then read; retry after a spurious wake.

    Wakes may be spurious (see the waker docs): for example an event the
    multiplexer reported for an earlier wait on the same fd, or for an
    earlier socket with the same fd number, may fire the current wait.
    """
    while True:
        await asyncop.readable(sock)
        try:
            return sock.recv(1024)
        except BlockingIOError:
            continue


# ----------------------------------------------------------------------
# The reactor thread
# ----------------------------------------------------------------------


def test_reactor_runs_on_the_multiplexer_named_by_asyncop_selector(
    rt: asyncop.Runtime, pairs: Any, selector: str
) -> None:
    a, b = pairs()
    b.send(b"x")
    assert rt.run(read_when_ready, a) == b"x"
    # Internal: without this check the parametrization could silently run
    # every case on the default multiplexer.
    reactor = rt._reactor
    assert reactor is not None
    assert reactor.backend == selector


def test_no_reactor_thread_before_the_first_io_wait(rt: asyncop.Runtime) -> None:
    async def no_io() -> None:
        await asyncop.sleep(0.001)
        await asyncop.checkpoint()

    rt.run(no_io)
    assert reactor_threads(rt) == []
    assert rt._reactor is None


def test_first_io_wait_starts_at_most_one_reactor_thread_named_after_the_runtime(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    socks = [pairs() for _ in range(4)]
    ops = [rt.spawn(read_when_ready, a) for a, _ in socks]
    wait_until(lambda: rt.registrations() == 4, "four I/O waits are parked")
    # On epoll the workers wait in the multiplexer themselves: no thread.
    expected = 0 if rt._reactor.drives_epoll else 1  # type: ignore[union-attr]
    assert len(reactor_threads(rt)) == expected
    for _, b in socks:
        b.send(b"x")
    for op in ops:
        assert op.wait(5).value == b"x"
    # Later waits reuse the same thread.
    a, b = socks[0]
    b.send(b"y")
    assert rt.run(read_when_ready, a) == b"y"
    assert [t.name for t in reactor_threads(rt)] == [f"{rt.name}-reactor"] * expected


def test_reactor_blocks_in_the_multiplexer_while_a_task_waits(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    a, b = pairs()
    op = rt.spawn(read_when_ready, a)
    wait_until(lambda: rt.registrations() == 1, "the reader is parked")
    time.sleep(0.05)  # let the workers park too
    cpu_before = time.process_time()
    time.sleep(1.0)
    cpu = time.process_time() - cpu_before
    b.send(b"x")
    assert op.wait(5).value == b"x"
    # A reactor or worker that polled would burn close to a whole core here.
    assert cpu < 0.25, f"the process used {cpu:.3f} s of CPU in 1 s of waiting on a socket"


def test_reactor_thread_stops_at_shutdown(make_runtime: MakeRuntime, pairs: Any) -> None:
    rt = make_runtime()
    a, b = pairs()
    b.send(b"x")
    assert rt.run(read_when_ready, a) == b"x"
    assert len(reactor_threads(rt)) == (0 if rt._reactor.drives_epoll else 1)  # type: ignore[union-attr]
    assert rt.shutdown(timeout=5)
    assert reactor_threads(rt) == []


def test_shutdown_cancels_a_task_parked_on_a_socket(make_runtime: MakeRuntime, pairs: Any) -> None:
    rt = make_runtime()
    a, _ = pairs()
    op = rt.spawn(read_when_ready, a)
    wait_until(lambda: rt.registrations() == 1, "the reader is parked")
    started = time.monotonic()
    assert rt.shutdown(timeout=5)
    assert time.monotonic() - started < 2.0
    assert op.state is OperationState.CANCELLED
    assert reactor_threads(rt) == []


# ----------------------------------------------------------------------
# Waking on readiness
# ----------------------------------------------------------------------


def test_readable_wakes_the_task_when_data_arrives(rt: asyncop.Runtime, pairs: Any) -> None:
    a, b = pairs()
    log: list[str] = []

    async def reader() -> bytes:
        log.append("waiting")
        await asyncop.readable(a)
        log.append("woken")
        return a.recv(16)

    op = rt.spawn(reader)
    wait_until(lambda: rt.registrations() == 1, "the reader is parked")
    assert log == ["waiting"]
    b.send(b"hello")
    assert op.wait(5).value == b"hello"
    assert log == ["waiting", "woken"]


def test_writable_wakes_the_task_when_the_peer_makes_room(rt: asyncop.Runtime, pairs: Any) -> None:
    a, b = pairs()
    fill(a)
    log: list[str] = []

    async def writer() -> int:
        await asyncop.writable(a)
        log.append("woken")
        return a.send(b"more")

    op = rt.spawn(writer)
    wait_until(lambda: rt.registrations() == 1, "the writer is parked")
    assert log == []
    drain(b)
    assert op.wait(5).value == 4
    assert log == ["woken"]


def test_readable_accepts_a_raw_file_descriptor_number(rt: asyncop.Runtime, pairs: Any) -> None:
    a, b = pairs()

    async def reader() -> bytes:
        await asyncop.readable(a.fileno())
        return a.recv(16)

    op = rt.spawn(reader)
    wait_until(lambda: rt.registrations() == 1, "the reader is parked")
    b.send(b"n")
    assert op.wait(5).value == b"n"


def test_registration_is_counted_while_parked_and_released_after(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    a, b = pairs()
    assert rt.registrations() == 0
    op = rt.spawn(read_when_ready, a)
    wait_until(lambda: rt.registrations() == 1, "the reader is parked")
    b.send(b"x")
    assert op.wait(5).value == b"x"
    assert rt.registrations() == 0


def test_registration_is_one_shot_so_each_wait_registers_again(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    a, b = pairs()
    counts: list[int] = []
    got: list[bytes] = []

    async def reader() -> None:
        for _ in range(3):
            got.append(await read_when_ready(a))
            counts.append(rt.registrations())

    op = rt.spawn(reader)
    for i in range(3):
        wait_until(
            lambda i=i: len(got) == i and rt.registrations() == 1,
            f"the reader is parked for wait {i}",
        )
        b.send(bytes([65 + i]))
    assert op.wait(5).state is OperationState.COMPLETED
    assert got == [b"A", b"B", b"C"]
    # Once woken, a wait holds no registration: firing removed it.
    assert counts == [0, 0, 0]
    assert rt.registrations() == 0


def test_data_already_in_the_socket_makes_readable_return_at_once(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    a, b = pairs()
    b.send(b"early")  # the edge happens before the task ever registers
    op = rt.spawn(read_when_ready, a)
    # Nothing else will ever be written: a missed edge would hang here.
    assert op.wait(5).value == b"early"
    assert rt.registrations() == 0


def test_writable_on_a_socket_with_room_returns_at_once(rt: asyncop.Runtime, pairs: Any) -> None:
    a, _ = pairs()

    async def writer() -> None:
        await asyncop.writable(a)

    op = rt.spawn(writer)
    assert op.wait(5).state is OperationState.COMPLETED
    assert rt.registrations() == 0


def test_data_sent_between_a_failed_recv_and_the_wait_is_not_missed(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    a, b = pairs()

    async def reader() -> bytes:
        with pytest.raises(BlockingIOError):
            a.recv(16)
        b.send(b"between")  # lands after the failed attempt, before the wait
        await asyncop.readable(a)
        return a.recv(16)

    assert rt.spawn(reader).wait(5).value == b"between"


def test_registrations_from_workers_reach_a_reactor_blocked_in_the_multiplexer(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    first_a, first_b = pairs()
    first_b.send(b"x")
    assert rt.run(read_when_ready, first_a) == b"x"
    time.sleep(0.05)  # the reactor is back in the multiplexer, with nothing armed
    socks = [pairs() for _ in range(20)]
    ops = [rt.spawn(read_when_ready, a) for a, _ in socks]
    wait_until(lambda: rt.registrations() == 20, "twenty readers are parked")
    for i, (_, b) in reversed(list(enumerate(socks))):
        b.send(str(i).encode())
    assert [op.wait(5).value for op in ops] == [str(i).encode() for i in range(20)]
    assert rt.registrations() == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stress_many_waiters_registering_while_writes_arrive_all_wake(
    rt: asyncop.Runtime, seed: int
) -> None:
    rng = random.Random(seed)
    for round_ in range(15):
        n = rng.randint(1, 40)
        socks = [socket.socketpair() for _ in range(n)]
        try:
            for a, _ in socks:
                a.setblocking(False)
            payloads = [f"{seed}:{round_}:{i}".encode() for i in range(n)]
            order = list(range(n))
            rng.shuffle(order)
            pauses = [rng.choice((0.0, 0.0, 0.0005, 0.002)) for _ in range(n)]

            async def reader(sock: socket.socket) -> bytes:
                while True:
                    try:
                        return sock.recv(64)
                    except BlockingIOError:
                        await asyncop.readable(sock)

            ops = [rt.spawn(reader, a) for a, _ in socks]
            # Write while the readers are still registering: some writes come
            # before a registration, some after it, some during it.
            for i, pause in zip(order, pauses, strict=True):
                socks[i][1].send(payloads[i])
                if pause:
                    time.sleep(pause)
            for i, op in enumerate(ops):
                result = op.wait(5)
                assert result.value == payloads[i], f"seed={seed} round={round_} reader {i}"
            assert rt.registrations() == 0, f"seed={seed} round={round_}"
        finally:
            for a, b in socks:
                a.close()
                b.close()


@needs_default_mode  # main's step holds the lane: the reader cannot run in between
def test_a_retry_loop_survives_a_spurious_wake(
    make_runtime: MakeRuntime, pairs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wake does not promise that the operation will succeed: callers retry.

    The wake is made spurious on purpose: the reader is woken for a byte that
    ``main`` steals before the reader runs. With one worker, held by ``main``
    while the reactor fires, the reader cannot run in between.
    """
    rt = make_runtime(workers=1)
    a, b = pairs()
    log: list[Any] = []

    async def reader() -> bytes:
        while True:
            try:
                data = a.recv(16)
            except BlockingIOError:
                log.append("would block")
                await asyncop.readable(a)
                log.append("woken")
                continue
            log.append(data)
            return data

    async def main() -> bytes:
        child = me().spawn(reader)
        await wait_all_blocked()
        log.append("send x")
        b.send(b"x")
        # Hold the worker (no await) until the reactor has queued the reader.
        end = time.monotonic() + 5
        while "waiting on readable" in rt.dump():
            assert time.monotonic() < end, "the reader was never woken"
            time.sleep(0.001)
        assert a.recv(16) == b"x"
        log.append("stolen")
        await wait_all_blocked()  # the reader retried, found nothing, waits again
        log.append("send y")
        b.send(b"y")
        value: bytes = await child
        return value

    assert rt.run(main) == b"y"
    assert log == [
        "would block",
        "send x",
        "stolen",
        "woken",
        "would block",
        "send y",
        "woken",
        b"y",
    ]


# ----------------------------------------------------------------------
# One waiter per (fd, direction)
# ----------------------------------------------------------------------


@pytest.mark.parametrize("direction", ["readable", "writable"])
def test_second_waiter_on_the_same_fd_and_direction_gets_busy_resource_error(
    rt: asyncop.Runtime, pairs: Any, direction: str
) -> None:
    a, b = pairs()
    if direction == "writable":
        fill(a)
    wait = getattr(asyncop, direction)

    async def waiter() -> str:
        await wait(a)
        return "woken"

    first = rt.spawn(waiter)
    wait_until(lambda: rt.registrations() == 1, "the first waiter is parked")
    second = rt.spawn(waiter)
    result = second.wait(5)
    assert result.state is OperationState.FAILED
    assert isinstance(result.error, BusyResourceError)
    assert str(a.fileno()) in str(result.error)
    # The first waiter keeps its place and still wakes.
    assert rt.registrations() == 1
    if direction == "writable":
        drain(b)
    else:
        b.send(b"x")
    assert first.wait(5).value == "woken"


def test_a_reader_and_a_writer_may_wait_on_the_same_fd_at_once(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    a, b = pairs()
    fill(a)  # not writable; nothing to read either
    log: list[str] = []

    async def reader() -> None:
        await asyncop.readable(a)
        log.append("read-ready")

    async def writer() -> None:
        await asyncop.writable(a)
        log.append("write-ready")

    r = rt.spawn(reader)
    w = rt.spawn(writer)
    wait_until(lambda: rt.registrations() == 2, "the reader and the writer are parked")
    drain(b)
    assert w.wait(5).state is OperationState.COMPLETED
    assert log == ["write-ready"]
    assert rt.registrations() == 1  # the reader still waits
    b.send(b"x")
    assert r.wait(5).state is OperationState.COMPLETED
    assert log == ["write-ready", "read-ready"]


# ----------------------------------------------------------------------
# Closing, cancelling and stale descriptors
# ----------------------------------------------------------------------


def test_notify_closing_wakes_every_waiter_with_closed_resource_error(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    a, _ = pairs()
    fill(a)

    async def waiter(direction: str) -> None:
        await getattr(asyncop, direction)(a)

    ops = [rt.spawn(waiter, "readable"), rt.spawn(waiter, "writable")]
    wait_until(lambda: rt.registrations() == 2, "both waiters are parked")
    asyncop.notify_closing(a)
    for op in ops:
        result = op.wait(5)
        assert result.state is OperationState.FAILED
        assert isinstance(result.error, ClosedResourceError)
    assert rt.registrations() == 0


def test_notify_closing_is_a_plain_function_that_is_harmless_without_waiters(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    a, b = pairs()
    assert asyncop.notify_closing(a) is None
    # The fd is still usable by a later wait.
    b.send(b"x")
    assert rt.run(read_when_ready, a) == b"x"


def test_cancelling_a_waiter_wakes_it_at_once_and_removes_its_registration(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    a, _ = pairs()
    log: list[str] = []

    async def reader() -> None:
        try:
            await asyncop.readable(a)
        except Cancelled:
            log.append("cancelled")
            raise

    op = rt.spawn(reader)
    wait_until(lambda: rt.registrations() == 1, "the reader is parked")
    op.cancel()
    assert op.wait(5).state is OperationState.CANCELLED
    assert log == ["cancelled"]
    assert rt.registrations() == 0


def test_after_a_cancelled_wait_another_task_can_wait_on_the_fd(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    a, b = pairs()
    op = rt.spawn(read_when_ready, a)
    wait_until(lambda: rt.registrations() == 1, "the reader is parked")
    op.cancel()
    assert op.wait(5).state is OperationState.CANCELLED
    second = rt.spawn(read_when_ready, a)
    wait_until(lambda: rt.registrations() == 1, "the second reader is parked")
    b.send(b"x")
    assert second.wait(5).value == b"x"


def _cancelled_wait_then_hang_up(
    rt: asyncop.Runtime, pairs: Callable[[], tuple[socket.socket, socket.socket]]
) -> socket.socket:
    """A socket whose wait was cancelled, and whose peer then closed; it stays open."""
    a, b = pairs()
    op = rt.spawn(read_when_ready, a)
    wait_until(lambda: rt.registrations() == 1, "the reader is parked")
    op.cancel()
    assert op.wait(5).state is OperationState.CANCELLED
    b.close()  # a now reports a hang-up for as long as it is open
    return a


def test_a_hang_up_after_a_cancelled_wait_reaches_no_poller(
    rt: asyncop.Runtime, pairs: Any, selector: str
) -> None:
    if selector != "epoll":
        pytest.skip("the other multiplexers are handed only the fds that tasks wait on")
    a = _cancelled_wait_then_hang_up(rt, pairs)
    reactor = rt._reactor
    assert reactor is not None
    # What the next epoll_wait of a parked worker reports. epoll reports a
    # hang-up whatever the mask: an fd left armed with an empty mask would
    # end every wait at once, and could hand its hang-up to the next wait
    # on the same number.
    assert [fd for fd, _ in reactor._epoll.poll(0) if fd == a.fileno()] == []


def test_the_workers_sleep_after_a_hang_up_on_a_socket_whose_wait_was_cancelled(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    _cancelled_wait_then_hang_up(rt, pairs)
    time.sleep(0.05)  # let the workers park
    cpu_before = time.process_time()
    time.sleep(1.0)
    cpu = time.process_time() - cpu_before
    # A worker woken by the hang-up at every poll would burn close to a whole core.
    assert cpu < 0.25, f"the process used {cpu:.3f} s of CPU in 1 s with no task to run"


def test_a_reused_fd_number_can_be_waited_on(rt: asyncop.Runtime) -> None:
    import os

    a, b = socket.socketpair()
    a.setblocking(False)
    b.send(b"old")
    assert rt.run(read_when_ready, a) == b"old"  # the multiplexer now knows this fd
    old_fd = a.fileno()
    a.close()
    b.close()
    c, d = socket.socketpair()
    try:
        if c.fileno() != old_fd:
            # The lowest free number is normally the old one; make sure of it.
            try:
                os.fstat(old_fd)
            except OSError:
                os.dup2(c.fileno(), old_fd)
                c.close()
                c = socket.socket(fileno=old_fd)
        assert c.fileno() == old_fd, "could not reuse the closed descriptor number"
        c.setblocking(False)
        op = rt.spawn(read_when_ready, c)
        wait_until(lambda: rt.registrations() == 1, "the reader of the new socket is parked")
        d.send(b"new")
        assert op.wait(5).value == b"new"
    finally:
        c.close()
        d.close()


@pytest.mark.parametrize("direction", ["readable", "writable"])
def test_waiting_on_a_closed_socket_raises_closed_resource_error(
    rt: asyncop.Runtime, direction: str
) -> None:
    a, b = socket.socketpair()
    a.close()
    b.close()

    async def waiter() -> None:
        await getattr(asyncop, direction)(a)

    with pytest.raises(ClosedResourceError):
        rt.run(waiter)
    assert rt.registrations() == 0


def test_waiting_on_something_without_fileno_raises_type_error(rt: asyncop.Runtime) -> None:
    async def waiter() -> None:
        await asyncop.readable("not a socket")

    with pytest.raises(TypeError):
        rt.run(waiter)


def test_dump_names_the_io_wait_of_a_parked_task(rt: asyncop.Runtime, pairs: Any) -> None:
    a, b = pairs()
    op = rt.spawn(read_when_ready, a, name="sock-reader")

    def reader_line() -> str:
        return next(line for line in rt.dump().splitlines() if "sock-reader" in line)

    # The registration is made while the task arms its wait, a moment
    # before it is parked: poll until dump() shows it parked.
    wait_until(lambda: "waiting on" in reader_line(), "dump() shows the reader parked")
    assert "readable(" in reader_line()
    b.send(b"x")
    assert op.wait(5).value == b"x"


# ----------------------------------------------------------------------
# The virtual clock
# ----------------------------------------------------------------------


def test_autojump_holds_the_clock_while_an_io_wait_is_pending(
    make_runtime: MakeRuntime, pairs: Any
) -> None:
    """An autojumping clock must not jump past a pending I/O wait.

    A sleeper waits one virtual hour; a reader waits for a byte that a thread
    writes after 0.2 s of real time. Once both are parked, every worker is
    idle. If the clock jumped anyway, it would jump to the sleeper's deadline
    at once: the sleeper would finish first, and the reader would wake at
    virtual 3600. A pending I/O wait is progress that can come from outside,
    so the clock holds still until the byte arrives: the reader wakes at the
    start time, and only then does the clock jump to the sleeper.
    """
    rt = make_runtime(clock=VirtualClock(autojump=True))
    a, b = pairs()
    log: list[tuple[str, float]] = []

    async def sleeper() -> None:
        await asyncop.sleep(3600)
        log.append(("sleeper", asyncop.current_time()))

    async def reader() -> None:
        await asyncop.readable(a)
        assert a.recv(16) == b"x"
        log.append(("reader", asyncop.current_time()))

    async def main() -> float:
        start = asyncop.current_time()
        me().spawn(sleeper)
        me().spawn(reader)
        return start

    writer = threading.Timer(0.2, b.send, (b"x",))
    writer.start()
    try:
        start = rt.run(main)
    finally:
        writer.join(5)
    assert [who for who, _ in log] == ["reader", "sleeper"]
    assert log[0][1] == start
    assert log[1][1] >= start + 3600


async def _read_bytes_until_quiet(sock: socket.socket, log: list[tuple[bytes, float]]) -> bool:
    """Log each byte with the time it came, until ``move_on_after(30)`` gives up."""
    async with asyncop.move_on_after(30) as cs:
        while True:
            await asyncop.readable(sock)
            try:
                data = sock.recv(16)
            except BlockingIOError:
                continue  # a spurious wake-up
            log.extend((bytes([byte]), asyncop.current_time()) for byte in data)
    return cs.cancelled_caught


def test_io_grace_jumps_over_an_io_wait_that_stays_quiet(
    make_runtime: MakeRuntime, pairs: Any
) -> None:
    rt = make_runtime(clock=VirtualClock(autojump=True, io_grace=0.05))
    a, _b = pairs()
    log: list[tuple[bytes, float]] = []
    started = time.monotonic()
    assert rt.run(_read_bytes_until_quiet, a, log) is True
    assert time.monotonic() - started < 10  # generous: the grace is 0.05 s
    assert log == []
    assert rt.now() == 30
    assert rt.registrations() == 0


def test_io_grace_counts_from_the_last_readiness(make_runtime: MakeRuntime, pairs: Any) -> None:
    """A peer that keeps talking holds the clock; once it falls silent, the clock jumps.

    The bytes come 0.05 s apart for 1 s of real time, twice the grace: a
    grace counted from the first idle moment would jump while the peer still
    talks, and the later bytes would come at virtual 30, not 0.
    """
    rt = make_runtime(clock=VirtualClock(autojump=True, io_grace=0.5))
    a, b = pairs()
    log: list[tuple[bytes, float]] = []
    stop = threading.Event()

    def talk() -> None:
        for _ in range(20):
            if stop.wait(0.05):
                return
            b.send(b"x")

    talker = threading.Thread(target=talk)
    talker.start()
    try:
        assert rt.run(_read_bytes_until_quiet, a, log) is True
    finally:
        stop.set()
        talker.join(5)
    assert log == [(b"x", 0.0)] * 20
    assert rt.now() == 30


def test_without_io_grace_a_quiet_io_wait_holds_the_clock(
    make_runtime: MakeRuntime, pairs: Any
) -> None:
    rt = make_runtime(clock=VirtualClock(autojump=True))
    a, _b = pairs()
    log: list[tuple[bytes, float]] = []
    op = rt.spawn(_read_bytes_until_quiet, a, log)
    with pytest.raises(TimeoutError):
        op.wait(0.3)  # real seconds: the clock must not jump over the wait
    assert rt.now() == 0
    op.cancel()
    assert op.wait(5).state is OperationState.CANCELLED


# ----------------------------------------------------------------------
# A socket closed under a parked task, without notify_closing()
# ----------------------------------------------------------------------


def _reuse_number(number: int) -> tuple[socket.socket, socket.socket]:
    """A new non-blocking socket pair whose first socket has fd ``number``."""
    import os

    c, d = socket.socketpair()
    if c.fileno() != number:
        os.dup2(c.fileno(), number)
        c.close()
        c = socket.socket(fileno=number)
    c.setblocking(False)
    d.setblocking(False)
    return c, d


async def _wait_on(target: Any, direction: str) -> str:
    await getattr(asyncop, direction)(target)
    return "woken"


@pytest.mark.parametrize("direction", ["readable", "writable"])
@pytest.mark.parametrize("as_int", [False, True], ids=["socket", "fd"])
def test_closing_a_socket_under_a_parked_task_wakes_it_with_closed_resource_error(
    rt: asyncop.Runtime, direction: str, as_int: bool
) -> None:
    a, b = socket.socketpair()
    a.setblocking(False)
    if direction == "writable":
        fill(a)
    number = a.fileno()
    op = rt.spawn(_wait_on, number if as_int else a, direction)
    wait_until(lambda: rt.registrations() == 1, "the waiter is parked")
    a.close()
    b.close()
    result = op.wait(10)
    assert result.state is OperationState.FAILED
    assert isinstance(result.error, ClosedResourceError)
    assert f"fd {number}" in str(result.error)
    assert rt.registrations() == 0


def test_recv_async_on_a_socket_closed_under_it_raises_closed_resource_error(
    rt: asyncop.Runtime,
) -> None:
    from asyncop.net import recv_async

    a, b = socket.socketpair()
    a.setblocking(False)

    async def reader() -> bytes:
        data: bytes = await recv_async(a, 10)
        return data

    op = rt.spawn(reader)
    wait_until(lambda: rt.registrations() == 1, "the reader is parked")
    a.close()
    try:
        result = op.wait(10)
    finally:
        b.close()
    assert isinstance(result.error, ClosedResourceError), result


@pytest.mark.parametrize("direction", ["readable", "writable"])
def test_a_new_socket_on_a_closed_sockets_fd_number_is_not_busy(
    rt: asyncop.Runtime, direction: str
) -> None:
    a, b = socket.socketpair()
    a.setblocking(False)
    if direction == "writable":
        fill(a)
    number = a.fileno()
    stale = rt.spawn(_wait_on, a, direction)
    wait_until(lambda: rt.registrations() == 1, "the first waiter is parked")
    a.close()
    b.close()
    c, d = _reuse_number(number)
    try:
        fresh = rt.spawn(read_when_ready, c)
        # The stale wait fails; the new socket's wait is its own.
        assert isinstance(stale.wait(10).error, ClosedResourceError)
        wait_until(lambda: rt.registrations() == 1, "the new socket's reader is parked")
        d.send(b"new")
        assert fresh.wait(10).value == b"new"
    finally:
        c.close()
        d.close()
    assert rt.registrations() == 0


def test_a_live_waiter_on_the_fd_still_makes_a_second_one_busy(
    rt: asyncop.Runtime, pairs: Any
) -> None:
    a, b = pairs()
    first = rt.spawn(read_when_ready, a)
    wait_until(lambda: rt.registrations() == 1, "the first reader is parked")
    with pytest.raises(BusyResourceError):
        rt.run(_wait_on, a, "readable")
    b.send(b"x")
    assert first.wait(10).value == b"x"


def test_waiting_on_a_regular_file_fails_that_wait_and_leaves_nothing_behind(
    rt: asyncop.Runtime, pairs: Any, tmp_path: Any, selector: str
) -> None:
    path = tmp_path / "data.txt"
    path.write_bytes(b"hello")
    with open(path, "rb") as f:
        for _ in range(2):  # the second wait is refused the same way, not busy
            result = rt.spawn(_wait_on, f, "readable").wait(10)
            if selector == "epoll":
                assert isinstance(result.error, OSError), result
                assert f"fd {f.fileno()}" in str(result.error)
                assert "regular file" in str(result.error)
            else:
                assert result.value == "woken"  # poll and select call a file ready
            assert rt.registrations() == 0
    # The reactor is still alive for everything else.
    a, b = pairs()
    b.send(b"x")
    assert rt.run(read_when_ready, a) == b"x"
    assert len(reactor_threads(rt)) <= 1


def test_a_closed_sockets_number_reused_by_a_regular_file_fails_only_the_old_wait(
    rt: asyncop.Runtime, pairs: Any, tmp_path: Any, selector: str
) -> None:
    import os

    a, b = socket.socketpair()
    a.setblocking(False)
    fill(a)
    number = a.fileno()
    reader = rt.spawn(_wait_on, a, "readable")
    writer = rt.spawn(_wait_on, a, "writable")
    wait_until(lambda: rt.registrations() == 2, "both waiters are parked")
    a.close()
    b.close()
    path = tmp_path / "reuse.txt"
    path.write_bytes(b"data")
    fd = os.open(path, os.O_RDONLY)
    try:
        if fd != number:
            os.dup2(fd, number)
            os.close(fd)
            fd = number
        # A wait on the file now holding the number: refused (epoll) or ready.
        rt.spawn(_wait_on, fd, "readable").wait(10)
        for op in (reader, writer):
            assert isinstance(op.wait(10).error, ClosedResourceError)
    finally:
        os.close(fd)
    assert rt.registrations() == 0
    c, d = pairs()
    d.send(b"still")
    assert rt.run(read_when_ready, c) == b"still"
