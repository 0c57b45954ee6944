"""Run anyio's own test suite on asyncop's anyio backend, and compare it with trio.

The yardstick of the ``"asyncop"`` anyio backend: of the tests of anyio's
suite that pass on anyio's trio backend, how many pass on ``"asyncop"``.
``tools/anyio-suite`` runs this module; see ``docs/anyio-suite.md``::

    tools/anyio-suite                                  # the whole suite, trio then asyncop
    tools/anyio-suite -k cancel tests/test_taskgroups.py
    tools/anyio-suite --expected docs/anyio-suite.md --json results.json

What it does
------------
1. Reads the version of the installed anyio, and fetches that version's
   source distribution once (``pip download --no-binary :all: --no-deps``)
   into the cache folder (``~/.cache/asyncop-anyio-suite``), where it is
   unpacked. Its ``tests/`` are the suite; nothing in it is edited.
2. Checks that the packages anyio's tests need (its ``test`` dependency
   group, less coverage) are installed, and says how to install them if not:
   ``pip install -e '.[anyio-suite]'``.
3. Runs pytest in the unpacked sdist, in this interpreter, with anyio's own
   configuration and ``tools/anyio_suite_plugin.py``, which parametrizes the
   tests that run on any backend over ``trio`` and ``asyncop``: once for
   trio, then once for asyncop, each at a lower priority (``nice``) and with
   a per-test timeout. The checkout's ``asyncop`` is first on
   ``PYTHONPATH``. A pytest that dies or stops making progress is ended; the
   test it was in is counted as ``crashed``, and pytest starts again on the
   tests not yet run. When ``anyio._backends._asyncop`` cannot be imported
   after ``import asyncop``, the asyncop run is not started, and every test
   counts as failed with the import error as its reason.
4. Pairs each test's result on trio with its result on asyncop and prints
   the count, the rate, the tests that fail on asyncop but pass on trio, and
   the wall time of each backend.

Only tests that ran and passed on trio count. Tests that name their own
backends (asyncio-only, trio-only) and tests that take no backend are not
run, and a test that fails or is skipped on trio on this machine (no IPv6
``localhost``, no Internet) does not count either.

Exit status: 0 when asyncop passes at least ``--min-rate`` per cent of them
and, with ``--expected``, every test failing on asyncop is listed in that
file; 1 when not; 2 when the suite could not be run.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(__file__).resolve().parent
BACKENDS = ("trio", "asyncop")
#: anyio's test requirements the suite runs without (coverage only measures).
UNNEEDED_TEST_REQUIREMENTS = frozenset({"coverage"})
#: The heading of the table of tests that cannot pass, in the ``--expected`` file.
KNOWN_FAILURES_HEADING = "Tests that cannot pass on asyncop, and why"
#: How many times pytest starts again after it died or hung in one backend's run.
MAX_RESTARTS = 10
PASSING = "passed"


class SuiteError(Exception):
    """The suite could not be run; the message says why and what to do."""


# ---------------------------------------------------------------------------
# Results


@dataclasses.dataclass(frozen=True)
class TestResult:
    """The outcome of one test of anyio's suite on one backend."""

    __test__ = False  # not a pytest test class

    nodeid: str
    key: str  # the test without its backend: the same on trio and on asyncop
    outcome: str  # passed, failed, error, skipped, xfailed, xpassed, crashed
    duration: float = 0.0
    message: str = ""


@dataclasses.dataclass
class BackendRun:
    """What one backend's run of the suite produced: results by key, and how it went."""

    backend: str
    results: dict[str, TestResult] = dataclasses.field(default_factory=dict)
    collected: int = 0  # the shared tests collected for this backend
    excluded: dict[str, int] = dataclasses.field(default_factory=dict)
    wall_time: float = 0.0
    restarts: int = 0
    finished: bool = False  # pytest reached the end of its session
    exitstatus: int | None = None
    last_started: tuple[str, str] | None = None  # (nodeid, key) with no result yet
    absent: str = "no result"  # why a test has no result: it did not run

    def counts(self) -> Counter[str]:
        return Counter(r.outcome for r in self.results.values())


