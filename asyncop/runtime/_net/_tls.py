"""TLS over any byte stream: ``TLSStream``.

Why ``ssl.MemoryBIO`` and not ``SSLContext.wrap_socket``? A wrapped socket
does its I/O inside OpenSSL: on a non-blocking socket that surfaces as
``SSLWantReadError`` at awkward places, and it only works on a real socket.
With two memory buffers, as trio does, OpenSSL only ever transforms bytes:
it reads ciphertext from ``incoming`` and writes ciphertext to ``outgoing``,
and this module moves them to and from the transport stream with ordinary
awaits. So TLS works over any stream (a ``SocketStream``, another
``TLSStream``), every wait is one of the runtime's cancellation points, and
there is exactly one place (``_retry``) where OpenSSL meets the network:

1. call the ``SSLObject`` method (``do_handshake``, ``read``, ``write``,
   ``unwrap``); it may raise ``SSLWantReadError``: it needs more input;
2. send whatever it put in ``outgoing`` (always first: the peer may be
   waiting for it before it sends what we want);
3. if it wanted input, receive one chunk into ``incoming`` and go to 1.

Two tasks may use one TLS stream at once, one receiving and one sending
(each direction refuses a second task with ``BusyResourceError``). Both may
need the transport in the same direction: a ``read`` can produce bytes to
send (a key update, a TLS 1.3 session ticket reply) and the handshake needs
both directions. So sending to the transport takes ``_send_lock`` (which
also keeps the ciphertext in order), and receiving from it takes
``_receive_lock``; a task that waited for the receive lock while another
task received does not receive again (``_received`` counts the chunks), but
retries OpenSSL, which may now have what it wanted.

The handshake runs once, explicitly (``do_handshake``) or on first use, under
``_handshake_lock``; a second task waits for the first one's handshake.
With a ``handshake_timeout``, each task's wait for it runs in a scope with
that timeout: a peer that connects and then says nothing (or trickles) cannot
hold the stream past it; the cancel breaks the stream, as any cancel in the
middle of a handshake does, and the caller gets ``TimeoutError``. The
servers set one by default, since there a stalled client would otherwise
hold its socket until the server stops.

A failed certificate check raises ``ssl.SSLCertVerificationError`` with
OpenSSL's ``verify_code`` and ``verify_message`` kept, and a message that
says what the code means for the user (expired, not valid yet, issued by
an unknown authority, self-signed, for another name), or quotes OpenSSL's
text for the rarer codes (``_tls_checks.py``).

**States.** ``_state`` is one of ``_State``:

- ``OPEN``: usable (the handshake may not have happened yet);
- ``BROKEN``: a TLS error, a failed transport, or a cancel in the middle of
  sending ciphertext left the TLS session unusable; every later call
  raises ``BrokenResourceError``;
- ``UNWRAPPED``: ``unwrap()`` handed the transport back;
- ``CLOSED``: ``aclose()`` ran.

OPEN may go to any other; the others are final. Only ``_break``,
``unwrap`` and ``aclose`` write it.

**A peer that closes without close_notify.** TLS marks the end of data with
a close_notify alert, so that an attacker cannot truncate a stream by
closing the TCP connection. Many HTTPS servers skip it, and HTTP frames its
own messages, so browsers and trio's ``https_compatible=True`` treat a bare
TCP close as end of stream. ``TLSStream`` does the same: ``receive_some``
returns ``b""`` whether the peer sent close_notify or just closed (an
application that needs truncation protection must frame its messages, as
HTTP does with Content-Length). Symmetrically, ``aclose()`` sends
close_notify but does not wait for the peer's reply.
"""

from __future__ import annotations

import enum
import math
import ssl
import threading
from collections.abc import Callable
from typing import Any, final

from ...operations import BrokenResourceError, Cancelled, ClosedResourceError
from .. import Lock, scope
from ._receive_buffer import _BufferedReceiver
from ._stream_api import (
    DEFAULT_RECEIVE_SIZE,
    PASS,
    ConflictGuard,
    Stream,
    check_data,
    closed_error,
    closed_under_error,
    eof_sent_error,
)
from ._tls_checks import certificate_message, check_handshake_timeout, check_ssl_context

__all__ = ["TLSStream"]

# Plaintext written to OpenSSL at a time: the ciphertext buffer then stays
# small whatever the size of a send_all.
_WRITE_CHUNK = 256 * 1024


