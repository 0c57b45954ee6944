"""Remote work: operations whose own work runs in another process.

``spawn(fn, *args, executor=ex)`` makes an ordinary operation of the tree
whose own work is ``fn(*args)`` run by ``ex``. Everything the tree knows
(state, deadline, ``cancel()``, ``dump()``, failures climbing as an
``ExceptionGroup``) comes from that local operation; this module is the
bridge between it and the job on the other side. The engines themselves are
someone else's: ``ProcessExecutor`` drives a pebble process pool, and
``asyncop.dask.DaskExecutor`` a ``distributed.Client``.

Local side
----------
A :class:`RemoteJob` is one job of one executor. Its states::

    QUEUED --the worker takes it--> RUNNING --result--> DONE
       |                               |
       |                               +--local cancel--> CANCELLING --> DONE
       +--local cancel (never ran)--> DONE

- QUEUED: sent to the engine, not started by a worker.
- RUNNING: a worker runs ``fn``. The executor knows where (``describe``).
- CANCELLING: the local operation was cancelled while ``fn`` ran; the remote
  token is set, and the executor's rule applies (kill after the grace, wait,
  or abandon).
- DONE: the local operation has its outcome.

This module owns ``state``: the job's ``_transition_to_*`` methods, each of
which says whether it happened, are the only code that writes it (the
executors that subclass :class:`RemoteJob` set it through its
``__init__``). A job moves to RUNNING when a look at it (``describe``) finds
its engine has started it (``_started``), to CANCELLING when a cancel
reaches it while it may still run, and to DONE once, in ``finish``: what
comes second of a result and a cancel sees False and stands down.

The operation has no task and no worker thread of the runtime ever runs it
(its kind is ``OpKind.REMOTE``): ``RemoteJob.launch``, in the spawning
thread, turns it RUNNING and sends the job, and ``RemoteJob.finish``, in
whichever thread learns the outcome (the engine's), ends its work, once. A
job thus costs the runtime no thread handoff at all. A cancel of the
operation sets its token, like the cancel of any running sync work; the
job learns of it through an ``on_cancel`` callback of the token, and the
job, not the cancel, decides when the operation ends.

The call's trip to the worker and back, and the worker's side (the remote
token and its watcher), are in ``asyncop.runtime._executors._remote_call``.
"""

from __future__ import annotations

import enum
import inspect
import signal
from collections.abc import Callable
from inspect import CO_COROUTINE
from types import FunctionType
from typing import TYPE_CHECKING, Any, final

from ...operations import (
    AsyncOperation,
    OpKind,
    Outcome,
    only_cancelled,
    run_after,
    safe_repr,
)
from .._core._waker import WakerStatus, let_go
from .._kinds import code_of_call, describe_fn

if TYPE_CHECKING:
    from ...operations import After, RuntimeHooks

__all__ = [
    "JobState",
    "RemoteExecutor",
    "RemoteJob",
    "RemoteTraceback",
    "worker_death",
]


def worker_death(name: str, exc: BaseException) -> str:
    """What a worker process that died under job ``name`` did, from pebble's ``ProcessExpired``."""
    code = getattr(exc, "exitcode", None)
    pid = getattr(exc, "pid", None)
    process = "the worker process" if pid is None else f"the worker process {pid}"
    if isinstance(code, int) and code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    elif isinstance(code, int):
        how = f"died with exit code {code}"
    else:
        how = f"died ({exc})"
    return (
        f"{process} running {name!r} {how}; the job did not finish; the pool has started "
        "another process"
    )


@final
class RemoteTraceback(Exception):
    """The traceback of an exception raised in remote work, as text.

    Set as the ``__cause__`` of the exception re-raised locally, so that the
    printed traceback shows where the remote code failed.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text.rstrip()}\n"""'


class JobState(enum.Enum):
    """Where a remote job is; see the module docstring."""

    QUEUED = "queued"
    RUNNING = "running"
    CANCELLING = "cancelling"
    DONE = "done"


