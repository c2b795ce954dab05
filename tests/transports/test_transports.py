"""lmclient's own HTTP/1.1 transports over real sockets (the sans-I/O parser:
tests/wire/test_http11.py).

`ScriptedServer` (`tests.scripted_server`) answers each request on 127.0.0.1 with the next
scripted reply (bytes, a close, or silence), and records what it received and how many
connections it accepted, so each test can say exactly what went over the wire.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import msgspec
import pytest
import respx

import lmclient
from lmclient._params import Timeouts
from lmclient._request import PreparedRequest
from lmclient._transports import common
from lmclient._transports.aio import AsyncTransport
from lmclient._transports.common import PatchWatch, RespxMocks
from lmclient._transports.protocol import AsyncConnection
from lmclient._transports.sync import SyncTransport
from lmclient.testing import FakeLLM
from tests import scripted_server
from tests.scripted_server import (
    BODY,
    COMPLETION,
    HEADERS,
    LIMIT,
    Reply,
    ScriptedServer,
    chunked,
    ok,
    post,
)

TIMEOUTS = Timeouts(5.0, 5.0, 5.0, 5.0)
SHORT = Timeouts(5.0, 0.3, 5.0, 5.0)  # for the tests that wait for a read timeout on purpose
script = scripted_server.script  # the scripted server fixture
sync = scripted_server.sync  # the transports, closed after each test
aio = scripted_server.aio


def send(
    transport: SyncTransport,
    url: str,
    *,
    timeouts: Timeouts = TIMEOUTS,
    max_bytes: int = LIMIT,
    deadline_at: float | None = None,
) -> common.RawResponse:
    return transport.send(post(url), timeouts, max_bytes, deadline_at)


async def asend(
    transport: AsyncTransport,
    url: str,
    *,
    timeouts: Timeouts = TIMEOUTS,
    max_bytes: int = LIMIT,
    deadline_at: float | None = None,
) -> common.RawResponse:
    return await transport.send(post(url), timeouts, max_bytes, deadline_at)


# -- the sync transport over sockets -------------------------------------------------------------


def test_sends_the_exact_request_and_reads_a_sized_body(script: Any, sync: SyncTransport) -> None:
    server = script(ok(b'{"a":1}', "X-Request-Id: r1"))
    raw = send(sync, server.url)
    assert (raw.status, raw.body, raw.headers.get("x-request-id")) == (200, b'{"a":1}', "r1")
    assert server.requests == [
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n"
        b"accept: application/json\r\ncontent-type: application/json\r\n"
        b"content-length: 2\r\n\r\n{}" % server.port
    ]


def test_chunked_and_until_close_bodies(script: Any, sync: SyncTransport) -> None:
    server = script(
        chunked(b"a" * 70000, b"b", trailer=b"t: 1\r\n"),
        Reply(b"HTTP/1.1 200 OK\r\n\r\nuntil close", close=True),
        ok(b"third"),
    )
    assert send(sync, server.url).body == b"a" * 70000 + b"b"
    assert send(sync, server.url).body == b"until close"
    assert send(sync, server.url).body == b"third"
    assert server.connections == 2  # the read-until-close body used up its connection


def test_each_response_on_a_connection_is_read_afresh(script: Any, sync: SyncTransport) -> None:
    """A connection keeps its parser for the next response (reset, not made anew): nothing of
    one response, its framing, status or a stream's state, is left for the next."""
    not_found = ok(b"missing").replace(b"200 OK", b"404 Not Found")
    server = script(chunked(b"ab", b"cd"), not_found, chunked(b"x"), ok(b"sized"), ok(b""))
    streamed = sync.stream(post(server.url), TIMEOUTS, LIMIT, None)
    assert b"".join(streamed.chunks) == b"abcd"
    raw = send(sync, server.url)
    assert (raw.status, raw.headers["content-length"], raw.body) == (404, "7", b"missing")
    raw = send(sync, server.url)
    assert (raw.status, raw.body) == (200, b"x") and "content-length" not in raw.headers
    assert send(sync, server.url).body == b"sized"
    assert send(sync, server.url).body == b""
    assert server.connections == 1