class _State(enum.Enum):
    OPEN = "open"
    BROKEN = "broken"
    UNWRAPPED = "unwrapped"
    CLOSED = "closed"


_EOF_ERRORS = (ssl.SSLZeroReturnError, ssl.SSLEOFError)


def _cause(exc: BaseException) -> BaseException:
    """What broke under a transport's own ``BrokenResourceError``: its ``OSError``."""
    if isinstance(exc, BrokenResourceError) and isinstance(exc.__cause__, OSError):
        return exc.__cause__
    return exc


@final
class TLSStream(_BufferedReceiver, Stream):
    """A TLS session over a byte stream; make one with ``TLSStream.wrap``.

    It has the stream methods (``receive_some``, ``send_all``,
    ``receive_exactly``, ``receive_until``, ``aclose``, ``async with``,
    ``async for``) over the decrypted bytes, plus ``do_handshake``,
    ``unwrap``, ``getpeercert`` and ``selected_alpn_protocol``. See the
    module documentation for how a peer closing without close_notify is
    treated (as end of stream).
    """

    __slots__ = (
        "_eof",
        "_eof_sent",
        "_handshake_lock",
        "_handshake_timeout",
        "_handshook",
        "_incoming",
        "_outgoing",
        "_receive_lock",
        "_received",
        "_send_guard",
        "_send_lock",
        "_server_hostname",
        "_ssl",
        "_ssl_lock",
        "_state",
        "_transport",
    )

    def __init__(
        self,
        transport: Any,
        ssl_object: ssl.SSLObject,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_hostname: str | None,
        handshake_timeout: float | None = None,
    ) -> None:
        self._transport = transport
        self._ssl = ssl_object
        # OpenSSL objects and memory BIOs are not safe to use from two
        # threads at once, and two tasks' steps may run on two workers (a
        # parallel runtime): every touch of them holds this lock, never
        # across an await.
        self._ssl_lock = threading.Lock()
        self._incoming = incoming
        self._outgoing = outgoing
        self._server_hostname = server_hostname
        self._handshake_timeout = handshake_timeout  # seconds; None: no limit
        self._state = _State.OPEN
        self._handshook = False
        self._eof = False
        self._eof_sent = False
        self._received = 0  # chunks received from the transport so far
        self._handshake_lock = Lock("TLS handshake")
        self._send_lock = Lock("TLS transport send")
        self._receive_lock = Lock("TLS transport receive")
        self._init_receiver("TLS stream")
        self._send_guard = ConflictGuard(
            "another task is already sending on this TLS stream; send from one task at a "
            "time (hand the data over with a Channel, or hold a Lock around send_all)"
        )

    @classmethod
    def wrap(
        cls,
        stream: Any,
        *,
        ssl_context: ssl.SSLContext,
        server_side: bool = False,
        server_hostname: str | None = None,
        handshake_timeout: float | None = math.inf,
    ) -> TLSStream:
        """Start a TLS session over ``stream``; the handshake happens on first use.

        Not a coroutine: call ``await tls.do_handshake()`` to handshake
        now (and see certificate errors here), or let the first receive or
        send do it. The TLS stream owns ``stream`` from now on.

        Args:
            stream: a connected ``SocketStream`` (or any object with
                ``receive_some``, ``send_all`` and ``aclose``).
            ssl_context: e.g. ``ssl.create_default_context()`` for a client,
                or a context with ``load_cert_chain`` for a server.
            server_side: act as the server.
            server_hostname: (client) the name the certificate must match,
                also sent as SNI; required when the context checks
                hostnames.
            handshake_timeout: seconds the handshake may take, from the
                moment it starts; past them it raises ``TimeoutError`` and
                the stream is broken. ``math.inf`` (or None) for no limit.

        Raises:
            TypeError: ``ssl_context`` is not an ``ssl.SSLContext``,
                ``stream`` is not a stream, or ``handshake_timeout`` not a
                number.
            ValueError: the context is made for the other side (a
                ``PROTOCOL_TLS_CLIENT`` one on a server, say), a client
                context that checks hostnames got no ``server_hostname``,
                or ``handshake_timeout`` is not positive.
        """
        check_ssl_context(ssl_context, server_side=server_side, what="TLSStream.wrap()")
        limit = check_handshake_timeout(handshake_timeout, "TLSStream.wrap(handshake_timeout=...)")
        for method in ("receive_some", "send_all", "aclose"):
            if not callable(getattr(stream, method, None)):
                raise TypeError(
                    f"TLSStream.wrap() needs a stream with {method}(), got "
                    f"{type(stream).__name__}; pass a SocketStream"
                )
        if server_side and server_hostname is not None:
            raise ValueError(
                "TLSStream.wrap(server_side=True) takes no server_hostname; "
                "pass it to the client's wrap() instead"
            )
        if not server_side and ssl_context.check_hostname and not server_hostname:
            raise ValueError(
                "TLSStream.wrap() needs server_hostname=... for a client context that checks "
                "hostnames; pass the name the server's certificate is for"
            )
        incoming = ssl.MemoryBIO()
        outgoing = ssl.MemoryBIO()
        ssl_object = ssl_context.wrap_bio(
            incoming, outgoing, server_side=server_side, server_hostname=server_hostname
        )
        return cls(stream, ssl_object, incoming, outgoing, server_hostname, limit)

    # -- the state -------------------------------------------------------------

    @property
    def transport_stream(self) -> Any:
        """The stream the TLS session runs over."""
        return self._transport

    def _check_usable(self) -> None:
        state = self._state
        if state is _State.OPEN:
            return
        if state is _State.BROKEN:
            raise BrokenResourceError(
                "this TLS stream is broken by an earlier error (see that error); "
                "close it and reconnect"
            )
        if state is _State.UNWRAPPED:
            raise ClosedResourceError(
                "this TLS stream was unwrapped; use the transport stream unwrap() returned"
            )
        raise closed_error("TLS stream")

    _check_receive = _check_usable

    def _break(self) -> None:
        if self._state is _State.OPEN:
            self._state = _State.BROKEN

    # -- OpenSSL meets the transport -------------------------------------------

    async def _retry(
        self,
        fn: Callable[..., Any],
        *args: Any,
        wait_for_input: bool = True,
        eof_ok: bool = False,
    ) -> Any:
        """Call ``fn`` until it stops wanting input; see the module docstring.

        With ``eof_ok``, the end of the TLS stream (close_notify, or the
        transport's end) returns None instead of raising.
        """
        while True:
            want_read = False
            result: Any = None
            try:
                with self._ssl_lock:
                    result = fn(*args)
            except ssl.SSLWantReadError:
                want_read = True
            except ssl.SSLError as exc:
                if eof_ok and isinstance(exc, _EOF_ERRORS):
                    return None
                self._break()
                # Send the alert OpenSSL queued for the peer, if the transport lets us.
                try:
                    await self._flush()
                except (BrokenResourceError, ClosedResourceError):
                    pass
                raise self._explain(exc) from exc
            if self._outgoing.pending:
                await self._flush()
            if not want_read:
                return result
            if not wait_for_input:
                return None
            await self._fill()

    async def _flush(self) -> None:
        async with self._send_lock:
            with self._ssl_lock:
                data = self._outgoing.read()
            if not data:
                return
            try:
                await self._transport.send_all(data)
            except Cancelled:
                # A prefix of a TLS record went out: the session cannot go on.
                self._break()
                raise
            except ClosedResourceError:
                raise self._closed_under_us() from None
            except (BrokenResourceError, OSError) as exc:
                self._break()
                raise BrokenResourceError(
                    f"the transport under this TLS stream broke while sending ({_cause(exc)}); "
                    "close the stream and reconnect"
                ) from exc

    async def _fill(self) -> None:
        seen = self._received
        async with self._receive_lock:
            if seen != self._received:
                return  # another task received meanwhile: retry OpenSSL first
            try:
                data = await self._transport.receive_some(DEFAULT_RECEIVE_SIZE)
            except ClosedResourceError:
                raise self._closed_under_us() from None
            except (BrokenResourceError, OSError) as exc:
                self._break()
                raise BrokenResourceError(
                    f"the transport under this TLS stream broke while receiving ({_cause(exc)}); "
                    "close the stream and reconnect"
                ) from exc
            with self._ssl_lock:
                if data:
                    self._incoming.write(data)
                else:
                    self._incoming.write_eof()
            self._received += 1

    def _closed_under_us(self) -> ClosedResourceError:
        if self._state is _State.OPEN:
            self._break()
        return closed_under_error("TLS stream")

    def _explain(self, exc: ssl.SSLError) -> BaseException:
        """The error to raise for an OpenSSL failure, with a message that says what to do."""
        if isinstance(exc, ssl.SSLCertVerificationError):
            code = getattr(exc, "verify_code", None)
            detail = getattr(exc, "verify_message", None) or str(exc)
            holder = "client" if self.server_side else "server"
            message = certificate_message(code, detail, self._server_hostname, holder)
            clearer = ssl.SSLCertVerificationError(exc.errno, message)
            clearer.verify_code = code if code is not None else 0
            clearer.verify_message = detail
            clearer.reason = exc.reason
            clearer.library = exc.library
            return clearer
        if isinstance(exc, _EOF_ERRORS):
            return BrokenResourceError(
                "the peer closed the connection in the middle of the TLS handshake; "
                "check that it speaks TLS on this port and accepts this client"
            )
        return exc

    # -- handshake -------------------------------------------------------------

    async def do_handshake(self) -> None:
        """Do the TLS handshake now, if it has not happened yet.

        Receiving or sending does it implicitly; calling it first surfaces
        certificate errors at a known place. Idempotent: a second call (or a
        second task) waits for the first handshake. A cancellation point; a
        cancel in the middle of the handshake breaks the stream.

        Raises:
            ssl.SSLCertVerificationError: the peer's certificate is not
                trusted, or not valid for ``server_hostname`` (the message
                says which).
            ssl.SSLError: another TLS failure (no shared protocol, an alert
                from the peer...).
            BrokenResourceError: the connection failed during the handshake.
            ClosedResourceError: the stream was closed.
            TimeoutError: the handshake took longer than the
                ``handshake_timeout`` given to ``wrap`` (the stream is broken).
            Cancelled: the task was cancelled.
        """
        self._check_usable()
        await PASS
        await self._ensure_handshake()

    async def _ensure_handshake(self) -> None:
        if self._handshook:
            return
        limit = self._handshake_timeout
        if limit is None:
            await self._handshake()
            return
        failure: BaseException | None = None
        try:
            async with scope(timeout=limit, name="TLS handshake"):
                await self._handshake()
        except TimeoutError as exc:
            raise TimeoutError(
                f"the TLS handshake did not finish within handshake_timeout={limit:g} s; "
                "close the stream (it is broken) and reconnect"
            ) from exc
        except BaseExceptionGroup as group:
            # The scope groups what its block raised; the caller wants the
            # handshake's own error, as without a timeout. (Raised below,
            # outside this handler, so the group is not its context.)
            failure = group.exceptions[0] if len(group.exceptions) == 1 else group
        if failure is not None:
            raise failure

    async def _handshake(self) -> None:
        async with self._handshake_lock:
            if self._handshook:
                return
            self._check_usable()
            try:
                await self._retry(self._ssl.do_handshake)
            except Cancelled:
                self._break()  # half a handshake cannot be resumed
                raise
            self._handshook = True

    # -- data ------------------------------------------------------------------

    async def _receive_later(self, max_bytes: int) -> bytes:
        await self._ensure_handshake()
        if self._eof:
            return b""
        data: bytes | None = await self._retry(self._ssl.read, max_bytes, eof_ok=True)
        if data is None:
            # The end of the stream, with or without close_notify (see the
            # module docstring).
            self._eof = True
            return b""
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt and send all of ``data`` (doing the handshake first if needed).

        A cancellation point on entry and while waiting; a cancel after
        part of the ciphertext went out breaks the stream.

        Raises:
            TypeError: ``data`` is not bytes-like (a ``str``, say); raised
                before the handshake or anything else.
            ClosedResourceError: the stream was closed.
            BusyResourceError: another task is sending on this stream.
            BrokenResourceError: the connection broke, or the stream is
                broken by an earlier error.
            ssl.SSLError: the handshake (done here) failed.
            Cancelled: the task was cancelled.
        """
        data = check_data(data, "TLSStream.send_all()")
        with self._send_guard:
            self._check_usable()
            if self._eof_sent:
                raise eof_sent_error("TLS stream")
            wait = self._entry(False)
            if wait is not None:
                await wait
            await self._ensure_handshake()
            view = memoryview(data).cast("B")
            with view:
                for start in range(0, len(view), _WRITE_CHUNK):
                    self._check_usable()
                    await self._retry(self._ssl.write, view[start : start + _WRITE_CHUNK])

    async def send_eof(self) -> None:
        """Send close_notify and keep receiving: TLS 1.3's half-close.

        The peer reads end of stream; this end can still receive its reply.
        Calling it twice is harmless. A cancellation point.

        Raises:
            NotImplementedError: the session is older than TLS 1.3, where
                close_notify closes both directions.
            ClosedResourceError: the stream was closed.
            BusyResourceError: another task is sending on this stream.
            BrokenResourceError: the stream is broken.
            Cancelled: the task was cancelled.
        """
        with self._send_guard:
            self._check_usable()
            await PASS
            await self._ensure_handshake()
            if self._eof_sent:
                return
            version = self._ssl.version()
            if version != "TLSv1.3":
                raise NotImplementedError(
                    f"send_eof() needs TLS 1.3, and this session uses {version}, where "
                    "close_notify ends both directions; close the stream with aclose() instead"
                )
            self._eof_sent = True
            await self._retry(self._ssl.unwrap, wait_for_input=False)

    async def unwrap(self) -> tuple[Any, bytes]:
        """End the TLS session cleanly and hand the transport back.

        Sends close_notify and waits for the peer's. A cancellation point.

        Returns:
            ``(transport_stream, trailing)``: the stream under TLS, and the
            bytes already received past the peer's close_notify.

        Raises:
            BusyResourceError: another task is receiving or sending.
            BrokenResourceError: the peer closed without close_notify, or
                the stream broke.
            ClosedResourceError: the stream was closed.
            Cancelled: the task was cancelled (the stream is then broken).
        """
        with self._receive_guard, self._send_guard:
            self._check_usable()
            await PASS
            await self._ensure_handshake()
            try:
                await self._retry(self._ssl.unwrap)
            except Cancelled:
                self._break()
                raise
            except BrokenResourceError as exc:
                if isinstance(exc.__cause__, _EOF_ERRORS):
                    raise BrokenResourceError(
                        "unwrap() needs the peer's close_notify, and the peer closed the "
                        "connection without one; close the stream instead"
                    ) from exc.__cause__
                raise
            self._state = _State.UNWRAPPED
            with self._ssl_lock:
                trailing = bytes(self._buffer) + self._incoming.read()
            self._buffer.clear()
            return self._transport, trailing

    async def aclose(self) -> None:
        """Send close_notify (without waiting for the reply) and close the transport.

        Idempotent. A cancellation point, but the transport is closed even
        when the task is cancelled. Errors while saying goodbye are ignored.
        """
        if self._state in (_State.CLOSED, _State.UNWRAPPED):
            await PASS
            return
        polite = (
            self._state is _State.OPEN
            and self._handshook
            and not self._eof_sent  # close_notify already went out
            and not self._send_lock.locked()
        )
        self._state = _State.CLOSED
        try:
            if polite:
                try:
                    await self._retry(self._ssl.unwrap, wait_for_input=False)
                except (BrokenResourceError, ClosedResourceError, ssl.SSLError, OSError):
                    pass
        finally:
            await self._transport.aclose()

    def close(self) -> None:
        """Close the transport at once, without close_notify (sync code's way out)."""
        if self._state not in (_State.CLOSED, _State.UNWRAPPED):
            self._state = _State.CLOSED
            close = getattr(self._transport, "close", None)
            if callable(close):
                close()

    # -- what the handshake decided ------------------------------------------------

    def getpeercert(self, binary_form: bool = False) -> Any:
        """The peer's certificate, as ``ssl.SSLSocket.getpeercert`` gives it.

        None if the peer sent none (a server only gets a client's
        certificate when it asked for one).

        Raises:
            ValueError: the handshake has not happened yet.
        """
        if not self._handshook:
            raise ValueError(
                "getpeercert() needs the TLS handshake done, and it has not happened yet; "
                "await tls.do_handshake() first"
            )
        return self._ssl.getpeercert(binary_form)

    def selected_alpn_protocol(self) -> str | None:
        """The protocol ALPN chose (e.g. ``"h2"``, ``"http/1.1"``), or None."""
        return self._ssl.selected_alpn_protocol()

    def version(self) -> str | None:
        """The TLS version in use (e.g. ``"TLSv1.3"``), or None before the handshake."""
        return self._ssl.version()

    def cipher(self) -> tuple[str, str, int] | None:
        """The cipher in use, as ``(name, protocol, secret_bits)``."""
        return self._ssl.cipher()

    @property
    def server_side(self) -> bool:
        """Whether this end is the server."""
        return self._ssl.server_side

    @property
    def server_hostname(self) -> str | None:
        """The name the client checks the certificate against (None on a server)."""
        return self._server_hostname

    def __repr__(self) -> str:
        side = "server" if self.server_side else "client"
        return f"<TLSStream {side} {self._state.value} over {self._transport!r}>"
