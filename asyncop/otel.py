"""OpenTelemetry spans for operations: ``asyncop.otel.instrument(runtime)``.

Needs the extra: ``pip install 'asyncop[otel]'`` (``opentelemetry-api``;
an SDK, or another implementation of the API, decides where spans go).

::

    from asyncop import otel

    with otel.instrument(runtime, select=lambda op: op.name.startswith("fetch")):
        runtime.run(main)

Each selected operation gets one span, named after it, from the moment it
is made (spawned, created, a scope entered) to its end, so the span
includes the time it waited for a worker:

- **Parent**: the span of its nearest selected ancestor in the operation
  tree, whatever thread that one runs on; the tree's links decide, not the
  context variables of the thread that spawned it. An operation with no
  selected ancestor takes the span current where it was made (a ``with
  tracer.start_as_current_span("request"): runtime.run(main)`` around it).
- **Current inside the operation's own code**: the span is set in the
  operation's own context (the copy of the context variables every task
  and callback runs in) before its code first runs, so a span the code
  starts (``tracer.start_as_current_span(...)``) nests under it, across
  awaits, and so does the code of its ``spawn_blocking`` calls, which run
  with a copy of the task's context. Nothing is attached to a worker
  thread's own context, nor detached from it: no "Failed to detach
  context" however the task moves between threads. A scope's block runs in
  the context of the task that opened it: its span is the parent of the
  scope's children, not the current span in the block.
- **End**: a failure sets the status to ERROR with the exception recorded;
  a cancel sets the attribute ``asyncop.cancel_reason``; every span gets
  ``asyncop.state`` (``completed``, ``failed`` or ``cancelled``). Nothing
  more: each attribute costs the SDK microseconds.

``instrument`` returns an :class:`Instrumentation`: ``close()`` (or leaving
its ``with`` block) stops making spans, and ends the spans still open. It is
built on the runtime's instruments (``Runtime.add_instrument``): while it is
installed, every step costs a few calls more, and a selected operation a
span.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, final

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Span, Status, StatusCode, TracerProvider
except ImportError:  # pragma: no cover - depends on the installation
    raise ImportError(
        "asyncop.otel needs the OpenTelemetry API, which is not installed; "
        "run pip install 'asyncop[otel]'"
    ) from None

from ._exports import publish as _publish
from ._version import __version__
from .operations import AsyncOperation, OperationState
from .runtime import Runtime

__all__ = ["Instrumentation", "instrument"]

Op = AsyncOperation[Any]

_STATE_NAMES = {
    OperationState.COMPLETED: "completed",
    OperationState.FAILED: "failed",
    OperationState.CANCELLED: "cancelled",
}


def instrument(
    runtime: Runtime,
    *,
    tracer_provider: TracerProvider | None = None,
    select: Callable[[Op], bool] | None = None,
) -> Instrumentation:
    """Make an OpenTelemetry span for each operation of ``runtime`` made from now on.

    Args:
        runtime: the runtime whose operations to trace.
        tracer_provider: where the tracer comes from; None for the global one.
        select: which operations get a span, asked once per operation as it
            is made (on that thread, so keep it quick); None for all.

    Returns:
        The installed instrumentation: ``close()`` it (or use it as a
        context manager) to stop.

    Raises:
        TypeError: ``runtime`` is not a Runtime, ``tracer_provider`` is not a
            TracerProvider, or ``select`` is not callable.
        RuntimeError: ``runtime`` is shut down.
    """
    if not isinstance(runtime, Runtime):
        raise TypeError(
            f"asyncop.otel.instrument() needs an asyncop Runtime, got {type(runtime).__name__}; "
            "pass the runtime whose operations to trace"
        )
    if select is not None and not callable(select):
        raise TypeError(
            f"asyncop.otel.instrument(select=...) needs a callable taking an operation, got "
            f"{type(select).__name__}; pass a function that returns True for the operations "
            "to trace, or None for all"
        )
    if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
        raise TypeError(
            f"asyncop.otel.instrument(tracer_provider=...) needs an OpenTelemetry "
            f"TracerProvider, got {type(tracer_provider).__name__}; pass one (such as "
            "opentelemetry.sdk.trace.TracerProvider()), or None for the global one"
        )
    tracer = trace.get_tracer("asyncop", __version__, tracer_provider=tracer_provider)
    instrumentation = Instrumentation(runtime, tracer, select)
    runtime.add_instrument(instrumentation._hooks)
    return instrumentation


@final
class Instrumentation:
    """What ``instrument()`` installed: ``close()`` stops it; also a context manager."""

    def __init__(self, runtime: Runtime, tracer: trace.Tracer, select: Callable[[Op], bool] | None):
        self.runtime = runtime
        self._hooks = _Hooks(tracer, select)
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    def close(self) -> None:
        """Stop making spans; end those still open. Idempotent.

        Also after the runtime removed the instrumentation because one of
        its calls raised (a ``select`` that raises, say: logged then).

        A span whose operation has ended is ended with its outcome (status,
        state, cancel reason), even when the worker that reports the end
        has not come to it yet; one a worker is ending at that moment is
        waited for. So once ``close()`` returns, every span of an operation
        that ``run()`` or ``wait()`` saw end is exported, complete.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self.runtime.remove_instrument(self._hooks)
        except ValueError:
            pass  # removed already, when one of its calls raised (``select``'s), and logged
        self._hooks.end_all()

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<asyncop.otel.Instrumentation of runtime {self.runtime.name!r}, {state}>"


