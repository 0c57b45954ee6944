"""OpenTelemetry spans as a tracing user reads them with the SDK's in-memory
exporter: what the spans say once the instrumentation is closed, right after
``run()`` has returned or raised, with no waiting in between.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import asyncop
from asyncop import otel
from asyncop.testing import VirtualClock, wait_all_blocked

pytestmark = pytest.mark.timeout(60)

# Each round races the end of the root's span against close(): enough
# rounds that a close which lets the span end half-reported is caught.
ROUNDS = 30


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


async def serve() -> None:
    await asyncop.sleep_forever()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


async def fails() -> None:
    await asyncop.checkpoint()
    raise ValueError("bad input")


async def main() -> None:
    async with asyncop.scope() as s:
        s.spawn(fails)


async def returns_seven() -> int:
    await asyncop.checkpoint()
    return 7


async def cancels_itself() -> None:
    asyncop.current_operation(require=True).cancel("no longer needed")
    await asyncop.checkpoint()


def test_a_failed_root_span_is_error_once_close_returns(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The usual shape: instrument around run(), read the exporter after.
    with asyncop.Runtime(2) as runtime:
        for _ in range(ROUNDS):
            exporter.clear()
            with otel.instrument(runtime, tracer_provider=provider), pytest.raises(ExceptionGroup):
                runtime.run(main)
            (span,) = named(exporter, "main")
            assert span.status.status_code is StatusCode.ERROR
            assert span.attributes is not None
            assert span.attributes["asyncop.state"] == "failed"
            assert [event.name for event in span.events] == ["exception"]


def test_a_completed_root_span_is_exported_once_close_returns(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with asyncop.Runtime(2) as runtime:
        for _ in range(ROUNDS):
            exporter.clear()
            with otel.instrument(runtime, tracer_provider=provider):
                assert runtime.run(returns_seven) == 7
            (span,) = named(exporter, "returns_seven")
            assert span.status.status_code is StatusCode.UNSET
            assert span.attributes is not None
            assert span.attributes["asyncop.state"] == "completed"


def test_a_cancelled_root_keeps_its_reason_when_closed_at_once(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with asyncop.Runtime(2) as runtime:
        for _ in range(ROUNDS):
            exporter.clear()
            with (
                otel.instrument(runtime, tracer_provider=provider),
                pytest.raises(asyncop.CancellationError),
            ):
                runtime.run(cancels_itself)
            (span,) = named(exporter, "cancels_itself")
            assert span.attributes is not None
            assert span.attributes["asyncop.state"] == "cancelled"
            assert span.attributes["asyncop.cancel_reason"] == "no longer needed"


def test_close_ends_live_spans_with_their_state_and_later_ends_add_nothing(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # Like trio's instruments removed mid-run: nothing more comes after close.
    async def service() -> None:
        instrumentation = otel.instrument(asyncop.current_runtime(), tracer_provider=provider)
        async with asyncop.scope(name="service") as s:
            s.spawn(serve, name="server")
            await wait_all_blocked()
            instrumentation.close()
            assert instrumentation.closed
            spans = {span.name: span for span in exporter.get_finished_spans()}
            assert set(spans) == {"service", "server"}
            for span in spans.values():
                assert span.attributes is not None
                assert span.attributes["asyncop.state"] == "running"
            s.cancel()
            s.spawn(returns_seven, name="after")

    with asyncop.Runtime(2, clock=VirtualClock(autojump=True)) as runtime:
        runtime.run(service)
    assert sorted(span.name for span in exporter.get_finished_spans()) == ["server", "service"]


def test_spans_of_a_nested_failure_nest_and_each_says_how_it_ended(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async def missing() -> None:
        await asyncop.checkpoint()
        raise KeyError("missing")

    async def root() -> None:
        try:
            async with asyncop.scope(name="outer") as s:
                s.spawn(missing, name="fails")
                s.spawn(serve, name="sibling")
        except* KeyError:
            pass

    with (
        asyncop.Runtime(2, clock=VirtualClock(autojump=True)) as runtime,
        otel.instrument(runtime, tracer_provider=provider),
    ):
        runtime.run(root)
    # a task is named after its function's qualified name
    spans = {span.name.rsplit(".", 1)[-1]: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"root", "outer", "fails", "sibling"}
    ids = {name: span.context.span_id for name, span in spans.items() if span.context}
    parents = {name: span.parent.span_id if span.parent else None for name, span in spans.items()}
    assert parents == {
        "root": None,
        "outer": ids["root"],
        "fails": ids["outer"],
        "sibling": ids["outer"],
    }
    states = {name: (span.attributes or {})["asyncop.state"] for name, span in spans.items()}
    assert states == {
        "root": "completed",
        "outer": "failed",
        "fails": "failed",
        "sibling": "cancelled",
    }
    assert spans["fails"].status.status_code is StatusCode.ERROR
    assert spans["sibling"].status.status_code is StatusCode.UNSET
    assert (spans["sibling"].attributes or {})["asyncop.cancel_reason"] == "child 'fails' failed"
