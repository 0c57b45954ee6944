"""Run the page loader: ``python -m examples.page_loader --help``."""

from __future__ import annotations

import sys

if not __package__:
    sys.exit("run the page loader from the repository root: python -m examples.page_loader")

from .app import main

sys.exit(main())
