"""OpenTelemetry spans (``lmclient._otel``), read with the SDK's in-memory exporter over real
sockets: one span per call after the GenAI semantic conventions, retries and re-asks as its
events, streams ended with the stream, errors; the trace context of the call's span; the
automatic switch (on once the application imports OpenTelemetry), in fresh interpreters.

OpenTelemetry is imported by the fixtures, never at collection, and forgotten after this
module (`forget_opentelemetry`): the other modules' clients, whose tracing is automatic, must
keep running untraced as in an application without OpenTelemetry."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import msgspec
import pytest

import lmclient
from lmclient.testing import FakeLLM
from tests import helpers
from tests.helpers import only, script_retry_then_reask

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

forget_opentelemetry = helpers.forget_opentelemetry  # OpenTelemetry forgotten after this module
spans = helpers.spans  # lmclient's tracer on an in-memory exporter of the test's own
KEY = "sk-otel-secret-0123456789"
PROMPT = "Say a number, PROMPT-TEXT-4711."
PARAMS: dict[str, Any] = {"max_tokens": 20, "temperature": 0.5, "top_p": 0.9, "seed": 3}


def check_call_span(span: ReadableSpan, response: lmclient.Response[Any], url: str) -> None:
    from opentelemetry.trace import SpanKind, StatusCode

    assert span.name == "chat fake-model"
    assert span.kind is SpanKind.CLIENT
    assert span.status.status_code is StatusCode.UNSET
    total = response.total_usage
    assert total is not None and response.usage is not None
    assert total.prompt_tokens != response.usage.prompt_tokens  # a re-ask: both answers count
    address = urlsplit(url)
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "vllm",
        "gen_ai.request.model": "fake-model",
        "gen_ai.request.max_tokens": 20,
        "gen_ai.request.temperature": 0.5,
        "gen_ai.request.top_p": 0.9,
        "gen_ai.request.seed": 3,
        "gen_ai.response.model": "fake-model",
        "gen_ai.response.id": response.id,
        "gen_ai.response.finish_reasons": ("stop",),
        # the call's cost: the re-asked answer's tokens too
        "gen_ai.usage.input_tokens": total.prompt_tokens,
        "gen_ai.usage.output_tokens": total.completion_tokens,
        "server.address": "127.0.0.1",
        "server.port": address.port,
        "lmclient.retries": 1,
        "lmclient.reasks": 1,
    }
    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    assert events == [
        (
            "lmclient.retry",
            {
                "lmclient.attempt": 1,
                "lmclient.retry.delay": 0.0,
                "error.type": "ServerError",
                "http.response.status_code": 503,
            },
        ),
        ("lmclient.reask", {"lmclient.attempt": 2, "lmclient.reask": 1}),
    ]


def test_one_span_per_call_with_the_genai_attributes(spans: InMemorySpanExporter) -> None:
    fake = FakeLLM()
    script_retry_then_reask(fake)
    with fake.serve() as url, lmclient.Client(url, api_key=KEY, tracing=True) as client:
        response = client.create(PROMPT, int, max_reasks=1, **PARAMS)
    assert (response.value, response.retries, response.reasks) == (7, 1, 1)
    span = only(spans)  # the set-up requests (probes, model list) have none
    check_call_span(span, response, url)
    seen = repr(span.to_json()).encode()
    for secret in (KEY, "PROMPT-TEXT", "ANSWER-TEXT"):
        assert secret.encode() not in seen


async def test_one_span_per_async_call_with_the_genai_attributes(
    spans: InMemorySpanExporter,
) -> None:
    fake = FakeLLM()
    script_retry_then_reask(fake)
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, tracing=True) as client:
            response = await client.create(PROMPT, int, max_reasks=1, **PARAMS)
    check_call_span(only(spans), response, url)


def test_completions_are_text_completion_spans(spans: InMemorySpanExporter) -> None:
    with FakeLLM().serve() as url, lmclient.Client(url, model="fake-model", tracing=True) as c:
        c.complete(PROMPT)
    span = only(spans)
    assert span.name == "text_completion fake-model"
    assert (span.attributes or {})["gen_ai.operation.name"] == "text_completion"


def check_stream_span(span: ReadableSpan, usage: lmclient.Usage | None, *, ended: bool) -> None:
    attributes = dict(span.attributes or {})
    assert span.name == "chat fake-model"
    assert attributes["gen_ai.request.stream"] is True
    assert attributes["lmclient.stream.ended"] is ended
    assert attributes["lmclient.retries"] == 1
    assert [e.name for e in span.events] == ["lmclient.retry"]
    if ended:
        assert usage is not None
        assert attributes["gen_ai.usage.input_tokens"] == usage.prompt_tokens
        assert attributes["gen_ai.usage.output_tokens"] == usage.completion_tokens
        assert attributes["gen_ai.response.finish_reasons"] == ("stop",)


def test_a_stream_span_ends_with_the_stream(spans: InMemorySpanExporter) -> None:
    fake = FakeLLM()
    fake.fail(503, retry_after=0)
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model", tracing=True) as client,
        client.stream(PROMPT, list[int]) as stream,
    ):
        assert next(iter(stream))
        assert spans.get_finished_spans() == ()  # open while the stream is
        stream.read()
        check_stream_span(only(spans), stream.usage, ended=True)


async def test_an_async_stream_span_ends_with_the_stream(spans: InMemorySpanExporter) -> None:
    fake = FakeLLM()
    fake.fail(503, retry_after=0)
    with fake.serve() as url:
        async with (
            lmclient.AsyncClient(url, model="fake-model", tracing=True) as client,
            client.stream(PROMPT, list[int]) as stream,
        ):
            await stream.aread()
    check_stream_span(only(spans), stream.usage, ended=True)


async def test_a_stream_closed_early_ends_its_span(spans: InMemorySpanExporter) -> None:
    fake = FakeLLM(chunk_size=1)
    fake.fail(503, retry_after=0)
    # The answer stops after two events until the server stops: its end cannot arrive before
    # the stream is closed (read whole in one chunk, a loaded client would see it ended).
    fake.stall(after=2)
    fake.reply("a long answer, sent one character per event")
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model="fake-model", tracing=True) as client:
            async with client.stream(PROMPT) as stream:
                async for _ in stream:
                    break
            check_stream_span(only(spans), None, ended=False)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_failed_call_has_an_error_span(spans: InMemorySpanExporter, asynchronous: bool) -> None:
    from opentelemetry.trace import StatusCode

    fake = FakeLLM()
    fake.fail(400, body="bad request")
    with fake.serve() as url:
        if asynchronous:

            async def call() -> None:
                async with lmclient.AsyncClient(url, model="fake-model", tracing=True) as c:
                    await c.generate(PROMPT)

            with pytest.raises(lmclient.BadRequestError):
                asyncio.run(call())
        else:
            with (
                lmclient.Client(url, model="fake-model", tracing=True) as client,
                pytest.raises(lmclient.BadRequestError),
            ):
                client.generate(PROMPT)
    span = only(spans)
    assert span.status.status_code is StatusCode.ERROR
    attributes = dict(span.attributes or {})
    assert attributes["error.type"] == "BadRequestError"
    assert attributes["http.response.status_code"] == 400
    assert "gen_ai.response.id" not in attributes


def test_an_invalid_stream_has_an_error_span(spans: InMemorySpanExporter) -> None:
    from opentelemetry.trace import StatusCode

    fake = FakeLLM()
    fake.reply("12 apples")
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model", tracing=True) as client,
        client.stream(PROMPT, int) as stream,
        pytest.raises(lmclient.ValidationError),
    ):
        stream.read()
    span = only(spans)
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "ValidationError"


def test_tracing_false_makes_no_span(spans: InMemorySpanExporter) -> None:
    with FakeLLM().serve() as url, lmclient.Client(url, model="fake-model", tracing=False) as c:
        c.generate(PROMPT)
        with c.stream(PROMPT) as stream:
            stream.read()
    assert spans.get_finished_spans() == ()


def test_the_call_span_is_current_while_its_requests_are_sent(
    spans: InMemorySpanExporter,
) -> None:
    """`current_traceparent()` inside the call (in a hook, as the request is sent) names the
    lmclient span, a child of the application's span, with the application's tracestate."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

    from lmclient._otel import current_traceparent

    seen: list[tuple[str, str | None] | None] = []

    def hook(event: lmclient.HookEvent) -> None:
        if isinstance(event, lmclient.RequestSent):
            seen.append(current_traceparent())

    parent = SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", "value")]),
    )
    assert current_traceparent() is None  # no span, no context to send
    fake = FakeLLM()
    fake.fail(503, retry_after=0)
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model", hooks=[hook], tracing=True) as client,
        trace.use_span(NonRecordingSpan(parent)),
    ):
        assert current_traceparent() == (
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "vendor=value",
        )
        client.generate(PROMPT)
        with client.stream(PROMPT) as stream:
            stream.read()
    call, streamed = spans.get_finished_spans()
    for span in (call, streamed):
        assert span.parent is not None and span.parent.span_id == parent.span_id
        assert span.context is not None and span.context.trace_id == parent.trace_id
    expected = [
        (f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-01", "vendor=value")
        for span in (call, call, streamed)
        if span.context is not None
    ]
    assert seen == expected  # both attempts of the call, then the stream's request
    generation = [r for r in fake.requests if r.endpoint == "chat"]
    sent = [(r.headers.get("traceparent"), r.headers.get("tracestate")) for r in generation]
    assert sent == expected  # what the server reads, so that its spans join the call's


async def test_the_call_span_s_context_is_sent_by_the_async_client(
    spans: InMemorySpanExporter,
) -> None:
    fake = FakeLLM()
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, model="fake-model", tracing=True) as client:
            await client.generate(PROMPT)
            async with client.stream(PROMPT) as stream:
                await stream.aread()
    contexts = [s.context for s in spans.get_finished_spans() if s.context is not None]
    expected = [f"00-{c.trace_id:032x}-{c.span_id:016x}-{c.trace_flags:02x}" for c in contexts]
    assert [r.headers.get("traceparent") for r in fake.calls] == expected


