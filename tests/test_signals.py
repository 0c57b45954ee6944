"""open_signal_receiver: real signals, sent to this process and to a child.

The receivers are opened on the main thread (pytest's) around the runtime's
work, as users do; the ``rt`` fixture checks afterwards that no handler, child
process, descriptor, thread or registration is left behind.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop.process import DEVNULL, open_process
from asyncop.signals import SignalReceiver, open_signal_receiver
from asyncop.testing import wait_all_blocked
from tests._children import leak_checked_runtime

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[1]  # the checkout, for child interpreters

USR1, USR2 = signal.SIGUSR1, signal.SIGUSR2


@pytest.fixture
def rt() -> Iterator[asyncop.Runtime]:
    """A 2-worker runtime; afterwards nothing is left, and the handlers are as before."""
    handlers = {s: signal.getsignal(s) for s in (USR1, USR2, signal.SIGINT, signal.SIGTERM)}
    try:
        with leak_checked_runtime("sig") as runtime:
            yield runtime
    finally:
        changed = {s: signal.getsignal(s) for s in handlers}
        for signum, handler in handlers.items():
            signal.signal(signum, handler)  # even after a failure, for the next tests
    assert changed == handlers


async def take(received: SignalReceiver, count: int) -> list[int]:
    """The first ``count`` signals of ``received``."""
    got: list[int] = []
    async for signum in received:
        got.append(signum)
        if len(got) == count:
            break
    return got


def test_a_signal_sent_to_the_process_reaches_the_iterating_task(rt: asyncop.Runtime) -> None:
    async def main(received: SignalReceiver) -> list[int]:
        async with asyncop.scope() as s:
            reader = s.spawn(take, received, 1)
            await wait_all_blocked()  # parked on the receiver
            os.kill(os.getpid(), USR1)
        return reader.result()  # type: ignore[no-any-return]

    with open_signal_receiver(USR1) as received:
        got = rt.run(main, received)
    assert got == [USR1]
    assert isinstance(got[0], signal.Signals)


def test_the_handlers_are_ours_inside_the_block_and_restored_after(
    rt: asyncop.Runtime,
) -> None:
    seen: list[int] = []
    previous = signal.signal(USR1, lambda signum, frame: seen.append(signum))
    try:
        before = signal.getsignal(USR1)
        with open_signal_receiver(USR1, USR2):
            assert signal.getsignal(USR1) is not before
            assert signal.getsignal(USR2) is not signal.SIG_DFL
        assert signal.getsignal(USR1) is before
        assert signal.getsignal(USR2) == signal.SIG_DFL
        os.kill(os.getpid(), USR1)
        time.sleep(0.01)  # the handler runs at the next bytecode
        assert seen == [USR1]
    finally:
        signal.signal(USR1, previous)


def test_repeats_of_a_pending_signal_are_coalesced_in_arrival_order(
    rt: asyncop.Runtime,
) -> None:
    async def main(received: SignalReceiver) -> tuple[list[int], bool]:
        got = await take(received, 2)
        try:
            async with asyncop.scope(timeout=0.2):
                await received.__anext__()
            more = True
        except TimeoutError:
            more = False
        return got, more

    with open_signal_receiver(USR1, USR2) as received:
        for signum in (USR2, USR1, USR2, USR2, USR1):
            os.kill(os.getpid(), signum)
            time.sleep(0.01)  # handled before the next one is sent
        got, more = rt.run(main, received)
    assert got == [USR2, USR1]
    assert more is False


def test_sigint_becomes_an_item_instead_of_keyboard_interrupt(rt: asyncop.Runtime) -> None:
    async def main(received: SignalReceiver) -> list[int]:
        async with asyncop.scope() as s:
            reader = s.spawn(take, received, 1)
            await wait_all_blocked()
            os.kill(os.getpid(), signal.SIGINT)
        return reader.result()  # type: ignore[no-any-return]

    with open_signal_receiver(signal.SIGINT) as received:
        assert rt.run(main, received) == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_leaving_the_block_ends_the_iteration_of_a_parked_task(rt: asyncop.Runtime) -> None:
    async def forever(received: SignalReceiver) -> list[int]:
        return [signum async for signum in received]

    with open_signal_receiver(USR1) as received:
        reader = rt.spawn(forever, received)
        deadline = time.monotonic() + 10
        while rt.registrations() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # until the task is parked on the receiver
    assert reader.wait(10).value == []
    with pytest.raises(StopAsyncIteration):
        rt.run(received.__anext__)  # closed: iterating again ends at once


def test_unread_signals_go_to_the_restored_handler_on_exit(rt: asyncop.Runtime) -> None:
    seen: list[int] = []
    previous = signal.signal(USR1, lambda signum, frame: seen.append(signum))
    try:
        with open_signal_receiver(USR1):
            os.kill(os.getpid(), USR1)
            time.sleep(0.01)
            assert seen == []  # the receiver has it
        assert seen == [USR1]  # handed on as the block was left
    finally:
        signal.signal(USR1, previous)


def test_an_unread_sigint_is_raised_as_keyboard_interrupt_on_exit(rt: asyncop.Runtime) -> None:
    with pytest.raises(KeyboardInterrupt), open_signal_receiver(signal.SIGINT):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)


def test_a_task_opens_a_receiver_while_the_main_thread_waits_in_the_runtime(
    rt: asyncop.Runtime,
) -> None:
    # The main thread waits in rt.run(): it installs and restores the
    # handlers for the task, which gets the signals as the main thread would.
    async def in_a_task() -> list[int]:
        with open_signal_receiver(USR1, USR2) as received:
            assert signal.getsignal(USR1) != signal.SIG_DFL
            os.kill(os.getpid(), USR2)
            got = await take(received, 1)
        assert signal.getsignal(USR1) == signal.SIG_DFL
        assert signal.getsignal(USR2) == signal.SIG_DFL
        return got

    assert rt.run(in_a_task) == [USR2]
    assert signal.getsignal(USR1) == signal.SIG_DFL


def test_a_receiver_opened_in_a_task_hands_unread_signals_back_on_exit(
    rt: asyncop.Runtime,
) -> None:
    seen: list[int] = []
    previous = signal.signal(USR1, lambda signum, frame: seen.append(signum))
    try:

        async def in_a_task() -> None:
            with open_signal_receiver(USR1):
                signal.raise_signal(USR1)  # on this worker: the main thread runs the handler
                await asyncop.sleep(0.2)  # (the main thread notices within 50 ms)

        rt.run(in_a_task)
        deadline = time.monotonic() + 5
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)  # the redelivered signal runs the old handler here
    finally:
        signal.signal(USR1, previous)
    assert seen == [USR1]


def test_a_task_may_open_a_receiver_just_before_the_main_thread_waits_for_it(
    rt: asyncop.Runtime,
) -> None:
    # The main thread is on its way into op.wait() as the task asks it.
    async def in_a_task() -> list[int]:
        with open_signal_receiver(USR1) as received:
            os.kill(os.getpid(), USR1)
            return await take(received, 1)

    op = rt.spawn(in_a_task)
    time.sleep(0.05)
    assert op.wait(10).value == [USR1]
    assert signal.getsignal(USR1) == signal.SIG_DFL


def test_opening_where_the_main_thread_cannot_install_raises_runtime_error(
    rt: asyncop.Runtime,
) -> None:
    # A plain thread, while the main thread waits outside asyncop (join()).
    errors: list[BaseException] = []

    def in_a_thread() -> None:
        try:
            open_signal_receiver(USR1)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError)
    assert "main thread" in str(errors[0]) and "pass it to the task" in str(errors[0])
    assert signal.getsignal(USR1) == signal.SIG_DFL

    # A task of a runtime whose work the main thread does not wait for: it
    # is made here and entered there, where the main thread is busy.
    made = open_signal_receiver(USR1)
    entered = threading.Event()

    async def enter_it() -> None:
        try:
            with made:
                pass
        finally:
            entered.set()

    op = rt.spawn(enter_it)
    assert entered.wait(10)  # (a plain wait, not asyncop's: nobody installs)
    op.wait(10)
    with pytest.raises(RuntimeError, match="only on the main thread, which is not waiting"):
        op.result()
    assert signal.getsignal(USR1) == signal.SIG_DFL


@pytest.mark.parametrize(
    ("signals", "error", "words"),
    [
        ((), TypeError, "No signals were provided"),
        (("SIGTERM",), TypeError, "signal numbers"),
        ((USR1, signal.SIGKILL), ValueError, "SIGKILL"),
        ((USR1, 10_000), ValueError, "not a signal"),
    ],
)
def test_bad_signals_raise_before_any_handler_changes(
    rt: asyncop.Runtime, signals: tuple[Any, ...], error: type, words: str
) -> None:
    with pytest.raises(error, match=words):
        open_signal_receiver(*signals)
    assert signal.getsignal(USR1) == signal.SIG_DFL


def test_two_tasks_iterating_one_receiver_is_refused(rt: asyncop.Runtime) -> None:
    async def main(received: SignalReceiver) -> list[int]:
        async with asyncop.scope() as s:
            reader = s.spawn(take, received, 1)
            await wait_all_blocked()
            with pytest.raises(asyncop.BusyResourceError, match="already iterating"):
                await received.__anext__()
            os.kill(os.getpid(), USR1)
        return reader.result()  # type: ignore[no-any-return]

    with open_signal_receiver(USR1) as received:
        assert rt.run(main, received) == [USR1]


def test_misused_receivers_say_what_to_do(rt: asyncop.Runtime) -> None:
    received = open_signal_receiver(USR1)
    with pytest.raises(RuntimeError, match="not open"):
        rt.run(received.__anext__)
    with received, pytest.raises(RuntimeError, match="already entered"), received:
        pass
    assert "closed" in repr(received) and "SIGUSR1" in repr(received)


def test_a_cancelled_iteration_takes_no_signal(rt: asyncop.Runtime) -> None:
    async def main(received: SignalReceiver) -> list[int]:
        with pytest.raises(TimeoutError):
            async with asyncop.scope(timeout=0.05):
                await received.__anext__()
        os.kill(os.getpid(), USR2)
        return await take(received, 1)

    with open_signal_receiver(USR2) as received:
        assert rt.run(main, received) == [USR2]


CHILD = """
import signal, sys
import asyncop
from asyncop.signals import open_signal_receiver

