"""A stream's pure state: SSE bytes in, content deltas out, the validated `Response` at the end.

`Stream` and `AsyncStream` pull the bytes; everything they report is decided here, so both
shells behave alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from . import errors
from ._protocol import StreamChunk, Usage
from ._sse import ServerSentEvent, SSEDecoder
from ._status import api_error
from ._types import DECODE_ERRORS

if TYPE_CHECKING:
    from ._core import Call
    from ._response import Response

__all__ = ["StreamState"]


class StreamState:
    """One stream's state, from its first byte to its `Response`.

    Only choice 0 is followed (``n`` is a parameter of `create` only). Bytes after ``[DONE]``
    are read and ignored, so the connection can go back to the pool.
    """

    __slots__ = (
        "_call",
        "_parts",
        "_reasoning",
        "_refusal",
        "_sse",
        "done",
        "events",
        "finish_reason",
        "id",
        "model",
        "usage",
    )

    _chunks = msgspec.json.Decoder(StreamChunk)

    def __init__(self, call: Call) -> None:
        self._call = call
        self._sse = SSEDecoder()
        self._parts: list[str] = []
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self.done = False
        self.events = 0
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.id: str | None = None
        self.model: str | None = None

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @property
    def call(self) -> Call:
        return self._call

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
        return out

    def result(self) -> Response[Any]:
        return self._call.result(
            [self.text],
            [self.finish_reason],
            usage=self.usage,
            model=self.model,
            id=self.id,
            raw=None,
            reasoning="".join(self._reasoning) or None,
            refusal="".join(self._refusal) or None,
        )

    def _event(self, event: ServerSentEvent, out: list[str]) -> None:
        if self.done:
            return
        self.events += 1
        data = event.data
        if data == b"[DONE]":
            self.done = True
            return
        if event.event == "error":
            raise _event_error(data)
        try:
            chunk = self._chunks.decode(data)
        except DECODE_ERRORS as exc:
            raise errors.ProtocolError(f"bad stream event ({exc})", body=data) from None
        if chunk.error is not None:
            raise _event_error(data)
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
            if delta is not None:
                thought = delta.reasoning or delta.reasoning_content
                if thought:
                    self._reasoning.append(thought)
                if delta.refusal:
                    self._refusal.append(delta.refusal)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason


def _event_error(data: bytes) -> errors.APIError:
    """An error event inside a 200 stream, typed by the status code it carries (else 5xx)."""
    status = 500
    try:
        decoded = msgspec.json.decode(data)
    except DECODE_ERRORS:
        decoded = None
    inner = decoded.get("error", decoded) if isinstance(decoded, dict) else None
    code = inner.get("code") if isinstance(inner, dict) else None
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        status = code
    if isinstance(decoded, dict) and not isinstance(decoded.get("error"), (dict, str)):
        data = msgspec.json.encode({"error": decoded})  # legacy `error:` field: the object itself
    return api_error(status, {}, data)
