"""lmclient's sans-I/O HTTP/1.1 parser (`lmclient._wire.http11`): what it accepts and refuses, and a
differential test against h11, the parser httpx uses, as the oracle.

h11 (an httpx dependency) is fed the same bytes as `ResponseParser`: lmclient must never accept
what h11 refuses, nor reuse a connection h11 would not; where both accept, they must agree on the
status, headers, body and where the response ends; and any cutting of the bytes into pieces must
give what the whole gives. Where lmclient is deliberately stricter than h11, `STRICTER` lists the
shape and the reason.
"""

from __future__ import annotations

import gzip
import itertools
import random
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import h11
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from lmclient._wire import http11 as _http11
from lmclient._wire.http11 import (
    BadResponse,
    ResponseParser,
    content_decoder,
    encode_head,
    encode_request,
)
from tests.scripted_server import HEADERS, LIMIT, chunked, ok

# -- accepted shapes, and the request side -----------------------------------------------------


def parse(data: bytes, pieces: int = 1) -> tuple[ResponseParser, bytes]:
    parser = ResponseParser()
    size = max(1, len(data) // pieces)
    body = b"".join(parser.feed(data[i : i + size]) for i in range(0, len(data), size))
    return parser, body


def test_request_bytes_head_is_encoded_once_and_framed_per_body() -> None:
    head = encode_head("POST", b"/v1/chat/completions", b"127.0.0.1:8000", HEADERS)
    assert head == (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:8000\r\n"
        b"accept: application/json\r\ncontent-type: application/json\r\n"
    )
    assert encode_request(head, b"{}") == head + b"content-length: 2\r\n\r\n{}"
    assert encode_request(head, None) == head + b"\r\n"


def test_request_head_lets_host_be_overridden_and_keeps_framing_to_itself() -> None:
    head = encode_head(
        "GET", b"/v1/models", b"a:1", [("Host", "b"), ("content-length", "9"), ("x", "1")]
    )
    assert head == b"GET /v1/models HTTP/1.1\r\nhost: b\r\nx: 1\r\n"


@pytest.mark.parametrize(
    "header", [("x", "a\r\nevil: 1"), ("x", "a\nb"), ("x", "nul\x00"), ("bad name", "v"), ("", "v")]
)
def test_request_head_refuses_header_injection(header: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match="invalid HTTP header"):
        encode_head("GET", b"/", b"h", [header])


@pytest.mark.parametrize("pieces", [1, 3, 1000])
def test_content_length_body_in_any_pieces(pieces: int) -> None:
    parser, body = parse(ok(b"x" * 100, "Server: t", "X-Dup: a", "x-dup: b"), pieces)
    assert (parser.complete, parser.status, body, parser.keep_alive) == (
        True,
        200,
        b"x" * 100,
        True,
    )
    assert parser.headers == {"content-length": "100", "server": "t", "x-dup": "a, b"}


@pytest.mark.parametrize("pieces", [1, 7, 1000])
def test_chunked_body_with_extensions_and_trailers(pieces: int) -> None:
    data = chunked(b"hello ", b"world", trailer=b"x-trailer: 1\r\n")
    data = data.replace(b"6\r\n", b'6;ext=1;q="a b"\r\n', 1).replace(b"5\r\n", b"5 \t\r\n", 1)
    parser, body = parse(data, pieces)
    assert (parser.complete, body, parser.keep_alive) == (True, b"hello world", True)


def test_body_until_close_completes_at_eof_and_is_not_reusable() -> None:
    parser, body = parse(b"HTTP/1.1 200 OK\r\n\r\nsome bytes")
    assert (parser.complete, body, parser.keep_alive) == (False, b"some bytes", False)
    assert parser.feed(b" more") == b" more"
    assert parser.feed_eof() and parser.complete


def test_eof_inside_a_sized_body_is_incomplete() -> None:
    parser, _ = parse(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
    assert not parser.feed_eof() and not parser.complete


@pytest.mark.parametrize("status", [204, 304])
def test_bodyless_statuses(status: int) -> None:
    parser, body = parse(b"HTTP/1.1 %d X\r\ncontent-length: 5\r\n\r\n" % status)
    assert (parser.complete, body, parser.keep_alive) == (True, b"", True)


def test_interim_responses_are_skipped() -> None:
    parser, body = parse(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nlink: x\r\n\r\n" + ok()
    )
    assert (parser.status, body) == (200, b'{"ok":true}')
    assert "link" not in (parser.headers or {})


def test_switching_protocols_is_refused() -> None:
    with pytest.raises(BadResponse, match="switched protocols"):
        parse(b"HTTP/1.1 101 Switching\r\nupgrade: h2c\r\n\r\n")


@pytest.mark.parametrize(
    ("head", "keep_alive"),
    [
        (b"HTTP/1.1 200 OK\r\nconnection: close\r\n", False),
        (b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\n", False),
        (b"HTTP/1.0 200 OK\r\n", False),
        (b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\n", True),
        (b"HTTP/1.1 200 OK\r\n", True),
    ],
)
def test_keep_alive_rules(head: bytes, keep_alive: bool) -> None:
    parser, _ = parse(head + b"content-length: 0\r\n\r\n")
    assert parser.complete and parser.keep_alive is keep_alive


def test_transfer_encoding_wins_over_content_length_and_forbids_reuse() -> None:
    data = chunked(b"abc").replace(b"chunked\r\n", b"chunked\r\ncontent-length: 99\r\n")
    parser, body = parse(data)
    assert (parser.complete, body, parser.keep_alive) == (True, b"abc", False)


def test_bytes_after_the_response_make_the_connection_unusable() -> None:
    parser, body = parse(ok(b"ab") + b"HTTP/1.1 200 OK\r\n")
    assert (parser.complete, body, parser.keep_alive) == (True, b"ab", False)
    parser, body = parse(chunked(b"ab") + b"junk")
    assert (parser.complete, body, parser.keep_alive) == (True, b"ab", False)


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/2 200 OK\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 \xb2\xb2\xb2 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 1, 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0x1\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nabc\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6 ;ext=1\r\n",  # as h11
    ],
)
def test_malformed_responses(data: bytes) -> None:
    with pytest.raises(BadResponse):
        parse(data)


def test_equal_repeated_content_lengths_are_one() -> None:
    parser, body = parse(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nab")
    assert (parser.complete, body) == (True, b"ab")


def test_oversized_head_and_chunk_line_are_refused() -> None:
    with pytest.raises(BadResponse, match="head larger"):
        parse(b"HTTP/1.1 200 OK\r\nx: " + b"a" * 70000)
    with pytest.raises(BadResponse, match="line too long"):
        parse(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1;" + b"x" * 5000)


def test_started_says_whether_any_response_byte_arrived() -> None:
    parser = ResponseParser()
    assert not parser.started
    parser.feed(b"H")
    assert parser.started


def test_start_reads_the_next_response_on_a_parser_as_a_new_one_does() -> None:
    """`start` (a pooled connection's parser, whose last response was read to its end) reads
    every kind of response as a new parser does, after any kind, whole or in pieces."""
    kinds = [
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nserver: a\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\ncontent-length: 12\r\nserver: a\r\n\r\nhello, world",
        b"HTTP/1.1 404 Not Found\r\ncontent-length: 3\r\n\r\nnah",
        CHUNKED_HEAD + b"5\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
    ]

    def read(parser: ResponseParser, data: bytes, size: int, first: bool) -> tuple[Any, ...]:
        cut = len(data) + size if size < 0 else size  # the first piece: all but -size bytes
        pieces = [data[:cut]] + [data[i : i + abs(size)] for i in range(cut, len(data), abs(size))]
        body = parser.start(pieces[0]) if first else parser.feed(pieces[0])
        after_first = (parser.headers, parser.complete)
        body += b"".join(parser.feed(piece) for piece in pieces[1:])
        return (parser.status, parser.headers, parser.length, body, parser.keep_alive, after_first)

    kept = ResponseParser()
    for size in (1000, 7, 1, -1):
        for data in kinds + kinds[::-1]:
            assert read(kept, data, size, True) == read(ResponseParser(), data, size, False)
            assert kept.complete


def test_reset_leaves_nothing_of_the_last_response() -> None:
    """After `reset` a parser says what a new one says: no status, no reuse, no length (a
    transport that read ``status`` or ``keep_alive`` before the next head came must not see the
    last response's)."""
    parser = ResponseParser()
    parser.feed(b"HTTP/1.1 404 Not Found\r\ncontent-length: 3\r\n\r\nnah")
    assert (parser.status, parser.keep_alive, parser.complete) == (404, True, True)
    parser.reset()
    new = ResponseParser()
    assert (parser.status, parser.headers, parser.length, parser.keep_alive) == (
        new.status,
        new.headers,
        new.length,
        new.keep_alive,
    )
    assert not parser.started and not parser.complete


@pytest.mark.parametrize(
    "first",
    [
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhel",  # in the body
        b"HTTP/1.1 200 OK\r\ncontent-le",  # in the head
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",  # chunks
    ],
)
def test_start_refuses_to_begin_in_the_middle_of_a_response(first: bytes) -> None:
    """`start` begins the next response after the last has ended: in the middle of one, the
    rest of its body would be read as the next head."""
    parser = ResponseParser()
    parser.feed(first)
    with pytest.raises(AssertionError, match="middle of a response"):
        parser.start(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")


def test_a_chunked_response_between_sized_ones_keeps_the_shape() -> None:
    """The connection keeps the shape of its last sized head across responses of other kinds
    (a stream between two calls): the next sized head is read by it, alike."""
    sized = b"HTTP/1.1 200 OK\r\nserver: x\r\ncontent-length: %d\r\n\r\n%s"
    kept = ResponseParser()
    for data in (sized % (2, b"ok"), CHUNKED_HEAD + b"0\r\n\r\n", sized % (3, b"yes")):
        assert kept.start(data) == ResponseParser().feed(data)
        assert kept.complete and kept.keep_alive
    assert kept.headers == {"server": "x", "content-length": "3"}


@st.composite
def responses(draw: st.DrawFn) -> tuple[bytes, bytes, list[int]]:
    body = draw(st.binary(max_size=300))
    if draw(st.booleans()):
        data = ok(body)
    else:
        sizes = draw(st.lists(st.integers(1, 50), max_size=20))
        parts, at = [], 0
        for size in [*sizes, len(body)]:
            if at < len(body):
                parts.append(body[at : at + size])
                at += size
        data = chunked(*parts)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=10)))
    return data, body, cuts


@given(responses())
@settings(max_examples=300, deadline=None)
def test_any_framing_fed_in_any_pieces_gives_the_body(case: tuple[bytes, bytes, list[int]]) -> None:
    data, body, cuts = case
    parser = ResponseParser()
    got = b""
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        got += parser.feed(data[start:end])
    assert parser.complete and got == body and parser.keep_alive


@pytest.mark.parametrize(
    ("coding", "compress"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, as some servers send
    ],
)
def test_content_codings_are_decoded(coding: str, compress: Any) -> None:
    data = b'{"ok": true}' * 100
    decoder = content_decoder({"content-encoding": coding})
    assert decoder is not None
    packed = compress(data)
    out = b"".join(
        decoder.decode(packed[i : i + 7], LIMIT) or b"" for i in range(0, len(packed), 7)
    )
    assert out + decoder.flush() == data
    assert content_decoder({"content-encoding": "identity"}) is None
    with pytest.raises(BadResponse, match="unsupported content-encoding"):
        content_decoder({"content-encoding": "br"})


def test_a_cut_or_corrupt_compressed_body_is_refused() -> None:
    cut = content_decoder({"content-encoding": "gzip"})
    assert cut is not None
    cut.decode(gzip.compress(b"x" * 1000)[:-8], LIMIT)
    with pytest.raises(BadResponse, match="ended early"):
        cut.flush()
    corrupt = content_decoder({"content-encoding": "gzip"})
    assert corrupt is not None
    with pytest.raises(BadResponse, match="undecodable"):
        corrupt.decode(b"not gzip at all", LIMIT)


# -- hostile bytes: each refused as soon as it shows, none waited on until the read timeout ----

CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_SETTINGS = b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64"  # a SETTINGS frame


def feed_bytewise(data: bytes) -> tuple[ResponseParser, bytes, int]:
    """Feed one byte at a time; the parser, the body, and how many bytes it took to refuse
    them (``len(data)`` when it did not)."""
    parser = ResponseParser()
    body = b""
    for i in range(len(data)):
        try:
            body += parser.feed(data[i : i + 1])
        except BadResponse:
            return parser, body, i + 1
    return parser, body, len(data)


def test_an_endless_trailer_section_is_refused() -> None:
    parser = ResponseParser()
    assert parser.feed(CHUNKED_HEAD + b"3\r\nabc\r\n0\r\n") == b"abc"
    with pytest.raises(BadResponse, match="trailer section larger"):
        for _ in range(_http11.MAX_TRAILER_BYTES):  # h11 stops at 16 KiB too
            parser.feed(b"x-trailer: 1\r\n")


@pytest.mark.parametrize(
    ("data", "body"),
    [
        (b"HTTP/1.1 200 OK\ncontent-length: 2\n\nab", b"ab"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\n\r\nab", b"ab"),
        (b"HTTP/1.1 200 OK\nx: 1\r\ncontent-length: 2\r\n\nab", b"ab"),
        (b"HTTP/1.1 100 Continue\n\nHTTP/1.1 200 OK\ncontent-length: 0\n\n", b""),
        (b"HTTP/1.1 200 OK\ntransfer-encoding: chunked\n\n2\r\nab\r\n0\r\n\n", b"ab"),
        (b"HTTP/1.1 200 OK\ntransfer-encoding: chunked\n\n2\r\nab\r\n0\r\nt: 1\nu: 2\r\n\n", b"ab"),
        (b"HTTP/1.1 200 OK\ncontent-length: 4\n\n\r\n\r\n", b"\r\n\r\n"),  # CRLFs in the body
    ],
)
def test_bare_lf_line_ends_are_accepted_like_h11(data: bytes, body: bytes) -> None:
    """RFC 9112 §2.2: a recipient may take a bare LF for a line end; h11 does, in the head and
    the trailer section (a chunk-size line must end with CRLF, as in h11)."""
    for parser, got in (parse(data), feed_bytewise(data)[:2]):
        assert (parser.complete, parser.status, got, parser.keep_alive) == (True, 200, body, True)


def test_a_bare_lf_ends_no_chunk_size_line() -> None:
    with pytest.raises(BadResponse, match="chunk-size line"):
        parse(CHUNKED_HEAD + b"2\nab\r\n0\r\n\r\n")


@pytest.mark.parametrize(
    ("data", "shown_at"),
    [
        (H2_PREFACE, 1),
        (H2_SETTINGS, 1),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 1),  # TLS
        (b"SSH-2.0-OpenSSH_9.0\r\n", 1),
        (b"\r\nHTTP/1.1 200 OK\r\n\r\n", 1),
        (b"HTTP/2 200 OK\r\n\r\n", 6),
        (b"HTTP/1.2 200 OK\r\n\r\n", 8),
        (b"http/1.1 200 OK\r\n\r\n", 1),
        (b"HTTP/1.1  200 OK\r\n\r\n", 10),
        (b"HTTP/1.1 099 Below 100\r\n\r\n", 10),
        (b"HTTP/1.1 20 OK\r\n\r\n", 12),
        (b"HTTP/1.1 2000 OK\r\n\r\n", 13),
        (b"HTTP/1.1 200OK\r\n\r\n", 13),
        (b"HTTP/1.1 200 OK\x00\r\n\r\n", 16),
        (b"HTTP/1.1 200 OK\rX\r\n\r\n", 17),
        (b"HTTP/1.1 100 Continue\r\n\r\nPRI * HTTP/2.0", 26),
    ],
)
def test_what_cannot_be_a_status_line_is_refused_at_once(data: bytes, shown_at: int) -> None:
    """The first byte that cannot continue a status line is refused, without waiting for the
    end of the head (which may never come: the read timeout would be the error)."""
    assert feed_bytewise(data)[2] == shown_at
    with pytest.raises(BadResponse, match=r"not an HTTP/1\.1 status line"):
        ResponseParser().feed(data[:shown_at])


def test_a_malformed_status_line_is_refused_at_its_line_end() -> None:
    with pytest.raises(BadResponse, match="status line"):
        ResponseParser().feed(b"HTTP/1.1 200 OK\t\x0b\r\n")


@pytest.mark.parametrize("status", [b"099", b"000", b"001", b"20", b"2"])
def test_a_status_below_100_is_refused(status: bytes) -> None:
    """Not an interim response: h11 refuses it, and requires three digits."""
    with pytest.raises(BadResponse, match="status line"):
        parse(b"HTTP/1.1 %s X\r\n\r\n%s" % (status, ok()))


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nx: a\rb\r\ncontent-length: 0\r\n\r\n",  # a bare CR
        b"HTTP/1.1 200 OK\r\nx: a\r\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx: a\nb\r\ncontent-length: 0\r\n\r\n",  # an LF inside a line
        b"HTTP/1.1 200 OK\r\nx: a\n b\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: identity\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked;q=1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding:\r\n\r\n",
        b"HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",  # RFC 9112 §6.1
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: x\r\n\r\n",
        b"HTTP/1.1 204 OK\r\ntransfer-encoding: gzip\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx: nul\x00\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx: \x01\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx: \x7f\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx: \x0b\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx(y): v\r\ncontent-length: 0\r\n\r\n",  # not a token
        b"HTTP/1.1 200 OK\r\nx\xe9: v\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n: v\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx : v\r\ncontent-length: 0\r\n\r\n",  # a blank before the colon
        b"HTTP/1.1 200 OK\r\nx\t: v\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx: v\r\n folded\r\ncontent-length: 0\r\n\r\n",  # obs-fold
        b"HTTP/1.1 200 OK\r\ncontent-length: \xa02\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\ncontent-length: +2\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2, 3\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\ncontent-length: " + b"9" * 5000 + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: " + b"1" * 21 + b"\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\nno colon\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 103 Early\r\ncontent-length: x\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
    ],
)
def test_framing_h11_refuses_is_refused(head: bytes) -> None:
    """Shapes by which a response is smuggled or split, and what h11 refuses besides: none is
    read (nor until close instead)."""
    in_lf = head.replace(b"\r\n", b"\n")
    for data in (head, in_lf) if b"\r\n" not in in_lf else (head,):
        with pytest.raises(BadResponse):
            parse(data)
        assert feed_bytewise(data)[2] <= len(data)  # refused by the end, in pieces too
        with pytest.raises(BadResponse):
            parse(data, 1000)


