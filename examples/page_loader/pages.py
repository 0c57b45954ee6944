"""The site the server serves: page content, and each resource's latency and failure rate.

Every positive page id exists; its content is made up from the id. A page has
five kinds of resource, each at its own path::

    /page/<id>/header      text: the page title
    /page/<id>/body        text: the article
    /page/<id>/comments    JSON: [{"author": "ana", "text": "..."}, ...]
    /page/<id>/sidebar     text: links to related pages
    /page/<id>/author/<name>   text: one comment author's profile

Each kind has a latency (how long the server takes to answer) and a failure
rate (the chance it answers 503 instead). Both are drawn per path from a
random generator seeded with ``(seed, path)``, so a given seed gives the same
answers whatever order the requests arrive in.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["KINDS", "Resource", "ResourceSpec", "Site"]

#: Latency of each kind of resource, as a multiple of the base latency.
LATENCY_FACTORS: Mapping[str, float] = {
    "header": 1.0,
    "body": 3.2,
    "comments": 1.6,
    "sidebar": 1.5,
    "author": 1.2,
}
KINDS = tuple(LATENCY_FACTORS)

#: An injected failure answers after this fraction of the latency: an
#: overloaded server refuses quickly, which is when the loader's other
#: fetches are still running and get cancelled.
FAILURE_DELAY = 0.2

_TOPICS = ("tide pools", "night trains", "sourdough", "lighthouses", "paper maps", "bees")
_AUTHORS: Mapping[str, str] = {
    "ana": "Ana Lima, reader since 2019",
    "bo": "Bo Berg, writes about trains",
    "chen": "Chen Wei, keeps bees on a roof",
    "dee": "Dee Okafor, collects old maps",
}
_PATH = re.compile(r"/page/(?P<id>[1-9][0-9]{0,8})/(?P<kind>[a-z]+)(?:/(?P<name>[a-z]+))?")


@dataclass(frozen=True)
class ResourceSpec:
    """How one kind of resource behaves: seconds before the answer, chance of a 503."""

    latency: float
    failure_rate: float = 0.0


@dataclass(frozen=True)
class Resource:
    """One answer the server is about to give: what to send, after how long, or a 503."""

    content: bytes
    content_type: str
    latency: float
    fails: bool


@dataclass(frozen=True)
class Site:
    """The pages, with a ``ResourceSpec`` for each kind of resource."""

    specs: Mapping[str, ResourceSpec]
    seed: int = 0

    @classmethod
    def build(
        cls,
        *,
        latency: float = 0.25,
        failure_rate: float = 0.0,
        fail: Iterable[str] = (),
        seed: int = 0,
    ) -> Site:
        """Make a site whose latencies scale with ``latency`` seconds.

        Args:
            latency: the base latency; each kind takes a fixed multiple of it.
            failure_rate: the chance that any one answer is a 503.
            fail: kinds of resource that always answer 503.
            seed: seeds the latency jitter and the random failures.
        """
        always = set(fail)
        unknown = always - set(KINDS)
        if unknown:
            raise ValueError(f"unknown resource {sorted(unknown)}; choose from {', '.join(KINDS)}")
        specs = {
            kind: ResourceSpec(
                latency=latency * factor,
                failure_rate=1.0 if kind in always else failure_rate,
            )
            for kind, factor in LATENCY_FACTORS.items()
        }
        return cls(specs=specs, seed=seed)

    def lookup(self, path: str) -> Resource | None:
        """Return what the server answers at ``path``, or None for an unknown path."""
        match = _PATH.fullmatch(path)
        if match is None:
            return None
        page_id, kind, name = int(match["id"]), match["kind"], match["name"]
        if (kind == "author") != (name is not None):
            return None
        if kind == "author":
            content, content_type = _AUTHORS.get(name or "", ""), "text/plain"
            if not content:
                return None
        elif kind == "comments":
            content, content_type = json.dumps(_comments(page_id)), "application/json"
        elif kind in KINDS:
            content, content_type = _TEXT[kind](page_id), "text/plain"
        else:
            return None
        spec = self.specs[kind]
        rng = random.Random(f"{self.seed}:{path}")
        jitter = rng.uniform(0.9, 1.1)
        fails = rng.random() < spec.failure_rate
        latency = spec.latency * (FAILURE_DELAY if fails else jitter)
        return Resource(content.encode(), f"{content_type}; charset=utf-8", latency, fails)


def _title(page_id: int) -> str:
    return f"Page {page_id}: on {_TOPICS[page_id % len(_TOPICS)]}"


def _body(page_id: int) -> str:
    topic = _TOPICS[page_id % len(_TOPICS)]
    return (
        f"This is page {page_id}. It is about {topic}, and it took a while to load, "
        "because every part of it came from a slow server, in parallel."
    )


def _sidebar(page_id: int) -> str:
    related = [n for n in (page_id - 1, page_id + 1, page_id + 2) if n > 0]
    return "Related: " + ", ".join(_title(n) for n in related)


def _comments(page_id: int) -> list[dict[str, str]]:
    names = list(_AUTHORS)
    first = page_id % len(names)
    picked = [names[first], names[(first + 1) % len(names)], names[first]]
    lines = ("Lovely read.", "I disagree with the second part.", "Came back to say: still true.")
    return [{"author": name, "text": text} for name, text in zip(picked, lines, strict=True)]


_TEXT = {"header": _title, "body": _body, "sidebar": _sidebar}
