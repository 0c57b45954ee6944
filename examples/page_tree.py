"""Load a page as a tree of operations, show the live tree, then cancel it.

    python examples/page_tree.py [--cancel-after SECONDS] [--fail RESOURCE]

``load_page`` is a scope; ``fetch_header``, ``fetch_body``, ``fetch_comments``
and ``fetch_sidebar`` are its children, and ``fetch_comments`` spawns one
child per comment author. Each fetch takes a while (it waits on its
cancellation token, so a cancel interrupts it at once). With
``--cancel-after`` the whole tree is cancelled with one call on the root;
with ``--fail`` one resource fails and its siblings are cancelled.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import asyncop

LATENCY = {"header": 0.2, "body": 0.6, "comments": 0.4, "sidebar": 0.3, "author": 0.3}


def fetch(resource: str, page_id: int, fail: str | None) -> str:
    """Pretend to fetch one resource; a cancel interrupts the wait at once."""
    op = asyncop.current_operation()
    assert op is not None
    if op.token.wait(LATENCY[resource]):
        op.token.check()  # cancelled while waiting: end CANCELLED
    if resource == fail:
        raise ConnectionError(f"{resource} of page {page_id}: server answered 503")
    return f"<{resource} of page {page_id}>"


def fetch_comments(page_id: int, fail: str | None) -> str:
    """Fetch the comments, then each author in parallel, as children."""
    text = fetch("comments", page_id, fail)
    op = asyncop.current_operation()
    assert op is not None
    for author in ("ana", "bo"):
        op.spawn(fetch, "author", page_id, fail, name=f"fetch_author({author})")
    return text


def show(runtime: asyncop.Runtime, stop: threading.Event) -> None:
    """Print the live tree every 0.25 s until ``stop`` is set."""
    while not stop.wait(0.25):
        print(runtime.dump(), flush=True)
        print("-" * 60, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", type=int, default=1)
    parser.add_argument("--cancel-after", type=float, default=None)
    parser.add_argument("--fail", choices=sorted(LATENCY), default=None)
    args = parser.parse_args(argv)

    with asyncop.Runtime(4, name="page-loader") as runtime:
        stop = threading.Event()
        painter = threading.Thread(target=show, args=(runtime, stop), daemon=True)
        painter.start()
        children: list[asyncop.AsyncOperation] = []
        started = time.monotonic()
        try:
            with runtime.scope(name=f"load_page({args.page})") as root:
                for name in ("header", "body", "sidebar"):
                    children.append(
                        root.spawn(fetch, name, args.page, args.fail, name=f"fetch_{name}")
                    )
                children.append(
                    root.spawn(fetch_comments, args.page, args.fail, name="fetch_comments")
                )
                if args.cancel_after is not None:
                    time.sleep(args.cancel_after)
                    root.cancel("--cancel-after")  # one call cancels the whole tree
        except* ConnectionError as group:
            for error in group.exceptions:
                print(f"failed: {error}")
        finally:
            stop.set()
            painter.join()
        elapsed = time.monotonic() - started
        print(f"final tree after {elapsed:.2f} s:")
        print(f"  {root.name} [{root.state.name}]")
        for child in children:
            print(f"    {child.name} [{child.state.name}]")
        if all(child.state is asyncop.OperationState.COMPLETED for child in children):
            print("page:", " ".join(str(child.result()) for child in children))
    leftover = [t.name for t in threading.enumerate() if t.name.startswith("page-loader-")]
    print("threads left running:", leftover or "none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
