"""The call's trip to a worker and back: pickling it, running it there under a token.

Crossing the wire
-----------------
The call is pickled in the spawning thread, so that an unpicklable
function or argument is a ``TypeError`` from ``spawn()`` itself, naming it
(:func:`pack_call`), before anything is sent. The worker sends back the
outcome as a message (:func:`run_call`): a value, an exception with its
formatted traceback, or a note that the job was cancelled or dropped.

Every message is a tuple of strings, bytes and None, which always
unpickles; the user's value or exception inside it is pickled on its own,
next to a description of it::

    ("pickled", type_name, pickle.dumps(value))
    ("error", repr(exc), pickle.dumps(exc) or None, traceback_text, why_not)
    ("bad-call", ...)        # as "error": the worker could not rebuild the call
    ("unpicklable", type_name, why_not)
    ("cancelled",)  ("dropped",)

So whatever fails on either side (a result or an exception that does not
pickle in the worker, one whose class the client cannot import or whose
``__init__`` or ``__setstate__`` refuses what pickle hands it, a call the
worker cannot rebuild) fails the operation with an error that says what
could not cross and why (:func:`decode_outcome`). It never escapes into
the engine's callback, where it would be logged and leave the operation
running for ever.

Remote side
-----------
Inside the job, ``remote_token()`` returns the job's :class:`RemoteToken`.
One watcher thread per worker process polls the tokens of the jobs running
there (each kind says how to poll and how often); an engine may also push
a cancel to the worker, which sets the token's flag at once
(:func:`cancel_remote`). For a cancelled token, the watcher then cancels
the roots of every asyncop ``Runtime`` in that process that the job
started: a root whose context carries the job's token. Such a root
is cancelled as a child is by its parent, from outside (not when it is
shielded), so the remote subtree unwinds by the local rules: a sync
``with rt.scope()`` of the job raises ``Cancelled`` at its exit, as it does
inside a cancelled operation, and the job ends CANCELLED.
"""

from __future__ import annotations

import contextvars
import os
import pickle
import threading
import time
import traceback
from collections.abc import Callable
from types import FunctionType
from typing import TYPE_CHECKING, Any, Literal, final, overload

from ...operations import CancellationError, Cancelled, run_after
from ...platform import check_timeout
from .._kinds import describe_fn
from .._scheduler import live_runtimes
from ._remote import RemoteTraceback

if TYPE_CHECKING:
    from ...operations import After
    from ._remote import RemoteJob

__all__ = [
    "PICKLED_FUNCTIONS_MAX",
    "RemoteToken",
    "cancel_remote",
    "decode_outcome",
    "describe_error",
    "describe_exception",
    "pack_call",
    "remote_token",
    "run_call",
    "type_name",
]

# How often the watcher wakes to poll (no token is polled more often than
# its period), and how long it keeps polling after the last token is gone
# before it parks.
TICK = 0.01
LINGER = 1.0
# How many pickled plain functions each side keeps (see ProcessExecutor._new_job).
PICKLED_FUNCTIONS_MAX = 1024

_current: contextvars.ContextVar[RemoteToken | None] = contextvars.ContextVar(
    "asyncop_remote_token", default=None
)


