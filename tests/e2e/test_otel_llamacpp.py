"""OpenTelemetry spans of calls to a real llama.cpp server: the span's usage is the usage the
server reported in the response, for a call and for a stream."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec

import lmclient
from lmclient import CallParams
from tests import helpers
from tests.helpers import only

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


forget_opentelemetry = helpers.forget_opentelemetry  # OpenTelemetry forgotten after this module
spans = helpers.spans  # lmclient's tracer on an in-memory exporter of the test's own
SMALL: CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 64}


class Person(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=16)]
    age: Annotated[int, msgspec.Meta(ge=0, le=120)]


def test_the_span_usage_is_the_response_usage(base_url: str, spans: InMemorySpanExporter) -> None:
    with lmclient.Client(base_url, tracing=True) as client:
        response = client.create("Invent a person.", Person, **SMALL)
    span = only(spans)
    attributes = dict(span.attributes or {})
    assert response.usage is not None and response.usage.completion_tokens
    assert attributes["gen_ai.usage.input_tokens"] == response.usage.prompt_tokens
    assert attributes["gen_ai.usage.output_tokens"] == response.usage.completion_tokens
    assert attributes["gen_ai.provider.name"] == "llamacpp"
    assert attributes["gen_ai.request.seed"] == 1
    assert attributes["gen_ai.request.max_tokens"] == 64
    assert attributes["gen_ai.response.finish_reasons"] == (response.finish_reason,)
    assert span.name == f"chat {client.model}"
    if response.id is not None:
        assert attributes["gen_ai.response.id"] == response.id


async def test_a_stream_span_usage_is_the_stream_usage(
    base_url: str, spans: InMemorySpanExporter
) -> None:
    async with (
        lmclient.AsyncClient(base_url, tracing=True) as client,
        client.stream("Invent a person.", Person, **SMALL) as stream,
    ):
        await stream.aread()
    span = only(spans)
    attributes = dict(span.attributes or {})
    assert stream.usage is not None and stream.usage.completion_tokens
    assert attributes["gen_ai.usage.input_tokens"] == stream.usage.prompt_tokens
    assert attributes["gen_ai.usage.output_tokens"] == stream.usage.completion_tokens
    assert attributes["gen_ai.request.stream"] is True
    assert attributes["lmclient.stream.ended"] is True