def read_results(backend: str, lines: Iterable[str], run: BackendRun | None = None) -> BackendRun:
    """Fold the JSON lines the plugin wrote for ``backend`` into ``run`` (a new one if None).

    A result replaces an earlier one with the same key; a line that is not
    JSON (the last one of a killed run may be cut short) is ignored.
    """
    run = run if run is not None else BackendRun(backend)
    run.finished = False
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        event = record.get("event")
        if event == "collected":
            run.collected = max(run.collected, int(record["shared"].get(backend, 0)))
            run.excluded = dict(record.get("excluded", {}))
        elif event == "start":
            run.last_started = (record["nodeid"], record.get("key") or record["nodeid"])
        elif event == "result":
            result = TestResult(
                record["nodeid"],
                record.get("key") or record["nodeid"],
                record["outcome"],
                float(record.get("duration", 0.0)),
                record.get("message", ""),
            )
            run.results[result.key] = result
            if run.last_started is not None and run.last_started[0] == result.nodeid:
                run.last_started = None
        elif event == "finished":
            run.finished = True
            run.exitstatus = int(record["exitstatus"])
    return run


@dataclasses.dataclass(frozen=True)
class Comparison:
    """How asyncop did on the tests that pass on trio."""

    baseline: tuple[str, ...]  # keys of the tests that passed on trio
    passed: tuple[str, ...]  # of those, the ones that passed on asyncop
    failing: tuple[TestResult, ...]  # of those, asyncop's result where it did not pass

    @property
    def rate(self) -> float:
        """The per cent of the baseline that passed on asyncop (0 for an empty baseline)."""
        return 100.0 * len(self.passed) / len(self.baseline) if self.baseline else 0.0


def compare(trio: BackendRun, asyncop: BackendRun) -> Comparison:
    """Pair the two runs' results by key: which trio passes also passed on asyncop."""
    baseline = sorted(k for k, r in trio.results.items() if r.outcome == PASSING)
    passed: list[str] = []
    failing: list[TestResult] = []
    for key in baseline:
        result = asyncop.results.get(key)
        if result is not None and result.outcome == PASSING:
            passed.append(key)
        else:
            nodeid = key.replace("*", asyncop.backend) if key.count("*") == 1 else key
            failing.append(result or TestResult(nodeid, key, "not run", message=asyncop.absent))
    return Comparison(tuple(baseline), tuple(passed), tuple(failing))


# ---------------------------------------------------------------------------
# The list of tests that cannot pass


@dataclasses.dataclass(frozen=True)
class KnownFailure:
    """One row of the table of tests that cannot pass: a node id pattern and its reason."""

    pattern: str  # a node id; "*" matches any run of characters, nothing else is special
    reason: str

    def matches(self, nodeid: str) -> bool:
        regex = ".*".join(re.escape(part) for part in self.pattern.split("*"))
        return re.fullmatch(regex, nodeid) is not None


_ROW = re.compile(r"^\s*\|(?P<cells>.*)\|\s*$")
_CODE = re.compile(r"`([^`]+)`")


def read_known_failures(markdown: str, source: str = "the file") -> list[KnownFailure]:
    """The rows of the table under the heading ``KNOWN_FAILURES_HEADING`` in ``markdown``.

    Each row's first cell holds the node id in backquotes (``*`` matches any
    characters, so one row may cover every parameter of a test), its second
    cell the reason. The table's header row and its ``|---|`` line are not rows.

    Raises:
        SuiteError: if there is no such heading, or a row names no test or
            gives no reason.
    """
    lines = markdown.splitlines()
    heading = next(
        (
            i
            for i, line in enumerate(lines)
            if line.startswith("#") and line.lstrip("#").strip() == KNOWN_FAILURES_HEADING
        ),
        None,
    )
    if heading is None:
        raise SuiteError(
            f"{source} has no heading '{KNOWN_FAILURES_HEADING}'; add it, with a table "
            "of | `node id` | reason | rows below it"
        )
    known: list[KnownFailure] = []
    section = lines[heading + 1 :]
    for offset, line in enumerate(section):
        if line.startswith("#"):
            break
        cells = _cells(line)
        following = _cells(section[offset + 1]) if offset + 1 < len(section) else None
        if cells is None or _is_rule(cells) or (following is not None and _is_rule(following)):
            continue  # not a row, the |---| line, or the header row above it
        where = f"{source}, line {heading + offset + 2}"
        patterns = _CODE.findall(cells[0])
        if not patterns:
            raise SuiteError(f"{where}: the row names no test; put its node id in backquotes")
        reason = cells[1] if len(cells) > 1 else ""
        if not reason:
            raise SuiteError(
                f"{where}: {cells[0]} has no reason; say in the second cell why it "
                "cannot pass on asyncop"
            )
        known.extend(KnownFailure(p.strip(), reason) for p in patterns)
    return known