@final
class RemoteToken:
    """Inside remote work: follows the cancel of the local operation.

    Get it with ``asyncop.remote_token()``. ``cancelled`` turns true within
    a few ms of the local cancel for a ``ProcessExecutor`` job; for a
    ``DaskExecutor`` job the cancel is pushed to the worker, typically
    within 3 to 40 ms (see ``asyncop.dask`` for what it depends on).
    """

    __slots__ = (
        "_cancelled",
        "_direct",
        "_event",
        "_next_poll",
        "_period",
        "_poll",
        "_swept",
        "_where",
    )

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
        # Whether the watcher has cancelled the roots the job started (its
        # thread alone writes it).
        self._swept = False

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
        """Mark the token cancelled and wake its waiters."""
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

    Also cancels the roots the jobs started, once their tokens are
    cancelled (by its poll or by a push, see :func:`cancel_remote`).
    Registering a token wakes nobody while the thread is polling: it finds
    the token at its next tick, at most ``TICK`` away (a token's first poll
    is due one period after it is made anyway). Only after
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
                if not token._cancelled:
                    if token._next_poll > now:
                        continue
                    token._next_poll = now + token._period
                    try:
                        hit = token._poll()
                    except Exception:  # the engine went away; the job ends anyway
                        hit = False
                    if not hit:
                        continue
                    token._set()
                if not token._swept:
                    # Here, for a token the engine set too (cancel_remote):
                    # the cancel runs the on_cancel callbacks of the job's
                    # operations, which must not hold up the engine's thread.
                    token._swept = True
                    _cancel_remote_roots(token)


_watcher = _Watcher()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_watcher._after_fork)


def _carries(ctx: contextvars.Context | None, token: RemoteToken) -> bool:
    return ctx is not None and ctx.get(_current) is token


def cancel_remote(token: RemoteToken) -> None:
    """The local operation was cancelled: set ``token`` now; the watcher does the rest.

    For an engine that pushes the cancel to the worker, from any thread: it
    only sets the flag and wakes the token's waiters. The watcher cancels
    the roots the job started here at its next tick (``TICK``), as it does
    for a token it found by polling. A second call does nothing.
    """
    token._set()


def _cancel_remote_roots(token: RemoteToken) -> None:
    """Cancel the roots of this process's runtimes that the job started.

    From outside, as the cancel walk enters a child from its parent: the
    job's local operation stands above these roots. A shielded root is
    left alone, as a shielded child is.
    """
    reason = f"{token._where} was cancelled by its local operation"
    for runtime in live_runtimes():
        with runtime._lock:
            roots = list(runtime._roots)
        for root in roots:
            mine = _carries(root._ctx, token)
            if not mine and root._ctx is None:
                # A scope's block has no context of its own: it is the job's
                # if the children it spawned carry the job's.
                mine = any(_carries(child._ctx, token) for child in root.children())
            if not mine:
                continue
            after: After = []
            with runtime._lock:
                if not root._shield:
                    # Read by a sync scope's exit: raise Cancelled, as a
                    # scope inside a cancelled operation does (_scope.py).
                    root._outside_cancel = True
                    root._cancel_locked(reason, after)
            run_after(after)


# In the worker: the plain functions unpickled from ProcessExecutor._new_job's bytes,
# looked up once per process rather than imported again for every job.
_functions: dict[bytes, Callable[..., Any]] = {}


# The exact types of the results that always pickle and come back as
# themselves (see run_call's plain); bytes, which the messages are, come
# back in a ("value", ...) tuple.
_BARE = frozenset({type(None), bool, int, float, complex, str})


@overload
def run_call(
    token: RemoteToken,
    payload: bytes,
    args_payload: bytes | tuple[Any, ...] | None = None,
    *,
    plain: Literal[False] = False,
) -> bytes: ...


@overload
def run_call(
    token: RemoteToken,
    payload: bytes,
    args_payload: bytes | tuple[Any, ...] | None = None,
    *,
    plain: bool,
) -> Any: ...


