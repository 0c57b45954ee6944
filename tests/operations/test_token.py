"""CancelToken: the flag, check(), on_cancel callbacks and blocking wait()."""

from __future__ import annotations

import threading

import pytest

import asyncop
from asyncop import Cancelled, CancelToken

pytestmark = pytest.mark.timeout(20)


def make_op(runtime: asyncop.Runtime) -> asyncop.AsyncOperation:
    """A CREATED operation: its token is live until the operation is cancelled."""
    return runtime.create(lambda op, ctx: None, name="holder")


def cancel_in_thread(op: asyncop.AsyncOperation) -> int:
    """Cancel ``op`` from a new thread; return that thread's ident."""
    idents: list[int] = []

    def run() -> None:
        idents.append(threading.get_ident())
        op.cancel()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(5)
    assert not thread.is_alive()
    return idents[0]


def test_every_operation_has_a_cancel_token(runtime: asyncop.Runtime) -> None:
    assert isinstance(make_op(runtime).token, CancelToken)


def test_token_is_not_cancelled_before_the_operation_is(runtime: asyncop.Runtime) -> None:
    assert make_op(runtime).token.cancelled is False


def test_token_is_cancelled_after_the_operation_is(runtime: asyncop.Runtime) -> None:
    op = make_op(runtime)
    op.cancel()
    assert op.token.cancelled is True


def test_cancelled_is_a_base_exception_not_an_exception() -> None:
    assert issubclass(Cancelled, BaseException)
    assert not issubclass(Cancelled, Exception)


def test_check_does_nothing_on_a_live_token(runtime: asyncop.Runtime) -> None:
    make_op(runtime).token.check()


def test_check_raises_cancelled_on_a_cancelled_token(runtime: asyncop.Runtime) -> None:
    op = make_op(runtime)
    op.cancel()
    with pytest.raises(Cancelled):
        op.token.check()


def test_on_cancel_does_not_run_before_the_cancel(runtime: asyncop.Runtime) -> None:
    calls: list[int] = []
    make_op(runtime).token.on_cancel(lambda: calls.append(1))
    assert calls == []


def test_on_cancel_runs_fn_with_no_arguments(runtime: asyncop.Runtime) -> None:
    calls: list[tuple[object, ...]] = []
    op = make_op(runtime)
    op.token.on_cancel(lambda *args: calls.append(args))
    op.cancel()
    assert calls == [()]


def test_on_cancel_runs_fn_once_even_if_cancelled_twice(runtime: asyncop.Runtime) -> None:
    calls: list[int] = []
    op = make_op(runtime)
    op.token.on_cancel(lambda: calls.append(1))
    op.cancel()
    op.cancel()
    assert calls == [1]


def test_on_cancel_runs_in_the_cancelling_thread(runtime: asyncop.Runtime) -> None:
    threads: list[int] = []
    op = make_op(runtime)
    op.token.on_cancel(lambda: threads.append(threading.get_ident()))
    canceller = cancel_in_thread(op)
    assert threads == [canceller]
    assert canceller != threading.get_ident()


def test_on_cancel_has_run_by_the_time_cancel_returns(runtime: asyncop.Runtime) -> None:
    calls: list[str] = []
    op = make_op(runtime)
    op.token.on_cancel(lambda: calls.append("ran"))
    op.cancel()
    calls.append("returned")
    assert calls == ["ran", "returned"]


def test_on_cancel_of_a_running_operation_runs_when_cancelled(
    runtime: asyncop.Runtime,
) -> None:
    registered = threading.Event()
    calls: list[int] = []

    def work() -> None:
        op = asyncop.current_operation()
        assert op is not None
        op.token.on_cancel(lambda: calls.append(threading.get_ident()))
        registered.set()
        op.token.wait(5)
        op.token.check()

    op = runtime.spawn(work)
    assert registered.wait(5)
    op.cancel()
    assert calls == [threading.get_ident()]
    assert op.wait(5).state is asyncop.OperationState.CANCELLED


def test_each_on_cancel_callback_runs(runtime: asyncop.Runtime) -> None:
    calls: list[str] = []
    op = make_op(runtime)
    op.token.on_cancel(lambda: calls.append("a"))
    op.token.on_cancel(lambda: calls.append("b"))
    op.cancel()
    assert sorted(calls) == ["a", "b"]


def test_handle_remove_returns_true_and_fn_never_runs(runtime: asyncop.Runtime) -> None:
    calls: list[int] = []
    op = make_op(runtime)
    handle = op.token.on_cancel(lambda: calls.append(1))
    assert handle.remove() is True
    op.cancel()
    assert calls == []


