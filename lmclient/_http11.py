"""HTTP/1.1 for a client connection, sans I/O: the bytes of a request out; a response's head and
body out of bytes fed in pieces of any size.

lmclient's own transports send one request at a time per connection (no pipelining), always frame
the body with Content-Length, and ask for no compression, so the response side needs only: the
status line and headers, Content-Length, chunked and read-until-close bodies, 1xx interim
responses, bodyless statuses, and whether the connection may be reused. h11 does all this too,
with an event object per step: on the benchmark machine it takes ~23 µs to parse a small
response (and ~19 µs to frame the request), where this parser takes ~3.5 µs and the request is
one ``%`` of cached bytes. That difference is most of what separates lmclient's CPU per call
from a raw socket's (see benchmarks/README.md).

Decisions:
* Header names are lower-cased; repeated headers are joined with ``", "`` (RFC 9110 §5.3). A
  response's header names are not checked to be tokens (a client gains nothing from refusing
  them), only that the line is a field: a colon, a name without blanks (so a folded line fails).
* A message with both Transfer-Encoding and Content-Length is read as chunked and the connection
  is not reused (RFC 9112 §6.3); differing Content-Length values are an error.
* Bytes after the end of a response (a server must not send any) are dropped and make the
  connection unusable rather than failing the response.
* Content-Encoding gzip or deflate is decoded (a server may compress although lmclient does not
  ask); any other coding is an error, since the body could not be validated.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence

__all__ = [
    "BadResponse",
    "ContentDecoder",
    "ResponseParser",
    "content_decoder",
    "declared_length",
    "encode_head",
    "encode_request",
]

MAX_HEAD_BYTES = 64 * 1024  # status line and headers; more is not an LLM server
MAX_LINE_BYTES = 4096  # a chunk-size or trailer line

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # CTLs but HTAB: CR/LF would inject headers
_HEXDIGITS = b"0123456789abcdefABCDEF"
_FRAMING = frozenset({"content-length", "transfer-encoding"})  # set by lmclient, not by headers=

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
    was complete (a read-until-close body completes there).
    """

    __slots__ = ("_buffer", "_remaining", "_state", "headers", "keep_alive", "length", "status")

    def __init__(self) -> None:
        self._buffer = b""
        self._state = _HEAD
        self._remaining = 0
        self.status = 0
        self.headers: dict[str, str] | None = None
        self.length: int | None = None  # the declared Content-Length of a sized body
        self.keep_alive = False

    @property
    def complete(self) -> bool:
        return self._state == _DONE

    @property
    def started(self) -> bool:
        """Whether any byte of the response has arrived."""
        return self.headers is not None or bool(self._buffer) or self._state != _HEAD

    def feed(self, data: bytes) -> bytes:
        """Consume ``data``; return the body bytes it carried (possibly none)."""
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
        pos = 0
        if state == _HEAD:
            pos = self._head(data)
            if pos < 0:
                return b""
            if self._state == _LENGTH:
                return self.feed(data[pos:]) if pos < len(data) else b""
            if self._state == _UNTIL_CLOSE:
                return data[pos:]
            if self._state == _DONE:
                if pos < len(data):
                    self.keep_alive = False
                return b""
        return self._chunked(data, pos)

    def feed_eof(self) -> bool:
        """The peer closed the connection; returns whether the response is complete."""
        if self._state == _UNTIL_CLOSE:
            self._state = _DONE
        self.keep_alive = False
        return self._state == _DONE

    # -- head ------------------------------------------------------------------------------

    def _head(self, data: bytes) -> int:
        """Parse heads (skipping 1xx interim ones) from ``data``; the offset after the final
        head, or -1 when it is not complete yet (the bytes are kept)."""
        pos = 0
        while True:
            end = data.find(b"\r\n\r\n", pos)
            if end < 0:
                if len(data) - pos > MAX_HEAD_BYTES:
                    raise BadResponse(f"response head larger than {MAX_HEAD_BYTES} bytes")
                self._buffer = data[pos:]
                return -1
            if end - pos > MAX_HEAD_BYTES:
                raise BadResponse(f"response head larger than {MAX_HEAD_BYTES} bytes")
            final = self._parse_head(data[pos:end].decode("latin-1"))
            pos = end + 4
            if final:
                return pos

    def _parse_head(self, text: str) -> bool:
        """Parse one head; False for a 1xx interim response, which carries no body."""
        eol = text.find("\r\n")
        line = text if eol < 0 else text[:eol]
        version, _, rest = line.partition(" ")
        code = rest[:3]
        if (
            version not in ("HTTP/1.1", "HTTP/1.0")
            or not (code.isascii() and code.isdigit())
            or rest[3:4] not in ("", " ")
        ):
            raise BadResponse(f"not an HTTP/1.1 status line: {line[:100]!r}")
        status = int(code)
        if status < 200:
            if status == 101:
                raise BadResponse("the server switched protocols, which lmclient never asks for")
            return False
        headers: dict[str, str] = {}
        for field in text[eol + 2 :].split("\r\n") if eol >= 0 else ():
            name, sep, value = field.partition(":")
            if not sep or not name or " " in name or "\t" in name:  # folded, or not a field
                raise BadResponse(f"malformed header line: {field[:100]!r}")
            key = name.lower()
            value = value.strip(" \t")
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        self.status = status
        self.headers = headers
        self._framing(version, status, headers)
        return True

    def _framing(self, version: str, status: int, headers: Mapping[str, str]) -> None:
        connection = headers.get("connection")
        if connection is None:
            self.keep_alive = version == "HTTP/1.1"
        else:
            tokens = {t.strip().lower() for t in connection.split(",")}
            self.keep_alive = (
                "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens
            )
        coding = headers.get("transfer-encoding")
        length = headers.get("content-length")
        if status in (204, 304):
            self._state = _DONE
        elif coding is not None:
            if coding.rsplit(",", 1)[-1].strip().lower() == "chunked":
                self._state = _CHUNK_SIZE
                if length is not None:
                    self.keep_alive = False
            else:
                self._state = _UNTIL_CLOSE
                self.keep_alive = False
        elif length is not None:
            n = int(length) if length.isdigit() and length.isascii() else declared_length(headers)
            if n is None:
                raise BadResponse(f"invalid content-length: {length[:100]!r}")
            self.length = self._remaining = n
            self._state = _LENGTH if n else _DONE
        else:
            self._state = _UNTIL_CLOSE
            self.keep_alive = False

    # -- chunked body ----------------------------------------------------------------------

    def _chunked(self, data: bytes, pos: int) -> bytes:
        out: list[bytes] = []
        n = len(data)
        state = self._state
        while pos < n:
            if state == _CHUNK_DATA:
                end = pos + self._remaining
                if end <= n:
                    out.append(data[pos:end])
                    pos = end
                    state = _CHUNK_END
                else:
                    out.append(data[pos:])
                    self._remaining -= n - pos
                    pos = n
                continue
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                if n - pos > MAX_LINE_BYTES:
                    raise BadResponse("chunk-size or trailer line too long")
                self._buffer = data[pos:]
                break
            if state == _CHUNK_END:
                if eol != pos:
                    raise BadResponse("chunk data longer than its declared size")
                pos += 2
                state = _CHUNK_SIZE
                continue
            line = data[pos:eol]
            pos = eol + 2
            if state == _CHUNK_SIZE:
                size = (line.split(b";", 1)[0] if b";" in line else line).strip(b" \t")
                if not size or len(size) > 15 or size.strip(_HEXDIGITS):
                    raise BadResponse(f"invalid chunk size: {line[:100]!r}")
                remaining = int(size, 16)
                if not remaining:
                    state = _TRAILERS
                    continue
                end = pos + remaining
                if data.startswith(b"\r\n", end):  # the whole chunk is here: the common case
                    out.append(data[pos:end])
                    pos = end + 2
                    continue
                self._remaining = remaining
                state = _CHUNK_DATA
            elif not line:  # _TRAILERS: a blank line ends the message
                state = _DONE
                if pos < n:
                    self.keep_alive = False
                break
        self._state = state
        return out[0] if len(out) == 1 else b"".join(out)


def declared_length(headers: Mapping[str, str]) -> int | None:
    """The Content-Length, or None when absent or invalid (repeated equal values are one)."""
    value = headers.get("content-length")
    if value is None:
        return None
    values = {v.strip() for v in value.split(",")}
    if len(values) != 1:
        return None
    text = values.pop()
    return int(text) if text.isascii() and text.isdigit() else None


def content_decoder(headers: Mapping[str, str]) -> ContentDecoder | None:
    """A decoder for the body's Content-Encoding, or None for identity."""
    coding = headers.get("content-encoding", "").strip().lower()
    if coding in ("", "identity"):
        return None
    if coding in ("gzip", "x-gzip", "deflate"):
        return ContentDecoder(coding)
    raise BadResponse(f"unsupported content-encoding {coding!r} (lmclient asks for none)")


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

    def decode(self, data: bytes, limit: int) -> bytes:
        """Inflate ``data`` to at most ``limit`` (> 0) bytes; more would be refused anyway."""
        try:
            if not self._started and self._coding == "deflate":
                self._started = True
                try:  # "deflate" is zlib-wrapped by the RFC, raw by some servers
                    return self._inflater.decompress(data, limit)
                except zlib.error:
                    self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
            return self._inflater.decompress(data, limit)
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
