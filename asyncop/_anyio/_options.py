"""What ``backend_options`` of the ``"asyncop"`` anyio backend may hold."""

from __future__ import annotations

from typing import Any

from ..runtime import Runtime

__all__ = ["RUNTIME_OPTIONS", "runtime_for"]


#: What ``backend_options`` may hold: ``Runtime``'s arguments, or a runtime.
RUNTIME_OPTIONS = (
    "workers",
    "parallel",
    "max_threads",
    "clock",
    "name",
    "asyncio_loop_factory",
    "console",
    "deadlock",
    "deadlock_after",
)


def runtime_for(options: dict[str, Any]) -> tuple[Runtime, bool]:
    """The runtime ``options`` ask for, and whether it was made here (to shut down)."""
    unknown = set(options) - {*RUNTIME_OPTIONS, "runtime"}
    if unknown:
        raise TypeError(
            f"backend_options for 'asyncop' got {sorted(unknown)}; pass "
            f"{', '.join(RUNTIME_OPTIONS)} (Runtime's arguments), or runtime=an existing Runtime"
        )
    runtime = options.get("runtime")
    if runtime is not None:
        if not isinstance(runtime, Runtime):
            raise TypeError(
                f"backend_options runtime= needs an asyncop.Runtime, got {type(runtime).__name__}; "
                "pass a Runtime, or Runtime's arguments instead"
            )
        if len(options) > 1:
            raise TypeError(
                "backend_options for 'asyncop' take either runtime= or Runtime's arguments, "
                "not both: the runtime given was made with its own; pass only one of them"
            )
        return runtime, False
    return Runtime(**options), True
