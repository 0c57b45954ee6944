"""Child processes as operations: spawn, talk over pipes, wait, and never leak.

Why it looks like this
----------------------
A child process is a resource that outlives any Python object: when a
program forgets one, it keeps running, and when it has exited and nobody
reaps it, it stays in the process table as a zombie. Structured concurrency
promises that an operation does not end before the work it started, so the
rule here is strict: **an operation that waits for a process ends only when
that process has been reaped**, whether the wait ended normally, by a
failure, or by a cancel.

Cancelling a wait therefore does not abandon the child. It asks it to stop
(``SIGTERM``), gives it ``kill_grace`` seconds to clean up, then kills it
(``SIGKILL``), and waits for it to be gone, all inside a shielded scope so
that the cancel that started the stop cannot interrupt it. Only then does the
``Cancelled`` go on. This is trio's ``run_process`` policy; the grace period
is settable per process.

Waiting without a thread
------------------------
On Linux, ``os.pidfd_open(pid)`` gives a descriptor that becomes readable
when the process exits, so waiting for a process is one ``await
readable(pidfd)`` in the same multiplexer as the sockets: no thread per
process. After it fires, ``Popen.poll()`` reaps the child (``waitpid`` with
``WNOHANG``), which also sets ``Popen.returncode``; the pidfd is closed
after that. ``subprocess.Popen`` only reaps in ``poll()`` and ``wait()``, so
nothing else steals the exit status from us. Where there is no pidfd (other
systems, old kernels, sandboxes that forbid it) one blocking-call thread per
waiting process runs ``Popen.wait()``; it is abandoned on cancel and ends
by itself once the killed process is reaped.

Several tasks may wait for one process; an ``asyncop.Lock`` lets one of them
watch the pidfd at a time (the reactor takes one waiter per descriptor), and
the others find the exit status when they get the lock.

Pipes
-----
The pipes to the child are made here (``os.pipe``), not by ``Popen``, so the
parent's ends are raw non-blocking descriptors from the start. Each is a
:class:`PipeStream`, which is the socket streams' own implementation
(``asyncop.net``'s ``DescriptorStream``) over ``os.read``/``os.write``: the
same buffered ``receive_until``/``receive_exactly``, the same
``BusyResourceError`` for two tasks in one direction, the same
cancellation points and the same errors (``IncompleteRead``,
``DelimiterNotFound``, ``BrokenResourceError`` when the process closed its
end, ``ClosedResourceError`` after ``aclose``), as trio's process pipes and
sockets are all ``trio.abc.Stream`` objects. Closing a stream calls
``notify_closing`` first, so a task parked on it wakes with
``ClosedResourceError`` instead of waiting on a number the OS may reuse.

Starting
--------
``open_process()`` starts the process in the call and returns the
``Process``, so it works the same from a task or a plain thread, and a
``Process`` awaited gives itself without suspending: trio and anyio spell
it ``process = await open_process(...)``, and code written for them runs
unchanged. The await is deliberately no cancellation point: the process is
running by then, and raising there would leave it to nobody.
``run_process()`` does checkpoint before it starts anything, so a cancelled
task starts no process.

Commands follow trio's rules: with ``shell=False`` (the default) the command
is a sequence ``[program, arg, ...]`` and a string is refused, because a
string would silently be taken as the name of one program; with
``shell=True`` it is one string for ``/bin/sh -c``.
"""

from __future__ import annotations

import enum
import errno
import functools
import os
import subprocess
import warnings
from collections.abc import Callable, Generator, Sequence
from typing import IO, Any, Final, final

from ..operations import BrokenResourceError, Cancelled
from ..platform import check_timeout
from ._awaitables import checkpoint, readable
from ._blocking import spawn_blocking
from ._scope import scope
from ._start import TASK_STATUS_IGNORED, TaskStatus
from ._streams import DescriptorStream, close_fd
from ._sync import Lock

__all__ = ["PipeStream", "Process", "open_process", "run_process"]