def test_each_request_has_its_own_head_whatever_came_before(
    script: Any, sync: SyncTransport
) -> None:
    """The head of a URL's last request is reused only for the same method and header list: a
    call's own headers, or another method, on the same URL get their own."""
    server = script(*[ok()] * 5)
    get = PreparedRequest("GET", server.url + "/v1/chat/completions", HEADERS)
    for headers in (HEADERS, [*HEADERS, ("x-tenant", "a")], HEADERS, None, [("x-tenant", "b")]):
        request = get if headers is None else post(server.url, headers=headers)
        assert sync.send(request, TIMEOUTS, LIMIT, None).status == 200
    tenants = [re.findall(rb"x-tenant: (\w)", r) for r in server.requests]
    assert tenants == [[], [b"a"], [], [], [b"b"]]
    methods = [r.split(b" ", 1)[0] for r in server.requests]
    assert methods == [b"POST", b"POST", b"POST", b"GET", b"POST"]
    assert b"content-length" not in server.requests[3]


def test_keeps_connections_alive_and_reuses_them(script: Any, sync: SyncTransport) -> None:
    server = script()
    for _ in range(5):
        assert send(sync, server.url).status == 200
    assert server.connections == 1
    assert len(sync._pool.connections()) == 1 and not sync._pool.in_use


def test_connection_close_from_the_server_is_honoured(script: Any, sync: SyncTransport) -> None:
    server = script(ok(b"1", "Connection: close"), ok(b"2"))
    assert [send(sync, server.url).body for _ in range(2)] == [b"1", b"2"]
    assert server.connections == 2


def test_a_stale_pooled_connection_is_replaced_once(script: Any, sync: SyncTransport) -> None:
    """The server closes a kept-alive connection instead of answering: one fresh try."""
    server = script(ok(b"1"), Reply(close=True), ok(b"2"))
    assert send(sync, server.url).body == b"1"
    assert send(sync, server.url).body == b"2"
    assert (server.connections, len(server.requests)) == (2, 3)


def test_a_fresh_connection_closed_without_answer_is_not_retried(
    script: Any, sync: SyncTransport
) -> None:
    server = script(ok(b"1"), Reply(close=True), Reply(close=True), ok(b"never"))
    assert send(sync, server.url).body == b"1"
    with pytest.raises(lmclient.APIConnectionError, match="without answering"):
        send(sync, server.url)
    assert (server.connections, len(server.requests)) == (2, 3)


def test_no_retry_once_response_bytes_arrived(script: Any, sync: SyncTransport) -> None:
    server = script(ok(b"1"), Reply(b"HTTP/1.1 200 OK\r\ncontent-le", close=True))
    send(sync, server.url)
    with pytest.raises(lmclient.APIConnectionError, match="in the response head"):
        send(sync, server.url)
    assert (server.connections, len(server.requests)) == (1, 2)


