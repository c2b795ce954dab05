"""The wire: msgspec Structs for what OpenAI-compatible servers return.

Only the fields lmclient reads are declared (unknown fields are skipped by msgspec, which is both
lenient to server extras and faster). Fields that some server sends as ``null`` are optional.
The structs decoded on every call are not tracked by the garbage collector (``gc=False``):
decoded JSON cannot form a reference cycle, and tracking costs every decode.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "ChatCompletion",
    "ChatLogprobs",
    "Completion",
    "CompletionLogprobs",
    "ModelList",
    "StreamChunk",
    "TokenLogprob",
    "TopLogprob",
    "Usage",
    "WireFunction",
    "WireToolCall",
]


class Usage(msgspec.Struct, frozen=True, gc=False):
    """Token counts as the server reported them (``None`` where it sent none)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None


class TopLogprob(msgspec.Struct, frozen=True):
    token: str
    logprob: float


class TokenLogprob(msgspec.Struct, frozen=True):
    """One generated token with its logprob and, when asked for, the top alternatives."""

    token: str
    logprob: float
    top_logprobs: list[TopLogprob] = []


class ChatLogprobs(msgspec.Struct, gc=False):
    content: list[TokenLogprob] | None = None


class CompletionLogprobs(msgspec.Struct):
    tokens: list[str] = []
    token_logprobs: list[float | None] = []
    top_logprobs: list[dict[str, float] | None] | None = None

    def normalized(self) -> list[TokenLogprob]:
        """The legacy completions shape in the chat shape, so `Response.logprobs` has one type."""
        tops = self.top_logprobs or []
        out = []
        for i, token in enumerate(self.tokens):
            logprob = self.token_logprobs[i] if i < len(self.token_logprobs) else None
            top = tops[i] if i < len(tops) else None
            out.append(
                TokenLogprob(
                    token,
                    float("-inf") if logprob is None else logprob,
                    [TopLogprob(t, lp) for t, lp in (top or {}).items()],
                )
            )
        return out


class WireFunction(msgspec.Struct, gc=False):
    """A tool call's function: ``arguments`` is a JSON string (an object on some servers); in
    a stream, each delta carries a piece of it."""

    name: str | None = None
    arguments: str | dict[str, Any] | None = None


class WireToolCall(msgspec.Struct, gc=False):
    """One tool call as the server sent it (``index`` in stream deltas, where the first delta
    of a call carries its ``id`` and name and the next ones pieces of its arguments)."""

    id: str | None = None
    type: str | None = None
    function: WireFunction = msgspec.field(default_factory=WireFunction)
    index: int | None = None


class Message(msgspec.Struct, gc=False):
    content: str | None = None
    refusal: str | None = None
    reasoning: str | None = None  # vLLM >= 0.10
    reasoning_content: str | None = None  # SGLang, llama.cpp, older vLLM
    tool_calls: list[WireToolCall] | None = None


class ChatChoice(msgspec.Struct, gc=False):
    index: int = 0
    message: Message = msgspec.field(default_factory=Message)
    finish_reason: str | None = None
    logprobs: ChatLogprobs | None = None


class ChatCompletion(msgspec.Struct, gc=False):
    choices: list[ChatChoice]
    id: str | None = None
    model: str | None = None
    usage: Usage | None = None


class CompletionChoice(msgspec.Struct, gc=False):
    index: int = 0
    text: str | None = None
    finish_reason: str | None = None
    logprobs: CompletionLogprobs | None = None


class Completion(msgspec.Struct, gc=False):
    choices: list[CompletionChoice]
    id: str | None = None
    model: str | None = None
    usage: Usage | None = None


class Delta(msgspec.Struct, gc=False):
    content: str | None = None
    refusal: str | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[WireToolCall] | None = None


class ChunkChoice(msgspec.Struct, gc=False):
    index: int = 0
    delta: Delta | None = None  # chat chunks
    text: str | None = None  # completions chunks
    finish_reason: str | None = None


class StreamChunk(msgspec.Struct, gc=False):
    """One SSE event of a chat or completions stream (a usage-only chunk has no choices)."""

    choices: list[ChunkChoice] = []
    usage: Usage | None = None
    id: str | None = None
    model: str | None = None
    error: Any = None  # an error event inside a 200 stream


class ModelCard(msgspec.Struct):
    id: str


class ModelList(msgspec.Struct):
    data: list[ModelCard]
