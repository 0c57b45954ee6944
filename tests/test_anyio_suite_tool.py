"""tools/anyio-suite, the run of anyio's own test suite on asyncop, without downloading it.

The parts that decide the verdict are tried on made-up input: reading the
plugin's results, pairing trio's results with asyncop's, the rate, and the
table of tests that cannot pass. The plugin that parametrizes anyio's tests
runs on a small suite laid out as anyio's is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tools import anyio_suite
from tools.anyio_suite import BackendRun, KnownFailure, SuiteError, TestResult

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(30)


def lines(*records: dict[str, object]) -> list[str]:
    return [json.dumps(record) + "\n" for record in records]


def result(nodeid: str, outcome: str, backend: str = "trio", **more: object) -> dict[str, object]:
    key = nodeid.replace(f"[{backend}]", "[*]")
    record = {"event": "result", "nodeid": nodeid, "key": key, "backend": backend}
    return {**record, "outcome": outcome, "duration": 0.1, "message": "", **more}


def run_of(backend: str, outcomes: dict[str, str]) -> BackendRun:
    records = [result(f"tests/t.py::{name}[{backend}]", o, backend) for name, o in outcomes.items()]
    return anyio_suite.read_results(
        backend, lines(*records, {"event": "finished", "exitstatus": 1})
    )


# --- reading the results file -------------------------------------------------


def test_read_results_keeps_results_by_key_and_the_collected_counts() -> None:
    run = anyio_suite.read_results(
        "trio",
        lines(
            {
                "event": "collected",
                "shared": {"trio": 2, "asyncop": 2},
                "excluded": {"no-backend": 3},
            },
            {"event": "start", "nodeid": "tests/t.py::a[trio]", "key": "tests/t.py::a[*]"},
            result("tests/t.py::a[trio]", "passed"),
            {"event": "start", "nodeid": "tests/t.py::b[trio]", "key": "tests/t.py::b[*]"},
            result("tests/t.py::b[trio]", "failed", message="AssertionError"),
            {"event": "finished", "exitstatus": 1},
        ),
    )
    assert run.collected == 2
    assert run.excluded == {"no-backend": 3}
    assert run.finished and run.exitstatus == 1
    assert run.last_started is None
    assert run.results["tests/t.py::b[*]"] == TestResult(
        "tests/t.py::b[trio]", "tests/t.py::b[*]", "failed", 0.1, "AssertionError"
    )
    assert run.counts() == {"passed": 1, "failed": 1}


def test_read_results_of_a_killed_run_names_the_test_it_was_in_and_skips_a_cut_line() -> None:
    text = lines(
        result("tests/t.py::a[trio]", "passed"),
        {"event": "start", "nodeid": "tests/t.py::b[trio]", "key": "tests/t.py::b[*]"},
    )
    run = anyio_suite.read_results("trio", [*text, '{"event": "resu'])
    assert not run.finished
    assert run.last_started == ("tests/t.py::b[trio]", "tests/t.py::b[*]")
    assert list(run.results) == ["tests/t.py::a[*]"]


def test_a_later_result_of_the_same_test_replaces_the_earlier_one() -> None:
    run = anyio_suite.read_results(
        "trio",
        lines(
            result("tests/t.py::a[trio]", "crashed"),
            result("tests/t.py::a[trio]", "passed"),
        ),
    )
    assert run.results["tests/t.py::a[*]"].outcome == "passed"


# --- pairing trio with asyncop ------------------------------------------------


def test_only_tests_that_pass_on_trio_count() -> None:
    trio = run_of("trio", {"a": "passed", "b": "passed", "c": "failed", "d": "skipped"})
    asyncop = run_of("asyncop", {"a": "passed", "b": "error", "c": "passed", "d": "passed"})
    comparison = anyio_suite.compare(trio, asyncop)
    assert comparison.baseline == ("tests/t.py::a[*]", "tests/t.py::b[*]")
    assert comparison.passed == ("tests/t.py::a[*]",)
    assert [r.nodeid for r in comparison.failing] == ["tests/t.py::b[asyncop]"]
    assert comparison.rate == 50.0


def test_a_test_with_no_asyncop_result_fails_as_not_run() -> None:
    trio = run_of("trio", {"a": "passed", "b": "passed"})
    asyncop = run_of("asyncop", {"a": "passed"})
    comparison = anyio_suite.compare(trio, asyncop)
    assert [(r.nodeid, r.outcome) for r in comparison.failing] == [
        ("tests/t.py::b[asyncop]", "not run")
    ]


def test_a_missing_backend_scores_zero_and_an_empty_baseline_does_not_divide() -> None:
    trio = run_of("trio", {"a": "passed"})
    missing = anyio_suite.compare(trio, BackendRun("asyncop", absent="cannot be imported"))
    assert missing.rate == 0.0
    assert [r.message for r in missing.failing] == ["cannot be imported"]
    assert anyio_suite.compare(BackendRun("trio"), BackendRun("asyncop")).rate == 0.0


def test_the_report_gives_counts_rate_and_the_failing_tests() -> None:
    trio = run_of("trio", {"a": "passed", "b": "passed", "c": "failed"})
    trio.wall_time = 12.34
    trio.excluded = {"asyncio-only": 4}
    asyncop = run_of("asyncop", {"a": "passed", "b": "failed", "c": "failed"})
    report = anyio_suite.format_report(trio, asyncop, anyio_suite.compare(trio, asyncop))
    assert "trio:    3 tests: 2 passed, 1 failed in 12.3 s" in report
    assert "4 asyncio-only" in report
    assert "asyncop passed 1 of the 2 tests that pass on trio: 50.0 %" in report
    assert "  tests/t.py::b[asyncop]  failed" in report
    assert "c[asyncop]" not in report


# --- the table of tests that cannot pass ---------------------------------------

DOC = """\
# anyio's test suite