def _cells(line: str) -> list[str] | None:
    row = _ROW.match(line)
    return None if row is None else [cell.strip() for cell in row["cells"].split("|")]


def _is_rule(cells: list[str]) -> bool:
    return all(cell and set(cell) <= set(":- ") for cell in cells)


def unlisted(failing: Iterable[TestResult], known: Sequence[KnownFailure]) -> list[TestResult]:
    """The failing tests that no row of ``known`` matches."""
    return [r for r in failing if not any(k.matches(r.nodeid) for k in known)]


def stale(
    failing: Iterable[TestResult], asyncop: BackendRun, known: Sequence[KnownFailure]
) -> list[KnownFailure]:
    """The rows that match no failing test but do match a test that ran (so it passes now)."""
    failing_ids = [r.nodeid for r in failing]
    ran_ids = [r.nodeid for r in asyncop.results.values()]
    return [
        k
        for k in known
        if not any(k.matches(n) for n in failing_ids) and any(k.matches(n) for n in ran_ids)
    ]


# ---------------------------------------------------------------------------
# The sdist and what its tests need


def cache_dir() -> Path:
    """Where the sdists are kept: ``$ASYNCOP_ANYIO_SUITE_CACHE``, or under the user's cache."""
    if explicit := os.environ.get("ASYNCOP_ANYIO_SUITE_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "asyncop-anyio-suite"


def fetch_suite(version: str, cache: Path) -> Path:
    """The folder of anyio ``version``'s unpacked sdist, downloaded into ``cache`` on first use.

    Raises:
        SuiteError: if pip cannot download it, or it holds no ``tests/``.
    """
    suite = cache / f"anyio-{version}"
    if (suite / "tests" / "conftest.py").is_file():
        return suite
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix="download-") as tmp:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-binary",
            ":all:",
            "--no-deps",
            "--dest",
            tmp,
            f"anyio=={version}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        archives = sorted(Path(tmp).glob("anyio-*.tar.gz"))
        if done.returncode != 0 or not archives:
            raise SuiteError(
                f"pip could not download the sdist of anyio {version} "
                f"({done.stderr.strip()[-500:]}); check the connection to the package "
                f"index, or unpack the sdist by hand into {suite}"
            )
        with tarfile.open(archives[0]) as archive:
            archive.extractall(tmp, filter="data")
        unpacked = Path(tmp) / f"anyio-{version}"
        if not (unpacked / "tests" / "conftest.py").is_file():
            raise SuiteError(f"the sdist of anyio {version} has no tests/conftest.py to run")
        # Renamed into place only once whole, so that an interrupted download
        # is fetched again rather than run half unpacked.
        try:
            unpacked.rename(suite)
        except OSError:
            if not (suite / "tests" / "conftest.py").is_file():  # not a concurrent run's copy
                raise
    return suite


