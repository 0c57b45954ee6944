"""Remote work: operations whose own work runs in another process.

``spawn(fn, *args, executor=ex)`` makes an ordinary coroutine operation whose
only step is to hand ``fn(*args)`` to ``ex`` and wait for it. Everything the
tree knows (state, deadline, ``cancel()``, ``dump()``, failures climbing as
an ``ExceptionGroup``) comes from that local operation; this module is the
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

The job is sent from the spawning thread, as soon as the operation exists
(``RemoteJob.launch``). The operation's task then waits on
:class:`RemoteWait`, which is not a cancellable wait (like
``spawn_blocking``): a cancel of the operation reaches the job through an
``on_cancel`` callback of the operation's token, and the job, not the
cancel, decides when the wait ends. Only ``RemoteJob.finish`` ends it, once;
the outcome waits in the job if the task has not made its first step yet.

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
import pickle
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, final

from ..operations import AsyncOperation, CancellationError, Cancelled, CancelToken
from ..platform import check_timeout
from ._scheduler import live_runtimes
from ._waker import Subscription, WaitEvent

if TYPE_CHECKING:
    from ..operations import CancelHandle, RuntimeHooks

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

    __slots__ = ("_direct", "_flag", "_next_poll", "_period", "_poll", "_where")

    def __init__(
        self, poll: Callable[[], bool], period: float, where: str, *, direct: bool = False
    ) -> None:
        self._poll = poll
        # A poll cheap enough to make on every read of ``cancelled``.
        self._direct = direct
        self._period = period
        self._where = where
        self._flag = threading.Event()
        self._next_poll = time.monotonic() + period

    @property
    def cancelled(self) -> bool:
        """True once the local operation was cancelled."""
        return self._flag.is_set() or (self._direct and self._poll())

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
        if limit is None:
            while not self._flag.wait(3600.0):
                pass
            return True
        return self._flag.wait(limit)

    def __repr__(self) -> str:
        state = "cancelled" if self._flag.is_set() else "live"
        return f"<RemoteToken of {self._where} {state}>"


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
    """Polls the tokens of the jobs running in this process; one per process."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._tokens: set[RemoteToken] = set()
        self._thread: threading.Thread | None = None

    def register(self, token: RemoteToken) -> None:
        with self._cond:
            self._tokens.add(token)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._main, name="asyncop-remote-token-watcher", daemon=True
                )
                self._thread.start()
            else:
                self._cond.notify()

    def unregister(self, token: RemoteToken) -> None:
        with self._cond:
            self._tokens.discard(token)

    def _main(self) -> None:
        while True:
            with self._cond:
                while not self._tokens:
                    self._cond.wait()
                tokens = [t for t in self._tokens if not t._flag.is_set()]
            now = time.monotonic()
            soonest = now + 0.01
            for token in tokens:
                if token._next_poll <= now:
                    token._next_poll = now + token._period
                    try:
                        hit = token._poll()
                    except Exception:  # the engine went away; the job ends anyway
                        hit = False
                    if hit:
                        token._flag.set()
                        _cancel_remote_roots(token)
                soonest = min(soonest, token._next_poll)
            time.sleep(max(0.0, soonest - time.monotonic()))


_watcher = _Watcher()


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


def run_call(token: RemoteToken, payload: bytes) -> bytes:
    """In the worker: run the pickled call under ``token``; pickle the outcome.

    Never raises: every outcome, including a result that cannot be pickled,
    is a message for the local side.
    """
    try:
        fn, args = pickle.loads(payload)
    except BaseException as exc:
        return _pack_error(exc, "unpickling the call in the worker")
    reset = _current.set(token)
    _watcher.register(token)
    try:
        value = fn(*args)
    except (Cancelled, CancellationError) as exc:
        # Cancelled escaped the job, or a runtime inside it, whose roots the
        # token cancelled, reported them as results it cannot give.
        if token._flag.is_set() or token._poll():
            return pickle.dumps(("cancelled",))
        return _pack_error(exc, traceback.format_exc())
    except BaseException as exc:
        return _pack_error(exc, traceback.format_exc())
    finally:
        _watcher.unregister(token)
        _current.reset(reset)
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