## Tests that cannot pass on asyncop, and why

| Test | Why |
|------|-----|
| `tests/test_sockets.py::TestTCPListener::test_accept[ipv4-asyncop]` | one reason |
| `tests/test_x.py::test_y[*-asyncop]` `tests/test_x.py::test_z` | both for one reason |

## Later section

| `tests/not_in_the_table.py::t` | a row of another table |
"""


def test_the_table_gives_patterns_and_reasons_and_ends_at_the_next_heading() -> None:
    known = anyio_suite.read_known_failures(DOC)
    assert [k.pattern for k in known] == [
        "tests/test_sockets.py::TestTCPListener::test_accept[ipv4-asyncop]",
        "tests/test_x.py::test_y[*-asyncop]",
        "tests/test_x.py::test_z",
    ]
    assert known[2].reason == "both for one reason"


def test_a_pattern_reads_brackets_literally_and_star_as_anything() -> None:
    exact = KnownFailure("tests/t.py::a[ipv4-asyncop]", "r")
    assert exact.matches("tests/t.py::a[ipv4-asyncop]")
    assert not exact.matches("tests/t.py::a[4]")  # [ipv4-asyncop] is no character class
    star = KnownFailure("tests/t.py::a[*-asyncop]", "r")
    assert star.matches("tests/t.py::a[ipv6-sock-asyncop]")
    assert not star.matches("tests/t.py::a[ipv6-trio]")
    assert not star.matches("tests/t.py::ab[ipv6-asyncop]")


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ("# Nothing here\n", "has no heading"),
        (DOC.replace("| both for one reason |", "| |"), "has no reason"),
        (
            DOC.replace("`tests/test_x.py::test_z`", "tests/test_x.py::test_z").replace(
                "`tests/test_x.py::test_y[*-asyncop]`", "test_y"
            ),
            "names no test",
        ),
    ],
    ids=["no-heading", "no-reason", "no-test"],
)
def test_a_table_that_cannot_be_read_is_refused_with_the_fix(doc: str, says: str) -> None:
    with pytest.raises(SuiteError, match=says):
        anyio_suite.read_known_failures(doc, "docs/anyio-suite.md")


def test_a_failing_test_not_in_the_table_is_unlisted_and_a_passing_one_is_stale() -> None:
    known = anyio_suite.read_known_failures(DOC)
    trio = run_of("trio", {"test_y": "passed", "test_w": "passed", "test_accept": "passed"})
    asyncop = run_of("asyncop", {"test_y": "failed", "test_w": "failed", "test_accept": "passed"})
    known.append(KnownFailure("tests/t.py::test_accept[asyncop]", "was broken"))
    known.append(KnownFailure("tests/t.py::test_y[asyncop]", "is broken"))
    comparison = anyio_suite.compare(trio, asyncop)
    assert [r.nodeid for r in anyio_suite.unlisted(comparison.failing, known)] == [
        "tests/t.py::test_w[asyncop]"
    ]
    stale = anyio_suite.stale(comparison.failing, asyncop, known)
    assert [k.pattern for k in stale] == ["tests/t.py::test_accept[asyncop]"]


def test_the_check_fails_on_an_unlisted_test_and_names_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    trio = run_of("trio", {"a": "passed", "b": "passed", "c": "passed"})
    asyncop = run_of("asyncop", {"a": "failed", "b": "failed", "c": "passed"})
    comparison = anyio_suite.compare(trio, asyncop)
    args = anyio_suite.parse_args(["--expected", "DOC.md"])
    listed = [KnownFailure("tests/t.py::a[asyncop]", "r")]
    assert not anyio_suite.check_known(comparison, asyncop, listed, args)
    assert "1 tests fail on asyncop and are not listed in DOC.md:\n  tests/t.py::b[asyncop]" in (
        capsys.readouterr().out
    )
    assert not anyio_suite.check_known(comparison, asyncop, [], args)
    assert "none of the 2 tests failing on asyncop is in DOC.md" in capsys.readouterr().out
    listed.append(KnownFailure("tests/t.py::b[*]", "r"))
    assert anyio_suite.check_known(comparison, asyncop, listed, args)


def test_the_docs_page_has_a_table_the_tool_can_read() -> None:
    anyio_suite.read_known_failures((ROOT / "docs" / "anyio-suite.md").read_text())


# --- what anyio's tests need ------------------------------------------------------


def test_missing_requirements_reads_the_sdists_test_group(tmp_path: Path) -> None:
    # As anyio writes them: a basic multi-line string whose backslash joins lines.
    (tmp_path / "pyproject.toml").write_text(
        r'''
[dependency-groups]
test = [
    "pytest >= 1",
    "pytest >= 999",
    "surely-not-installed-here >= 1",
    "coverage[toml] >= 7",
    "winloop >= 0.2; platform_system == 'Windows' and platform_system != 'Linux'",
    """\
    also-not-installed >= 2; \
    python_version >= '3'
    """,
    {include-group = "other"},
]
'''
    )
    missing = anyio_suite.missing_requirements(tmp_path)
    assert missing[0].startswith("pytest>=999 (found ")
    assert missing[1:] == [
        "surely-not-installed-here>=1",
        'also-not-installed>=2; python_version >= "3"',
    ]


# --- the command line -----------------------------------------------------------


def test_arguments_after_a_double_dash_go_to_pytest() -> None:
    args = anyio_suite.parse_args(["test_taskgroups.py", "-k", "cancel", "--", "-x", "-k"])
    assert args.tests == ["test_taskgroups.py"]
    assert args.keyword == "cancel"
    assert args.pytest_args == ["-x", "-k"]
    assert anyio_suite.parse_args([]).pytest_args == []


def test_the_pytest_command_selects_one_backend_with_a_timeout(tmp_path: Path) -> None:
    options = anyio_suite.RunOptions(("test_taskgroups.py", "tests/streams"), "cancel", 7, 0)
    command = anyio_suite.pytest_command("asyncop", tmp_path / "r", tmp_path / "x", options)
    assert command[command.index("-p") + 1] == "anyio_suite_plugin"
    assert "--anyio-suite-backends=asyncop" in command
    assert "--timeout=7" in command
    assert command[-4:] == ["-k", "cancel", "tests/test_taskgroups.py", "tests/streams"]
    assert "nice" not in command


# --- the plugin, on a suite laid out as anyio's ---------------------------------

CONFTEST = """
import pytest

