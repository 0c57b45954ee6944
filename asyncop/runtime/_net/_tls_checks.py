"""What TLS refuses before it starts, and how it explains a certificate it refused.

Both exist so that a mistake surfaces where it is made, in words that say
what to do:

- ``check_ssl_context`` runs before anything connects, listens or wraps: a
  server given a client's context (``ssl.create_default_context()`` makes
  one) would otherwise accept every connection and fail each handshake, one
  by one, in the log. ``check_handshake_timeout`` refuses a limit no
  handshake can meet.
- ``certificate_message`` turns OpenSSL's verify code into advice. "Not
  trusted, load the authority's certificate" is right for an unknown
  issuer and wrong for an expired certificate or a clock that runs behind,
  so the codes users meet most get their own sentence, and any other code
  is quoted with OpenSSL's text rather than guessed at.
"""

from __future__ import annotations

import ssl

from ...platform import check_timeout

__all__ = ["certificate_message", "check_handshake_timeout", "check_ssl_context"]


def check_ssl_context(context: object, *, server_side: bool, what: str) -> ssl.SSLContext:
    """Refuse what is not an ``ssl.SSLContext``, or one made for the other side.

    Checked before anything connects, listens or wraps: a context that
    cannot work would otherwise fail every connection, one by one.
    """
    if not isinstance(context, ssl.SSLContext):
        example = (
            "ssl.create_default_context(ssl.Purpose.CLIENT_AUTH) with load_cert_chain()"
            if server_side
            else "ssl.create_default_context()"
        )
        raise TypeError(
            f"{what} needs an ssl.SSLContext as 'ssl_context', got {type(context).__name__}; "
            f"pass e.g. {example}"
        )
    if server_side and context.protocol == ssl.PROTOCOL_TLS_CLIENT:
        raise ValueError(
            f"{what} got a client-side ssl.SSLContext (PROTOCOL_TLS_CLIENT, which "
            "ssl.create_default_context() makes), and a server cannot use one; make it with "
            "ssl.create_default_context(ssl.Purpose.CLIENT_AUTH) and load_cert_chain()"
        )
    if not server_side and context.protocol == ssl.PROTOCOL_TLS_SERVER:
        raise ValueError(
            f"{what} got a server-side ssl.SSLContext (PROTOCOL_TLS_SERVER), and a client "
            "cannot use one; make it with ssl.create_default_context()"
        )
    return context


def check_handshake_timeout(value: object, what: str) -> float | None:
    """A handshake timeout in seconds, or None for no limit (None or ``math.inf``)."""
    limit = check_timeout(value, what)
    if limit == 0.0:
        raise ValueError(
            f"{what} got {value!r} seconds, and no TLS handshake finishes in no time; "
            "pass a positive number of seconds, or math.inf for no limit"
        )
    return limit


# OpenSSL's X509_V_ERR_* codes of the certificate failures met most often.
_NOT_YET_VALID = 9
_EXPIRED = 10
_SELF_SIGNED = 18
_SELF_SIGNED_IN_CHAIN = 19
_UNKNOWN_ISSUER = frozenset({2, 20, 21})  # issuer not found, locally or at all
_NAME_MISMATCH = frozenset({62, 64})  # hostname, IP address


def certificate_message(code: int | None, detail: str, peer: str | None, holder: str) -> str:
    """What a failed certificate check means, and what to do about it.

    Args:
        code: OpenSSL's verify code (``X509_V_ERR_*``), if it gave one.
        detail: OpenSSL's verify message.
        peer: the name checked (``server_hostname``), if any.
        holder: whose certificate it is, ``"server"`` or ``"client"``.
    """
    whose = f"the {holder}'s certificate" if peer is None else f"the certificate of {peer!r}"
    failed = "TLS certificate check failed:"
    load = "ssl_context.load_verify_locations(...)"
    if code in _NAME_MISMATCH or "hostname mismatch" in detail.lower():
        return (
            f"{failed} the certificate the server presented is not valid for {peer!r} "
            f"({detail}); connect with a name the certificate covers, or pass that name as "
            "server_hostname"
        )
    if code == _EXPIRED:
        return (
            f"{failed} {whose} has expired ({detail}); have the {holder} renew it, or check "
            "this machine's clock if the date is wrong"
        )
    if code == _NOT_YET_VALID:
        return (
            f"{failed} {whose} is not valid yet ({detail}); check this machine's clock, or "
            "wait for the certificate's start date"
        )
    if code == _SELF_SIGNED:
        return (
            f"{failed} {whose} is self-signed ({detail}); trust that very certificate with "
            f"{load} if you know it, or have the {holder} use one issued by an authority"
        )
    if code == _SELF_SIGNED_IN_CHAIN:
        return (
            f"{failed} {whose} chains up to a self-signed root that this context does not "
            f"trust ({detail}); load that root certificate with {load} if you trust it"
        )
    if code in _UNKNOWN_ISSUER:
        return (
            f"{failed} {whose} is not trusted: no authority this context knows issued it "
            f"({detail}); load the certificate of the authority that issued it with {load}, "
            f"or have the {holder} send its intermediate certificates too"
        )
    return (
        f"{failed} OpenSSL refused {whose} with verify code {code}: {detail}; "
        "look that code up in OpenSSL's verify documentation to fix the certificate"
    )