async def main(received):
    print("ready", flush=True)
    async for signum in received:
        print("got", signum.name, flush=True)
        return 0

with asyncop.Runtime(2) as runtime:
    with open_signal_receiver(signal.SIGTERM) as received:
        sys.exit(runtime.run(main, received))
"""


def test_a_child_process_receives_sigterm_through_a_receiver(rt: asyncop.Runtime) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    async def main() -> tuple[bytes, int]:
        async with open_process([sys.executable, "-c", CHILD], stdin=DEVNULL, env=env) as child:
            assert child.stdout is not None
            assert await child.stdout.receive_until(b"\n", 100) == b"ready"
            child.terminate()
            line = await child.stdout.receive_until(b"\n", 100)
        return line, child.returncode or 0

    assert rt.run(main) == (b"got SIGTERM", 0)


def test_a_signal_landing_on_a_worker_thread_still_reaches_the_receiver(
    rt: asyncop.Runtime,
) -> None:
    # Only the main thread runs Python signal handlers. Delivered to a worker,
    # the signal only flags the main thread, which must notice while it waits
    # in runtime.run(), without the operation ending first.
    async def main(received: SignalReceiver) -> list[int]:
        async with asyncop.scope(timeout=10) as s:
            reader = s.spawn(take, received, 1)
            await wait_all_blocked()
            signal.pthread_kill(threading.get_ident(), USR1)  # this worker thread
        return reader.result()  # type: ignore[no-any-return]

    late: list[int] = []  # with the bug, the signal comes too late: it lands here
    previous = signal.signal(USR1, lambda signum, frame: late.append(signum))
    try:
        with open_signal_receiver(USR1) as received:
            assert rt.run(main, received) == [USR1]
    finally:
        signal.signal(USR1, previous)
    assert late == []


def test_two_signals_kept_pending_alternate_instead_of_starving(rt: asyncop.Runtime) -> None:
    got: list[int] = []
    with open_signal_receiver(USR1, USR2) as received:
        for _ in range(6):
            signal.raise_signal(USR1)  # handled here, on the main thread, at once
            signal.raise_signal(USR2)
            got.append(rt.run(received.__anext__))
        while len(got) < 7:  # the one left pending
            got.append(rt.run(received.__anext__))
    assert got == [USR1, USR2] * 3 + [USR1]


def test_a_signal_named_twice_is_caught_and_restored_once(rt: asyncop.Runtime) -> None:
    with open_signal_receiver(USR1, USR1, signal.Signals.SIGUSR1) as received:
        assert "SIGUSR1)" in repr(received)
    assert signal.getsignal(USR1) == signal.SIG_DFL


def test_unread_signals_redelivered_to_ignoring_or_raising_handlers(rt: asyncop.Runtime) -> None:
    previous = {s: signal.getsignal(s) for s in (USR1, USR2)}
    try:
        signal.signal(USR1, signal.SIG_IGN)
        with open_signal_receiver(USR1):
            signal.raise_signal(USR1)
        # Reaching this line is the test: SIG_IGN dropped it, nothing died.

        def raising(signum: int, frame: object) -> None:
            raise RuntimeError(signum)

        signal.signal(USR1, raising)
        signal.signal(USR2, raising)
        with pytest.raises(RuntimeError) as info, open_signal_receiver(USR1, USR2):
            signal.raise_signal(USR1)
            signal.raise_signal(USR2)
        # Every handler ran, each error chained to the one before.
        assert {info.value.args[0], info.value.__context__.args[0]} == {USR1, USR2}  # type: ignore[union-attr]
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
