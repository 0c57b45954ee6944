"""Starting child processes: ``open_process`` and ``run_process``.

``open_process()`` starts the process in the call and returns the
``Process``, so it works the same from a task or a plain thread, and a
``Process`` awaited gives itself without suspending: trio and anyio spell
it ``process = await open_process(...)``, and code written for them runs
unchanged. The await is deliberately no cancellation point: the process is
running by then, and raising there would leave it to nobody.
``run_process()`` does checkpoint before it starts anything, so a cancelled
task starts no process. A start that fails half-way leaves nothing: the
pipes are closed, and a process already running is killed and reaped.

Commands follow trio's rules: with ``shell=False`` (the default) the command
is a sequence ``[program, arg, ...]`` and a string is refused, because a
string would silently be taken as the name of one program; with
``shell=True`` it is one string for ``/bin/sh -c``.

Every argument is checked before anything starts (``_check_options``), so
a misuse raises with nothing to undo. The process's group is chosen here
(``_group_options``): by default a new group led by the process, so that a
cancel reaches every process the command starts (see ``_process.py``).
``run_process`` waits for the exit without reaping, drains the pipes, and
only then reaps, so that the zombie keeps the group id ours meanwhile.
"""

from __future__ import annotations

import contextlib
import enum
import os
import signal
import subprocess
from collections.abc import Iterable, Sequence
from typing import IO, Any, Final

from ...operations import BrokenResourceError
from ...platform import check_kill_grace
from .. import TASK_STATUS_IGNORED, TaskStatus, checkpoint, scope
from ._pipes import PipeStream
from ._process import Process
from ._process_options import popen_extras

__all__ = ["open_process", "run_process"]

PIPE: Final = subprocess.PIPE
DEVNULL: Final = subprocess.DEVNULL
STDOUT: Final = subprocess.STDOUT

StrOrBytesPath = str | bytes | os.PathLike[str] | os.PathLike[bytes]
Command = StrOrBytesPath | Sequence[Any]
StdSpec = int | IO[Any] | None


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