def test_endless_interim_responses_are_refused() -> None:
    parser = ResponseParser()
    parser.feed(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert parser.started and parser.headers is None
    with pytest.raises(BadResponse, match="head larger"):
        for _ in range(_http11.MAX_HEAD_BYTES):
            parser.feed(b"HTTP/1.1 100 Continue\r\n\r\n")


def test_a_final_head_after_interim_ones_counts_toward_the_bound() -> None:
    """Interim heads read in earlier pieces leave nothing buffered; the final head that comes
    alone in the next piece still counts them (the common path checks the bound too)."""
    interim = b"HTTP/1.1 100 Continue\r\n\r\n"
    parser = ResponseParser()
    for _ in range(_http11.MAX_HEAD_BYTES // len(interim)):
        parser.feed(interim)
    with pytest.raises(BadResponse, match="head larger"):
        parser.feed(ok(b"ab"))
    parser = ResponseParser()
    parser.feed(interim)
    assert parser.feed(ok(b"ab")) == b"ab" and parser.complete


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n",
        b"HTTP/1.1 404 Not Found\r\nContent-Length:5\r\nServer: x\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: \t5 \r\nConnection: close\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: keep-alive, Upgrade\r\n",
        b"HTTP/1.0 200 OK\r\ncontent-length: 5\r\n",
        b"HTTP/1.0 200 OK\r\nconnection: Keep-Alive\r\ncontent-length: 5\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 5\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nx: 1\r\nX: 2\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 05\r\n",
        b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n",
        b"HTTP/1.1 599 Odd\r\ncontent-length: 5\r\n",
    ],
)
@pytest.mark.parametrize("after", [b"", b"12345", b"12345junk"])
def test_a_head_read_at_once_or_in_pieces_gives_the_same(head: bytes, after: bytes) -> None:
    """A whole response in one piece takes the common path (`feed`'s first branch), one cut
    into pieces the general one (`_head`): they must read it alike."""
    data = head + b"\r\n" + after
    whole = ResponseParser()
    body = whole.feed(data)
    cut = ResponseParser()
    pieces = b"".join(cut.feed(data[i : i + 3]) for i in range(0, len(data), 3))
    assert (whole.status, whole.headers, whole.length) == (cut.status, cut.headers, cut.length)
    assert (body, whole.complete, whole.keep_alive) == (pieces, cut.complete, cut.keep_alive)
    assert whole.feed(b"12345") == cut.feed(b"12345")
    assert (whole.complete, whole.keep_alive) == (cut.complete, cut.keep_alive)


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\ndate: Mon, 01 Jan 2024 00:00:00 GMT\r\nserver: uvicorn\r\n"
        b"content-length: %s\r\ncontent-type: application/json\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: %s\r\nKeep-Alive: timeout=5\r\n",
        b"HTTP/1.1 500 Internal Server Error\r\nconnection: close\r\ncontent-length: %s\r\n",
        b"HTTP/1.0 200 OK\r\ncontent-length: %s\r\n",
        b"HTTP/1.1 200 OK\r\nx-content-length: 1\r\ncontent-length: %s\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length:  %s\r\n",
    ],
)
def test_a_head_like_one_read_before_is_read_alike(head: bytes) -> None:
    """A head read before but for its Content-Length digits comes from a cache of shapes
    (`ResponseParser._common`): the connection's last one, kept by its parser across `reset`,
    or one read on any connection. Each must read as the general path reads it, and digits
    that are not a length, or any other byte changed, must not be taken for that shape."""
    kept = ResponseParser()  # a connection's: it knows the shape of the head it read last

    def read(data: bytes) -> tuple[Any, ...]:
        fresh = ResponseParser()  # knows the shapes read before, on any connection
        kept.reset()
        results: list[tuple[Any, ...]] = []
        for parser in (fresh, kept):
            try:
                body = parser.feed(data)
            except BadResponse:
                results.append(("refused",))
            else:
                results.append(
                    (parser.status, parser.headers, parser.length, body, parser.keep_alive)
                )
        assert results[0] == results[1]
        return results[0]

    def general(data: bytes) -> tuple[Any, ...]:
        parser = ResponseParser()
        try:
            body = b"".join(parser.feed(data[i : i + 1]) for i in range(len(data)))
        except BadResponse:
            return ("refused",)
        return (parser.status, parser.headers, parser.length, body, parser.keep_alive)

    for digits in (b"5", b"12", b"0", b"5", b"00012", b"7" + b"0" * 19, b"5"):
        data = head % digits + b"\r\n" + b"x" * min(int(digits), 40) + b"next"
        assert read(data) == general(data)
    first = ResponseParser()
    first.feed(head % b"5" + b"\r\n12345")
    assert first.headers is not None
    first.headers.clear()  # a caller's copy: the cache keeps its own
    for digits in (b"5x", b"", b"1" * 21, b"-5", b"5 5", b"5\r\nx: 1", b"\xb5"):
        data = head % digits + b"\r\n12345"
        assert read(data) == general(data)
        assert read(data)[0] == "refused" or digits == b"5\r\nx: 1"
    for changed in (b"200 OK", b"ontent-length", b"\r\n"):
        data = (head % b"5").replace(changed, changed[:-1] + b"Z", 1) + b"\r\n12345"
        assert read(data) == general(data)
    for end in (b"Z\r\n", b"\x00\r\n", b"\r\r\n"):  # the last line's last byte
        data = (head % b"5")[:-3] + end + b"\r\n12345"
        assert read(data) == general(data)


