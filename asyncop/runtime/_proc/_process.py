"""Child processes as operations: wait, stop, and never leak.

Where things are: this module has the :class:`Process` (waiting, signals,
the stop after a cancel); ``_pipes.py`` the pipe streams;
``_process_start.py`` ``open_process`` and ``run_process``.

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

Process groups
--------------
A process is rarely alone: ``sh -c 'a | b'`` is three, and a program may
start helpers. A signal to the process we started reaches none of them;
they would outlive the operation, reparented to init, holding our pipes
open. So each process starts, by default, as the leader of a new process
group (``process_group=0``: the group's id is the leader's pid), which its
descendants inherit, and the stop signals the whole group
(``os.killpg``). ``start_new_session=True`` also makes a leader;
``start_new_session=False``, or ``process_group=N`` (join group ``N``),
leaves the process in a group it does not lead, and the stop signals the
process alone. ``Process.send_signal`` and its siblings always signal the
process alone, as ``subprocess.Popen``'s do.

The default has a price: a process in a group of its own is a background
job to our terminal. A Ctrl-C reaches only our process, whose Ctrl-C
handling cancels the tree and so stops the group as any cancel does. A
program that reads the terminal or changes its modes (an editor, a pager,
``ssh`` or ``sudo`` asking for a password) is stopped by the kernel
(``SIGTTIN``, ``SIGTTOU``) and needs ``start_new_session=False``.

A group id is a pid, and the number may be reused once the group is gone.
What keeps a signal from reaching a stranger is one rule: **the group is
signalled only while its leader is unreaped**. A zombie keeps its pid, and
so its group id: no new process takes the number, and no new group can use
it. The stop therefore looks at the exit without reaping (``waitid`` with
``WNOWAIT``), and reaps only once the leader has exited and no live process
is left in its group (found in ``/proc``, each waited for through a pidfd).
While a stop runs (``_stopping`` is set) no other task reaps: a second
stop waits for the first, a plain ``wait()`` waits before it reaps, and
``returncode`` stays None. ``run_process`` reaps only once the pipes are
drained, so a leader that exits at once and leaves a child holding them
(``sh -c 'server & exit'``) still pins its group when a cancel comes. Once
the leader is reaped (by ``wait()``, or by reading ``returncode``), asyncop
signals its group no more: the number is no longer ours.

Where the rest of a group cannot be seen (no ``/proc``), the leader's exit
ends the grace: what is left of its group gets ``SIGKILL`` at once, while
the zombie still pins the id. Where Python cannot look at an exit without
reaping (no ``os.waitid``: macOS before Python 3.13), the exit is noticed
by reaping, and the group is signalled only while its leader runs. A
process that leaves the group (a daemon that calls ``setsid``) is out of
reach, as it means to be.

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
waiting process waits for the exit (``waitid`` with ``WNOWAIT``, which does
not reap); it is abandoned on cancel and ends by itself once the stopped
process has exited.

Several tasks may wait for one process; an ``asyncop.Lock`` lets one of them
watch the pidfd at a time (the reactor takes one waiter per descriptor), and
the others find the exit when they get the lock.

Warnings (a process that ignored ``SIGTERM``, a signal that could not be
sent) point at the user's line, not into asyncop (``warn_user``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Final, final

from ...operations import Cancelled, warn_user
from .. import Event, Lock, checkpoint, readable, scope, select, sleep, spawn_blocking
from .._net._streams import close_fd

if TYPE_CHECKING:
    from ._pipes import PipeStream

__all__ = ["Process"]

# Linux's pidfd lets the multiplexer watch for the exit; tests turn it off to
# cover the thread fallback that other systems use.
use_pidfd: bool = hasattr(os, "pidfd_open")
# waitid(WNOWAIT) sees an exit and leaves the zombie, which keeps the pid
# (and the group id) ours until we reap it.
_CAN_PEEK: Final = hasattr(os, "waitid")
# Where /proc lists the processes, the live members of a group can be found.
_HAVE_PROC: Final = os.path.exists("/proc/self/stat")
# How often a stop looks again for the members of a group it waits for:
# one may leave the group instead of exiting, or a new one appear.
_MEMBER_RECHECK: Final = 0.1


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
        "_leads_group",
        "_pidfd",
        "_popen",
        "_stopping",
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
        *,
        leads_group: bool,
    ) -> None:
        self._popen = popen
        self.args = popen.args
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self._kill_grace = kill_grace
        # The process leads its own group (its group id is its pid): a stop
        # signals the whole group.
        self._leads_group = leads_group
        # Set while a cancel stops the process, and set (the Event) when it is over.
        # Invariant: while it is not None, nobody reaps the process: its
        # zombie keeps the group id from reuse while the stop may signal it.
        self._stopping: Event | None = None
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
        """The process id; also its process group's id when it leads its group (the default)."""
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        """The exit status, or None while the process runs.

        Negative ``-N`` means the process was ended by signal ``N``. Reading
        it reaps a process that has exited, except while a cancel is
        stopping the process: then it stays None until the stop is over.
        """
        return self.poll()

    def poll(self) -> int | None:
        """The exit status, or None while the process runs; the same as ``returncode``."""
        if self._stopping is not None:
            return self._popen.returncode  # the stop reaps, once it is done with the group
        return self._popen.poll()

    def send_signal(self, sig: int) -> None:
        """Send signal ``sig`` to the process alone; nothing once it has been reaped.

        The other processes of its group (its children, the rest of a shell
        pipeline) do not get it, as with ``subprocess.Popen``. A cancel is
        what signals the whole group. To signal the group yourself, call
        ``os.killpg(process.pid, sig)`` while the process leads its group
        (the default) and has not been reaped: after the reap the number
        may name another group.
        """
        self._signal(sig, group=False)

    def terminate(self) -> None:
        """Send ``SIGTERM`` to the process alone (see ``send_signal``); nothing once reaped."""
        self._signal(signal.SIGTERM, group=False)

    def kill(self) -> None:
        """Send ``SIGKILL`` to the process alone (see ``send_signal``); nothing once reaped."""
        self._signal(signal.SIGKILL, group=False)

    def _signal(self, sig: int, *, group: bool) -> None:
        """Send ``sig`` to the process, or to its group, unless the process has been reaped.

        Invariant: a signal goes out only while the process is unreaped:
        until then its pid, and the group id that is the same number, are
        ours. ``Popen`` reaps only under its ``_waitpid_lock``; holding it
        (when it is free) keeps a reap from slipping in between the look
        and the signal.
        """
        popen = self._popen
        lock = getattr(popen, "_waitpid_lock", None)
        held = lock is not None and lock.acquire(blocking=False)
        try:
            if popen.returncode is None:
                (os.killpg if group else os.kill)(popen.pid, sig)
        except ProcessLookupError:
            pass  # reaped behind Popen's back, as Popen.send_signal allows
        finally:
            if held:
                lock.release()  # type: ignore[union-attr]

    # -- waiting --------------------------------------------------------------

    async def wait(self) -> int:
        """Wait until the process exits and is reaped; return its exit status.

        A cancellation point. Cancelling the wait stops the process: it
        gets ``SIGTERM``, then ``SIGKILL`` if it is still alive after
        ``kill_grace`` seconds, and the wait raises ``Cancelled`` only once
        the process has been reaped. When the process leads its own group
        (the default), both signals go to the whole group, and the stop
        also waits until no process of the group is left. Several tasks may
        wait at once.

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
        """Wait for the exit and reap the process, once no stop needs it unreaped."""
        await self._wait_exit()
        while (stopping := self._stopping) is not None:
            await stopping.wait_async()
        popen = self._popen
        code = popen.poll()
        if code is None:
            # Exited, but another thread is inside Popen.wait() and holds its
            # reap lock: that call reaps; wait for it.
            code = await spawn_blocking(popen.wait)
        self._close_pidfd()
        return code

    async def _wait_exit(self) -> None:
        """Wait until the process has exited, without reaping it; one task watches at a time."""
        async with self._wait_lock:
            while not self._has_exited():
                if self._pidfd >= 0:
                    await readable(self._pidfd)
                else:
                    # Abandoned on cancel: the thread returns once the process
                    # that the cancel goes on to stop has exited.
                    await spawn_blocking(self._block_until_exit, abandon=True)

    def _has_exited(self) -> bool:
        """Whether the process has exited; it stays unreaped where the system allows."""
        popen = self._popen
        if popen.returncode is not None:
            return True
        if not _CAN_PEEK:
            return popen.poll() is not None  # the exit is noticed by reaping
        try:
            return os.waitid(os.P_PID, popen.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None
        except ChildProcessError:
            return True  # reaped behind Popen's back, or by the kernel (SIGCHLD ignored)

    def _block_until_exit(self) -> None:
        """In a thread: return once the process has exited (reaping it only if we cannot peek)."""
        popen = self._popen
        if not _CAN_PEEK:
            popen.wait()
        elif popen.returncode is None:
            with contextlib.suppress(ChildProcessError):
                os.waitid(os.P_PID, popen.pid, os.WEXITED | os.WNOWAIT)

    # -- stopping -------------------------------------------------------------

    async def _stop(self) -> None:
        """Stop the process (and its group) after a cancel, then reap it; immune to the cancel.

        One task stops a process; another that comes to stop it too waits
        for that stop to end. The signals go out before the wait lock is
        taken: another task may hold the lock, waiting for the very exit
        they bring about.
        """
        # The warnings wait for the reap: one turned into an error (-W error)
        # must not cut the stop short and leave the process running.
        notes: list[str] = []
        async with scope(shield=True, name=f"stopping process {self.pid}"):
            stopping = self._stopping
            if stopping is not None:
                await stopping.wait_async()
            elif self._popen.returncode is None:
                self._stopping = stopping = Event()
                try:
                    await self._terminate_then_kill(notes)
                finally:
                    self._stopping = None
                    stopping.set()
            await self._reap()
        for note in notes:
            warn_user(note)

    async def _terminate_then_kill(self, notes: list[str]) -> None:
        """``SIGTERM``, up to ``kill_grace`` seconds for it to work, then ``SIGKILL``.

        For a group leader both go to the group, and the stop is over when
        the leader has exited and no live process is left in its group.
        What went wrong is added to ``notes``, to be warned about.
        """
        grace = self._kill_grace
        if grace != 0.0 and self._signal_or_note(signal.SIGTERM, notes):
            try:
                async with scope(timeout=grace):
                    if await self._settle():
                        return
                # (The rest of the group cannot be seen: it is killed below.)
            except TimeoutError:
                notes.append(
                    f"{self._target()} ignored SIGTERM for {grace:g} s after a cancel; "
                    "it was killed with SIGKILL (set kill_grace to wait longer)"
                )
        self._signal_or_note(signal.SIGKILL, notes)
        await self._settle()

    async def _settle(self) -> bool:
        """Wait until the process has exited and nothing of its group lives; do not reap.

        Returns:
            False when the rest of the group cannot be seen (no ``/proc``):
            only the leader's exit was waited for.
        """
        await self._wait_exit()
        if not self._leads_group:
            return True
        pgid = self.pid
        while members := _group_members(pgid):
            await _member_exit(min(members), pgid)
        return members is not None

    def _signal_or_note(self, sig: int, notes: list[str]) -> bool:
        """Send a stop signal; a failure is a note for a warning, not a reason to give up."""
        group = self._leads_group
        try:
            self._signal(sig, group=group)
            if group and sig == signal.SIGTERM:
                # A stopped member (Ctrl-Z, or SIGTTIN from the terminal)
                # acts on a SIGTERM it handles only once continued.
                self._signal(signal.SIGCONT, group=True)
        except OSError as exc:
            then = "killing it instead" if sig == signal.SIGTERM else "waiting for it anyway"
            notes.append(
                f"sending {signal.Signals(sig).name} to {self._target()} failed after "
                f"a cancel ({exc}); {then}"
            )
            return False
        return True

    def _target(self) -> str:
        """What a stop signals, for warnings."""
        return f"the process group of {self!r}" if self._leads_group else repr(self)

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


# -- the rest of a process group ---------------------------------------------------


def _group_members(pgid: int) -> set[int] | None:
    """The live processes of group ``pgid`` other than its leader; None without ``/proc``.

    A zombie does not count: it has exited, and its parent (or init) reaps it.
    """
    if not _HAVE_PROC:
        return None
    found = set()
    with os.scandir("/proc") as entries:
        for entry in entries:
            name = entry.name
            if name.isdigit() and int(name) != pgid and _in_group(int(name), pgid):
                found.add(int(name))
    return found


def _in_group(pid: int, pgid: int) -> bool:
    """Whether ``pid`` is a live process (not a zombie) of group ``pgid``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return False  # gone meanwhile
    # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return fields[0] not in (b"Z", b"X") and int(fields[2]) == pgid


async def _member_exit(pid: int, pgid: int) -> None:
    """Wait a while for ``pid``, found in group ``pgid``, to exit; the caller looks again.

    The wait is bounded (``_MEMBER_RECHECK``): the process may leave the
    group instead of exiting, and a signal to the group would then no
    longer reach it.
    """
    fd = -1
    if use_pidfd:
        with contextlib.suppress(OSError):  # gone already, or no pidfds here
            fd = os.pidfd_open(pid)
    try:
        # Looked at once the pidfd is open: if ``pid`` still names a live
        # member now, the pidfd is on it, or on an earlier holder of the
        # number that is gone (readable at once, and the caller looks again).
        if _in_group(pid, pgid):
            if fd >= 0:
                await select(readable(fd), sleep(_MEMBER_RECHECK))
            else:
                await sleep(_MEMBER_RECHECK)
    finally:
        if fd >= 0:
            close_fd(fd)