class RemoteJob:
    """The local side of one remote job; executors subclass it.

    ``state`` is written under the runtime's lock once the job is launched.
    Once sent, the job sits in its operation's ``_task`` slot: a cancel of
    the operation calls its ``_on_cancel()`` from there (see
    ``OpKind.REMOTE``), and ``Runtime.dump()``, which looks there for what a
    parked task waits on, finds the job standing in for one. Nothing else
    reads that slot: no worker ever runs the operation.
    """

    __slots__ = ("_runtime", "abandon", "name", "op", "state")

    # Whether _on_cancel() copes with a cancel that comes while _send() runs
    # (in another thread): then cancels reach the job from the start, and
    # launch() takes the runtime's lock once instead of twice.
    _cancel_while_sending = False

    # What snapshots call the operation's kind: "process" for a job in a
    # worker process, "cluster" for one on a cluster's worker.
    kind = "remote"

    # As a parked task, for dump(): waiting on one event, the job itself,
    # which no cancel ends (the job decides when the operation ends).
    status = WakerStatus.WAITING
    cancellable = False

    def __init__(self, name: str, abandon: bool) -> None:
        self.name = name
        self.abandon = abandon
        self.state = JobState.QUEUED
        self._runtime: Any = None
        self.op: AsyncOperation | None = None

    # -- what executors implement ------------------------------------------

    def _send(self) -> None:
        """Hand the job to the engine."""
        raise NotImplementedError

    def _on_cancel(self) -> None:
        """The local operation was cancelled: apply the executor's rule."""
        raise NotImplementedError

    def where(self) -> str:
        """Where the job runs, for messages and ``dump()``."""
        raise NotImplementedError

    # -- shared -------------------------------------------------------------

    def launch(self, op: AsyncOperation) -> None:
        """Start ``op`` (made by ``_new_operation``, not submitted) and send the job.

        From the spawning thread. An operation born cancelled under a
        cancelled parent has ended already: nothing is sent.

        Raises:
            RuntimeError: ``op`` is a root and the runtime is shut down.
        """
        self.op = op
        runtime: Any = op.runtime
        self._runtime = runtime
        with runtime._lock:
            root = op.parent is None
            if root and runtime._closing and op._outcome is None:
                raise RuntimeError(
                    f"Runtime {runtime.name!r} is shut down and takes no new operations; "
                    f"cannot start {op.name!r}, make a new Runtime"
                )
            # CREATED -> RUNNING (never PENDING: no worker ever pops it).
            if not op._transition_to_running():
                return  # born cancelled under a cancelled parent: it has ended
            if root:
                runtime._track_root_locked(op)
            # Autojump must not move a virtual clock while the job computes.
            runtime._outside_work += 1
            early = self._cancel_while_sending
            if early:
                op._task = self
        try:
            self._send()
        except BaseException as exc:
            self.finish(None, exc)
            return
        if early:
            return
        # Cancels reach the job only once it is sent: one that came
        # meanwhile finds the job where the executor can take it back.
        with runtime._lock:
            if self.state is JobState.DONE:  # it ended already: nothing left to cancel
                return
            op._task = self
            cancelled = op._cancelled
        if cancelled:
            self._on_cancel()

    def finish(self, value: Any, error: BaseException | None, reason: object = None) -> bool:
        """End the operation's work with this outcome; False if it had ended already.

        ``reason``: why the executor cancelled the job, for a job that ends
        cancelled before that cancel reached its operation (a shutdown marks
        every job first); the operation is then cancelled for it on the way.
        """
        if error is None:
            outcome = Outcome.VALUE
        elif only_cancelled(error):
            outcome, error = Outcome.CANCELLED, None
        else:
            outcome = Outcome.ERROR
        op = self.op
        assert op is not None
        runtime = self._runtime
        after: After = []
        # A with-statement: a cancel from the main thread may come here.
        with runtime._lock:
            if not self._transition_to_done():
                return False
            runtime._outside_work -= 1
            last = runtime._outside_work == 0 and (runtime._autojump or runtime._idle_watchers)
            if reason is not None and outcome is Outcome.CANCELLED and not op._cancelled:
                op._task = None  # the job has ended: nothing left for the cancel to stop
                op._cancel_locked(reason, after)
            ended = op._transition_to_ended(outcome, value, error, after)
            assert ended, f"{op.name!r} ended its work twice"
        if after:
            run_after(after)
        if last:
            # No worker ran this operation, so none parks after it: have one
            # look again at what only waited for outside work to end (an
            # autojump of a virtual clock, wait_all_blocked(), whose later
            # callers nudge a worker themselves). Nobody else needs the wake.
            runtime._clock_advanced()
        return True

    def _transition_to_running(self) -> bool:
        """QUEUED -> RUNNING: its engine has started it; False if not QUEUED."""
        with self._runtime._lock:
            if self.state is not JobState.QUEUED:
                return False
            self.state = JobState.RUNNING
            return True

    def _transition_to_cancelling(self) -> bool:
        """QUEUED or RUNNING -> CANCELLING; False once cancelling or done."""
        with self._runtime._lock:
            state = self.state
            if state is JobState.DONE or state is JobState.CANCELLING:
                return False
            self.state = JobState.CANCELLING
            return True

    def _transition_to_done(self) -> bool:
        """-> DONE, once, under the runtime lock: False if it was done already."""
        if self.state is JobState.DONE:
            return False
        self.state = JobState.DONE
        return True

    def _started(self) -> bool:
        """Whether the engine has started running the job (False if it cannot tell)."""
        return False

    def describe(self) -> str:
        state = self.state
        if state is JobState.QUEUED and self._started() and self._transition_to_running():
            state = JobState.RUNNING
        return f"{self.name} {state.value} in {self.where()}"

    # -- as a parked task, for dump() ------------------------------------------

    @property
    def task(self) -> AsyncOperation | None:
        return self.op

    @property
    def events(self) -> tuple[RemoteJob]:
        return (self,)

    @property
    def event(self) -> RemoteJob:
        return self

    def _describe(self) -> str:
        return self.describe()

    def suspension_point(self) -> None:
        return None


