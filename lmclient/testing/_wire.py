"""The bytes the fake sends: vLLM-shaped JSON bodies, error envelopes and SSE streams."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from ._runaway import Run
from ._script import StreamStyle

__all__ = [
    "JSON_HEADERS",
    "Answer",
    "FakeResponse",
    "Kind",
    "Pause",
    "StreamDropped",
    "completion_body",
    "endless_response",
    "error_event",
    "error_response",
    "estimate_tokens",
    "json_response",
    "runaway_body",
    "runaway_stream",
    "sse_response",
]

Kind = Literal["chat", "completions"]
JSON_HEADERS = (("content-type", "application/json"),)
SSE_HEADERS = (("content-type", "text/event-stream"), ("cache-control", "no-cache"))
KEEPALIVE = b": keep-alive\n\n"


@dataclass(frozen=True)
class Pause:
    """An item of :attr:`FakeResponse.chunks`: wait this long before the next bytes.

    Over sockets the wait is real but ends early when the server stops; under respx time is
    not spent: a pause as long as the request's read timeout raises ``httpx.ReadTimeout``
    where the bytes stop, a shorter one is skipped.
    """

    seconds: float


@dataclass
class FakeResponse:
    """What :meth:`FakeLLM.handle` answers, for a transport to send.

    ``chunks`` replaces ``body`` when set: bytes and :class:`Pause` items, produced lazily;
    raising :class:`StreamDropped` breaks the connection. They are sent as a chunked body
    (SSE), or raw under ``content-length: length`` when ``length`` is set. ``delay`` seconds
    pass before the status line (like a :class:`Pause`); ``cut`` closes the connection
    instead of answering: ``"start"`` before any byte, ``"headers"`` halfway through the head.
    """

    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    chunks: Iterator[bytes | Pause] | None = field(default=None, repr=False)
    length: int | None = None
    delay: float = 0.0
    cut: Literal["start", "headers"] | None = None


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
    reasoning_key: str = "reasoning"  # where the server puts thinking (SGLang: reasoning_content)
    tool_calls: list[dict[str, Any]] | None = None  # the wire's, arguments as JSON strings


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
    kind: Kind, head: dict[str, Any], answers: list[Answer], usage: dict[str, Any]
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
                answer.reasoning_key: answer.reasoning,
            }
            if answer.tool_calls:
                choice["message"]["tool_calls"] = answer.tool_calls
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
    usage: dict[str, Any] | None,
    style: StreamStyle,
    on_chunk: Callable[[int], object] | None,
) -> FakeResponse:
    """A 200 SSE answer whose events are produced lazily, as the transport writes them."""
    payloads = _payloads(_Events(kind, head), answers, usage, style)
    chunks = _frame(payloads, style.keepalive, on_chunk)
    return FakeResponse(200, list(SSE_HEADERS), chunks=chunks)


def endless_response(
    kind: Kind,
    head: dict[str, Any],
    answer: Answer,
    chunk_size: int,
    every: float,
    keepalive: bool,
    on_chunk: Callable[[int], object] | None,
) -> FakeResponse:
    """A 200 SSE answer that never ends: the answer's deltas, then a one-space delta (or,
    with ``keepalive``, a keep-alive comment) every ``every`` seconds, forever."""
    events = _Events(kind, head)

    def payloads() -> Iterator[bytes | Pause]:
        if kind == "chat":
            yield events.event(0, {"role": "assistant", "content": ""})
        for delta, logprobs in _deltas(answer, chunk_size, chat=kind == "chat"):
            yield events.event(0, delta, logprobs=logprobs)
        while True:
            if every > 0:
                yield Pause(every)
            yield KEEPALIVE if keepalive else events.event(0, {"content": " "})

    # keep-alive comments are the payload here, not separators between events
    chunks = _frame(payloads(), False, on_chunk)
    return FakeResponse(200, list(SSE_HEADERS), chunks=chunks)


def runaway_body(kind: Kind, head: dict[str, Any], run: Run, prompt_tokens: int) -> FakeResponse:
    """A 200 JSON answer of a runaway: its text up to where ``run`` ends (a bounded run)."""
    text = "".join(run)  # first: the usage counts what it produced
    answer = Answer(text, run.finish or "length")
    body = completion_body(kind, head, [answer], _run_usage(prompt_tokens, run))
    stop_reason = _stop_reason(run)
    if stop_reason is not None:
        body["choices"][0]["stop_reason"] = stop_reason
    return json_response(200, body)


def runaway_stream(
    kind: Kind,
    head: dict[str, Any],
    run: Run,
    prompt_tokens: int | None,
    on_chunk: Callable[[int], object] | None,
    on_abandon: Callable[[], object],
) -> FakeResponse:
    """A 200 SSE answer of a runaway: one delta per token until ``run`` ends, then the finish
    event, the usage (unless ``prompt_tokens`` is ``None``: not asked) and ``[DONE]``.
    ``on_abandon`` runs when the stream is closed before the run ended: the client left (or the
    server stopped), and the fake stops generating, as vLLM and llama.cpp abort."""
    events = _Events(kind, head)

    def payloads() -> Iterator[bytes]:
        try:
            if kind == "chat":
                yield events.event(0, {"role": "assistant", "content": ""})
            for delta in run:
                yield events.event(0, {"content": delta})
        finally:
            if run.finish is None:
                on_abandon()
        yield events.event(0, {}, run.finish, stop_reason=_stop_reason(run))
        if prompt_tokens is not None:
            yield events.usage(_run_usage(prompt_tokens, run))
        yield b"[DONE]"

    return FakeResponse(200, list(SSE_HEADERS), chunks=_frame(payloads(), False, on_chunk))


def _stop_reason(run: Run) -> str | None:
    """vLLM's ``stop_reason`` when its guard ended the run (``vllm/v1/core/sched/utils.py``)."""
    return "repetition_detected" if run.finish == "repetition" else None


