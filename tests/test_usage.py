"""Usage and metrics: the detail fields each server sends, `Response.metrics`, `Response.raw`
with every field of the body, usage summed over re-asks and over a batch (`UsageTotal`).
Recorded bodies decode as each server sent them; the rest runs over real sockets."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest

import lmclient
from lmclient import _core
from lmclient._stream_state import StreamState
from lmclient._wire.protocol import add_usage
from lmclient.testing import FakeLLM
from tests.helpers import FIXTURES, LLAMACPP_LIVE, answered, chat_body

VLLM_LIVE = FIXTURES / "vllm"

# vLLM 0.32's per-request metrics (`--enable-per-request-metrics`), as
# `build_per_request_timing_metrics` fills them (vllm/entrypoints/generate/base/serving.py)
VLLM_METRICS: dict[str, Any] = {
    "time_to_first_token_ms": 41.5,
    "generation_time_ms": 120.0,
    "queue_time_ms": 0.25,
    "mean_itl_ms": 30.0,
    "tokens_per_second": 24.9,
}


def finish(body: bytes, endpoint: Any = "chat", output_type: Any = str) -> Any:
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm")
    return core.prepare("create", "Q", output_type, endpoint, {}).finish(200, {}, body)


def stream_response(sse: bytes) -> Any:
    core = _core.ClientCore("http://h/v1", "m", dialect="llamacpp")
    state = StreamState(core.prepare("stream", "Q", str, "chat", {}, reading="stream"))
    state.feed(sse)
    state.end()
    return state, state.result()


# -- what each server puts in usage ------------------------------------------------------------


def test_llamacpp_body_cached_tokens_and_timings() -> None:
    body = (LLAMACPP_LIVE / "chat_plain.response.json").read_bytes()
    core = _core.ClientCore("http://h/v1", "m", dialect="llamacpp")
    response = answered(core.prepare("create", "Q", str, "chat", {}), body)
    assert response.usage == lmclient.Usage(28, 32, 60, lmclient.PromptTokensDetails(0))
    assert response.usage.cached_tokens == 0 and response.usage.reasoning_tokens is None
    assert isinstance(response.metrics, lmclient.LlamaCppTimings)
    assert response.metrics.prompt_n == 28 and response.metrics.predicted_n == 32
    assert response.metrics.predicted_ms == 619.655
    assert response.raw == json.loads(body)  # system_fingerprint, timings, ... all of it


def test_llamacpp_stream_usage_and_timings_on_the_last_chunk() -> None:
    sse = (LLAMACPP_LIVE / "chat_stream_usage.response.sse").read_bytes()
    state, response = stream_response(sse)
    assert state.usage.cached_tokens == 12 and response.usage.cached_tokens == 12
    assert response.total_usage == response.usage
    assert isinstance(response.metrics, lmclient.LlamaCppTimings)
    assert response.metrics.cache_n == 12 and response.metrics.prompt_n == 5
    events = [
        json.loads(line[6:])
        for line in sse.decode().splitlines()
        if line.startswith("data: {")  # every event but [DONE]
    ]
    assert response.raw == events and state.raw == events
    assert response.raw[-1]["timings"]["predicted_n"] == 8


def test_vllm_body_without_details_nor_metrics() -> None:
    """vLLM 0.32 sends the detail objects as null unless a server flag turns them on, and
    ``metrics: null`` unless ``--enable-per-request-metrics``."""
    body = (VLLM_LIVE / "chat_n_2.response.json").read_bytes()
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm")
    response = answered(core.prepare("create", "Q", str, "chat", {"n": 2}), body)
    assert response.usage == lmclient.Usage(18, 5, 23)
    assert response.usage.cached_tokens is None and response.usage.reasoning_tokens is None
    assert response.metrics is None
    assert response.raw["system_fingerprint"] == "vllm-0.32.0-040eaa22"
    assert response.raw["choices"][1]["stop_reason"] is None


def test_vllm_recorded_metrics_and_cached_tokens() -> None:
    """vLLM 0.32 with ``--enable-per-request-metrics --enable-prompt-tokens-details``."""
    body = (VLLM_LIVE / "chat_metrics.response.json").read_bytes()
    response = finish(body)
    assert response.usage is not None and response.usage.cached_tokens == 0
    metrics = response.metrics
    assert isinstance(metrics, lmclient.VllmMetrics)
    assert metrics == lmclient.VllmMetrics(**json.loads(body)["metrics"])
    assert metrics.time_to_first_token_ms is not None and metrics.time_to_first_token_ms > 0
    assert response.raw["usage"]["prompt_tokens_details"]["created_cache_tokens"] == 0


def test_vllm_recorded_stream_metrics_on_the_usage_chunk() -> None:
    sse = (VLLM_LIVE / "chat_metrics_stream.response.sse").read_bytes()
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm")
    state = StreamState(core.prepare("stream", "Q", str, "chat", {}, reading="stream"))
    state.feed(sse)
    state.end()
    response = state.result()
    assert isinstance(response.metrics, lmclient.VllmMetrics)
    assert response.metrics.tokens_per_second == state.raw[-1]["metrics"]["tokens_per_second"]
    assert "metrics" not in state.raw[-2]  # the last content chunk has none
    assert response.usage == lmclient.Usage(13, 6, 19, lmclient.PromptTokensDetails(0))


@pytest.mark.parametrize(
    ("usage", "cached", "reasoning"),
    [
        # vLLM 0.32 (UsageInfo, serve/engine/protocol.py) with both server flags on; OpenAI
        (
            {
                "prompt_tokens_details": {"cached_tokens": 16, "created_cache_tokens": None},
                "completion_tokens_details": {"reasoning_tokens": 7},
            },
            16,
            7,
        ),
        # SGLang (UsageInfo, srt/entrypoints/openai/protocol.py): reasoning_tokens beside the
        # counts, cached tokens with --enable-cache-report; 0.5.23: the OpenAI place as well
        ({"prompt_tokens_details": {"cached_tokens": 4}, "reasoning_tokens": 7}, 4, 7),
        ({"reasoning_tokens": 7, "completion_tokens_details": {"reasoning_tokens": 7}}, None, 7),
        ({"reasoning_tokens": 0}, None, 0),  # SGLang without a reasoning parser
        ({}, None, None),  # Ollama, TGI, LM Studio: the three counts only
    ],
)
def test_usage_details_wherever_the_server_puts_them(
    usage: dict[str, Any], cached: int | None, reasoning: int | None
) -> None:
    body = chat_body("yes")
    body["usage"] = {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29, **usage}
    response = finish(json.dumps(body).encode())
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (20, 9)
    assert response.usage.cached_tokens == cached
    assert response.usage.reasoning_tokens == reasoning
    assert response.raw["usage"] == body["usage"]  # every usage field, known or not


def test_usage_sums_count_by_count() -> None:
    a = lmclient.Usage(10, 2, 12, lmclient.PromptTokensDetails(8))
    b = lmclient.Usage(11, 3, 14, None, None, 5)  # SGLang's reasoning_tokens
    c = lmclient.Usage(None, 4, None)
    total = a + b + c
    assert total == lmclient.Usage(
        21,
        9,
        26,
        lmclient.PromptTokensDetails(8),
        lmclient.CompletionTokensDetails(5),
    )
    assert (total.cached_tokens, total.reasoning_tokens) == (8, 5)
    assert add_usage(None, a) is a and add_usage(a, None) is a
    assert add_usage(None, None) is None
    with pytest.raises(TypeError):
        a + 1  # type: ignore[operator]


def test_response_keeps_the_body_bytes() -> None:
    """The body is kept as received (encoded as ``body``, in base64); `raw` decodes it."""
    body = chat_body("yes")
    body["server_extra"] = {"kept": [1, 2]}
    sent = json.dumps(body).encode()
    response = finish(sent)
    encoded = msgspec.json.decode(msgspec.json.encode(response))
    assert base64.b64decode(encoded["body"]) == sent
    assert response.raw == body and response.raw is not response.raw  # decoded at each access


# -- over real sockets: the fake's extra fields come back ---------------------------------------


def test_raw_round_trip_keeps_unknown_fields(fake: FakeLLM, url: str) -> None:
    usage = {
        "prompt_tokens": 5,
        "completion_tokens": 1,
        "total_tokens": 6,
        "prompt_tokens_details": {"cached_tokens": 3, "image_tokens": 0},
        "future_count": 9,
    }
    fake.reply("yes", usage=usage, extra={"metrics": VLLM_METRICS, "unknown_field": {"a": [1]}})
    # one JSON answer (runaway="off": a str is else read as a stream, raw its chunks)
    with lmclient.Client(url, "fake-model", runaway="off") as client:
        response = client.create("Q")
    assert response.raw["unknown_field"] == {"a": [1]}
    assert response.raw["usage"] == usage
    assert response.usage is not None and response.usage.cached_tokens == 3
    assert response.metrics == lmclient.VllmMetrics(**VLLM_METRICS)
    assert response.raw["metrics"] == VLLM_METRICS


async def test_stream_raw_is_every_chunk_and_metrics_ride_on_them(fake: FakeLLM, url: str) -> None:
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    fake.reply("a b", usage=usage, extra={"unknown_field": 1, "metrics": VLLM_METRICS})
    async with lmclient.AsyncClient(url, "fake-model", dialect="vllm") as client:
        async with client.stream("Q") as stream:
            assert await stream.aread() == "a b"
        assert stream.usage == lmclient.Usage(5, 2, 7)
        assert stream.metrics == lmclient.VllmMetrics(**VLLM_METRICS)
        assert len(stream.raw) == stream.events - 1  # every event but [DONE]
        assert all(event["unknown_field"] == 1 for event in stream.raw)
        assert stream.raw[-1]["usage"] == usage  # vLLM's usage-only chunk


# -- summed over re-asks -----------------------------------------------------------------------


def usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def test_total_usage_counts_every_reasked_answer(fake: FakeLLM, url: str) -> None:
    fake.reply("x", usage=usage(10, 1), times=1)
    fake.reply("y", usage=usage(20, 1, cached=10), times=1)
    fake.reply("7", usage=usage(30, 1, cached=20), times=1)
    with lmclient.Client(url, "fake-model", max_reasks=2) as client:
        response = client.create("N?", int)
    assert response.value == 7 and response.reasks == 2
    assert response.usage == lmclient.Usage(30, 1, 31, lmclient.PromptTokensDetails(20))
    assert response.total_usage == lmclient.Usage(60, 3, 63, lmclient.PromptTokensDetails(30))


async def test_errors_that_end_a_call_carry_the_total(fake: FakeLLM, url: str) -> None:
    fake.reply("x", usage=usage(10, 1), times=1)
    fake.reply("y", usage=usage(20, 2), times=1)
    fake.reply('{"a": ', usage=usage(30, 4), finish_reason="length", times=1)
    async with lmclient.AsyncClient(url, "fake-model") as client:
        with pytest.raises(lmclient.ValidationError) as invalid:
            await client.generate("N?", int, max_reasks=1)
        with pytest.raises(lmclient.TruncatedError) as cut:
            await client.generate("D?", dict[str, int])
    assert invalid.value.usage == lmclient.Usage(20, 2, 22, lmclient.PromptTokensDetails(0))
    assert invalid.value.total_usage == lmclient.Usage(30, 3, 33, lmclient.PromptTokensDetails(0))
    assert (
        cut.value.usage
        == cut.value.total_usage
        == lmclient.Usage(30, 4, 34, lmclient.PromptTokensDetails(0))
    )


def test_a_server_without_usage_leaves_the_total_none() -> None:
    body = chat_body("5")
    del body["usage"]
    response = finish(json.dumps(body).encode(), output_type=int)
    assert response.usage is None and response.total_usage is None


# -- summed over a batch -----------------------------------------------------------------------


def test_generate_many_sums_usage_failures_included(fake: FakeLLM, url: str) -> None:
    fake.reply("1", usage=usage(10, 1), when="one")
    fake.reply("x", usage=usage(20, 2), when="bad")
    fake.reply_error(400, "refused", when="refused")
    total = lmclient.UsageTotal()
    with lmclient.Client(url, "fake-model", max_retries=0) as client:
        values = client.generate_many(
            ["one", "bad", "refused"], int, return_exceptions=True, usage=total
        )
        assert values[0] == 1
        assert isinstance(values[1], lmclient.ValidationError)
        assert isinstance(values[2], lmclient.BadRequestError)
        assert total.usage == lmclient.Usage(30, 3, 33, lmclient.PromptTokensDetails(0))
        assert (total.calls, total.unreported) == (3, 1)
        client.complete_many(["one"], int, usage=total)  # one total, several batches
    assert total.calls == 4 and total.usage is not None and total.usage.prompt_tokens == 40


async def test_async_generate_many_sums_usage_and_the_failure_that_stops_it(
    fake: FakeLLM, url: str
) -> None:
    fake.reply("1", usage=usage(10, 1), when="one")
    fake.reply("x", usage=usage(20, 2), when="bad")
    total = lmclient.UsageTotal()
    async with lmclient.AsyncClient(url, "fake-model") as client:
        assert await client.generate_many(["one", "one"], int, usage=total) == [1, 1]
        with pytest.raises(lmclient.ValidationError):
            await client.generate_many(["bad"], int, usage=total, concurrency=1)
    assert total.usage == lmclient.Usage(40, 4, 44, lmclient.PromptTokensDetails(0))
    assert (total.calls, total.unreported) == (3, 0)
    assert "calls=3" in repr(total)


def test_usage_total_takes_only_outcomes() -> None:
    total = lmclient.UsageTotal()
    total.add(lmclient.Usage(1, 1, 2))
    total.add(None)
    total.add(lmclient.APIConnectionError("down"))
    assert (total.usage, total.calls, total.unreported) == (lmclient.Usage(1, 1, 2), 3, 2)
    with pytest.raises(TypeError, match=r"UsageTotal\.add"):
        total.add(5)


# -- counts no server can have made (issue 37) -------------------------------------------------

COUNTS = [
    ({"prompt_tokens": -1}, "$.usage.prompt_tokens"),
    ({"completion_tokens": -1000}, "$.usage.completion_tokens"),
    ({"total_tokens": -(2**62)}, "$.usage.total_tokens"),
    ({"prompt_tokens_details": {"cached_tokens": -1}}, "$.usage.prompt_tokens_details"),
    ({"completion_tokens_details": {"reasoning_tokens": -1}}, "completion_tokens_details"),
    ({"reasoning_tokens": -1}, "$.usage.reasoning_tokens"),  # SGLang's place
    ({"prompt_tokens": 2**53}, "$.usage.prompt_tokens"),  # past JSON's exact integers
    ({"prompt_tokens": 2**64}, "$.usage.prompt_tokens"),
]


@pytest.mark.parametrize(("counts", "where"), COUNTS)
def test_a_count_below_zero_or_past_any_count_is_a_protocol_error(
    counts: dict[str, Any], where: str
) -> None:
    """A negative count would take tokens off a budget (fail open); one past 2**53 - 1 is no
    count either, and would overflow the int64 columns sums are written to."""
    body = chat_body("5")
    body["usage"] = {"prompt_tokens": 20, "completion_tokens": 9, **counts}
    sent = json.dumps(body).encode()
    with pytest.raises(lmclient.ProtocolError, match=r"unexpected response body") as info:
        finish(sent, output_type=int)
    assert where in str(info.value) and info.value.body == sent
    chunk = {"choices": [], "usage": body["usage"]}
    sse = b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n"
    with pytest.raises(lmclient.ProtocolError, match=r"bad stream event") as info:
        stream_response(sse)
    assert where in str(info.value)


def test_the_largest_count_and_zero_are_counts() -> None:
    body = chat_body("5")
    body["usage"] = {"prompt_tokens": 2**53 - 1, "completion_tokens": 0}
    response = finish(json.dumps(body).encode(), output_type=int)
    assert response.usage == lmclient.Usage(2**53 - 1, 0)


def test_usage_total_refuses_a_negative_count_of_ones_own() -> None:
    """A `Usage` built by hand is not decoded: `add` and `check` refuse a negative count
    rather than let it take tokens off the total."""
    total = lmclient.UsageTotal(token_budget=100)
    with pytest.raises(ValueError, match=r"completion_tokens=-5 is no count: .* ints >= 0"):
        total.add(lmclient.Usage(10, -5))
    with pytest.raises(ValueError, match=r"UsageTotal\.check\(\): prompt_tokens=-200"):
        total.check(lmclient.Usage(-200, 0))
    assert (total.calls, total.usage) == (0, None)
    largest = lmclient.Usage(2**53 - 1, 0)
    with pytest.raises(lmclient.TokenBudgetExceeded):  # a sum may pass the largest count
        total.check(largest + largest)


def test_llamacpp_timings_keep_its_minus_one_and_a_bad_measure_is_a_protocol_error() -> None:
    """llama.cpp's ``timings`` say -1 for a count they did not measure: kept as sent (no budget
    reads them). A measure of the wrong type was msgspec's own error, from `Response.metrics`."""
    body = chat_body("yes")
    body["timings"] = {"cache_n": -1, "prompt_n": -1, "predicted_n": 3}
    response = finish(json.dumps(body).encode())
    assert response.metrics == lmclient.LlamaCppTimings(cache_n=-1, prompt_n=-1, predicted_n=3)
    body["timings"] = {"prompt_n": "many"}
    sent = json.dumps(body).encode()
    response = finish(sent)
    with pytest.raises(lmclient.ProtocolError, match=r"at `\$\.timings\.prompt_n`") as info:
        _ = response.metrics
    assert info.value.body == sent