def test_a_body_cut_short_is_a_connection_error(script: Any, sync: SyncTransport) -> None:
    server = script(Reply(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", close=True))
    with pytest.raises(lmclient.APIConnectionError, match="before the response was complete"):
        send(sync, server.url)
    assert not sync._pool.connections()


def test_declared_oversized_body_is_refused_before_reading(
    script: Any, sync: SyncTransport
) -> None:
    """Were the body read, the call would wait for bytes that never come and time out."""
    server = script(b"HTTP/1.1 200 OK\r\ncontent-length: 2000000\r\n\r\nabc")
    with pytest.raises(lmclient.ProtocolError, match="2000000 bytes refused"):
        send(sync, server.url, timeouts=SHORT)
    assert not sync._pool.connections()


def test_undeclared_oversized_body_is_refused_while_counting(
    script: Any, sync: SyncTransport
) -> None:
    server = script(chunked(b"x" * 600, b"y" * 600))
    with pytest.raises(lmclient.ProtocolError, match="refused after 1200 bytes"):
        send(sync, server.url, max_bytes=1000)


def test_compressed_body_is_decoded_and_counted_decoded(script: Any, sync: SyncTransport) -> None:
    packed = gzip.compress(b"z" * 5000)
    server = script(ok(packed, "Content-Encoding: gzip"), ok(packed, "Content-Encoding: gzip"))
    assert send(sync, server.url).body == b"z" * 5000
    with pytest.raises(lmclient.ProtocolError, match="max_response_bytes=4000"):
        send(sync, server.url, max_bytes=4000)


def test_read_timeout(script: Any, sync: SyncTransport) -> None:
    server = script(Reply(silent=True))
    started = time.monotonic()
    with pytest.raises(lmclient.APITimeoutError, match="timed out waiting for the response"):
        send(sync, server.url, timeouts=SHORT)
    assert 0.25 < time.monotonic() - started < 3
    assert not sync._pool.connections()


def test_a_deadline_shortens_the_read_timeout(script: Any, sync: SyncTransport) -> None:
    server = script(Reply(silent=True))
    started = time.monotonic()
    with pytest.raises(lmclient.APITimeoutError):
        send(sync, server.url, deadline_at=started + 0.3)  # the read timeout is 5 s
    assert 0.25 < time.monotonic() - started < 3


def test_socket_timeouts_follow_each_call(script: Any, sync: SyncTransport) -> None:
    """The socket's one timeout is the write timeout while sending and the read timeout (within
    the deadline) while reading, set when it changes: one call's deadline must not shorten the
    next call's read timeout, nor be forgotten by it."""
    server = script()

    def socket_timeout() -> float | None:
        (conn,) = sync._pool.connections()
        timeout: float | None = conn.sock.gettimeout()
        return timeout

    patient = Timeouts(5.0, 7.0, 6.0, 5.0)
    send(sync, server.url, timeouts=patient)
    assert socket_timeout() == 7.0  # the read timeout, set after the send's
    send(sync, server.url, timeouts=patient, deadline_at=time.monotonic() + 2)
    read = socket_timeout()
    assert read is not None and 1 < read <= 2
    send(sync, server.url, timeouts=patient)  # the same timeouts as set before that deadline
    assert socket_timeout() == 7.0
    send(sync, server.url, timeouts=Timeouts(5.0, math.inf, math.inf, 5.0))
    assert socket_timeout() is None
    send(sync, server.url, timeouts=patient)
    assert socket_timeout() == 7.0
    assert server.connections == 1


def test_write_timeout(sync: SyncTransport) -> None:
    """A server that never reads: the request's send times out (the kernel's buffers take a few
    megabytes, not the whole body)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:  # never accepts nor reads
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(lmclient.APITimeoutError, match="sending the request"):
            sync.send(post(url, b"x" * (64 << 20)), Timeouts(5.0, 5.0, 0.3, 5.0), LIMIT, None)
        assert time.monotonic() - started < 3
    assert not sync._pool.connections()


async def test_async_write_timeout(aio: AsyncTransport) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:  # never accepts nor reads
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(lmclient.APITimeoutError, match="sending the request"):
            await aio.send(post(url, b"x" * (64 << 20)), Timeouts(5.0, 5.0, 0.3, 5.0), LIMIT, None)
        assert time.monotonic() - started < 3
    assert not aio._pool.connections()


def test_expired_deadline_between_chunks(script: Any, sync: SyncTransport) -> None:
    server = script(chunked(b"a", b"b"))
    with pytest.raises(lmclient.APITimeoutError, match="deadline"):
        send(sync, server.url, deadline_at=time.monotonic() - 1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connection_refused(sync: SyncTransport) -> None:
    with pytest.raises(lmclient.APIConnectionError, match=r"connecting to 127\.0\.0\.1") as info:
        send(sync, f"http://127.0.0.1:{free_port()}")
    assert not isinstance(info.value, lmclient.APITimeoutError)


def test_garbage_is_a_protocol_error(script: Any, sync: SyncTransport) -> None:
    server = script(b"SSH-2.0-OpenSSH_9.0\r\n\r\n")
    with pytest.raises(lmclient.ProtocolError, match=r"not an HTTP/1\.1 status line"):
        send(sync, server.url)


def test_the_encoded_head_follows_the_header_list(script: Any, sync: SyncTransport) -> None:
    server = script()
    other = [("authorization", "Bearer k2")]
    for headers in (HEADERS, other, HEADERS):
        sync.send(post(server.url, headers=headers), TIMEOUTS, LIMIT, None)
    assert [b"authorization: Bearer k2" in r for r in server.requests] == [False, True, False]


def test_stream_yields_chunks_and_returns_the_connection(script: Any, sync: SyncTransport) -> None:
    server = script(chunked(b"data: 1\n\n", b"data: 2\n\n"), ok(b"after"))
    response = sync.stream(post(server.url), TIMEOUTS, LIMIT, None)
    assert response.status == 200 and response.headers["transfer-encoding"] == "chunked"
    assert b"".join(response.chunks) == b"data: 1\n\ndata: 2\n\n"
    assert not sync._pool.in_use
    response.close()
    assert send(sync, server.url).body == b"after"
    assert server.connections == 1


def test_closing_an_unread_stream_closes_its_connection(script: Any, sync: SyncTransport) -> None:
    server = script(chunked(b"a"), ok(b"next"))
    response = sync.stream(post(server.url), TIMEOUTS, LIMIT, None)
    assert sync._pool.in_use
    response.close()
    assert not sync._pool.in_use and not sync._pool.connections()
    assert send(sync, server.url).body == b"next"
    assert server.connections == 2


def test_idle_connections_expire(
    script: Any, sync: SyncTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = script()
    send(sync, server.url)
    monkeypatch.setattr(common, "KEEPALIVE_EXPIRY", 0.0)
    send(sync, server.url)
    assert server.connections == 2


def test_the_pool_is_lifo_and_drops_the_oldest_expired(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[str] = []

    @dataclass(eq=False)
    class Conn:
        name: str
        origin: tuple[str, str, int] = ("http", "h", 1)
        idle_since: float = 0.0

        def stale(self) -> bool:
            return False

        def close(self) -> None:
            closed.append(self.name)

    pool: common.Pool[Conn] = common.Pool()
    a, b, c = Conn("a"), Conn("b"), Conn("c")
    for conn in (a, b):
        pool.add(conn)
        pool.release(conn, True)
    assert pool.checkout(a.origin) is b and pool.in_use == {b}
    pool.release(b, True)
    monkeypatch.setattr(common, "KEEPALIVE_EXPIRY", -1.0)  # everything idle is expired
    pool.add(c)
    pool.release(c, True)
    assert closed == ["a"] and pool.idle[a.origin] == [b, c]


# -- TLS ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A self-signed certificate for 127.0.0.1 (key and certificate in one file)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    path = tmp_path_factory.mktemp("tls") / "cert.pem"
    subprocess.run(
        [
            *(
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
            ),
            *("-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-keyout", str(path)),
            *("-out", str(path.with_suffix(".crt")), "-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    path.write_bytes(path.read_bytes() + path.with_suffix(".crt").read_bytes())
    return path


@pytest.fixture
def tls_server(script: Any, certificate: Path) -> ScriptedServer:
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate)
    server: ScriptedServer = script(ok(b"secure"), ok(b"again"), tls=context)
    server.url = server.url.replace("http:", "https:")
    return server


def test_tls_verifies_the_server(tls_server: ScriptedServer, sync: SyncTransport) -> None:
    with pytest.raises(lmclient.APIConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        send(sync, tls_server.url)


def test_tls_read_timeout(
    script: Any, certificate: Path, monkeypatch: pytest.MonkeyPatch, sync: SyncTransport
) -> None:
    """A TLS socket's timeout is the ssl module's reads' too: it must time out all the same."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate)
    server: ScriptedServer = script(Reply(silent=True), tls=context)
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate.with_suffix(".crt")))
    started = time.monotonic()
    with pytest.raises(lmclient.APITimeoutError, match="timed out waiting for the response"):
        send(sync, server.url.replace("http:", "https:"), timeouts=SHORT)
    assert 0.25 < time.monotonic() - started < 3


