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

The operation has no task and no worker thread of the runtime ever runs it
(its kind is ``OpKind.REMOTE``): ``RemoteJob.launch``, in the spawning
thread, turns it RUNNING and sends the job, and ``RemoteJob.finish``, in
whichever thread learns the outcome (the engine's), ends its work, once. A
job thus costs the runtime no thread handoff at all. A cancel of the
operation sets its token, like the cancel of any running sync work; the
job learns of it through an ``on_cancel`` callback of the token, and the
job, not the cancel, decides when the operation ends.

Crossing the wire
-----------------
The call is pickled here, in the spawning thread, so that an unpicklable
function or argument is a ``TypeError`` from ``spawn()`` itself, naming it,
before anything is sent. The worker sends back the pickled outcome
(:func:`run_call`): a value, an exception with its formatted traceback, or a
note that the job was cancelled or dropped. A result that cannot be pickled
comes back as that fact, and becomes a ``TypeError`` here.

Remote side
-----------
Inside the job, ``remote_token()`` returns the job's :class:`RemoteToken`.
One watcher thread per worker process polls the tokens of the jobs running
there (each kind says how to poll and how often), sets their flags, and
cancels the roots of every asyncop ``Runtime`` in that process that the job
started: a root whose context carries the job's token. So a cancel on the
client reaches the whole remote subtree.
"""

from __future__ import annotations

import contextvars
import enum
import inspect
import os
import pickle
import threading
import time
import traceback
from collections.abc import Callable
from inspect import CO_COROUTINE
from types import FunctionType
from typing import TYPE_CHECKING, Any, Literal, final, overload

from ..operations import (
    AsyncOperation,
    CancellationError,
    Cancelled,
    OpKind,
    Outcome,
    only_cancelled,
    run_after,
)
from ..platform import check_timeout
from ._scheduler import live_runtimes
from ._waker import WakerStatus

if TYPE_CHECKING:
    from ..operations import After, RuntimeHooks

__all__ = [
    "JobState",
    "RemoteExecutor",
    "RemoteJob",
    "RemoteToken",
    "RemoteTraceback",
    "decode_outcome",
    "describe_fn",
    "remote_token",
    "run_call",
]


def describe_fn(fn: object) -> str:
    """A function's name for messages and ``dump()``."""
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


# ---------------------------------------------------------------------------
# The remote side: tokens and the watcher
# ---------------------------------------------------------------------------

# How often the watcher wakes to poll (no token is polled more often than
# its period), and how long it keeps polling after the last token is gone
# before it parks.
TICK = 0.01
LINGER = 1.0
# How many pickled plain functions each side keeps (see ProcessExecutor._pack).
PICKLED_FUNCTIONS_MAX = 1024

_current: contextvars.ContextVar[RemoteToken | None] = contextvars.ContextVar(
    "asyncop_remote_token", default=None
)


@final
class RemoteToken:
    """Inside remote work: follows the cancel of the local operation.

    Get it with ``asyncop.remote_token()``. ``cancelled`` turns true within
    50 ms of the local cancel for a ``ProcessExecutor`` job and 100 ms for a
    ``DaskExecutor`` job.
    """

    __slots__ = ("_cancelled", "_direct", "_event", "_next_poll", "_period", "_poll", "_where")

    def __init__(
        self, poll: Callable[[], bool], period: float, where: str, *, direct: bool = False
    ) -> None:
        self._poll = poll
        # A poll cheap enough to make on every read of ``cancelled``.
        self._direct = direct
        self._period = period
        self._where = where
        # Set once by the watcher; the event is made for the first wait()
        # (most jobs never wait on their token). Both under _token_lock.
        self._cancelled = False
        self._event: threading.Event | None = None
        self._next_poll = time.monotonic() + period

    @property
    def cancelled(self) -> bool:
        """True once the local operation was cancelled."""
        return self._cancelled or (self._direct and self._poll())

    def check(self) -> None:
        """Raise ``Cancelled`` if the local operation was cancelled.

        Raises:
            Cancelled: the token is cancelled; let it escape to end the job.
        """
        if self.cancelled:
            raise Cancelled(f"{self._where} was cancelled by its local operation")

    def wait(self, timeout: float | None = None) -> bool:
        """Block the calling thread until the token is cancelled.

        Args:
            timeout: seconds to wait at most; None waits as long as it takes.

        Returns:
            True if the token is cancelled, False if the timeout passed.
        """
        limit = check_timeout(timeout, "remote_token().wait(timeout=...)")
        with _token_lock:
            if self._cancelled:
                return True
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        if limit is None:
            while not event.wait(3600.0):
                pass
            return True
        return event.wait(limit)

    def _set(self) -> None:
        """Mark the token cancelled and wake its waiters (the watcher's job)."""
        with _token_lock:
            self._cancelled = True
            event = self._event
        if event is not None:
            event.set()

    def __repr__(self) -> str:
        state = "cancelled" if self._cancelled else "live"
        return f"<RemoteToken of {self._where} {state}>"


# Guards the tokens' lazy events (rarely taken: a first wait(), a cancel).
_token_lock = threading.Lock()


def remote_token() -> RemoteToken:
    """Return the cancel token of the remote job the caller runs in.

    Inside a function run by ``spawn(fn, executor=...)`` (in the worker
    process, or in any asyncop operation that function started), the token
    follows the local operation's cancel: poll ``cancelled``, call
    ``check()``, or block in ``wait()``. Not a cancellation point.

    Raises:
        RuntimeError: the caller is not inside remote work.
    """
    token = _current.get()
    if token is None:
        raise RuntimeError(
            "asyncop.remote_token() was called outside remote work; it works only inside "
            "a function run with spawn(fn, executor=...); local work uses "
            "current_operation().token instead"
        )
    return token


@final
class _Watcher:
    """Polls the tokens of the jobs running in this process; one per process.

    Registering a token wakes nobody while the thread is polling: it finds
    the token at its next tick (a token's first poll is one period after it
    is made anyway, and a tick is as long as the longest period). Only after
    ``LINGER`` seconds without a token does the thread park, and only then
    does a new token wake it. A stream of short jobs thus costs no thread
    switch per job, and an idle process no CPU.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        # A dict, not a set: insertion and removal are single steps that
        # need no lock, and a snapshot is one list() call.
        self._tokens: dict[RemoteToken, None] = {}
        # Set and cleared under _cond: the thread, while it runs; whether it
        # waits for a token with no timeout.
        self._thread: threading.Thread | None = None
        self._parked = False

    def register(self, token: RemoteToken) -> None:
        self._tokens[token] = None
        # Read after the insertion: the thread sets _parked before it looks
        # at _tokens a last time, so either it sees the token or we see it
        # parked (and it waits under _cond, so the notify cannot be lost).
        if self._parked or self._thread is None:
            with self._cond:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._main, name="asyncop-remote-token-watcher", daemon=True
                    )
                    self._thread.start()
                elif self._parked:
                    self._cond.notify()

    def unregister(self, token: RemoteToken) -> None:
        self._tokens.pop(token, None)

    def _after_fork(self) -> None:
        # The child has no watcher thread, and none of the parent's jobs.
        self._cond = threading.Condition(threading.Lock())
        self._tokens = {}
        self._thread = None
        self._parked = False

    def _main(self) -> None:
        try:
            self._poll_tokens()
        finally:
            # Never expected; the next register() starts a new thread.
            with self._cond:
                self._thread = None
                self._parked = False

    def _poll_tokens(self) -> None:
        idle_since: float | None = None
        while True:
            # A fixed beat, whatever the tokens' periods: waking more often
            # would take the GIL from the jobs for polls that find nothing.
            time.sleep(TICK)
            tokens = list(self._tokens)
            now = time.monotonic()
            if not tokens:
                if idle_since is None:
                    idle_since = now
                elif now - idle_since >= LINGER:
                    with self._cond:
                        self._parked = True
                        if not self._tokens:
                            # One wake-up, then back to polling for a while,
                            # even if that job has already ended (as most
                            # have by the time this thread runs): waiting
                            # again would cost a wake-up per job.
                            self._cond.wait()
                        self._parked = False
                    idle_since = None
                continue
            idle_since = None
            for token in tokens:
                if token._cancelled or token._next_poll > now:
                    continue
                token._next_poll = now + token._period
                try:
                    hit = token._poll()
                except Exception:  # the engine went away; the job ends anyway
                    hit = False
                if hit:
                    token._set()
                    _cancel_remote_roots(token)


_watcher = _Watcher()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_watcher._after_fork)


def _carries(ctx: contextvars.Context | None, token: RemoteToken) -> bool:
    return ctx is not None and ctx.get(_current) is token


def _cancel_remote_roots(token: RemoteToken) -> None:
    """Cancel the roots of this process's runtimes that the job started."""
    for runtime in live_runtimes():
        with runtime._lock:
            roots = list(runtime._roots)
        for root in roots:
            mine = _carries(root._ctx, token)
            if not mine and root._ctx is None:
                # A scope's block has no context of its own: it is the job's
                # if the children it spawned carry the job's.
                mine = any(_carries(child._ctx, token) for child in root.children())
            if mine:
                root.cancel(f"{token._where} was cancelled by its local operation")


# In the worker: the plain functions unpickled from ProcessExecutor._pack's bytes,
# looked up once per process rather than imported again for every job.
_functions: dict[bytes, Callable[..., Any]] = {}


# The exact types of the results that always pickle (see run_call's plain).
_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})


