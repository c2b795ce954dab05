"""The bytes the fake sends: vLLM-shaped JSON bodies, error envelopes and SSE streams."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from ._script import StreamStyle

__all__ = [
    "Answer",
    "FakeResponse",
    "StreamDropped",
    "completion_body",
    "error_response",
    "estimate_tokens",
    "json_response",
    "sse_response",
]

Kind = Literal["chat", "completions"]
JSON_HEADERS = (("content-type", "application/json"),)
SSE_HEADERS = (("content-type", "text/event-stream"), ("cache-control", "no-cache"))


@dataclass
class FakeResponse:
    """What :meth:`FakeLLM.handle` answers; ``chunks`` (SSE events) replaces ``body`` when set."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    chunks: Iterator[bytes] | None = field(default=None, repr=False)


class StreamDropped(Exception):
    """Raised by a chunk iterator to make the transport break the connection mid-body."""


@dataclass(frozen=True)
class Answer:
    """One choice's outcome: the text and its metadata."""

    content: str | None
    finish_reason: str
    refusal: str | None = None
    reasoning: str | None = None
    logprobs: Any = None


def estimate_tokens(text: str) -> int:
    """The fake's token count: one token per four characters, rounded up."""
    return (len(text) + 3) // 4


def json_response(
    status: int, payload: Any, headers: tuple[tuple[str, str], ...] = JSON_HEADERS
) -> FakeResponse:
    return FakeResponse(status, list(headers), msgspec.json.encode(payload))


def error_response(status: int, message: str, type_: str, **extra: Any) -> FakeResponse:
    """An OpenAI/vLLM error envelope: ``{"error": {"message", "type", ..., "code": status}}``."""
    return json_response(status, {"error": {"message": message, "type": type_, **extra}})


def completion_body(
    kind: Kind, head: dict[str, Any], answers: list[Answer], usage: dict[str, int]
) -> dict[str, Any]:
    """A non-streaming body; ``head`` holds ``id``, ``object``, ``created`` and ``model``."""
    choices = []
    for index, answer in enumerate(answers):
        choice: dict[str, Any] = {"index": index}
        if kind == "chat":
            choice["message"] = {
                "role": "assistant",
                "content": answer.content,
                "refusal": answer.refusal,
                "reasoning": answer.reasoning,
            }
        else:
            choice["text"] = answer.content or ""
        choice["logprobs"] = answer.logprobs
        choice["finish_reason"] = answer.finish_reason
        choices.append(choice)
    return {**head, "choices": choices, "usage": usage}


def sse_response(
    kind: Kind,
    head: dict[str, Any],
    answers: list[Answer],
    usage: dict[str, int] | None,
    style: StreamStyle,
    on_chunk: Callable[[int], object] | None,
) -> FakeResponse:
    """A 200 SSE answer whose events are produced lazily, as the transport writes them."""
    payloads = _payloads(kind, head, answers, usage, style)
    return FakeResponse(200, list(SSE_HEADERS), chunks=_frame(payloads, style, on_chunk))


def _frame(
    payloads: Iterator[bytes], style: StreamStyle, on_chunk: Callable[[int], object] | None
) -> Iterator[bytes]:
    """``data:`` framing, keep-alive comments, and the ``on_chunk`` hook before each event."""
    for index, payload in enumerate(payloads):
        if index and style.keepalive:
            yield b": keep-alive\n\n"
        if on_chunk is not None:
            on_chunk(index)
        yield b"data: " + payload + b"\n\n"


def _payloads(
    kind: Kind,
    head: dict[str, Any],
    answers: list[Answer],
    usage: dict[str, int] | None,
    style: StreamStyle,
) -> Iterator[bytes]:
    """The JSON of each event, stopping, failing or breaking where the style says."""
    chunk_head = {**head, "object": "chat.completion.chunk" if kind == "chat" else head["object"]}

    def event(
        index: int, delta: dict[str, Any], finish: str | None = None, logprobs: Any = None
    ) -> bytes:
        choice: dict[str, Any] = {"index": index}
        if kind == "chat":
            choice["delta"] = delta
        else:
            choice["text"] = delta.get("content", "")
        choice.update(logprobs=logprobs, finish_reason=finish)
        return msgspec.json.encode({**chunk_head, "choices": [choice]})

    sent = 0
    for index, answer in enumerate(answers):
        if kind == "chat":
            yield event(index, {"role": "assistant", "content": ""})
        for delta, logprobs in _deltas(answer, style.chunk_size, chat=kind == "chat"):
            if sent == style.error_after:
                error = {"message": "fake mid-stream error", "type": "InternalServerError"}
                yield msgspec.json.encode({"error": {**error, "param": None, "code": 500}})
                yield b"[DONE]"
                return
            if sent == style.close_after:
                return
            if sent == style.drop_after:
                raise StreamDropped
            yield event(index, delta, logprobs=logprobs)
            sent += 1
        yield event(index, {}, answer.finish_reason)
    if usage is not None:
        yield msgspec.json.encode({**chunk_head, "choices": [], "usage": usage})
    yield b"[DONE]"


def _deltas(answer: Answer, size: int, *, chat: bool) -> Iterator[tuple[dict[str, Any], Any]]:
    """``(delta, logprobs)`` per text piece: reasoning and refusal (chat only), then content.

    The first content piece carries the answer's ``logprobs``.
    """
    size = max(1, size)
    if chat:
        reasoning = answer.reasoning or ""
        for start in range(0, len(reasoning), size):
            yield {"reasoning": reasoning[start : start + size]}, None
        if answer.refusal:
            yield {"refusal": answer.refusal}, None
    content = answer.content or ""
    for start in range(0, len(content), size):
        yield {"content": content[start : start + size]}, answer.logprobs if start == 0 else None
