"""The wire: msgspec Structs for what OpenAI-compatible servers return.

Only the fields lmclient reads are declared (unknown fields are skipped by msgspec, which is both
lenient to server extras and faster; `Response.raw` decodes the whole body when asked). Fields
that some server sends as ``null`` are optional.
The structs decoded on every call are not tracked by the garbage collector (``gc=False``):
decoded JSON cannot form a reference cycle, and tracking costs every decode. Their fields are
in the order the servers send them (keyword-only where a required field follows optional
ones): msgspec looks each key up from the field after the last one found, so a body in that
order finds each field at the first comparison.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeAlias

import msgspec

__all__ = [
    "MAX_COUNT",
    "ChatCompletion",
    "ChatLogprobs",
    "Completion",
    "CompletionLogprobs",
    "CompletionTokensDetails",
    "LlamaCppTimings",
    "Measured",
    "ModelList",
    "PromptTokensDetails",
    "StreamChunk",
    "TokenLogprob",
    "TopLogprob",
    "Usage",
    "VllmMetrics",
    "WireFunction",
    "WireToolCall",
    "add_usage",
]

# The largest token count a server may report: JSON's largest exact integer (RFC 8259 §6), far
# past any request's tokens, and 1024 such counts still sum within an int64 (the columns
# `lmclient.ray` writes). A count below 0 would take tokens off a budget, which then fails open:
# either is bad bytes, a `ProtocolError` carrying the body, as any field of the wrong type is.
MAX_COUNT = 2**53 - 1
Count: TypeAlias = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]


class PromptTokensDetails(msgspec.Struct, frozen=True, gc=False):
    """``usage.prompt_tokens_details``: of the prompt tokens, how many the server read from its
    prefix cache (OpenAI; vLLM with ``--enable-prompt-tokens-details``; SGLang with
    ``--enable-cache-report``; llama.cpp always)."""

    cached_tokens: Count | None = None


class CompletionTokensDetails(msgspec.Struct, frozen=True, gc=False):
    """``usage.completion_tokens_details``: of the completion tokens, how many were reasoning
    (OpenAI; vLLM with a reasoning parser)."""

    reasoning_tokens: Count | None = None


class Usage(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, repr_omit_defaults=True):
    """Token counts as the server reported them (``None`` where it sent none).

    The details are the servers' own objects; `cached_tokens` and `reasoning_tokens` read them
    wherever the server put them (SGLang sends ``reasoning_tokens`` beside the counts, kept in
    ``sglang_reasoning_tokens``). Whatever else a server adds to ``usage`` is in
    `Response.raw`. ``a + b`` sums two reports (see `add_usage`). A count the server sent is
    decoded only from 0 to `MAX_COUNT`: any other is no count (a `ProtocolError`).
    """

    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None
    total_tokens: Count | None = None
    prompt_tokens_details: PromptTokensDetails | None = None
    completion_tokens_details: CompletionTokensDetails | None = None
    sglang_reasoning_tokens: Count | None = msgspec.field(default=None, name="reasoning_tokens")

    @property
    def cached_tokens(self) -> int | None:
        """Prompt tokens read from the server's prefix cache, if it said."""
        details = self.prompt_tokens_details
        return None if details is None else details.cached_tokens

    @property
    def reasoning_tokens(self) -> int | None:
        """Completion tokens spent reasoning, if the server said."""
        details = self.completion_tokens_details
        if details is not None and details.reasoning_tokens is not None:
            return details.reasoning_tokens
        return self.sglang_reasoning_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        cached = _plus(self.cached_tokens, other.cached_tokens)
        reasoning = _plus(self.reasoning_tokens, other.reasoning_tokens)
        return Usage(
            _plus(self.prompt_tokens, other.prompt_tokens),
            _plus(self.completion_tokens, other.completion_tokens),
            _plus(self.total_tokens, other.total_tokens),
            None if cached is None else PromptTokensDetails(cached),
            None if reasoning is None else CompletionTokensDetails(reasoning),
        )