def test_only_the_content_length_line_makes_a_shape() -> None:
    """The digits of a shape are those of the Content-Length line, not of another header
    whose name ends so, even when both had the same value when the head was first read."""
    head = b"HTTP/1.1 200 OK\r\nx-content-length: %s\r\ncontent-length: 3\r\n\r\nabc"
    kept = ResponseParser()
    for value in (b"3", b"7", b"3", b"7"):
        kept.reset()
        for parser in (ResponseParser(), kept):
            assert parser.feed(head % value) == b"abc"
            assert parser.headers == {"x-content-length": value.decode(), "content-length": "3"}


@pytest.mark.parametrize("value", [b"5x", b"1" * 21, b"\xb5", b"-5", b"5 5"])
def test_an_invalid_content_length_in_any_spelling_is_refused(value: bytes) -> None:
    for name in (b"content-length: ", b"Content-Length:", b"CONTENT-LENGTH:\t"):
        with pytest.raises(BadResponse, match="content-length"):
            ResponseParser().feed(b"HTTP/1.1 200 OK\r\n" + name + value + b"\r\n\r\n12345")


def test_a_few_interim_responses_are_fine() -> None:
    interim = b"HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n"
    parser, body = parse(interim * 50 + ok(), 7)
    assert (parser.status, body, parser.keep_alive) == (200, b'{"ok":true}', True)