def missing_requirements(suite: Path) -> list[str]:
    """The requirements of anyio's ``test`` dependency group that this interpreter lacks."""
    from packaging.requirements import Requirement

    with open(suite / "pyproject.toml", "rb") as f:
        pyproject = tomllib.load(f)
    wanted = pyproject.get("dependency-groups", {}).get("test", [])
    missing: list[str] = []
    for text in wanted:
        if not isinstance(text, str):
            continue  # an {include-group = ...} table
        requirement = Requirement(" ".join(text.split()))
        if requirement.name in UNNEEDED_TEST_REQUIREMENTS:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        try:
            installed = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(str(requirement))
            continue
        if not requirement.specifier.contains(installed, prereleases=True):
            missing.append(f"{requirement} (found {installed})")
    return missing


# ---------------------------------------------------------------------------
# Running pytest


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """What selects the tests and how each pytest runs."""

    tests: tuple[str, ...] = ()  # paths or node ids inside the sdist
    keyword: str | None = None
    timeout: float = 30.0
    nice: int = 10
    pytest_args: tuple[str, ...] = ()


def pytest_command(backend: str, results: Path, exclude: Path, options: RunOptions) -> list[str]:
    """The command that runs one backend's share of anyio's suite from the sdist's folder."""
    command = ["nice", "-n", str(options.nice)] if options.nice and shutil.which("nice") else []
    command += [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "anyio_suite_plugin",
        f"--anyio-suite-backends={backend}",
        f"--anyio-suite-results={results}",
        f"--anyio-suite-exclude={exclude}",
        f"--timeout={options.timeout:g}",
        "-p",
        "no:cacheprovider",
        "-q",
    ]
    if options.keyword:
        command += ["-k", options.keyword]
    command += list(options.pytest_args)
    tests = [t if t == "tests" or t.startswith("tests/") else f"tests/{t}" for t in options.tests]
    command += tests or ["tests"]
    return command


def run_backend(backend: str, suite: Path, workdir: Path, options: RunOptions) -> BackendRun:
    """Run the shared tests on ``backend``, starting pytest again after it died or hung.

    pytest's output goes to ``workdir/<backend>.log``. A pytest that writes
    no result for twice the per-test timeout (and a minute) is killed; the
    test it was in is recorded as ``crashed``, and the next pytest skips
    every test already reported.
    """
    results, exclude, log = (workdir / f"{backend}{ext}" for ext in (".jsonl", ".exclude", ".log"))
    env = dict(os.environ)
    # The tools folder for the plugin; the checkout, so that its asyncop is the one tested.
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(TOOLS), str(ROOT), env.get("PYTHONPATH")])
    )
    run = BackendRun(backend)
    stall = 2 * options.timeout + 60
    exclude.write_text("")
    results.write_text("")
    while True:
        started = time.monotonic()
        with open(log, "a") as out:
            status = _watch(
                pytest_command(backend, results, exclude, options), suite, env, out, results, stall
            )
        run.wall_time += time.monotonic() - started
        with open(results, encoding="utf-8") as f:
            run = read_results(
                backend, f, BackendRun(backend, wall_time=run.wall_time, restarts=run.restarts)
            )
        if run.finished or run.last_started is None or run.restarts >= MAX_RESTARTS:
            if not run.finished and status is not None:
                run.exitstatus = status
            return run
        nodeid, key = run.last_started
        cause = "hung: no result" if status is None else f"pytest ended with status {status}"
        run.results[key] = TestResult(nodeid, key, "crashed", message=f"{cause} during this test")
        with open(results, "a", encoding="utf-8") as f:  # so the next read keeps it
            f.write(json.dumps({"event": "result", **dataclasses.asdict(run.results[key])}) + "\n")
        exclude.write_text("".join(f"{r.nodeid}\n" for r in run.results.values()))
        run.restarts += 1
        print(f"  {backend}: {cause} in {nodeid}; starting pytest again on the rest", flush=True)


