"""The built wheel installs in a fresh virtual environment and runs the README tour.

The distributions are built with ``python -m build`` (an sdist and a wheel)
when the ``build`` package is installed, and otherwise with ``pip wheel``
(a wheel only). Building and installing fetch hatchling and attrs from the
package index.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.test_docs import extract_blocks

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(600)


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path | None  # None when ``build`` is not installed


def source_version() -> str:
    text = (ROOT / "asyncop" / "_version.py").read_text(encoding="utf-8")
    match = re.search(r"""__version__\s*=\s*["']([^"']+)["']""", text)
    assert match is not None, "asyncop/_version.py has no __version__"
    return match.group(1)


def clean_env() -> dict[str, str]:
    """The environment without anything that would point Python at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(
    args: list[str], cwd: Path, timeout: float = 240, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        args,
        cwd=cwd,
        env={**clean_env(), **(extra_env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, (
        f"{' '.join(map(str, args))} exited with {result.returncode}\n"
        f"--- stdout ---\n{result.stdout[-4000:]}\n--- stderr ---\n{result.stderr[-4000:]}"
    )
    return result


def tour_code() -> str:
    """The first ```python block after the README's "## A tour" heading."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    heading = re.search(r"^## A tour\s*$", text, flags=re.MULTILINE)
    assert heading is not None, 'README.md has no "## A tour" heading'
    offset = text.count("\n", 0, heading.start())
    blocks = [b for b in extract_blocks(text, "README.md") if b.line > offset]
    assert blocks, 'README.md has no ```python block after "## A tour"'
    return blocks[0].code


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    out = tmp_path_factory.mktemp("dist")
    # The core modules compile unoptimised here: this checks what the wheel
    # holds and that it runs, not its speed, and -O0 builds several times faster.
    quick = {"CFLAGS": os.environ.get("CFLAGS", "") + " -O0"}
    if importlib.util.find_spec("build") is not None:
        command = [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)]
        run(command, cwd=out, timeout=480, extra_env=quick)
    else:
        run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
            cwd=out,
            timeout=480,
            extra_env=quick,
        )
    wheels = sorted(out.glob("asyncop-*.whl"))
    sdists = sorted(out.glob("asyncop-*.tar.gz"))
    assert len(wheels) == 1, f"expected one wheel in {sorted(p.name for p in out.iterdir())}"
    return Dist(wheels[0], sdists[0] if sdists else None)


@pytest.fixture(scope="module")
def venv_python(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel (and attrs) installed."""
    venv = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", str(venv)], cwd=venv)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    run([str(python), "-m", "pip", "install", "-q", str(dist.wheel)], cwd=venv)
    return python


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory outside the checkout, so ``import asyncop`` finds the wheel."""
    assert ROOT not in tmp_path.parents
    return tmp_path


def test_wheel_is_named_after_the_source_version(dist: Dist) -> None:
    assert dist.wheel.name.startswith(f"asyncop-{source_version()}-")


def test_wheel_contains_py_typed(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = set(wheel.namelist())
    assert "asyncop/py.typed" in names
    assert "asyncop/__init__.py" in names


def test_wheel_contains_only_the_package(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as wheel:
        tops = {name.split("/", 1)[0] for name in wheel.namelist()}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"asyncop"}


def test_sdist_contains_the_sources_and_py_typed(dist: Dist) -> None:
    if dist.sdist is None:
        pytest.skip("the `build` package is not installed, so no sdist was made")
    with tarfile.open(dist.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"pyproject.toml", "README.md", "asyncop/__init__.py", "asyncop/py.typed"} <= names


def test_installed_version_equals_the_source_version(venv_python: Path, outside: Path) -> None:
    code = "import asyncop; print(asyncop.__version__)"
    result = run([str(venv_python), "-c", code], cwd=outside, timeout=60)
    assert result.stdout.strip() == source_version()


def test_installed_package_is_the_wheel_not_the_checkout(venv_python: Path, outside: Path) -> None:
    code = "import asyncop, pathlib; print(pathlib.Path(asyncop.__file__).resolve())"
    result = run([str(venv_python), "-c", code], cwd=outside, timeout=60)
    location = Path(result.stdout.strip())
    assert ROOT not in location.parents
    assert "site-packages" in location.parts


def test_readme_tour_runs_on_the_installed_wheel(venv_python: Path, outside: Path) -> None:
    result = run([str(venv_python), "-c", tour_code()], cwd=outside, timeout=60)
    assert "<header>" in result.stdout


def wheel_metadata(dist: Dist) -> tuple[str, str]:
    """The wheel's METADATA headers and its long description."""
    with zipfile.ZipFile(dist.wheel) as wheel:
        name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        text = wheel.read(name).decode("utf-8")
    headers, _, body = text.partition("\n\n")
    return headers, body


def core_modules(key: str = "modules") -> list[str]:
    """The modules the build compiles (or, with another key, another list of pyproject.toml's)."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        build = tomllib.load(file)["tool"]["hatch"]["build"]
    modules: list[str] = build["targets"]["wheel"]["hooks"]["custom"][key]
    return modules


def can_compile() -> bool:
    """Whether a wheel built here compiles: a C compiler, and nothing against it."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(compiler) is not None and os.environ.get("ASYNCOP_NO_EXTENSIONS", "") in (
        "",
        "0",
    )


def builds_compiled() -> bool:
    """Whether a wheel built here compiles the whole core: not on a free-threaded build."""
    return can_compile() and not sysconfig.get_config_var("Py_GIL_DISABLED")


def compiled_here() -> list[str]:
    """The core modules a wheel built here holds compiled."""
    if not can_compile():
        return []
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        allowed = set(core_modules("freethreading-compatible"))
        return [path for path in core_modules() if path in allowed]
    return core_modules()


def test_wheel_holds_each_core_module_compiled_beside_its_source(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = set(wheel.namelist())
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    modules = core_modules()
    assert all(path in names for path in modules)
    compiled = [path for path in modules if path.removesuffix(".py") + suffix in names]
    assert compiled == compiled_here()
    assert dist.wheel.name.endswith("-py3-none-any.whl") is not bool(compiled)
    # Only the core: no C sources, and nothing an editable build left in place.
    assert not [name for name in names if name.endswith((".c", ".json"))]


def test_installed_wheel_runs_compiled_unless_told_not_to(venv_python: Path, outside: Path) -> None:
    code = "import asyncop.lowlevel; print(asyncop.lowlevel.is_compiled())"
    result = run([str(venv_python), "-c", code], cwd=outside, timeout=60)
    assert result.stdout.strip() == str(builds_compiled())
    env = {**clean_env(), "ASYNCOP_NO_EXTENSIONS": "1"}
    result = subprocess.run(
        [str(venv_python), "-c", code], cwd=outside, env=env, capture_output=True, text=True
    )
    assert result.stdout.strip() == "False", result.stderr


def test_sdist_installs_pure_python_where_there_is_no_compiler(
    dist: Dist, tmp_path: Path, outside: Path
) -> None:
    if dist.sdist is None:
        pytest.skip("the `build` package is not installed, so no sdist was made")
    no_compiler = {"CC": str(tmp_path / "no-such-cc")}
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path)]
    run([*command, str(dist.sdist)], cwd=tmp_path, timeout=480, extra_env=no_compiler)
    (wheel,) = tmp_path.glob("asyncop-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", str(wheel)], cwd=tmp_path)
    code = (
        "import asyncop, asyncop.lowlevel as low\n"
        "async def main():\n"
        "    await asyncop.sleep(0)\n"
        "    return 7\n"
        "with asyncop.Runtime() as runtime:\n"
        "    print(low.is_compiled(), runtime.run(main))"
    )
    result = run([str(python), "-c", code], cwd=outside, timeout=60)
    assert result.stdout.split() == ["False", "7"]