@overload
def run_call(
    token: RemoteToken,
    payload: bytes,
    args_payload: bytes | None = None,
    *,
    plain: Literal[False] = False,
) -> bytes: ...


@overload
def run_call(
    token: RemoteToken, payload: bytes, args_payload: bytes | None = None, *, plain: bool
) -> bytes | tuple[Any, ...]: ...


def run_call(
    token: RemoteToken, payload: bytes, args_payload: bytes | None = None, *, plain: bool = False
) -> bytes | tuple[Any, ...]:
    """In the worker: run the pickled call under ``token``; pickle the outcome.

    ``payload`` is the pickled ``(fn, args)``; or, with ``args_payload``,
    the pickled ``fn`` alone (see ``ProcessExecutor._pack``). With ``plain`` (for an
    engine that pickles what the job returns), a value of a type that always
    pickles comes back as the message itself, not pickled: the engine's
    pickling carries it, and ``decode_outcome`` skips one unpickling. Never
    raises: every outcome, including a result that cannot be pickled, is a
    message for the local side.
    """
    try:
        if args_payload is None:
            fn, args = pickle.loads(payload)
        else:
            fn = _functions.get(payload)
            if fn is None:
                fn = pickle.loads(payload)
                if type(fn) is FunctionType:  # a reference: it finds the same function
                    if len(_functions) >= PICKLED_FUNCTIONS_MAX:
                        _functions.clear()
                    _functions[payload] = fn
            args = pickle.loads(args_payload)
    except BaseException as exc:
        return _pack_error(exc, "unpickling the call in the worker")
    reset = _current.set(token)
    _watcher.register(token)
    try:
        value = fn(*args)
    except (Cancelled, CancellationError) as exc:
        # Cancelled escaped the job, or a runtime inside it, whose roots the
        # token cancelled, reported them as results it cannot give.
        if token._cancelled or token._poll():
            return pickle.dumps(("cancelled",))
        return _pack_error(exc, traceback.format_exc())
    except BaseException as exc:
        return _pack_error(exc, traceback.format_exc())
    finally:
        _watcher.unregister(token)
        _current.reset(reset)
    if plain and type(value) in _PLAIN:
        return ("value", value)
    try:
        return pickle.dumps(("value", value))
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        return pickle.dumps(("unpicklable", type(value).__qualname__, why))


