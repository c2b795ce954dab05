"""HTTP/1.1 for a client connection, sans I/O: the bytes of a request out; a response's head and
body out of bytes fed in pieces of any size.

lmclient's own transports send one request at a time per connection (no pipelining), always frame
the body with Content-Length, and ask for no compression, so the response side needs only: the
status line and headers, Content-Length, chunked and read-until-close bodies, 1xx interim
responses, bodyless statuses, and whether the connection may be reused. h11 does all this too,
with an event object per step, at several times this parser's CPU per response; that difference
is most of what separates lmclient's CPU per call from a raw socket's (see benchmarks/README.md).

What a response may be is h11's rule, or stricter where said (tests/wire/test_http11.py checks this
against h11 itself). Two parsers that disagree on where a message ends are how responses are
smuggled, so nothing h11 refuses is accepted, and nothing unclear is read until close instead:

* Lines end with CRLF or a bare LF (RFC 9112 §2.2 lets a recipient accept LF, and h11 does), so a
  head ends at the first LF [CR] LF. Any other CR, and every control character but HTAB, is
  refused anywhere in a head: a bare CR ends a line for some parsers and not for others. (h11
  lets the other control characters through in values and the reason phrase.)
* The status line is ``HTTP/1.1`` or ``HTTP/1.0``, a space, three digits from 100 up, then
  optionally a space and a reason phrase, which is ignored. (h11 takes any ``HTTP/d.d``.) Every
  response starts so; bytes that cannot (an HTTP/2 preface or frame, TLS, a blank line) are
  refused as soon as they show it, and a bad status line at its line end, not at the read timeout.
* A header line is a token, a colon, and a value between optional blanks: visible characters and
  obs-text (bytes 0x80-0xFF), single words or several separated by blanks. A blank before the
  colon, an empty name, a line without a colon, and a folded line (obs-fold, deprecated by RFC 9112
  §5.2; h11 unfolds it) are refused. Names are lower-cased; repeated headers are joined with
  ``", "`` (RFC 9110 §5.3).
* 1xx interim heads are checked like the final one, then skipped; 101 is refused (lmclient never
  asks to switch protocols), as is a status below 100. All the heads before the body, interim ones
  included, are bounded together by MAX_HEAD_BYTES, so endless ``100 Continue`` ends in an error
  (h11 bounds only what it holds of one incomplete head, so its limit depends on how the bytes
  were cut: 16 KiB by default, 100 KiB as httpx sets it).
* Transfer-Encoding must be exactly ``chunked`` (in any case), once: ``gzip, chunked``,
  ``chunked, chunked``, ``identity``, and any coding in an HTTP/1.0 response (faulty framing, RFC
  9112 §6.1; h11 reads it) are refused. Content-Length is 1 to 20 digits; repeated equal values are
  one, differing values an error. Both are checked in every head, also where they frame nothing
  (1xx, 204, 304, and Content-Length beside Transfer-Encoding).
* A response with both is read as chunked and its connection not reused (RFC 9112 §6.3); 204 and
  304 have no body; a response with neither is read until the server closes the connection.
* A chunk-size line is 1 to 15 hex digits (h11: 20), then either ``;`` and extensions (visible
  characters and blanks) or blanks, then CRLF: h11 wants CRLF here too, and refuses the blank
  before ``;`` that RFC 9112 allows. A line is refused as soon as it cannot become valid (a sign,
  ``0x``, a blank before the digits, a bare LF). Chunk data ends with CRLF. The trailer section
  ends at a blank line like a head, each line a header line but not a framing header (h11 checks
  their values); it is dropped, and bounded by MAX_TRAILER_BYTES, h11's default bound, since no
  LLM server sends trailers and an endless section would otherwise be read forever.
* Bytes after the end of a response (a server must not send any) are dropped and make the
  connection unusable rather than failing the response. The connection is reused after HTTP/1.1
  without ``Connection: close``, and after HTTP/1.0 with ``Connection: keep-alive`` (which h11
  does not implement).
* Content-Encoding gzip or deflate is decoded (a server may compress although lmclient does not
  ask); any other coding is an error, since the body could not be validated.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

__all__ = [
    "BadResponse",
    "ContentDecoder",
    "ResponseParser",
    "content_decoder",
    "declared_length",
    "encode_head",
    "encode_request",
]

MAX_HEAD_BYTES = 64 * 1024  # all heads before the body, 1xx ones too: more is no LLM server
MAX_TRAILER_BYTES = 16 * 1024  # the trailer section
MAX_LINE_BYTES = 4096  # a chunk-size line
_LAST_HEAD_END = MAX_HEAD_BYTES - 3  # a head's CRLF CRLF found before it ends within the bound
_SIZED = frozenset(range(200, 1000)) - {204, 304}  # the final statuses whose body has a length

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # CTLs but HTAB: CR/LF would inject headers
_FRAMING = frozenset({"content-length", "transfer-encoding"})  # set by lmclient, not by headers=

# The exact rules, as patterns over the latin-1 text of a head (each byte one character).
_VCHAR = r"[^\x00-\x20\x7f]"  # a visible character or obs-text
_FIELD_LINE = re.compile(rf"({_TOKEN.pattern}):[ \t]*((?:{_VCHAR}+(?:[ \t]+{_VCHAR}+)*)?)[ \t]*")
_STATUS_LINE = re.compile(r"HTTP/1\.([01]) ([1-9][0-9][0-9])(?: [^\x00-\x08\x0a-\x1f\x7f]*)?")
# The lines of a head repeat from response to response (a server sends the same status line and
# mostly the same header lines), so each valid line seen is kept with what it says, and a head in
# CRLF lines costs a dictionary look-up per line (`_Lines`, after the rules' patterns); a line
# not seen before is checked by the pattern, as any other. Whole heads repeat too, but for their
# Content-Length: `ResponseParser._common` keeps their shapes (the connection's last one, and
# `_SHAPES`, learnt by the lines).
_MAX_CACHED = 1024  # lines in each; a full cache is emptied and fills again with current lines
_MAX_CACHED_LINE = 256  # bytes: a longer line is checked every time it comes
_CTL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_BLANK_LINE = re.compile(rb"\n\r?\n")  # the end of a head or a trailer section
# What the first line of a head may be while its end has not arrived.
_STATUS_START = re.compile(
    rb"H(?:T(?:T(?:P(?:/(?:1(?:\.(?:[01](?: (?:[1-9](?:[0-9](?:[0-9]"
    rb"(?: [\t\x20-\x7e\x80-\xff]*)?\r?)?)?)?)?)?)?)?)?)?)?)?"
)
_EXTENSIONS = rb"(?:;[\t\x20-\x7e\x80-\xff]*|[ \t]*)"  # chunk extensions, or trailing blanks
_CHUNK_LINE = re.compile(rb"([0-9A-Fa-f]{1,15})" + _EXTENSIONS + rb"\r\n")
_CHUNK_LINE_START = re.compile(rb"[0-9A-Fa-f]{0,15}|[0-9A-Fa-f]{1,15}" + _EXTENSIONS + rb"\r?")

_V = TypeVar("_V")

_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE, _DONE = range(8)


class BadResponse(Exception):
    """The peer's bytes are not an HTTP/1.1 response."""


