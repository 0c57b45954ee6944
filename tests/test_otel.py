"""``asyncop.otel.instrument``: one OpenTelemetry span per selected operation.

- spans follow the operation tree, across threads (callbacks, blocking
  calls), and a root's span nests under the span current where it was run;
- the span is current in the operation's own code, so user spans nest under
  it, across awaits, and nothing ever fails to detach;
- a failure sets ERROR with the exception; a cancel sets the state and reason;
- ``select`` picks operations, and the nearest selected ancestor is the parent;
- ``close()`` (or the ``with`` block) stops it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import asyncop
from asyncop import otel
from asyncop.testing import VirtualClock


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def finished(exporter: InMemorySpanExporter, name: str) -> None:
    """Wait until ``name``'s span has ended: its operation's end is reported after
    its last step, which may be just after a thread waiting for it was woken."""
    deadline = time.monotonic() + 5
    while name not in {span.name for span in exporter.get_finished_spans()}:
        assert time.monotonic() < deadline, f"span {name!r} never ended"
        time.sleep(0.001)


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    spans = exporter.get_finished_spans()
    named = {span.name: span for span in spans}
    assert len(named) == len(spans), [span.name for span in spans]
    return named


def parent_of(spans: dict[str, ReadableSpan], name: str) -> str | None:
    parent = spans[name].parent
    if parent is None:
        return None
    for other in spans.values():
        context = other.context
        assert context is not None
        if context.span_id == parent.span_id:
            return other.name
    return "<outside>"


@pytest.mark.timeout(20)
def test_spans_follow_the_tree_across_threads_and_user_spans_nest(
    provider: TracerProvider, exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    tracer = provider.get_tracer("test")
    threads: dict[str, str] = {}

    def blocking_work() -> None:
        threads["blocking"] = threading.current_thread().name
        with tracer.start_as_current_span("in_blocking"):
            pass

    def callback() -> None:
        threads["callback"] = threading.current_thread().name
        with tracer.start_as_current_span("in_callback"):
            pass

    async def child() -> None:
        with tracer.start_as_current_span("user_outer"):
            await asyncop.sleep(1)  # the user's span stays current across awaits
            with tracer.start_as_current_span("user_inner"):
                await asyncop.checkpoint()
            await asyncop.spawn_blocking(blocking_work)

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(child, name="child")
            s.spawn(callback, name="callback")

    with (
        caplog.at_level(logging.WARNING, logger="opentelemetry"),
        asyncop.Runtime(2, clock=VirtualClock(autojump=True)) as rt,
        otel.instrument(rt, tracer_provider=provider),
        tracer.start_as_current_span("request"),
    ):
        rt.run(main)
    spans = by_name(exporter)
    assert parent_of(spans, "request") is None
    assert parent_of(spans, "test_spans_follow_the_tree_across_threads_and_user_spans_nest"
                     ".<locals>.main") == "request"  # fmt: skip
    main_name = next(name for name in spans if name.endswith(".main"))
    assert parent_of(spans, "scope") == main_name
    assert parent_of(spans, "child") == "scope"
    assert parent_of(spans, "callback") == "scope"
    assert parent_of(spans, "user_outer") == "child"
    assert parent_of(spans, "user_inner") == "user_outer"
    assert parent_of(spans, "in_blocking") == "user_outer"
    assert parent_of(spans, "in_callback") == "callback"
    assert threads["blocking"] != threads["callback"]
    assert spans["child"].attributes is not None
    assert spans["child"].attributes["asyncop.state"] == "completed"
    # The context was never attached to a thread and detached elsewhere.
    assert not [r for r in caplog.records if "detach" in r.getMessage().lower()]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.timeout(10)
def test_a_failure_sets_error_and_stays_the_callers(
    provider: TracerProvider, exporter: InMemorySpanExporter, runtime: asyncop.Runtime
) -> None:
    async def broken() -> None:
        await asyncop.checkpoint()
        raise ValueError("bad input")

    with otel.instrument(runtime, tracer_provider=provider):
        op = runtime.spawn(broken, name="broken")
        op.wait(5)
        with pytest.raises(ValueError, match="bad input"):
            op.result()
        finished(exporter, "broken")
    span = by_name(exporter)["broken"]
    assert span.status.status_code is StatusCode.ERROR
    assert "bad input" in (span.status.description or "")
    assert [event.name for event in span.events] == ["exception"]
    assert span.attributes is not None
    assert span.attributes["asyncop.state"] == "failed"


@pytest.mark.timeout(10)
def test_a_cancel_sets_the_state_and_the_reason(
    provider: TracerProvider, exporter: InMemorySpanExporter, vruntime: asyncop.Runtime
) -> None:
    async def sleeper() -> None:
        await asyncop.sleep(100)

    async def main() -> None:
        async with asyncop.scope() as s:
            s.spawn(sleeper, name="sleeper")
            await asyncop.sleep(1)
            s.cancel("enough")

    with otel.instrument(vruntime, tracer_provider=provider):
        vruntime.run(main)
    attributes = by_name(exporter)["sleeper"].attributes
    assert attributes is not None
    assert attributes["asyncop.state"] == "cancelled"
    assert attributes["asyncop.cancel_reason"] == "enough"


@pytest.mark.timeout(10)
def test_select_skips_operations_and_parents_by_the_nearest_selected_ancestor(
    provider: TracerProvider, exporter: InMemorySpanExporter, runtime: asyncop.Runtime
) -> None:
    async def leaf() -> None:
        await asyncop.checkpoint()

    async def middle() -> None:
        async with asyncop.scope() as s:
            s.spawn(leaf, name="traced_leaf")

    async def top() -> None:
        async with asyncop.scope() as s:
            s.spawn(middle, name="middle")

    def chosen(op: asyncop.AsyncOperation[Any]) -> bool:
        return op.name.startswith("traced")

    with otel.instrument(runtime, tracer_provider=provider, select=chosen):
        runtime.spawn(top, name="traced_top").wait(5)
        finished(exporter, "traced_top")
    spans = by_name(exporter)
    assert set(spans) == {"traced_top", "traced_leaf"}
    assert parent_of(spans, "traced_leaf") == "traced_top"


@pytest.mark.timeout(10)
def test_close_stops_the_spans_and_ends_those_open(
    provider: TracerProvider, exporter: InMemorySpanExporter, runtime: asyncop.Runtime
) -> None:
    gate = threading.Event()
    instrumentation = otel.instrument(runtime, tracer_provider=provider)
    op = runtime.spawn(gate.wait, 10, name="open")
    assert not instrumentation.closed
    while op.stats.started_at is None:
        gate.wait(0.001)
    instrumentation.close()
    instrumentation.close()  # idempotent
    assert instrumentation.closed
    assert [span.name for span in exporter.get_finished_spans()] == ["open"]
    gate.set()
    op.wait(5)
    runtime.spawn(lambda: None, name="after").wait(5)
    time.sleep(0.01)  # (had it been traced, its end would be reported by now)
    assert [span.name for span in exporter.get_finished_spans()] == ["open"]


@pytest.mark.timeout(10)
def test_close_after_a_raising_select_removed_the_instrumentation(
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    runtime: asyncop.Runtime,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def select(op: asyncop.AsyncOperation[Any]) -> bool:
        raise ValueError("select bug")

    with (
        caplog.at_level(logging.ERROR, logger="asyncop"),
        otel.instrument(runtime, tracer_provider=provider, select=select) as instrumentation,
    ):
        assert runtime.run(lambda: 5) == 5
    assert instrumentation.closed
    records = [r for r in caplog.records if "select bug" in str(r.exc_info)]
    assert len(records) == 1 and "was removed" in records[0].getMessage()
    assert exporter.get_finished_spans() == ()


@pytest.mark.timeout(10)
def test_instrument_refuses_what_is_not_a_runtime_or_a_selector(runtime: asyncop.Runtime) -> None:
    with pytest.raises(TypeError, match="needs an asyncop Runtime, got str"):
        otel.instrument("runtime")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"select=\.\.\.\) needs a callable"):
        otel.instrument(runtime, select="all")  # type: ignore[arg-type]