def test_tls_with_a_trusted_certificate(
    tls_server: ScriptedServer, certificate: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate.with_suffix(".crt")))
    transport = SyncTransport()
    try:
        assert [send(transport, tls_server.url).body for _ in range(2)] == [b"secure", b"again"]
    finally:
        transport.close()
    assert tls_server.connections == 1


async def test_async_tls_with_a_trusted_certificate(
    tls_server: ScriptedServer, certificate: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate.with_suffix(".crt")))
    transport = AsyncTransport()
    try:
        bodies = [(await asend(transport, tls_server.url)).body for _ in range(2)]
    finally:
        await transport.aclose()
    assert bodies == [b"secure", b"again"] and tls_server.connections == 1


# -- the async transport over sockets ------------------------------------------------------------


async def test_async_exact_request_sized_and_chunked_bodies(
    script: Any, aio: AsyncTransport
) -> None:
    server = script(ok(b'{"a":1}'), chunked(b"a" * 70000, b"b"), ok(b"third"))
    raw = await asend(aio, server.url)
    assert (raw.status, raw.body) == (200, b'{"a":1}')
    assert (await asend(aio, server.url)).body == b"a" * 70000 + b"b"
    assert (await asend(aio, server.url)).body == b"third"
    assert server.connections == 1
    assert server.requests[0].endswith(b"content-length: 2\r\n\r\n{}")