def test_handle_remove_takes_back_only_its_own_callback(runtime: asyncop.Runtime) -> None:
    calls: list[str] = []
    op = make_op(runtime)
    handle = op.token.on_cancel(lambda: calls.append("removed"))
    op.token.on_cancel(lambda: calls.append("kept"))
    handle.remove()
    op.cancel()
    assert calls == ["kept"]


def test_handle_remove_after_the_callback_ran_returns_false(runtime: asyncop.Runtime) -> None:
    calls: list[int] = []
    op = make_op(runtime)
    handle = op.token.on_cancel(lambda: calls.append(1))
    op.cancel()
    assert handle.remove() is False
    assert calls == [1]


def test_on_cancel_on_a_cancelled_token_runs_at_once_in_the_calling_thread(
    runtime: asyncop.Runtime,
) -> None:
    op = make_op(runtime)
    cancel_in_thread(op)
    threads: list[int] = []
    op.token.on_cancel(lambda: threads.append(threading.get_ident()))
    assert threads == [threading.get_ident()]


def test_on_cancel_with_a_non_callable_raises_type_error(runtime: asyncop.Runtime) -> None:
    op = make_op(runtime)
    with pytest.raises(TypeError):
        op.token.on_cancel(42)  # type: ignore[arg-type]


def test_on_cancel_with_a_non_callable_on_a_cancelled_token_raises_type_error(
    runtime: asyncop.Runtime,
) -> None:
    op = make_op(runtime)
    op.cancel()
    with pytest.raises(TypeError):
        op.token.on_cancel(None)  # type: ignore[arg-type]


def test_wait_returns_false_when_the_timeout_passes(runtime: asyncop.Runtime) -> None:
    assert make_op(runtime).token.wait(0.05) is False


def test_wait_returns_true_at_once_on_a_cancelled_token(runtime: asyncop.Runtime) -> None:
    op = make_op(runtime)
    op.cancel()
    assert op.token.wait(0) is True
    assert op.token.wait() is True


def test_wait_returns_true_once_cancelled_from_another_thread(
    runtime: asyncop.Runtime,
) -> None:
    op = make_op(runtime)
    waiting = threading.Event()
    got: list[bool] = []

    def waiter() -> None:
        waiting.set()
        got.append(op.token.wait(10))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(5)
    op.cancel()
    thread.join(5)
    assert not thread.is_alive()
    assert got == [True]


def test_wait_in_the_calling_thread_is_released_by_a_cancel_from_another_thread(
    runtime: asyncop.Runtime,
) -> None:
    op = make_op(runtime)
    timer = threading.Timer(0.02, op.cancel)
    timer.start()
    try:
        assert op.token.wait(10) is True
    finally:
        timer.join(5)


# -- the token is made on first use -------------------------------------------


def test_a_token_first_read_after_the_cancel_is_already_cancelled(
    runtime: asyncop.Runtime,
) -> None:
    op = make_op(runtime)
    op.cancel()
    token = op.token
    assert token.cancelled
    with pytest.raises(Cancelled):
        token.check()
    assert token.wait(0) is True


def test_an_operation_hands_out_the_same_token_every_time(runtime: asyncop.Runtime) -> None:
    op = make_op(runtime)
    assert op.token is op.token


def _read_token_in_four_threads(op: asyncop.AsyncOperation) -> list[CancelToken]:
    start = threading.Barrier(4)
    seen: list[CancelToken] = []

    def read() -> None:
        start.wait(5)
        seen.append(op.token)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    return seen


def test_threads_reading_a_new_token_together_all_get_the_same_one(
    runtime: asyncop.Runtime,
) -> None:
    for _ in range(50):
        op = make_op(runtime)
        seen = _read_token_in_four_threads(op)
        assert len(seen) == 4 and all(token is seen[0] for token in seen)
        fired: list[int] = []
        seen[0].on_cancel(lambda fired=fired: fired.append(1))
        op.cancel()
        assert fired == [1] and op.token.cancelled


def test_a_coroutine_that_never_reads_its_token_still_sees_the_cancel(
    vruntime: asyncop.Runtime,
) -> None:
    async def sleeper() -> None:
        await asyncop.sleep(3600)

    async def main() -> asyncop.OperationState:
        async with asyncop.scope() as scope:
            child = scope.spawn(sleeper)
            await asyncop.sleep(1)
            scope.cancel()
        assert child._token is None  # nothing asked for it: never made
        return child.state

    assert vruntime.run(main) is asyncop.OperationState.CANCELLED
