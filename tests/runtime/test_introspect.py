"""``current_runtime()`` and ``current_operation(require=True)`` in operation code."""

from __future__ import annotations

import pytest

import asyncop

pytestmark = pytest.mark.timeout(20)


def test_current_runtime_in_a_coroutine_a_sync_callback_and_a_scope_block(
    runtime: asyncop.Runtime,
) -> None:
    def sync_side() -> asyncop.Runtime:
        return asyncop.current_runtime()

    async def main() -> list[asyncop.Runtime]:
        seen = [asyncop.current_runtime()]
        async with asyncop.scope():
            seen.append(asyncop.current_runtime())
        seen.append(await asyncop.current_operation(require=True).spawn(sync_side))
        return seen

    assert runtime.run(main) == [runtime, runtime, runtime]
    with runtime.scope():
        assert asyncop.current_runtime() is runtime


def test_current_runtime_outside_operation_code_raises() -> None:
    with pytest.raises(RuntimeError, match=r"current_runtime\(\)"):
        asyncop.current_runtime()


def test_current_operation_require_true_returns_the_operation(
    vruntime: asyncop.Runtime,
) -> None:
    async def main() -> bool:
        op: asyncop.AsyncOperation = asyncop.current_operation(require=True)
        return op is asyncop.current_operation() and op.name.endswith("main")

    assert vruntime.run(main)
    with vruntime.scope(name="block") as root:
        assert asyncop.current_operation(require=True) is root


def test_current_operation_outside_returns_none_or_raises_when_required() -> None:
    assert asyncop.current_operation() is None
    assert asyncop.current_operation(require=False) is None
    with pytest.raises(RuntimeError, match="require=True"):
        asyncop.current_operation(require=True)
