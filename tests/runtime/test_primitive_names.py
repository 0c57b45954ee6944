"""Every primitive takes ``name=``; an unnamed one shows where the user made it.

The name (or ``made at file:line`` of the user's constructor call, never a
line of asyncop or anyio) appears in ``repr``, in ``dump()`` for a task
waiting on the primitive, and in the deadlock report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.abc
import anyio.streams.memory
import pytest

import asyncop
import asyncop.lowlevel
from asyncop.testing import VirtualClock, wait_all_blocked

from ._marked_lines import line_of

pytestmark = pytest.mark.timeout(30)

HERE = __file__


MAKERS: dict[str, Callable[..., Any]] = {
    "Event": lambda **kw: asyncop.Event(**kw),  # made-Event
    "Lock": lambda **kw: asyncop.Lock(**kw),  # made-Lock
    "Semaphore": lambda **kw: asyncop.Semaphore(1, **kw),  # made-Semaphore
    "Condition": lambda **kw: asyncop.Condition(**kw),  # made-Condition
    "CapacityLimiter": lambda **kw: asyncop.CapacityLimiter(1, **kw),  # made-CapacityLimiter
    "Channel": lambda **kw: asyncop.Channel(1, **kw),  # made-Channel
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_a_named_primitive_shows_its_name_in_its_repr(kind: str) -> None:
    made = MAKERS[kind](name="orders")
    assert made.name == "orders"
    assert "name='orders'" in repr(made)


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_an_unnamed_primitive_shows_the_users_constructor_line(kind: str) -> None:
    made = MAKERS[kind]()  # (each lambda above is the user's code that makes it)
    assert made.name is None
    where = f"made at {HERE}:{line_of(HERE, 'made-' + kind)}"
    assert repr(made).endswith(f" {where}>"), repr(made)


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_a_name_that_is_not_a_str_is_refused(kind: str) -> None:
    with pytest.raises(TypeError, match=f"{kind}\\(name=...\\) needs a str or None, got int"):
        MAKERS[kind](name=7)


@pytest.fixture
def rt() -> Iterator[asyncop.Runtime]:
    runtime = asyncop.Runtime(2, clock=VirtualClock(autojump=True))
    yield runtime
    assert runtime.shutdown(timeout=10)


def parked_line(rt: asyncop.Runtime, task: str) -> str:
    (line,) = [line for line in rt.dump().splitlines() if line.strip().startswith(f"{task} [")]
    return line


def test_dump_shows_what_a_task_waits_on_by_name(rt: asyncop.Runtime) -> None:
    ready = asyncop.Event(name="ready")
    lock = asyncop.Lock("db")
    jobs = asyncop.Channel[int](name="jobs")
    unnamed = asyncop.Event()  # unnamed-event
    lines: dict[str, str] = {}

    async def waits_ready() -> None:
        await ready.wait_async()

    async def waits_lock() -> None:
        async with lock:
            pass

    async def waits_jobs() -> None:
        await jobs.recv_async()

    async def waits_unnamed() -> None:
        await unnamed.wait_async()

    async def main() -> None:
        async with lock, asyncop.scope() as s:
            for fn in (waits_ready, waits_lock, waits_jobs, waits_unnamed):
                s.spawn(fn, name=fn.__name__)
            await wait_all_blocked()
            for name in ("waits_ready", "waits_lock", "waits_jobs", "waits_unnamed"):
                lines[name] = parked_line(rt, name)
            s.cancel()

    rt.run(main)
    assert "waiting on event 'ready' at " in lines["waits_ready"]
    assert "waiting on lock 'db' (held by task 'test_" in lines["waits_lock"]
    assert "waiting on receive from channel 'jobs' at " in lines["waits_jobs"]
    assert (
        f"waiting on event (made at {HERE}:{line_of(HERE, 'unnamed-event')}) at "
        in (lines["waits_unnamed"])
    )


def test_primitives_made_and_awaited_through_anyio_show_the_users_lines(
    rt: asyncop.Runtime,
) -> None:
    seen: list[str] = []

    async def main() -> None:
        event = anyio.Event()  # anyio-event

        async def waits() -> None:
            await event.wait()  # anyio-wait

        async with asyncop.scope() as s:
            s.spawn(waits, name="waits")
            await wait_all_blocked()
            seen.append(parked_line(rt, "waits"))
            event.set()

    rt.run(main)
    made, waits = line_of(HERE, "anyio-event"), line_of(HERE, "anyio-wait")
    assert f"event (made at {HERE}:{made}) at {HERE}:{waits}" in seen[0], seen[0]


def test_a_wait_inside_anyio_code_shows_the_users_await(rt: asyncop.Runtime) -> None:
    seen: list[str] = []

    async def main() -> None:
        send, receive = anyio.create_memory_object_stream[int]()

        async def receives() -> None:
            await receive.receive()  # anyio-receive

        async with asyncop.scope() as s:
            s.spawn(receives, name="receives")
            await wait_all_blocked()
            seen.append(parked_line(rt, "receives"))
            s.cancel()
        send.close()
        receive.close()

    rt.run(main)
    assert seen[0].endswith(f" at {HERE}:{line_of(HERE, 'anyio-receive')}"), seen[0]


def test_a_primitive_anyio_makes_in_a_task_of_its_own_shows_anyio_not_the_stepping_thread() -> None:
    # receive() is the task's whole code, so no line of the task is the
    # user's. The frames past its coroutine step the task, not make the
    # event: on the thread of anyio.run() they end in the line that called it.
    seen: list[str] = []

    async def main() -> None:
        send, receive = anyio.create_memory_object_stream[int]()
        async with anyio.create_task_group() as tg:
            tg.start_soon(receive.receive, name="receives")
            await anyio.wait_all_tasks_blocked()
            seen.append(parked_line(asyncop.current_runtime(), "receives"))
            tg.cancel_scope.cancel()
        send.close()
        receive.close()

    options = {"clock": VirtualClock(autojump=True)}
    anyio.run(main, backend="asyncop", backend_options=options)  # anyio-run
    assert f"{HERE}:{line_of(HERE, 'anyio-run')}" not in seen[0], seen[0]
    memory_py = anyio.streams.memory.__file__
    assert f"waiting on event (made at {memory_py}:" in seen[0], seen[0]


def test_anyio_tasks_show_where_the_user_started_them() -> None:
    # anyio's start_soon() and start() make the operation: the place is the
    # user's call of them, and the root's is the call of anyio.run().
    places: dict[str, tuple[str, int]] = {}

    def note() -> None:
        op = asyncop.lowlevel.current_task()
        assert op is not None
        places[op.name] = (op.filename, op.lineno)

    async def child(task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        note()
        task_status.started()

    async def main() -> None:
        note()
        async with anyio.create_task_group() as tg:
            tg.start_soon(child, name="soon")  # anyio-start-soon
            await tg.start(child, name="started")  # anyio-start

    anyio.run(main, backend="asyncop")  # anyio-root
    assert places == {
        name: (HERE, line_of(HERE, marker))
        for name, marker in [
            (f"{__name__}.{main.__qualname__}", "anyio-root"),
            ("soon", "anyio-start-soon"),
            ("started", "anyio-start"),
        ]
    }
