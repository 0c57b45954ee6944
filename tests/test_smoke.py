from __future__ import annotations

import asyncop


def test_spawn_returns_the_value(runtime: asyncop.Runtime) -> None:
    op = runtime.spawn(lambda a, b: a + b, 2, 3)
    assert op.wait(5).value == 5
