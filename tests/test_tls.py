"""TLSStream against real peers: itself, Python's blocking ssl, curl and openssl."""

from __future__ import annotations

import datetime
import functools
import inspect
import logging
import math
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import asyncop
from asyncop import BrokenResourceError, BusyResourceError, ClosedResourceError
from asyncop.net import (
    SocketStream,
    TLSStream,
    open_tcp_listeners,
    open_tcp_stream,
    serve_listeners,
    serve_tcp,
)
from asyncop.testing import memory_stream_pair

from ._net import Status, finish

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.timeout(60)

HOST = "127.0.0.1"


class Certs:
    """A test authority, a certificate for localhost/127.0.0.1, and contexts that use them."""

    def __init__(self, tmp: Path) -> None:
        self.ca = trustme.CA()
        self.cert = self.ca.issue_cert("localhost", "127.0.0.1")
        self.ca_file = tmp / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        self.chain_file = tmp / "chain.pem"
        self.cert.private_key_and_cert_chain_pem.write_to_path(str(self.chain_file))

    def server_context(self, alpn: list[str] | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.cert.configure_cert(context)
        if alpn:
            context.set_alpn_protocols(alpn)
        return context

    def client_context(self, alpn: list[str] | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        if alpn:
            context.set_alpn_protocols(alpn)
        return context


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return Certs(tmp_path)


async def start_server(
    scope: asyncop.AsyncOperation, handler: Any, context: ssl.SSLContext
) -> tuple[asyncop.AsyncOperation, int]:
    """A TLS server in ``scope``; returns it and its port."""
    listeners = await open_tcp_listeners(0, host=HOST)
    status = Status()
    server = scope.spawn(
        functools.partial(
            serve_listeners, handler, listeners, ssl_context=context, task_status=status
        )
    )
    await status.event.wait_async()
    port: int = listeners[0].socket.getsockname()[1]
    return server, port


class ThreadPeer:
    """Run a blocking function with a listening socket in a thread; keep its result."""

    def __init__(self, body: Callable[[socket.socket], Any]) -> None:
        self.listener = socket.create_server((HOST, 0))
        self.port = self.listener.getsockname()[1]
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(body,))
        self.thread.start()

    def _run(self, body: Callable[[socket.socket], Any]) -> None:
        try:
            self.result = body(self.listener)
        except BaseException as exc:
            self.error = exc

    def join(self) -> Any:
        self.thread.join(20)
        assert not self.thread.is_alive()
        self.listener.close()
        if self.error is not None:
            raise self.error
        return self.result


# -- asyncop on both ends --------------------------------------------------------------


def test_client_and_server_exchange_data_over_tls(runtime: asyncop.Runtime, certs: Certs) -> None:
    seen: dict[str, Any] = {}

    async def handler(stream: Any) -> None:
        seen["server_version"] = stream.version()
        line = await stream.receive_until(b"\n", 1000)
        await stream.send_all(line.upper() + b"\n")
        await stream.send_all(await stream.receive_exactly(5))

    async def main() -> list[bytes]:
        async with asyncop.scope() as s:
            server, port = await start_server(s, handler, certs.server_context())
            stream = await open_tcp_stream("localhost", port, ssl_context=certs.client_context())
            async with stream:
                assert isinstance(stream, TLSStream)
                seen["client_version"] = stream.version()
                seen["subject"] = stream.getpeercert()["subjectAltName"]
                await stream.send_all(b"hello tls\nabcde")
                got = [await stream.receive_until(b"\n", 1000), await stream.receive_exactly(5)]
                got.append(await stream.receive_some())  # the server closed: end of stream
            server.cancel()
        return got

    assert runtime.run(main) == [b"HELLO TLS", b"abcde", b""]
    assert seen["client_version"] == seen["server_version"] == "TLSv1.3"
    assert ("DNS", "localhost") in seen["subject"]
    finish(runtime)


def test_large_transfers_both_ways_at_once_from_two_tasks(
    runtime: asyncop.Runtime, certs: Certs
) -> None:
    payload = bytes(range(256)) * 20_000  # 5 MB

    async def handler(stream: Any) -> None:
        async with asyncop.scope() as s:
            s.spawn(stream.send_all, payload)
            received = await stream.receive_exactly(len(payload))
        assert received == payload
        await stream.send_all(b"!")

    async def main() -> bytes:
        async with asyncop.scope() as s:
            server, port = await start_server(s, handler, certs.server_context())
            stream: Any = await open_tcp_stream(HOST, port, ssl_context=certs.client_context())
            async with stream, asyncop.scope() as inner:
                sender = inner.spawn(stream.send_all, payload)
                got = await stream.receive_exactly(len(payload))
                await sender
                done = await stream.receive_exactly(1)
            server.cancel()
        assert got == payload
        return bytes(done)

    assert runtime.run(main) == b"!"
    finish(runtime)


def test_two_tasks_receiving_on_one_tls_stream_get_busy_resource_error(
    runtime: asyncop.Runtime, certs: Certs
) -> None:
    async def handler(stream: Any) -> None:
        await stream.receive_some()

    async def main() -> None:
        async with asyncop.scope() as s:
            server, port = await start_server(s, handler, certs.server_context())
            stream: Any = await open_tcp_stream(HOST, port, ssl_context=certs.client_context())
            async with stream, asyncop.scope() as inner:
                first = inner.spawn(stream.receive_some)
                await asyncop.sleep(0.05)
                with pytest.raises(BusyResourceError):
                    await stream.receive_some()
                await stream.send_all(b"bye")
                assert await first == b""
            server.cancel()

    runtime.run(main)
    finish(runtime)


def test_send_eof_half_closes_a_tls_1_3_stream(runtime: asyncop.Runtime, certs: Certs) -> None:
    async def handler(stream: Any) -> None:
        request = b"".join([chunk async for chunk in stream])  # until the client's EOF
        await stream.send_all(b"%d bytes" % len(request))

    async def main() -> bytes:
        async with asyncop.scope() as s:
            server, port = await start_server(s, handler, certs.server_context())
            stream: Any = await open_tcp_stream(HOST, port, ssl_context=certs.client_context())
            async with stream:
                await stream.send_all(b"x" * 100_000)
                await stream.send_eof()
                await stream.send_eof()  # harmless twice
                with pytest.raises(ClosedResourceError, match="send_eof"):
                    await stream.send_all(b"more")
                reply = b"".join([chunk async for chunk in stream])
            server.cancel()
        return reply

    assert runtime.run(main) == b"100000 bytes"
    finish(runtime)


def test_send_eof_is_refused_below_tls_1_3(runtime: asyncop.Runtime, certs: Certs) -> None:
    async def handler(stream: Any) -> None:
        await stream.receive_some()

    async def main() -> None:
        context = certs.client_context()
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        async with asyncop.scope() as s:
            server, port = await start_server(s, handler, certs.server_context())
            stream: Any = await open_tcp_stream(HOST, port, ssl_context=context)
            async with stream:
                assert stream.version() == "TLSv1.2"
                with pytest.raises(NotImplementedError, match=r"TLS 1\.3"):
                    await stream.send_eof()
            server.cancel()

    runtime.run(main)
    finish(runtime)


def test_unwrap_hands_back_the_transport_for_plaintext(
    runtime: asyncop.Runtime, certs: Certs
) -> None:
    async def handler(stream: Any) -> None:
        assert await stream.receive_some() == b"unwrap please"
        transport, trailing = await stream.unwrap()
        assert trailing == b""
        await transport.send_all(b"plain again")

    async def main() -> bytes:
        async with asyncop.scope() as s:
            server, port = await start_server(s, handler, certs.server_context())
            stream: Any = await open_tcp_stream(HOST, port, ssl_context=certs.client_context())
            await stream.send_all(b"unwrap please")
            transport, trailing = await stream.unwrap()
            assert isinstance(transport, SocketStream)
            with pytest.raises(ClosedResourceError, match="unwrapped"):
                await stream.receive_some()
            async with transport:
                data = trailing + await transport.receive_exactly(
                    len(b"plain again") - len(trailing)
                )
            server.cancel()
        return data

    assert runtime.run(main) == b"plain again"
    finish(runtime)


def test_a_cancelled_handshake_breaks_the_stream_and_leaves_nothing(
    runtime: asyncop.Runtime, certs: Certs
) -> None:
    async def main() -> None:
        with socket.create_server((HOST, 0)) as silent:  # accepts, never answers
            raw = await open_tcp_stream(HOST, silent.getsockname()[1])
            tls = TLSStream.wrap(
                raw, ssl_context=certs.client_context(), server_hostname="localhost"
            )
            with pytest.raises(TimeoutError):
                async with asyncop.scope(timeout=0.1):
                    await tls.do_handshake()
            with pytest.raises(BrokenResourceError):
                await tls.send_all(b"x")
            await tls.aclose()
            assert raw.socket.fileno() == -1

    runtime.run(main)
    finish(runtime)


def test_tls_runs_over_another_tls_stream(runtime: asyncop.Runtime, certs: Certs) -> None:
    async def handler(outer: Any) -> None:
        inner = TLSStream.wrap(outer, ssl_context=certs.server_context(), server_side=True)
        async with inner:
            await inner.send_all(b"inner: " + await inner.receive_some())

    async def main() -> bytes:
        async with asyncop.scope() as s:
            server, port = await start_server(s, handler, certs.server_context())
            outer: Any = await open_tcp_stream(HOST, port, ssl_context=certs.client_context())
            inner = TLSStream.wrap(
                outer, ssl_context=certs.client_context(), server_hostname="localhost"
            )
            with pytest.raises(ValueError, match="handshake"):
                inner.getpeercert()
            async with inner:
                await inner.send_all(b"hello")
                assert inner.getpeercert()["subjectAltName"][0] == ("DNS", "localhost")
                reply = await inner.receive_exactly(len(b"inner: hello"))
            server.cancel()
        return bytes(reply)

    assert runtime.run(main) == b"inner: hello"
    finish(runtime)


def test_wrap_checks_its_arguments(certs: Certs) -> None:
    a, b = socket.socketpair()
    with a, b:
        stream = SocketStream(a)
        with pytest.raises(TypeError, match="SSLContext"):
            TLSStream.wrap(stream, ssl_context="tls")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="receive_some"):
            TLSStream.wrap(b, ssl_context=certs.client_context(), server_hostname="x")
        with pytest.raises(ValueError, match="server_hostname"):
            TLSStream.wrap(stream, ssl_context=certs.client_context())
        with pytest.raises(ValueError, match="server_side"):
            TLSStream.wrap(
                stream, ssl_context=certs.server_context(), server_side=True, server_hostname="x"
            )


