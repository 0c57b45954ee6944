"""Signals and files, from the cases of trio's and anyio's signal tests and
of their file tests (trio's test_file_io and test_path, anyio's test_fileio),
mapped to asyncop.signals and asyncop.fs.

Deliberate differences, which these tests follow:
- asyncop.fs has whole-file helpers only (read/write bytes or text), run
  through spawn_blocking: there is no async file object to open, iterate or
  close, and no async Path, so the cases about those have no counterpart;
- a receiver iterated after its block has ended stops the iteration
  (trio raises RuntimeError there), since the block and the loop run on
  different threads.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop import OperationState
from asyncop.fs import read_bytes_async, read_text_async, write_bytes_async, write_text_async
from asyncop.signals import SignalReceiver, open_signal_receiver

pytestmark = pytest.mark.timeout(30)

USR1, USR2 = signal.SIGUSR1, signal.SIGUSR2


@pytest.fixture
def handlers() -> Iterator[None]:
    """Put the handlers of the signals used back as they were, even after a failure."""
    before = {s: signal.getsignal(s) for s in (USR1, USR2, signal.SIGINT)}
    yield
    after = {s: signal.getsignal(s) for s in before}
    for signum, handler in before.items():
        signal.signal(signum, handler)
    assert after == before


async def take(received: SignalReceiver, count: int) -> list[signal.Signals]:
    got: list[signal.Signals] = []
    async for signum in received:
        got.append(signum)
        if len(got) == count:
            break
    return got


# -- signals -----------------------------------------------------------------------


def test_several_signals_arrive_once_each_in_first_arrival_order(
    runtime: asyncop.Runtime, handlers: None
) -> None:
    with open_signal_receiver(USR1, USR2) as received:
        for signum in (USR2, USR1, USR2, USR2, USR1):
            os.kill(os.getpid(), signum)
        assert runtime.run(take, received, 2) == [USR2, USR1]
        # Nothing more is pending: the repeats were coalesced.
        assert "0 pending" in repr(received)


def test_a_custom_handler_is_put_back_after_the_block(
    runtime: asyncop.Runtime, handlers: None
) -> None:
    seen: list[int] = []

    def mine(signum: int, frame: object) -> None:
        seen.append(signum)

    previous = signal.signal(USR1, mine)
    try:
        with open_signal_receiver(USR1) as received:
            assert signal.getsignal(USR1) is not mine
            os.kill(os.getpid(), USR1)
            assert runtime.run(take, received, 1) == [USR1]
        assert signal.getsignal(USR1) is mine
        assert seen == []  # read by the receiver, so not handed back
        os.kill(os.getpid(), USR1)
        assert seen == [USR1]
    finally:
        signal.signal(USR1, previous)


def test_a_cancelled_wait_takes_no_signal_and_a_later_wait_gets_it(
    runtime: asyncop.Runtime, handlers: None
) -> None:
    async def wait_briefly(received: SignalReceiver) -> str:
        async with asyncop.move_on_after(0.05):
            async for signum in received:
                return signum.name
        return "timed out"

    with open_signal_receiver(USR1) as received:
        assert runtime.run(wait_briefly, received) == "timed out"
        os.kill(os.getpid(), USR1)
        assert runtime.run(wait_briefly, received) == "SIGUSR1"


def test_sigint_in_the_block_is_an_item_and_not_keyboard_interrupt(
    runtime: asyncop.Runtime, handlers: None
) -> None:
    with open_signal_receiver(signal.SIGINT) as received:
        os.kill(os.getpid(), signal.SIGINT)
        assert runtime.run(take, received, 1) == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_receiver_opened_on_a_plain_thread_is_refused_at_once(handlers: None) -> None:
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            with open_signal_receiver(USR1):
                pass
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=opener, name="not-main")
    thread.start()
    thread.join(10)
    assert len(errors) == 1
    assert "'not-main'" in str(errors[0]) and "main thread" in str(errors[0])


def test_a_receiver_is_entered_once_and_says_so(handlers: None) -> None:
    receiver = open_signal_receiver(USR1)
    assert "new" in repr(receiver)
    with receiver:
        assert "open" in repr(receiver)
    assert "closed" in repr(receiver)
    with pytest.raises(RuntimeError, match="already entered"), receiver:
        pass


# -- files -------------------------------------------------------------------------


def test_a_task_cancelled_before_a_write_never_touches_the_file(
    runtime: asyncop.Runtime, tmp_path: Path
) -> None:
    path = tmp_path / "kept"
    path.write_bytes(b"old")

    async def writer() -> None:
        asyncop.current_operation().cancel()  # type: ignore[union-attr]
        await write_bytes_async(path, b"new")

    assert runtime.spawn(writer).wait(5).state is OperationState.CANCELLED
    assert path.read_bytes() == b"old"


@pytest.mark.parametrize(
    ("helper", "data"), [(write_bytes_async, "text, not bytes"), (write_text_async, b"bytes")]
)
def test_data_of_the_wrong_type_is_refused_before_the_file_is_emptied(
    runtime: asyncop.Runtime, tmp_path: Path, helper: Any, data: Any
) -> None:
    path = tmp_path / "kept"
    path.write_bytes(b"old")
    with pytest.raises(TypeError):
        runtime.run(helper, path, data)
    assert path.read_bytes() == b"old"


@pytest.mark.parametrize("data", [bytearray(b"abc"), memoryview(b"abc")])
def test_any_bytes_like_object_is_written(
    runtime: asyncop.Runtime, tmp_path: Path, data: bytes
) -> None:
    runtime.run(write_bytes_async, tmp_path / "f", data)
    assert (tmp_path / "f").read_bytes() == b"abc"


@pytest.mark.parametrize("helper", [read_bytes_async, read_text_async])
def test_errors_name_the_path(runtime: asyncop.Runtime, tmp_path: Path, helper: Any) -> None:
    with pytest.raises(FileNotFoundError) as missing:
        runtime.run(helper, tmp_path / "missing")
    assert missing.value.filename == str(tmp_path / "missing")
    with pytest.raises(IsADirectoryError) as folder:
        runtime.run(helper, tmp_path)
    assert folder.value.filename == str(tmp_path)


def test_a_bytes_path_is_refused_with_a_type_error(
    runtime: asyncop.Runtime, tmp_path: Path
) -> None:
    with pytest.raises(TypeError):
        runtime.run(read_bytes_async, os.fsencode(tmp_path / "f"))  # type: ignore[arg-type]


def test_many_files_read_and_written_at_once(runtime: asyncop.Runtime, tmp_path: Path) -> None:
    async def copy(i: int) -> str:
        await write_text_async(tmp_path / f"{i}.txt", f"file {i}\n")
        return await read_text_async(tmp_path / f"{i}.txt")

    async def main() -> list[str]:
        async with asyncop.scope() as s:
            ops = [s.spawn(copy, i) for i in range(100)]
        return [op.result() for op in ops]

    assert runtime.run(main) == [f"file {i}\n" for i in range(100)]