async def test_async_each_response_on_a_connection_is_read_afresh(
    script: Any, aio: AsyncTransport
) -> None:
    not_found = ok(b"missing").replace(b"200 OK", b"404 Not Found")
    server = script(chunked(b"ab", b"cd"), not_found, chunked(b"x"), ok(b"sized"), ok(b""))
    streamed = await aio.stream(post(server.url), TIMEOUTS, LIMIT, None)
    assert b"".join([chunk async for chunk in streamed.chunks]) == b"abcd"
    raw = await asend(aio, server.url)
    assert (raw.status, raw.headers["content-length"], raw.body) == (404, "7", b"missing")
    raw = await asend(aio, server.url)
    assert (raw.status, raw.body) == (200, b"x") and "content-length" not in raw.headers
    assert (await asend(aio, server.url)).body == b"sized"
    assert (await asend(aio, server.url)).body == b""
    assert server.connections == 1


async def test_async_each_request_has_its_own_head_whatever_came_before(
    script: Any, aio: AsyncTransport
) -> None:
    server = script(*[ok()] * 5)
    get = PreparedRequest("GET", server.url + "/v1/chat/completions", HEADERS)
    for headers in (HEADERS, [*HEADERS, ("x-tenant", "a")], HEADERS, None, [("x-tenant", "b")]):
        request = get if headers is None else post(server.url, headers=headers)
        assert (await aio.send(request, TIMEOUTS, LIMIT, None)).status == 200
    tenants = [re.findall(rb"x-tenant: (\w)", r) for r in server.requests]
    assert tenants == [[], [b"a"], [], [], [b"b"]]
    methods = [r.split(b" ", 1)[0] for r in server.requests]
    assert methods == [b"POST", b"POST", b"POST", b"GET", b"POST"]


async def test_async_until_close_body(script: Any, aio: AsyncTransport) -> None:
    server = script(Reply(b"HTTP/1.1 200 OK\r\n\r\nuntil close", close=True), ok(b"next"))
    assert (await asend(aio, server.url)).body == b"until close"
    assert (await asend(aio, server.url)).body == b"next"
    assert server.connections == 2


async def test_async_a_stale_pooled_connection_is_replaced_once(
    script: Any, aio: AsyncTransport
) -> None:
    server = script(ok(b"1"), Reply(close=True), ok(b"2"))
    assert (await asend(aio, server.url)).body == b"1"
    assert (await asend(aio, server.url)).body == b"2"
    assert (server.connections, len(server.requests)) == (2, 3)


async def test_async_a_fresh_connection_closed_without_answer_is_not_retried(
    script: Any, aio: AsyncTransport
) -> None:
    server = script(Reply(close=True), ok(b"never"))
    with pytest.raises(lmclient.APIConnectionError, match="without answering"):
        await asend(aio, server.url)
    assert (server.connections, len(server.requests)) == (1, 1)


async def test_async_idle_close_is_noticed_before_reuse(script: Any, aio: AsyncTransport) -> None:
    server = script(Reply(ok(b"1"), close=True), ok(b"2"))
    assert (await asend(aio, server.url)).body == b"1"
    assert (await asend(aio, server.url)).body == b"2"
    assert (server.connections, len(server.requests)) == (2, 2)


