"""``ProcessExecutor``: run plain functions in worker processes.

Why pebble
----------
The pool is pebble's ``ProcessPool``, not ``concurrent.futures``'
``ProcessPoolExecutor`` nor loky. A job that ignores its remote token must be
stopped after ``kill_grace`` without harming the others. Killing one worker
of a ``ProcessPoolExecutor`` (or of loky's executor, built on the same
design) breaks the whole pool: every other running and queued job fails with
``BrokenProcessPool`` (loky: ``TerminatedWorkerError``), and the pool must be
rebuilt. Its exit handler also joins the workers, so a stuck job hangs the
interpreter at exit. pebble kills exactly the worker that runs a cancelled
job, starts a replacement, and leaves the other jobs alone; its workers are
terminated at interpreter exit.

The workers are started with ``forkserver`` where the platform has it
(``spawn`` elsewhere): forking the client, whose runtime threads may hold
locks at that instant, is not safe.

Cancel across processes
-----------------------
Each job handed to the pool owns a slot in four shared-memory arrays:
``cancel`` (written by the client), ``start``, ``pid`` and ``ended``
(written by the worker that takes the job), each holding the job's
sequence number ``seq`` once it applies. At most ``SLOTS`` jobs are handed
to the pool at once; more wait in the executor for a slot, and a cancel
drops them there. One cross-process lock makes "the worker starts the job"
and "the client cancels it" exclusive, so exactly one of them wins:

- the client wins: the job never runs (the worker finds it cancelled and
  drops it) and the local operation ends CANCELLED at once;
- the worker wins: ``fn`` runs, and sees ``cancel[slot] == seq`` through its
  remote token within a few ms. If it has not ended ``kill_grace`` seconds
  later, its pebble future is cancelled, which kills and replaces the
  worker; the operation ends CANCELLED once the process is gone (or once
  the job is seen to have ended by itself after all).

A slot is freed when the pool reports the job's end.
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import functools
import itertools
import multiprocessing
import os
import pickle
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import CancelledError
from concurrent.futures.process import BrokenProcessPool
from types import FunctionType
from typing import Any, final

from ...operations import BrokenResourceError, Cancelled
from ...platform import check_kill_grace, cpu_count
from ._remote import RemoteExecutor, RemoteJob, worker_death
from ._remote_call import PICKLED_FUNCTIONS_MAX, RemoteToken, decode_outcome, pack_call, run_call

__all__ = ["ProcessExecutor"]

# Jobs handed to the pool at once, each owning one slot; more wait here.
SLOTS = 1 << 14
# The longest anyone waits for the slots' lock before going on without it.
LOCK_WAIT = 1.0
# How often a job's token is polled in the worker: shared memory, so cheap.
POLL = 0.005
# How long to wait for a killed worker to be gone before giving up on it.
REAP_WAIT = 10.0
# The exact types of the arguments that always pickle (see _new_job).
_BARE_ARGS = frozenset({type(None), bool, int, float, complex, str, bytes})
# A concurrent.futures future's state once it has a result or an exception.
_FINISHED = "FINISHED"

# -- in the worker process ---------------------------------------------------------

_shared: _Shared | None = None
_pid = 0


def _init_worker(shared: _Shared) -> None:
    global _shared, _pid
    _shared = shared
    _pid = os.getpid()


def _run_job(seq: int, slot: int, fn_payload: bytes, args_payload: bytes | tuple[Any, ...]) -> Any:
    shared = _shared
    assert shared is not None
    # Bounded: a process killed inside this section (by something else than
    # asyncop, which kills only jobs past it) would leave the lock held.
    locked = shared.lock.acquire(timeout=LOCK_WAIT)
    try:
        if shared.cancel[slot] == seq:
            return _DROPPED
        shared.start[slot] = seq
        shared.pid[slot] = _pid
    finally:
        if locked:
            shared.lock.release()
    cancel = shared.cancel

    def poll() -> bool:
        return bool(cancel[slot] == seq)

    token = RemoteToken(poll, POLL, f"job {seq} in process {_pid}", direct=True)
    try:
        return run_call(token, fn_payload, args_payload, plain=True)
    finally:
        # The job has ended: a kill the client asked for meanwhile will not
        # come (pebble kills only a worker still running the job).
        shared.ended[slot] = seq


_DROPPED = pickle.dumps(("dropped",))


def _stop_pool(pool: Any) -> None:
    """Stop a pool and reap its processes (in a thread of its own: pebble's may call here)."""
    pool.stop()
    pool.join(timeout=REAP_WAIT)


# -- in the client --------------------------------------------------------------------


@final
class _Shared:
    """The shared-memory slots and their lock (see the module docstring)."""

    def __init__(self, ctx: Any) -> None:
        self.lock = ctx.Lock()
        self.cancel = ctx.RawArray("q", SLOTS)
        self.start = ctx.RawArray("q", SLOTS)
        self.pid = ctx.RawArray("q", SLOTS)
        self.ended = ctx.RawArray("q", SLOTS)
        for array in (self.cancel, self.start, self.ended):
            ctypes.memset(array, 0xFF, ctypes.sizeof(array))  # every slot -1: no job

    def __getstate__(self) -> dict[str, Any]:
        return {
            "lock": self.lock,
            "cancel": self.cancel,
            "start": self.start,
            "pid": self.pid,
            "ended": self.ended,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


# Plain functions pickled by ProcessExecutor._new_job, by reference (bounded:
# cleared when full).
_pickled_functions: dict[Callable[..., Any], bytes] = {}

_live: weakref.WeakSet[ProcessExecutor] = weakref.WeakSet()


def _stop_all_at_exit() -> None:
    for executor in list(_live):
        executor._stop_now("the interpreter exits")


_exit_registered = False


def _register_exit() -> None:
    # Registered once pebble is imported, after pebble's own exit handler, so
    # that it runs first: the jobs' operations end before pebble stops the
    # workers under them.
    global _exit_registered
    if not _exit_registered:
        _exit_registered = True
        atexit.register(_stop_all_at_exit)


def _preload_in_forkserver(ctx: Any) -> None:
    """Have the fork server import the worker's code once, not each worker.

    Halves the start of the first job and of each replacement. Only when the
    server has not started and nobody chose its preload list already.
    """
    import multiprocessing.forkserver as forkserver

    server = getattr(forkserver, "_forkserver", None)
    if (
        server is not None
        and getattr(server, "_forkserver_pid", 0) is None
        and getattr(server, "_preload_modules", None) == ["__main__"]
    ):
        ctx.set_forkserver_preload(["__main__", __name__])


@final
class _ProcessJob(RemoteJob):
    # A cancel while _send() runs finds the job without a slot, drops it
    # (remote_done), and _send() then sends nothing: both hold the
    # executor's lock. One that comes after finds the slot.
    _cancel_while_sending = True

    __slots__ = (
        "args_payload",
        "executor",
        "fn_payload",
        "future",
        "pool",
        "remote_done",
        "seq",
        "slot",
    )

    kind = "process"

    def __init__(
        self,
        executor: ProcessExecutor,
        seq: int,
        fn_payload: bytes,
        args_payload: bytes | tuple[Any, ...],
        name: str,
        abandon: bool,
    ) -> None:
        RemoteJob.__init__(self, name, abandon)
        self.executor = executor
        self.seq = seq
        # The job's slot while the pool has it; None while it waits here
        # for one (more than SLOTS jobs in flight), or once dropped.
        self.slot: int | None = None
        # The pickled function and arguments (see ProcessExecutor._new_job), until sent.
        self.fn_payload = fn_payload
        self.args_payload = args_payload
        self.future: Any = None
        # The pebble pool the job was handed to.
        self.pool: Any = None
        # Set once the pool has reported the job's end (under the
        # executor's lock, which shutdown() waits on).
        self.remote_done = False

    def _send(self) -> None:
        executor = self.executor
        with executor._lock:
            if executor._closed:
                raise RuntimeError(
                    f"{executor!r} is shut down and takes no new jobs; cannot run "
                    f"{self.name!r}; make a new ProcessExecutor"
                )
            if self.remote_done:  # cancelled already (see _cancel_while_sending)
                return
            executor._jobs.add(self)
            free = executor._free
            successor: _ProcessJob | None = self
            if free:
                self.slot = free.pop()
            else:
                executor._waiting.append(self)
                # A job that freed its slot outside this lock (see __call__)
                # may have looked for waiting jobs before this one came.
                successor = executor._next_waiting_locked()
                if successor is None:
                    return
        if successor is not None:
            successor._schedule()  # this job, or one that waited for its slot

    def _schedule(self) -> None:
        # Outside the executor lock: the pool's threads take it to report
        # other jobs. A shutdown() in between has marked this job cancelled
        # already, or stopped the pool, which then refuses it.
        executor = self.executor
        pool = self.pool = executor._pool
        args = (self.seq, self.slot, self.fn_payload, self.args_payload)
        try:
            try:
                future = pool.schedule(_run_job, args=args)
            except RuntimeError:
                if pool.active or not executor._renew_pool(pool):
                    raise
                # Broken by a death pebble blames on no job (see _renew_pool).
                pool = self.pool = executor._pool
                future = pool.schedule(_run_job, args=args)
        except BaseException as exc:
            self._remote_ended()
            self.finish(None, exc)
            return
        self.future = future
        future.add_done_callback(self)  # see __call__

    def _started(self) -> bool:
        slot = self.slot
        return slot is not None and bool(self.executor._shared.start[slot] == self.seq)

    def where(self) -> str:
        if self._started():
            assert self.slot is not None
            return f"worker process {self.executor._shared.pid[self.slot]}"
        return f"the queue of {self.executor!r}"

    def __call__(self, future: Any) -> None:
        """End the operation with the job's outcome, once the pool is done with it."""
        # The future's done callback, in pebble's thread that reads the
        # workers' messages. The job itself rather than a bound method: one
        # object less per job for the collector to track.
        if future._state == _FINISHED and future._exception is None:
            # The value of a done future, read as result() would find it,
            # without the two trips through its lock that result() makes.
            data = future._result
        else:
            try:
                data = future.result()  # done: this does not block
            except BaseException as exc:
                if isinstance(exc, BrokenProcessPool) and self.executor._renew_pool(self.pool):
                    return  # settled by _rescue() once the broken pool is stopped
                try:
                    self._ended_without_result(future, exc)
                finally:
                    self._remote_ended()
                return
        try:
            kind = type(data)
            if kind is not bytes and kind is not tuple:  # a plain value, as itself (see run_call)
                self.finish(data, None)
            elif kind is tuple and data[0] == "value":  # a bytes value
                self.finish(data[1], None)
            else:
                # A pickled value, a failure, or a cancel: the operation's,
                # or a shutdown's that marked the job before it got to the
                # operation. Never raises: a value or an error that cannot
                # be rebuilt here fails the operation, rather than escaping
                # into pebble, which would log it and leave the operation
                # running for ever.
                value, error = decode_outcome(data, self)
                self.finish(value, error, self.executor._stop_reason)
        finally:
            # _remote_ended(), its common case written out without the
            # executor's lock: each step is one atomic operation, and the
            # lock is taken only to wake a shutdown() waiting for the last
            # job or to hand the slot to a waiting job (which _send() also
            # looks for, once it has queued a job).
            executor = self.executor
            self.remote_done = True
            self.fn_payload = self.args_payload = b""
            # The future keeps its done callback, this job: drop the future,
            # or the two would wait for the collector together.
            self.future = None
            jobs = executor._jobs
            jobs.discard(self)
            executor._free.append(self.slot)  # type: ignore[arg-type] # (the pool had it: it has one)
            if not jobs or executor._waiting:
                executor._slot_freed()

    def _ended_without_result(self, future: Any, exc: BaseException) -> None:
        """The pool ended the job with an exception of its own: a kill, a stop, a death."""
        if isinstance(exc, CancelledError):
            if future.cancelled():  # our kill (see _kill)
                self._wait_gone()
                self.finish(
                    None,
                    Cancelled(
                        f"{self.name!r} was killed after {self.executor._grace:g} s: it "
                        "ignored its remote token"
                    ),
                )
            else:
                self.finish(
                    None,
                    Cancelled(f"{self.name!r} was cancelled"),
                    self.executor._stop_reason,
                )
        else:
            self.finish(None, BrokenResourceError(worker_death(self.name, exc)))

    def _remote_ended(self) -> None:
        """The pool is done with the job: free its slot for a waiting job."""
        executor = self.executor
        with executor._lock:
            self.remote_done = True
            self.future = None  # (see __call__)
            self.fn_payload = self.args_payload = b""
            executor._jobs.discard(self)
            if not executor._jobs:
                executor._idle.notify_all()
            if self.slot is not None:
                executor._free.append(self.slot)
            successor = executor._next_waiting_locked() if executor._waiting else None
        if successor is not None:
            successor._schedule()

    def _rescue(self) -> None:
        """The job's pool broke and is stopped: resend the job if it never started."""
        if not self._started():
            self._schedule()  # on the new pool
            return
        try:
            self.finish(
                None,
                BrokenResourceError(
                    f"the process pool running {self.name!r} broke: a worker process ended "
                    "while it ran no job, and the pool stopped the others; the job did not "
                    "finish; later jobs go to a new pool"
                ),
            )
        finally:
            self._remote_ended()

    def _wait_gone(self) -> None:
        """After a kill: wait until the process that ran the job is gone."""
        slot = self.slot
        if slot is None or not self._started():
            return
        shared = self.executor._shared
        pid = int(shared.pid[slot])
        end = time.monotonic() + REAP_WAIT
        while shared.ended[slot] != self.seq and time.monotonic() < end:
            try:
                os.kill(pid, 0)
            except OSError:  # gone (ProcessLookupError), or no longer ours to see
                return
            time.sleep(0.005)

    def _on_cancel(self) -> None:
        executor = self.executor
        with executor._lock:
            slot = self.slot
            if slot is None:
                # Still waiting here for a slot: the pool never sees it.
                self._mark_remote_ended_locked()
        if slot is None:
            self.finish(None, Cancelled(f"{self.name!r} was cancelled before it started"))
            return
        if not self._mark_cancelled(slot):
            self.finish(None, Cancelled(f"{self.name!r} was cancelled before it started"))
            return
        if not self._transition_to_cancelling():
            return
        grace = self.executor._grace
        if grace is not None:
            timer = threading.Timer(grace, self._kill)
            timer.daemon = True
            timer.start()
        if self.abandon:
            self.finish(None, Cancelled(f"{self.name!r} was cancelled and abandoned"))

    def _mark_cancelled(self, slot: int) -> bool:
        """Set the job's cancel mark; True if its worker had started it."""
        shared = self.executor._shared
        # Exclusive with the worker's start (see the module docstring).
        if not shared.lock.acquire(timeout=LOCK_WAIT):  # pragma: no cover - a process died in it
            shared.cancel[slot] = self.seq
            return True
        try:
            shared.cancel[slot] = self.seq
            return self._started()
        finally:
            shared.lock.release()

    def _mark_remote_ended_locked(self) -> None:
        executor = self.executor
        self.remote_done = True
        executor._jobs.discard(self)
        if not executor._jobs:
            executor._idle.notify_all()

    def _kill(self) -> None:
        if self.remote_done:
            return
        future = self.future
        if future is None:  # the worker started it before schedule() returned here
            timer = threading.Timer(0.01, self._kill)
            timer.daemon = True
            timer.start()
            return
        future.cancel()


@final
class ProcessExecutor(RemoteExecutor):
    """Runs plain functions in worker processes: ``spawn(fn, *args, executor=ex)``.

    The function and its arguments are pickled (by reference for module-level
    functions), run in a worker process, and the value or exception comes
    back pickled, with the remote traceback kept. Inside the job,
    ``asyncop.remote_token()`` follows the local operation's cancel.

    Args:
        max_workers: worker processes; defaults to the CPU count.
        kill_grace: seconds a cancelled job that is running may take to stop
            by itself; then its process is killed and replaced, and the
            operation ends CANCELLED. ``None`` or ``inf`` never kills.

    Raises:
        TypeError: ``max_workers`` is not an int.
        ValueError: ``max_workers`` is less than 1, or ``kill_grace`` is NaN or
            negative.

    Use it as a context manager, or call ``shutdown()``.
    """

    _kind = "a worker process"

    def __init__(self, max_workers: int | None = None, *, kill_grace: float | None = 5.0) -> None:
        if max_workers is None:
            max_workers = cpu_count()
        elif isinstance(max_workers, bool) or not isinstance(max_workers, int):
            raise TypeError(
                f"ProcessExecutor(max_workers=...) needs an int, got "
                f"{type(max_workers).__name__}; pass a number of processes, or None"
            )
        if max_workers < 1:
            raise ValueError(
                f"ProcessExecutor(max_workers={max_workers}) needs at least one process; "
                "pass a positive number, or None for the CPU count"
            )
        self._grace = check_kill_grace(kill_grace, "ProcessExecutor(kill_grace=...)")
        from pebble import ProcessPool

        _register_exit()
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        if ctx.get_start_method() == "forkserver":
            _preload_in_forkserver(ctx)
        self.max_workers = max_workers
        self._shared = _Shared(ctx)
        self._make_pool = functools.partial(
            ProcessPool,
            max_workers=max_workers,
            initializer=_init_worker,
            initargs=(self._shared,),
            context=ctx,
        )
        self._pool = self._make_pool()
        self._lock = threading.Lock()
        # Notified when the last job in flight has ended (for shutdown).
        self._idle = threading.Condition(self._lock)
        self._seq = itertools.count()
        self._jobs: set[_ProcessJob] = set()
        self._free = list(range(SLOTS - 1, -1, -1))
        self._waiting: collections.deque[_ProcessJob] = collections.deque()
        self._closed = False
        # Why the jobs in flight are cancelled, once shutdown() or the
        # interpreter's exit has begun (see RemoteJob.finish).
        self._stop_reason: str | None = None
        _live.add(self)

    def _renew_pool(self, broken: Any) -> bool:
        """Replace a pool pebble gave up on by a new one; False once shut down.

        pebble gives up its whole pool when a worker process ends while it
        is known to run no job (killed from outside while idle, say), and
        fails the jobs it holds. The broken pool is stopped, and its
        processes reaped, in a thread of its own (this runs in one of the
        pool's threads, which stopping it joins); then its jobs that never
        started are sent to the new pool, and the others fail.
        """
        with self._lock:
            if self._closed:
                return False
            if self._pool is broken:
                self._pool = self._make_pool()
                threading.Thread(
                    target=self._rescue, args=(broken,), name="asyncop-pool-stop", daemon=True
                ).start()
            return True

    def _rescue(self, broken: Any) -> None:
        _stop_pool(broken)
        with self._lock:
            stranded = [job for job in self._jobs if job.pool is broken and not job.remote_done]
        for job in stranded:
            job._rescue()

    def _slot_freed(self) -> None:
        """Wake a shutdown() waiting for the last job; give a waiting job the free slot."""
        with self._lock:
            if not self._jobs:
                self._idle.notify_all()
            successor = self._next_waiting_locked() if self._waiting else None
        if successor is not None:
            successor._schedule()

    def _next_waiting_locked(self) -> _ProcessJob | None:
        """Give a free slot to the oldest job waiting for one, if any."""
        while self._waiting and self._free:
            job = self._waiting.popleft()
            if job.remote_done:  # cancelled while it waited
                continue
            job.slot = self._free.pop()
            return job
        return None

    def _new_job(
        self, fn: Callable[..., Any], args: tuple[Any, ...], name: str, abandon: bool
    ) -> RemoteJob:
        """Pickle ``fn`` and ``args`` apart, for ``run_call(token, fn_payload, args_payload)``.

        A plain function pickles by reference, to the same bytes every time:
        those are made once (and the worker unpickles them once). Arguments
        that are all None, bools, numbers, strings or bytes always pickle:
        they go to the pool as they are, which pickles them once.
        """
        if self._closed:
            raise RuntimeError(
                f"{self!r} is shut down and takes no new jobs; cannot run {name!r}; "
                "make a new ProcessExecutor"
            )
        plain = type(fn) is FunctionType
        fn_payload = _pickled_functions.get(fn) if plain else None
        try:
            if fn_payload is None:
                fn_payload = pickle.dumps(fn)
                if plain:
                    if len(_pickled_functions) >= PICKLED_FUNCTIONS_MAX:
                        _pickled_functions.clear()
                    _pickled_functions[fn] = fn_payload
            args_payload: bytes | tuple[Any, ...] = args
            for arg in args:
                if type(arg) not in _BARE_ARGS:
                    args_payload = pickle.dumps(args)
                    break
        except Exception:
            pack_call(pickle.dumps, fn, args, self._kind)  # raises the TypeError that names it
            raise
        return _ProcessJob(self, next(self._seq), fn_payload, args_payload, name, abandon)

    def shutdown(self) -> None:
        """Cancel the jobs in flight, wait for them within the rules, stop the processes.

        Each running job's operation is cancelled: its remote token is set,
        and a job still running ``kill_grace`` seconds later is killed. Then
        the worker processes are stopped and reaped. Idempotent. Blocks the
        calling thread; not a cancellation point.
        """
        with self._lock:
            if self._closed and not self._jobs:
                self._finish_pool()
                return
            self._closed = True
            reason = self._stop_reason = f"{self!r} shut down"
            jobs = list(self._jobs)
        # Mark every job cancelled before cancelling any operation: a worker
        # freed by the first cancel must not start a queued job meanwhile.
        # (A job that stops on its mark before its operation is cancelled
        # below takes the reason from _stop_reason.)
        locked = self._shared.lock.acquire(timeout=LOCK_WAIT)
        try:
            for job in jobs:
                if job.slot is not None:
                    self._shared.cancel[job.slot] = job.seq
        finally:
            if locked:
                self._shared.lock.release()
        for job in jobs:
            op = job.op
            if op is not None:
                op.cancel(reason)
            else:
                job._on_cancel()
        limit = None if self._grace is None else self._grace + REAP_WAIT
        with self._idle:
            self._idle.wait_for(lambda: not self._jobs, limit)
            stuck = list(self._jobs)
        # Stopping the pool settles nothing it still runs: end those
        # operations here, or their waiters would wait forever.
        for job in stuck:
            job.finish(None, Cancelled(f"{job.name!r} was cancelled: {reason}"), reason)
        self._finish_pool()

    def _finish_pool(self) -> None:
        self._pool.stop()  # type: ignore[no-untyped-call]
        self._pool.join(timeout=REAP_WAIT)
        _live.discard(self)

    def _stop_now(self, why: str) -> None:
        with self._lock:
            self._closed = True
            self._stop_reason = why
            jobs = list(self._jobs)
        for job in jobs:
            job.finish(None, Cancelled(f"{job.name!r} was cancelled: {why}"), why)
        self._pool.stop()  # type: ignore[no-untyped-call]
        self._pool.join(timeout=REAP_WAIT)
        _live.discard(self)

    def __enter__(self) -> ProcessExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        # Safe in every state, also half made (a refused argument).
        state = "shut down" if getattr(self, "_closed", True) else "open"
        return f"<ProcessExecutor {state} max_workers={getattr(self, 'max_workers', None)}>"