def _run_usage(prompt_tokens: int, run: Run) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": run.count,
        "total_tokens": prompt_tokens + run.count,
    }


def _frame(
    payloads: Iterator[bytes | Pause], keepalive: bool, on_chunk: Callable[[int], object] | None
) -> Iterator[bytes | Pause]:
    """``data:`` framing, keep-alive comments between events (with ``keepalive``), and the
    ``on_chunk`` hook before each event. Pauses and ready-made comments pass through."""
    index = 0
    for payload in payloads:
        if isinstance(payload, Pause) or payload == KEEPALIVE:
            yield payload
            continue
        if index and keepalive:
            yield KEEPALIVE
        if on_chunk is not None:
            on_chunk(index)
        index += 1
        yield b"data: " + payload + b"\n\n"


class _Events:
    """The JSON of one stream's events: every event repeats the head (``id``, ``model``, ...)."""

    def __init__(self, kind: Kind, head: dict[str, Any]) -> None:
        self.kind = kind
        object_name = "chat.completion.chunk" if kind == "chat" else head["object"]
        self.head = {**head, "object": object_name}

    def event(
        self,
        index: int,
        delta: dict[str, Any],
        finish: str | None = None,
        logprobs: Any = None,
        stop_reason: str | None = None,
    ) -> bytes:
        choice: dict[str, Any] = {"index": index}
        if self.kind == "chat":
            choice["delta"] = delta
        else:
            choice["text"] = delta.get("content", "")
        choice.update(logprobs=logprobs, finish_reason=finish)
        if stop_reason is not None:
            choice["stop_reason"] = stop_reason
        return msgspec.json.encode({**self.head, "choices": [choice]})

    def usage(self, usage: dict[str, Any]) -> bytes:
        return msgspec.json.encode({**self.head, "choices": [], "usage": usage})


def error_event(message: str, code: int) -> bytes:
    """The error event vLLM sends mid-stream, with HTTP status 200 already gone out."""
    error = {"message": message, "type": "InternalServerError", "param": None, "code": code}
    return msgspec.json.encode({"error": error})


def _payloads(
    events: _Events, answers: list[Answer], usage: dict[str, Any] | None, style: StreamStyle
) -> Iterator[bytes]:
    """The JSON of each event, stopping, failing or breaking where the style says."""
    chat = events.kind == "chat"
    sent = 0
    for index, answer in enumerate(answers):
        if chat:
            yield events.event(index, {"role": "assistant", "content": ""})
        for delta, logprobs in _deltas(answer, style.chunk_size, chat=chat):
            if sent == style.error_after:
                yield error_event("fake mid-stream error", 500)
                yield b"[DONE]"
                return
            if sent == style.close_after:
                return
            if sent == style.drop_after:
                raise StreamDropped
            yield events.event(index, delta, logprobs=logprobs)
            sent += 1
        yield events.event(index, {}, answer.finish_reason)
    if usage is not None:
        yield events.usage(usage)
    yield b"[DONE]"


def _tool_call_deltas(
    index: int, call: dict[str, Any], size: int
) -> Iterator[tuple[dict[str, Any], Any]]:
    """One tool call as servers stream it: its id and name first, then its arguments in pieces,
    each delta naming the call by ``index``."""
    function = call["function"]
    head = {**call, "index": index, "function": {"name": function["name"], "arguments": ""}}
    yield {"tool_calls": [head]}, None
    arguments = function["arguments"]
    for start in range(0, len(arguments), size):
        piece = {"index": index, "function": {"arguments": arguments[start : start + size]}}
        yield {"tool_calls": [piece]}, None


def _deltas(answer: Answer, size: int, *, chat: bool) -> Iterator[tuple[dict[str, Any], Any]]:
    """``(delta, logprobs)`` per text piece: reasoning and refusal (chat only), then content.

    The first content piece carries the answer's ``logprobs``.
    """
    size = max(1, size)
    if chat:
        reasoning = answer.reasoning or ""
        for start in range(0, len(reasoning), size):
            yield {answer.reasoning_key: reasoning[start : start + size]}, None
        if answer.refusal:
            yield {"refusal": answer.refusal}, None
        for index, call in enumerate(answer.tool_calls or ()):
            yield from _tool_call_deltas(index, call, size)
    content = answer.content or ""
    for start in range(0, len(content), size):
        yield {"content": content[start : start + size]}, answer.logprobs if start == 0 else None