@pytest.mark.parametrize(
    "line",
    [
        *(b"-1", b"0x1", b" 5", b"+5", b"5 ;x", b"5 ; x", b"", b"zz", b"1" * 16, b"0" * 16 + b"5"),
        *(b"5;a\x00", b"5;a\rb", b"5;a\x01", b"5\x00"),
    ],
)
def test_bad_chunk_sizes_are_refused(line: bytes) -> None:
    data = CHUNKED_HEAD + line + b"\r\nhello\r\n0\r\n\r\n"
    with pytest.raises(BadResponse, match="chunk-size line"):
        parse(data)
    parser, _, refused_at = feed_bytewise(data)
    assert refused_at <= len(CHUNKED_HEAD) + len(line) + 2 and not parser.complete


@pytest.mark.parametrize("line", [b"5", b"5 \t", b"5;", b'5;a=b;c="d e"\t', b"0" * 14 + b"5"])
def test_good_chunk_sizes_are_read(line: bytes) -> None:
    parser, body = parse(CHUNKED_HEAD + line + b"\r\nhello\r\n0\r\n\r\n")
    assert (parser.complete, body, parser.keep_alive) == (True, b"hello", True)


def test_a_chunk_size_line_is_refused_before_its_end() -> None:
    parser = ResponseParser()
    parser.feed(CHUNKED_HEAD + b"5\r\nhello\r\n")
    with pytest.raises(BadResponse, match="chunk-size line"):
        parser.feed(b"zz")