@final
class _Hooks:
    """The instrument itself: the runtime calls these on its threads."""

    def __init__(self, tracer: trace.Tracer, select: Callable[[Op], bool] | None) -> None:
        self._tracer = tracer
        self._select = select
        # The open span of each selected operation, with the context that
        # holds it: its own code runs in that context, and its children's
        # spans start in it.
        self._spans: dict[Op, tuple[Span, otel_context.Context]] = {}
        # Held while a span is taken out of ``_spans`` and ended, so that
        # ``end_all()`` never returns while a worker is still ending one
        # (re-entrant: a span processor may end an operation of its own).
        self._ending = threading.RLock()

    def spawned(self, op: Op) -> None:
        select = self._select
        if select is not None and not select(op):
            return
        span = self._tracer.start_span(op.name, context=self._parent_context(op))
        ctx = op._ctx
        if ctx is not None:
            # Current in the operation's own context, where its code will run
            # (none of it has yet): never detached, it goes with the context
            # when the operation ends.
            self._spans[op] = (span, ctx.run(_make_current, span))
        else:
            self._spans[op] = (span, trace.set_span_in_context(span))
        # The span ends with the operation, called as its waiters are (no
        # ``ended`` hook: the operations not selected then cost no call).
        end = functools.partial(self._end, op)
        with op.runtime._lock:
            final = op._state.final  # (a cancel may already have ended it)
            if not final:
                op._add_waiter_locked(end)
        if final:
            end()

    def cancelled(self, op: Op, reason: object) -> None:
        entry = self._spans.get(op)
        if entry is not None:
            entry[0].set_attribute("asyncop.cancel_reason", str(reason))

    def _end(self, op: Op) -> None:
        with self._ending:
            entry = self._spans.pop(op, None)
            if entry is not None:  # (else close() has ended it)
                _finish(entry[0], op)

    def _parent_context(self, op: Op) -> otel_context.Context:
        """The nearest selected ancestor's span, else the context the operation was made in."""
        node = op.parent
        spans = self._spans
        while node is not None:
            entry = spans.get(node)
            if entry is not None:
                return entry[1]
            node = node.parent
        ctx = op._ctx
        if ctx is not None:
            return ctx.run(otel_context.get_current)
        return otel_context.get_current()

    def end_all(self) -> None:
        with self._ending:
            while self._spans:
                op, (span, _) = self._spans.popitem()
                if op.done:
                    # Ended, but the worker that reports it has not come to
                    # its span yet (a thread in run() is woken first).
                    _finish(span, op)
                else:
                    span.set_attribute("asyncop.state", op.state.name.lower())
                    span.end()


def _make_current(span: Span) -> otel_context.Context:
    """Make ``span`` current in the context this runs in; return the context that holds it."""
    in_span = trace.set_span_in_context(span)
    otel_context.attach(in_span)
    return in_span


def _finish(span: Span, op: Op) -> None:
    """End ``op``'s span with how the operation ended and what it cost."""
    state = op.state
    attributes: dict[str, str] = {"asyncop.state": _STATE_NAMES.get(state, state.name.lower())}
    if state is OperationState.FAILED:
        # Read without observing it: whoever waits for the operation still
        # gets the failure, and it is still reported if nobody does.
        error = op._error
        if error is not None:
            span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    elif state is OperationState.CANCELLED and op.cancel_reason is not None:
        attributes["asyncop.cancel_reason"] = str(op.cancel_reason)
    span.set_attributes(attributes)
    span.end()


_publish(__name__, globals(), __all__)