def encode_head(
    method: str, target: bytes, host: bytes, headers: Sequence[tuple[str, str]]
) -> bytes:
    """The request line and headers, without the body's framing or the blank line: it depends
    only on the client's configuration, so transports compute it once per URL and reuse it.

    A ``host`` in ``headers`` replaces the URL's; Content-Length and Transfer-Encoding are
    lmclient's to set. Raises ValueError for a header that is not a token or whose value holds a
    control character (CR or LF would let a value inject headers)."""
    lines = [b""]
    for name, value in headers:
        key = name.lower()
        if key in _FRAMING:
            continue
        if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
            raise ValueError(f"invalid HTTP header {name!r}")
        if key == "host":
            host = value.encode("latin-1")
            continue
        lines.append(b"%s: %s\r\n" % (name.encode("ascii"), value.encode("latin-1")))
    lines[0] = b"%s %s HTTP/1.1\r\nhost: %s\r\n" % (method.encode("ascii"), target, host)
    return b"".join(lines)


def encode_request(head: bytes, body: bytes | None) -> bytes:
    """The whole request: ``head`` from `encode_head`, the framing, and the body."""
    if body is None:
        return head + b"\r\n"
    return b"%scontent-length: %d\r\n\r\n%s" % (head, len(body), body)


class ResponseParser:
    """One response: `feed` bytes as they arrive, get body bytes back (transfer coding removed).

    ``status`` and ``headers`` are set once the head is complete (``headers is None`` before);
    ``complete`` once the body has ended; ``keep_alive`` says whether the connection may carry
    the next request afterwards. At end of input call `feed_eof`, which says whether the response
    was complete (a read-until-close body completes there). Bytes that are not a response raise
    `BadResponse`, as soon as they show it.
    """

    __slots__ = (
        "_buffer",
        "_remaining",
        "_shape",
        "_state",
        "complete",
        "headers",
        "keep_alive",
        "length",
        "status",
    )

    def __init__(self) -> None:
        self._shape: _Shape | None = None  # the last head's (`_common`), kept across `reset`
        self.status = 0  # (these two are set with ``headers``: `reset` leaves them)
        self.keep_alive = False
        self.reset()

    def reset(self) -> None:
        """Make the parser new, for the next response on its connection: a transport keeps one
        parser per connection, since resetting one costs less than making one."""
        self._buffer = b""
        self._state = _HEAD
        self._remaining = 0  # in the head: the bytes of the heads so far; then, of the body
        self.headers: dict[str, str] | None = None
        self.length: int | None = None  # the declared Content-Length of a sized body
        self.complete = False  # the state is _DONE (an attribute: transports read it often)

    def start(self, data: bytes) -> bytes:
        """`reset`, then `feed` ``data``: the first bytes of the next response, on a parser that
        is new or read its last response to its end (as a pooled connection's is). The common
        response sets every field itself, so it costs no reset."""
        body = self._common(data)
        if body is None:
            self.reset()
            body = self.feed(data)
        return body

    @property
    def started(self) -> bool:
        """Whether any byte of the response has arrived."""
        return (
            self.headers is not None
            or bool(self._buffer)
            or self._state != _HEAD
            or self._remaining > 0  # an interim head
        )

    def feed(self, data: bytes) -> bytes:
        """Consume ``data``; return the body bytes it carried (possibly none)."""
        state = self._state
        if state == _HEAD:
            if self._buffer:
                data = self._buffer + data
                self._buffer = b""
            elif not self._remaining:  # the first bytes of the response (no interim head read)
                body = self._common(data)
                if body is not None:
                    return body
            pos = self._head(data)
            if pos < 0:
                return b""
            if pos:
                data = data[pos:]
            state = self._state
        if state == _LENGTH:  # the hot case: the body of a sized response
            n = len(data)
            if n < self._remaining:
                self._remaining -= n
                return data
            if n > self._remaining:
                data = data[: self._remaining]
                self.keep_alive = False
            self._remaining = 0
            self._state = _DONE
            self.complete = True
            return data
        if state == _UNTIL_CLOSE:
            return data
        if state == _DONE:
            if data:
                self.keep_alive = False  # unsolicited bytes: the connection's state is unknown
            return b""
        if self._buffer:
            data = self._buffer + data
            self._buffer = b""
        return self._chunked(data, 0)

    def feed_eof(self) -> bool:
        """The peer closed the connection; returns whether the response is complete."""
        if self._state == _UNTIL_CLOSE:
            self._state = _DONE
            self.complete = True
        self.keep_alive = False
        return self.complete

    # -- head ------------------------------------------------------------------------------

    def _common(self, data: bytes) -> bytes | None:
        """Read the common response from ``data``, the first bytes of a response: a final head in
        CRLF lines, sized by one Content-Length and nothing else; the body bytes it carried, or
        None for any other head, which the general path reads (`_head`).

        A server sends the same head with each answer but for its Content-Length digits (uvicorn's
        Date changes once a second), so a head is a *shape*: its bytes up to the digits, the
        digits, and the bytes after them to the blank line. A connection's parser keeps the last
        shape it read (``_shape``), and a head that starts with its bytes, has 1 to 20 ASCII digits
        and then its bytes after them, is that head with other digits: three comparisons, no
        copy. Any other head is looked up by its bytes up to the digits among the shapes read on
        any connection (`_known_shape`), else split into lines (`_uncommon`). Every shape was
        read by the lines' rules first, and its bytes hold no blank line, so the head ends where
        its shape does."""
        shape = self._shape
        if shape is None or not data.startswith(shape[0]):
            shape = self._known_shape(data)
        digits = b""
        if shape is not None:
            prefix, tail, status, headers, keep_alive = shape
            at = len(prefix)
            stop = data.find(b"\r", at, at + 21)  # after 1 to 20 bytes: the digits, if they are
            if data.startswith(tail, stop):  # (never at -1: a tail is 4 bytes or more)
                digits = data[at:stop]
        if digits.isdigit():  # (ASCII digits only; none, if the head is not this shape)
            headers = headers.copy()
            headers["content-length"] = digits.decode("ascii")
            n = int(digits)
            start = stop + len(tail)
        else:
            read = self._uncommon(data)
            if read is None:
                return None
            status, headers, n, keep_alive, start = read
        self.status = status
        self.headers = headers
        self.length = n
        stop = start + n
        if len(data) < stop:  # the rest of the body is still to come
            self.keep_alive = keep_alive
            self._remaining = stop - len(data)
            self._state = _LENGTH
            self.complete = False
            return data[start:]
        # bytes after the response (a server must not send any): the connection is not reused
        self.keep_alive = keep_alive and len(data) == stop
        self._remaining = 0
        self._state = _DONE
        self.complete = True
        return data[start:stop]

    def _known_shape(self, data: bytes) -> _Shape | None:
        """The shape of the head in ``data`` among those read on any connection, by its bytes
        up to the Content-Length digits (then the connection's last); None if none fits."""
        end = data.find(b"\r\n\r\n")  # (a head of a shape is within the heads' bound)
        at = data.find(b"ontent-length: ", 0, end) + 15 if end > 0 else 0
        shape = _SHAPES.get(data[:at]) if at > 15 else None
        if shape is not None:
            self._shape = shape
        return shape

    def _uncommon(self, data: bytes) -> tuple[int, dict[str, str], int, bool, int] | None:
        """`_common` for a head of no shape read before: its status, headers, Content-Length,
        whether the connection stays open, and where its body starts; None if it is not the
        common response (or not all here). The head is split into lines, each looked up as a
        line seen before (`_Lines`), and its shape kept for the next."""
        end = data.find(b"\r\n\r\n")
        if end < 0 or end >= _LAST_HEAD_END:  # (no interim heads before: the whole bound)
            return None
        at = data.find(b"ontent-length: ", 0, end) + 15  # after "Content-Length: ", if there
        lines = data[:end].split(b"\r\n")
        try:
            version, status = _status_line(lines.pop(0))
            headers = dict(map(_field_line, lines))
        except _Malformed:  # a line not seen before that breaks a rule
            return None
        length = headers.get("content-length")
        if (
            length is None
            or status not in _SIZED
            or "transfer-encoding" in headers
            or len(headers) < len(lines)  # a header repeated
        ):
            return None
        connection = headers.get("connection")
        keep_alive = (
            version == "HTTP/1.1" if connection is None else _keeps_alive(version, connection)
        )
        stop = at + len(length)
        if (
            15 < at <= _MAX_SHAPE_PREFIX
            and data[at - 18 : at - 15] in (b"\r\nc", b"\r\nC")  # the line's start
            and data[at:stop] == length.encode("ascii")
            and (stop == end or data.startswith(b"\r\n", stop))
        ):
            if len(_SHAPES) >= _MAX_SHAPES:
                _SHAPES.clear()
            prefix = data[:at]
            shape = (prefix, data[stop : end + 4], status, dict(headers), keep_alive)
            self._shape = _SHAPES[prefix] = shape
        return status, headers, int(length), keep_alive, end + 4

    def _head(self, data: bytes) -> int:
        """Parse heads (skipping 1xx interim ones) from ``data``; the offset after the final
        head, or -1 when it is not complete yet (the bytes are kept).

        A head in CRLF lines that were all seen before costs a dictionary look-up per line
        (`_Lines`); any other is split and checked line by line (`_split_head`). One function
        with its framing rules (`_framing`) for the common head: each call costs every response."""
        pos = 0
        while True:
            headers = None
            end = data.find(b"\r\n\r\n", pos)
            if end >= 0 and self._remaining + end + 4 - pos <= MAX_HEAD_BYTES:
                lines = data[pos:end].split(b"\r\n")
                try:
                    version, status = _status_line(lines.pop(0))
                    headers = dict(map(_field_line, lines))
                except _Malformed:  # a line not seen before that breaks a rule
                    pass
                else:
                    if len(headers) < len(lines):
                        headers = None  # a repeated header: `_split_head` joins its values
                end += 4
            if headers is None:  # bare LF line ends, a malformed head, or not all here yet
                blank = _BLANK_LINE.search(data, pos)
                if blank is None:
                    self._partial_head(data, pos)
                    return -1
                end = blank.end()
                if self._remaining + end - pos > MAX_HEAD_BYTES:
                    raise BadResponse(f"response head larger than {MAX_HEAD_BYTES} bytes")
                version, status, headers = _split_head(data[pos : blank.start()])
            self._remaining += end - pos
            pos = end
            coding = headers.get("transfer-encoding")
            length = headers.get("content-length")
            if coding is not None or length is None or not length.isdecimal() or len(length) > 20:
                n = _framing(version, coding, length, headers)
            else:  # of latin-1 text, isdecimal() is ASCII digits only
                n = int(length)
            if status < 200:
                if status == 101:
                    raise BadResponse(
                        "the server switched protocols, which lmclient never asks for"
                    )
                continue  # a 1xx interim response, which carries no body
            self.status = status
            self.headers = headers
            connection = headers.get("connection")
            if connection is None:
                self.keep_alive = version == "HTTP/1.1"
            else:
                self.keep_alive = _keeps_alive(version, connection)
            self._remaining = 0
            if status == 204 or status == 304:
                self._state = _DONE
                self.complete = True
            elif coding is not None:
                self._state = _CHUNK_SIZE
                if n is not None:
                    self.keep_alive = False
            elif n is not None:
                self.length = self._remaining = n
                if n:
                    self._state = _LENGTH
                else:
                    self._state = _DONE
                    self.complete = True
            else:
                self._state = _UNTIL_CLOSE
                self.keep_alive = False
            return pos

    def _partial_head(self, data: bytes, pos: int) -> None:
        """Keep the start of a head, unless it already cannot be one."""
        if self._remaining + len(data) - pos > MAX_HEAD_BYTES:
            raise BadResponse(f"response head larger than {MAX_HEAD_BYTES} bytes")
        eol = data.find(b"\n", pos)
        if eol >= 0:
            line = data[pos:eol].decode("latin-1").removesuffix("\r")
            if _STATUS_LINE.fullmatch(line) is None:
                raise _not_a_status_line(line)
        elif pos < len(data) and _STATUS_START.fullmatch(data, pos) is None:
            raise _not_a_status_line(data[pos : pos + 100].decode("latin-1"))
        self._buffer = data[pos:] if pos else data

    # -- chunked body ----------------------------------------------------------------------

    def _chunked(self, data: bytes, pos: int) -> bytes:
        out: list[bytes] = []
        n = len(data)
        state = self._state
        while pos < n:
            if state == _CHUNK_SIZE:
                line = _CHUNK_LINE.match(data, pos)
                if line is None:
                    self._partial_chunk_line(data, pos)
                    break
                size = int(line[1], 16)
                pos = line.end()
                if not size:
                    state = _TRAILERS
                    continue
                end = pos + size
                if data.startswith(b"\r\n", end):  # the whole chunk is here: the common case
                    out.append(data[pos:end])
                    pos = end + 2
                    continue
                self._remaining = size
                state = _CHUNK_DATA
            elif state == _CHUNK_DATA:
                end = pos + self._remaining
                if end <= n:
                    out.append(data[pos:end])
                    pos = end
                    state = _CHUNK_END
                else:
                    out.append(data[pos:])
                    self._remaining -= n - pos
                    pos = n
            elif state == _CHUNK_END:
                if data.startswith(b"\r\n", pos):
                    pos += 2
                    state = _CHUNK_SIZE
                elif pos == n - 1 and data[pos] == 13:  # CR, its LF still to come
                    self._buffer = b"\r"
                    break
                else:
                    raise BadResponse("chunk data longer than its declared size")
            else:  # _TRAILERS
                end = self._trailers(data, pos)
                if end < 0:
                    break
                state = _DONE
                self.complete = True
                if end < n:
                    self.keep_alive = False
                break
        self._state = state
        return out[0] if len(out) == 1 else b"".join(out)

    def _partial_chunk_line(self, data: bytes, pos: int) -> None:
        """Keep the start of a chunk-size line, unless it already cannot be one."""
        if _CHUNK_LINE_START.fullmatch(data, pos) is None:
            raise BadResponse(f"invalid chunk-size line: {data[pos : pos + 100]!r}")
        if len(data) - pos > MAX_LINE_BYTES:
            raise BadResponse("chunk-size line too long")
        self._buffer = data[pos:]

    def _trailers(self, data: bytes, pos: int) -> int:
        """The offset after the trailer section, or -1 when it is not complete yet."""
        if data.startswith(b"\r\n", pos):  # none: the common case
            return pos + 2
        if data.startswith(b"\n", pos):
            return pos + 1
        blank = _BLANK_LINE.search(data, pos)
        end = len(data) if blank is None else blank.end()
        if end - pos > MAX_TRAILER_BYTES:
            raise BadResponse(f"trailer section larger than {MAX_TRAILER_BYTES} bytes")
        if blank is None:
            self._buffer = data[pos:]
            return -1
        for line in data[pos : blank.start()].decode("latin-1").split("\n"):
            name, _ = _field(line.removesuffix("\r"))
            if name.lower() in _FRAMING:
                raise BadResponse(f"{name} in the trailer section")
        return end


