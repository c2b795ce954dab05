"""A stream's pure state: SSE bytes in, content deltas out, the validated `Response` at the end.

`Stream` and `AsyncStream` pull the bytes; everything they report is decided here, so both
shells behave alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from . import errors
from ._output.depth import MAX_DEPTH, guarded_decoder
from ._runaway import Sentry
from ._secrets import scrub
from ._status import api_error
from ._wire.protocol import (
    LlamaCppTimings,
    Measured,
    StreamChunk,
    Usage,
    VllmMetrics,
    WireFunction,
    WireToolCall,
)
from ._wire.sse import ServerSentEvent, SSEDecoder

if TYPE_CHECKING:
    from ._call import Call, Lookup
    from ._hooks import Watch
    from ._response import Response

__all__ = ["StreamState"]


class StreamState:
    """One stream's state, from its first byte to its `Response`.

    Only choice 0 is followed (``n`` is a parameter of `create` only). Bytes after ``[DONE]``
    are read and ignored, so the connection can go back to the pool. Each event's data is
    kept, undecoded, for `Response.raw` and ``metrics`` (read from it when asked: vLLM and
    llama.cpp send them on the last chunks); ``usage`` is the last sent.
    """

    __slots__ = (
        "_call",
        "_calls",
        "_calls_sent",
        "_data",
        "_moved",
        "_parts",
        "_reasoning",
        "_reasoning_at",
        "_reasoning_sent",
        "_refusal",
        "_sentry",
        "_sse",
        "done",
        "events",
        "finish_reason",
        "headers",
        "id",
        "model",
        "usage",
        "watch",
    )

    def __init__(self, call: Call) -> None:
        self._call = call
        self._sse = SSEDecoder()
        self._parts: list[str] = []
        self._reasoning: list[str] = []
        self._reasoning_at: list[int] = []  # per reasoning delta: the content deltas before it
        self._reasoning_sent = 0  # the reasoning deltas `tagged` has handed out
        self._refusal: list[str] = []
        self._calls: dict[int, tuple[list[str | None], list[str]]] = {}  # ([id, name], pieces)
        self._calls_sent = 0  # the calls `closed_calls` has handed out
        self._moved: dict[int, int] = {}  # a server's reused index -> the call it now means
        self.done = False
        self.events = 0
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self._data: list[bytes] = []  # every event's data but [DONE]: `Response.raw`
        self.id: str | None = None
        self.model: str | None = None
        self.watch: Watch | None = None  # an observed call's (`_hooks`): told how it ends
        # the response's headers (lower-case names), set by the stream once it is open
        self.headers: Mapping[str, str] | None = None
        # the watch over the text for runaways (`_runaway`), where lmclient is the one to watch
        runaway = call.runaway
        self._sentry = Sentry(runaway) if call.guard == "client" and runaway else None

    def abort(self) -> Lookup[None] | None:
        """The request that asks the server to stop generating this stream's answer
        (`Call.abort_of`), for a stream closed before the server said the answer ended (no
        ``[DONE]``, no finish_reason): ``None`` once it did, or where the call has none."""
        if self.done or self.finish_reason is not None:
            return None
        return self._call.abort_of()

    def scrub(self, exc: BaseException) -> None:
        """Take the client's key out of a failure of this stream (`lmclient._secrets`)."""
        scrub(exc, self._call.request.headers)

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @property
    def parts(self) -> list[str]:
        """The content deltas so far, in order: the live list, which `partials()` and `fields()`
        read by index, so that they see every delta whoever iterated the stream."""
        return self._parts

    @property
    def metrics(self) -> VllmMetrics | LlamaCppTimings | None:
        """The server's measures, from the last event that has them (`Stream.metrics`)."""
        for data in reversed(self._data):
            measured = _measured(data)
            if measured.metrics is not None or measured.timings is not None:
                return measured.metrics or measured.timings
        return None

    @property
    def raw(self) -> list[Any]:
        """The events' data received so far, decoded (`Stream.raw`)."""
        return [msgspec.json.decode(data) for data in self._data]

    @property
    def call(self) -> Call:
        return self._call

    @property
    def reasoning(self) -> str:
        """The reasoning text received so far."""
        return "".join(self._reasoning)

    def tagged(self, content: list[str]) -> list[tuple[Literal["reasoning", "content"], str]]:
        """The content deltas ``feed`` or ``end`` just returned, with the reasoning deltas that
        arrived among them, in the order the server sent them."""
        out: list[tuple[Literal["reasoning", "content"], str]] = []
        at, marks, pending = self._reasoning_sent, self._reasoning_at, len(self._reasoning)
        first = len(self._parts) - len(content)  # the index of content[0] among all parts
        for offset, text in enumerate(content):
            while at < pending and marks[at] <= first + offset:
                out.append(("reasoning", self._reasoning[at]))
                at += 1
            out.append(("content", text))
        out.extend(("reasoning", self._reasoning[i]) for i in range(at, pending))
        self._reasoning_sent = pending
        return out

    def feed(self, data: bytes) -> list[str]:
        out: list[str] = []
        for event in self._sse.feed(data):
            self._event(event, out)
        return out

    def end(self) -> list[str]:
        """The byte stream ended: flush, and insist that it ended properly."""
        out: list[str] = []
        for event in self._sse.close():
            self._event(event, out)
        if not self.done and self.finish_reason is None:
            raise errors.ProtocolError(
                "the stream ended before [DONE] and before a finish_reason", body=self.text
            )
        self.done = True
        if self.finish_reason == "repetition":  # the server stopped a loop: said as it ends
            raise self._call.stopped_loop(self.text, self.usage)
        return out

    def result(self) -> Response[Any, Any]:
        return self._call.result(
            [self.text],
            [self.finish_reason],
            usage=self.usage,
            model=self.model,
            id=self.id,
            raw=self._data,
            reasoning="".join(self._reasoning) or None,
            refusal="".join(self._refusal) or None,
            tool_calls=self._tool_calls(),
            headers=self.headers,
        )

    def _tool_call_deltas(self, deltas: list[WireToolCall]) -> None:
        """Assemble tool calls per ``index``: the first delta of a call has its id and name,
        the next ones pieces of its arguments (a server that sends a call whole sends it in
        one delta). Without ``index``, a delta with an id or a name starts the next call and
        one without continues the last. Another id at an index already in use is a new call too:
        Ollama 0.20 numbers every streamed call 0 (ollama/ollama#15457)."""
        for delta in deltas:
            given = delta.index
            if given is None:
                new = delta.id or delta.function.name or not self._calls
                index = len(self._calls) if new else max(self._calls)
            else:
                index = self._moved.get(given, given)
                held = self._calls.get(index)
                if held and delta.id and held[0][0] not in (None, delta.id):
                    index = self._moved[given] = max(self._calls) + 1
            head, pieces = self._calls.setdefault(index, ([None, None], []))
            head[0] = delta.id or head[0]
            head[1] = delta.function.name or head[1]
            arguments = delta.function.arguments
            if isinstance(arguments, str):
                pieces.append(arguments)
            elif arguments is not None:
                pieces.append(msgspec.json.encode(arguments).decode())

    def _tool_calls(self) -> list[WireToolCall] | None:
        """The calls assembled from the deltas, in index order (``None`` without any)."""
        if not self._calls:
            return None
        return [_wire_call(index, *self._calls[index]) for index in sorted(self._calls)]

    def closed_calls(self) -> list[WireToolCall]:
        """The tool calls whose arguments closed since the last look: every call but the
        newest (servers stream calls one after another), and the newest once the choice
        finished."""
        order = sorted(self._calls)
        done = len(order) if self.finish_reason or self.done else len(order) - 1
        sent, self._calls_sent = self._calls_sent, max(self._calls_sent, done)
        return [_wire_call(index, *self._calls[index]) for index in order[sent:done]]

    def _event(self, event: ServerSentEvent, out: list[str]) -> None:
        if self.done:
            return
        self.events += 1
        data = event.data
        if data == b"[DONE]":
            self.done = True
            return
        if event.event == "error":
            raise _event_error(data, self.headers)
        chunk = _chunk(data)
        if chunk.error is not None:
            raise _event_error(data, self.headers)
        self._data.append(data)
        if chunk.usage is not None:
            self.usage = chunk.usage
        self.id = chunk.id or self.id
        self.model = chunk.model or self.model
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            text = choice.text if delta is None else delta.content
            if text:
                self._parts.append(text)
                out.append(text)
                if self._sentry is not None:
                    found = self._sentry.feed(text)
                    if found is not None:
                        raise self._call.ran_away(
                            found, self.text, by="client", usage=None, deltas=len(self._parts)
                        )
            if delta is not None:
                thought = delta.reasoning or delta.reasoning_content
                if thought:
                    self._reasoning.append(thought)
                    self._reasoning_at.append(len(self._parts))
                if delta.refusal:
                    self._refusal.append(delta.refusal)
                if delta.tool_calls:
                    self._tool_call_deltas(delta.tool_calls)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason


