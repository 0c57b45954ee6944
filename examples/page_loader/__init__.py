"""The page loader: load a web page as a tree of asyncop operations, and cancel it.

Run it from the repository root::

    python -m examples.page_loader                      # load page 1
    python -m examples.page_loader --cancel-after 0.5   # cancel the whole tree at 0.5 s
    python -m examples.page_loader --switch-to 2        # cancel page 1, load page 2
    python -m examples.page_loader --fail body          # the body answers 503
    python -m examples.page_loader --tls                # the same over HTTPS (needs trustme)
    python -m examples.page_loader --console /tmp/pl.sock --latency 2   # then, elsewhere:
    python -m asyncop top /tmp/pl.sock                  # watch its tree live

The program starts its own HTTP/1.1 server on 127.0.0.1, then loads a page
as an operation tree: ``load_page(<id>)`` with children ``fetch_header``,
``fetch_body``, ``fetch_comments`` and ``fetch_sidebar``, each a real GET;
``fetch_comments`` spawns one ``fetch_author(<name>)`` child per author.
While the page loads, the terminal shows the tree with each node's state and
running time. ``--cancel-after`` and ``--switch-to`` cancel the whole tree
with one ``root.cancel()``; Ctrl-C (or SIGTERM) asks it to stop, with
``root.cancel(grace=1)``: the fetches in flight have a second to finish,
and a second Ctrl-C cancels at once. A failing fetch cancels its siblings.

The modules, in reading order:

- ``loader``: the operation tree itself, the part to read first;
- ``client``: a tiny HTTP/1.1 client over ``asyncop.net`` streams;
- ``server``: the HTTP/1.1 server, on ``asyncop.net.serve_listeners``;
- ``pages``: the site's content, latencies and failure rates;
- ``wire``: HTTP framing shared by the client and the server;
- ``tls``: the throw-away certificates of ``--tls``, made with ``trustme``;
- ``recorder``: spawns the operations and remembers them, for display;
- ``render``: the live tree and the final report;
- ``app``: the command line, the watch loop and the cancels.

Exit status: 0 when the page loaded or was cancelled by ``--cancel-after``,
1 when the load failed, 2 when ``--tls`` lacks ``trustme`` or the
``--console`` socket cannot be made, 130 after Ctrl-C, 143 after SIGTERM.
"""

from __future__ import annotations
