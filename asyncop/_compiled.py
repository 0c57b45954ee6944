"""Which form of the core modules runs: compiled, or the ``.py`` files as they are.

asyncop's hot modules are written in Cython's pure-Python mode, and an
install with a C compiler compiles them into extension modules that sit
beside their ``.py`` files (see ``hatch_build.py``). Python's import system
prefers an extension module to a source file in the same folder, so
``import asyncop`` puts :class:`SourceFinder` first on ``sys.meta_path``
when the source must win instead:

- ``ASYNCOP_NO_EXTENSIONS=1`` (any value but ``0``) in the environment: every
  asyncop module is imported from its ``.py`` file;
- an editable install whose sources changed since they were compiled (the
  build wrote each source's size and time in ``.sources<suffix>.json``
  beside this file): every module it compiled then runs from its ``.py``
  file, with a warning to rebuild. Not only the edited ones: the compiled
  modules share extension types (a ``.pxd`` cimports another module's
  type), and a compiled module cannot load beside the Python class that
  stands for a type it was compiled against. A wheel has no such record,
  and pays nothing.

The finder answers only for asyncop's own plain modules that have a ``.py``
file, and declines everything else, so the rest of the import machinery is
untouched. ``is_compiled()`` tells which form runs.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

__all__ = ["SourceFinder", "install", "is_compiled"]

_PACKAGE = __name__.rpartition(".")[0]


class SourceFinder(importlib.abc.MetaPathFinder):
    """Imports asyncop's modules from their ``.py`` files, ahead of extension modules."""

    def __init__(self, names: frozenset[str] | None) -> None:
        #: The modules to import from source; None for every asyncop module.
        self.names = names

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if path is None or not fullname.startswith(_PACKAGE + "."):
            return None
        if self.names is not None and fullname not in self.names:
            return None
        leaf = fullname.rpartition(".")[2]
        for entry in path:
            source = os.path.join(entry, leaf + ".py")
            if os.path.isfile(source):
                return importlib.util.spec_from_file_location(fullname, source)
        return None  # a package, or a module with no source: the usual finders


def is_compiled() -> bool:
    """Whether asyncop's compiled core is the one running.

    True when asyncop's core modules were imported as extension modules
    (an install that compiled them, without ``ASYNCOP_NO_EXTENSIONS=1``);
    False when they run as Python source.
    """
    module = sys.modules.get(f"{_PACKAGE}.runtime._core._kernel")
    if module is None:
        return False
    return isinstance(getattr(module, "__loader__", None), importlib.machinery.ExtensionFileLoader)


def _compiled_sources(here: str) -> dict[str, list[int]]:
    """The record of an editable install: each compiled module's source size and time."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    record = os.path.join(here, f".sources{suffix.removesuffix('.so')}.json")
    try:
        with open(record, encoding="utf-8") as file:
            sources: dict[str, list[int]] = json.load(file)
    except (OSError, ValueError):
        return {}  # a wheel, or an install that compiled nothing
    return sources


def _stale_modules(here: str) -> frozenset[str]:
    """The compiled modules of an editable install whose source changed since."""
    sources = _compiled_sources(here)
    root = os.path.dirname(here)
    stale = set()
    for name, (mtime, size) in sources.items():
        path = os.path.join(root, *name.split(".")) + ".py"
        try:
            stat = os.stat(path)
        except OSError:
            continue
        if (stat.st_mtime_ns, stat.st_size) != (mtime, size):
            stale.add(name)
    return frozenset(stale)


def install() -> None:
    """Put a :class:`SourceFinder` first on ``sys.meta_path`` if source must win."""
    if any(isinstance(finder, SourceFinder) for finder in sys.meta_path):
        return
    if os.environ.get("ASYNCOP_NO_EXTENSIONS", "") not in ("", "0"):
        sys.meta_path.insert(0, SourceFinder(None))
        return
    here = os.path.dirname(__file__)
    stale = _stale_modules(here)
    if stale:
        # Every compiled module, not only the edited ones (see the module docstring).
        sys.meta_path.insert(0, SourceFinder(frozenset(_compiled_sources(here))))
        warnings.warn(
            f"asyncop: {len(stale)} compiled module(s) are older than their source "
            f"({', '.join(sorted(stale))}), so every core module runs from its .py "
            "file instead; reinstall (pip install -e .) to compile them again",
            RuntimeWarning,
            stacklevel=2,
        )


install()