PIPE: Final = subprocess.PIPE
DEVNULL: Final = subprocess.DEVNULL
STDOUT: Final = subprocess.STDOUT

# Linux's pidfd lets the multiplexer watch for the exit; tests turn it off to
# cover the thread fallback that other systems use.
use_pidfd: bool = hasattr(os, "pidfd_open")


Command = str | bytes | os.PathLike[str] | os.PathLike[bytes] | Sequence[Any]
StdSpec = int | IO[Any] | None


# -- pipe streams -----------------------------------------------------------------


def _closed_io(*args: object) -> Any:
    """What a closed pipe's read and write become: never touch a number the OS may reuse."""
    raise OSError(errno.EBADF, os.strerror(errno.EBADF))


@final
class _Descriptor:
    """A descriptor number that reads -1 once closed: what a pipe stream waits on.

    Separate from the stream so that the stream holds no reference to
    itself, and an unwaited process's pipes are closed as soon as they are
    dropped.
    """

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


@final
class PipeStream(DescriptorStream):
    """One end of an OS pipe as a byte stream: the write end or the read end.

    The same stream as ``asyncop.net.SocketStream`` (both are
    ``asyncop.net.Stream`` objects): ``receive_some``, ``receive_exactly``,
    ``receive_until``, ``async for``, ``send_all``, ``send_eof`` and
    ``aclose`` behave, and fail, alike. The read end receives and the write
    end sends; the other direction raises RuntimeError. ``Process.stdin``
    is a write end, ``stdout`` and ``stderr`` are read ends. The stream
    owns the descriptor and switches it to non-blocking mode.
    """

    __slots__ = ("_end", "_name", "_writable")

    def __init__(self, fd: int, *, writable: bool, name: str | None = None) -> None:
        """Wrap ``fd``, which the stream then owns and closes.

        Args:
            fd: an open pipe descriptor.
            writable: True for a write end, False for a read end.
            name: shown in ``repr`` and error messages.
        """
        os.set_blocking(fd, False)
        self._end = _Descriptor(fd)
        self._writable = writable
        self._name = name if name is not None else f"fd {fd}"
        what = f"pipe ({self._name})"
        self._init_stream(
            what,
            self._end,
            functools.partial(os.read, fd),
            functools.partial(os.write, fd),
            (what, "the process exited or closed its end; check await process.wait()"),
        )

    def __repr__(self) -> str:
        fd = self._end.fd
        state = f"fd {fd}" if fd >= 0 else "closed"
        end = "write end" if self._writable else "read end"
        return f"<PipeStream {self._name} ({end}, {state})>"

    def fileno(self) -> int:
        """The descriptor, or -1 once closed."""
        return self._end.fd

    def _check_receive(self) -> None:
        if self._writable:
            raise RuntimeError(
                f"{self._name} is the write end of a pipe and cannot receive; "
                "receive from the process through its stdout or stderr stream instead"
            )
        super()._check_receive()

    def _check_send(self) -> None:
        self._refuse_read_end("send_all()")
        super()._check_send()

    def _check_eof(self) -> None:
        self._refuse_read_end("send_eof()")
        super()._check_eof()

    def _refuse_read_end(self, what: str) -> None:
        if not self._writable:
            raise RuntimeError(
                f"{what} on {self._name}, which is the read end of a pipe; "
                "send to the process through its stdin stream instead"
            )

    def _shut_write(self) -> None:
        """For a pipe, the end of the data is the close of the write end."""
        self._release()

    def _release(self) -> None:
        fd = self._end.fd
        if fd < 0:
            return
        self._end.fd = -1
        self._recv = self._send = _closed_io
        close_fd(fd)

    def __del__(self) -> None:
        # An unreachable stream no task can wait on: closing is all there is.
        end = getattr(self, "_end", None)
        if end is not None and end.fd >= 0:
            os.close(end.fd)


# -- processes --------------------------------------------------------------------


