"""Load a page as a tree of operations.

::

    load_page(1)
      fetch_header
      fetch_body
      fetch_comments
        fetch_author(ana)
        fetch_author(bo)
      fetch_sidebar

``load_page`` spawns the four fetches as children, so they run concurrently,
then awaits each one and assembles the ``Page``. ``fetch_comments`` spawns a
child per comment author in the same way. Each fetch is one HTTP GET.

Nothing here handles cancellation or failure, because the tree does it:

- cancelling ``load_page`` cancels every fetch, and each one leaves at its
  current await (closing its socket on the way out); asked to stop first
  (a cancel with a grace), the fetches in flight go on, and only
  ``fetch_comments`` looks: it starts no author fetch then;
- a fetch that fails cancels its siblings and fails its parent, which ends
  FAILED with an ``ExceptionGroup`` of the failures.
"""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass

import asyncop

from .client import fetch
from .recorder import OpRecorder

__all__ = ["Comment", "Page", "PageLoader"]


@dataclass(frozen=True)
class Comment:
    """A comment and its author's profile."""

    author: str
    profile: str
    text: str


@dataclass(frozen=True)
class Page:
    """A page, assembled from its four resources."""

    page_id: int
    title: str
    body: str
    comments: list[Comment]
    sidebar: str


class PageLoader:
    """Fetches pages from the server at ``host:port``, spawning through ``recorder``."""

    def __init__(
        self,
        host: str,
        port: int,
        recorder: OpRecorder,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.recorder = recorder
        self.ssl_context = ssl_context  # HTTPS when set

    async def load_page(self, page_id: int) -> Page:
        """The root operation: fetch the four parts concurrently, then assemble them."""
        spawn = self.recorder.spawn
        header = spawn(self.fetch_header, page_id, name="fetch_header")
        body = spawn(self.fetch_body, page_id, name="fetch_body")
        comments = spawn(self.fetch_comments, page_id, name="fetch_comments")
        sidebar = spawn(self.fetch_sidebar, page_id, name="fetch_sidebar")
        return Page(page_id, await header, await body, await comments, await sidebar)

    async def fetch_header(self, page_id: int) -> str:
        """Fetch the page's title."""
        return await self._get_text(f"/page/{page_id}/header")

    async def fetch_body(self, page_id: int) -> str:
        """Fetch the page's article."""
        return await self._get_text(f"/page/{page_id}/body")

    async def fetch_sidebar(self, page_id: int) -> str:
        """Fetch the page's sidebar."""
        return await self._get_text(f"/page/{page_id}/sidebar")

    async def fetch_comments(self, page_id: int) -> list[Comment]:
        """Fetch the comments, then every author's profile as a child of its own."""
        entries = json.loads(await self._get_text(f"/page/{page_id}/comments"))
        if asyncop.stop_requested():
            # Asked to stop (a first Ctrl-C): finish with what is here, start nothing new.
            return [
                Comment(e["author"], "profile not loaded: stopping", e["text"]) for e in entries
            ]
        spawn = self.recorder.spawn
        authors = {
            name: spawn(self.fetch_author, page_id, name, name=f"fetch_author({name})")
            for name in dict.fromkeys(entry["author"] for entry in entries)
        }
        profiles = {name: await op for name, op in authors.items()}
        return [Comment(e["author"], profiles[e["author"]], e["text"]) for e in entries]

    async def fetch_author(self, page_id: int, name: str) -> str:
        """Fetch one comment author's profile."""
        return await self._get_text(f"/page/{page_id}/author/{name}")

    async def _get_text(self, path: str) -> str:
        body = await fetch(self.host, self.port, path, ssl_context=self.ssl_context)
        return body.decode()