def test_a_trace_context_given_by_the_call_is_sent_as_given(
    spans: InMemorySpanExporter,
) -> None:
    """The caller's own ``traceparent=`` (here in ``defaults``, and per call with a state)
    wins over the span's: lmclient never rewrites a context it was handed."""
    given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    fake = FakeLLM()
    defaults = {"traceparent": given}
    with (
        fake.serve() as url,
        lmclient.Client(url, model="fake-model", tracing=True, defaults=defaults) as client,
    ):
        client.generate(PROMPT)
        client.generate(PROMPT, traceparent=given.replace("01", "00"), tracestate="k=v")
    sent = [(r.headers.get("traceparent"), r.headers.get("tracestate")) for r in fake.calls]
    assert sent == [(given, None), (given.replace("01", "00"), "k=v")]
    assert len(spans.get_finished_spans()) == 2


def test_the_span_names_the_call_s_own_model(spans: InMemorySpanExporter) -> None:
    with (
        FakeLLM().serve() as url,
        lmclient.Client(url, model="base", tracing=True) as client,
    ):
        client.generate(PROMPT, model="tenant-lora")
        with client.stream(PROMPT, model="tenant-lora") as stream:
            stream.read()
    for span in spans.get_finished_spans():
        assert span.name == "chat tenant-lora"
        assert (span.attributes or {})["gen_ai.request.model"] == "tenant-lora"