@final
class Process:
    """A child process started by ``open_process``.

    ``stdin``, ``stdout`` and ``stderr`` are :class:`PipeStream` objects for
    the streams opened with ``PIPE``, otherwise None. ``async with process:``
    closes the pipes on the way out and waits for the process to exit; a
    cancel there stops it as ``wait()`` does.
    """

    __slots__ = (
        "_kill_grace",
        "_pidfd",
        "_popen",
        "_wait_lock",
        "args",
        "stderr",
        "stdin",
        "stdout",
    )

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: PipeStream | None,
        stdout: PipeStream | None,
        stderr: PipeStream | None,
        kill_grace: float | None,
    ) -> None:
        self._popen = popen
        self.args = popen.args
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self._kill_grace = kill_grace
        self._wait_lock = Lock(name=f"wait lock of process {popen.pid}")
        self._pidfd = -1
        if use_pidfd:
            try:
                # Valid for a zombie too: nobody but us reaps this pid.
                self._pidfd = os.pidfd_open(popen.pid)
            except OSError:
                pass  # ENOSYS or a sandbox: the thread fallback

    def __repr__(self) -> str:
        code = self._popen.returncode
        if code is None:
            state = f"running with PID {self._popen.pid}"
        elif code < 0:
            state = f"exited with signal {-code}"
        else:
            state = f"exited with status {code}"
        return f"<Process {self.args!r}: {state}>"

    @property
    def pid(self) -> int:
        """The process id."""
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        """The exit status, or None while the process runs.

        Negative ``-N`` means the process was ended by signal ``N``. Reading
        it reaps a process that has exited.
        """
        return self._popen.poll()

    def poll(self) -> int | None:
        """The exit status, or None while the process runs; the same as ``returncode``."""
        return self._popen.poll()

    def send_signal(self, sig: int) -> None:
        """Send signal ``sig`` to the process; nothing if it was already reaped."""
        self._popen.send_signal(sig)

    def terminate(self) -> None:
        """Ask the process to stop (``SIGTERM``); nothing if it was already reaped."""
        self._popen.terminate()

    def kill(self) -> None:
        """Kill the process (``SIGKILL``); nothing if it was already reaped."""
        self._popen.kill()

    # -- waiting --------------------------------------------------------------

    async def wait(self) -> int:
        """Wait until the process exits and is reaped; return its exit status.

        A cancellation point. Cancelling the wait stops the process: it gets
        ``SIGTERM``, then ``SIGKILL`` if it is still alive after
        ``kill_grace`` seconds, and the wait raises ``Cancelled`` only once
        the process has been reaped. Several tasks may wait at once.

        Returns:
            The exit status; ``-N`` when signal ``N`` ended the process.

        Raises:
            Cancelled: the task was cancelled; the process was stopped and reaped.
        """
        try:
            # The checkpoint comes first: once the process is reaped, its
            # status is handed over even if a cancel arrives in between.
            await checkpoint()
            return await self._reap()
        except Cancelled:
            await self._stop()
            raise

    async def _reap(self) -> int:
        """Wait for the exit and reap the process; one task watches at a time."""
        popen = self._popen
        async with self._wait_lock:
            while True:
                code = popen.poll()
                if code is not None:
                    self._close_pidfd()
                    return code
                if self._pidfd >= 0:
                    await readable(self._pidfd)
                else:
                    # Abandoned on cancel: the thread returns once the process
                    # that the cancel goes on to kill has been reaped.
                    await spawn_blocking(popen.wait, abandon=True)

    async def _stop(self) -> None:
        """Terminate, kill after the grace period, and reap; immune to the cancel.

        The signal goes out before the wait lock is taken: another task may
        hold the lock, waiting for the very exit this signal brings about.
        """
        async with scope(shield=True, name=f"stopping process {self.pid}"):
            if self._popen.poll() is None:
                grace = self._kill_grace
                if grace != 0.0 and self._signal_or_warn(self.terminate):
                    try:
                        async with scope(timeout=grace):
                            await self._reap()
                    except TimeoutError:
                        warnings.warn(
                            f"{self!r} ignored SIGTERM for {grace:g} s after a cancel; "
                            "it was killed with SIGKILL (set kill_grace to wait longer)",
                            RuntimeWarning,
                            stacklevel=1,
                        )
                if self._popen.poll() is None:
                    self._signal_or_warn(self.kill)
            await self._reap()

    def _signal_or_warn(self, send: Callable[[], None]) -> bool:
        """Send a stop signal; a failure is a warning, not a reason to leave the process."""
        try:
            send()
        except OSError as exc:
            then = "waiting for it anyway" if send == self.kill else "killing it instead"
            warnings.warn(
                f"{send.__name__}() on {self!r} failed after a cancel ({exc}); {then}",
                RuntimeWarning,
                stacklevel=1,
            )
            return False
        return True

    def _close_pidfd(self) -> None:
        fd = self._pidfd
        if fd >= 0:
            self._pidfd = -1
            close_fd(fd)

    # -- closing --------------------------------------------------------------

    def _close_pipes(self) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                stream.close()

    async def aclose(self) -> None:
        """Close the pipes, then wait for the process to exit (see ``wait``).

        A cancellation point: a cancel stops the process as ``wait()`` does.
        """
        self._close_pipes()
        await self.wait()

    async def __aenter__(self) -> Process:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __await__(self) -> Generator[Any, None, Process]:
        """``await open_process(...)``, as trio and anyio write it, gives the process.

        It does not wait for the process to exit: that is ``wait()``. Not a
        cancellation point (the process is running already, and is yours).
        """
        return self
        yield  # a generator that never suspends

    def __del__(self) -> None:
        fd = getattr(self, "_pidfd", -1)
        if fd >= 0:
            os.close(fd)


