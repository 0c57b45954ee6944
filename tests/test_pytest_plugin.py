"""The pytest plugin, tried on small test files with pytest's ``pytester``.

Each file runs in a subprocess (``runpytest_subprocess``) that imports this
checkout's asyncop and loads the plugin with ``-p asyncop.pytest_plugin``, as
its entry point does for an installed asyncop.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(120)


def run(pytester: pytest.Pytester, code: str, *args: str, ini: str = "") -> pytest.RunResult:
    pytester.makepyfile(test_user=code)
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    env_path = os.environ.get("PYTHONPATH", "")
    pytester._monkeypatch.setenv(
        "PYTHONPATH", str(ROOT) + (os.pathsep + env_path if env_path else "")
    )
    return pytester.runpytest_subprocess("-p", "asyncop.pytest_plugin", "-q", *args)


def test_marked_async_tests_run_as_the_root_of_a_fresh_runtime(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import pytest
import asyncop

seen = []

@pytest.mark.asyncop
async def test_root(asyncop_runtime):
    me = asyncop.current_operation(require=True)
    assert me.parent is None
    assert me.name == "test_root"
    assert asyncop.current_runtime() is asyncop_runtime
    seen.append(asyncop_runtime)
    await asyncop.sleep(0)

@pytest.mark.asyncop
async def test_fresh(asyncop_runtime):
    assert asyncop_runtime is not seen[0]

pytestmark = pytest.mark.asyncop

async def test_module_mark():
    await asyncop.checkpoint()
""",
    )
    result.assert_outcomes(passed=3)


def test_unmarked_async_tests_are_left_alone_in_strict_mode(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import asyncop

async def test_unmarked():
    await asyncop.sleep(0)

def test_sync():
    pass
""",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 1  # only the sync test
    # pytest itself refuses (or skips) the unmarked coroutine.
    result.stdout.fnmatch_lines(["*async def functions are not natively supported*"])


def test_auto_mode_runs_every_async_test(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import asyncop

async def test_unmarked():
    assert asyncop.current_operation() is not None
    await asyncop.sleep(0)
""",
        ini="asyncop_mode = auto",
    )
    result.assert_outcomes(passed=1)


def test_async_fixtures_run_in_the_tests_runtime_and_tree(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import pytest
import asyncop

log = []

@pytest.fixture
async def plain():
    return asyncop.current_operation(require=True)

@pytest.fixture
async def server(plain):
    me = asyncop.current_operation(require=True)
    async with asyncop.scope() as s:            # open across the yield
        stop = asyncop.Event()

        async def serve():
            await stop.wait_async()
            log.append("served until teardown")

        s.spawn(serve)
        yield me
        log.append("teardown in the same task")
        stop.set()
    log.append("scope closed")

@pytest.mark.asyncop
async def test_tree(plain, server, asyncop_runtime):
    root = asyncop.current_operation(require=True)
    assert server.parent is root                 # a child of the test's root
    assert server in root.children()
    assert server.runtime is asyncop_runtime
    assert plain.runtime is asyncop_runtime
    assert server.name == "fixture server"

def test_teardown_order():
    assert log == ["teardown in the same task", "served until teardown", "scope closed"]
""",
    )
    result.assert_outcomes(passed=2)


def test_autojump_clock_makes_the_runtime_virtual(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import time
import pytest
import asyncop

@pytest.mark.asyncop
async def test_hour(autojump_clock, asyncop_runtime):
    start = time.monotonic()
    await asyncop.sleep(3600)
    assert asyncop.current_time() == 3600
    assert autojump_clock.now() == 3600
    assert time.monotonic() - start < 5
""",
    )
    result.assert_outcomes(passed=1)


