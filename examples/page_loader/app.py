"""The command line: start the server, load a page, watch the tree, cancel it on request.

The main thread does the watching. It spawns ``load_page(<id>)`` on the
loader's runtime, then loops: draw the tree, wait on the root for one tick
(``root.wait(TICK)``), and, when asked to, cancel. Every kind of cancel is
the same single call, ``root.cancel(reason)``, which cancels the whole tree:

- ``--cancel-after S``: the loop cancels once S seconds have passed;
- ``--switch-to PAGE``: the same (after ``--cancel-after`` seconds, default
  0.3), then it loads PAGE;
- Ctrl-C stops gracefully: ``root.cancel(reason, grace=STOP_GRACE)`` asks
  the tree to stop, and the fetches in flight have one second to finish
  (``fetch_comments`` starts no author fetch once asked); what still runs
  then is cancelled. A second Ctrl-C cancels at once, and a third raises
  ``KeyboardInterrupt`` as usual, as an escape hatch. The SIGINT handler
  only counts the presses, and the loop acts on the count within one tick:
  a handler that raised ``KeyboardInterrupt`` could land anywhere in the
  main thread, even halfway through a redraw.
- SIGTERM (``kill PID``): a task reads it from an ``open_signal_receiver``
  and counts it like a Ctrl-C, so the tree stops the same way.

``--tls`` serves and loads the pages over HTTPS, with a certificate made at
start (see ``tls``). ``--console PATH`` serves the runtime's live tree on a
Unix socket, for ``python -m asyncop ps|tree|top PATH`` in another terminal.

Exit status: 0 when the page loaded, or when the load was cancelled by
``--cancel-after``; 1 when the load failed; 2 when ``--tls`` cannot be
served (``trustme`` is missing) or the ``--console`` socket cannot be made;
130 after Ctrl-C; 143 after SIGTERM.
"""

from __future__ import annotations

import argparse
import math
import signal
import ssl
import sys
import threading
import time
from dataclasses import dataclass
from types import FrameType, TracebackType

import asyncop
from asyncop.signals import SignalReceiver, open_signal_receiver

from .loader import PageLoader
from .pages import KINDS, Site
from .recorder import OpRecorder
from .render import (
    ChangeLog,
    LiveTree,
    View,
    failed_nodes,
    format_failure,
    format_page,
    format_traceback,
    format_tree,
)
from .server import running_server
from .tls import TLSUnavailable, make_contexts

__all__ = ["main"]

TICK = 0.05
SWITCH_DELAY = 0.3
# Seconds the fetches in flight get to finish after a first Ctrl-C or SIGTERM.
STOP_GRACE = 1.0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class CtrlC:
    """While active, counts SIGINT (and SIGTERM) for the watch loop to read."""

    def __init__(self) -> None:
        # "Ctrl-C" or "SIGTERM", in the order they came; the first two count.
        self.signals: list[str] = []
        self._previous: object = None

    @property
    def pressed(self) -> bool:
        """Whether the user asked to stop."""
        return bool(self.signals)

    @property
    def by(self) -> str:
        """What asked first: ``Ctrl-C`` or ``SIGTERM``."""
        return self.signals[0] if self.signals else "Ctrl-C"

    @property
    def now(self) -> str | None:
        """What asked a second time, to stop at once; None before that."""
        return self.signals[1] if len(self.signals) > 1 else None

    def add(self, name: str) -> None:
        """Count one more request to stop."""
        if len(self.signals) < 2:
            self.signals.append(name)

    def __enter__(self) -> CtrlC:
        self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self.now is not None:
            raise KeyboardInterrupt  # a third time: stop waiting for a clean end
        self.add("Ctrl-C")


async def cancel_on_sigterm(received: SignalReceiver, ctrl_c: CtrlC) -> None:
    """Count SIGTERM as a Ctrl-C; ends when the receiver is closed."""
    async for _signum in received:
        ctrl_c.add("SIGTERM")