# -- starting ----------------------------------------------------------------------


def _check_command(command: object, shell: bool, what: str) -> None:
    text = isinstance(command, str | bytes)
    if shell and not text:
        raise TypeError(
            f"{what} got shell=True and a {type(command).__name__} command; pass one "
            "string for /bin/sh when shell=True, e.g. 'ls -l | wc -l'"
        )
    if not shell:
        if text:
            raise TypeError(
                f"{what} got the string {command!r} as its command; pass a list such as "
                "['ls', '-l'], or shell=True to run the string through /bin/sh"
            )
        if isinstance(command, os.PathLike):
            return
        if not isinstance(command, Sequence):
            raise TypeError(
                f"{what} needs its command as a list of strings, got "
                f"{type(command).__name__}; pass e.g. ['ls', '-l']"
            )
        if len(command) == 0:
            raise ValueError(f"{what} got an empty command; pass at least the program to run")


def _pipe_pair(child_reads: bool) -> tuple[int, int]:
    """Make a pipe; returns ``(parent_end, child_end)``."""
    read_end, write_end = os.pipe()
    return (write_end, read_end) if child_reads else (read_end, write_end)


def open_process(
    command: Command,
    *,
    stdin: StdSpec = PIPE,
    stdout: StdSpec = PIPE,
    stderr: StdSpec = PIPE,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    kill_grace: float | None = 5.0,
    shell: bool = False,
) -> Process:
    """Start a child process and return it at once.

    Use ``async with open_process(...) as process:``, which closes the pipes
    and waits for the process on the way out, or wait for it yourself with
    ``await process.wait()``. ``process = await open_process(...)``, as trio
    and anyio write it, works too: a ``Process`` awaited gives itself. Not a
    cancellation point: the process is started, and yours to wait for.

    Args:
        command: ``[program, arg, ...]``; with ``shell=True``, one string for
            ``/bin/sh -c``.
        stdin, stdout, stderr: ``PIPE`` (the default) gives the process a
            pipe, reachable as ``process.stdin`` (a stream to send on) and
            ``process.stdout``/``process.stderr`` (streams to receive
            from). Anything ``subprocess.Popen`` takes works too:
            ``DEVNULL``, None (inherit ours), a descriptor or a file, and
            ``stderr=STDOUT``.
        cwd, env: as for ``subprocess.Popen``.
        kill_grace: seconds between ``SIGTERM`` and ``SIGKILL`` when a wait
            for the process is cancelled; 0 kills at once, None or ``inf``
            never kills.
        shell: run ``command`` through ``/bin/sh``.

    Raises:
        TypeError: a string command without ``shell=True``, or a list with it.
        ValueError: an empty command, or a NaN ``kill_grace``.
        OSError: the program cannot be started (``FileNotFoundError`` when
            it does not exist); nothing is left open.
    """
    return _spawn(
        _check_options(
            "open_process()", command, stdin, stdout, stderr, cwd, env, kill_grace, shell
        )
    )