def _group_options(
    what: str, start_new_session: object, process_group: object
) -> tuple[dict[str, Any], bool]:
    """The ``Popen`` arguments that place the process in a group, and whether it leads it.

    The default (both None) is a new group led by the process, so that a
    cancel reaches every process the command starts.
    """
    if start_new_session is not None and not isinstance(start_new_session, bool):
        raise TypeError(
            f"{what} needs start_new_session as True, False or None, got "
            f"{type(start_new_session).__name__}; pass a bool"
        )
    if process_group is None:
        if start_new_session is None:
            return {"process_group": 0}, True
        return {"start_new_session": start_new_session}, start_new_session
    if isinstance(process_group, bool) or not isinstance(process_group, int):
        raise TypeError(
            f"{what} needs process_group as an int or None, got "
            f"{type(process_group).__name__}; pass 0 for a new group, or an existing group's id"
        )
    if process_group < 0:
        raise ValueError(
            f"{what} got process_group={process_group}; pass 0 for a new group, or an "
            "existing group's id"
        )
    if start_new_session:
        raise ValueError(
            f"{what} got start_new_session=True and process_group={process_group}; a new "
            "session is already a new group led by the process: pass one of the two"
        )
    return {"process_group": process_group}, process_group == 0


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
    cwd: StrOrBytesPath | None = None,
    env: dict[str, str] | None = None,
    kill_grace: float | None = 5.0,
    shell: bool = False,
    start_new_session: bool | None = None,
    process_group: int | None = None,
    pass_fds: Iterable[int] = (),
    user: str | int | None = None,
    group: str | int | None = None,
    extra_groups: Iterable[str | int] | None = None,
    umask: int | None = None,
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
        start_new_session, process_group: as for ``subprocess.Popen``. By
            default (both None) the process leads a new process group
            (``process_group=0``), so that a cancel signals every process
            the command starts; so does ``start_new_session=True``.
            ``start_new_session=False``, or ``process_group=N`` for an
            existing group, leaves the process in a group it does not lead,
            and a cancel signals the process alone: use it for a program
            that needs the terminal (an editor, ``ssh`` asking for a
            password), which a background group would stop.
        pass_fds: descriptors the process inherits besides 0, 1 and 2
            (every other one is closed in it).
        user, group: the user and group the process runs as, by name or
            id; ``extra_groups``: its supplementary groups; ``umask``: its
            umask (0 to 0o777). None keeps ours. As for
            ``subprocess.Popen``; a user or group other than ours needs
            the privilege to switch (else ``PermissionError``).

    Raises:
        TypeError: a string command without ``shell=True``, or a list with
            it; a ``kill_grace``, ``start_new_session``, ``process_group``,
            ``pass_fds``, ``user``, ``group``, ``extra_groups`` or ``umask``
            of the wrong type.
        ValueError: an empty command; a NaN or negative ``kill_grace``; a
            negative ``process_group``, or one given with
            ``start_new_session=True``; a negative descriptor or id, a
            user or group name unknown here, a ``umask`` past 0o777.
        OSError: the program cannot be started (``FileNotFoundError`` when
            it does not exist); nothing is left open or running.
    """
    what = "open_process()"
    extras = popen_extras(what, pass_fds, user, group, extra_groups, umask)
    return _spawn(
        _check_options(
            what,
            command,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=env,
            kill_grace=kill_grace,
            shell=shell,
            start_new_session=start_new_session,
            process_group=process_group,
            extras=extras,
        )
    )


def _check_options(
    what: str,
    command: Command,
    *,
    stdin: StdSpec,
    stdout: StdSpec,
    stderr: StdSpec,
    cwd: StrOrBytesPath | None,
    env: dict[str, str] | None,
    kill_grace: object,
    shell: bool,
    start_new_session: object,
    process_group: object,
    extras: dict[str, Any],
) -> dict[str, Any]:
    """Check what a process is started with, before anything happens; the ``_spawn`` kwargs.

    ``extras`` are more ``Popen`` arguments, checked by ``popen_extras``.
    """
    grace = check_kill_grace(kill_grace, f"{what[:-2]}(kill_grace=...)")
    _check_command(command, shell, what)
    if stdout == STDOUT:
        raise ValueError(f"{what} got stdout=STDOUT, which means nothing; pass PIPE")
    group, leads_group = _group_options(what, start_new_session, process_group)
    return {
        "popen": {"args": command, "shell": shell, "cwd": cwd, "env": env, **group, **extras},
        "std": {"stdin": stdin, "stdout": stdout, "stderr": stderr},
        "kill_grace": grace,
        "leads_group": leads_group,
    }


def _spawn(options: dict[str, Any]) -> Process:
    """Start the process with our own pipes for the streams given as ``PIPE``.

    ``options`` are what ``_check_options`` returned. A failure leaves
    nothing open: our pipe ends are closed, and a process that was started
    already is killed and reaped.
    """
    parent: dict[str, int] = {}
    child: dict[str, int] = {}
    specs: dict[str, Any] = dict(options["std"])
    try:
        for name, spec in specs.items():
            if spec == PIPE:
                parent[name], child[name] = _pipe_pair(child_reads=name == "stdin")
                specs[name] = child[name]
        # (**specs holds no 'text': the pipes carry bytes.)
        popen: subprocess.Popen[bytes] = subprocess.Popen(  # pyright: ignore[reportAssignmentType]
            **options["popen"], **specs
        )
    except BaseException:
        for fd in (*parent.values(), *child.values()):
            os.close(fd)
        raise
    for fd in child.values():
        os.close(fd)  # the child has its copies; ours would hide its EOF
    return _adopt(popen, parent, options["kill_grace"], options["leads_group"])


def _adopt(
    popen: subprocess.Popen[bytes], parent: dict[str, int], grace: float | None, leads_group: bool
) -> Process:
    """Wrap a started process and our ends of its pipes; a failure closes them and reaps it."""
    streams: dict[str, PipeStream] = {}
    try:
        for name, fd in parent.items():
            streams[name] = PipeStream(fd, writable=name == "stdin", name=f"{name} of {popen.pid}")
        return Process(
            popen,
            streams.get("stdin"),
            streams.get("stdout"),
            streams.get("stderr"),
            grace,
            leads_group=leads_group,
        )
    except BaseException:
        for name, fd in parent.items():
            stream = streams.get(name)
            if stream is not None:
                stream.close()
            else:
                os.close(fd)
        # Nobody has it yet, so nothing else can reap it: the pid is still ours.
        with contextlib.suppress(OSError):
            (os.killpg if leads_group else os.kill)(popen.pid, signal.SIGKILL)
        popen.wait()
        raise


# -- run_process -------------------------------------------------------------------


class _Default(enum.Enum):
    """The value of a ``run_process`` stream argument that was not given."""

    DEFAULT = "default"


_BYTES = (bytes, bytearray, memoryview)
_Bytes = bytes | bytearray | memoryview


async def run_process(
    command: Command,
    *,
    input: bytes | bytearray | memoryview | None = None,
    check: bool = True,
    capture_stdout: bool = True,
    capture_stderr: bool = True,
    cwd: StrOrBytesPath | None = None,
    env: dict[str, str] | None = None,
    kill_grace: float | None = 5.0,
    shell: bool = False,
    stdin: bytes | bytearray | memoryview | StdSpec | _Default = _Default.DEFAULT,
    stdout: StdSpec | _Default = _Default.DEFAULT,
    stderr: StdSpec | _Default = _Default.DEFAULT,
    start_new_session: bool | None = None,
    process_group: int | None = None,
    pass_fds: Iterable[int] = (),
    user: str | int | None = None,
    group: str | int | None = None,
    extra_groups: Iterable[str | int] | None = None,
    umask: int | None = None,
    task_status: TaskStatus[Process] = TASK_STATUS_IGNORED,
) -> subprocess.CompletedProcess[bytes]:
    """Run a command to completion and return what it did.

    Feeding ``input`` and reading the output run concurrently, so a process
    that writes much before it reads cannot deadlock. A cancellation point:
    a cancel stops the process (``SIGTERM``, then ``SIGKILL`` after
    ``kill_grace`` seconds; by default to its whole process group, so a
    shell pipeline or a child it started in the background is stopped too)
    and raises ``Cancelled`` only once it has been reaped.

    Args:
        command: ``[program, arg, ...]``; with ``shell=True``, one string.
        input: bytes for the process's stdin, which is then closed. Without
            it the process reads an empty stdin (``/dev/null``), not ours.
        check: raise ``CalledProcessError`` when the exit status is not 0.
        capture_stdout, capture_stderr: collect the stream into the result;
            when False the process writes to ours.
        cwd, env, kill_grace, shell, start_new_session, process_group,
            pass_fds, user, group, extra_groups, umask: as for
            ``open_process``.
        stdin: instead of ``input``, as trio and anyio take them: bytes to
            feed, or what ``subprocess.Popen`` takes (None shares ours).
        stdout, stderr: when given, they decide instead of ``capture_*``:
            ``PIPE`` captures, anything else goes to ``Popen`` as is (so
            ``stderr=STDOUT`` captures both streams as ``stdout``).
        task_status: ``task_status.started(process)`` is called once the
            process runs, so ``process = await scope.start(run_process,
            command)`` gives the running ``Process`` (to signal it, say)
            while ``run_process`` goes on waiting for it. Its pipes belong
            to ``run_process``; reading its ``returncode`` reaps it, after
            which a cancel no longer reaches the rest of its group.

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
    if stdin is not _Default.DEFAULT and input is not None:
        raise ValueError(
            "run_process() got both input= and stdin=; pass bytes as input= alone, "
            "or a file or descriptor as stdin= alone"
        )
    if isinstance(stdin, _BYTES):
        input, stdin = stdin, _Default.DEFAULT
    extras = popen_extras("run_process()", pass_fds, user, group, extra_groups, umask)
    options = _check_options(
        "run_process()",
        command,
        stdin=(PIPE if input else DEVNULL) if stdin is _Default.DEFAULT else stdin,
        stdout=(PIPE if capture_stdout else None) if stdout is _Default.DEFAULT else stdout,
        stderr=(PIPE if capture_stderr else None) if stderr is _Default.DEFAULT else stderr,
        cwd=cwd,
        env=env,
        kill_grace=kill_grace,
        shell=shell,
        start_new_session=start_new_session,
        process_group=process_group,
        extras=extras,
    )
    await checkpoint()  # a cancelled task starts nothing
    process = _spawn(options)
    code, out, err = await _communicate(process, input, task_status)
    if check and code != 0:
        raise subprocess.CalledProcessError(code, process.args, output=out, stderr=err)
    return subprocess.CompletedProcess(process.args, code, out, err)