def test_wheel_ships_the_license_and_says_it_is_mit(dist: Dist) -> None:
    headers, _ = wheel_metadata(dist)
    assert "License-Expression: MIT" in headers.splitlines()
    assert "License-File: LICENSE" in headers.splitlines()
    with zipfile.ZipFile(dist.wheel) as wheel:
        licenses = [n for n in wheel.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert len(licenses) == 1
        assert wheel.read(licenses[0]).decode("utf-8").startswith("MIT License")


def test_wheel_metadata_has_urls_and_classifiers(dist: Dist) -> None:
    headers, _ = wheel_metadata(dist)
    urls = [line for line in headers.splitlines() if line.startswith("Project-URL: ")]
    assert {url.split(":", 2)[1].strip().split(",")[0] for url in urls} >= {
        "Homepage",
        "Documentation",
        "Repository",
        "Issues",
        "Changelog",
    }
    assert all("https://" in url for url in urls)
    classifiers = {
        line[len("Classifier: ") :] for line in headers.splitlines() if "Classifier" in line
    }
    assert {"Typing :: Typed", "Framework :: AnyIO", "Programming Language :: Python :: 3.11"} <= (
        classifiers
    )
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    assert any(c.startswith("Operating System :: ") for c in classifiers)


def test_long_description_opens_with_pip_install_and_links_absolutely(dist: Dist) -> None:
    _, body = wheel_metadata(dist)
    first_block = re.search(r"```\w*\n(.*?)```", body, flags=re.DOTALL)
    assert first_block is not None and first_block.group(1).strip() == "pip install asyncop"
    example = extract_blocks(body, "long description")
    assert example and 5 <= len(example[0].code.strip().splitlines()) <= 25
    links = re.findall(r"\]\(([^)]+)\)", body)
    assert links, "the long description links to the documentation"
    assert [link for link in links if not link.startswith("https://")] == []


def test_wheel_registers_the_pytest_plugin(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as wheel:
        name = next(n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))
        text = wheel.read(name).decode("utf-8")
        assert "asyncop/pytest_plugin.py" in wheel.namelist()
    assert "[pytest11]" in text
    assert "asyncop.pytest_plugin = asyncop.pytest_plugin" in text


def test_sdist_ships_the_license_docs_and_tools(dist: Dist) -> None:
    if dist.sdist is None:
        pytest.skip("the `build` package is not installed, so no sdist was made")
    with tarfile.open(dist.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"LICENSE", "docs/index.md", "docs/pypi.md", "tools/gen_api.py"} <= names


def test_unpacked_sdist_passes_the_tests_that_read_the_checkout(dist: Dist, tmp_path: Path) -> None:
    if dist.sdist is None:
        pytest.skip("the `build` package is not installed, so no sdist was made")
    with tarfile.open(dist.sdist) as sdist:
        sdist.extractall(tmp_path, filter="data")
    (unpacked,) = tmp_path.iterdir()
    env_args = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_docs.py",
        "tests/test_api_reference.py",
        "tests/test_public_api.py",
        "tests/test_pytest_plugin.py",
    ]
    if os.environ.get("ASYNCOP_SDIST_FULL") != "1":
        # The suite runs every docs block and plugin test on the checkout:
        # here, the README's blocks and the plugin tests that read the docs
        # (ASYNCOP_SDIST_FULL=1 runs them all here too).
        env_args += [
            "-k",
            "not test_python_block_runs and not test_pytest_plugin or README or example",
        ]
    result = subprocess.run(
        env_args,
        cwd=unpacked,
        env={**clean_env(), "PYTHONPATH": str(unpacked)},
        capture_output=True,
        text=True,
        timeout=280,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_import_asyncop_anyio_without_the_extra_says_how_to_install(
    venv_python: Path, outside: Path
) -> None:
    result = subprocess.run(
        [str(venv_python), "-c", "import asyncop.anyio"],
        cwd=outside,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "pip install 'asyncop[anyio]'" in result.stderr


def test_plugin_runs_a_test_file_with_the_installed_wheel(venv_python: Path, outside: Path) -> None:
    run([str(venv_python), "-m", "pip", "install", "-q", "pytest"], cwd=outside)
    (outside / "test_installed.py").write_text(
        "import pytest\n"
        "import asyncop\n\n"
        "@pytest.fixture\n"
        "async def ready():\n"
        "    yield asyncop.current_operation(require=True)\n\n"
        "@pytest.mark.asyncop\n"
        "async def test_runs_on_asyncop(ready, autojump_clock):\n"
        "    await asyncop.sleep(60)\n"
        "    assert asyncop.current_time() == 60\n"
        "    assert ready.parent is asyncop.current_operation()\n",
        encoding="utf-8",
    )
    result = run([str(venv_python), "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=outside)
    assert "1 passed" in result.stdout
