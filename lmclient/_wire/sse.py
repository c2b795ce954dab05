"""Incremental decoders, bytes in and events out, with no I/O (h11's shape).

`SSEDecoder` turns a server-sent-event byte stream, chunked anywhere, into events; `ArrayItems`
turns the text of a JSON array, arriving in pieces, into the text of each element as soon as it
closes. Both cost time linear in their input: each byte is looked at a bounded number of times.

SSE rules followed (WHATWG "server-sent events", as the servers in servers.md §8 use them):
lines end in ``\\r\\n``, ``\\n`` or ``\\r``; a blank line ends an event; ``data:`` lines with or
without the space after the colon accumulate, joined by ``\\n``; lines starting with ``:`` are
comments (vLLM's ``: keep-alive``, llama.cpp's ``:`` pings) and are dropped; an event with no data
is not dispatched. One extension: llama.cpp builds before PR #16109 sent a mid-stream error as a
non-standard ``error:`` field, which a strict parser drops, losing the error; it is kept here as an
event named ``error``.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

__all__ = ["ArrayItems", "SSEDecoder", "ServerSentEvent", "closing_text"]


class ServerSentEvent(NamedTuple):
    data: bytes
    event: str | None = None


# Builds an event from a (data, event) pair without the NamedTuple's Python-level __new__: one
# per event of every stream.
_new_event = functools.partial(tuple.__new__, ServerSentEvent)


class SSEDecoder:
    """Feed bytes with `feed`, then call `close` at the end of the stream; both return events."""

    __slots__ = ("_buffer", "_data", "_event", "_scan")

    def __init__(self) -> None:
        self._buffer = bytearray()  # the unfinished last line
        self._scan = 0  # where the search for a line end resumes; earlier bytes hold none
        self._data: list[bytes] = []
        self._event: str | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        buf = self._buffer
        if b"\r" in chunk or buf[-1:] == b"\r":  # CR or CRLF line ends: the general scan
            buf += chunk
            return self._lines(final=False)
        # LF line ends, what every server here sends: split the chunk's lines at once. The
        # buffer holds no line end (only the unfinished last line), so no byte is searched twice.
        lines = chunk.split(b"\n")
        rest = lines.pop()  # after the last LF: the start of a line still to come
        if buf:
            if not lines:
                buf += rest
                self._scan = len(buf)
                return []
            lines[0] = bytes(buf) + lines[0]
            buf.clear()
        buf += rest
        self._scan = len(buf)
        events: list[ServerSentEvent] = []
        self._feed_lines(lines, events)
        return events

    def _feed_lines(self, lines: list[bytes], events: list[ServerSentEvent]) -> None:
        """Complete lines (no line end in them), in order."""
        data = self._data
        for line in lines:
            if line[:6] == b"data: ":  # the common line, without the general field parse
                data.append(line[6:])
            elif line:
                self._line(line, events)
            elif data:  # a blank line ends the event
                events.append(_new_event((b"\n".join(data), self._event)))
                data.clear()
                self._event = None
            else:
                self._event = None

    def close(self) -> list[ServerSentEvent]:
        """End of stream: a last line without its line end still counts, and so does an event not
        ended by a blank line (the SSE rules drop it, but a ``data: [DONE]`` cut before its
        blank line is a finished stream; a cut JSON event fails to decode downstream anyway)."""
        events = self._lines(final=True)
        if self._buffer:
            self._line(bytes(self._buffer), events)
            self._buffer.clear()
        self._line(b"", events)
        self._scan = 0
        return events

    def _lines(self, *, final: bool) -> list[ServerSentEvent]:
        buf = self._buffer
        n = len(buf)
        events: list[ServerSentEvent] = []
        start = 0
        pos = self._scan
        cr = lf = -1  # next "\r" / "\n" at or after pos; n when there is none
        while True:
            # Search each kind of line end only once its last find is used up: a stream that
            # never sends "\r" is searched for it once per chunk, not once per line.
            if cr < pos:
                cr = buf.find(b"\r", pos)
                cr = n if cr < 0 else cr
            if lf < pos:
                lf = buf.find(b"\n", pos)
                lf = n if lf < 0 else lf
            end = min(cr, lf)
            if end == n or (end == cr and end + 1 == n and not final):
                break  # no line end yet, or a "\r" last that may be half of "\r\n"
            following = end + 2 if end == cr and lf == end + 1 else end + 1
            self._line(bytes(buf[start:end]), events)
            start = pos = following
        del buf[:start]
        self._scan = end - start
        return events

    def _line(self, line: bytes, events: list[ServerSentEvent]) -> None:
        if not line:
            if self._data:
                events.append(ServerSentEvent(b"\n".join(self._data), self._event))
            self._data = []
            self._event = None
            return
        if line[0] == 0x3A:  # ":" starts a comment
            return
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"error":  # legacy llama.cpp mid-stream error field
            self._data.append(value)
            self._event = "error"


# Inside a string only quotes and backslashes matter; outside, brackets, commas and quotes.
_IN_STRING = re.compile(r'["\\]')
_OUTSIDE = re.compile(r'[\[\]{}",]')


class ArrayItems:
    """Split the first JSON array in a text into its elements' texts as they complete.

    The first ``[`` outside a string starts the array, at any depth, so ``{"value": [...]}``
    (the object-root wrapping) splits like ``[...]``. Elements are delimited, not parsed:
    strings and escapes are tracked so that brackets and commas inside strings do not count.

    Only the new delta is searched, with the string, escape and depth state carried over from
    the one before, and the open element's text from earlier deltas is kept as a list of
    pieces, joined once when it closes: one element of n characters costs O(n) however it is
    cut. Adding each delta to the element's text so far, as this once did, copied n²/(2d)
    characters for d-character deltas: through `Stream.items()`, 8 s of CPU for one element of
    1M characters in 16-character deltas, 48 s for 2M (issue 37).
    """

    __slots__ = ("_depth", "_done", "_escape", "_in_string", "_pieces", "_started")

    def __init__(self) -> None:
        self._pieces: list[str] = []  # the open element's text from earlier deltas
        self._depth = 0  # nesting relative to the array: 1 is directly inside it
        self._started = False
        self._done = False
        self._in_string = False
        self._escape = False

    @property
    def done(self) -> bool:
        """The array has closed."""
        return self._done

    def feed(self, delta: str) -> list[str]:
        if self._done:
            return []
        n = len(delta)
        pos = 0
        start = 0  # where the open element starts in ``delta`` (0: it began in an earlier delta)
        out: list[str] = []
        while pos < n:
            if self._escape:
                self._escape = False
                pos += 1
            elif self._in_string:
                m = _IN_STRING.search(delta, pos)
                if m is None:
                    break
                pos = m.end()
                if m.group() == "\\":
                    self._escape = True
                else:
                    self._in_string = False
            else:
                m = _OUTSIDE.search(delta, pos)
                if m is None:
                    break
                pos = m.end()
                c = m.group()
                if c == '"':
                    self._in_string = True
                elif not self._started:
                    if c == "[":
                        self._started = True
                        self._depth = 1
                        start = pos
                elif c in "[{":
                    self._depth += 1
                elif self._depth > 1:  # "]", "}" or "," inside an element
                    if c != ",":
                        self._depth -= 1
                else:  # the element ends: at a comma, or with the array
                    self._emit(closing_text(self._pieces, delta, start, m.start()), out)
                    start = pos
                    if c != ",":
                        self._done = True
                        return out
        if self._started:
            self._pieces.append(delta[start:])
        return out

    @staticmethod
    def _emit(item: str, out: list[str]) -> None:
        item = item.strip()
        if item:
            out.append(item)


def closing_text(pieces: list[str], delta: str, start: int, end: int) -> str:
    """The whole text of a token that closes at ``delta[end]``, begun at ``delta[start]`` or in
    earlier deltas (``pieces``, emptied): each delta's part is kept apart and joined once, when
    the token closes, so a long token in small deltas costs time linear in its length."""
    if not pieces:
        return delta[start:end]
    pieces.append(delta[start:end])
    text = "".join(pieces)
    pieces.clear()
    return text