class _Malformed(Exception):
    """A line of a head breaks a rule: `_split_head` says which."""


class _Lines(dict[bytes, _V]):
    """Valid lines of heads seen, with what they say: a line not seen before is checked by the
    pattern when it is looked up (`_Malformed` if it breaks the rule), and kept if it is short
    (so that a server's long lines cannot fill memory: at most _MAX_CACHED of _MAX_CACHED_LINE
    bytes each)."""

    __slots__ = ("_learn",)

    def __init__(self, learn: Callable[[bytes], _V | None]) -> None:
        super().__init__()
        self._learn = learn

    def __missing__(self, line: bytes) -> _V:
        value = self._learn(line)
        if value is None:
            raise _Malformed
        if len(line) <= _MAX_CACHED_LINE:
            if len(self) >= _MAX_CACHED:
                self.clear()
            self[line] = value
        return value


def _learn_status_line(line: bytes) -> tuple[str, int] | None:
    match = _STATUS_LINE.fullmatch(line.decode("latin-1"))
    return None if match is None else (f"HTTP/1.{match.group(1)}", int(match.group(2)))


def _learn_field_line(line: bytes) -> tuple[str, str] | None:
    if line[:16].lower() == b"content-length: " and line[16:].isdigit() and len(line) <= 36:
        return "content-length", line[16:].decode("ascii")  # its value varies: no pattern
    match = _FIELD_LINE.fullmatch(line.decode("latin-1"))
    if match is None:
        return None
    name, value = match.group(1).lower(), match.group(2)
    if name == "content-length" and not (value.isdecimal() and len(value) <= 20):
        return None  # kept only as 1 to 20 digits: any other goes to `_split_head`, `_framing`
    return name, value


