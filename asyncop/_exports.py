"""Make public names show the module users import them from.

``asyncop.Lock`` is defined in ``asyncop.runtime._primitives._sync``; without this, its
repr, tracebacks and pickles would name that private module. Each public
module calls :func:`publish` on its ``__all__`` once, at import.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

__all__ = ["publish"]


def publish(module_name: str, namespace: dict[str, Any], names: list[str]) -> None:
    """Set ``__module__`` of the classes and functions in ``names`` to ``module_name``.

    Objects already published by a module higher up (``asyncop`` itself) keep
    that module, and objects from outside asyncop are left alone.
    """
    for name in names:
        obj = namespace.get(name)
        # (isroutine: a function of a compiled module is not a FunctionType.)
        if not (inspect.isclass(obj) or inspect.isroutine(obj)):
            continue
        current = getattr(obj, "__module__", "") or ""
        if current.startswith("asyncop.") and current != module_name:
            # typing keeps a function's overloads under its module's name:
            # move them along, so typing.get_overloads() still finds them.
            overloads = typing.get_overloads(obj) if inspect.isroutine(obj) else []
            try:
                obj.__module__ = module_name
            except (AttributeError, TypeError):  # pragma: no cover - builtins
                pass
            for variant in overloads:
                variant.__module__ = module_name
                typing.overload(variant)