def _watch(
    command: list[str], cwd: Path, env: dict[str, str], out: Any, results: Path, stall: float
) -> int | None:
    """Run ``command`` to its end: its exit status, or None if killed for making no progress.

    Says how many tests are done once a minute. The command runs in a session
    of its own, so that the kill takes what its tests started with it; for
    the same reason, it is killed here when this process is interrupted.
    """
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )
    size, progress = -1, time.monotonic()
    said = progress
    try:
        while True:
            try:
                return process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            now, now_size = time.monotonic(), results.stat().st_size
            if now_size != size:
                size, progress = now_size, now
            elif now - progress > stall:
                return None
            if now - said >= 60:
                said = now
                done = results.read_text(encoding="utf-8").count('"event": "result"')
                print(f"  {done} tests done", flush=True)
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def new_workdir(runs: Path, keep: int = 10) -> Path:
    """A new folder for one run's logs and results under ``runs``, keeping the last ``keep``."""
    runs.mkdir(parents=True, exist_ok=True)
    for old in sorted(runs.glob("run-*"), key=lambda p: p.stat().st_mtime)[: -keep + 1 or None]:
        shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=time.strftime("run-%Y%m%d-%H%M%S-"), dir=runs))


def backend_problem() -> str | None:
    """Why ``anyio._backends._asyncop`` cannot be imported after ``import asyncop``, or None."""
    probe = "import asyncop, importlib; importlib.import_module('anyio._backends._asyncop')"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False
    )
    lines = done.stderr.strip().splitlines()
    return None if done.returncode == 0 else (lines[-1] if lines else f"status {done.returncode}")


# ---------------------------------------------------------------------------
# The report


def describe_run(run: BackendRun) -> str:
    """One line: how many tests ran on this backend, by outcome, and its wall time."""
    counts = run.counts()
    order = ("passed", "failed", "error", "crashed", "skipped", "xfailed", "xpassed")
    parts = [f"{counts[o]} {o}{'s' if o == 'error' else ''}" for o in order if counts[o]]
    extra = f", pytest restarted {run.restarts} times" if run.restarts else ""
    return (
        f"{run.backend + ':':<9}{len(run.results)} tests: {', '.join(parts) or 'none ran'}"
        f" in {run.wall_time:.1f} s{extra}"
    )


def format_report(trio: BackendRun, asyncop: BackendRun, comparison: Comparison) -> str:
    """The summary ``tools/anyio-suite`` prints: both runs, the rate, the failing tests."""
    lines = [describe_run(trio), describe_run(asyncop)]
    if trio.excluded:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(trio.excluded.items()))
        lines.append(f"not run (they run on no or other backends): {kinds}")
    lines.append(
        f"asyncop passed {len(comparison.passed)} of the {len(comparison.baseline)} tests "
        f"that pass on trio: {comparison.rate:.1f} %"
    )
    if comparison.failing:
        lines.append(f"failing on asyncop, passing on trio ({len(comparison.failing)}):")
        lines += [
            f"  {r.nodeid}  {r.outcome}{': ' + r.message if r.message else ''}"
            for r in comparison.failing
        ]
    return "\n".join(lines)


def as_json(
    runs: Sequence[BackendRun], comparison: Comparison, about: dict[str, Any]
) -> dict[str, Any]:
    """Everything a run found, for ``--json``."""
    return {
        **about,
        "rate": round(comparison.rate, 2),
        "baseline": len(comparison.baseline),
        "passed": len(comparison.passed),
        "failing": [dataclasses.asdict(r) for r in comparison.failing],
        "backends": {
            run.backend: {
                "wall_time": round(run.wall_time, 2),
                "restarts": run.restarts,
                "counts": dict(run.counts()),
                "excluded": run.excluded,
                "results": {r.nodeid: dataclasses.asdict(r) for r in run.results.values()},
            }
            for run in runs
        },
    }


