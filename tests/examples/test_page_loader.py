"""The page loader: its HTTP pieces in-process, and the program end to end in a subprocess."""

from __future__ import annotations

import functools
import os
import re
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import asyncop
from examples.page_loader.app import parse_args
from examples.page_loader.client import HTTPError, fetch, http_get
from examples.page_loader.pages import Site
from examples.page_loader.recorder import OpRecorder
from examples.page_loader.server import running_server
from examples.page_loader.tls import make_contexts
from examples.page_loader.wire import parse_head

from .._output import Output

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED"}
_ROW = re.compile(r"^  +(?P<name>\S+) +(?P<state>[A-Z]+)\b")


@pytest.fixture
def server() -> Iterator[tuple[str, int]]:
    """A page server with short latencies and the header of every page failing."""
    with running_server(Site.build(latency=0.02, fail=["header"])) as address:
        yield address


# -- the HTTP pieces, in-process ----------------------------------------------


def test_get_returns_the_resource_body(runtime: asyncop.Runtime, server: tuple[str, int]) -> None:
    response = runtime.run(http_get, *server, "/page/3/sidebar")
    assert response.status == 200
    assert response.body.decode().startswith("Related: Page 2")
    assert response.headers["content-length"] == str(len(response.body))


def test_unknown_path_answers_404(runtime: asyncop.Runtime, server: tuple[str, int]) -> None:
    response = runtime.run(http_get, *server, "/page/1/footer")
    assert response.status == 404


def test_injected_failure_answers_503(runtime: asyncop.Runtime, server: tuple[str, int]) -> None:
    response = runtime.run(http_get, *server, "/page/1/header")
    assert response.status == 503


def test_fetch_raises_http_error_naming_status_and_path(
    runtime: asyncop.Runtime, server: tuple[str, int]
) -> None:
    with pytest.raises(HTTPError, match=r"^HTTP 503 Service Unavailable from /page/2/header$"):
        runtime.run(fetch, *server, "/page/2/header")


def test_server_answers_connections_concurrently(runtime: asyncop.Runtime) -> None:
    async def get_four(host: str, port: int) -> list[int]:
        me = asyncop.current_operation()
        assert me is not None
        ops = [me.spawn(http_get, host, port, f"/page/{n}/header") for n in range(1, 5)]
        return [(await op).status for op in ops]

    with running_server(Site.build(latency=0.3)) as (host, port):
        started = time.monotonic()
        statuses = runtime.run(get_four, host, port)
        elapsed = time.monotonic() - started
    assert statuses == [200] * 4
    assert elapsed < 0.9, f"4 requests of 0.3 s each took {elapsed:.2f} s: served one by one?"


def test_cancelled_request_leaves_the_server_serving(runtime: asyncop.Runtime) -> None:
    with running_server(Site.build(latency=0.5)) as (host, port):
        slow = runtime.spawn(http_get, host, port, "/page/1/body")
        time.sleep(0.1)
        slow.cancel("test")
        assert slow.wait(5).state is asyncop.OperationState.CANCELLED
        response = runtime.run(http_get, host, port, "/page/1/header")
    assert response.status == 200


def test_parse_head_splits_start_line_and_lowercases_header_names() -> None:
    start, headers = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Thing:  a b ")
    assert (start, headers) == ("HTTP/1.1 200 OK", {"content-length": "5", "x-thing": "a b"})


def test_recorder_keeps_children_that_ended(runtime: asyncop.Runtime) -> None:
    recorder = OpRecorder()

    async def leaf() -> None:
        await asyncop.sleep(0)

    async def parent() -> None:
        await recorder.spawn(leaf, name="leaf")

    root = recorder.spawn_root(runtime, parent, name="parent")
    root.wait(5)
    rows = [(row.depth, row.path, row.state.name) for row in recorder.rows()]
    assert rows == [(0, "parent", "COMPLETED"), (1, "parent/leaf", "COMPLETED")]