async def test_async_no_retry_once_response_bytes_arrived(script: Any, aio: AsyncTransport) -> None:
    server = script(ok(b"1"), Reply(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nab", close=True))
    await asend(aio, server.url)
    with pytest.raises(lmclient.APIConnectionError, match="before the response was complete"):
        await asend(aio, server.url)
    assert len(server.requests) == 2 and not aio._pool.connections()


async def test_async_oversized_timeouts_refused_and_garbage(
    script: Any, aio: AsyncTransport
) -> None:
    server = script(
        b"HTTP/1.1 200 OK\r\ncontent-length: 2000000\r\n\r\nabc",
        chunked(b"x" * 600, b"y" * 600),
        b"garbage\r\n\r\n",
        Reply(silent=True),
    )
    with pytest.raises(lmclient.ProtocolError, match="2000000 bytes refused"):
        await asend(aio, server.url, timeouts=SHORT)
    with pytest.raises(lmclient.ProtocolError, match="refused after"):
        await asend(aio, server.url, max_bytes=1000)
    with pytest.raises(lmclient.ProtocolError, match="status line"):
        await asend(aio, server.url)
    with pytest.raises(lmclient.APITimeoutError, match="read timeout"):
        await asend(aio, server.url, timeouts=SHORT)
    with pytest.raises(lmclient.APIConnectionError, match="connecting to") as info:
        await asend(aio, f"http://127.0.0.1:{free_port()}")
    assert not isinstance(info.value, lmclient.APITimeoutError)
    assert not aio._pool.connections()


async def test_async_deadline_and_compressed_body(script: Any, aio: AsyncTransport) -> None:
    # The same reply twice: the call past its deadline may close its connection before the
    # server has read the request, or after it has answered.
    zipped = ok(gzip.compress(b"z" * 5000), "Content-Encoding: gzip")
    server = script(zipped, zipped)
    with pytest.raises(lmclient.APITimeoutError, match="deadline"):
        await asend(aio, server.url, deadline_at=time.monotonic() - 1)
    assert (await asend(aio, server.url)).body == b"z" * 5000


async def test_async_large_request_body_waits_for_the_socket(
    script: Any, aio: AsyncTransport
) -> None:
    server = script()
    body = b"x" * (8 << 20)
    raw = await aio.send(post(server.url, body), TIMEOUTS, LIMIT, None)
    assert raw.status == 200 and server.requests[0].endswith(body)


async def test_async_stream_and_release(script: Any, aio: AsyncTransport) -> None:
    server = script(chunked(b"data: 1\n\n", b"data: 2\n\n"), chunked(b"a" * 10), ok(b"next"))
    response = await aio.stream(post(server.url), TIMEOUTS, LIMIT, None)
    assert response.status == 200
    assert b"".join([c async for c in response.chunks]) == b"data: 1\n\ndata: 2\n\n"
    assert not aio._pool.in_use
    await response.aclose()
    response = await aio.stream(post(server.url), TIMEOUTS, LIMIT, None)
    assert aio._pool.in_use
    await response.aclose()  # unread: the connection is closed, not pooled
    assert not aio._pool.in_use
    assert (await asend(aio, server.url)).body == b"next"
    assert server.connections == 2


async def test_async_cancelled_call_closes_its_connection(script: Any, aio: AsyncTransport) -> None:
    server = script(Reply(silent=True), ok(b"after"))
    task = asyncio.create_task(asend(aio, server.url))
    await asyncio.to_thread(server.wait_for_requests, 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not aio._pool.connections()
    assert (await asend(aio, server.url)).body == b"after"


async def test_async_pool_drops_connections_of_a_finished_loop(script: Any) -> None:
    server = script()
    transport = AsyncTransport()

    async def one() -> bytes:
        return (await asend(transport, server.url)).body

    def other_loop() -> None:
        asyncio.run(one())

    thread = threading.Thread(target=other_loop)
    thread.start()
    thread.join(10)
    assert len(transport._pool.connections()) == 1
    assert await one() == b'{"ok":true}'
    assert server.connections == 2
    await transport.aclose()


async def test_async_concurrent_calls_share_a_bounded_set_of_connections(
    script: Any, aio: AsyncTransport
) -> None:
    server = script()
    for _ in range(3):
        await asyncio.gather(*(asend(aio, server.url) for _ in range(20)))
    assert server.connections == 20 and len(aio._pool.connections()) == 20


# -- a user's respx mock intercepts every request -------------------------------------------------


EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"4"},"finish_reason":"stop"}]}\n\n'


def _answer(request: httpx.Request) -> httpx.Response:
    if json.loads(request.content).get("stream"):
        return httpx.Response(200, content=EVENT + b"data: [DONE]\n\n")
    return httpx.Response(200, json=BODY)


def test_default_respx_mock_intercepts_sync_send_and_stream(script: Any) -> None:
    server = script(COMPLETION, COMPLETION)  # real: not to be reached while the mock is on
    with lmclient.Client(server.url + "/v1", model="m", dialect="vllm") as client:
        assert client.generate("Q") == "4"  # a pooled socket is open when the mock starts
        assert client._transport._pool.connections()
        with respx.mock:
            route = respx.post(server.url + "/v1/chat/completions").mock(side_effect=_answer)
            assert client.generate("Q", int) == 4
            with client.stream("Q", int) as s:
                assert s.value == 4
            assert route.call_count == 2
        assert len(server.requests) == 1
        assert client.generate("Q") == "4"  # the mock is off: back to the socket
        assert len(server.requests) == 2