class RemoteExecutor:
    """Base of the executors that ``spawn(..., executor=...)`` accepts."""

    _kind = "executor"

    def _new_job(
        self, fn: Callable[..., Any], args: tuple[Any, ...], name: str, abandon: bool
    ) -> RemoteJob:
        """The job that runs ``fn(*args)``, its call pickled, not yet sent.

        Raises:
            RuntimeError: the executor is shut down.
            TypeError: ``fn`` or an argument cannot be pickled; the message
                names it.
        """
        raise NotImplementedError

    def _spawn_into(
        self,
        runtime: RuntimeHooks,
        parent: AsyncOperation | None,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        *,
        name: str | None,
        supervise: bool,
        abandon: bool,
    ) -> AsyncOperation:
        """Make and submit the operation that runs ``fn(*args)`` here."""
        label: object
        if type(fn) is FunctionType:  # the common case: read the code flags
            label = fn.__qualname__ if name is None else name
            coroutine = fn.__code__.co_flags & CO_COROUTINE
        else:
            label = name
            if not callable(fn):
                let_go((fn,))  # refused: it must not warn "never awaited" besides
                raise TypeError(
                    f"cannot run {safe_repr(fn)} on {self!r}: it is not callable; "
                    "pass a plain function"
                )
            coroutine = inspect.iscoroutinefunction(code_of_call(fn))
        if type(label) is not str and not isinstance(label, str):
            label = describe_fn(fn)
        if coroutine:
            raise TypeError(
                f"cannot run async function {label!r} on {self!r}: executors run plain "
                "functions; start an asyncop Runtime inside a plain function instead"
            )
        job = self._new_job(fn, args, label, bool(abandon))
        op = runtime._new_operation(
            None, (), parent=parent, name=label, kind=OpKind.REMOTE, supervise=supervise
        )
        job.launch(op)
        return op