# ---------------------------------------------------------------------------
# The command line


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tools/anyio-suite",
        description="Run anyio's own test suite on trio and on asyncop's anyio backend, and "
        "say how many of the tests that pass on trio pass on asyncop.",
        epilog="Arguments after -- go to pytest as they are.",
    )
    parser.add_argument("tests", nargs="*", help="test files or node ids of anyio's tests/")
    parser.add_argument("-k", dest="keyword", metavar="EXPR", help="pytest's -k expression")
    parser.add_argument("--timeout", type=float, default=30.0, help="per-test timeout, s (30)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write every result here")
    parser.add_argument(
        "--expected",
        type=Path,
        metavar="DOC",
        help="fail unless every test failing on asyncop is in this file's table "
        f"'{KNOWN_FAILURES_HEADING}'",
    )
    parser.add_argument(
        "--min-rate", type=float, default=95.0, metavar="PCT", help="fail below this (95)"
    )
    parser.add_argument("--nice", type=int, default=10, help="niceness of the pytest runs (10)")
    parser.add_argument("--cache", type=Path, default=None, help=f"sdist cache ({cache_dir()})")
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    args.pytest_args = argv[split + 1 :]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # A terminated run ends as an interrupted one does, killing the pytest it runs.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        known = None
        if args.expected is not None:
            known = read_known_failures(args.expected.read_text(), str(args.expected))
        try:
            version = importlib.metadata.version("anyio")
        except importlib.metadata.PackageNotFoundError:
            raise SuiteError(
                f"anyio is not installed in {sys.executable}; run this with the venv's "
                "python, or pip install -e '.[anyio-suite]'"
            ) from None
        suite = fetch_suite(version, args.cache or cache_dir())
        if missing := missing_requirements(suite):
            raise SuiteError(
                f"anyio {version}'s tests need {', '.join(missing)}; install them with "
                "pip install -e '.[anyio-suite]' (or each of them with pip)"
            )
    except (SuiteError, OSError) as exc:
        print(f"anyio-suite: {exc}", file=sys.stderr)
        return 2
    options = RunOptions(
        tuple(args.tests), args.keyword, args.timeout, args.nice, tuple(args.pytest_args)
    )
    workdir = new_workdir(suite.parent / "runs")
    print(f"anyio {version}'s tests, from {suite}; pytest logs in {workdir}", flush=True)
    runs = []
    for backend in BACKENDS:
        if backend == "asyncop" and (problem := backend_problem()) is not None:
            # Every test would fail at its first anyio call: counted so, not run.
            print(f"the asyncop backend cannot be imported ({problem}): its tests count as failed")
            runs.append(BackendRun(backend, absent=f"the backend cannot be imported: {problem}"))
            continue
        print(f"running the tests on {backend}...", flush=True)
        runs.append(run_backend(backend, suite, workdir, options))
    trio, asyncop = runs
    if not trio.results:
        print(
            f"anyio-suite: no test ran on trio (pytest status {trio.exitstatus}); "
            f"see {workdir / 'trio.log'}",
            file=sys.stderr,
        )
        return 2
    comparison = compare(trio, asyncop)
    print(format_report(trio, asyncop, comparison))
    if args.json is not None:
        about = {"anyio": version, "python": sys.version.split()[0], "suite": str(suite)}
        args.json.write_text(json.dumps(as_json(runs, comparison, about), indent=1) + "\n")
    ok = comparison.rate >= args.min_rate
    if not ok:
        print(f"FAIL: {comparison.rate:.1f} % is below {args.min_rate:g} %")
    if known is not None:
        ok = check_known(comparison, asyncop, known, args) and ok
    # Last, in the form CI logs are read for: the tests that pass on trio, on asyncop.
    print(f"asyncop: {len(comparison.passed)} passed, {len(comparison.failing)} failed")
    return 0 if ok else 1


def check_known(
    comparison: Comparison, asyncop: BackendRun, known: list[KnownFailure], args: Any
) -> bool:
    """Print the failing tests ``--expected`` does not list, and its rows that pass now."""
    missing = unlisted(comparison.failing, known)
    for row in stale(comparison.failing, asyncop, known):
        print(f"note: {args.expected} lists {row.pattern}, which did not fail here; remove it?")
    if missing and len(missing) == len(comparison.failing):
        print(f"FAIL: none of the {len(missing)} tests failing on asyncop is in {args.expected}")
    elif missing:
        print(f"FAIL: {len(missing)} tests fail on asyncop and are not listed in {args.expected}:")
        print("\n".join(f"  {r.nodeid}" for r in missing))
    return not missing


if __name__ == "__main__":
    sys.exit(main())