@pytest.mark.parametrize(
    "trailers",
    [
        *(b"content-length: 5\r\n\r\n", b"Transfer-Encoding: chunked\r\n\r\n", b"x: \x00\r\n\r\n"),
        *(b" folded\r\n\r\n", b"no colon\r\n\r\n", b"x: a\rb\r\n\r\n", b"\rx: 1\r\n\r\n"),
    ],
)
def test_bad_trailers_are_refused(trailers: bytes) -> None:
    with pytest.raises(BadResponse):
        parse(CHUNKED_HEAD + b"2\r\nab\r\n0\r\n" + trailers)


def test_content_length_has_at_most_20_digits_as_in_h11() -> None:
    assert _http11.declared_length({"content-length": "0" * 19 + "7"}) == 7
    assert _http11.declared_length({"content-length": "7" * 21}) is None
    assert _http11.declared_length({"content-length": "7, 7"}) == 7


def test_bytes_after_a_chunked_body_with_trailers_make_the_connection_unusable() -> None:
    data = chunked(b"ab", trailer=b"x: 1\r\n") + b"HTTP/1.1 200 OK\r\n"
    parser, body, _ = feed_bytewise(data)
    assert (parser.complete, body, parser.keep_alive) == (True, b"ab", False)


def test_header_values_keep_obs_text_and_inner_blanks() -> None:
    parser, _ = parse(b"HTTP/1.1 200 OK\r\nx: \t a \t b\xe9 \t\r\ncontent-length: 0\r\n\r\n")
    assert parser.headers == {"x": "a \t b\xe9", "content-length": "0"}