async def _communicate(
    process: Process, input: _Bytes | None, task_status: TaskStatus[Process]
) -> tuple[int, bytes | None, bytes | None]:
    """Feed the input, collect the output and reap the process; stop it on a failure or cancel.

    Returns:
        The exit status, and the captured stdout and stderr (None where not
        captured).
    """
    output: dict[str, bytearray] = {}
    try:
        task_status.started(process)
        async with scope(name=f"run_process({process.pid})") as s:
            if process.stdin is not None:
                if input:
                    s.spawn(_feed, process.stdin, input, name="run_process: feed stdin")
                else:
                    process.stdin.close()  # stdin=PIPE and nothing to feed: end of input
            for name, stream in (("stdout", process.stdout), ("stderr", process.stderr)):
                if stream is not None:
                    output[name] = bytearray()
                    s.spawn(_collect, stream, output[name], name=f"run_process: read {name}")
            # The exit, not the reap: the process is reaped once the pipes are
            # drained, so that its zombie pins its group id while a child of
            # it may still hold them (``sh -c 'server & exit'``) and a cancel
            # may have to stop that child.
            await process._wait_exit()
        code = await process.wait()
    finally:
        process._close_pipes()
        # Ended by a failure or a cancel before the reap: stop the process
        # (and its group), then reap it.
        if process._popen.returncode is None:
            await process._stop()
    out = bytes(output["stdout"]) if "stdout" in output else None
    err = bytes(output["stderr"]) if "stderr" in output else None
    return code, out, err


async def _feed(stream: PipeStream, data: _Bytes) -> None:
    try:
        await stream.send_all(data)
    except BrokenResourceError:
        pass  # exited without reading it all, as subprocess.run allows
    finally:
        stream.close()


async def _collect(stream: PipeStream, into: bytearray) -> None:
    async for chunk in stream:
        into += chunk