def decode_outcome(data: bytes, job: RemoteJob) -> tuple[Any, BaseException | None]:
    """Turn a worker's message into the local operation's value or error."""
    message = pickle.loads(data)
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
    """The local side of one remote job; executors subclass it."""

    def __init__(self, name: str, abandon: bool) -> None:
        self.name = name
        self.abandon = abandon
        self.state = JobState.QUEUED
        self._lock = threading.Lock()
        # The operation's wait, once its task has made its first step; the
        # outcome, once the job has ended (either may come first).
        self._sub: Subscription | None = None
        self._outcome: tuple[Any, BaseException | None] | None = None
        self._runtime: Any = None
        self._handle: CancelHandle | None = None
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
        """Send the job for ``op``, from the spawning thread.

        Sending here rather than at the task's first step saves a handoff to
        a worker thread per job. A task cancelled before its first step
        never runs, so the job learns of the cancel from the token instead.
        """
        self.op = op
        if op.done:  # born cancelled under a cancelled parent: send nothing
            return
        runtime: Any = op.runtime
        self._runtime = runtime
        with runtime._lock:
            # Autojump must not move a virtual clock while the job computes.
            runtime._outside_work += 1
        try:
            self._send()
        except BaseException as exc:
            self.finish(None, exc)
            return
        token: CancelToken = op.token
        handle: CancelHandle | None = token.on_cancel(self._on_cancel)
        with self._lock:
            if self.state is not JobState.DONE:
                self._handle = handle
                handle = None
        if handle is not None:  # the job ended already: nothing left to cancel
            handle.remove()

    def attach(self, sub: Subscription) -> None:
        """The task waits now: hand it the outcome, at once if there is one."""
        with self._lock:
            self._sub = sub
            outcome = self._outcome
        if outcome is not None:
            sub.fire(*outcome)

    def finish(self, value: Any, error: BaseException | None) -> bool:
        """End the local wait with this outcome; False if it had ended already."""
        with self._lock:
            if self.state is JobState.DONE:
                return False
            self.state = JobState.DONE
            self._outcome = (value, error)
            sub = self._sub
            handle = self._handle
            self._handle = None
        runtime = self._runtime
        with runtime._lock:
            runtime._outside_work -= 1
        if sub is not None:
            sub.fire(value, error)
        if handle is not None:
            handle.remove()
        return True

    def _mark(self, state: JobState) -> bool:
        """QUEUED/RUNNING -> ``state``; False once cancelling or done."""
        with self._lock:
            if self.state is JobState.DONE or self.state is JobState.CANCELLING:
                return False
            self.state = state
            return True

    def describe(self) -> str:
        return f"{self.name} {self.state.value} in {self.where()}"


@final
class RemoteWait(WaitEvent):
    """The local operation's one wait: for its remote job to end."""

    __slots__ = ("job",)

    # The job decides when the wait ends; a cancel reaches it through the
    # token's on_cancel callback instead (see the module docstring).
    cancellable = False

    def __init__(self, job: RemoteJob) -> None:
        self.job = job

    def _arm(self, sub: Subscription) -> None:
        self.job.attach(sub)

    def _describe(self) -> str:
        return self.job.describe()


async def _remote_main(job: RemoteJob) -> Any:
    # The whole of a remote operation's local work.
    return await RemoteWait(job)


class RemoteExecutor:
    """Base of the executors that ``spawn(..., executor=...)`` accepts."""

    _kind = "executor"

    def _pack(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> bytes:
        """Pickle the call; a TypeError names what cannot be pickled."""
        return pack_call(pickle.dumps, fn, args, self._kind)

    def _new_job(self, payload: bytes, name: str, abandon: bool) -> RemoteJob:
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
        if inspect.iscoroutinefunction(fn):
            raise TypeError(
                f"cannot run async function {label!r} on {self!r}: executors run plain "
                "functions; start an asyncop Runtime inside a plain function instead"
            )
        self._check_open(label)
        payload = self._pack(fn, args)
        job = self._new_job(payload, label, bool(abandon))
        op = runtime._new_operation(
            _remote_main, (job,), parent=parent, name=label, submit=True, supervise=supervise
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
