"""Run operations' work on a Dask cluster: ``spawn(fn, *args, executor=DaskExecutor(client))``.

Needs the extra: ``pip install 'asyncop[dask]'``.

Each job is one Dask task, submitted through the ``distributed.Client`` you
pass. The operation is an ordinary node of the tree (state, deadline,
``cancel()``, ``dump()``, failures in the parent's ``ExceptionGroup`` with the
remote traceback kept). The call is pickled with cloudpickle, as Dask does,
so lambdas and local functions work too.

Cancel
------
- A job still waiting for a worker is released from the scheduler and never
  runs; the operation ends CANCELLED at once.
- A running job gets its cancel through its remote token
  (``asyncop.remote_token()`` inside the task). The client asks the
  scheduler where the task runs and pushes the cancel to that worker
  (``Client.run``), which sets the token at once: two round trips through
  the scheduler, then the worker's event loop, typically 3 to 40 ms. That
  loop needs the GIL: a job computing in pure Python delays it by up to
  ``sys.getswitchinterval()`` each time, which can add tens of ms. Each
  job also has a ``distributed.Event``, set first and polled by the worker
  every ``POLL`` seconds, for a task that starts elsewhere while the cancel
  is on its way.
- Dask cannot interrupt a running task. By default the operation waits for
  it (no orphans): it ends CANCELLED if the task stopped through its token,
  or with the task's value if it finished anyway. With
  ``spawn(..., abandon=True)`` the operation ends at once and the task's
  late result is dropped.

The cancel itself talks to the scheduler (set the event, ask where the task
is, push the cancel, release it); it runs on the client's event loop, never
in the thread that called ``cancel()``.

Lost work
---------
A task Dask drops before it finishes (the client is closed, the cluster
restarted, the connection to the scheduler lost) is work that did not
happen: its operation ends FAILED with a ``BrokenResourceError`` that says
why, unless the operation had been cancelled, in which case it ends
CANCELLED. Every outcome, even one that cannot be rebuilt in the client,
ends the operation (``decode_outcome``): nothing raised on the client's
event loop is left to a log line.
"""

from __future__ import annotations

import asyncio
import importlib
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, final

try:
    import distributed

    # Untyped: reached through Any, as are the distributed objects below.
    _cloudpickle: Any = importlib.import_module("cloudpickle")
    _utils: Any = importlib.import_module("distributed.utils")
except ImportError:  # pragma: no cover - depends on the installation
    raise ImportError(
        "asyncop.dask needs Dask distributed, which is not installed; "
        "run pip install 'asyncop[dask]'"
    ) from None

from ._exports import publish as _publish
from .operations import BrokenResourceError, Cancelled
from .runtime import (
    JobState,
    RemoteExecutor,
    RemoteJob,
    RemoteToken,
    cancel_remote,
    decode_outcome,
    describe_error,
    pack_call,
    run_call,
)

__all__ = ["DaskExecutor"]

_sync: Any = _utils.sync

# How often a running task polls its token's Event: one scheduler round
# trip each. Only a fallback: the client pushes the cancel to the task's
# worker (_cancel_on_worker), which sets the token at once.
POLL = 0.1
# How long the token of a released task stays set, for a task that started
# as it was released.
TOKEN_KEPT = 60.0
# Task states (on the scheduler, then on the worker) in which fn has begun.
_SCHEDULER_STARTED = frozenset({"memory", "erred", "forgotten"})
_WORKER_STARTED = frozenset({"executing", "long-running", "memory", "error", "cancelled"})
# A client in these states takes new tasks.
_OPEN = frozenset({"running", "connecting", "newly-created"})


# -- on the worker -----------------------------------------------------------------

# The tokens of the tasks running in this worker process, by token name, for
# the cancel the client pushes; and the pushed cancels that came before
# their task started, with when they came (dropped after TOKEN_KEPT).
_tokens_lock = threading.Lock()
_running: dict[str, RemoteToken] = {}
_early: dict[str, float] = {}


def _run_task(event_name: str, payload: bytes) -> bytes:
    worker: Any = distributed.get_worker()
    scheduler = worker.scheduler

    def poll() -> bool:
        # Through the worker's own connection to the scheduler: no client
        # to make in the worker, which would take a tenth of a second.
        return bool(_sync(worker.loop, scheduler.event_is_set, name=event_name))

    token = RemoteToken(poll, POLL, f"Dask task on worker {worker.address}")
    with _tokens_lock:
        _running[event_name] = token
        early = _early.pop(event_name, None) is not None
    if early:
        token._set()
    try:
        return run_call(token, payload)
    finally:
        with _tokens_lock:
            _running.pop(event_name, None)
        if token.cancelled:
            # The client leaves a set token in place for a task it released
            # (the task may start as it is released); the task clears it.
            worker.loop.add_callback(_clear_event, scheduler, event_name)


async def _clear_event(scheduler: Any, event_name: str) -> None:
    try:
        await scheduler.event_clear(name=event_name)
    except Exception:  # pragma: no cover - the worker is closing
        pass


