"""Calling and describing user objects without letting them break asyncop.

asyncop runs user code in places where a failure must stay local: an
``on_cancel`` callback runs in the middle of a cancel walk's follow-up work,
a custom event's ``_disarm`` runs while a worker resumes its task, and the
text of ``dump()`` or of an error message includes user objects (a cancel
reason, a yielded value). Each of those places goes through this module:

- :func:`safe_repr` and :func:`safe_str` describe any object, even one whose
  ``__repr__``, ``__str__`` or ``__getattr__`` raises; :func:`describe_fn`
  names the function an operation runs, as ``dump()`` shows it.
- :func:`run_isolated` runs a list of actions so that one that raises (even
  ``SystemExit`` or ``KeyboardInterrupt``) cannot stop the ones behind it:
  the wakeups they carry must all be delivered. Failures are logged on the
  ``asyncop`` logger; only a ``KeyboardInterrupt`` on the main thread is
  raised again, once every action has run, so a Ctrl-C still stops the
  program. A worker thread therefore never dies from user code.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable

__all__ = ["describe_fn", "log_user_failure", "run_isolated", "safe_repr", "safe_str"]

logger = logging.getLogger("asyncop")

_main_thread = threading.main_thread()


def _placeholder(obj: object, what: str) -> str:
    try:
        name = type(obj).__qualname__
    except BaseException:  # a metaclass can break even this
        name = "object"
    return f"<{name} object ({what} failed)>"


def safe_repr(obj: object, limit: int = 200) -> str:
    """``repr(obj)``, shortened to ``limit`` characters; never raises."""
    try:
        text = repr(obj)  # (raises TypeError itself if __repr__ returns a non-string)
    except BaseException:
        return _placeholder(obj, "repr")
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def safe_str(obj: object, limit: int = 200) -> str:
    """``str(obj)``, shortened to ``limit`` characters; never raises."""
    try:
        text = str(obj)
    except BaseException:
        return _placeholder(obj, "str")
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def describe_fn(fn: object) -> str:
    """A function's name for ``dump()`` and messages, as trio names a task; never raises.

    Its qualified name (``fetch``, ``Client.get``, ``main.<locals>.<lambda>``);
    for a ``functools.partial``, the name of the function it wraps; for an
    object with ``__call__``, its class's. Never a repr with an address.
    """
    try:
        while isinstance(fn, functools.partial):  # (a partial's func exists before it)
            fn = fn.func
        for attribute in ("__qualname__", "__name__"):
            name = getattr(fn, attribute, None)
            if isinstance(name, str) and name:
                return name
        if callable(fn):
            return type(fn).__qualname__
    except Exception:  # a __getattr__ that raises
        pass
    return safe_repr(fn)


def log_user_failure(what: str, exc: BaseException) -> None:
    """Log ``exc``, raised by user code while asyncop ran ``what``; never raises."""
    try:
        logger.error("asyncop: %s raised %s", what, safe_repr(exc), exc_info=exc)
    except BaseException:  # pragma: no cover - logging itself failed: nothing left to do
        pass


def run_isolated(actions: Iterable[Callable[[], object]], what: str) -> None:
    """Run every action, whatever the others raise; log each failure.

    Args:
        actions: the calls to make, in order.
        what: what they are, for the log line, e.g. ``"an on_cancel callback"``.

    Raises:
        KeyboardInterrupt: one of the actions raised it (or a Ctrl-C landed)
            on the main thread; raised after every action has run.
    """
    interrupt: KeyboardInterrupt | None = None
    for action in actions:
        try:
            action()
        except KeyboardInterrupt as exc:
            if threading.current_thread() is _main_thread:
                if interrupt is None:
                    interrupt = exc
            else:
                log_user_failure(what, exc)
        except BaseException as exc:
            log_user_failure(what, exc)
    if interrupt is not None:
        raise interrupt