def _check_options(
    what: str,
    command: Command,
    stdin: StdSpec,
    stdout: StdSpec,
    stderr: StdSpec,
    cwd: str | os.PathLike[str] | None,
    env: dict[str, str] | None,
    kill_grace: float | None,
    shell: bool,
) -> dict[str, Any]:
    """Check what a process is started with, before anything happens; the ``_spawn`` kwargs."""
    grace = check_timeout(kill_grace, f"{what[:-2]}(kill_grace=...)")
    _check_command(command, shell, what)
    if stdout == STDOUT:
        raise ValueError(f"{what} got stdout=STDOUT, which means nothing; pass PIPE")
    return {
        "command": command,
        "stdin": stdin,
        "stdout": stdout,
        "stderr": stderr,
        "cwd": cwd,
        "env": env,
        "kill_grace": grace,
        "shell": shell,
    }


def _spawn(options: dict[str, Any]) -> Process:
    """Start the process with our own pipes for the streams given as ``PIPE``.

    ``options`` are what ``_check_options`` returned.
    """
    parent: dict[str, int] = {}
    child: dict[str, int] = {}
    specs: dict[str, Any] = {name: options[name] for name in ("stdin", "stdout", "stderr")}
    try:
        for name, spec in specs.items():
            if spec == PIPE:
                parent[name], child[name] = _pipe_pair(child_reads=name == "stdin")
                specs[name] = child[name]
        # (**specs holds no 'text': the pipes carry bytes.)
        popen: subprocess.Popen[bytes] = subprocess.Popen(  # pyright: ignore[reportAssignmentType]
            options["command"],
            shell=options["shell"],
            cwd=options["cwd"],
            env=options["env"],
            **specs,
        )
    except BaseException:
        for fd in (*parent.values(), *child.values()):
            os.close(fd)
        raise
    for fd in child.values():
        os.close(fd)  # the child has its copies; ours would hide its EOF

    def stream(name: str) -> PipeStream | None:
        if name not in parent:
            return None
        return PipeStream(parent[name], writable=name == "stdin", name=f"{name} of {popen.pid}")

    grace = options["kill_grace"]
    return Process(popen, stream("stdin"), stream("stdout"), stream("stderr"), grace)


class _Default(enum.Enum):
    """The value of a ``run_process`` stream argument that was not given."""

    DEFAULT = "default"


_DEFAULT: Final = _Default.DEFAULT
_BYTES = (bytes, bytearray, memoryview)