# Heads read before (`ResponseParser._common`), by their bytes up to the Content-Length digits:
# those bytes, the bytes after the digits to the body, the status, the headers, and whether the
# connection stays open.
_Shape = tuple[bytes, bytes, int, dict[str, str], bool]
_SHAPES: dict[bytes, _Shape] = {}
_MAX_SHAPES = 256  # a full cache is emptied (uvicorn's Date makes a new shape every second)
_MAX_SHAPE_PREFIX = 2048  # bytes up to the digits: a longer head is read by its lines each time
_STATUS_LINES = _Lines(_learn_status_line)  # version, status
_FIELDS = _Lines(_learn_field_line)  # lower-cased name, value
# Bound look-ups: subscripting a dict subclass goes through a slower generic slot.
_status_line = _STATUS_LINES.__getitem__
_field_line = _FIELDS.__getitem__


def _keeps_alive(version: str, connection: str) -> bool:
    """Whether a response with this Connection header leaves its connection open."""
    tokens = {t.strip(" \t").lower() for t in connection.split(",")}
    return "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens


def _framing(
    version: str, coding: str | None, length: str | None, headers: Mapping[str, str]
) -> int | None:
    """The Content-Length of a head that is not the common one (a single value of digits, no
    Transfer-Encoding), or None; `BadResponse` for framing that is refused."""
    n = None
    if length is not None:
        if length.isdecimal() and len(length) <= 20:
            n = int(length)
        else:
            n = declared_length(headers)
            if n is None:
                raise BadResponse(f"invalid content-length: {length[:100]!r}")
    if coding is not None:
        if coding.lower() != "chunked":
            raise BadResponse(f"unsupported transfer-encoding {coding[:100]!r}")
        if version == "HTTP/1.0":
            raise BadResponse("transfer-encoding in an HTTP/1.0 response")
    return n


