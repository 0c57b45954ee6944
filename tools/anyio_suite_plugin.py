"""A pytest plugin that runs anyio's own test suite on the ``"asyncop"`` backend.

anyio's ``tests/conftest.py`` parametrizes its ``anyio_backend`` fixture over
the backends anyio knows (asyncio and its loop variants, trio). This plugin
leaves those files alone and decides the parametrization itself: every test
that takes the backend from that fixture, and does not name its own backends
with ``@pytest.mark.parametrize("anyio_backend", ...)``, is parametrized over
``trio`` and ``asyncop`` instead, with those ids::

    tests/test_taskgroups.py::test_start_soon_while_running[trio]
    tests/test_taskgroups.py::test_start_soon_while_running[asyncop]

It does so from ``pytest_generate_tests``, by adding that parametrize mark to
the test's definition before pytest's own hooks read the marks: pytest then
skips the fixture's own params, as for any test that parametrizes a fixture
directly. The mark adds ``trio`` and ``asyncop`` whatever else anyio lists,
so the plugin works the same whether or not anyio has been told about
``"asyncop"``.

Run one test of anyio's suite on asyncop from the unpacked anyio sdist, with
this folder on ``PYTHONPATH``::

    cd ~/.cache/asyncop-anyio-suite/anyio-4.16.0
    PYTHONPATH=/path/to/asyncop/tools:/path/to/asyncop python -m pytest \\
        -p anyio_suite_plugin --anyio-suite-backends=asyncop \\
        "tests/test_taskgroups.py::test_cancel_scope_in_another_task[asyncop]"

Which tests run
---------------
``--anyio-suite-backends`` (default ``trio,asyncop``) picks the backends.
Every test is collected on both ``trio`` and ``asyncop``, and the ones of the
other backends are deselected, so a run of one backend names its tests as a
run of both would. Only the tests this plugin parametrized, the **shared**
tests, run; the others are deselected and counted by kind:

- ``asyncio-only``, ``trio-only``: tests that name their own backends
  (``parametrize("anyio_backend", asyncio_params)``);
- ``no-backend``: tests that take no backend at all (plain functions, tests
  of anyio's pytest plugin through ``pytester``).

A shared test whose ``anyio_backend`` fixture hands it another backend than
the one in its name (a fixture nearer the test that ignores
``request.param``) errors in setup rather than count for the wrong backend.

A failed test's garbage
-----------------------
A test that fails can leave objects that warn when they are collected, such
as a socket it opened before the line that failed: the frames of the
failure's traceback hold it, and pytest keeps them in a reference cycle.
Collected later, its ``ResourceWarning``, an error in anyio's suite, would
fail whichever test runs then, on either backend. The plugin collects the
garbage of every test that failed (in setup or call) in that test's
teardown, and reports what warns then, as pytest reports an unraisable
exception, in that test's teardown.

The results file
----------------
``--anyio-suite-results=PATH`` appends one JSON object per line, flushed at
once, so that a run that dies or hangs leaves what it had done:

- ``{"event": "collected", "shared": N, "excluded": {...}}`` once;
- ``{"event": "start", "nodeid", "key", "backend"}`` when a test begins;
- ``{"event": "result", "nodeid", "key", "backend", "outcome", "duration",
  "message"}`` when it ends; ``outcome`` is one of ``passed``, ``failed``,
  ``error`` (setup or teardown failed), ``skipped``, ``xfailed``,
  ``xpassed``;
- ``{"event": "finished", "exitstatus": N}`` at the end of the session.

``key`` names a test without its backend, its node id with the backend's id
as ``*`` (``tests/test_sockets.py::TestTCPListener::test_accept[ipv4-*]``):
the same on ``trio`` and on ``asyncop``, so that the two runs pair up.
``--anyio-suite-exclude=PATH`` (node ids, one a line) deselects the tests an
earlier, interrupted run already reported.
"""

from __future__ import annotations