def run_call(
    token: RemoteToken,
    payload: bytes,
    args_payload: bytes | tuple[Any, ...] | None = None,
    *,
    plain: bool = False,
) -> Any:
    """In the worker: run the pickled call under ``token``; return the outcome's message.

    ``payload`` is the pickled ``(fn, args)``; or, with ``args_payload``
    (the pickled args, or the args themselves), the pickled ``fn`` alone
    (see ``ProcessExecutor._new_job``). The message is pickled bytes (see
    the module docstring). With ``plain`` (for an engine that pickles what
    the job returns), a value of a type that always pickles is not pickled
    here: the engine's pickling carries it. It comes back as itself (None,
    a bool, a number or a str), or as the message ``("value", value)`` for
    bytes, which the pickled messages are; a pickled value comes back as
    its message tuple, not pickled again. The local side takes those
    without unpickling a message. Never raises: every outcome, including a
    result that cannot be pickled, is a message for the local side.
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
            args = pickle.loads(args_payload) if type(args_payload) is bytes else args_payload
    except BaseException as exc:
        return _pack_error(exc, _traceback_text(), "bad-call")
    reset = _current.set(token)
    # _watcher.register(token), its common case written out (two calls less
    # per job): the insertion, then the look at the thread that register()
    # makes after it.
    watcher = _watcher
    tokens = watcher._tokens
    tokens[token] = None
    if watcher._parked or watcher._thread is None:
        watcher.register(token)
    try:
        value = fn(*args)
    except (Cancelled, CancellationError) as exc:
        # Cancelled escaped the job, or a runtime inside it, whose roots the
        # token cancelled, reported them as results it cannot give.
        if _cancel_seen(token):
            return _CANCELLED_MESSAGE
        return _pack_error(exc, _traceback_text())
    except BaseException as exc:
        return _pack_error(exc, _traceback_text())
    finally:
        tokens.pop(token, None)  # (_watcher.unregister(token))
        _current.reset(reset)
    if plain:
        kind = type(value)
        if kind in _BARE:
            return value
        if kind is bytes:
            return ("value", value)
    return _pack_value(value, plain)


_CANCELLED_MESSAGE = pickle.dumps(("cancelled",))


def _cancel_seen(token: RemoteToken) -> bool:
    """Whether the job's local operation was cancelled, as far as the worker can tell."""
    if token._cancelled:
        return True
    try:
        return bool(token._poll())
    except Exception:  # the engine went away: go by what the token saw
        return False


def _pack_value(value: Any, plain: bool) -> Any:
    """The message for a value: pickled on its own, its type's name beside it."""
    try:
        data = pickle.dumps(value)
    except Exception as exc:
        return pickle.dumps(("unpicklable", type_name(value), describe_error(exc)))
    message = ("pickled", type_name(value), data)
    return message if plain else pickle.dumps(message)


def _pack_error(exc: BaseException, text: str, kind: str = "error") -> bytes:
    """The message for an exception: pickled on its own, its repr beside it.

    ``kind`` is ``"bad-call"`` when the worker could not rebuild the call.
    """
    label = describe_exception(exc)
    try:
        return pickle.dumps((kind, label, pickle.dumps(exc), text, None))
    except Exception as failure:
        return pickle.dumps((kind, label, None, text, describe_error(failure)))


def _traceback_text() -> str:
    """The traceback of the exception being handled, as text; never raises."""
    try:
        return traceback.format_exc()
    except Exception as exc:  # a broken __str__ or __repr__ somewhere in the chain
        return f"(the traceback could not be formatted: {describe_error(exc)})"


def type_name(value: object) -> str:
    """``module.QualName`` of the value's type; a builtin's name alone."""
    cls = type(value)
    module = getattr(cls, "__module__", None)
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module in (None, "builtins") else f"{module}.{name}"


# How much of a repr() a message quotes.
_REPR_MAX = 200


def describe_exception(exc: BaseException) -> str:
    """``repr(exc)``, shortened; never raises, whatever the exception's ``__repr__`` does."""
    try:
        text = repr(exc)
    except Exception:
        text = f"{type_name(exc)} (whose repr() failed)"
    if len(text) > _REPR_MAX:
        text = text[: _REPR_MAX - 3] + "..."
    return text


def describe_error(exc: BaseException) -> str:
    """``"Type: message"`` for an error met on the way; never raises."""
    try:
        message = str(exc)
    except Exception:
        message = "(its str() failed)"
    if len(message) > _REPR_MAX:
        message = message[: _REPR_MAX - 3] + "..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