def _cancel_on_worker(event_name: str, key: str, dask_worker: Any = None) -> str | None:
    """On the worker's event loop: the pushed cancel of a task; return its state there.

    Sets the token of the task if it runs here, or notes the cancel for a
    task that starts here later. Noted before the state is read: a task
    that starts after the read finds the note.
    """
    with _tokens_lock:
        token = _running.get(event_name)
        if token is None:
            now = time.monotonic()
            _early[event_name] = now
            if len(_early) > 64:
                for name, when in list(_early.items()):
                    if now - when > TOKEN_KEPT:
                        del _early[name]
    if token is not None:
        cancel_remote(token)
    task = dask_worker.state.tasks.get(key)
    return None if task is None else str(task.state)


def _broken(name: str, error: BaseException) -> BrokenResourceError:
    """The failure of a task Dask itself could not run (its workers died)."""
    broken = BrokenResourceError(
        f"Dask could not run {name!r} ({type(error).__name__}: {error}); the task did not finish"
    )
    broken.__cause__ = error
    return broken


def _scheduler_state(key: str, dask_scheduler: Any = None) -> tuple[str | None, str | None]:
    task = dask_scheduler.tasks.get(key)
    if task is None:
        return None, None
    where = task.processing_on.address if task.processing_on is not None else None
    return str(task.state), where


# -- in the client -------------------------------------------------------------------


@final
class _DaskJob(RemoteJob):
    kind = "cluster"

    def __init__(self, executor: DaskExecutor, payload: bytes, name: str, abandon: bool) -> None:
        super().__init__(name, abandon)
        self.executor = executor
        self.payload = payload
        self.key = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-{uuid.uuid4().hex}"
        self.token_name = f"asyncop-token-{self.key}"
        self.future: Any = None
        self.remote_done = threading.Event()
        self._token_set = False

    def _send(self) -> None:
        executor = self.executor
        client = executor.client
        with executor._lock:
            executor._check_open(self.name)
            executor._jobs.add(self)
        try:
            self.future = client.submit(
                _run_task, self.token_name, self.payload, key=self.key, pure=False
            )
            client.loop.add_callback(self._watch)
        except BaseException:
            # (launch() fails the operation with it.) Nothing will watch the
            # task: a shutdown() must not wait for it.
            self._forget()
            raise
        self.payload = b""

    def _forget(self) -> None:
        """The job will not end any other way: stop counting it as in flight."""
        self.remote_done.set()
        with self.executor._lock:
            self.executor._jobs.discard(self)

    async def _watch(self) -> None:
        """End the operation with the task's outcome; on the client's event loop.

        Whatever happens, the operation ends here: an exception would only
        be logged by the event loop.
        """
        future = self.future
        try:
            outcome = await future._result(raiseit=False)
        except BaseException as exc:  # the client is closing under the job
            outcome = exc
        try:
            value, error = self._outcome(future, outcome)
            self.finish(value, error)
        finally:
            self._forget()
        if self._token_set and not isinstance(outcome, asyncio.CancelledError):
            if future.cancelled():
                # Released: the task may still start, and must see its
                # token; clear it later (a task that ran clears it too).
                self.executor.client.loop.call_later(TOKEN_KEPT, self._clear_token)
            else:
                await self._clear_token()

    def _outcome(self, future: Any, outcome: Any) -> tuple[Any, BaseException | None]:
        """The value or error the task's outcome (from ``Future._result``) comes to."""
        if isinstance(outcome, bytes):
            return decode_outcome(outcome, self)
        if isinstance(outcome, tuple):  # the task erred in Dask: (type, error, traceback)
            outcome = outcome[1]
        if (
            future.cancelled()
            or isinstance(outcome, asyncio.CancelledError)
            or self.executor.client.status not in _OPEN
        ):
            return None, self._lost(outcome)
        return None, _broken(self.name, outcome)

    def _lost(self, cause: BaseException) -> BaseException:
        """A task Dask dropped before it finished: a failure, unless the operation was cancelled."""
        op = self.op
        if self.state is JobState.CANCELLING or (op is not None and op._cancelled):
            return Cancelled(f"{self.name!r} was cancelled")
        reason = getattr(cause, "reason", None)
        if reason == "scheduler-restart":
            why = "the cluster was restarted"
        elif reason == "scheduler-connection-lost":
            why = "the client lost its connection to the scheduler"
        elif self.executor.client.status in ("closing", "closed"):
            why = "its client was closed"
        elif self.executor.client.status not in _OPEN:
            why = f"its client is {self.executor.client.status}"
        else:
            why = f"Dask cancelled the task: {describe_error(cause)}"
        lost = BrokenResourceError(
            f"Dask lost {self.name!r} before it finished ({why}); run it again on a running cluster"
        )
        lost.__cause__ = cause
        return lost

    def where(self) -> str:
        return f"Dask task {self.key} on {self.executor._address}"

    def describe(self) -> str:
        # The client does not see a task start; QUEUED means handed to Dask.
        state = "submitted" if self.state is JobState.QUEUED else self.state.value
        return f"{self.name} {state} as {self.where()}"

    def _on_cancel(self) -> None:
        if self._transition_to_cancelling():
            # Scheduler round trips: on the client's event loop, concurrently
            # for every job a cancel reaches, never in the cancelling thread.
            try:
                self.executor.client.loop.add_callback(self._cancel_remote)
            except Exception:  # the client's loop is gone: nothing would end the job
                self.finish(None, Cancelled(f"{self.name!r} was cancelled"))
                self._forget()

    async def _cancel_remote(self) -> None:
        if self.remote_done.is_set():
            return
        client = self.executor.client
        self._token_set = True
        try:
            # Both at once; the answer is used once the token is set, so a
            # task that starts meanwhile on another worker finds it by its poll.
            _, (state, address) = await asyncio.gather(
                client.scheduler.event_set(name=self.token_name),
                client.run_on_scheduler(_scheduler_state, self.key, asynchronous=True),
            )
            started = state in _SCHEDULER_STARTED
            if state == "processing" and address is not None:
                # The push: the worker sets the running task's token now.
                states = await client.run(
                    _cancel_on_worker,
                    self.token_name,
                    self.key,
                    workers=[address],
                    asynchronous=True,
                )
                started = states.get(address) in _WORKER_STARTED
        except Exception:  # the cluster is going away; treat the task as running
            started = True
        if not started or self.abandon:
            self.finish(None, Cancelled(f"{self.name!r} was cancelled"))
            try:
                await client.cancel([self.future], asynchronous=True)
            except Exception:  # pragma: no cover - the client closed meanwhile
                pass

    async def _clear_token(self) -> None:
        try:
            await self.executor.client.scheduler.event_clear(name=self.token_name)
        except Exception:  # the client closed meanwhile
            pass