import gc
import json
import sys
import traceback
import warnings
from collections import Counter
from collections.abc import Generator, Iterable
from typing import IO, Any

import pytest

#: The backends this plugin parametrizes the shared tests over, in this order.
BACKENDS = ("trio", "asyncop")

_PHASE_ORDER = ("setup", "call", "teardown")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("anyio-suite", "anyio's test suite on asyncop")
    group.addoption(
        "--anyio-suite-backends",
        default=",".join(BACKENDS),
        help="comma-separated backends to run the shared tests on (default: trio,asyncop)",
    )
    group.addoption(
        "--anyio-suite-results",
        default=None,
        metavar="PATH",
        help="append one JSON line per collected summary, test start and test result",
    )
    group.addoption(
        "--anyio-suite-exclude",
        default=None,
        metavar="PATH",
        help="a file of node ids, one a line, not to run",
    )


def _selected_backends(config: pytest.Config) -> tuple[str, ...]:
    names = tuple(n.strip() for n in config.getoption("anyio_suite_backends").split(",") if n)
    unknown = sorted(set(names) - set(BACKENDS))
    if unknown or not names:
        raise pytest.UsageError(
            f"--anyio-suite-backends={','.join(names)} names {', '.join(unknown) or 'nothing'}; "
            f"give one or more of {', '.join(BACKENDS)}, separated by commas"
        )
    return names


def pytest_configure(config: pytest.Config) -> None:
    _selected_backends(config)  # a typo fails before collection, not after it
    config.addinivalue_line(
        "markers", "anyio_suite_shared: a test of anyio's suite run on both trio and asyncop"
    )
    path = config.getoption("anyio_suite_results")
    if path is not None:
        recorder = _Recorder(open(path, "a", encoding="utf-8"))  # noqa: SIM115
        config.stash[_RECORDER] = recorder
        config.pluginmanager.register(recorder, "anyio-suite-recorder")


def pytest_unconfigure(config: pytest.Config) -> None:
    recorder = config.stash.get(_RECORDER, None)
    if recorder is not None:
        recorder.close()


def _backend_name(value: object) -> str | None:
    """The backend name of an ``anyio_backend`` value: a name or a (name, options) pair."""
    if isinstance(value, str):
        return value
    if isinstance(value, tuple) and value and isinstance(value[0], str):
        return value[0]
    return None