def _bad_event(detail: str, data: bytes) -> errors.ProtocolError:
    return errors.ProtocolError(f"bad stream event ({detail})", body=data)


# An event's chunk, or the `ProtocolError` carrying the event (`lmclient._output.depth`).
_chunk = guarded_decoder(MAX_DEPTH, _bad_event, msgspec.json.Decoder(StreamChunk))
_error_event = guarded_decoder(MAX_DEPTH, _bad_event, msgspec.json.Decoder())
_measured = msgspec.json.Decoder(Measured).decode


def _wire_call(index: int, head: list[str | None], pieces: list[str]) -> WireToolCall:
    return WireToolCall(head[0], "function", WireFunction(head[1], "".join(pieces)), index)


def _event_error(data: bytes, headers: Mapping[str, str] | None) -> errors.APIStatusError:
    """An error event inside a 200 stream, typed by the status code it carries (else 5xx);
    its headers are the stream's."""
    status = 500
    try:
        decoded = _error_event(data)
    except errors.ProtocolError:  # not JSON: the status stays 5xx, `api_error` reads the text
        decoded = None
    inner = decoded.get("error", decoded) if isinstance(decoded, dict) else None
    code = inner.get("code") if isinstance(inner, dict) else None
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        status = code
    if isinstance(decoded, dict) and not isinstance(decoded.get("error"), (dict, str)):
        data = msgspec.json.encode({"error": decoded})  # legacy `error:` field: the object itself
    return api_error(status, headers or {}, data)
