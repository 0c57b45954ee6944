"""Let anyio find its ``"asyncop"`` backend, without writing into anyio's package.

anyio loads a backend by importing ``anyio._backends._<name>``.
:class:`BackendFinder`, which ``import asyncop`` puts on ``sys.meta_path``,
answers the import of ``anyio._backends._asyncop``, and no other, with a
module whose ``backend_class`` is ``asyncop._anyio``'s. It imports nothing
until anyio asks, so ``import asyncop`` does not load anyio.

The module also loads sniffio, where it is installed: a worker names
asyncop to sniffio only if sniffio is loaded when it starts stepping tasks,
and a library that imports sniffio lazily (httpx's transport does) would
otherwise ask it, in the step that loads it, and hear of no library.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

try:
    import sniffio  # noqa: F401  # loaded for the workers (see above)
except ImportError:  # no sniffio: nothing in the process can ask it
    pass

__all__ = ["BACKEND_MODULE", "BackendFinder", "install"]

#: The module anyio imports for ``backend="asyncop"``.
BACKEND_MODULE = "anyio._backends._asyncop"


class BackendFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``anyio._backends._asyncop``: asyncop's backend module."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != BACKEND_MODULE:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        """The default module: one named ``anyio._backends._asyncop``."""
        return None

    def exec_module(self, module: ModuleType) -> None:
        backend = importlib.import_module("asyncop._anyio")
        module.backend_class = backend.backend_class  # type: ignore[attr-defined]
        module.__doc__ = backend.__doc__


def install() -> None:
    """Put the finder on ``sys.meta_path``, once."""
    if not any(isinstance(finder, BackendFinder) for finder in sys.meta_path):
        sys.meta_path.append(BackendFinder())