def _pack_error(exc: BaseException, text: str) -> bytes:
    try:
        return pickle.dumps(("error", exc, text))
    except Exception:
        return pickle.dumps(("error-text", repr(exc), text))


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


def decode_outcome(
    data: bytes | tuple[Any, ...], job: RemoteJob
) -> tuple[Any, BaseException | None]:
    """Turn a worker's message (see ``run_call``) into the local operation's value or error."""
    message = pickle.loads(data) if isinstance(data, bytes) else data
    kind = message[0]
    if kind == "value":
        return message[1], None
    if kind in ("cancelled", "dropped"):
        return None, Cancelled(f"{job.where()} was cancelled")
    if kind == "unpicklable":
        return None, TypeError(
            f"the result of {job.name!r} (a {message[1]}) cannot be pickled to come back "
            f"from {job.where()}: {message[2]}; return plain data (numbers, strings, "
            "lists, dicts, dataclasses)"
        )
    if kind == "error":
        error: BaseException = message[1]
    else:
        error = RuntimeError(
            f"{job.name!r} raised {message[1]} in {job.where()}, which cannot be pickled "
            "to come back; raise exceptions that pickle"
        )
    error.__cause__ = RemoteTraceback(message[2])
    error.add_note(f"raised in {job.where()}")
    return None, error