def _names_own_backends(metafunc: pytest.Metafunc) -> bool:
    for mark in metafunc.definition.iter_markers("parametrize"):
        argnames = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(argnames, str):
            argnames = [n.strip() for n in argnames.split(",")]
        if "anyio_backend" in argnames:
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Before pytest's own hooks: the mark added here is read by the hook that
    # applies parametrize marks, and makes the fixture manager's hook leave
    # anyio_backend's own params alone.
    if "anyio_backend" not in metafunc.fixturenames or _names_own_backends(metafunc):
        return
    metafunc.definition.add_marker(
        pytest.mark.parametrize(
            "anyio_backend",
            [pytest.param(n, id=n, marks=pytest.mark.anyio_suite_shared) for n in BACKENDS],
            indirect=True,
        )
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    # The mark names the backend, but a fixture that overrides anyio's and
    # ignores request.param would run the test on another one, under the
    # wrong name; such a test errors instead of counting for either.
    yield
    if item.get_closest_marker("anyio_suite_shared") is None:
        return
    wanted = item.callspec.params["anyio_backend"]  # type: ignore[attr-defined]
    got = getattr(item, "funcargs", {}).get("anyio_backend", wanted)
    if _backend_name(got) != wanted:
        raise RuntimeError(
            f"{item.nodeid} was to run on {wanted}, but its anyio_backend fixture gave {got!r}: "
            "a fixture nearer the test than anyio's conftest ignores request.param; make it "
            "return request.param, or parametrize anyio_backend on the test"
        )


_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and report.when in ("setup", "call"):
        item.stash[_FAILED] = True
    return report


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    # A test that fails can leave garbage that warns when it is collected: a
    # socket opened before the line that failed, held by the frames of the
    # failure's traceback, which pytest keeps in sys.last_value until the
    # next test's call and in a reference cycle after that. Collected by
    # some later collection, its ResourceWarning (an error in anyio's suite)
    # would fail whichever test runs then, on either backend. So the garbage
    # of a failed test is collected here, after pytest's own teardown has
    # dropped a failed setup's exception, and what it warns is the failed
    # test's: this hook runs after pytest's check for unraisable exceptions,
    # so it makes its own.
    __tracebackhide__ = True
    if item.stash.get(_FAILED, False):
        for name in ("last_type", "last_value", "last_traceback", "last_exc"):
            if hasattr(sys, name):
                delattr(sys, name)
        _raise_unraisable(_collect_garbage())


def _collect_garbage() -> list[str]:
    """Collect garbage, and say what was raised and ignored in finalizers meanwhile."""
    messages: list[str] = []

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        # Described now: the object is being finalized.
        summary = f"{unraisable.err_msg or 'Exception ignored in'}: {unraisable.object!r}"
        trace = traceback.format_exception(
            unraisable.exc_type, unraisable.exc_value, unraisable.exc_traceback
        )
        messages.append(summary + "\n\n" + "".join(trace))

    previous, sys.unraisablehook = sys.unraisablehook, hook
    try:
        gc.collect()
    finally:
        sys.unraisablehook = previous
    return messages


def _raise_unraisable(messages: list[str]) -> None:
    """Warn each message as pytest warns an unraisable exception; raise the errors it makes."""
    __tracebackhide__ = True
    errors: list[Exception] = []
    for message in messages:
        try:
            warnings.warn(pytest.PytestUnraisableExceptionWarning(message), stacklevel=1)
        except pytest.PytestUnraisableExceptionWarning as error:
            errors.append(error)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ExceptionGroup("multiple unraisable exception warnings", errors)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, None, None]:
    # Both halves of a shared test are paired before -k and -m deselect
    # anything, and the other backends' tests are deselected after them, so
    # that the counts are of the tests the user selected.
    keys = pairing_keys(items)
    yield
    backends = _selected_backends(config)
    excluded_ids: set[str] = set()
    if (path := config.getoption("anyio_suite_exclude")) is not None:
        with open(path, encoding="utf-8") as f:
            excluded_ids = {line.strip() for line in f if line.strip()}
    keep: list[pytest.Item] = []
    kinds: Counter[str] = Counter()
    shared: Counter[str] = Counter()
    for item in items:
        kind, backend = _classify(item)
        if kind != "shared":
            kinds[kind] += 1
            continue
        shared[str(backend)] += 1
        if backend in backends and item.nodeid not in excluded_ids:
            keep.append(item)
    if len(keep) < len(items):
        kept = set(keep)
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = keep
    recorder = config.stash.get(_RECORDER, None)
    if recorder is not None:
        recorder.keys = {item.nodeid: (keys[item.nodeid], _classify(item)[1]) for item in keep}
        recorder.write({"event": "collected", "shared": dict(shared), "excluded": dict(kinds)})


