"""asyncop.fs: whole-file reads and writes, run in a blocking-call thread."""

from __future__ import annotations

import pathlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop import Cancelled, OperationState
from asyncop.fs import read_bytes_async, read_text_async, write_bytes_async, write_text_async

pytestmark = pytest.mark.timeout(20)

PATH_TYPES: dict[str, Callable[[Path], Any]] = {"str": str, "Path": lambda p: p}


@pytest.mark.parametrize("kind", PATH_TYPES)
def test_bytes_round_trip(runtime: asyncop.Runtime, tmp_path: Path, kind: str) -> None:
    path = PATH_TYPES[kind](tmp_path / "data.bin")
    data = bytes(range(256)) * 1000

    async def main() -> bytes:
        await write_bytes_async(path, data)
        return await read_bytes_async(path)

    assert runtime.run(main) == data
    assert (tmp_path / "data.bin").read_bytes() == data


@pytest.mark.parametrize("kind", PATH_TYPES)
def test_text_round_trip(runtime: asyncop.Runtime, tmp_path: Path, kind: str) -> None:
    path = PATH_TYPES[kind](tmp_path / "text.txt")
    text = "héllo, мир, 世界\n" * 100

    async def main() -> str:
        await write_text_async(path, text)
        return await read_text_async(path)

    assert runtime.run(main) == text


def test_text_defaults_to_utf8(runtime: asyncop.Runtime, tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    runtime.run(write_text_async, path, "café")
    assert path.read_bytes() == "café".encode()


def test_write_text_uses_the_encoding_given(runtime: asyncop.Runtime, tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    runtime.run(write_text_async, path, "café", "latin-1")
    assert path.read_bytes() == b"caf\xe9"


def test_read_text_uses_the_encoding_given(runtime: asyncop.Runtime, tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes("café".encode())

    async def main() -> tuple[str, str]:
        as_utf8 = await read_text_async(path, encoding="utf-8")
        as_latin1 = await read_text_async(path, encoding="latin-1")
        return as_utf8, as_latin1

    assert runtime.run(main) == ("café", "cafÃ©")


def test_read_text_with_the_wrong_encoding_raises_unicode_decode_error(
    runtime: asyncop.Runtime, tmp_path: Path
) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes(b"caf\xe9")
    with pytest.raises(UnicodeDecodeError):
        runtime.run(read_text_async, path)


@pytest.mark.parametrize("helper", ["bytes", "text"])
def test_write_replaces_the_previous_contents(
    runtime: asyncop.Runtime, tmp_path: Path, helper: str
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"a much longer previous content")
    if helper == "bytes":
        runtime.run(write_bytes_async, path, b"new")
    else:
        runtime.run(write_text_async, path, "new")
    assert path.read_bytes() == b"new"


@pytest.mark.parametrize("helper", [read_bytes_async, read_text_async])
def test_reading_a_missing_file_raises_file_not_found_error(
    runtime: asyncop.Runtime, tmp_path: Path, helper: Any
) -> None:
    with pytest.raises(FileNotFoundError):
        runtime.run(helper, tmp_path / "missing")


@pytest.mark.parametrize(("helper", "data"), [(write_bytes_async, b"x"), (write_text_async, "x")])
def test_writing_into_a_missing_directory_raises_file_not_found_error(
    runtime: asyncop.Runtime, tmp_path: Path, helper: Any, data: Any
) -> None:
    with pytest.raises(FileNotFoundError):
        runtime.run(helper, tmp_path / "no" / "such" / "dir", data)


# ----------------------------------------------------------------------
# Where the blocking calls run
# ----------------------------------------------------------------------

# The helpers call these pathlib methods; patching them records the thread
# that makes the blocking call.
CALLS: dict[str, tuple[str, Callable[[Path], Any]]] = {
    "read_bytes_async": ("read_bytes", lambda p: read_bytes_async(p)),
    "read_text_async": ("read_text", lambda p: read_text_async(p)),
    "write_bytes_async": ("write_bytes", lambda p: write_bytes_async(p, b"data")),
    "write_text_async": ("write_text", lambda p: write_text_async(p, "data")),
}


@pytest.mark.parametrize("helper", CALLS)
def test_the_blocking_call_runs_in_another_thread_than_the_worker(
    runtime: asyncop.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helper: str
) -> None:
    method, call = CALLS[helper]
    path = tmp_path / "f"
    path.write_bytes(b"data")
    original = getattr(pathlib.Path, method)
    callers: list[threading.Thread] = []

    def recording(self: Path, *args: Any, **kwargs: Any) -> Any:
        callers.append(threading.current_thread())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, method, recording)
    task_threads: list[threading.Thread] = []

    async def main() -> None:
        task_threads.append(threading.current_thread())
        await call(path)
        task_threads.append(threading.current_thread())

    runtime.run(main)
    assert len(callers) == 1, f"{helper} did not call Path.{method}"
    caller = callers[0]
    assert caller not in task_threads
    assert caller is not threading.current_thread()
    assert caller.name.startswith(f"{runtime.name}-")


@pytest.mark.parametrize(
    ("helper", "method"), [(write_bytes_async, "write_bytes"), (write_text_async, "write_text")]
)
def test_a_cancel_during_a_slow_write_lets_it_finish_and_the_task_leaves_at_its_next_await(
    runtime: asyncop.Runtime,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    helper: Any,
    method: str,
) -> None:
    path = tmp_path / "slow"
    original = getattr(pathlib.Path, method)
    started = threading.Event()
    gate = threading.Event()

    def slow(self: Path, *args: Any, **kwargs: Any) -> Any:
        started.set()
        assert gate.wait(10), "the test never opened the gate"
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, method, slow)
    data: Any = b"complete" if method == "write_bytes" else "complete"
    log: list[str] = []

    async def writer() -> None:
        try:
            await helper(path, data)
            log.append("write returned")
            await asyncop.checkpoint()
            log.append("after checkpoint")
        except Cancelled:
            log.append("cancelled")
            raise

    op = runtime.spawn(writer)
    assert started.wait(5)
    op.cancel()
    # The blocking call is not a cancellation point: the task waits for it.
    with pytest.raises(TimeoutError):
        op.wait(0.1)
    assert log == []
    gate.set()
    assert op.wait(5).state is OperationState.CANCELLED
    assert log == ["write returned", "cancelled"]
    assert path.read_bytes() == b"complete"
