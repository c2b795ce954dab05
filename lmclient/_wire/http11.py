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
from typing import NamedTuple, TypeVar

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
_MAX_LENGTH_DIGITS = 20  # of a Content-Length, as h11 allows (more is no body a client reads)

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # CTLs but HTAB: CR/LF would inject headers
_FRAMING = frozenset({"content-length", "transfer-encoding"})  # set by lmclient, not by headers=

# The exact rules, as patterns over the latin-1 text of a head (each byte one character).
_VCHAR = r"[^\x00-\x20\x7f]"  # a visible character or obs-text
_FIELD_LINE = re.compile(rf"({_TOKEN.pattern}):[ \t]*((?:{_VCHAR}+(?:[ \t]+{_VCHAR}+)*)?)[ \t]*")
_STATUS_LINE = re.compile(r"HTTP/1\.([01]) ([1-9][0-9][0-9])(?: [^\x00-\x08\x0a-\x1f\x7f]*)?")
# The lines of a head repeat from response to response (a server sends the same status line and
# mostly the same header lines), so each valid line seen is kept with what it says, and a line
# seen before costs a dictionary look-up (`_Lines`); a line not seen before is checked by its
# pattern. Whole heads repeat too but for their Content-Length digits: a connection's parser
# keeps the shape of its last one (`_Shape`).
_MAX_CACHED = 1024  # lines in each; a full cache is emptied and fills again with current lines
_MAX_CACHED_LINE = 256  # bytes: a longer line is checked every time it comes
_MAX_KEPT_HEAD = 4096  # bytes: the shape of a longer head is not kept (its lines are read)
_LENGTH_FIELD = b"content-length: "  # a Content-Length line spelt the usual way, lower-cased
_LENGTH_LINE = re.compile(b"\r\n%s([0-9]{1,%d})\r\n" % (_LENGTH_FIELD, _MAX_LENGTH_DIGITS), re.I)
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

    A transport keeps one parser per connection and begins each response with `start` (or
    `reset`, then `feed`): the shape of the connection's last head (`_Shape`), which makes the
    next head like it cheap to read, is the connection's and outlives the response.
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
        self._shape: _Shape | None = None  # the connection's last sized head (`_head` learns it)
        self.reset()

    def reset(self) -> None:
        """Forget the response, for the next one on the same connection: every field is then as
        in a new parser, but for the kept shape, which belongs to the connection."""
        self._buffer = b""
        self._state = _HEAD
        self._remaining = 0  # in the head: the bytes of the heads so far; then, of the body
        self.status = 0
        self.headers: dict[str, str] | None = None
        self.length: int | None = None  # the declared Content-Length of a sized body
        self.keep_alive = False
        self.complete = False  # the state is _DONE (an attribute: transports read it often)

    def start(self, data: bytes) -> bytes:
        """`reset`, then `feed` ``data``: the first bytes of the next response, on a parser that
        is new or has read its last response to its end (as a pooled connection's has).
        Starting anew in the middle of a response would read the rest of its body as the next
        head, so that is a bug of the caller's, asserted."""
        assert self.complete or not self.started, "start() in the middle of a response"
        self.reset()
        return self.feed(data)

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
    #
    # A head is read one way: up to its first blank line, then line by line, each line by its
    # rule (`_read_lines`), as h11 reads it. Two memos make that cheap without a second way:
    # each valid line is kept with what it says (`_Lines`: a server sends the same lines again
    # and again), and the connection keeps the shape of its last sized head (`_Shape`: a server
    # sends the same head with each answer but for its Content-Length digits), so that the next
    # head of that shape is two comparisons and a digits check, not a look-up per line.

    def _head(self, data: bytes) -> int:
        """Read the heads in ``data`` (skipping 1xx interim ones) up to the final one; the offset
        after it, or -1 when it has not all arrived yet (its start is kept, unless it already
        cannot be a head). Sets ``status``, ``headers``, ``keep_alive`` and the body's framing
        (a sized body, even an empty one, is counted and ended by `feed`).

        First, the kept shape: a head that starts with the shape's bytes before the digits, has
        1 to `_MAX_LENGTH_DIGITS` ASCII digits up to a CR, and goes on with the shape's bytes
        after them, is the shape's head with another length. The shape's bytes were read by the
        lines' rules and hold no blank line but at their end, and the digits hold none, so such
        a head is the same valid lines and a valid Content-Length: it ends where the shape does
        and says what the shape said. (The digits' end is looked for where the shape's was, a
        length having as many places as the last one's usually, then at the first CR.) Any
        other head is read by its lines; the shape of a sized final one is kept for the next
        (`_learn`). (One function for both ways, with the body's
        framing: each call costs every response.)"""
        pos = 0
        while True:
            shape = self._shape
            if shape is not None:
                # (unpacked, not read by name: a call each)
                before, places, after, status, headers, keep_alive = shape
                first = pos + len(before)  # where the digits would start
                # Where they end: as many places as the kept head's, usually; else the first
                # CR, if one is near. (Slices compared: startswith() with a position parses its
                # arguments the slow way.)
                cr = first + places
                if data[cr : cr + len(after)] != after:
                    cr = data.find(b"\r", first, first + _MAX_LENGTH_DIGITS + 1)
                    if cr < 0 or data[cr : cr + len(after)] != after:
                        cr = -1
                if cr >= 0 and data[pos:first] == before:
                    digits = data[first:cr]
                    end = cr + len(after)
                    if digits.isdigit() and self._remaining + end - pos <= MAX_HEAD_BYTES:
                        # (of bytes, isdigit() is ASCII digits only, and False for none)
                        headers = headers.copy()  # (the caller's to keep, the shape's to reuse)
                        headers["content-length"] = digits.decode("ascii")
                        self.status = status
                        self.headers = headers
                        self.keep_alive = keep_alive
                        self.length = self._remaining = int(digits)
                        self._state = _LENGTH
                        return end
            blank = _BLANK_LINE.search(data, pos)
            if blank is None:
                self._partial_head(data, pos)
                return -1
            end = blank.end()
            self._remaining += end - pos
            if self._remaining > MAX_HEAD_BYTES:
                raise BadResponse(f"response head larger than {MAX_HEAD_BYTES} bytes")
            version, status, headers = _read_lines(data[pos : blank.start() + 1])
            length = _framing(version, headers)  # checked in every head, where it frames nothing
            if status < 200:
                if status == 101:
                    raise BadResponse(
                        "the server switched protocols, which lmclient never asks for"
                    )
                pos = end  # an interim response, which carries no body: the next head follows
                continue
            connection = headers.get("connection")
            if connection is None:
                keep_alive = version == "HTTP/1.1"
            else:
                keep_alive = _keeps_alive(version, connection)
            self.status = status
            self.headers = headers
            self.keep_alive = keep_alive
            self._remaining = 0
            if status == 204 or status == 304:
                self._state = _DONE
                self.complete = True
            elif "transfer-encoding" in headers:
                self._state = _CHUNK_SIZE
                if length is not None:  # both: framed by the coding, never reused (§6.3)
                    self.keep_alive = False
            elif length is None:
                self._state = _UNTIL_CLOSE
                self.keep_alive = False
            else:
                self.length = self._remaining = length
                self._state = _LENGTH
                self._learn(data[pos:end], status, headers, keep_alive)
            return end

    def _learn(self, head: bytes, status: int, headers: dict[str, str], keep_alive: bool) -> None:
        """Keep the shape of a sized final ``head`` just read by its lines, for the connection's
        next response: where its Content-Length is one line spelt the usual way (any case, one
        space, the digits and CRLF: `_LENGTH_LINE`), and the head is not long (memory kept
        per connection). A repeated Content-Length is not one line (its values were joined),
        and another head keeps the last shape: the next head is read by its lines either way."""
        line = _LENGTH_LINE.search(head)
        if (
            line is not None
            and len(head) <= _MAX_KEPT_HEAD
            and line[1].decode("ascii") == headers["content-length"]
        ):
            before, after = head[: line.start(1)], head[line.end(1) :]
            self._shape = _Shape(
                before=before,
                places=line.end(1) - line.start(1),
                after=after,
                status=status,
                headers=dict(headers),
                keep_alive=keep_alive,
            )

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
    """A line of a head breaks its rule: `_refusal` says which."""


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
    digits = line[len(_LENGTH_FIELD) :]
    if (
        line[: len(_LENGTH_FIELD)].lower() == _LENGTH_FIELD
        and digits.isdigit()
        and len(digits) <= _MAX_LENGTH_DIGITS
    ):
        return "content-length", digits.decode("ascii")  # its value varies: no pattern
    match = _FIELD_LINE.fullmatch(line.decode("latin-1"))
    return None if match is None else (match.group(1).lower(), match.group(2))


