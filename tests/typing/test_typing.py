"""Run mypy and pyright on the typing examples in this folder.

``check_*.py`` must type-check cleanly under ``mypy --strict`` and pyright:
their ``assert_type`` calls pin what users see. The files in
``expected_errors/`` must fail exactly where an "expect" comment says, with
the error codes it names (mypy's first, then pyright's rule).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.timeout(600)]

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
ERRORS = HERE / "expected_errors"
CHECKED = sorted(HERE.glob("check_*.py"))

_EXPECT = re.compile(r"#\s*expect:\s*([\w-]+(?:\s+[\w-]+)*)\s*$")


def _pyright() -> list[str]:
    # The pyright package is a wrapper that fetches the checker on first use.
    if shutil.which("pyright") is None and not _has_module("pyright"):
        pytest.skip("pyright is not installed (pip install -e '.[dev]')")
    return [sys.executable, "-m", "pyright"]


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _expected(path: Path) -> dict[int, list[str]]:
    """Line number -> the codes its "expect" comment names."""
    found: dict[int, list[str]] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            found[number] = match.group(1).split()
    return found


def _need_mypy() -> None:
    if not _has_module("mypy"):
        # mypy does not install on every interpreter (free-threaded 3.13, say).
        pytest.skip("mypy is not installed (pip install -e '.[dev]')")


def _mypy(paths: list[Path], tmp_path: Path, *flags: str) -> dict[int, set[str]]:
    """Run ``mypy --strict`` from the project root; line -> error codes (one file)."""
    _need_mypy()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--show-error-codes",
            "--no-pretty",
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            *flags,
            *map(str, paths),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    # Only the errors in ``paths``: a flag such as unused-awaitable also
    # reports asyncop's own modules that the file imports.
    checked = {path.resolve() for path in paths}
    errors: dict[int, set[str]] = {}
    for line in result.stdout.splitlines():
        match = re.match(r"^(.+?):(\d+): error: .*\[([a-z-]+)\]$", line)
        if match and (ROOT / match.group(1)).resolve() in checked:
            errors.setdefault(int(match.group(2)), set()).add(match.group(3))
    if result.returncode not in (0, 1) or (result.returncode == 1 and not errors):
        pytest.fail(f"mypy did not run:\n{result.stdout}\n{result.stderr}")
    return errors


def _pyright_run(paths: list[Path], tmp_path: Path, mode: str) -> list[dict[str, Any]]:
    """Run pyright on copies of ``paths`` against this checkout; the diagnostics."""
    config = {
        "pythonVersion": "3.11",
        "typeCheckingMode": mode,
        # This checkout's asyncop, even when another one is installed.
        "extraPaths": [str(ROOT)],
    }
    for path in paths:
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(config))
    result = subprocess.run(
        [
            *_pyright(),
            "--outputjson",
            "--pythonpath",
            sys.executable,
            *(path.name for path in paths),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        report = json.loads(result.stdout)
    except ValueError:
        pytest.fail(f"pyright did not run:\n{result.stdout}\n{result.stderr}")
    diagnostics: list[dict[str, Any]] = report["generalDiagnostics"]
    return diagnostics


def test_examples_pass_mypy_strict(tmp_path: Path) -> None:
    _need_mypy()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(tmp_path),
            *map(str, CHECKED),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_examples_pass_pyright(tmp_path: Path) -> None:
    problems = [d for d in _pyright_run(CHECKED, tmp_path, "strict") if d["severity"] == "error"]
    assert not problems, json.dumps(problems, indent=1)


def _assert_marked(expected: dict[int, list[str]], found: dict[int, set[str]], which: int) -> None:
    """Each marked line has its expected code (``which``: 0 mypy, 1 pyright), no other has any."""
    tool = ("mypy", "pyright")[which]
    for line, codes in expected.items():
        assert codes[which] in found.get(line, set()), (
            f"misuse.py:{line}: {tool} should report {codes[which]}, got {found.get(line)}"
        )
    unexpected = {line: codes for line, codes in found.items() if line not in expected}
    assert not unexpected, f"{tool} errors on unmarked lines: {unexpected}"


def test_misuse_is_caught_by_mypy(tmp_path: Path) -> None:
    path = ERRORS / "misuse.py"
    _assert_marked(_expected(path), _mypy([path], tmp_path), 0)


def test_misuse_is_caught_by_pyright(tmp_path: Path) -> None:
    path = ERRORS / "misuse.py"
    found: dict[int, set[str]] = {}
    for diagnostic in _pyright_run([path], tmp_path, "standard"):
        if diagnostic["severity"] == "error":
            start = diagnostic["range"]["start"]
            found.setdefault(start["line"] + 1, set()).add(str(diagnostic.get("rule")))
    _assert_marked(_expected(path), found, 1)


def test_forgotten_await_is_caught_with_unused_awaitable(tmp_path: Path) -> None:
    path = ERRORS / "forgotten_await.py"
    expected = _expected(path)
    errors = _mypy([path], tmp_path, "--enable-error-code", "unused-awaitable")
    assert errors == {line: set(codes) for line, codes in expected.items()}
