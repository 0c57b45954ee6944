"""What a newcomer from trio, anyio or asyncio types first, after a bare
``import asyncop``: the peer library's name (``asyncop.run``,
``asyncop.current_effective_deadline``...), then the line the error told
them to write.

trio's ``trio.lowlevel``, ``trio.testing`` and ``trio.to_thread``, and
asyncio's ``asyncio.subprocess``, are there after ``import trio`` or
``import asyncio`` alone; so must asyncop's ``asyncop.lowlevel``,
``asyncop.testing``, ``asyncop.net``, ``asyncop.process``... be, at least
for every spelling an error message or the docs put after a plain
``import asyncop``. Each case runs in a fresh interpreter: in this one, the
suite has imported every module already.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from asyncop._peer_names import HINTS

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]

#: The submodules a user reaches as attributes of ``asyncop``, and one name of each.
SUBMODULES = {
    "asyncio_bridge": "run",
    "fs": "read_bytes_async",
    "lowlevel": "effective_deadline",
    "net": "open_tcp_stream",
    "process": "run_process",
    "signals": "open_signal_receiver",
    "testing": "VirtualClock",
}


def fresh(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new interpreter, from the checkout."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def dotted_names_in_hints() -> list[str]:
    names = set()
    for hint in HINTS.values():
        names.update(re.findall(r"\basyncop(?:\.\w+)+", hint))
    return sorted(names)


def test_every_name_an_error_message_suggests_works_after_import_asyncop() -> None:
    names = dotted_names_in_hints()
    assert "asyncop.lowlevel.effective_deadline" in names
    code = "import asyncop\n" + "".join(f"{name}\n" for name in names)
    result = fresh(code)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("module", "name"), sorted(SUBMODULES.items()))
def test_a_submodule_is_an_attribute_after_import_asyncop(module: str, name: str) -> None:
    result = fresh(
        "import importlib, asyncop\n"
        f"mod = asyncop.{module}\n"
        f"assert mod is importlib.import_module('asyncop.{module}')\n"
        f"assert callable(mod.{name})\n"
    )
    assert result.returncode == 0, result.stderr


def test_the_submodules_are_imported_only_when_asked_for() -> None:
    # A plain 'import asyncop' stays as light as it was.
    result = fresh(
        "import sys, asyncop\n"
        f"names = {sorted(SUBMODULES)!r}\n"
        "loaded = [n for n in names if 'asyncop.' + n in sys.modules]\n"
        "assert not {'net', 'process', 'signals', 'asyncio_bridge'} & set(loaded), loaded\n"
    )
    assert result.returncode == 0, result.stderr


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    result = fresh(
        "import asyncop\n"
        "assert not hasattr(asyncop, 'nets')\n"
        "assert not hasattr(asyncop, 'pytest_plugin_x')\n"
        "try:\n"
        "    asyncop.run\n"
        "except AttributeError as exc:\n"
        "    assert 'runtime.run(main)' in str(exc), exc\n"
    )
    assert result.returncode == 0, result.stderr


def test_the_peer_hint_for_the_effective_deadline_runs_as_written() -> None:
    result = fresh(
        "import asyncop\n"
        "async def main():\n"
        "    async with asyncop.move_on_after(5):\n"
        "        return asyncop.lowlevel.effective_deadline() - asyncop.current_time()\n"
        "with asyncop.Runtime(1) as runtime:\n"
        "    print(runtime.run(main))\n"
    )
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) == pytest.approx(5, abs=1)