# ---------------------------------------------------------------------------
# The local side: jobs, the wait, the executor base
# ---------------------------------------------------------------------------


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
            if op._outcome is not Outcome.NONE:
                return
            if op.parent is None:
                if runtime._closing:
                    raise RuntimeError(
                        f"Runtime {runtime.name!r} is shut down and takes no new operations; "
                        f"cannot start {op.name!r}, make a new Runtime"
                    )
                runtime._track_root_locked(op)
            op._transition_to_running()  # (never PENDING: no worker ever pops it)
            # No local code runs in it: no context to keep (a child spawned
            # under it copies the spawning thread's, as under a scope).
            op._ctx = None
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

    def finish(self, value: Any, error: BaseException | None) -> bool:
        """End the operation's work with this outcome; False if it had ended already."""
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
            if self.state is JobState.DONE:
                return False
            self.state = JobState.DONE
            runtime._outside_work -= 1
            last = runtime._outside_work == 0
            op._end_work_locked(outcome, value, error, after)
        if after:
            run_after(after)
        if last:
            # No worker ran this operation, so none parks after it: have one
            # look again at what only waited for outside work to end (an
            # autojump of a virtual clock, wait_all_blocked()).
            runtime._clock_advanced()
        return True

    def _mark(self, state: JobState) -> bool:
        """QUEUED/RUNNING -> ``state``; False once cancelling or done."""
        with self._runtime._lock:
            if self.state is JobState.DONE or self.state is JobState.CANCELLING:
                return False
            self.state = state
            return True

    def describe(self) -> str:
        return f"{self.name} {self.state.value} in {self.where()}"

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

    def _pack(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """Pickle the call; a TypeError names what cannot be pickled."""
        raise NotImplementedError

    def _new_job(self, payload: Any, name: str, abandon: bool) -> RemoteJob:
        raise NotImplementedError

    def _check_open(self, name: str) -> None:
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
        label = name if isinstance(name, str) else describe_fn(fn)
        if not callable(fn):
            raise TypeError(
                f"cannot run {fn!r} on {self!r}: it is not callable; pass a plain function"
            )
        if (
            fn.__code__.co_flags & CO_COROUTINE
            if type(fn) is FunctionType
            else inspect.iscoroutinefunction(fn)
        ):
            raise TypeError(
                f"cannot run async function {label!r} on {self!r}: executors run plain "
                "functions; start an asyncop Runtime inside a plain function instead"
            )
        self._check_open(label)
        payload = self._pack(fn, args)
        job = self._new_job(payload, label, bool(abandon))
        op = runtime._new_operation(
            None, (), parent=parent, name=label, kind=OpKind.REMOTE, supervise=supervise
        )
        job.launch(op)
        return op


def pack_call(
    dumps: Callable[[Any], bytes], fn: Callable[..., Any], args: tuple[Any, ...], where: str
) -> bytes:
    """Pickle ``(fn, args)`` with ``dumps``; on failure name the culprit."""
    try:
        return dumps((fn, args))
    except Exception as exc:
        failure = exc
    name = describe_fn(fn)
    try:
        dumps(fn)
    except Exception as exc:
        raise TypeError(
            f"function {name!r} cannot be pickled to run in {where} "
            f"({type(exc).__name__}: {exc}); use a function defined at module level"
        ) from None
    for index, arg in enumerate(args):
        try:
            dumps(arg)
        except Exception as exc:
            raise TypeError(
                f"argument {index} of {name!r} ({type(arg).__qualname__}) cannot be pickled "
                f"to run in {where} ({type(exc).__name__}: {exc}); pass plain data instead"
            ) from None
    raise TypeError(
        f"the call {name}(...) cannot be pickled to run in {where} "
        f"({type(failure).__name__}: {failure}); pass plain data instead"
    ) from None
