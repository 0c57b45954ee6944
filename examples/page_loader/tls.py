"""Throw-away HTTPS certificates for ``--tls``, made with ``trustme`` at start.

The server needs a certificate and the client must trust its issuer. A demo
cannot ship a real one, so ``make_contexts`` creates a certificate authority
in memory, issues a certificate for 127.0.0.1 and localhost, and returns a
server context that presents it and a client context that trusts only that
authority. ``trustme`` is needed for ``--tls`` alone: the program runs
without it otherwise.
"""

from __future__ import annotations

import ssl

__all__ = ["TLSUnavailable", "make_contexts"]


class TLSUnavailable(Exception):
    """``--tls`` was asked for and ``trustme`` is not installed."""


def make_contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A fresh authority's ``(server_context, client_context)`` pair.

    Raises:
        TLSUnavailable: ``trustme`` is not installed.
    """
    try:
        import trustme
    except ImportError:
        raise TLSUnavailable(
            "--tls makes its certificates with trustme: pip install trustme"
        ) from None
    authority = trustme.CA()
    certificate = authority.issue_cert("127.0.0.1", "localhost")
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certificate.configure_cert(server)
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return server, client
