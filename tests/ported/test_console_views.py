"""The live console against a running program, as a user reads it in another
terminal: ``ps``, ``tree`` and ``dump`` must agree on what each operation is
doing, a grace period's request to stop and a cancel included (asyncio's
``Task.cancelling()``, trio's ``cancel_called``, shown from outside).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import asyncop
from asyncop.testing import VirtualClock

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]


def asyncop_cli(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    result = subprocess.run(
        [sys.executable, "-m", "asyncop", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        env={**env, "COLUMNS": "250"},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


async def sleeper() -> None:
    await asyncop.sleep(1000)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """``service`` > ``asked`` (asked to stop, with a grace), ``dropped`` (cancelled,
    in a shielded cleanup), ``idle``."""
    path = str(tmp_path / "c.sock")

    flushed = asyncop.Event(name="flushed")

    async def cleanup() -> None:
        asyncop.current_operation(require=True).cancel("not needed")
        async with asyncop.scope(shield=True):  # cleanup that a cancel does not cut
            await flushed.wait_async()

    with (
        asyncop.Runtime(1, console=path, name="shop", clock=VirtualClock(autojump=False)) as rt,
        rt.scope(name="service") as service,
    ):
        service.spawn(sleeper, name="asked").cancel("deploying", grace=30)
        service.spawn(cleanup, name="dropped")
        service.spawn(sleeper, name="idle")
        yield path
        service.cancel()
        flushed.set()


def rows_of(table: str) -> dict[str, str]:
    return {line.split()[2]: line for line in table.splitlines() if re.match(r"^ *\d+ ", line)}


def test_ps_shows_a_request_to_stop_in_the_cancel_column(served: str) -> None:
    rows = rows_of(asyncop_cli("ps", served))
    assert "asked to stop (deploying), cancelled at 30.000" in rows["asked"]
    assert "not needed" in rows["dropped"]
    assert "asked to stop" not in rows["idle"] and "not needed" not in rows["idle"]


def test_tree_shows_a_request_to_stop_beside_a_cancel(served: str) -> None:
    lines = asyncop_cli("tree", served).splitlines()
    (asked,) = [line for line in lines if " asked [" in line]
    assert asked.endswith(" asked to stop (deploying), cancelled at 30.000"), asked
    (dropped,) = [line for line in lines if " dropped [" in line]
    assert dropped.endswith(" cancelling (not needed)"), dropped


def test_dump_ps_and_tree_name_the_same_operations_and_waits(served: str) -> None:
    dump = asyncop_cli("dump", served)
    ps = rows_of(asyncop_cli("ps", served))
    tree = asyncop_cli("tree", served)
    for name in ("service", "asked", "dropped", "idle"):
        assert f"  {name} [" in dump and name in ps and f" {name} [" in tree
    assert "asked to stop (deploying), cancelled at 30.000" in dump
    for name in ("asked", "idle"):
        assert "sleep(1000)" in ps[name]