def test_a_unix_socket_is_the_span_s_server_address(
    spans: InMemorySpanExporter, tmp_path: Any
) -> None:
    path = str(tmp_path / "llm.sock")
    with FakeLLM().serve(uds=path), lmclient.Client(model="m", uds=path, tracing=True) as client:
        client.generate(PROMPT)
    attributes = dict(only(spans).attributes or {})
    assert attributes["server.address"] == path
    assert attributes["network.transport"] == "unix"
    assert "server.port" not in attributes


PROGRAM = """
import sys
from lmclient.testing import FakeLLM
import lmclient
{setup}
with FakeLLM().serve() as url, lmclient.Client(url, model="fake-model"{options}) as client:
    client.generate("Hi")
    with client.stream("Hi") as stream:
        stream.read()
{check}
"""


def run(setup: str, check: str, options: str = "") -> str:
    code = PROGRAM.format(setup=textwrap.dedent(setup), options=options, check=check)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


EXPORTER = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
"""


def test_tracing_is_automatic_once_the_application_imports_opentelemetry() -> None:
    check = "print([s.name for s in exporter.get_finished_spans()])"
    assert run(EXPORTER, check) == "['chat fake-model', 'chat fake-model']"
    assert run(EXPORTER, check, options=", tracing=False") == "[]"


def test_an_application_without_opentelemetry_never_imports_it() -> None:
    check = "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    assert run("", check) == "[]"
    assert run("", check, options=", hooks=[id]") == "[]"


def test_a_missing_api_is_a_configuration_error_with_tracing_true() -> None:
    setup = "sys.modules['opentelemetry'] = None  # as if not installed"
    code = (
        f"import sys, lmclient\n{setup}\n"
        "try:\n    lmclient.Client('http://127.0.0.1:9/v1', tracing=True)\n"
        "except lmclient.ConfigurationError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "tracing=True needs opentelemetry-api" in done.stdout


def test_the_spans_carry_no_text(spans: InMemorySpanExporter) -> None:
    fake = FakeLLM()
    fake.reply("ANSWER-TEXT-STREAMED")
    with fake.serve() as url, lmclient.Client(url, api_key=KEY, tracing=True) as client:
        with client.stream(PROMPT) as stream:
            stream.read()
        with pytest.raises(lmclient.ValidationError):
            client.generate(PROMPT, int)
    seen = msgspec.json.encode([s.to_json() for s in spans.get_finished_spans()])
    assert len(spans.get_finished_spans()) == 2
    for secret in (KEY, "PROMPT-TEXT", "ANSWER-TEXT"):
        assert secret.encode() not in seen


@pytest.mark.parametrize(
    ("dialect", "name"),
    [("generic", "openai"), ("openai", "openai"), ("lmstudio", "lmstudio"), ("tgi", "tgi")],
)
def test_the_provider_is_the_server_when_known(dialect: str, name: str) -> None:
    from lmclient import _otel

    client = lmclient.Client("http://127.0.0.1:9/v1", model="m", dialect=dialect)
    assert _otel.provider(client._core) == name