# -- back in the client ---------------------------------------------------------------


def decode_outcome(
    data: bytes | tuple[Any, ...], job: RemoteJob
) -> tuple[Any, BaseException | None]:
    """Turn a worker's message (see ``run_call``) into the local operation's value or error.

    Never raises: it runs in the engine's callback, where an exception
    would be logged and lost, and the operation left running. A value or
    an exception that cannot be rebuilt here (its class cannot be
    imported, its ``__init__`` or ``__setstate__`` refuses what pickle
    hands it) becomes an error that says what could not and why, with the
    unpickling error as its ``__cause__``.
    """
    message: tuple[Any, ...]
    try:
        message = pickle.loads(data) if isinstance(data, bytes) else data
        kind = message[0]
    except BaseException as exc:
        return None, _not_rebuilt(job, f"the outcome of {job.name!r}", exc)
    if kind == "value":
        return message[1], None
    if kind == "pickled":
        try:
            return pickle.loads(message[2]), None
        except BaseException as exc:
            return None, _not_rebuilt(job, f"the result of {job.name!r} (a {message[1]})", exc)
    if kind in ("cancelled", "dropped"):
        return None, Cancelled(f"{job.where()} was cancelled")
    if kind == "unpicklable":
        return None, TypeError(
            f"the result of {job.name!r} (a {message[1]}) cannot be pickled to come back "
            f"from {job.where()} ({message[2]}); return plain data (numbers, strings, "
            "lists, dicts, dataclasses)"
        )
    try:
        return None, _remote_error(job, *message)
    except BaseException as exc:  # (an "exception" that unpickles as something else)
        return None, _not_rebuilt(job, f"the error of {job.name!r}", exc)


def _not_rebuilt(job: RemoteJob, what: str, exc: BaseException) -> TypeError:
    """The failure of an outcome that came back but cannot be unpickled here."""
    error = TypeError(
        f"{what} came back from {job.where()} but cannot be rebuilt here "
        f"({describe_error(exc)}); return plain data, or objects whose classes "
        "this process imports"
    )
    error.__cause__ = exc
    return error


def _remote_error(
    job: RemoteJob, kind: str, label: str, data: bytes | None, text: str, why: str | None
) -> BaseException:
    """The error of a job that raised ``label`` (or whose call the worker could not rebuild)."""
    where = job.where()
    error: BaseException | None = None
    failure: BaseException | None = None
    if data is not None:
        try:
            error = pickle.loads(data)
        except BaseException as exc:
            failure = exc
            why = describe_error(exc)
    if error is not None:
        error.__cause__ = RemoteTraceback(text)
        error.add_note(f"raised in {where}")
        if kind != "bad-call":
            return error
    if kind == "bad-call":
        wrapped: BaseException = TypeError(
            f"the call {job.name}(...) cannot be rebuilt in {where} ({label}); define its "
            "function and the classes of its arguments in modules the workers import"
        )
    elif failure is None:
        wrapped = RuntimeError(
            f"{job.name!r} raised {label} in {where}, which cannot be pickled to come "
            f"back ({why}); raise exceptions that pickle"
        )
    else:
        wrapped = RuntimeError(
            f"{job.name!r} raised {label} in {where}, which cannot be rebuilt here "
            f"({why}); raise exceptions whose class this process imports and whose "
            "__init__ takes the args it passes to Exception.__init__"
        )
    if error is not None:
        wrapped.__cause__ = error
    elif failure is not None:
        wrapped.__cause__ = failure
        wrapped.add_note(f"raised in {where}, with this traceback there:\n{text.rstrip()}")
    else:
        wrapped.__cause__ = RemoteTraceback(text)
        wrapped.add_note(f"raised in {where}")
    return wrapped


# -- pickling the call, in the spawning thread ---------------------------------------


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