def add_usage(first: Usage | None, second: Usage | None) -> Usage | None:
    """The sum of two reports, either of which may be missing: each count is the sum of the
    reports that state it (``None`` when neither does), so a sum is exact for the answers
    that reported usage and says nothing of those that did not."""
    if first is None or second is None:
        return second if first is None else first
    return first + second


def _plus(a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return b if a is None else a
    return a + b


class VllmMetrics(msgspec.Struct, frozen=True, gc=False):
    """vLLM's per-request ``metrics`` (0.32; sent with ``--enable-per-request-metrics``, and
    for ``n=1`` only; in a stream, on the final usage chunk). Milliseconds, measured by the
    engine: from scheduling to the first token, from the first token to the last, in the
    queue before scheduling, between tokens on average; output tokens per second from
    scheduling to the last token. ``speculative_decoding`` is vLLM's experimental object."""

    time_to_first_token_ms: float | None = None
    generation_time_ms: float | None = None
    queue_time_ms: float | None = None
    mean_itl_ms: float | None = None
    tokens_per_second: float | None = None
    speculative_decoding: dict[str, Any] | None = None


class LlamaCppTimings(msgspec.Struct, frozen=True, gc=False):
    """llama.cpp's ``timings`` (every answer; in a stream, on the last chunks): prompt tokens
    taken from the cache (``cache_n``) and evaluated (``prompt_n``), generated tokens
    (``predicted_n``), the milliseconds each phase took, and their rates. With speculative
    decoding, ``draft_n`` and ``draft_n_accepted``. Its counts are plain ints, not `Count`s:
    llama.cpp sends -1 for one it did not measure (``result_timings``' defaults), and no
    budget reads them."""

    cache_n: int | None = None
    prompt_n: int | None = None
    prompt_ms: float | None = None
    prompt_per_token_ms: float | None = None
    prompt_per_second: float | None = None
    predicted_n: int | None = None
    predicted_ms: float | None = None
    predicted_per_token_ms: float | None = None
    predicted_per_second: float | None = None
    draft_n: int | None = None
    draft_n_accepted: int | None = None


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
    content: list[TokenLogprob] | None = None  # llama.cpp answers completions in the chat shape

    def normalized(self) -> list[TokenLogprob]:
        """The legacy completions shape in the chat shape, so `Response.logprobs` has one type."""
        if self.content is not None:
            return self.content
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
    tool_calls: list[WireToolCall] | None = None
    reasoning: str | None = None  # vLLM >= 0.10
    reasoning_content: str | None = None  # SGLang, llama.cpp, older vLLM


class ChatChoice(msgspec.Struct, gc=False):
    index: int = 0
    message: Message = msgspec.field(default_factory=Message)
    logprobs: ChatLogprobs | None = None
    finish_reason: str | None = None


class ChatCompletion(msgspec.Struct, gc=False, kw_only=True):
    id: str | None = None
    model: str | None = None
    choices: list[ChatChoice]
    usage: Usage | None = None


class CompletionChoice(msgspec.Struct, gc=False):
    index: int = 0
    text: str | None = None
    logprobs: CompletionLogprobs | None = None
    finish_reason: str | None = None


class Completion(msgspec.Struct, gc=False, kw_only=True):
    id: str | None = None
    model: str | None = None
    choices: list[CompletionChoice]
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


class Measured(msgspec.Struct, gc=False):
    """The server's measures of a request, in a body or a chunk: read only when asked for
    (`Response.metrics`), so that no call pays for fields it does not read."""

    metrics: VllmMetrics | None = None  # vLLM
    timings: LlamaCppTimings | None = None  # llama.cpp


class ModelCard(msgspec.Struct):
    id: str
    owned_by: Any = None  # a str on every server that sends it; read only as detection's hint


class ModelList(msgspec.Struct):
    data: list[ModelCard]