def test_failures_of_the_test_and_its_children_fail_it(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import pytest
import asyncop

@pytest.mark.asyncop
async def test_raises():
    raise ValueError("from the test")

@pytest.mark.asyncop
async def test_child_fails():
    async def child():
        await asyncop.sleep(0)
        raise KeyError("from a child")
    asyncop.current_operation(require=True).spawn(child)
""",
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*ValueError: from the test*", "*KeyError*from a child*"])


def test_a_failure_report_does_not_show_the_plugins_own_code(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import pytest
import asyncop

@pytest.mark.asyncop
async def test_child_fails():
    async def child():
        await asyncop.sleep(0)
        raise KeyError("from a child")
    asyncop.current_operation(require=True).spawn(child)

@pytest.mark.asyncop
async def test_stuck():
    await asyncop.Event().wait_async()
""",
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*KeyError*from a child*", "*DeadlockError*"])
    result.stdout.no_fnmatch_line("*def pytest_pyfunc_call*")
    result.stdout.no_fnmatch_line("*pytest_plugin.py*")


def test_fixture_errors_are_reported_once(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import pytest
import asyncop

@pytest.fixture
async def broken_setup():
    raise OSError("setup broke")

@pytest.fixture
async def broken_teardown():
    yield 1
    raise OSError("teardown broke")

@pytest.mark.asyncop
async def test_setup(broken_setup):
    pass

@pytest.mark.asyncop
async def test_teardown(broken_teardown):
    pass
""",
    )
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*OSError: setup broke*", "*OSError: teardown broke*"])
    assert result.stdout.str().count("OSError: teardown broke") == 2  # once, and the summary


def test_a_yield_fixture_is_cancelled_when_a_child_fails(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import pytest
import asyncop

log = []

@pytest.fixture
async def resource():
    try:
        yield "r"
    finally:
        log.append("cleaned up")

@pytest.mark.asyncop
async def test_child_fails(resource):
    async def child():
        raise KeyError("child")
    asyncop.current_operation(require=True).spawn(child)
    await asyncop.sleep(1)

def test_cleanup_ran():
    assert log == ["cleaned up"]
""",
    )
    result.assert_outcomes(passed=1, failed=1)


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (
            "async def sleeper():\n"
            "        await asyncop.sleep(1000)\n"
            "    asyncop_runtime.spawn(sleeper, name='forgotten_sleeper')",
            "*operations left running*\n*forgotten_sleeper ?RUNNING?*",
        ),
        (
            "import threading\n"
            "    threading.Thread(target=time.sleep, args=(5,), name='stray-thread').start()",
            "*threads left running: stray-thread*",
        ),
        (
            "def fails():\n"
            "        raise ValueError('nobody looked')\n"
            "    asyncop_runtime.spawn(fails, name='ignored_failure')\n"
            "    await asyncop.sleep(0.2)",
            "*unobserved failure*ignored_failure*",
        ),
    ],
    ids=["operation", "thread", "unobserved-failure"],
)
def test_a_test_that_leaves_something_behind_fails_naming_it(
    pytester: pytest.Pytester, body: str, named: str
) -> None:
    result = run(
        pytester,
        f"""
import time
import pytest
import asyncop

@pytest.mark.asyncop
async def test_leaky(asyncop_runtime):
    {body}
""",
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_leaky left things behind*", *named.split("\n")])


def test_methods_and_sync_tests_using_the_runtime(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import pytest
import asyncop

class TestGroup:
    @pytest.fixture
    async def value(self):
        return 42

    @pytest.mark.asyncop
    async def test_method(self, value):
        assert value == 42

async def nap():
    await asyncop.sleep(0)
    return "rested"

def test_sync_gets_a_runtime(asyncop_runtime):
    assert asyncop_runtime.run(nap) == "rested"
""",
    )
    result.assert_outcomes(passed=2)


def test_a_wider_scoped_async_fixture_is_refused(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import pytest
import asyncop

@pytest.fixture(scope="module")
async def shared():
    return 1

@pytest.mark.asyncop
async def test_uses(shared):
    pass
""",
    )
    result.stdout.fnmatch_lines(["*async fixture 'shared' has scope 'module'*function scope*"])
    assert result.ret != 0


def test_the_testing_guide_example_passes(pytester: pytest.Pytester) -> None:
    text = (ROOT / "docs" / "howto" / "testing.md").read_text(encoding="utf-8")
    section = text[text.index("## The pytest plugin") :]
    start = section.index("```py\n") + len("```py\n")
    code = section[start : section.index("```", start)]
    result = run(pytester, code)
    result.assert_outcomes(passed=1)


def test_the_finding_a_hang_example_fails_at_once_with_the_report(
    pytester: pytest.Pytester,
) -> None:
    text = (ROOT / "docs" / "howto" / "finding-a-hang.md").read_text(encoding="utf-8")
    section = text[text.index("### In tests") :]
    start = section.index("```py\n") + len("```py\n")
    code = section[start : section.index("```", start)]
    result = run(pytester, code)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E *asyncop.DeadlockError: runtime 'asyncop-test-test_every_order_is_handled' is "
            "stuck on a virtual clock with no timer to jump to: *",
            "*task 'test_every_order_is_handled' at *test_user.py:14 waits on the children "
            "of scope 'scope'",
            "*task 'test_every_order_is_handled.<locals>.consume' at *test_user.py:11 waits "
            "on receive from channel 'orders' (no sender end open, and the channel is not "
            "closed)",
        ]
    )
    # The test raises the report: it is not logged besides.
    result.stdout.no_fnmatch_line("*deadlock='raise' cancels*")


def test_the_cost_of_a_test_does_not_grow_with_what_the_session_imported(
    pytester: pytest.Pytester,
) -> None:
    # A module that keeps a million containers alive, as a large application
    # or test suite does. The plugin collects garbage around each test (for
    # its leak checks); when each collection scanned them all, the 25 small
    # tests took over 10 s here instead of a tenth of a second.
    result = run(
        pytester,
        """
import time
import pytest
import asyncop

BIG = [[None] for _ in range(1_000_000)]
STARTED = []

@pytest.mark.parametrize("i", range(25))
@pytest.mark.asyncop
async def test_small(i):
    STARTED.append(time.monotonic())
    await asyncop.sleep(0)

def test_span():
    span = time.monotonic() - STARTED[0]
    print(f"25 tests took {span:.2f} s")
    assert span < 5, span  # a few milliseconds per test
""",
        "-s",
    )
    result.assert_outcomes(passed=26)