# -- the differential test: h11 as the oracle ----------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What a parser made of a response followed by the server closing the connection.

    ``refused``: an error, or the end of input before the response was complete. ``end``: how
    many bytes the response took (the rest were sent after it). ``reusable``: whether the
    connection could carry the next request had the server not closed it.
    """

    refused: bool
    status: int = 0
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    end: int = 0
    reusable: bool = False
    version: bytes = b""  # h11 says
    error: str = ""  # lmclient says


def normalized(headers: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """Headers as both parsers give the same ones: h11 keeps one of equal Content-Lengths and
    lower-cases Transfer-Encoding."""
    out = dict(headers)
    if "content-length" in out:
        out["content-length"] = str(_http11.declared_length(out))
    if "transfer-encoding" in out:
        out["transfer-encoding"] = out["transfer-encoding"].lower()
    return tuple(sorted(out.items()))


def by_h11(data: bytes) -> Outcome:
    conn = h11.Connection(h11.CLIENT)
    conn.send(
        h11.Request(method="POST", target="/", headers=[("Host", "x"), ("Content-Length", "0")])
    )
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    status, body, closed = 0, b"", False
    headers: dict[str, str] = {}
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA and not closed:
                conn.receive_data(b"")  # the server closes the connection
                closed = True
            elif isinstance(event, h11.Response):
                status = event.status_code
                for name, value in event.headers:
                    key, text = name.decode("latin-1"), value.decode("latin-1")
                    headers[key] = f"{headers[key]}, {text}" if key in headers else text
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                rest = conn.trailing_data[0]
                return Outcome(
                    False,
                    status,
                    normalized(headers),
                    body,
                    len(data) - len(rest),
                    conn.their_state is h11.DONE and not closed,
                    conn.their_http_version or b"",
                )
            elif not isinstance(event, h11.InformationalResponse):
                return Outcome(True)  # ConnectionClosed before the end of the response
    except h11.RemoteProtocolError:
        return Outcome(True)


def by_lmclient(data: bytes, cuts: list[int] | None = None) -> Outcome:
    """Fed in the pieces between ``cuts``, or byte by byte (which tells where the response
    ended: ``end``, otherwise unknown and given as 0)."""
    bounds = list(range(len(data) + 1)) if cuts is None else [0, *cuts, len(data)]
    parser = ResponseParser()
    body, end = b"", 0
    try:
        for start, stop in itertools.pairwise(bounds):
            body += parser.feed(data[start:stop])
            if cuts is None and parser.complete and not end:
                end = stop
        reusable = parser.complete and parser.keep_alive
        if not parser.feed_eof():
            return Outcome(True, error="incomplete")
    except BadResponse as exc:
        return Outcome(True, error=str(exc))
    assert parser.headers is not None
    end = end or (len(data) if cuts is None else 0)
    return Outcome(False, parser.status, normalized(parser.headers), body, end, reusable)


@dataclass(frozen=True)
class Stricter:
    """A shape lmclient refuses although h11 accepts it: why, the error it gives, and a test of
    the bytes for the shape."""

    reason: str
    error: str
    applies: Callable[[bytes], bool]


# Where lmclient refuses what h11 accepts, on purpose. A refusal that no entry explains (by both
# its error and the bytes) fails the test.
STRICTER = [
    Stricter(
        "control characters but HTAB: h11 refuses NUL, CR, LF, VT and FF in a head, and lets"
        " the others through in values, the reason phrase and chunk extensions; a server has no"
        " use for them, and the parsers behind a client each treat them their own way",
        "control character|a CR inside|status line|chunk-size line",
        lambda data: bool(re.search(rb"[\x01-\x08\x0e-\x1f\x7f]", data)),
    ),
    Stricter(
        "NUL, VT, FF or a bare CR in a chunk extension (h11 reads an extension up to the LF): a"
        " bare CR ends a line for some parsers",
        "chunk-size line",
        lambda data: bool(re.search(rb"\n[0-9A-Fa-f]+;[^\n]*(?:[\x00\x0b\x0c]|\r(?!\n))", data)),
    ),
    Stricter(
        "an HTTP version other than 1.0 and 1.1 (h11 takes any HTTP/d.d): not HTTP/1.x",
        "status line",
        lambda data: bool(re.search(rb"(?:^|\n)HTTP/(?!1\.[01] )[0-9]\.[0-9] ", data)),
    ),
    Stricter(
        "a folded header line (obs-fold, which h11 unfolds): deprecated by RFC 9112 §5.2, sent by"
        " no LLM server, and a classic way to hide a header from one of two parsers",
        "folded header line",
        lambda data: bool(re.search(rb"\n[ \t]", data)),
    ),
    Stricter(
        "a chunk size of 16 to 20 hex digits (h11 allows 20): no body is that large",
        "chunk-size line",
        lambda data: bool(re.search(rb"\n[0-9A-Fa-f]{16,20}[;\t \r]", data)),
    ),
    Stricter(
        "Transfer-Encoding in an HTTP/1.0 response: faulty framing by RFC 9112 §6.1",
        "HTTP/1.0 response",
        lambda data: b"HTTP/1.0 " in data and b"transfer-encoding" in data.lower(),
    ),
    Stricter(
        "Content-Length or Transfer-Encoding in a trailer section (where RFC 9110 §6.5.1 does"
        " not allow them; h11 checks their values)",
        "in the trailer section",
        lambda data: bool(
            re.search(rb"(?is)\n0[^\n]*\n.*(content-length|transfer-encoding)", data)
        ),
    ),
]


def stricter_reasons(data: bytes, error: str) -> list[str]:
    return [s.reason for s in STRICTER if re.search(s.error, error) and s.applies(data)]


def check_against_h11(data: bytes, cuts: list[int]) -> None:
    oracle = by_h11(data)
    mine = by_lmclient(data)
    if oracle.refused:
        assert mine.refused, f"h11 refuses what lmclient accepts: {mine}"
    elif mine.refused:
        assert stricter_reasons(data, mine.error), f"lmclient refuses ({mine.error}): {oracle}"
    else:
        assert mine.status == oracle.status
        assert mine.headers == oracle.headers
        assert mine.body == oracle.body
        assert mine.end == oracle.end
        if mine.reusable and not oracle.reusable:  # reusing what h11 would close: only
            tokens = dict(mine.headers).get("connection", "").lower().split(",")
            assert oracle.version == b"1.0"  # HTTP/1.0 keep-alive (RFC 9112 §9.3), which h11
            assert "keep-alive" in map(str.strip, tokens)  # does not implement
        if oracle.reusable and not mine.reusable:  # stricter: closing what h11 would reuse
            headers = dict(mine.headers)
            both = "content-length" in headers and "transfer-encoding" in headers
            assert both or mine.end < len(data)  # RFC 9112 §6.3; bytes after the response
    whole = by_lmclient(data, [])
    pieces = by_lmclient(data, cuts)
    for other in (whole, pieces):
        assert other.refused == mine.refused
        if not mine.refused:
            assert (other.status, other.headers, other.body) == (
                mine.status,
                mine.headers,
                mine.body,
            )
            assert other.reusable == mine.reusable


# -- generators: responses that are valid, valid ones mutated, and random bytes ----------------

# Hypothesis spends far more per draw than the parsers take per response, so it draws the shape
# (framing, version, status, interim responses, mutations) and a seed, from which `random` fills
# in the details; the failing bytes are shown as a note.
SEEDS = st.integers(0, 2**32 - 1)

TOKEN_CHARS = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
VALUE_CHARS = bytes(range(0x21, 0x7F)) + b"     \t\x80\xe9\xff"  # blanks inside, obs-text
KNOWN_NAMES = [b"server", b"Date", b"content-type", b"X-Request-Id", b"x-dup", b"X-DUP"]
REASONS = [b" OK", b" Not Found", b"", b" ", b" \xe9t\xe9 \t x"]
CONNECTIONS = [b"close", b"keep-alive", b"Keep-Alive, Upgrade", b" close ,x"]
EXTENSIONS = [b"", b"", b"", b";a=1", b';name="v al"', b"; x", b";", b" ", b"\t \t"]


def fields(rng: random.Random) -> list[tuple[bytes, bytes]]:
    out = []
    for _ in range(rng.randrange(6)):
        if rng.random() < 0.5:
            name = rng.choice(KNOWN_NAMES)
        else:
            name = b"x-" + bytes(rng.choices(TOKEN_CHARS, k=rng.randrange(1, 10)))
        out.append((name, bytes(rng.choices(VALUE_CHARS, k=rng.randrange(25)))))
    return out


def eol(rng: random.Random, lf: bool) -> bytes:
    return b"\n" if lf and rng.random() < 0.5 else b"\r\n"


def section(rng: random.Random, lf: bool, lines: list[tuple[bytes, bytes]]) -> bytes:
    """Header lines and the blank line after them: CRLF lines, or some bare LFs."""
    return b"".join(n + b":" + v + eol(rng, lf) for n, v in lines) + eol(rng, lf)


def head(
    rng: random.Random, lf: bool, status_line: bytes, lines: list[tuple[bytes, bytes]]
) -> bytes:
    return status_line + eol(rng, lf) + section(rng, lf, lines)


def chunked_body(rng: random.Random, lf: bool, body: bytes) -> bytes:
    out, at = b"", 0
    while at < len(body):
        size = rng.randrange(1, len(body) - at + 1)
        hexa = rng.choice(["%x", "%X", "%03x"]) % size
        out += b"%s%s\r\n%s\r\n" % (hexa.encode(), rng.choice(EXTENSIONS), body[at : at + size])
        at += size
    return out + b"0" + rng.choice(EXTENSIONS) + b"\r\n" + section(rng, lf, fields(rng))


def build_response(
    seed: int, framing: str, version: bytes, status: int, interim: int, lf: bool
) -> bytes:
    """A valid response: interim heads, any framing, bare LFs, and sometimes bytes after it."""
    rng = random.Random(seed)
    out = b"".join(
        head(rng, lf, b"HTTP/1.1 %d Interim" % rng.choice([100, 102, 103, 199]), fields(rng))
        for _ in range(interim)
    )
    lines = fields(rng)
    if rng.random() < 0.3:
        lines.append((b"Connection", b" " + rng.choice(CONNECTIONS)))
    body = rng.randbytes(rng.randrange(120)) if status not in (204, 304) else b""
    if version == b"HTTP/1.0" and framing in ("chunked", "both"):
        framing = "length"
    if framing in ("length", "both"):
        length = b"%d" % len(body)
        lines.append((b"Content-Length", rng.choice([b" ", b"", b"\t"]) + length))
        if rng.random() < 0.3:
            lines.append((b"content-length", b" %s, %s" % (length, length)))
    if framing in ("chunked", "both"):
        lines.append(
            (b"Transfer-Encoding", b" " + rng.choice([b"chunked", b"Chunked", b"CHUNKED"]))
        )
    rng.shuffle(lines)
    out += head(rng, lf, b"%s %d%s" % (version, status, rng.choice(REASONS)), lines)
    if framing in ("chunked", "both") and status not in (204, 304):
        out += chunked_body(rng, lf, body)
    else:
        out += body
    if framing != "close" and rng.random() < 0.3:
        out += rng.choice([b"HTTP/1.1 200 OK\r\n\r\n", b"x", b"\r\n", b"\n"])
    return out


SHAPES = list(
    itertools.product(
        ["length", "chunked", "close", "both"],  # framing
        [b"HTTP/1.1", b"HTTP/1.0"],
        [200, 201, 204, 299, 304, 404, 500, 999],  # status
        [0, 1, 2],  # interim responses
        [False, True],  # bare LFs
    )
)
valid_responses = st.builds(
    lambda seed, shape: build_response(seed, *shape), SEEDS, st.sampled_from(SHAPES)
)

SPECIAL = [
    *(b"\r", b"\n", b"\r\n", b"\n\n", b"\r\n\r\n", b"\x00", b"\x01", b"\x0b", b"\x0c", b"\x7f"),
    *(b" ", b"\t", b":", b";", b",", b"-", b"0", b"f", b"9", b"\x80", b"\xff", b"H", b"/"),
]
HOSTILE_LINES = [
    *(b"Content-Length: 0", b"Content-Length: 5", b"Content-Length: -1", b"Content-Length: 1, 2"),
    *(b"Content-Length: " + b"9" * 21, b"Content-Length: +1", b"Content-Length:"),
    *(b"content-length: 007", b"Content-Length: 5\r\nContent-Length: 6", b"Content-Length: \xa05"),
    *(
        b"Transfer-Encoding: chunked",
        b"Transfer-Encoding: gzip, chunked",
        b"Transfer-Encoding: gzip",
    ),
    *(
        b"Transfer-Encoding: chunked, chunked",
        b"Transfer-Encoding: identity",
        b"Transfer-Encoding:",
    ),
    *(b" folded", b"\tfolded", b"X : y", b"X\t: y", b": novalue", b"no colon", b"bad name: v"),
    *(b"x(y): v", b"x: a\rb", b"x: a\x00b", b"x: \x01", b"x: \x7f", b"x: \xff\xfe", b"x: y\r"),
    *(b"Connection: close", b"Connection: keep-alive", b"Connection: Upgrade", b"Upgrade: h2c"),
]
STATUS_CODES = [b"000", b"099", b"100", b"101", b"199", b"200", b"20", b"2000", b"abc", b"-20"]
CHUNK_SIZES = [b"-1", b"0x1", b" 5", b"5 ", b"5 ;x", b"5;x", b"f" * 17, b"0" * 16 + b"5", b"+5"]
PREFIXES = [H2_PREFACE, H2_SETTINGS, b"\r\n", b"\n", b" ", b"HTTP/2 200 OK\r\n\r\n", b"\x16\x03"]


def mutate(data: bytes, seed: int, ops: Sequence[str]) -> bytes:
    rng = random.Random(seed)
    for op in ops:
        at = rng.randrange(len(data) + 1)
        if op == "insert":
            data = data[:at] + rng.choice(SPECIAL) + data[at:]
        elif op == "replace":
            data = data[:at] + rng.choice(SPECIAL) + data[at + 1 :]
        elif op == "delete":
            data = data[:at] + data[at + 1 :]
        elif op == "line":  # a header line, after a line end
            at = rng.choice([m.end() for m in re.finditer(rb"\n", data)] or [0])
            line = rng.choice(HOSTILE_LINES) + rng.choice([b"\r\n", b"\n"])
            data = data[:at] + line + data[at:]
        elif op == "status":
            if re.match(rb"HTTP/1\.[01] [0-9]{3}", data):
                data = data[:9] + rng.choice(STATUS_CODES) + data[12:]
        elif op == "chunk":
            sizes = [m.span(1) for m in re.finditer(rb"\n([0-9a-fA-F]+)[; \t\r]", data)]
            if sizes:
                start, stop = rng.choice(sizes)
                data = data[:start] + rng.choice(CHUNK_SIZES) + data[stop:]
        else:
            data = rng.choice(PREFIXES) + data
    return data


OPS = ["insert", "replace", "delete", "line", "status", "chunk", "prefix"]
mutated = st.builds(
    mutate,
    valid_responses,
    SEEDS,
    st.sampled_from(
        [
            *((op,) for op in OPS),
            *itertools.product(OPS, OPS),
            *zip(OPS, OPS[1:], OPS[2:], strict=False),
        ]
    ),
)
random_bytes = st.one_of(
    st.binary(max_size=200),
    st.binary(max_size=200).map(lambda b: b"HTTP/1.1 " + b),
    st.binary(max_size=200).map(lambda b: b"HTTP/1.1 200 OK\r\n" + b),
    st.binary(max_size=200).map(lambda b: CHUNKED_HEAD + b),
    st.lists(st.sampled_from([*SPECIAL, b"HTTP/1.1 200 OK", b"content-length: 1", b"0", b"a"])).map(
        b"".join
    ),
)


def cuts(data: bytes) -> list[int]:
    """A few points, chosen by the bytes, at which to cut them into pieces."""
    rng = random.Random(zlib.crc32(data))
    return sorted(rng.randrange(len(data) + 1) for _ in range(rng.randrange(1, 8)))


@pytest.mark.slow  # 1000 examples against h11: seconds
@settings(max_examples=1000, deadline=None)
@given(valid_responses)
def test_valid_responses_agree_with_h11(data: bytes) -> None:
    note(f"response: {data!r}")
    check_against_h11(data, cuts(data))


@pytest.mark.slow  # 1000 examples against h11: seconds
@settings(max_examples=1000, deadline=None)
@given(mutated)
def test_mutated_responses_are_never_accepted_where_h11_refuses(data: bytes) -> None:
    note(f"response: {data!r}")
    check_against_h11(data, cuts(data))


@pytest.mark.slow  # 1000 examples against h11: seconds
@settings(max_examples=1000, deadline=None)
@given(random_bytes)
def test_random_bytes_are_never_accepted_where_h11_refuses(data: bytes) -> None:
    note(f"response: {data!r}")
    check_against_h11(data, cuts(data))


@pytest.mark.parametrize(
    "data",
    [
        H2_PREFACE,
        H2_PREFACE + H2_SETTINGS,
        b"HTTP/1.1 099 X\r\n\r\n" + ok(),
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab",
        b"HTTP/1.1 200 OK\ncontent-length: 2\n\nab",
        b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nab",
        chunked(b"ab", trailer=b"x: 1\r\n") + b"after",
    ],
)
def test_known_shapes_against_h11(data: bytes) -> None:
    check_against_h11(data, [len(data) // 2])