@dataclass
class Load:
    """How one load went: its root, its recorded tree, and the stop or cancel, if any."""

    root: asyncop.AsyncOperation
    recorder: OpRecorder
    stop_reason: str | None = None
    asked_at: float | None = None
    cancel_reason: str | None = None
    cancelled_at: float | None = None
    ended_at: float | None = None

    def stop(self, reason: str, view: View) -> None:
        """Ask the load to stop: the fetches in flight get ``STOP_GRACE`` seconds."""
        self.root.cancel(reason, grace=STOP_GRACE)
        self.stop_reason, self.asked_at = reason, time.monotonic()
        view.note(
            f"stopping: the fetches in flight have {STOP_GRACE:g} s to finish "
            f"({reason} again stops now)"
        )

    def cancel(self, reason: str) -> None:
        """Cancel the load: one call on the root cancels the whole tree."""
        self.root.cancel(reason)
        self.cancel_reason, self.cancelled_at = reason, time.monotonic()


def load(
    runtime: asyncop.Runtime,
    server: tuple[str, int],
    page_id: int,
    ctrl_c: CtrlC,
    *,
    cancel_after: float | None = None,
    cancel_reason: str = "",
    ssl_context: ssl.SSLContext | None = None,
) -> Load:
    """Load one page while showing its tree; cancel it after ``cancel_after`` s or on Ctrl-C."""
    host, port = server
    scheme = "http" if ssl_context is None else "https"
    print(f"loading page {page_id} from {scheme}://{host}:{port}/page/{page_id}/", flush=True)
    recorder = OpRecorder()
    loader = PageLoader(host, port, recorder, ssl_context)
    root = recorder.spawn_root(runtime, loader.load_page, page_id, name=f"load_page({page_id})")
    done = Load(root, recorder)
    view = _make_view(recorder)
    deadline = None if cancel_after is None else recorder.started_at + cancel_after
    while not root.done:
        view.show(recorder.rows())
        if done.cancel_reason is None:
            if ctrl_c.now is not None:
                done.cancel(f"a second {ctrl_c.now}")
            elif ctrl_c.pressed and done.asked_at is None:
                done.stop(ctrl_c.by, view)
            elif deadline is not None and time.monotonic() >= deadline and not ctrl_c.pressed:
                done.cancel(cancel_reason)
        _wait_one_tick(root, None if done.cancel_reason or ctrl_c.pressed else deadline)
    done.ended_at = time.monotonic()
    view.show(recorder.rows())
    view.close()
    return done


def _make_view(recorder: OpRecorder) -> View:
    if sys.stdout.isatty():
        return LiveTree(
            sys.stdout, f"Ctrl-C stops the load ({STOP_GRACE:g} s for the fetches in flight)"
        )
    return ChangeLog(sys.stdout, recorder.started_at)


def _wait_one_tick(root: asyncop.AsyncOperation, deadline: float | None) -> None:
    """Wait until the root ends, one tick passes, or the deadline comes, whichever is first."""
    timeout = TICK if deadline is None else min(TICK, max(0.0, deadline - time.monotonic()))
    try:
        root.wait(timeout)  # returns as soon as the root ends
    except TimeoutError:
        pass


