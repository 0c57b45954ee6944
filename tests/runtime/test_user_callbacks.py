"""User code run by the runtime never wedges it.

- ``on_cancel`` callbacks that raise (even SystemExit or KeyboardInterrupt)
  lose none of the callbacks and wakeups queued behind them, are logged on
  the ``asyncop`` logger, and never kill a worker; a KeyboardInterrupt on
  the main thread comes out once every pending wakeup has run.
- Objects whose ``__str__``/``__repr__`` raise do not break ``dump()``,
  error messages or logging.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import asyncop
from asyncop import OperationState
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def rt() -> Iterator[asyncop.Runtime]:
    runtime = asyncop.Runtime(2, name=f"ucb{id(object()):x}")
    try:
        yield runtime
    finally:
        assert runtime.shutdown(timeout=10), "runtime did not shut down"


@pytest.fixture
def vrt() -> Iterator[asyncop.Runtime]:
    runtime = asyncop.Runtime(2, name=f"vcb{id(object()):x}", clock=VirtualClock(autojump=True))
    try:
        yield runtime
    finally:
        assert runtime.shutdown(timeout=10), "runtime did not shut down"


RAISED = [ValueError("user bug"), SystemExit(3), KeyboardInterrupt(), asyncop.Cancelled()]
IDS = ["Exception", "SystemExit", "KeyboardInterrupt", "Cancelled"]


def _raiser(exc: BaseException, log: list[str]) -> Callable[[], None]:
    def callback() -> None:
        log.append(type(exc).__name__)
        raise exc.with_traceback(None)

    return callback


async def _await_it(op: asyncop.AsyncOperation) -> str:
    try:
        await op
    except asyncop.CancellationError:
        return "woken"
    return "value"


def _arm(
    rt: asyncop.Runtime, exc: BaseException, log: list[str]
) -> tuple[asyncop.AsyncOperation, asyncop.AsyncOperation]:
    """An unstarted operation with failing and good callbacks, and a task parked on it."""
    target = rt.create(lambda op, ctx: None, name="target")
    token = target.token
    token.on_cancel(_raiser(exc, log))
    token.on_cancel(lambda: log.append("second"))
    token.on_cancel(_raiser(exc, log))
    token.on_cancel(lambda: log.append("last"))
    waiter = rt.spawn(_await_it, target, name="waiter")
    probe = rt.spawn(lambda: None)
    probe.wait(5)
    return target, waiter


def _logged(caplog: pytest.LogCaptureFixture, exc: BaseException) -> int:
    return sum(
        1
        for record in caplog.records
        if record.name == "asyncop" and record.exc_info is not None and record.exc_info[1] is exc
    )


@pytest.mark.parametrize("exc", RAISED, ids=IDS)
def test_failing_on_cancel_callbacks_lose_nothing_queued_behind_them_off_main(
    rt: asyncop.Runtime, caplog: pytest.LogCaptureFixture, exc: BaseException
) -> None:
    log: list[str] = []
    target, waiter = _arm(rt, exc, log)
    raised: list[BaseException] = []

    def cancel() -> None:
        try:
            target.cancel()
        except BaseException as error:
            raised.append(error)

    thread = threading.Thread(target=cancel)
    thread.start()
    thread.join(10)
    assert raised == []  # logged, not raised into the cancelling thread
    name = type(exc).__name__
    assert log == [name, "second", name, "last"]
    assert waiter.wait(10).value == "woken"  # the wakeup behind them was delivered
    assert _logged(caplog, exc) == 2


def test_a_keyboard_interrupt_from_a_callback_on_the_main_thread_comes_after_every_wakeup(
    rt: asyncop.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    log: list[str] = []
    target, waiter = _arm(rt, KeyboardInterrupt(), log)
    with pytest.raises(KeyboardInterrupt):
        target.cancel()
    assert log == ["KeyboardInterrupt", "second", "KeyboardInterrupt", "last"]
    assert waiter.wait(10).value == "woken"
    assert target.state is OperationState.CANCELLED


@pytest.mark.parametrize("exc", RAISED, ids=IDS)
def test_a_failing_callback_run_by_a_deadline_leaves_the_worker_alive(
    vrt: asyncop.Runtime, caplog: pytest.LogCaptureFixture, exc: BaseException
) -> None:
    log: list[str] = []

    async def guarded() -> str:
        me = asyncop.current_operation()
        assert me is not None
        me.token.on_cancel(_raiser(exc, log))
        me.token.on_cancel(lambda: log.append("after"))
        try:
            await asyncop.sleep(100)
        except asyncop.Cancelled:
            log.append("woken")
            raise
        return "slept"

    async def main() -> list[str]:
        for _ in range(3):  # the workers fire one deadline after another
            try:
                async with asyncop.scope(timeout=1):
                    me = asyncop.current_operation()
                    assert me is not None
                    me.spawn(guarded)
            except TimeoutError:
                pass
        return log

    vrt.run(main)
    name = type(exc).__name__
    assert log == [name, "after", "woken"] * 3
    assert [t for t in threading.enumerate() if t.name.startswith(f"{vrt.name}-")]

    async def later() -> int:
        await asyncop.sleep(1)
        return 9

    assert vrt.run(later) == 9  # no worker died: the runtime runs new work
    assert _logged(caplog, exc) == 3


@pytest.mark.parametrize("exc", RAISED, ids=IDS)
def test_shutdown_runs_every_callback_and_finishes_despite_failing_ones(
    exc: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = asyncop.Runtime(2, name="cbshut")
    log: list[str] = []
    parked = threading.Event()

    async def sleeper(i: int) -> None:
        me = asyncop.current_operation()
        assert me is not None
        me.token.on_cancel(_raiser(exc, log))
        me.token.on_cancel(lambda: log.append(f"ok{i}"))
        parked.set()
        await asyncop.sleep(3600)

    ops = [runtime.spawn(sleeper, i) for i in range(4)]
    assert parked.wait(10)
    for op in ops:
        while op.state is not OperationState.RUNNING:
            pass
    runtime.run(_settle)
    try:
        finished = runtime.shutdown(timeout=10)
    except KeyboardInterrupt:
        finished = runtime.shutdown(timeout=10)  # the Ctrl-C came out; finish the job
    assert finished
    assert sorted(x for x in log if x.startswith("ok")) == ["ok0", "ok1", "ok2", "ok3"]
    assert all(op.state is OperationState.CANCELLED for op in ops)


async def _settle() -> None:
    await wait_all_blocked()


# -- objects that cannot describe themselves ----------------------------------------


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_cancel_reason_that_cannot_print_does_not_break_dump(vrt: asyncop.Runtime) -> None:
    async def main() -> str:
        async with asyncop.scope() as s:
            child = s.spawn(_nap)
            await wait_all_blocked()
            child.cancel(Unprintable())
            text = asyncop.current_operation().runtime.dump()  # type: ignore[union-attr]
        return text

    text = vrt.run(main)
    assert "Unprintable" in text and "cancelling" in text


async def _nap() -> None:
    await asyncop.sleep(5)


def test_unprintable_objects_do_not_break_error_messages(vrt: asyncop.Runtime) -> None:
    with pytest.raises(TypeError, match="Unprintable"):
        asyncop.select(Unprintable())

    async def yields_it() -> None:
        await _Yield(Unprintable())

    op = vrt.spawn(yields_it)
    op.wait(10)
    assert isinstance(op.error, TypeError) and "Unprintable" in str(op.error)


def test_an_unprintable_failure_is_logged(
    vrt: asyncop.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    def on_cancel() -> None:
        raise UnprintableError()

    op = vrt.create(lambda o, c: None, name="unprintable_cb")
    op.token.on_cancel(on_cancel)
    op.token.on_cancel(lambda: None)
    thread = threading.Thread(target=op.cancel)
    with caplog.at_level(logging.ERROR, logger="asyncop"):
        thread.start()
        thread.join(10)
    records = [r for r in caplog.records if r.name == "asyncop"]
    assert len(records) == 1
    assert "UnprintableError" in records[0].getMessage()
    assert caplog.text  # formatting the record (traceback included) did not fail


class _Yield:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Any:
        return (yield self.value)


@pytest.mark.parametrize("exc", RAISED[:2], ids=IDS[:2])
def test_on_cancel_on_a_cancelled_token_logs_what_the_callback_raises(
    rt: asyncop.Runtime, caplog: pytest.LogCaptureFixture, exc: BaseException
) -> None:
    log: list[str] = []
    op = rt.create(lambda o, c: None, name="already")
    op.cancel()
    handle = op.token.on_cancel(_raiser(exc, log))  # runs at once, here
    assert log == [type(exc).__name__]
    assert handle.remove() is False
    assert _logged(caplog, exc) == 1
