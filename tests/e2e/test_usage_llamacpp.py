"""Usage, metrics, the raw body and the context-length error, against the real llama.cpp server
(each slot's context is the server's ``-c`` over its ``-np`` slots)."""

from __future__ import annotations

import pytest

import lmclient
from lmclient import CallParams
from scripts import llamacpp

SMALL: CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 8}
WHOLE: CallParams = {**SMALL, "runaway": "off"}  # not watched for runaways: read whole


def test_usage_metrics_and_raw(base_url: str) -> None:
    with lmclient.Client(base_url, dialect="llamacpp") as client:
        response = client.create("Say hi.", **SMALL)  # watched for runaways: read as a stream
        whole = client.create("Say hi.", **WHOLE)  # one JSON body
        with client.stream("Say hi.", **SMALL) as stream:
            stream.read()
    usage = response.usage
    assert usage is not None and usage.prompt_tokens and usage.completion_tokens
    assert usage.cached_tokens is not None  # llama.cpp always says
    assert response.total_usage == usage
    assert isinstance(response.metrics, lmclient.LlamaCppTimings)
    assert response.metrics.predicted_n == usage.completion_tokens
    timings = response.metrics
    assert (timings.prompt_n or 0) + (timings.cache_n or 0) == usage.prompt_tokens
    assert any("timings" in event for event in response.raw)  # its events, as a stream's
    assert whole.usage is not None
    assert whole.raw["timings"]["predicted_n"] == whole.usage.completion_tokens
    assert whole.raw["system_fingerprint"].startswith("b")  # a field lmclient never reads
    assert stream.usage is not None and stream.usage.cached_tokens is not None
    assert isinstance(stream.metrics, lmclient.LlamaCppTimings)
    assert any("timings" in event for event in stream.raw)


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_prompt_longer_than_the_context(
    llama: llamacpp.LlamaServer, base_url: str, streamed: bool
) -> None:
    slot = llama.ctx // llama.parallel
    prompt = "word " * (slot + 200)
    async with lmclient.AsyncClient(base_url, dialect="llamacpp") as client:
        with pytest.raises(lmclient.ContextLengthError) as info:
            if streamed:
                async with client.stream(prompt, **SMALL) as stream:
                    await stream.aread()
            else:
                await client.generate(prompt, **SMALL)
    exc = info.value
    assert exc.status_code == 400 and exc.type == "exceed_context_size_error"
    assert exc.context_length == slot
    assert exc.prompt_tokens is not None and exc.prompt_tokens > slot
    assert exc.requested_tokens is None  # llama.cpp does not say