_STATUS_LINES = _Lines(_learn_status_line)  # version, status
_FIELDS = _Lines(_learn_field_line)  # lower-cased name, value
# Bound look-ups: subscripting a dict subclass goes through a slower generic slot.
_status_line = _STATUS_LINES.__getitem__
_field_line = _FIELDS.__getitem__


def _read_lines(raw: bytes) -> tuple[str, int, dict[str, str]]:
    """The version, status and headers of a head, ``raw`` up to its last line's LF: each line
    ends with an LF, or a CR LF; each is checked by its rule (or found among the lines seen
    before: `_Lines`), and `BadResponse` says which rule a line breaks. A CR anywhere else stays
    in its line, which the rules refuse."""
    lines = raw.replace(b"\r\n", b"\n").split(b"\n")
    lines.pop()  # (after the last LF: nothing)
    first = lines.pop(0)
    try:
        version, status = _status_line(first)
        headers = dict(map(_field_line, lines))
    except _Malformed:
        raise _refusal(first, lines) from None
    if len(headers) < len(lines):  # a header repeated: its values joined (RFC 9110 §5.3)
        headers = {}
        for name, value in map(_field_line, lines):
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return version, status, headers


def _refusal(status_line: bytes, lines: list[bytes]) -> BadResponse:
    """Which rule the first bad line of a head breaks."""
    text = status_line.decode("latin-1")
    if _STATUS_LINE.fullmatch(text) is None:
        return _not_a_status_line(text)
    for line in lines:
        text = line.decode("latin-1")
        if _FIELD_LINE.fullmatch(text) is None:
            return _bad_field_line(text)
    raise AssertionError("no line breaks a rule")  # pragma: no cover