# -- what a server refuses, and the handshake timeout ---------------------------------


def refusal(runtime: asyncop.Runtime, fn: Callable[[], Any]) -> BaseException:
    """What ``fn`` raised at once; fails the test if it went on to serve instead."""
    op = runtime.spawn(fn)
    try:
        result = op.wait(5)
    except TimeoutError:
        op.cancel()
        op.wait(10)
        pytest.fail("the server went on serving instead of refusing its arguments")
    assert result.error is not None
    return result.error


async def never_called(stream: Any) -> None:
    raise AssertionError("no handler may run for a server that refused its arguments")


@pytest.mark.parametrize(
    ("context", "error", "names"),
    [
        (lambda certs: "x", TypeError, "ssl.SSLContext"),
        (lambda certs: certs.client_context(), ValueError, "PROTOCOL_TLS_CLIENT"),
        (lambda certs: ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), ValueError, "client-side"),
    ],
    ids=["not-a-context", "client-context", "bare-client-context"],
)
def test_a_server_refuses_a_context_that_cannot_serve_before_listening(
    runtime: asyncop.Runtime, certs: Certs, context: Any, error: type, names: str
) -> None:
    bad = context(certs)
    raised = refusal(
        runtime, functools.partial(serve_tcp, never_called, 0, host=HOST, ssl_context=bad)
    )
    assert isinstance(raised, error) and names in str(raised), raised
    assert "serve_tcp()" in str(raised)
    listeners = runtime.run(functools.partial(open_tcp_listeners, 0, host=HOST))
    raised = refusal(
        runtime, functools.partial(serve_listeners, never_called, listeners, ssl_context=bad)
    )
    assert isinstance(raised, error) and "serve_listeners()" in str(raised), raised
    # A refused call changed nothing: the listeners are still the caller's, open.
    assert all(listener.socket.fileno() >= 0 for listener in listeners)
    for listener in listeners:
        listener.close()
    finish(runtime)


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, ValueError), (-1.0, ValueError), (math.nan, ValueError), ("10", TypeError)],
)
def test_a_bad_handshake_timeout_is_refused_before_listening(
    runtime: asyncop.Runtime, certs: Certs, value: Any, error: type
) -> None:
    serve = functools.partial(
        serve_tcp,
        never_called,
        0,
        host=HOST,
        ssl_context=certs.server_context(),
        handshake_timeout=value,
    )
    raised = refusal(runtime, serve)
    assert isinstance(raised, error) and "handshake_timeout" in str(raised), raised
    a, _b = memory_stream_pair()
    with pytest.raises(error, match="handshake_timeout"):
        TLSStream.wrap(
            a, ssl_context=certs.server_context(), server_side=True, handshake_timeout=value
        )
    finish(runtime)


