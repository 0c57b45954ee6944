"""Show the operation tree while it runs, and report how a load ended.

Two live views, chosen by whether stdout is a terminal:

- ``LiveTree`` redraws the whole tree in place every tick: it moves the
  cursor up over the previous frame (ANSI ``ESC [ n F``), clears to the end
  of the screen (``ESC [ J``) and draws the new frame.
- ``ChangeLog`` prints one plain line per state change it sees, for pipes
  and files, where redrawing would only pile up copies of the tree.

The final report is plain text either way: the final tree, then the page,
or one line per failure.
"""

from __future__ import annotations

import time
import traceback
from typing import Protocol, TextIO

import asyncop

from .loader import Page
from .recorder import Node, Row

__all__ = [
    "ChangeLog",
    "LiveTree",
    "View",
    "failed_nodes",
    "format_failure",
    "format_page",
    "format_traceback",
    "format_tree",
]

MIN_NAME_WIDTH = 24  # wide enough for "fetch_author(...)" rows: frames keep one width


class View(Protocol):
    """A live display of the tree: ``show`` every tick, ``close`` at the end."""

    def show(self, rows: list[Row]) -> None: ...

    def note(self, text: str) -> None: ...

    def close(self) -> None: ...


def format_tree(rows: list[Row]) -> list[str]:
    """Format a snapshot as aligned lines: indented name, state, running time."""
    labels = ["  " * row.depth + row.name for row in rows]
    width = max([MIN_NAME_WIDTH, *(len(label) + 2 for label in labels)])
    lines = []
    for label, row in zip(labels, rows, strict=True):
        seconds = "" if row.seconds is None else f"{row.seconds:5.2f}s"
        lines.append(f"{label:<{width}}{row.state.name:<10} {seconds}".rstrip())
    return lines


class LiveTree:
    """Redraws the tree in place on a terminal."""

    def __init__(self, out: TextIO, title: str) -> None:
        self._out = out
        self._title = title
        self._height = 0  # lines of the frame on screen, to move back over

    def show(self, rows: list[Row]) -> None:
        """Replace the frame on screen with the tree in ``rows``."""
        lines = [self._title, *("  " + line for line in format_tree(rows))]
        self._out.write(self._erase() + "\n".join(lines) + "\n")
        self._out.flush()
        self._height = len(lines)

    def note(self, text: str) -> None:
        """Show ``text`` above the tree from the next frame on, instead of the title."""
        self._title = text

    def close(self) -> None:
        """Erase the frame, to leave room for the final report."""
        self._out.write(self._erase())
        self._out.flush()
        self._height = 0

    def _erase(self) -> str:
        return f"\x1b[{self._height}F\x1b[J" if self._height else ""


class ChangeLog:
    """Prints ``<seconds>s <path> <STATE>`` each time a node's state changes."""

    def __init__(self, out: TextIO, started_at: float) -> None:
        self._out = out
        self._started_at = started_at
        self._seen: dict[str, asyncop.OperationState] = {}

    def show(self, rows: list[Row]) -> None:
        """Print the state changes since the last call."""
        at = time.monotonic() - self._started_at
        for row in rows:
            if self._seen.get(row.path) is not row.state:
                self._seen[row.path] = row.state
                print(f"{at:6.2f}s  {row.path} {row.state.name}", file=self._out)
        self._out.flush()

    def note(self, text: str) -> None:
        """Print ``text`` as a line of the log."""
        at = time.monotonic() - self._started_at
        print(f"{at:6.2f}s  {text}", file=self._out, flush=True)

    def close(self) -> None:
        """Nothing to erase: the log stays."""


def format_page(page: Page) -> list[str]:
    """Format a loaded page for the terminal."""
    lines = [f"== {page.title} ==", page.body, "", page.sidebar, "", "Comments:"]
    lines += [f"  {c.author} ({c.profile}): {c.text}" for c in page.comments]
    return lines


def failed_nodes(nodes: list[Node]) -> list[Node]:
    """The nodes that failed by themselves, not because a child failed.

    An operation that failed because a child failed holds an
    ``ExceptionGroup``; the child's own failure explains it, so only
    operations whose error is not a group are listed.
    """
    return [
        node
        for node in nodes
        if node.op is not None
        and node.op.state is asyncop.OperationState.FAILED
        and not isinstance(node.op.error, BaseExceptionGroup)
    ]


def format_failure(node: Node) -> str:
    """One readable line for a failed node: ``<operation> failed: <error>``."""
    assert node.op is not None
    return f"{node.name} failed: {node.op.error}"


def format_traceback(error: BaseException) -> list[str]:
    """The full traceback of ``error``, ``ExceptionGroup`` structure included."""
    return "".join(traceback.format_exception(error)).rstrip().splitlines()