class _Shape(NamedTuple):
    """A sized final head a connection read (`ResponseParser._learn`): its bytes before and
    after its Content-Length digits, and what it says."""

    before: bytes  # from the status line to "content-length: ", included
    places: int  # of its Content-Length digits
    after: bytes  # from the CR after the digits to the blank line, included
    status: int
    headers: dict[str, str]  # its Content-Length among them, replaced with each response's
    keep_alive: bool


def _keeps_alive(version: str, connection: str) -> bool:
    """Whether a response with this Connection header leaves its connection open."""
    tokens = {t.strip(" \t").lower() for t in connection.split(",")}
    return "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens


def _framing(version: str, headers: Mapping[str, str]) -> int | None:
    """The Content-Length of a head, or None; `BadResponse` for framing that is refused."""
    n = None
    length = headers.get("content-length")
    if length is not None:
        if length.isdecimal() and len(length) <= _MAX_LENGTH_DIGITS:  # (of latin-1: ASCII)
            n = int(length)
        else:
            n = declared_length(headers)
            if n is None:
                raise BadResponse(f"invalid content-length: {length[:100]!r}")
    coding = headers.get("transfer-encoding")
    if coding is not None:
        if coding.lower() != "chunked":
            raise BadResponse(f"unsupported transfer-encoding {coding[:100]!r}")
        if version == "HTTP/1.0":
            raise BadResponse("transfer-encoding in an HTTP/1.0 response")
    return n


def _field(line: str) -> tuple[str, str]:
    field = _FIELD_LINE.fullmatch(line)
    if field is None:
        raise _bad_field_line(line)
    return field.group(1), field.group(2)


def _bad_field_line(line: str) -> BadResponse:
    if line[:1] in (" ", "\t"):
        why = "a folded header line (obs-fold)"
    elif "\r" in line:
        why = "a CR inside a header line"
    elif _CTL.search(line):
        why = "a control character in a header line"
    else:
        why = "a malformed header line"
    return BadResponse(f"{why}: {line[:100]!r}")


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
    return (
        int(text) if text.isascii() and text.isdigit() and len(text) <= _MAX_LENGTH_DIGITS else None
    )


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
