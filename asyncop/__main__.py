"""``python -m asyncop``: look at a running program through its live console.

::

    python -m asyncop ps PATH     # a table of the operations
    python -m asyncop tree PATH   # the operation tree
    python -m asyncop top PATH    # a live table, redrawn every second; q quits
    python -m asyncop dump PATH   # the text of Runtime.dump()

``PATH`` is the Unix socket the program serves with ``Runtime(console=PATH)``
or ``ASYNCOP_CONSOLE=PATH``. ``ps``, ``tree`` and ``top`` need ``rich``
(``pip install 'asyncop[console]'``). Exit status: 0, or 1 when the console
cannot be reached or ``rich`` is missing, 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import sys

from ._console_client import run_command

__all__ = ["main"]

_COMMANDS = {
    "ps": "print a table of the operations of each runtime",
    "tree": "print the operation tree of each runtime",
    "top": "show the operations live, redrawn every second, until q or Ctrl-C",
    "dump": "print the text of Runtime.dump() for each runtime",
}


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m asyncop",
        description="Look at a running asyncop program through its live console "
        "(Runtime(console=PATH) or ASYNCOP_CONSOLE=PATH). Read-only.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text in _COMMANDS.items():
        command = commands.add_parser(name, help=help_text, description=help_text)
        command.add_argument("path", metavar="PATH", help="the console's Unix socket")
    args = parser.parse_args(argv)
    return run_command(args.command, args.path)


if __name__ == "__main__":
    sys.exit(main())