async def test_default_respx_mock_intercepts_async_send_and_stream(script: Any) -> None:
    server = script(COMPLETION, COMPLETION)
    async with lmclient.AsyncClient(server.url + "/v1", model="m", dialect="vllm") as client:
        assert await client.generate("Q") == "4"
        with respx.mock:
            route = respx.post(server.url + "/v1/chat/completions").mock(side_effect=_answer)
            assert await client.generate("Q", int) == 4
            async with client.stream("Q", int) as s:
                assert await s.aread() == 4
            assert route.call_count == 2
        assert len(server.requests) == 1
        assert await client.generate("Q") == "4"
        assert len(server.requests) == 2


def test_unmatched_request_under_respx_mock_is_not_sent(script: Any) -> None:
    server = script()
    with (
        respx.mock,
        lmclient.Client(server.url + "/v1", model="m", dialect="vllm") as client,
        pytest.raises(respx.models.AllMockedAssertionError),
    ):
        client.generate("Q")
    assert not server.requests


def test_patch_watch_learns_the_original_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    def original(self: object) -> None: ...

    original.__module__ = "httpcore._sync.connection_pool"

    def mocked(self: object) -> None: ...

    pool = type("ConnectionPool", (), {"handle_request": mocked})
    monkeypatch.setitem(sys.modules, "httpcore", SimpleNamespace(ConnectionPool=pool))
    watch = PatchWatch("httpcore", "ConnectionPool", "handle_request")
    assert watch.active()  # first seen while patched: not taken for the original
    pool.handle_request = original  # type: ignore[attr-defined]
    assert not watch.active()
    pool.handle_request = mocked  # type: ignore[attr-defined]
    assert watch.active()
    pool.handle_request = original  # type: ignore[attr-defined]
    assert not watch.active()
    monkeypatch.delitem(sys.modules, "httpcore")
    assert not PatchWatch("httpcore", "ConnectionPool", "handle_request").active()


@pytest.mark.parametrize("asynchronous", [False, True])
def test_no_respx_imported_no_mock_looked_for(
    monkeypatch: pytest.MonkeyPatch, asynchronous: bool
) -> None:
    """A mock needs respx: until it is imported, its mockers' methods are not even looked at
    (a pool's method replaced by something else is not taken for respx's)."""

    def mocked(self: object) -> None: ...

    name = "AsyncConnectionPool" if asynchronous else "ConnectionPool"
    method = "handle_async_request" if asynchronous else "handle_request"
    pool = type(name, (), {method: mocked})
    monkeypatch.setitem(sys.modules, "httpcore", SimpleNamespace(**{name: pool}))
    monkeypatch.setitem(sys.modules, "respx", SimpleNamespace())
    assert RespxMocks(asynchronous).active()
    monkeypatch.delitem(sys.modules, "respx")
    assert not RespxMocks(asynchronous).active()


# -- the clients over the loopback fake -----------------------------------------------------------


class Person(msgspec.Struct):
    name: str
    age: int


def test_clients_over_the_fake_reuse_one_connection() -> None:
    fake = FakeLLM()
    with fake.serve() as url, lmclient.Client(url, model="fake-model", dialect="vllm") as client:
        for i in range(20):
            fake.reply(Person(f"P{i}", i))
            assert client.generate("Q", Person) == Person(f"P{i}", i)
        fake.reply("streamed text " * 10)
        with client.stream("Q") as s:
            assert s.value == "streamed text " * 10
        assert len(client._transport._pool.connections()) == 1


async def test_async_client_over_the_fake_streams_items() -> None:
    fake = FakeLLM()
    people = [Person(f"P{i}", i) for i in range(5)]
    fake.reply(people, chunk_size=4)
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model="fake-model", dialect="vllm") as client:
            async with client.stream("Q", list[Person]) as s:
                assert [p async for p in s.items()] == people
            assert not client._transport._pool.in_use


async def test_async_read_timeout_of_a_reused_connection_is_its_own(
    script: Any, aio: AsyncTransport
) -> None:
    """The connection's timer was armed for 5 s by the first call; the second asks for 0.3 s."""
    server = script(ok(), Reply(silent=True))
    await asend(aio, server.url)
    started = time.monotonic()
    with pytest.raises(lmclient.APITimeoutError):
        await asend(aio, server.url, timeouts=SHORT)
    assert time.monotonic() - started < 3  # not the first call's 5 s
    assert server.connections == 1


def idle_connection() -> AsyncConnection:
    """A connection whose writes go nowhere: the test plays the server and the timer."""
    conn = AsyncConnection(asyncio.get_running_loop(), ("http", "127.0.0.1", 1))
    conn.transport = SimpleNamespace(  # type: ignore[assignment]
        write=lambda payload: None, abort=lambda: None, is_closing=lambda: False
    )
    return conn


