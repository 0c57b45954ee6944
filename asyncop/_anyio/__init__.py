"""asyncop as an anyio backend: what anyio loads as ``anyio._backends._asyncop``.

anyio finds a backend by importing ``anyio._backends._<name>`` and reading
its ``backend_class``. ``import asyncop`` puts a finder on ``sys.meta_path``
that answers that import with this package (``asyncop._anyio_hook``), so
``anyio.run(main, backend="asyncop")`` works with nothing written into
anyio's folder, and anyio itself is imported only when asked for.
"""

from __future__ import annotations

from ._backend import AsyncopBackend

__all__ = ["AsyncopBackend", "backend_class"]

backend_class = AsyncopBackend
