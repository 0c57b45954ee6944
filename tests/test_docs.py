"""Every ```python block of README.md and docs/ runs, alone, and exits 0.

Each block runs in its own interpreter (``python -c BLOCK``) from the
repository root, with the checkout on ``PYTHONPATH``, and must finish within
``BLOCK_TIMEOUT`` seconds. Blocks fenced with any other language (``py``,
``pycon``, ``text``, ``sh``...) are shown, not run: fence a fragment that is
not a whole program that way. The blocks run in parallel, once per session;
each block is still its own test, with the id ``file:line``.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK_TIMEOUT = 30.0
PARALLEL = 8  # the blocks mostly sleep or wait; more than the cores is fine

# Third-party packages a block may import that not every interpreter has (a
# free-threaded build lacks trustme, whose cryptography needs cffi): a block
# importing a missing one is skipped, not failed.
OPTIONAL_MODULES = frozenset(
    {
        *("aiohttp", "anyio", "dask", "distributed", "httpx", "opentelemetry", "trio"),
        *("trustme", "uvloop"),
    }
)
_IMPORT = re.compile(r"^\s*(?:import|from)\s+(\w+)", re.MULTILINE)

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    code: str

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Outcome:
    returncode: int | None  # None: timed out
    stdout: str
    stderr: str


def extract_blocks(text: str, path: str) -> list[Block]:
    """The fenced blocks whose info string starts with ``python``."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        indent, fence = len(match["indent"]), match["fence"]
        words = match["info"].split()
        language = words[0].lower() if words else ""
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines):
            closing = _FENCE.match(lines[i])
            if (
                closing is not None
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            line = lines[i]
            # Drop the fence's own indentation (a block inside a list item).
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            i += 1
        i += 1
        if language == "python":
            blocks.append(Block(path, start + 1, "\n".join(body) + "\n"))
    return blocks


def doc_files() -> list[Path]:
    files = [ROOT / "README.md"]
    files += sorted((ROOT / "docs").glob("**/*.md"))
    return [path for path in files if path.is_file()]


def collect_blocks() -> list[Block]:
    blocks: list[Block] = []
    for path in doc_files():
        relative = path.relative_to(ROOT).as_posix()
        blocks += extract_blocks(path.read_text(encoding="utf-8"), relative)
    return blocks


BLOCKS = collect_blocks()


def run_block(block: Block) -> Outcome:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        result = subprocess.run(
            [sys.executable, "-c", block.code],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        return Outcome(None, out, err)
    return Outcome(result.returncode, result.stdout, result.stderr)


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest) -> dict[str, Outcome]:
    """Run, in parallel, the blocks of the tests selected in this session."""
    wanted = {
        item.callspec.id
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_python_block_runs"
        and item.nodeid.split("::")[0].endswith("test_docs.py")
    }
    blocks = [block for block in BLOCKS if block.id in wanted] or BLOCKS
    blocks = [block for block in blocks if not missing_modules(block)]
    with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL, len(blocks)))) as pool:
        results = list(pool.map(run_block, blocks))
    return {block.id: outcome for block, outcome in zip(blocks, results, strict=True)}


def missing_modules(block: Block) -> list[str]:
    """The optional packages ``block`` imports that this interpreter lacks."""
    names = sorted(set(_IMPORT.findall(block.code)) & OPTIONAL_MODULES)
    return [name for name in names if importlib.util.find_spec(name) is None]


def tail(text: str, limit: int = 6000) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


# The first test runs every block, PARALLEL at a time, each stopped after
# BLOCK_TIMEOUT: its limit is the longest that can take, so that a loaded
# machine fails a block (naming it), never the whole batch.
@pytest.mark.timeout(BLOCK_TIMEOUT * (1 + math.ceil(len(BLOCKS) / PARALLEL)))
@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_python_block_runs(block: Block, outcomes: dict[str, Outcome]) -> None:
    missing = missing_modules(block)
    if missing:
        pytest.skip(f"the block needs {', '.join(missing)}, which is not installed")
    outcome = outcomes.get(block.id) or run_block(block)
    if outcome.returncode == 0:
        return
    if outcome.returncode is None:
        what = f"did not finish within {BLOCK_TIMEOUT:g} s"
    else:
        what = f"exited with status {outcome.returncode}"
    numbered = "\n".join(
        f"{block.line + n:5d} | {line}" for n, line in enumerate(block.code.splitlines(), 1)
    )
    pytest.fail(
        f"the ```python block at {block.id} {what}\n"
        f"--- stderr ---\n{tail(outcome.stderr)}\n"
        f"--- stdout ---\n{tail(outcome.stdout, 2000)}\n"
        f"--- the block ---\n{numbered}",
        pytrace=False,
    )


def test_the_readme_tour_is_collected() -> None:
    readme = [block for block in BLOCKS if block.path == "README.md"]
    assert any("runtime.run(main)" in block.code for block in readme)


def test_only_python_fences_are_collected() -> None:
    text = "\n".join(
        [
            "intro",
            "```python",
            "print('run me')",
            "```",
            "```py",
            "not run",
            "```",
            "~~~text",
            "```python",
            "inside a text block",
            "~~~",
            "- a list item:",
            "",
            "  ```python title=example",
            "  if True:",
            "      print('indented')",
            "  ```",
        ]
    )
    blocks = extract_blocks(text, "x.md")
    assert [(b.line, b.code) for b in blocks] == [
        (2, "print('run me')\n"),
        (14, "if True:\n    print('indented')\n"),
    ]


def test_a_block_importing_a_missing_optional_package_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    block = Block("x.md", 1, "import ssl\nimport trustme\nfrom anyio import run\n")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "trustme" else real(name)
    )
    assert missing_modules(block) == ["trustme"]
    assert missing_modules(Block("x.md", 1, "import missing_by_mistake\n")) == []
