"""``ps``, ``tree`` and ``top`` of ``python -m asyncop``: a console's snapshots drawn with rich.

Loaded only by a command that draws (``_console_client.run_command``), so
that the client runs without ``rich`` for ``dump`` and says what is missing
for the others. Everything on the screen goes through rich: no escape codes
are written here. ``top`` reads keys in cbreak mode (``q`` quits) and
redraws every ``REFRESH`` seconds on the terminal's alternate screen; on
an output that is no terminal (a pipe, a file), where a redraw in place
would show nothing until the end, it prints each view below the last.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import sys
import termios
import time
import tty
from collections.abc import Iterator
from typing import Any, TextIO

from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ._console_client import (
    ConsoleClient,
    Row,
    Snapshot,
    cancel,
    count,
    deadline,
    header,
    seconds,
    short,
    stop,
    waits_on,
)

__all__ = ["draw", "ps", "top", "tree"]

# How often ``top`` redraws.
REFRESH = 1.0
# Levels of the tree that ``top`` indents; deeper ones stay there.
MAX_INDENT = 12
_STATE_STYLES = {"RUNNING": "green", "PENDING": "yellow", "CREATED": "dim"}

COLUMNS = (
    *("#", "PARENT", "OPERATION", "KIND", "STATE", "AGE", "STEPS", "BUSY", "CPU"),
    *("WAITS ON", "DEADLINE", "CANCEL", "WHERE"),
)
# The columns of text, which share what the others leave.
_TEXT = frozenset({"OPERATION", "WAITS ON", "CANCEL", "WHERE"})
# The narrowest each column of text is made before columns are left out.
_MIN_TEXT = {"OPERATION": 12, "WAITS ON": 24, "CANCEL": 8, "WHERE": 12}
# What a narrow terminal leaves out, first to last.
_DROPPED_FIRST = ("WHERE", "PARENT", "CPU", "STEPS", "#", "DEADLINE", "BUSY", "CANCEL", "AGE")


def ps_table(snap: Snapshot, width: int, *, indent: bool, where: bool = True) -> Table:
    """The operations of one runtime as a table ``width`` columns wide at most, pre-order.

    In a terminal too narrow for every column, the least telling ones are
    left out (``_DROPPED_FIRST``), and the columns of text are shortened.
    """
    names = list(COLUMNS if where else COLUMNS[:-1])
    rows = [_cells(row, number, where, indent) for number, row in _numbered(snap)]
    natural = {
        name: max([len(name), *(len(str(cells[i])) for cells in rows)])
        for i, name in enumerate(names)
    }
    shown = list(names)
    widths = _fit(shown, natural, width)
    for name in _DROPPED_FIRST:
        if widths is not None:
            break
        if name in shown:
            shown.remove(name)
            widths = _fit(shown, natural, width)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for name in shown:
        table.add_column(
            name,
            justify="left" if name in _TEXT or name in ("KIND", "STATE") else "right",
            no_wrap=True,
            overflow="ellipsis",
            width=None if widths is None else widths[name],
        )
    keep = [names.index(name) for name in shown]
    for cells in rows:
        table.add_row(*(cells[i] for i in keep))
    return table


def _fit(names: list[str], natural: dict[str, int], width: int) -> dict[str, int] | None:
    """Column widths that fit ``width``, or None: the numbers keep theirs, the text shares the rest.

    rich's own shrinking of a table too wide for the terminal would squeeze
    a one-character column to nothing. Here a column of text narrower than
    its fair share keeps its width, and leaves the rest to the wider ones.
    """
    widths = {name: natural[name] for name in names}
    text = sorted((natural[name], name) for name in names if name in _TEXT)
    # Each column takes 3 more characters of padding and rule, less one at the ends.
    left = width - 3 * len(names) + 1 - sum(w for name, w in widths.items() if name not in _TEXT)
    for done, (wanted, name) in enumerate(text):
        share = left // (len(text) - done)
        if share < min(wanted, _MIN_TEXT[name]):
            return None
        widths[name] = min(wanted, share)
        left -= widths[name]
    return widths


def _numbered(snap: Snapshot) -> Iterator[tuple[dict[int, int], Row]]:
    """Each row with the numbers given so far, by id (the row's own is added)."""
    numbers: dict[int, int] = {}
    for number, row in enumerate(snap["operations"], 1):
        numbers[row["id"]] = number
        yield numbers, row


def _cells(row: Row, numbers: dict[int, int], where: bool, indent: bool) -> list[Any]:
    """The cells of one row of ``ps_table``."""
    name = row["name"]
    if indent:
        name = "  " * min(row["depth"], MAX_INDENT) + name
    style = "red" if row["cancelling"] else _STATE_STYLES.get(row["state"], "")
    parent = row["parent"]
    cells: list[Any] = [
        str(numbers[row["id"]]),
        "-" if parent is None else count(numbers.get(parent)),
        name + (" !" if row["warnings"] else ""),
        row["kind"],
        Text(row["state"], style=style),
        seconds(row["age_s"]),
        count(row["steps"]),
        seconds(_busy(row)),
        seconds(row["cpu_s"]),
        waits_on(row),
        deadline(row),
        cancel(row),
    ]
    if where:
        cells.append(short(row["where"]))
    return cells


def _busy(row: Row) -> float | None:
    """Wall time in the operation's code, the step or callback running now included."""
    busy: float | None = row["busy_s"]
    running: float | None = row["running_s"]
    if busy is None or running is None or row["kind"] == "blocking call":
        return busy
    return busy + running


def warnings_text(snap: Snapshot) -> Text:
    """The runtime's warnings, one per line."""
    return Text("\n".join(f"! {text}" for text in snap["warnings"]), style="bold red")


def ps(snaps: list[Snapshot], console: Console) -> None:
    """Print one table of operations per runtime."""
    for snap in snaps:
        console.print(header(snap), highlight=False)
        if snap["operations"]:
            console.print(ps_table(snap, console.width, indent=False))
        if snap["warnings"]:
            console.print(warnings_text(snap))
        console.print(snap["threads_text"], highlight=False)


def tree_label(row: Row) -> Text:
    """One node of ``tree``: name, state, kind, and what is known about it."""
    text = Text(row["name"], style="bold")
    text.append(f" [{row['state']}]", style=_STATE_STYLES.get(row["state"], ""))
    text.append(f" {row['kind']}")
    facts = [f"age {seconds(row['age_s'])}"] if row["age_s"] is not None else []
    steps = row["steps"]
    if steps:  # (a scope has none: its block runs in its task's steps)
        unit = "step" if steps == 1 else "steps"
        busy, cpu = seconds(_busy(row)), seconds(row["cpu_s"])
        facts.append(f"{steps} {unit}, busy {busy}, cpu {cpu}")
    if waits_on(row):
        facts.append(waits_on(row))
    if row["deadline_in_s"] is not None:
        facts.append(f"deadline {deadline(row)}")
    if facts:
        text.append(" · " + " · ".join(facts), style="dim")
    if row["cancelling"]:
        text.append(f" cancelling ({cancel(row)})", style="red")
    elif stop(row):
        text.append(f" {stop(row)}", style="yellow")
    for warning in row["warnings"]:
        text.append(f" ! {warning}", style="bold red")
    return text


def tree(snaps: list[Snapshot], console: Console) -> None:
    """Print each runtime's operation tree."""
    for snap in snaps:
        top = Tree(header(snap), highlight=False)
        nodes: dict[int, Tree] = {}
        for row in snap["operations"]:
            parent = nodes.get(row["parent"], top) if row["parent"] is not None else top
            nodes[row["id"]] = parent.add(tree_label(row))
        console.print(top)
        if snap["warnings"]:
            console.print(warnings_text(snap))
        console.print(snap["threads_text"], highlight=False)


def top_view(snaps: list[Snapshot], path: str, redraws: int, width: int) -> RenderableType:
    """What ``top`` shows: a header, then each runtime's table."""
    clock = time.strftime("%H:%M:%S")
    parts: list[RenderableType] = [
        Text.assemble(
            ("asyncop top ", "bold"),
            f"{path} · refresh #{redraws} at {clock} · ",
            ("q", "bold"),
            " or Ctrl-C quits",
        )
    ]
    for snap in snaps:
        parts.append(Text(header(snap), style="bold cyan"))
        parts.append(Text(snap["threads_text"], style="dim"))
        if snap["warnings"]:
            parts.append(warnings_text(snap))
        parts.append(ps_table(snap, width, indent=True, where=False))
    return Group(*parts)


@contextlib.contextmanager
def _keys(stream: TextIO) -> Iterator[bool]:
    """Read ``stream`` a key at a time while inside; yields whether it can."""
    fd = -1
    saved = None
    try:
        if stream.isatty():
            fd = stream.fileno()
            saved = termios.tcgetattr(fd)
    except (OSError, ValueError, termios.error):
        saved = None
    if saved is None:
        yield False
        return
    tty.setcbreak(fd)
    try:
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _wait_for_quit(stream: TextIO, keys: bool, timeout: float) -> bool:
    """Wait up to ``timeout`` s for ``q``; True once it is pressed."""
    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0:
        if not keys:
            time.sleep(left)
            return False
        ready, _, _ = select.select([stream], [], [], left)
        if ready:
            key = os.read(stream.fileno(), 1)
            if key in (b"q", b"Q") or not key:
                return True
    return False


def top(client: ConsoleClient, console: Console, stdin: TextIO) -> None:
    """Redraw the operations about once a second until ``q`` or Ctrl-C."""
    if not console.is_terminal:
        _top_lines(client, console, stdin)
        return
    redraws = 1
    view = top_view(client.request("snapshot")["runtimes"], client.path, redraws, console.width)
    with (
        _keys(stdin) as keys,
        Live(view, console=console, screen=True, auto_refresh=False) as live,
    ):
        while not _wait_for_quit(stdin, keys, REFRESH):
            redraws += 1
            snaps = client.request("snapshot")["runtimes"]
            live.update(top_view(snaps, client.path, redraws, console.width), refresh=True)


def _top_lines(client: ConsoleClient, console: Console, stdin: TextIO) -> None:
    """``top`` on an output that is no terminal: each view printed below the last.

    rich's live display draws such an output only when it stops, so ``top
    | tee log`` would show nothing for as long as it runs.
    """
    redraws = 0
    with _keys(stdin) as keys:
        while True:
            redraws += 1
            snaps = client.request("snapshot")["runtimes"]
            if redraws > 1:
                console.print()
            console.print(top_view(snaps, client.path, redraws, console.width))
            console.file.flush()
            if _wait_for_quit(stdin, keys, REFRESH):
                return


def draw(command: str, client: ConsoleClient) -> None:
    """Draw ``ps``, ``tree`` or ``top`` from ``client`` on stdout."""
    console = make_console(sys.stdout)
    if command == "top":
        with contextlib.suppress(KeyboardInterrupt):
            top(client, console, sys.stdin)
        return
    snaps = client.request("snapshot")["runtimes"]
    (ps if command == "ps" else tree)(snaps, console)


def make_console(stream: TextIO) -> Console:
    """A rich console on ``stream``; 160 columns wide when it is no terminal."""
    terminal = stream.isatty()
    width = None if terminal or os.environ.get("COLUMNS") else shutil.get_terminal_size().columns
    return Console(file=stream, width=max(width, 160) if width is not None else None)