@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param
"""

SUITE = """
import pytest

def test_any(anyio_backend_name):
    pass

@pytest.mark.parametrize("target", ["trio", "asyncio"])
def test_cross(anyio_backend_name, target):
    pass

@pytest.mark.parametrize("anyio_backend", ["asyncio"])
def test_asyncio_only(anyio_backend):
    pass

@pytest.mark.parametrize("anyio_backend", ["trio"])
def test_trio_only(anyio_backend):
    pass

def test_no_backend():
    pass
"""


def plugin_run(
    pytester: pytest.Pytester,
    *args: str,
    ret: int = pytest.ExitCode.OK,
    subprocess: bool = False,
) -> list[dict[str, object]]:
    """Run the plugin on the small suite; in a subprocess to see what garbage it leaves.

    (In this process, pytester records every hook call with its arguments,
    and so keeps each failed test's exception and all it holds alive.)
    """
    pytest.importorskip("anyio", reason="the plugin runs anyio's tests")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    pytester.syspathinsert(ROOT / "tools")
    out = pytester.path / "results.jsonl"
    run = pytester.runpytest_subprocess if subprocess else pytester.runpytest
    outcome = run(
        "-p", "anyio_suite_plugin", f"--anyio-suite-results={out}", "-p", "no:cacheprovider", *args
    )
    assert outcome.ret == ret, outcome.stdout.str()
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_the_plugin_runs_each_shared_test_on_trio_and_asyncop_and_no_other(
    pytester: pytest.Pytester,
) -> None:
    records = plugin_run(pytester)
    collected = records[0]
    assert collected["shared"] == {"trio": 3, "asyncop": 3}
    assert collected["excluded"] == {"asyncio-only": 1, "trio-only": 1, "no-backend": 1}
    results = {r["nodeid"]: r for r in records if r["event"] == "result"}
    assert all(r["outcome"] == "passed" for r in results.values())
    by_key: dict[object, set[object]] = {}
    for r in results.values():
        by_key.setdefault(r["key"], set()).add(r["backend"])
    assert by_key == {
        "test_suite.py::test_any[*]": {"trio", "asyncop"},
        "test_suite.py::test_cross[trio-*]": {"trio", "asyncop"},
        "test_suite.py::test_cross[asyncio-*]": {"trio", "asyncop"},
    }
    assert records[-1] == {"event": "finished", "exitstatus": 0}


def test_the_plugin_runs_one_backend_and_leaves_out_excluded_tests(
    pytester: pytest.Pytester,
) -> None:
    exclude = pytester.path / "done.txt"
    exclude.write_text("test_suite.py::test_any[asyncop]\n")
    records = plugin_run(
        pytester,
        "--anyio-suite-backends=asyncop",
        f"--anyio-suite-exclude={exclude}",
        "-k",
        "cross",
    )
    ran = sorted(str(r["nodeid"]) for r in records if r["event"] == "result")
    assert ran == [
        "test_suite.py::test_cross[asyncio-asyncop]",
        "test_suite.py::test_cross[trio-asyncop]",
    ]
    assert records[0]["shared"] == {"trio": 2, "asyncop": 2}


def test_a_test_whose_own_fixture_picks_another_backend_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_override="""
import pytest

@pytest.fixture
def anyio_backend():
    return "asyncio"

def test_any(anyio_backend_name):
    pass
"""
    )
    records = plugin_run(pytester, "-k", "test_override", ret=pytest.ExitCode.TESTS_FAILED)
    results = {r["backend"]: r for r in records if r["event"] == "result"}
    assert {b: r["outcome"] for b, r in results.items()} == {"trio": "error", "asyncop": "error"}
    assert "to run on trio, but its anyio_backend fixture gave 'asyncio'" in str(
        results["trio"]["message"]
    )


def test_the_plugin_refuses_an_unknown_backend(pytester: pytest.Pytester) -> None:
    pytester.syspathinsert(ROOT / "tools")
    outcome = pytester.runpytest("-p", "anyio_suite_plugin", "--anyio-suite-backends=trio,curio")
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines(["*names curio; give one or more of trio, asyncop*"])


LEAKING_SUITE = """
import gc
import socket

import pytest

def unbound_socket_then_fail():
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.bind(("no-such-host.invalid", 0))  # fails: the socket is left open

@pytest.fixture
def leaking_fixture():
    unbound_socket_then_fail()

def test_a_leaks_in_its_call(anyio_backend_name):
    unbound_socket_then_fail()

def test_b_leaks_in_its_setup(anyio_backend_name, leaking_fixture):
    pass

def test_c_innocent(anyio_backend_name):
    gc.collect()  # the garbage of an earlier test must already be gone
"""


def test_garbage_a_failed_test_leaves_fails_that_test_and_not_a_later_one(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "tools"), str(ROOT)]))
    # anyio's configuration turns warnings into errors, among them the
    # ResourceWarning of a socket that is collected unclosed.
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(test_leaks=LEAKING_SUITE)
    records = plugin_run(
        pytester,
        "-p",
        "no:randomly",
        "-k",
        "test_leaks",
        ret=pytest.ExitCode.TESTS_FAILED,
        subprocess=True,
    )
    outcomes = {r["nodeid"]: r["outcome"] for r in records if r["event"] == "result"}
    assert outcomes == {
        f"test_leaks.py::test_{name}[{backend}]": outcome
        for backend in ("trio", "asyncop")
        for name, outcome in [
            ("a_leaks_in_its_call", "failed"),
            ("b_leaks_in_its_setup", "error"),
            ("c_innocent", "passed"),
        ]
    }
