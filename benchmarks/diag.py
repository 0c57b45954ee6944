"""What watching a runtime costs: instruments and OpenTelemetry.

``op.stats`` is always on, so plain ``asyncop`` already pays for it, and no
system here can run without it: its cost (at most 5 % of ``spawn_join``) is
measured by running ``python -m benchmarks --only spawn_join,pingpong
--systems asyncop`` on this version and on one without it (the figures are
in the how-to "Statistics and tracing"). These systems add the rest to
``spawn_join`` and ``pingpong``, each beside plain ``asyncop``:

- ``asyncop_instrumented``: one instrument installed whose seven hooks do
  nothing, so every event calls it. Target: at most 1.15 x.
- ``asyncop_otel``: ``asyncop.otel.instrument`` with the OpenTelemetry SDK
  (a tracer provider with no exporter) and ``select`` picking one
  operation in ten. Target: at most 1.30 x.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import asyncop

from ._registry import Metrics, Ratio
from .coro import SPAWN_JOIN, spawn_join_main
from .io import PINGPONG, pingpong_main

__all__ = ["NullInstrument"]

SPAWN_JOIN.checks += [
    Ratio("asyncop_instrumented", "asyncop", limit=1.15),
    Ratio("asyncop_otel", "asyncop", limit=1.30),
]
PINGPONG.checks += [
    Ratio("asyncop_instrumented", "asyncop", limit=1.15),
    Ratio("asyncop_otel", "asyncop", limit=1.30),
]


class NullInstrument:
    """An instrument with every hook, each doing nothing: what the calls themselves cost."""

    def spawned(self, op: Any) -> None:
        pass

    def step_started(self, op: Any) -> None:
        pass

    def step_ended(self, op: Any) -> None:
        pass

    def parked(self, op: Any, reason: object) -> None:
        pass

    def woken(self, op: Any) -> None:
        pass

    def cancelled(self, op: Any, reason: object) -> None:
        pass

    def ended(self, op: Any) -> None:
        pass


Setup = Callable[[asyncop.Runtime], Any]


@contextmanager
def _runtime(setup: Setup) -> Iterator[asyncop.Runtime]:
    with asyncop.Runtime() as runtime:
        handle = setup(runtime)
        try:
            yield runtime
        finally:
            close = getattr(handle, "close", None)
            if close is not None:
                close()


def _instrumented(runtime: asyncop.Runtime) -> None:
    runtime.add_instrument(NullInstrument())


def _otel(runtime: asyncop.Runtime) -> Any:
    from opentelemetry.sdk.trace import TracerProvider

    from asyncop import otel

    seen = itertools.count()
    return otel.instrument(
        runtime, tracer_provider=TracerProvider(), select=lambda op: next(seen) % 10 == 0
    )


# -- spawn_join ------------------------------------------------------------------


def _spawn_join_system(n: int, setup: Setup) -> Metrics:
    with _runtime(setup) as runtime:
        result: Metrics = runtime.run(spawn_join_main, n)
    return result


SPAWN_JOIN.system("asyncop_instrumented")(lambda n: _spawn_join_system(n, _instrumented))
SPAWN_JOIN.system("asyncop_otel", requires=("opentelemetry.sdk",))(
    lambda n: _spawn_join_system(n, _otel)
)


# -- pingpong --------------------------------------------------------------------


def _pingpong_system(n: int, setup: Setup) -> Metrics:
    with _runtime(setup) as runtime:
        seconds: float = runtime.run(pingpong_main, n)
    return {"seconds": seconds}


PINGPONG.system("asyncop_instrumented")(lambda n: _pingpong_system(n, _instrumented))
PINGPONG.system("asyncop_otel", requires=("opentelemetry.sdk",))(
    lambda n: _pingpong_system(n, _otel)
)