async def test_a_read_timer_running_after_the_whole_response_came_leaves_it() -> None:
    """The read timer may run in the loop iteration in which the response's last bytes came,
    before the task waiting for them: the response is whole, so no read timeout applies to it
    (and its last read is not timed)."""
    conn = idle_connection()
    parser = conn.send_request(b"GET / HTTP/1.1\r\n\r\n", LIMIT, None, 0.3, False)
    conn.data_received(ok())
    assert parser.complete
    conn.last_read -= 10  # the request went out long ago
    conn._on_timer()
    assert conn.error is None and not conn.closed and conn.pieces == [b'{"ok":true}']
    conn.close()


async def test_a_deadline_shares_the_connections_one_timer() -> None:
    """A call's deadline is timed by the connection's timer, not one of its own: armed for the
    sooner of the deadline and the read timeout, kept by the next call whose deadline is later
    (it re-arms itself when it fires), and ending the call once the deadline has passed."""
    conn = idle_connection()
    deadline = time.monotonic() + 60
    conn.send_request(b"GET / HTTP/1.1\r\n\r\n", LIMIT, deadline, 600.0, False)
    timer = conn.timer
    assert timer is not None and conn.timer_at == deadline  # sooner than the read timeout
    conn.data_received(ok())
    conn.take_pieces()
    conn.finish()
    conn.send_request(b"GET / HTTP/1.1\r\n\r\n", LIMIT, deadline + 1, 600.0, False)
    assert conn.timer is timer  # no timer scheduled (nor cancelled) for the second call
    conn._on_timer()  # fires early for this call: waits on for its deadline
    assert conn.error is None and conn.timer is not None and conn.timer_at == deadline + 1
    conn.deadline_at = time.monotonic() - 1  # the deadline has passed
    conn._on_timer()
    assert isinstance(conn.error, lmclient.APITimeoutError)
    assert "deadline" in str(conn.error) and conn.closed


async def test_the_read_timeout_comes_first_when_sooner_than_the_deadline() -> None:
    conn = idle_connection()
    conn.send_request(b"GET / HTTP/1.1\r\n\r\n", LIMIT, time.monotonic() + 60, 0.3, False)
    assert conn.timer_at == conn.last_read + 0.3
    conn.last_read -= 10
    conn._on_timer()
    assert isinstance(conn.error, lmclient.APITimeoutError)
    assert "read timeout" in str(conn.error) and conn.closed


@pytest.mark.parametrize("read_timeout", [0.3, math.inf])
async def test_a_deadline_passing_after_the_whole_response_came_leaves_it(
    read_timeout: float,
) -> None:
    """As a read timer does: the response is whole (its reader has yet to take it)."""
    conn = idle_connection()
    deadline = time.monotonic() + 60
    parser = conn.send_request(b"GET / HTTP/1.1\r\n\r\n", LIMIT, deadline, read_timeout, False)
    conn.data_received(ok())
    assert parser.complete
    conn.deadline_at = time.monotonic() - 1
    conn._on_timer()
    assert conn.error is None and not conn.closed and conn.pieces == [b'{"ok":true}']
    conn.close()


async def test_a_timer_left_by_an_earlier_call_lapses_for_a_call_without_timeouts() -> None:
    """A call with neither a deadline nor a read timeout is not timed: the timer an earlier
    call armed finds nothing to wait for, and lapses."""
    conn = idle_connection()
    conn.send_request(b"GET / HTTP/1.1\r\n\r\n", LIMIT, time.monotonic() + 60, 600.0, False)
    conn.data_received(ok())
    conn.take_pieces()
    conn.finish()
    conn.send_request(b"GET / HTTP/1.1\r\n\r\n", LIMIT, None, math.inf, False)
    conn._on_timer()
    assert conn.timer is None and conn.error is None and not conn.closed
    conn.close()


async def test_closing_the_transport_fails_a_call_in_flight(script: Any) -> None:
    server = script(chunked(b"first")[:-5])  # the stream's end never comes
    transport = AsyncTransport()
    response = await transport.stream(post(server.url), TIMEOUTS, LIMIT, None)
    chunks = response.chunks
    assert await chunks.__anext__() == b"first"
    await transport.aclose()
    with pytest.raises(lmclient.APIConnectionError, match="closed during the call"):
        await chunks.__anext__()
    await response.aclose()