def _split_head(raw: bytes) -> tuple[str, int, dict[str, str]]:
    """The version, status and headers of a head whose lines may end with a bare LF, by the
    rules' patterns: `BadResponse` says which rule the head breaks."""
    lines = raw.decode("latin-1").split("\n")
    line = lines[0].removesuffix("\r")
    status = _STATUS_LINE.fullmatch(line)
    if status is None:
        raise _not_a_status_line(line)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, value = _field(line.removesuffix("\r"))
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return f"HTTP/1.{status.group(1)}", int(status.group(2)), headers


def _field(line: str) -> tuple[str, str]:
    field = _FIELD_LINE.fullmatch(line)
    if field is None:
        if line[:1] in (" ", "\t"):
            why = "a folded header line (obs-fold)"
        elif "\r" in line:
            why = "a CR inside a header line"
        elif _CTL.search(line):
            why = "a control character in a header line"
        else:
            why = "a malformed header line"
        raise BadResponse(f"{why}: {line[:100]!r}")
    return field.group(1), field.group(2)


def _not_a_status_line(line: str) -> BadResponse:
    return BadResponse(f"not an HTTP/1.1 status line: {line[:100]!r}")


def declared_length(headers: Mapping[str, str]) -> int | None:
    """The Content-Length, or None when absent or invalid (repeated equal values are one)."""
    value = headers.get("content-length")
    if value is None:
        return None
    values = {v.strip(" \t") for v in value.split(",")}
    if len(values) != 1:
        return None
    text = values.pop()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 20 else None