# -- the program, in a subprocess -----------------------------------------------


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "examples.page_loader", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def run_app(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the program to its end; returns the finished process and its wall time."""
    started = time.monotonic()
    done = subprocess.run(
        _command(*args), cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=30
    )
    return done, time.monotonic() - started


def final_trees(output: str) -> list[dict[str, str]]:
    """Every final tree printed, each as ``{node name: state}``."""
    trees: list[dict[str, str]] = []
    lines = iter(output.splitlines())
    for line in lines:
        if line.startswith("final tree:"):
            tree: dict[str, str] = {}
            for row in lines:
                match = _ROW.match(row)
                if match is None:
                    break
                tree[match["name"]] = match["state"]
            trees.append(tree)
    return trees


def assert_unfinished_nodes_cancelled(tree: dict[str, str]) -> None:
    assert set(tree.values()) <= {"COMPLETED", "CANCELLED"}, tree


def test_normal_load_completes_every_node_and_prints_the_page() -> None:
    done, _ = run_app()
    assert done.returncode == 0, done.stderr
    [tree] = final_trees(done.stdout)
    assert {"load_page(1)", "fetch_header", "fetch_body", "fetch_comments", "fetch_sidebar"} < set(
        tree
    )
    assert any(name.startswith("fetch_author(") for name in tree)
    assert set(tree.values()) == {"COMPLETED"}
    assert "== Page 1: on night trains ==" in done.stdout
    assert "threads left: none" in done.stdout


def test_cancel_after_cancels_every_unfinished_node_promptly() -> None:
    done, elapsed = run_app("--cancel-after", "0.2")
    assert done.returncode == 0, done.stderr
    [tree] = final_trees(done.stdout)
    assert tree["load_page(1)"] == "CANCELLED"
    assert_unfinished_nodes_cancelled(tree)
    match = re.search(r"the tree ended ([0-9.]+) s after the cancel", done.stdout)
    assert match is not None and float(match[1]) < 2.0, done.stdout
    assert elapsed < 5.0
    assert "threads left: none" in done.stdout


def test_switch_to_cancels_the_first_tree_and_loads_the_other_page() -> None:
    done, _ = run_app("--switch-to", "2")
    assert done.returncode == 0, done.stderr
    first, second = final_trees(done.stdout)
    assert first["load_page(1)"] == "CANCELLED"
    assert_unfinished_nodes_cancelled(first)
    assert second["load_page(2)"] == "COMPLETED"
    assert set(second.values()) == {"COMPLETED"}
    assert "== Page 2: on sourdough ==" in done.stdout
    assert "threads left: none" in done.stdout


def test_failing_resource_gives_one_readable_line_and_cancels_its_siblings() -> None:
    # A long latency: the body's 503 comes well before any sibling could finish.
    done, _ = run_app("--fail", "body", "--latency", "1.0")
    assert done.returncode == 1
    [tree] = final_trees(done.stdout)
    assert tree["load_page(1)"] == "FAILED"
    assert tree["fetch_body"] == "FAILED"
    siblings = {name: state for name, state in tree.items() if name.startswith("fetch_")}
    del siblings["fetch_body"]
    assert set(siblings.values()) == {"CANCELLED"}, siblings
    failures = [line.strip() for line in done.stdout.splitlines() if " failed: " in line]
    assert failures == ["fetch_body failed: HTTP 503 Service Unavailable from /page/1/body"]
    assert "Traceback" not in done.stdout + done.stderr
    assert "threads left: none" in done.stdout


def _start_app(*args: str) -> tuple[Output, str]:
    """Start the program; returns its output, and what it printed up to the start of the load."""
    proc = subprocess.Popen(
        _command(*args),
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out = Output(proc)
    return out, out.read_until("loading page 1", timeout=15)


def _finish_app(out: Output) -> tuple[str, str]:
    """Wait for the program to exit: what it printed after the lines read so far, and stderr."""
    try:
        _, _, errors = out.finish(10)
    finally:
        if out.proc.poll() is None:
            out.proc.kill()
            out.finish()
    return out.unread, errors


@pytest.mark.parametrize(
    ("signum", "status", "by"),
    [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")],
    ids=["SIGINT", "SIGTERM"],
)
def test_ctrl_c_or_sigterm_lets_the_fetches_in_flight_finish_for_a_second(
    signum: int, status: int, by: str
) -> None:
    # The header takes 1 s, the body 3.2 s: asked at 0.3 s, the header
    # finishes within the grace and the body is cancelled when it ends.
    out, head = _start_app("--latency", "1.0")
    try:
        time.sleep(0.3)
        out.proc.send_signal(signum)
        stopping = out.read_until("stopping:", timeout=10)
    finally:
        rest, errors = _finish_app(out)
    assert out.proc.returncode == status, errors
    assert f"stopping: the fetches in flight have 1 s to finish ({by} again stops now)" in stopping
    output = head + stopping + rest
    after_request = output.split("stopping:")[1]
    assert "fetch_header COMPLETED" in after_request  # it finished after the request
    [tree] = final_trees(output)
    assert tree["fetch_header"] == "COMPLETED"
    assert tree["fetch_body"] == "CANCELLED"
    assert tree["load_page(1)"] == "CANCELLED"
    assert_unfinished_nodes_cancelled(tree)
    match = re.search(r"the tree ended ([0-9.]+) s after the request", rest)
    assert match is not None and 0.9 <= float(match[1]) < 3.0, rest
    assert f"asked to stop by {by}, with 1 s for the fetches in flight" in rest
    assert "threads left: none" in rest
    assert "Traceback" not in errors


@pytest.mark.parametrize(
    ("first", "status"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
    ids=["SIGINT-twice", "SIGTERM-then-SIGINT"],
)
def test_a_second_ctrl_c_stops_at_once(first: int, status: int) -> None:
    out, head = _start_app("--latency", "1.0")
    try:
        time.sleep(0.3)
        out.proc.send_signal(first)
        stopping = out.read_until("stopping:", timeout=10)
        out.proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
    finally:
        rest, errors = _finish_app(out)
    exited_after = time.monotonic() - sent
    assert out.proc.returncode == status, errors
    [tree] = final_trees(head + stopping + rest)
    assert tree["load_page(1)"] == "CANCELLED"
    assert tree["fetch_body"] == "CANCELLED"
    assert_unfinished_nodes_cancelled(tree)
    assert "cancelled by a second Ctrl-C" in rest
    match = re.search(r"the tree ended ([0-9.]+) s after the cancel", rest)
    assert match is not None and float(match[1]) < 0.5, rest  # not the 1 s grace
    assert exited_after < 2.0
    assert "threads left: none" in rest
    assert "Traceback" not in errors


# -- over HTTPS -----------------------------------------------------------------


def test_http_get_over_tls_with_a_certificate_made_at_start(runtime: asyncop.Runtime) -> None:
    pytest.importorskip("trustme")
    server_context, client_context = make_contexts()
    site = Site.build(latency=0.02, fail=["header"])
    with running_server(site, ssl_context=server_context) as (host, port):
        response = runtime.run(
            functools.partial(http_get, host, port, "/page/3/sidebar", ssl_context=client_context)
        )
        assert response.status == 200 and b"Page" in response.body
        with pytest.raises(ssl.SSLCertVerificationError, match="not trusted"):
            runtime.run(
                functools.partial(
                    http_get, host, port, "/", ssl_context=ssl.create_default_context()
                )
            )


def test_tls_load_completes_every_node_over_https() -> None:
    pytest.importorskip("trustme")
    done, _ = run_app("--tls", "--latency", "0.05")
    assert done.returncode == 0, done.stderr
    assert "from https://127.0.0.1:" in done.stdout
    [tree] = final_trees(done.stdout)
    assert set(tree.values()) == {"COMPLETED"}
    assert "threads left: none" in done.stdout


def test_tls_without_trustme_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['trustme'] = None\n"
        "from examples.page_loader.app import main\n"
        "sys.exit(main(['--tls']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "pip install trustme" in done.stderr


# -- the live console -------------------------------------------------------------


def test_console_serves_the_tree_while_the_page_loads(tmp_path: Path) -> None:
    path = str(tmp_path / "pl.sock")
    proc = subprocess.Popen(
        _command("--console", path, "--latency", "1.0"),
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out = Output(proc)
    try:
        out.read_until("loading page 1", timeout=15)
        deadline = time.monotonic() + 10
        while True:
            tree = subprocess.run(
                [sys.executable, "-m", "asyncop", "tree", path],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=20,
            )
            if "fetch_body" in tree.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        _, _, errors = out.finish(20)
        rest = out.unread
    finally:
        if proc.poll() is None:
            proc.kill()
            out.finish()
    assert tree.returncode == 0, tree.stderr
    lines = tree.stdout.splitlines()
    assert lines[0].startswith("runtime page-loader (pid ")
    root = next(line for line in lines if "load_page(1) [RUNNING] task" in line)
    body = next(line for line in lines if "fetch_body [RUNNING] task" in line)
    assert body.index("fetch_body") > root.index("load_page(1)")  # under it
    assert proc.returncode == 0, errors
    assert "threads left: none" in rest
    assert not os.path.lexists(path)  # removed at shutdown


def test_a_console_path_that_is_taken_is_a_usage_error(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("")
    done, _ = run_app("--console", str(taken))
    assert done.returncode == 2
    assert done.stderr.startswith("--console: cannot make the console socket ")
    assert "is not a socket" in done.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--failure-rate", "2"], "--failure-rate is a chance, from 0 to 1"),
        (["--failure-rate", "-0.5"], "--failure-rate is a chance, from 0 to 1"),
        (["--latency", "nan"], "--latency needs 0 or more seconds"),
        (["--latency", "-1"], "--latency needs 0 or more seconds"),
        (["--cancel-after", "nan"], "--cancel-after needs 0 or more seconds"),
        (["--cancel-after", "-1"], "--cancel-after needs 0 or more seconds"),
    ],
)
def test_an_option_out_of_its_range_is_a_usage_error(
    args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(args)
    assert info.value.code == 2
    assert said in capsys.readouterr().err
