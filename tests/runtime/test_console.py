"""The live console: ``Runtime(console=PATH)`` serves read-only snapshots on a Unix socket."""

from __future__ import annotations

import json
import os
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def path(tmp_path: Path) -> Iterator[str]:
    # Short: a Unix socket's path takes at most 107 bytes.
    yield str(tmp_path / "c.sock")


class Client:
    """A client of the console protocol: one request line, one JSON line back."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(path)
        self.reader = self.sock.makefile("rb")

    def ask(self, request: bytes) -> dict[str, Any]:
        self.sock.sendall(request)
        line = self.reader.readline()
        assert line.endswith(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def names(answer: dict[str, Any]) -> list[list[str]]:
    return [[row["name"] for row in snap["operations"]] for snap in answer["runtimes"]]


async def parked() -> None:
    await asyncop.sleep_forever()


def console_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("asyncop-console")]


def test_the_socket_is_made_with_mode_0600_whatever_the_umask_and_removed_at_shutdown(
    path: str,
) -> None:
    old = os.umask(0)  # a umask that would leave a socket open to everyone
    try:
        rt = asyncop.Runtime(1, console=path, clock=VirtualClock())
    finally:
        os.umask(old)
    try:
        made = os.lstat(path)
        assert stat.S_ISSOCK(made.st_mode)
        assert stat.S_IMODE(made.st_mode) == 0o600
        assert made.st_uid == os.getuid()
        assert os.listdir(os.path.dirname(path)) == ["c.sock"]  # no helper directory left
    finally:
        assert rt.shutdown(timeout=10)
    assert not os.path.lexists(path)
    assert console_threads() == []


@pytest.mark.parametrize("what", ["file", "directory", "symlink"])
def test_a_path_that_exists_and_is_not_a_socket_is_refused_and_left_alone(
    path: str, what: str
) -> None:
    if what == "file":
        Path(path).write_text("precious")
    elif what == "directory":
        os.mkdir(path)
    else:
        os.symlink("/etc/passwd", path)
    before = os.lstat(path)
    with pytest.raises(FileExistsError, match="is not a socket; choose another path"):
        asyncop.Runtime(1, console=path, name="refused_console")
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode, after.st_mtime_ns) == (
        before.st_ino,
        before.st_mode,
        before.st_mtime_ns,
    )
    # The runtime made before the refusal stopped its threads.
    assert not [t for t in threading.enumerate() if t.name.startswith("refused_console-")]


def test_the_socket_of_a_program_still_serving_on_it_is_refused(path: str) -> None:
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(path)
    other.listen(1)
    try:
        with pytest.raises(FileExistsError, match="serving on it"):
            asyncop.Runtime(1, console=path)
        assert os.path.lexists(path)
    finally:
        other.close()


def test_a_stale_socket_left_by_an_ended_program_is_replaced(path: str) -> None:
    gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    gone.bind(path)
    gone.close()  # the file stays, and nobody listens: a program killed with -9
    with asyncop.Runtime(1, console=path, name="fresh", clock=VirtualClock()):
        client = Client(path)
        assert client.ask(b"hello\n")["runtimes"] == ["fresh"]
        client.close()
    assert not os.path.lexists(path)


def test_the_environment_variable_gives_every_runtime_its_console(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASYNCOP_CONSOLE", path)
    with (
        asyncop.Runtime(1, name="first", clock=VirtualClock()) as first,
        asyncop.Runtime(1, name="second", clock=VirtualClock()) as second,
    ):
        client = Client(path)
        answer = client.ask(b"snapshot\n")
        assert [snap["name"] for snap in answer["runtimes"]] == ["first", "second"]
        first.shutdown()
        assert os.path.lexists(path)  # the second runtime still serves on it
        assert client.ask(b"hello\n")["runtimes"] == ["second"]
        client.close()
        second.shutdown()
        assert not os.path.lexists(path)


def test_the_protocol_answers_each_request_line_with_one_json_line(path: str) -> None:
    with asyncop.Runtime(1, console=path, name="served", clock=VirtualClock()) as rt:
        op = rt.spawn(parked, name="parked")
        until = time.monotonic() + 10
        while "waiting on" not in rt.dump() and time.monotonic() < until:
            time.sleep(0.001)  # until the task is parked, as the dump below shows it
        client = Client(path)
        hello = client.ask(b"hello\n")
        assert hello == {
            "protocol": 1,
            "pid": os.getpid(),
            "path": path,
            "runtimes": ["served"],
            "requests": ["hello", "snapshot", "dump"],
        }
        # Two requests in one write are answered in order.
        client.sock.sendall(b"snapshot\r\ndump\n")
        snapshot = json.loads(client.reader.readline())
        dump = json.loads(client.reader.readline())
        assert names(snapshot) == [["parked"]]
        assert snapshot["runtimes"][0]["operations"][0]["kind"] == "task"
        first, second = dump["text"].splitlines()[:2]
        assert first == "served:"
        assert second.startswith(f"  parked [RUNNING] {__file__}:{op.lineno} waiting on ")
        assert "unknown request 'cancel'" in client.ask(b"cancel\n")["error"]
        assert op.state is asyncop.OperationState.RUNNING  # nothing a client says changes it
        client.sock.sendall(b"x" * 2000)
        assert "at most 1024 bytes" in json.loads(client.reader.readline())["error"]
        assert client.reader.readline() == b""  # and closed
        client.close()
        op.cancel()


def test_a_client_past_the_most_served_at_once_is_told_so(path: str) -> None:
    with asyncop.Runtime(1, console=path, clock=VirtualClock()):
        clients = [Client(path) for _ in range(16)]
        for client in clients:
            client.ask(b"hello\n")  # each one is being served
        extra = Client(path)
        answer = json.loads(extra.reader.readline())
        assert answer["error"] == ("the console serves at most 16 clients at once; try again later")
        extra.close()
        clients.pop().close()
        wait = time.monotonic() + 10
        while True:  # its slot frees once the console sees it closed
            again = Client(path)
            try:
                if "error" not in again.ask(b"hello\n"):
                    break
            except (AssertionError, OSError):
                pass
            finally:
                again.close()
            assert time.monotonic() < wait
            time.sleep(0.02)
        for client in clients:
            client.close()


def test_the_console_answers_while_a_step_holds_every_worker(path: str) -> None:
    started = threading.Event()

    async def hog() -> None:
        started.set()
        time.sleep(1.5)  # never awaits: no task of this runtime can run meanwhile

    with asyncop.Runtime(1, console=path, name="hogged") as rt:
        op = rt.spawn(hog, name="hog")
        assert started.wait(10)
        client = Client(path)
        end = time.monotonic() + 5
        while True:
            snap = client.ask(b"snapshot\n")["runtimes"][0]
            if snap["warnings"] or time.monotonic() > end:
                break
            time.sleep(0.05)
        assert not op.done, "the console waited for the step to end"
        assert snap["operations"][0]["on_thread"] == "hogged-worker-1"
        assert "task 'hog' has run for" in snap["warnings"][0]
        client.close()
        op.wait(10)


def _cpu_time(thread: threading.Thread) -> float:
    assert thread.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


@pytest.mark.skipif(not hasattr(time, "pthread_getcpuclockid"), reason="no per-thread CPU clock")
def test_the_console_costs_nothing_while_no_client_is_connected(path: str) -> None:
    with asyncop.Runtime(1, clock=VirtualClock()):
        assert console_threads() == []  # no console asked for: no thread
    with asyncop.Runtime(1, console=path, clock=VirtualClock()):
        (thread,) = console_threads()
        client = Client(path)
        client.ask(b"snapshot\n")
        client.close()
        time.sleep(0.1)
        before = _cpu_time(thread)
        time.sleep(1.0)
        # Parked in select without a timeout: no tick, no polling.
        assert _cpu_time(thread) - before < 0.005


def _as_nobody(path: str) -> int:
    """Connect to ``path`` as user "nobody" in a child; its exit code says what happened.

    3: the connection was refused; 4: the console answered that it serves
    only its own user; 1: anything else. The child calls nothing that a lock
    held by another thread at the fork could block.
    """
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 1
        try:
            os.setuid(65534)
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            probe.settimeout(5)
            probe.connect(path)
            # (A refusal comes at once, before any request.)
            if b"serves only the user running the program" in probe.recv(4096):
                status = 4
        except PermissionError:
            status = 3
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to become another user")
def test_another_user_cannot_connect_nor_read_a_snapshot() -> None:
    # In a directory everyone may enter: the socket's own mode must stop them.
    directory = tempfile.mkdtemp(dir="/tmp")
    os.chmod(directory, 0o755)
    path = os.path.join(directory, "c.sock")
    try:
        with asyncop.Runtime(1, console=path, clock=VirtualClock()):
            assert _as_nobody(path) == 3
            # Even if someone widens the socket's mode, the console checks who asks.
            os.chmod(path, 0o666)
            assert _as_nobody(path) == 4
    finally:
        os.rmdir(directory)