def _classify(item: pytest.Item) -> tuple[str, str | None]:
    """Say whether ``item`` is shared, or which kind of excluded test it is, and its backend."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "anyio_backend" not in callspec.params:
        return "no-backend", None
    backend = _backend_name(callspec.params["anyio_backend"])
    if item.get_closest_marker("anyio_suite_shared") is not None:
        return "shared", backend
    if backend == "trio":
        return "trio-only", backend
    if backend == "asyncio":
        return "asyncio-only", backend
    return f"{backend}-only", backend


def pairing_keys(items: Iterable[pytest.Item]) -> dict[str, str]:
    """Name each shared test without its backend: its node id with the backend's id as ``*``.

    ``test_accept[ipv6-trio]`` and ``test_accept[ipv6-asyncop]`` are one test,
    ``test_accept[ipv6-*]``. The two halves are found as the items of one
    function whose other parameters are the same objects, so that an id that
    happens to read ``trio`` (``test_portal[trio-trio]``) is not mistaken for
    the backend's; the backend's ids share no first or last letter, so the
    part where the two node ids differ is exactly the backend's id.
    """
    groups: dict[tuple[object, ...], dict[str | None, list[pytest.Item]]] = {}
    for item in items:
        kind, backend = _classify(item)
        if kind == "shared":
            params = item.callspec.params  # type: ignore[attr-defined]
            others = sorted((n, id(v)) for n, v in params.items() if n != "anyio_backend")
            group = groups.setdefault((item.nodeid.partition("[")[0], *others), {})
            group.setdefault(backend, []).append(item)
    keys: dict[str, str] = {}
    for group in groups.values():
        halves = [group.get(name, []) for name in BACKENDS]
        for pair in zip(*halves, strict=False):
            key = _masked([item.nodeid for item in pair])
            keys.update((item.nodeid, key) for item in pair)
        for half in halves:  # a test left without its other half keeps its own id
            keys.update((item.nodeid, item.nodeid) for item in half if item.nodeid not in keys)
    return keys


def _masked(nodeids: list[str]) -> str:
    """The node ids, the same but for one run of characters, with that run as ``*``."""
    first, last = nodeids[0], nodeids[-1]
    start = 0
    while start < min(len(first), len(last)) and first[start] == last[start]:
        start += 1
    end = 0
    while end < min(len(first), len(last)) - start and first[-1 - end] == last[-1 - end]:
        end += 1
    return f"{first[:start]}*{first[len(first) - end :]}"


class _Recorder:
    """Writes the results file, one flushed JSON line per event; a plugin of its own."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        #: node id -> (pairing key, backend), for the tests that run.
        self.keys: dict[str, tuple[str, str | None]] = {}
        self._reports: dict[str, dict[str, pytest.TestReport]] = {}

    def write(self, record: dict[str, Any]) -> None:
        self._stream.write(json.dumps(record) + "\n")
        self._stream.flush()

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self._reports[nodeid] = {}
        key, backend = self.keys.get(nodeid, (nodeid, None))
        self.write({"event": "start", "nodeid": nodeid, "key": key, "backend": backend})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._reports.setdefault(report.nodeid, {})[report.when] = report

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        reports = self._reports.pop(nodeid, {})
        key, backend = self.keys.get(nodeid, (nodeid, None))
        outcome, message = summarize(reports[w] for w in _PHASE_ORDER if w in reports)
        self.write(
            {
                "event": "result",
                "nodeid": nodeid,
                "key": key,
                "backend": backend,
                "outcome": outcome,
                "duration": round(sum(r.duration for r in reports.values()), 3),
                "message": message,
            }
        )

    def pytest_sessionfinish(self, exitstatus: int) -> None:
        self.write({"event": "finished", "exitstatus": int(exitstatus)})

    def close(self) -> None:
        self._stream.close()


_RECORDER = pytest.StashKey[_Recorder]()


def summarize(reports: Iterable[pytest.TestReport]) -> tuple[str, str]:
    """The outcome of one test from the reports of its phases, and a one-line reason.

    A failed setup or teardown is an ``error``, a failed call ``failed``; a
    skip (or an expected failure) in any phase decides the outcome unless a
    phase failed.
    """
    outcome, message = "passed", ""
    for report in reports:
        if report.failed:
            return ("failed" if report.when == "call" else "error"), _first_line(report)
        if report.skipped and outcome == "passed":
            if hasattr(report, "wasxfail"):
                outcome, message = "xfailed", str(report.wasxfail)
            else:
                outcome, message = "skipped", _first_line(report)
        elif report.when == "call" and hasattr(report, "wasxfail"):
            outcome, message = "xpassed", str(report.wasxfail)
    return outcome, message


def _first_line(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, line, reason)
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(longrepr)
    lines = text.strip().splitlines()
    return lines[0][:300] if lines else ""
