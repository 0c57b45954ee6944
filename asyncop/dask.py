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
- A running job gets its cancel through its remote token: a
  ``distributed.Event`` per job, set by the client and polled by the worker
  every 10 ms (``asyncop.remote_token()`` inside the task).
- Dask cannot interrupt a running task. By default the operation waits for
  it (no orphans): it ends CANCELLED if the task stopped through its token,
  or with the task's value if it finished anyway. With
  ``spawn(..., abandon=True)`` the operation ends at once and the task's
  late result is dropped.

The cancel itself talks to the scheduler (set the event, ask whether the
task has started, release it); it runs on the client's event loop, never in
the thread that called ``cancel()``.
"""

from __future__ import annotations

import importlib
import re
import threading
import uuid
from collections.abc import Callable
from typing import Any, final

try:
    import distributed

    # Untyped: reached through Any, as are the distributed objects below.
    _cloudpickle: Any = importlib.import_module("cloudpickle")
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
    decode_outcome,
    pack_call,
    run_call,
)

__all__ = ["DaskExecutor"]

_Event: Any = distributed.Event

# How often a running task polls its token: one scheduler round trip each.
POLL = 0.01
# How long the token of a released task stays set, for a task that started
# as it was released.
TOKEN_KEPT = 60.0
# Task states (on the scheduler, then on the worker) in which fn has begun.
_SCHEDULER_STARTED = frozenset({"memory", "erred", "forgotten"})
_WORKER_STARTED = frozenset({"executing", "long-running", "memory", "error", "cancelled"})


# -- on the worker -----------------------------------------------------------------


def _run_task(event_name: str, payload: bytes) -> bytes:
    worker: Any = distributed.get_worker()
    events: list[Any] = []

    def poll() -> bool:
        if not events:
            events.append(_Event(event_name, client=worker.client))
        return bool(events[0].is_set())

    token = RemoteToken(poll, POLL, f"Dask task on worker {worker.address}")
    try:
        return run_call(token, payload)
    finally:
        if token.cancelled:
            # The client leaves a set token in place for a task it released
            # (the task may start as it is released); the task clears it.
            try:
                events[0].clear()
            except Exception:  # pragma: no cover - the worker is closing
                pass


def _broken(name: str, error: BaseException) -> BrokenResourceError:
    """The failure of a task Dask itself could not run (its workers died)."""
    broken = BrokenResourceError(
        f"Dask could not run {name!r} ({type(error).__name__}: {error}); "
        "the task did not finish"
    )
    broken.__cause__ = error
    return broken


def _scheduler_state(key: str, dask_scheduler: Any = None) -> tuple[str | None, str | None]:
    task = dask_scheduler.tasks.get(key)
    if task is None:
        return None, None
    where = task.processing_on.address if task.processing_on is not None else None
    return str(task.state), where


def _worker_state(key: str, dask_worker: Any = None) -> str | None:
    task = dask_worker.state.tasks.get(key)
    return None if task is None else str(task.state)


# -- in the client -------------------------------------------------------------------


@final
class _DaskJob(RemoteJob):
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
        self.future = client.submit(
            _run_task, self.token_name, self.payload, key=self.key, pure=False
        )
        self.payload = b""
        client.loop.add_callback(self._watch)

    async def _watch(self) -> None:
        future = self.future
        try:
            outcome = await future._result(raiseit=False)
        except BaseException as exc:  # the client is closing under the job
            outcome = exc
        try:
            if future.cancelled():
                self.finish(None, Cancelled(f"{self.name!r} was cancelled"))
            elif isinstance(outcome, bytes):
                self.finish(*decode_outcome(outcome, self))
            else:
                error = outcome[1] if isinstance(outcome, tuple) else outcome
                self.finish(None, _broken(self.name, error))
        finally:
            self.remote_done.set()
            with self.executor._lock:
                self.executor._jobs.discard(self)
            if self._token_set:
                if future.cancelled():
                    # Released: the task may still start, and must see its
                    # token; clear it later (a task that ran clears it too).
                    self.executor.client.loop.call_later(TOKEN_KEPT, self._clear_token)
                else:
                    await self._clear_token()

    def where(self) -> str:
        return f"Dask task {self.key} on {self.executor.client.scheduler.address}"

    def describe(self) -> str:
        # The client does not see a task start; QUEUED means handed to Dask.
        state = "submitted" if self.state is JobState.QUEUED else self.state.value
        return f"{self.name} {state} as {self.where()}"

    def _on_cancel(self) -> None:
        if self._mark(JobState.CANCELLING):
            # Scheduler round trips: on the client's event loop, concurrently
            # for every job a cancel reaches, never in the cancelling thread.
            self.executor.client.loop.add_callback(self._cancel_remote)

    async def _cancel_remote(self) -> None:
        if self.remote_done.is_set():
            return
        client = self.executor.client
        try:
            # The token first: a task that starts while we look still sees it.
            await client.scheduler.event_set(name=self.token_name)
            self._token_set = True
            state, address = await client.run_on_scheduler(
                _scheduler_state, self.key, asynchronous=True
            )
            started = state in _SCHEDULER_STARTED
            if state == "processing" and address is not None:
                states = await client.run(
                    _worker_state, self.key, workers=[address], asynchronous=True
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
        except Exception:  # pragma: no cover - the client closed meanwhile
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
        self._lock = threading.Lock()
        self._jobs: set[_DaskJob] = set()
        self._closed = False

    def _check_open(self, name: str) -> None:
        if self._closed or self.client.status not in ("running", "connecting", "newly-created"):
            raise RuntimeError(
                f"{self!r} is shut down or its client is closed; cannot run {name!r}; "
                "make a new DaskExecutor with a running client"
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
        state = "shut down" if self._closed else "open"
        return f"<DaskExecutor {state} scheduler={self.client.scheduler.address}>"


_publish("asyncop.dask", globals(), __all__)
