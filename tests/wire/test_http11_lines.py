"""The parser's cache of head lines (`lmclient._wire.http11._Lines`): a line is checked by the
rules' pattern the first time it comes and looked up after that, so what the cache says must be what
the pattern says, for every line and however the cache was filled; and a server cannot make it
hold long lines."""

from __future__ import annotations

import pytest

from lmclient._wire import http11 as _http11
from lmclient._wire.http11 import BadResponse, ResponseParser


def head(*lines: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\n" + b"".join(line + b"\r\n" for line in lines) + b"\r\n"


def parse(data: bytes) -> ResponseParser:
    parser = ResponseParser()
    parser.feed(data)
    return parser


@pytest.mark.parametrize(
    ("line", "headers"),
    [
        (b"content-length: 0", {"content-length": "0"}),
        (b"Content-Length: 0", {"content-length": "0"}),
        (b"CONTENT-LENGTH: 00", {"content-length": "00"}),
        (b"content-length:0", {"content-length": "0"}),  # by the pattern, not the shortcut
        (b"content-length: 0 ", {"content-length": "0"}),
    ],
)
def test_a_content_length_line_says_the_same_seen_or_not(
    line: bytes, headers: dict[str, str]
) -> None:
    _http11._FIELDS.clear()
    first = parse(head(line))  # checked: the shortcut for its usual form, else the pattern
    again = parse(head(line))  # looked up
    assert first.headers == again.headers == headers
    assert first.complete and again.complete


@pytest.mark.parametrize(
    "line",
    [
        b"content-length: 1 2",
        b"content-length: -1",
        b"content-length: 0x1",
        b"content-length: " + b"9" * 21,  # longer than the shortcut takes: the pattern, refused
    ],
)
def test_a_bad_content_length_line_is_refused_seen_or_not(line: bytes) -> None:
    for _ in range(2):
        with pytest.raises(BadResponse, match="content-length"):
            parse(head(line))


def test_only_short_lines_are_kept() -> None:
    _http11._FIELDS.clear()
    short, long = b"x-short: " + b"a" * 100, b"x-long: " + b"a" * 1000
    parser = parse(head(short, long, b"content-length: 0"))
    assert parser.headers == {"x-short": "a" * 100, "x-long": "a" * 1000, "content-length": "0"}
    assert short in _http11._FIELDS
    assert long not in _http11._FIELDS
    assert parse(head(short, long, b"content-length: 0")).headers == parser.headers


def test_a_line_that_breaks_a_rule_is_never_kept() -> None:
    _http11._FIELDS.clear()
    for _ in range(2):
        with pytest.raises(BadResponse, match="control character"):
            parse(head(b"x: a\x01b", b"content-length: 0"))
    assert not any(line.startswith(b"x:") for line in _http11._FIELDS)


def test_a_full_cache_starts_again() -> None:
    _http11._FIELDS.clear()
    for i in range(_http11._MAX_CACHED + 10):
        assert parse(head(b"x-n: %d" % i, b"content-length: 0")).headers == {
            "x-n": str(i),
            "content-length": "0",
        }
    assert len(_http11._FIELDS) <= _http11._MAX_CACHED
