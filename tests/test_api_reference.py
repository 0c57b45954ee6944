"""docs/api.md is generated from the docstrings, complete, deterministic and up to date."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT / "tools" / "gen_api.py"
API = ROOT / "docs" / "api.md"
REGENERATE = "run `python tools/gen_api.py` to regenerate it"

pytestmark = pytest.mark.timeout(60)

pytest.importorskip("anyio", reason="documenting asyncop.anyio needs anyio")


def run_generator(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GENERATOR), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def generated(tmp_path: Path, name: str = "api.md", **env: str) -> str:
    out = tmp_path / name
    result = run_generator("--output", str(out), env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return out.read_text(encoding="utf-8")


def public_names() -> list[str]:
    from tools.gen_api import MODULES

    names = []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        names += [f"{module_name}.{name}" for name in module.__all__]
    return names


def test_api_reference_is_up_to_date() -> None:
    result = run_generator("--check")
    if result.returncode != 0:
        diff = result.stdout[-4000:]
        pytest.fail(
            f"docs/api.md does not match the docstrings; {REGENERATE}.\n{diff}\n{result.stderr}",
            pytrace=False,
        )


def test_check_mode_reports_a_stale_file_with_a_diff(tmp_path: Path) -> None:
    stale = tmp_path / "api.md"
    stale.write_text(API.read_text(encoding="utf-8") + "a line no docstring wrote\n")
    result = run_generator("--check", "--output", str(stale))
    assert result.returncode == 1
    assert "-a line no docstring wrote" in result.stdout
    assert REGENERATE in result.stdout


def test_check_mode_reports_a_missing_file(tmp_path: Path) -> None:
    result = run_generator("--check", "--output", str(tmp_path / "missing.md"))
    assert result.returncode == 1
    assert REGENERATE in result.stdout


def test_every_public_name_has_a_heading() -> None:
    text = API.read_text(encoding="utf-8")
    headings = set(re.findall(r"^### `([\w.]+)`$", text, flags=re.MULTILINE))
    missing = [name for name in public_names() if name not in headings]
    assert missing == [], f"not documented in docs/api.md: {missing}; {REGENERATE}"


def test_every_in_page_link_has_a_target() -> None:
    from tools.gen_api import _Slugs

    text = API.read_text(encoding="utf-8")
    slugs = _Slugs()
    anchors = {
        slugs.make(heading) for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)
    }
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links, "the reference has no table of contents"
    assert sorted(links - anchors) == []


def test_output_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    first = generated(tmp_path, "a.md", PYTHONHASHSEED="1")
    second = generated(tmp_path, "b.md", PYTHONHASHSEED="2")
    assert first == second


def test_output_has_no_memory_address_or_absolute_path(tmp_path: Path) -> None:
    text = generated(tmp_path)
    assert re.search(r"0x[0-9a-fA-F]{6,}", text) is None
    assert str(ROOT) not in text
    assert str(Path.home()) not in text


def test_output_has_no_python_block_for_the_doc_tests_to_run(tmp_path: Path) -> None:
    # tests/test_docs.py runs every ```python block of docs/; signatures and
    # docstring snippets are fenced as ```py so that they are shown, not run.
    text = generated(tmp_path)
    assert re.search(r"^```python\s*$", text, flags=re.MULTILINE) is None


def test_a_class_shows_its_constructor_signature_and_methods() -> None:
    text = API.read_text(encoding="utf-8")
    assert "class Runtime(workers: int | None = None, *, name: str | None = None" in text
    assert "#### `Runtime.spawn`" in text
    assert "#### `AsyncOperation.deadline`" in text
    assert "*A settable property.*" in text


def test_a_re_export_links_to_the_first_entry() -> None:
    text = API.read_text(encoding="utf-8")
    entry = text.split("### `asyncop.lowlevel.WakerStatus`", 1)[1].split("###", 1)[0]
    assert "The same object as [`asyncop.WakerStatus`](#asyncopwakerstatus)" in entry


def test_docstring_markup_becomes_markdown() -> None:
    text = API.read_text(encoding="utf-8")
    assert "``" not in text.replace("```", "")
    assert "**Raises:**" in text
    assert "- `workers`: the number of worker threads" in text