@final
class DaskExecutor(RemoteExecutor):
    """Runs plain functions as tasks on the cluster of a ``distributed.Client``.

    ``spawn(fn, *args, executor=DaskExecutor(client))`` makes an operation
    whose work is one Dask task; see the module docstring for how cancel
    reaches it. Each task costs a few milliseconds of scheduling (about 2 ms
    on a local cluster), so give it work worth at least tens of ms.

    Args:
        client: a connected, synchronous ``distributed.Client``. The executor
            does not own it: close it yourself.

    Raises:
        TypeError: ``client`` is not a synchronous ``distributed.Client``.
    """

    _kind = "a Dask worker"

    def __init__(self, client: distributed.Client) -> None:
        if not isinstance(client, distributed.Client):
            raise TypeError(
                f"DaskExecutor() needs a distributed.Client, got {type(client).__name__}; "
                "pass distributed.Client(...) connected to your cluster"
            )
        if client.asynchronous:
            raise TypeError(
                "DaskExecutor() needs a synchronous distributed.Client, got an asynchronous "
                "one; make the client with asynchronous=False"
            )
        self.client: Any = client
        # Read once: a closed client forgets its scheduler, and messages
        # about the jobs it lost still name it.
        self._address: str = str(getattr(getattr(client, "scheduler", None), "address", None))
        self._lock = threading.Lock()
        self._jobs: set[_DaskJob] = set()
        self._closed = False

    def _check_open(self, name: str) -> None:
        if self._closed:
            raise RuntimeError(
                f"{self!r} is shut down and takes no new jobs; cannot run {name!r}; "
                "make a new DaskExecutor"
            )
        status = self.client.status
        if status not in _OPEN:
            raise RuntimeError(
                f"{self!r} cannot run {name!r}: its client is {status}; make a new "
                "DaskExecutor with a running client"
            )

    def _new_job(
        self, fn: Callable[..., Any], args: tuple[Any, ...], name: str, abandon: bool
    ) -> RemoteJob:
        self._check_open(name)
        payload = pack_call(_cloudpickle.dumps, fn, args, self._kind)
        return _DaskJob(self, payload, name, abandon)

    def shutdown(self, timeout: float | None = None) -> None:
        """Cancel the jobs in flight and wait for them; the client stays open.

        Blocks the calling thread; not a cancellation point.

        Args:
            timeout: seconds to wait at most for running tasks that ignore
                their token; None waits as long as they take.
        """
        with self._lock:
            self._closed = True
            jobs = list(self._jobs)
        for job in jobs:
            if job.op is not None:
                job.op.cancel(f"{self!r} shut down")
        for job in jobs:
            if not job.remote_done.wait(timeout):
                break

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        # Safe in every state: half made (a refused client), with its
        # client closed, shut down.
        if getattr(self, "_closed", False):
            state = "shut down"
        else:
            status = getattr(getattr(self, "client", None), "status", None)
            state = "open" if status in _OPEN else f"client {status}"
        return f"<DaskExecutor {state} scheduler={getattr(self, '_address', None)}>"


_publish("asyncop.dask", globals(), __all__)