async def run_process(
    command: Command,
    *,
    input: bytes | bytearray | memoryview | None = None,
    check: bool = True,
    capture_stdout: bool = True,
    capture_stderr: bool = True,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    kill_grace: float | None = 5.0,
    shell: bool = False,
    stdin: bytes | bytearray | memoryview | StdSpec | _Default = _DEFAULT,
    stdout: StdSpec | _Default = _DEFAULT,
    stderr: StdSpec | _Default = _DEFAULT,
    task_status: TaskStatus[Process] = TASK_STATUS_IGNORED,
) -> subprocess.CompletedProcess[bytes]:
    """Run a command to completion and return what it did.

    Feeding ``input`` and reading the output run concurrently, so a process
    that writes much before it reads cannot deadlock. A cancellation point:
    a cancel stops the process (``SIGTERM``, then ``SIGKILL`` after
    ``kill_grace`` seconds) and raises ``Cancelled`` only once it has been
    reaped.

    Args:
        command: ``[program, arg, ...]``; with ``shell=True``, one string.
        input: bytes for the process's stdin, which is then closed. Without
            it the process reads an empty stdin (``/dev/null``), not ours.
        check: raise ``CalledProcessError`` when the exit status is not 0.
        capture_stdout, capture_stderr: collect the stream into the result;
            when False the process writes to ours.
        cwd, env, kill_grace, shell: as for ``open_process``.
        stdin: instead of ``input``, as trio and anyio take them: bytes to
            feed, or what ``subprocess.Popen`` takes (None shares ours).
        stdout, stderr: when given, they decide instead of ``capture_*``:
            ``PIPE`` captures, anything else goes to ``Popen`` as is (so
            ``stderr=STDOUT`` captures both streams as ``stdout``).
        task_status: ``task_status.started(process)`` is called once the
            process runs, so ``process = await scope.start(run_process,
            command)`` gives the running ``Process`` (to signal it, say)
            while ``run_process`` goes on waiting for it. Its pipes belong
            to ``run_process``.

    Returns:
        A ``subprocess.CompletedProcess`` with ``args``, ``returncode``, and
        ``stdout``/``stderr`` as bytes (None where not captured).

    Raises:
        subprocess.CalledProcessError: ``check`` is on and the status is not
            0; it carries ``output`` and ``stderr``.
        TypeError, ValueError, OSError: as for ``open_process``; TypeError
            for ``input`` that is not bytes, ValueError for both ``input``
            and ``stdin``.
        Cancelled: the task was cancelled; the process was stopped and reaped.
    """
    if input is not None and not isinstance(input, _BYTES):
        raise TypeError(
            f"run_process() needs input as bytes, got {type(input).__name__}; "
            "pass bytes, e.g. input=text.encode()"
        )
    if stdin is not _DEFAULT and input is not None:
        raise ValueError(
            "run_process() got both input= and stdin=; pass bytes as input= alone, "
            "or a file or descriptor as stdin= alone"
        )
    if isinstance(stdin, _BYTES):
        input, stdin = stdin, _DEFAULT
    options = _check_options(
        "run_process()",
        command,
        (PIPE if input else DEVNULL) if stdin is _DEFAULT else stdin,
        (PIPE if capture_stdout else None) if stdout is _DEFAULT else stdout,
        (PIPE if capture_stderr else None) if stderr is _DEFAULT else stderr,
        cwd,
        env,
        kill_grace,
        shell,
    )
    await checkpoint()  # a cancelled task starts nothing
    process = _spawn(options)
    output: dict[str, bytearray] = {}

    async def feed(stream: PipeStream, data: bytes | bytearray | memoryview) -> None:
        try:
            await stream.send_all(data)
        except BrokenResourceError:
            pass  # exited without reading it all, as subprocess.run allows
        finally:
            stream.close()

    async def collect(stream: PipeStream, into: bytearray) -> None:
        async for chunk in stream:
            into += chunk

    try:
        task_status.started(process)
        async with scope(name=f"run_process({process.pid})") as s:
            if process.stdin is not None:
                if input:
                    s.spawn(feed, process.stdin, input, name="run_process: feed stdin")
                else:
                    process.stdin.close()  # stdin=PIPE and nothing to feed: end of input
            for name, stream in (("stdout", process.stdout), ("stderr", process.stderr)):
                if stream is not None:
                    output[name] = bytearray()
                    s.spawn(collect, stream, output[name], name=f"run_process: read {name}")
            code = await process.wait()
    finally:
        process._close_pipes()
        # Ended by a failure of feed/collect before wait() ran: the scope
        # cancelled the body, so wait() stopped the process, or never ran.
        if process._popen.returncode is None:
            await process._stop()
    out = bytes(output["stdout"]) if "stdout" in output else None
    err = bytes(output["stderr"]) if "stderr" in output else None
    if check and code != 0:
        raise subprocess.CalledProcessError(code, process.args, output=out, stderr=err)
    return subprocess.CompletedProcess(process.args, code, out, err)