def test_servers_give_a_tls_handshake_ten_seconds_by_default() -> None:
    for serve in (serve_tcp, serve_listeners):
        assert inspect.signature(serve).parameters["handshake_timeout"].default == 10.0


@pytest.mark.timeout(30)
def test_a_tls_server_drops_clients_that_never_finish_the_handshake(
    runtime: asyncop.Runtime, certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    stalled_clients = 50

    async def handler(stream: Any) -> None:
        await stream.send_all(b"served")

    async def main() -> list[bytes]:
        async with asyncop.scope() as s:
            listeners = await open_tcp_listeners(0, host=HOST)
            status = Status()
            serve = functools.partial(
                serve_listeners,
                handler,
                listeners,
                ssl_context=certs.server_context(),
                handshake_timeout=0.3,
                task_status=status,
            )
            server = s.spawn(serve)
            await status.event.wait_async()
            port = listeners[0].socket.getsockname()[1]
            stalled = [await open_tcp_stream(HOST, port) for _ in range(stalled_clients)]
            try:
                # Each connects and says nothing: the server hangs up on it.
                ends = [await client.receive_some() for client in stalled]
                # A client that does its handshake is still served.
                tls = await open_tcp_stream("localhost", port, ssl_context=certs.client_context())
                async with tls:
                    ends.append(await tls.receive_exactly(6))
            finally:
                for client in stalled:
                    await client.aclose()
            server.cancel()
        return ends

    with caplog.at_level(logging.WARNING, logger="asyncop.net"):
        ends = runtime.run(main)
    assert ends == [b""] * stalled_clients + [b"served"]
    dropped = [r for r in caplog.records if "handshake_timeout" in r.getMessage()]
    assert len(dropped) == stalled_clients
    finish(runtime)


def test_a_handshake_timeout_breaks_a_stalled_handshake_in_virtual_time(
    vruntime: asyncop.Runtime, certs: Certs
) -> None:
    async def main() -> list[Any]:
        seen: list[Any] = []
        for first_use in ("do_handshake", "receive_some"):
            a, silent = memory_stream_pair()  # the peer never answers
            tls = TLSStream.wrap(
                a,
                ssl_context=certs.client_context(),
                server_hostname="localhost",
                handshake_timeout=10,
            )
            start = asyncop.current_time()
            with pytest.raises(TimeoutError, match="handshake_timeout=10 s"):
                await getattr(tls, first_use)()
            seen.append(asyncop.current_time() - start)
            with pytest.raises(BrokenResourceError):
                await tls.send_all(b"after the timeout")
            await tls.aclose()
            await silent.aclose()
        return seen

    assert vruntime.run(main) == [10.0, 10.0]


def test_an_infinite_handshake_timeout_sets_no_limit(
    vruntime: asyncop.Runtime, certs: Certs
) -> None:
    async def main() -> str:
        a, silent = memory_stream_pair()
        tls = TLSStream.wrap(
            a,
            ssl_context=certs.client_context(),
            server_hostname="localhost",
            handshake_timeout=math.inf,
        )
        with pytest.raises(TimeoutError) as info:
            async with asyncop.scope(timeout=3600):
                await tls.do_handshake()
        await tls.aclose()
        await silent.aclose()
        return str(info.value)

    assert "handshake_timeout" not in vruntime.run(main)  # the scope's own deadline fired


def test_a_handshake_that_fails_within_its_timeout_raises_its_own_error(
    vruntime: asyncop.Runtime, certs: Certs
) -> None:
    async def main() -> tuple[BaseException | None, BaseException | None]:
        a, b = memory_stream_pair()
        server = TLSStream.wrap(
            b, ssl_context=certs.server_context(), server_side=True, handshake_timeout=10
        )
        client = TLSStream.wrap(
            a,
            ssl_context=ssl.create_default_context(),  # does not trust the test authority
            server_hostname="localhost",
            handshake_timeout=10,
        )
        async with asyncop.scope() as s:
            sides = [s.spawn(tls.do_handshake, supervise=True) for tls in (server, client)]
        for tls in (server, client):
            await tls.aclose()
        return sides[0].error, sides[1].error

    server_error, client_error = vruntime.run(main)
    assert type(client_error) is ssl.SSLCertVerificationError  # not inside a group
    assert "not trusted" in str(client_error)
    assert isinstance(server_error, ssl.SSLError)
    assert not isinstance(server_error, BaseExceptionGroup)


def test_tls_runs_over_a_memory_stream_pair(vruntime: asyncop.Runtime, certs: Certs) -> None:
    async def server(stream: Any) -> None:
        tls = TLSStream.wrap(stream, ssl_context=certs.server_context(), server_side=True)
        async with tls:
            await tls.send_all(b"hello " + await tls.receive_until(b"\n", 100))

    async def main() -> bytes:
        a, b = memory_stream_pair()
        async with asyncop.scope() as s:
            s.spawn(server, b)
            tls = TLSStream.wrap(a, ssl_context=certs.client_context(), server_hostname="localhost")
            async with tls:
                await tls.send_all(b"memory\n")
                return b"".join([chunk async for chunk in tls])

    assert vruntime.run(main) == b"hello memory"


# -- certificate checks ------------------------------------------------------------------


def test_an_untrusted_certificate_fails_with_a_clear_error(
    runtime: asyncop.Runtime, certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    async def handler(stream: Any) -> None:
        raise AssertionError("the handler must not run after a failed handshake")

    async def main() -> ssl.SSLCertVerificationError:
        async with asyncop.scope() as s:
            server, port = await start_server(s, handler, certs.server_context())
            stranger = ssl.create_default_context()  # does not trust the test authority
            with pytest.raises(ssl.SSLCertVerificationError) as info:
                await open_tcp_stream("localhost", port, ssl_context=stranger)
            await asyncop.sleep(0.1)
            server.cancel()
        return info.value

    with caplog.at_level(logging.WARNING, logger="asyncop.net"):
        error = runtime.run(main)
    assert "certificate of 'localhost' is not trusted" in str(error)
    assert "no authority this context knows issued it" in str(error)
    assert "load_verify_locations" in str(error)
    assert error.verify_code == 20  # unable to get local issuer certificate
    assert any("TLS handshake" in r.getMessage() for r in caplog.records)
    finish(runtime)


def test_a_hostname_mismatch_fails_naming_the_host(runtime: asyncop.Runtime, certs: Certs) -> None:
    async def handler(stream: Any) -> None:
        await stream.receive_some()

    async def main() -> str:
        async with asyncop.scope() as s:
            server, port = await start_server(s, handler, certs.server_context())
            with pytest.raises(ssl.SSLCertVerificationError) as info:
                await open_tcp_stream(
                    HOST, port, ssl_context=certs.client_context(), server_hostname="example.org"
                )
            server.cancel()
        return str(info.value)

    message = runtime.run(main)
    assert "not valid for 'example.org'" in message
    finish(runtime)


def certificate_error(
    runtime: asyncop.Runtime, server_context: ssl.SSLContext, client_context: ssl.SSLContext
) -> ssl.SSLCertVerificationError:
    """The error ``open_tcp_stream("localhost", ...)`` raises against a server with this context."""

    async def handler(stream: Any) -> None:
        raise AssertionError("the handler must not run after a failed handshake")

    async def main() -> ssl.SSLCertVerificationError:
        async with asyncop.scope() as s:
            server, port = await start_server(s, handler, server_context)
            with pytest.raises(ssl.SSLCertVerificationError) as info:
                await open_tcp_stream("localhost", port, ssl_context=client_context)
            server.cancel()
        return info.value

    error = runtime.run(main)
    finish(runtime)
    return error


def server_context_for(cert: Any) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    return context


def server_context_from_pems(tmp: Path, *pems: Any) -> ssl.SSLContext:
    """A server context whose key and chain are these PEM blobs, in this order."""
    path = tmp / "server.pem"
    path.write_bytes(b"".join(pem.bytes() for pem in pems))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(path))
    return context


DAY = datetime.timedelta(days=1)


def test_an_expired_certificate_says_it_expired_not_that_it_is_untrusted(
    runtime: asyncop.Runtime, certs: Certs
) -> None:
    now = datetime.datetime.now(datetime.UTC)
    expired = certs.ca.issue_cert("localhost", not_before=now - 10 * DAY, not_after=now - DAY)
    error = certificate_error(runtime, server_context_for(expired), certs.client_context())
    message = str(error)
    assert "the certificate of 'localhost' has expired" in message
    assert "renew" in message and "clock" in message
    assert "not trusted" not in message and "load_verify_locations" not in message
    assert (error.verify_code, error.verify_message) == (10, "certificate has expired")


def test_a_certificate_not_valid_yet_points_at_the_clock(
    runtime: asyncop.Runtime, certs: Certs
) -> None:
    now = datetime.datetime.now(datetime.UTC)
    early = certs.ca.issue_cert("localhost", not_before=now + DAY, not_after=now + 10 * DAY)
    error = certificate_error(runtime, server_context_for(early), certs.client_context())
    assert "the certificate of 'localhost' is not valid yet" in str(error)
    assert "clock" in str(error) and "not trusted" not in str(error)
    assert error.verify_code == 9


def test_a_self_signed_certificate_is_named_as_such(
    runtime: asyncop.Runtime, certs: Certs, tmp_path: Path
) -> None:
    # The authority's own certificate, which signs itself, as the server's.
    server = server_context_from_pems(tmp_path, certs.ca.private_key_pem, certs.ca.cert_pem)
    error = certificate_error(runtime, server, ssl.create_default_context())
    assert "the certificate of 'localhost' is self-signed" in str(error)
    assert "load_verify_locations" in str(error)
    assert error.verify_code == 18


def test_a_chain_ending_in_an_unknown_root_says_to_trust_the_root(
    runtime: asyncop.Runtime, certs: Certs, tmp_path: Path
) -> None:
    chain = [certs.cert.private_key_pem, *certs.cert.cert_chain_pems, certs.ca.cert_pem]
    server = server_context_from_pems(tmp_path, *chain)
    error = certificate_error(runtime, server, ssl.create_default_context())
    assert "chains up to a self-signed root" in str(error)
    assert error.verify_code == 19


def test_a_rarer_verify_failure_quotes_openssl(runtime: asyncop.Runtime, certs: Certs) -> None:
    client = certs.client_context()
    client.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF  # and no revocation list is loaded
    error = certificate_error(runtime, certs.server_context(), client)
    message = str(error)
    assert "verify code 3: unable to get certificate CRL" in message
    assert "not trusted" not in message
    assert error.verify_code == 3


def test_alpn_picks_the_protocol_both_sides_speak(runtime: asyncop.Runtime, certs: Certs) -> None:
    chosen: list[str | None] = []

    async def handler(stream: Any) -> None:
        await stream.do_handshake()
        chosen.append(stream.selected_alpn_protocol())

    async def main() -> None:
        async with asyncop.scope() as s:
            server, port = await start_server(s, handler, certs.server_context(alpn=["http/1.1"]))
            stream: Any = await open_tcp_stream(
                HOST, port, ssl_context=certs.client_context(alpn=["h2", "http/1.1"])
            )
            async with stream:
                chosen.append(stream.selected_alpn_protocol())
                assert await stream.receive_some() == b""
            server.cancel()

    runtime.run(main)
    assert chosen == ["http/1.1", "http/1.1"]
    finish(runtime)


# -- Python's blocking ssl as the peer --------------------------------------------------


def test_client_against_a_blocking_ssl_server_that_closes_without_close_notify(
    runtime: asyncop.Runtime, certs: Certs
) -> None:
    def serve(listener: socket.socket) -> bytes:
        raw, _ = listener.accept()
        with certs.server_context().wrap_socket(raw, server_side=True) as tls:
            request = tls.recv(100)
            tls.sendall(b"reply to " + request)
        # SSLSocket.close() sends no close_notify: a bare TCP close.
        return request

    peer = ThreadPeer(serve)

    async def main() -> list[bytes]:
        stream: Any = await open_tcp_stream(HOST, peer.port, ssl_context=certs.client_context())
        async with stream:
            await stream.send_all(b"ping")
            return [chunk async for chunk in stream]  # ends quietly: treated as EOF

    assert b"".join(runtime.run(main)) == b"reply to ping"
    assert peer.join() == b"ping"
    finish(runtime)


def test_client_sees_a_clean_close_notify_as_end_of_stream(
    runtime: asyncop.Runtime, certs: Certs
) -> None:
    def serve(listener: socket.socket) -> None:
        raw, _ = listener.accept()
        tls = certs.server_context().wrap_socket(raw, server_side=True)
        tls.sendall(b"goodbye")
        tls.unwrap().close()  # close_notify first

    peer = ThreadPeer(serve)

    async def main() -> list[bytes]:
        stream: Any = await open_tcp_stream(HOST, peer.port, ssl_context=certs.client_context())
        async with stream:
            got = [await stream.receive_exactly(7), await stream.receive_some()]
            got.append(await stream.receive_some())
            return got

    assert runtime.run(main) == [b"goodbye", b"", b""]
    peer.join()
    finish(runtime)


def test_aclose_sends_close_notify_to_a_blocking_ssl_client(
    runtime: asyncop.Runtime, certs: Certs
) -> None:
    results: list[Any] = []

    def client(port: int) -> None:
        raw = socket.create_connection((HOST, port), timeout=10)
        context = certs.client_context()
        with context.wrap_socket(
            raw, server_hostname="localhost", suppress_ragged_eofs=False
        ) as tls:
            tls.sendall(b"question")
            data = b""
            while chunk := tls.recv(100):  # a ragged EOF would raise SSLEOFError
                data += chunk
            results.append(data)

    async def handler(stream: Any) -> None:
        question = await stream.receive_some()
        await stream.send_all(b"answer to " + question)
        # returning closes the stream: close_notify, then the TCP close

    async def main() -> None:
        async with asyncop.scope() as s:
            server, port = await start_server(s, handler, certs.server_context())
            await asyncop.spawn_blocking(client, port)
            server.cancel()

    runtime.run(main)
    assert results == [b"answer to question"]
    finish(runtime)


# -- curl and openssl as peers --------------------------------------------------------


needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


async def http_handler(stream: Any) -> None:
    head = await stream.receive_until(b"\r\n\r\n", 65536)
    path = head.split(b" ")[1]
    body = b"you asked for " + path + b" over " + str(stream.selected_alpn_protocol()).encode()
    await stream.send_all(
        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
    )


@needs_curl
def test_curl_fetches_a_page_over_tls_with_alpn(runtime: asyncop.Runtime, certs: Certs) -> None:
    async def main() -> subprocess.CompletedProcess[str]:
        async with asyncop.scope() as s:
            server, port = await start_server(
                s, http_handler, certs.server_context(alpn=["h2", "http/1.1"])
            )
            done: subprocess.CompletedProcess[str] = await asyncop.spawn_blocking(
                functools.partial(
                    subprocess.run,
                    [
                        "curl",
                        "-sS",
                        "--http1.1",
                        "--cacert",
                        str(certs.ca_file),
                        f"https://localhost:{port}/page",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=30,
                )
            )
            server.cancel()
        return done

    done = runtime.run(main)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "you asked for /page over http/1.1"
    finish(runtime)


@needs_curl
def test_curl_refuses_a_certificate_it_does_not_trust(
    runtime: asyncop.Runtime, certs: Certs
) -> None:
    async def main() -> subprocess.CompletedProcess[str]:
        async with asyncop.scope() as s:
            server, port = await start_server(s, http_handler, certs.server_context())
            done: subprocess.CompletedProcess[str] = await asyncop.spawn_blocking(
                functools.partial(
                    subprocess.run,
                    ["curl", "-sS", f"https://localhost:{port}/"],
                    capture_output=True,
                    text=True,
                    timeout=30,
                )
            )
            server.cancel()
        return done

    done = runtime.run(main)
    assert done.returncode == 60, done.stderr  # peer certificate cannot be authenticated
    finish(runtime)


@needs_openssl
def test_openssl_s_client_talks_to_the_server(runtime: asyncop.Runtime, certs: Certs) -> None:
    async def handler(stream: Any) -> None:
        line = await stream.receive_until(b"\n", 100)
        await stream.send_all(
            b"echo: " + line + b" via " + str(stream.selected_alpn_protocol()).encode() + b"\n"
        )

    async def main() -> subprocess.CompletedProcess[str]:
        async with asyncop.scope() as s:
            server, port = await start_server(s, handler, certs.server_context(alpn=["http/1.1"]))
            done: subprocess.CompletedProcess[str] = await asyncop.spawn_blocking(
                functools.partial(
                    subprocess.run,
                    [
                        "openssl",
                        "s_client",
                        "-connect",
                        f"{HOST}:{port}",
                        "-servername",
                        "localhost",
                        "-CAfile",
                        str(certs.ca_file),
                        "-verify_return_error",
                        "-alpn",
                        "http/1.1",
                        "-quiet",
                    ],
                    input="hello openssl\n",
                    capture_output=True,
                    text=True,
                    timeout=30,
                )
            )
            server.cancel()
        return done

    done = runtime.run(main)
    assert "echo: hello openssl via http/1.1" in done.stdout, done.stderr
    finish(runtime)


@pytest.fixture
def s_server(certs: Certs) -> Iterator[int]:
    """``openssl s_server -rev`` (it sends each line back reversed) on a free port."""
    with socket.create_server((HOST, 0)) as probe:
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [
            "openssl",
            "s_server",
            "-accept",
            f"{HOST}:{port}",
            "-cert",
            str(certs.chain_file),
            "-alpn",
            "http/1.1",
            "-rev",
            "-naccept",
            "1",
            "-quiet",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:  # listening once the port cannot be bound (no connection spent)
            with socket.socket() as probe:
                try:
                    probe.bind((HOST, port))
                except OSError:
                    break
            assert time.monotonic() < deadline, "openssl s_server did not start"
            time.sleep(0.05)
        yield port
    finally:
        process.kill()
        process.wait(10)


@needs_openssl
def test_client_against_openssl_s_server(
    runtime: asyncop.Runtime, certs: Certs, s_server: int
) -> None:
    async def main() -> tuple[bytes, str | None]:
        context = certs.client_context(alpn=["http/1.1"])
        stream: Any = await open_tcp_stream(HOST, s_server, ssl_context=context)
        async with stream:
            await stream.send_all(b"stressed\n")
            reply = await stream.receive_until(b"\n", 100)
            return reply, stream.selected_alpn_protocol()

    reply, alpn = runtime.run(main)
    assert reply.strip() == b"desserts"
    assert alpn == "http/1.1"
    finish(runtime)
