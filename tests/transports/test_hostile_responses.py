"""Hostile responses over real sockets, through both of lmclient's own transports: each shape the
parser refuses (see `lmclient._wire.http11`) is a `ProtocolError` as soon as its bytes show it,
never a wait for the read timeout, and what it accepts (bare LF line ends) is read.

The read timeout is 30 s and every test has a pytest timeout of 15 s, so a parser that waits for
bytes that never come fails here as a timeout, not as a slow pass. Each case says which finding
of the hardening (issue 13) it covers; `tests/wire/test_http11.py` tests the same shapes on the
parser alone, and against h11.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest

import lmclient
from lmclient._params import Timeouts
from lmclient._transports.aio import AsyncTransport
from lmclient._transports.sync import SyncTransport
from tests import scripted_server
from tests.scripted_server import Reply, ok, post

PATIENT = Timeouts(5.0, 30.0, 5.0, 5.0)  # a read timeout far beyond the test's own
LIMIT = 1 << 20
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_SETTINGS = b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64"

pytestmark = pytest.mark.timeout(15)
script = scripted_server.script  # the scripted server fixture
sync = scripted_server.sync  # the transports, closed after each test
aio = scripted_server.aio


@dataclass(frozen=True)
class Refused:
    """A response the transports must refuse: the server sends ``data`` and keeps the
    connection open, so a transport that waits for more waits for the read timeout."""

    finding: str
    data: bytes

    def __str__(self) -> str:
        return self.finding


REFUSED = [
    Refused("1 endless trailer section", CHUNKED_HEAD + b"2\r\nab\r\n0\r\n" + b"x: y\r\n" * 3000),
    Refused("3 an HTTP/2 server's first frame", H2_SETTINGS),
    Refused("3 the HTTP/2 connection preface", H2_PREFACE + H2_SETTINGS),
    Refused("3 TLS from a server", b"\x16\x03\x03\x00\x02\x02\x28"),
    Refused("3 malformed status line, no blank line", b"HTTP/1.1 200OK\r\nserver: x\r\n"),
    Refused("3 HTTP/1.2", b"HTTP/1.2 200 OK\r\n"),
    Refused("4 status below 100", b"HTTP/1.1 099 Odd\r\n\r\n" + ok()),
    Refused("4 two-digit status", b"HTTP/1.1 20 OK\r\n\r\n" + ok()),
    Refused(
        "5 gzip, chunked", CHUNKED_HEAD.replace(b": chunked", b": gzip, chunked") + b"0\r\n\r\n"
    ),
    Refused(
        "5 chunked, chunked", CHUNKED_HEAD.replace(b"chunked", b"chunked, chunked") + b"0\r\n\r\n"
    ),
    Refused(
        "5 identity, read until close", b"HTTP/1.1 200 OK\r\ntransfer-encoding: identity\r\n\r\nx"
    ),
    Refused("5 bare CR in a header", b"HTTP/1.1 200 OK\r\nx: a\rb: c\r\ncontent-length: 0\r\n\r\n"),
    Refused(
        "5 LF inside a header line", b"HTTP/1.1 200 OK\r\nx: a\nb\r\ncontent-length: 0\r\n\r\n"
    ),
    Refused("5 NUL in a value", b"HTTP/1.1 200 OK\r\nx: a\x00\r\ncontent-length: 0\r\n\r\n"),
    Refused("5 CTL in a value", b"HTTP/1.1 200 OK\r\nx: a\x01\r\ncontent-length: 0\r\n\r\n"),
    Refused("5 non-token name", b"HTTP/1.1 200 OK\r\nx(y): a\r\ncontent-length: 0\r\n\r\n"),
    Refused("5 blank before colon", b"HTTP/1.1 200 OK\r\nx : a\r\ncontent-length: 0\r\n\r\n"),
    Refused("5 obs-fold", b"HTTP/1.1 200 OK\r\nx: a\r\n b\r\ncontent-length: 0\r\n\r\n"),
    Refused("5 bad 1xx head", b"HTTP/1.1 100 Continue\r\nno colon\r\n\r\n" + ok()),
    Refused(
        "5 CL of 5000 digits", b"HTTP/1.1 200 OK\r\ncontent-length: " + b"9" * 5000 + b"\r\n\r\n"
    ),
    Refused("6 endless 100 Continue", b"HTTP/1.1 100 Continue\r\n\r\n" * 3000),
    Refused("7 blank before a chunk size", CHUNKED_HEAD + b" 2\r\nab\r\n0\r\n\r\n"),
    Refused("7 NUL in a chunk extension", CHUNKED_HEAD + b"2;a\x00\r\nab\r\n0\r\n\r\n"),
    Refused("7 a chunk size that cannot become one", CHUNKED_HEAD + b"zz"),
    Refused("7 negative chunk size", CHUNKED_HEAD + b"-2\r\nab\r\n0\r\n\r\n"),
    Refused("8 differing Content-Lengths", b"HTTP/1.1 200 OK\r\ncontent-length: 1, 2\r\n\r\nab"),
]


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_sync_refuses(case: Refused, script: Any, sync: SyncTransport) -> None:
    server = script(Reply(case.data))
    started = time.monotonic()
    with pytest.raises(lmclient.ProtocolError, match="invalid HTTP response"):
        sync.send(post(server.url), PATIENT, LIMIT, None)
    assert time.monotonic() - started < 10
    assert not sync._pool.connections()


@pytest.mark.parametrize("case", REFUSED, ids=str)
async def test_async_refuses(case: Refused, script: Any, aio: AsyncTransport) -> None:
    server = script(Reply(case.data))
    started = time.monotonic()
    with pytest.raises(lmclient.ProtocolError, match="invalid HTTP response"):
        await aio.send(post(server.url), PATIENT, LIMIT, None)
    assert time.monotonic() - started < 10
    assert not aio._pool.connections()


def test_sync_refuses_a_stream_whose_trailers_never_end(script: Any, sync: SyncTransport) -> None:
    server = script(Reply(CHUNKED_HEAD + b"5\r\nhello\r\n0\r\n" + b"x: y\r\n" * 3000))
    with pytest.raises(lmclient.ProtocolError, match="trailer section"):  # at once or in the body
        response = sync.stream(post(server.url), PATIENT, LIMIT, None)
        try:
            b"".join(response.chunks)
        finally:
            response.close()
    assert not sync._pool.connections()


async def test_async_refuses_a_stream_whose_trailers_never_end(
    script: Any, aio: AsyncTransport
) -> None:
    server = script(Reply(CHUNKED_HEAD + b"5\r\nhello\r\n0\r\n" + b"x: y\r\n" * 3000))
    with pytest.raises(lmclient.ProtocolError, match="trailer section"):
        response = await aio.stream(post(server.url), PATIENT, LIMIT, None)
        try:
            [chunk async for chunk in response.chunks]
        finally:
            await response.aclose()
    assert not aio._pool.connections()


# -- 2. bare LF line ends: read, and the connection reused ---------------------------------------

BARE_LF = [
    b'HTTP/1.1 200 OK\ncontent-type: application/json\ncontent-length: 11\n\n{"ok":true}',
    b'HTTP/1.1 100 Continue\n\nHTTP/1.1 200 OK\r\ncontent-length: 11\n\r\n{"ok":true}',
    b"HTTP/1.1 200 OK\ntransfer-encoding: chunked\n\n6\r\n"
    + b'{"ok":\r\n5\r\ntrue}\r\n0\r\nx-trailer: 1\n\n',
]


@pytest.mark.parametrize("data", BARE_LF)
def test_sync_reads_bare_lf_line_ends(data: bytes, script: Any, sync: SyncTransport) -> None:
    server = script(data, data)
    for _ in range(2):
        raw = sync.send(post(server.url), PATIENT, LIMIT, None)
        assert (raw.status, raw.body) == (200, b'{"ok":true}')
    assert server.connections == 1


@pytest.mark.parametrize("data", BARE_LF)
async def test_async_reads_bare_lf_line_ends(data: bytes, script: Any, aio: AsyncTransport) -> None:
    server = script(data, data)
    for _ in range(2):
        raw = await aio.send(post(server.url), PATIENT, LIMIT, None)
        assert (raw.status, raw.body) == (200, b'{"ok":true}')
    assert server.connections == 1


# -- 8. kept: a few interim responses, bytes after a response ------------------------------------

INTERIM = b"HTTP/1.1 103 Early Hints\r\nlink: </a>; rel=preload\r\n\r\n" * 20 + ok()


def test_sync_interim_responses_and_bytes_after_a_response(
    script: Any, sync: SyncTransport
) -> None:
    server = script(INTERIM, ok(b"1") + b"HTTP/1.1 200 OK\r\n", ok(b"2"))
    assert [sync.send(post(server.url), PATIENT, LIMIT, None).body for _ in range(3)] == [
        b'{"ok":true}',
        b"1",
        b"2",
    ]
    assert server.connections == 2  # the bytes after "1" made its connection unusable


async def test_async_interim_responses_and_bytes_after_a_response(
    script: Any, aio: AsyncTransport
) -> None:
    server = script(INTERIM, ok(b"1") + b"HTTP/1.1 200 OK\r\n", ok(b"2"))
    bodies = [(await aio.send(post(server.url), PATIENT, LIMIT, None)).body for _ in range(3)]
    assert bodies == [b'{"ok":true}', b"1", b"2"]
    assert server.connections == 2
