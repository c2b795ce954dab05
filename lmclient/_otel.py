"""OpenTelemetry spans of lmclient's calls: after the GenAI semantic conventions (inference
client spans, https://github.com/open-telemetry/semantic-conventions-genai, gen-ai-spans.md).

Imported only when a call is traced (`_hooks.Observer`): never by ``import lmclient``, never in
an application that does not use OpenTelemetry. One span per call, kind CLIENT, named
``"{gen_ai.operation.name} {gen_ai.request.model}"``; its retries and re-asks are span events
(``lmclient.retry``, ``lmclient.reask``) rather than child spans: an attempt is an HTTP request
with nothing of its own to report but its status, and the server's spans (vLLM reads
``traceparent``) all hang under the call's span. A stream's span ends when the stream does, or
is closed. ``gen_ai.provider.name`` (the current conventions' name; ``gen_ai.system`` is its
deprecated predecessor) names the server when lmclient knows it (``"vllm"``, ``"sglang"``,
``"llamacpp"``, ...: custom values, which the conventions allow when no listed value applies),
and is ``"openai"`` (the listed value of the API these servers speak) when it does not. No
prompt or answer text is recorded (the conventions make ``gen_ai.input.messages`` opt-in), nor
an exception's message (a `ValidationError`'s quotes the answer): ``error.type`` is the
exception's class name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import msgspec
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .__version__ import __version__
from ._events import CallFailed, CallFinished, Reasking, Retrying, StreamFinished

if TYPE_CHECKING:
    from ._core import ClientCore
    from ._events import HookEvent
    from ._wire.protocol import Usage

__all__ = ["CallSpan", "current_traceparent"]

# A proxy until the application sets its provider, which it then follows.
_tracer = trace.get_tracer("lmclient", __version__)
_propagator = TraceContextTextMapPropagator()
OPERATIONS = {"chat": "chat", "completions": "text_completion"}


class _Sent(msgspec.Struct):
    """The request fields a span reports, decoded from the body as sent (what lmclient added,
    a token budget's ``max_tokens`` for one, included); the rest of the body is skipped."""

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    n: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None


_sent = msgspec.json.Decoder(_Sent)
_REQUEST_ATTRIBUTES = (
    ("max_tokens", "gen_ai.request.max_tokens"),
    ("temperature", "gen_ai.request.temperature"),
    ("top_p", "gen_ai.request.top_p"),
    ("seed", "gen_ai.request.seed"),
    ("presence_penalty", "gen_ai.request.presence_penalty"),
    ("frequency_penalty", "gen_ai.request.frequency_penalty"),
)


def current_traceparent() -> tuple[str, str | None] | None:
    """The W3C ``traceparent`` and ``tracestate`` (None if empty) of the current span, or None
    when no span is current (or it is not sampled into a valid context): what a request sends
    so that the server's spans join the caller's trace."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    parent = carrier.get("traceparent")
    if parent is None:
        return None
    return parent, carrier.get("tracestate") or None


def provider(core: ClientCore) -> str:
    """``gen_ai.provider.name``: the server lmclient knows it calls (the probes' kind, else the
    dialect's server), ``"openai"`` (the API's own value) for a server it does not know."""
    info = core.server_info
    if info is not None and info.kind != "unknown":
        return info.kind
    name = "generic" if core.dialect is None else core.dialect.name.partition("-")[0]
    return "openai" if name == "generic" else name


class CallSpan:
    """One call's span: started with the attributes a sampler may read, completed from the
    request sent and the call's events, ended by its last event."""

    __slots__ = ("span",)

    def __init__(self, core: ClientCore, endpoint: str, model: str | None, *, stream: bool) -> None:
        operation = OPERATIONS.get(endpoint, endpoint)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": provider(core),
        }
        if core.uds is not None:  # the semantic conventions' address of a Unix socket peer
            attributes["server.address"] = str(core.uds)
            attributes["network.transport"] = "unix"
        else:
            url = urlsplit(core.base_url)
            attributes["server.address"] = url.hostname or ""
            attributes["server.port"] = url.port or (443 if url.scheme == "https" else 80)
        if model is not None:
            attributes["gen_ai.request.model"] = model
        if stream:
            attributes["gen_ai.request.stream"] = True
        name = operation if model is None else f"{operation} {model}"
        self.span = _tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)

    def enter(self) -> object:
        """Make the span current; the token to `leave` with."""
        return otel_context.attach(trace.set_span_in_context(self.span))

    def leave(self, token: Any) -> None:
        otel_context.detach(token)

    def request(self, body: bytes | None) -> None:
        """The request parameters, from the first request's body."""
        span = self.span
        if body is None or not span.is_recording():
            return
        try:
            sent = _sent.decode(body)
        except msgspec.DecodeError:  # not ours to fail a call over
            return
        for field, attribute in _REQUEST_ATTRIBUTES:
            value = getattr(sent, field)
            if value is not None:
                span.set_attribute(attribute, value)
        if sent.n is not None and sent.n != 1:
            span.set_attribute("gen_ai.request.choice.count", sent.n)

    def record(self, event: HookEvent) -> None:
        """What ``event`` says about the call; its last event ends the span."""
        span = self.span
        if isinstance(event, Retrying):
            attributes: dict[str, Any] = {"lmclient.attempt": event.attempt}
            attributes["lmclient.retry.delay"] = event.delay
            attributes["error.type"] = event.error
            if event.status is not None:
                attributes["http.response.status_code"] = event.status
            span.add_event("lmclient.retry", attributes)
        elif isinstance(event, Reasking):
            span.add_event(
                "lmclient.reask",
                {"lmclient.attempt": event.attempt, "lmclient.reask": event.number},
            )
        elif isinstance(event, (CallFinished, StreamFinished)):
            if event.response_model is not None:
                span.set_attribute("gen_ai.response.model", event.response_model)
            if event.response_id is not None:
                span.set_attribute("gen_ai.response.id", event.response_id)
            reasons = [reason or "" for reason in event.finish_reasons]
            if reasons:
                span.set_attribute("gen_ai.response.finish_reasons", reasons)
            # What the call cost: every answer's tokens, the re-asked ones too.
            _usage(span, event.total_usage if isinstance(event, CallFinished) else event.usage)
            span.set_attribute("lmclient.retries", event.retries)
            if isinstance(event, CallFinished):
                span.set_attribute("lmclient.reasks", event.reasks)
            else:
                span.set_attribute("lmclient.stream.ended", event.ended)
            span.end()
        elif isinstance(event, CallFailed):
            _usage(span, event.total_usage)
            span.set_attribute("error.type", event.error)
            if event.status is not None:
                span.set_attribute("http.response.status_code", event.status)
            span.set_status(StatusCode.ERROR)
            span.end()


def _usage(span: Span, usage: Usage | None) -> None:
    if usage is not None:
        if usage.prompt_tokens is not None:
            span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
        if usage.completion_tokens is not None:
            span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