def report(done: Load, *, debug: bool) -> None:
    """Print the final tree, then the page or the failures."""
    root = done.root
    heading = f"final tree: {root.name} {root.state.name}"
    asked = "" if done.stop_reason is None else f"asked to stop by {done.stop_reason}, "
    if done.cancelled_at is not None and done.ended_at is not None:
        heading += (
            f" ({asked}cancelled by {done.cancel_reason}; the tree ended "
            f"{done.ended_at - done.cancelled_at:.3f} s after the cancel)"
        )
    elif done.asked_at is not None and done.ended_at is not None:
        heading += (
            f" ({asked}with {STOP_GRACE:g} s for the fetches in flight; the tree ended "
            f"{done.ended_at - done.asked_at:.3f} s after the request)"
        )
    print(heading)
    print("\n".join("  " + line for line in format_tree(done.recorder.rows())))
    if root.state is asyncop.OperationState.COMPLETED:
        print()
        print("\n".join(format_page(root.result())))
    elif root.state is asyncop.OperationState.FAILED:
        failed = failed_nodes(done.recorder.nodes())
        count = f"{len(failed)} failure" + ("" if len(failed) == 1 else "s")
        print(
            f"{root.name} failed with an {type(root.error).__name__} of {count}; "
            "the fetches still running were cancelled:"
        )
        print("\n".join("  " + format_failure(node) for node in failed))
        if debug and root.error is not None:
            print("\n".join(format_traceback(root.error)))
    print(flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(
        prog="python -m examples.page_loader",
        description="Load a page as a tree of asyncop operations, from a local HTTP server.",
        epilog=(
            f"Ctrl-C (or SIGTERM) lets the fetches in flight finish for {STOP_GRACE:g} s, "
            "twice stops at once. Exit status: 0 loaded or cancelled on request, "
            "1 failed, 130 Ctrl-C, 143 SIGTERM."
        ),
    )
    parser.add_argument("--page", type=int, default=1, help="the page to load (default 1)")
    parser.add_argument(
        "--cancel-after", type=float, metavar="SECONDS", help="cancel the load after SECONDS"
    )
    parser.add_argument(
        "--switch-to",
        type=int,
        metavar="PAGE",
        help=f"cancel the load (after --cancel-after, default {SWITCH_DELAY}) and load PAGE",
    )
    parser.add_argument(
        "--fail",
        action="append",
        default=[],
        choices=KINDS,
        metavar="RESOURCE",
        help=f"make RESOURCE ({', '.join(KINDS)}) answer 503; may be repeated",
    )
    parser.add_argument(
        "--failure-rate",
        type=float,
        default=0.0,
        metavar="RATE",
        help="chance of a 503 on any request, from 0 to 1 (default 0)",
    )
    parser.add_argument(
        "--latency",
        type=float,
        default=0.25,
        metavar="SECONDS",
        help="base latency; each resource takes a multiple of it (default 0.25)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds latency jitter and failures")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of failures")
    parser.add_argument(
        "--tls",
        action="store_true",
        help="serve and load over HTTPS, with a certificate made at start (needs trustme)",
    )
    parser.add_argument(
        "--console",
        metavar="PATH",
        help="serve the live tree on a Unix socket at PATH: python -m asyncop top PATH",
    )
    args = parser.parse_args(argv)
    if args.page < 1 or (args.switch_to is not None and args.switch_to < 1):
        parser.error("pages are numbered from 1")
    if not 0 <= args.failure_rate <= 1:
        parser.error("--failure-rate is a chance, from 0 to 1")
    for option, seconds in (("--latency", args.latency), ("--cancel-after", args.cancel_after)):
        if seconds is not None and not 0 <= seconds < math.inf:
            parser.error(f"{option} needs 0 or more seconds")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the program; returns the exit status."""
    args = parse_args(argv)
    site = Site.build(
        latency=args.latency, failure_rate=args.failure_rate, fail=args.fail, seed=args.seed
    )
    cancel_after, reason = args.cancel_after, f"--cancel-after {args.cancel_after}"
    switching = args.switch_to is not None
    if switching:
        cancel_after = SWITCH_DELAY if cancel_after is None else cancel_after
        reason = f"switching to page {args.switch_to}"
    server_context = client_context = None
    if args.tls:
        try:
            server_context, client_context = make_contexts()
        except TLSUnavailable as exc:
            print(exc, file=sys.stderr)
            return EXIT_USAGE
    try:
        runtime = asyncop.Runtime(2, name="page-loader", console=args.console)
    except (OSError, ValueError) as exc:  # the console's path is taken, or cannot be made
        print(f"--console: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with (
        running_server(site, ssl_context=server_context) as server,
        runtime,
        CtrlC() as ctrl_c,
        open_signal_receiver(signal.SIGTERM) as sigterm,
    ):
        runtime.spawn(cancel_on_sigterm, sigterm, ctrl_c, name="SIGTERM watcher")
        done = load(
            runtime,
            server,
            args.page,
            ctrl_c,
            cancel_after=cancel_after,
            cancel_reason=reason,
            ssl_context=client_context,
        )
        report(done, debug=args.debug)
        failed = done.root.state is asyncop.OperationState.FAILED
        if switching and not ctrl_c.pressed and not failed:
            done = load(runtime, server, args.switch_to, ctrl_c, ssl_context=client_context)
            report(done, debug=args.debug)
    left = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    print(f"threads left: {', '.join(left) if left else 'none'}")
    if ctrl_c.pressed:
        return EXIT_TERMINATED if ctrl_c.by == "SIGTERM" else EXIT_INTERRUPTED
    return EXIT_FAILED if done.root.state is asyncop.OperationState.FAILED else 0