def content_decoder(headers: Mapping[str, str]) -> ContentDecoder | None:
    """A decoder for the body's Content-Encoding, or None for identity."""
    coding = headers.get("content-encoding", "").strip().lower()
    if coding in ("", "identity"):
        return None
    if coding in ("gzip", "x-gzip", "deflate"):
        return ContentDecoder(coding)
    raise BadResponse(f"unsupported content-encoding {coding!r} (lmclient asks for none)")


INFLATE_STEP = 256 * 1024  # bytes inflated per zlib call (`ContentDecoder.decode`)


class ContentDecoder:
    """Inflates a gzip or deflate body piece by piece, never past the output the caller still
    accepts (so a compressed bomb cannot grow past the size limit in one call)."""

    __slots__ = ("_coding", "_inflater", "_started")

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._inflater = zlib.decompressobj(
            zlib.MAX_WBITS if coding == "deflate" else 16 + zlib.MAX_WBITS
        )
        self._started = False

    def decode(self, data: bytes, limit: int) -> bytes | None:
        """Inflate ``data``; ``None`` if that makes ``limit`` (> 0) bytes or more (the caller
        refuses the body then). Inflated `INFLATE_STEP` bytes at a time: zlib builds one call's
        output in blocks and copies them into one bytes object, twice the output at its peak,
        so a bomb inflated in one call would peak at twice the limit; in steps, it is dropped
        once the limit is reached, never joined."""
        pieces = []
        size = 0
        while True:
            piece = self._inflate(data, min(limit - size, INFLATE_STEP))
            pieces.append(piece)
            size += len(piece)
            if size >= limit:
                return None
            data = self._inflater.unconsumed_tail
            if not data or not piece:
                return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _inflate(self, data: bytes, most: int) -> bytes:
        try:
            if not self._started and self._coding == "deflate":
                self._started = True
                try:  # "deflate" is zlib-wrapped by the RFC, raw by some servers
                    return self._inflater.decompress(data, most)
                except zlib.error:
                    self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
            return self._inflater.decompress(data, most)
        except zlib.error as exc:
            raise BadResponse(f"undecodable {self._coding} body: {exc}") from None

    def flush(self) -> bytes:
        """The end of the body: what the inflater still holds; an error if the body was cut."""
        try:
            rest = self._inflater.flush()
        except zlib.error as exc:
            raise BadResponse(f"undecodable {self._coding} body: {exc}") from None
        if not self._inflater.eof:
            raise BadResponse(f"the {self._coding} body ended early")
        return rest
