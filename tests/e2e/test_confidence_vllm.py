"""Confidence for choices against the real vLLM server on the CPU: `create(...,
probabilities=True)` sends ``logprobs`` and ``top_logprobs: 20`` (vLLM's default limit), and
vLLM's logprobs, which come after the constraint, give every option its share."""

from __future__ import annotations

import math
from typing import Literal

import httpx
import msgspec
import pytest

import lmclient
from lmclient import CallParams, _confidence, _core
from lmclient._dialects import DIALECTS
from lmclient._output.types import compile_output

# The first test also waits for the server to start (minutes on 2 cores): not part of the bound.
pytestmark = pytest.mark.timeout(300, func_only=True)

GREEDY: CallParams = {"temperature": 0.0, "seed": 1}
FRUIT = Literal["apple", "apricot", "banana"]


async def test_multi_token_options_both_clients(vllm_url: str) -> None:
    """The same greedy call on both clients gives the same answer and the same probabilities;
    vLLM's alternatives show every option (none is 0), and they sum to 1."""
    prompt = "Which fruit is orange?"
    with lmclient.Client(vllm_url, dialect="vllm") as client:
        sync = client.create(prompt, FRUIT, probabilities=True, **GREEDY)
    async with lmclient.AsyncClient(vllm_url, dialect="vllm") as aclient:
        answer = await aclient.create(prompt, FRUIT, probabilities=True, **GREEDY)
    assert answer.value == sync.value
    assert answer.probabilities == pytest.approx(sync.probabilities, abs=1e-3)
    assert set(sync.probabilities) == {"apple", "apricot", "banana"}
    assert all(p > 0.0 for p in sync.probabilities.values())
    assert math.fsum(sync.probabilities.values()) == pytest.approx(1.0)
    assert sync.logprobs is not None and len(sync.logprobs[0].top_logprobs) == 20


def test_vllm_continues_the_answer_from_a_prefix(vllm_url: str) -> None:
    """The second request of a shared prefix, as lmclient builds it, on vLLM: the assistant's
    ``Par`` continued (``continue_final_message``), so the next token's alternatives are the
    ends of words it begins: Parma's ``ma`` among them (Paris's ``is`` was not among the 20, so
    the split would give Parma all of ``Par``'s chance)."""
    cities = lmclient.Choice(["Paris", "Parma", "London"])
    prompt = "Pick one: Paris, Parma, London. Answer with one word."
    with lmclient.Client(vllm_url, dialect="vllm") as client:
        model = client.models()[0]
        response = client.create(prompt, cities, probabilities=True, **GREEDY)
    assert math.fsum(response.probabilities.values()) == pytest.approx(1.0)
    core = _core.ClientCore(vllm_url, model, dialect="vllm")
    call = core.prepare("create", prompt, cities, "chat", {"probabilities": True, **GREEDY})
    assert call.request.body is not None
    plan = DIALECTS["vllm"].plan(compile_output(cities), "chat")
    body = _confidence.continuation(msgspec.json.decode(call.request.body), "chat", plan, "Par")
    answer = httpx.post(f"{vllm_url}/chat/completions", json=body, timeout=120).json()
    first = answer["choices"][0]["logprobs"]["content"][0]
    assert "ma" in {alt["token"] for alt in first["top_logprobs"]}
