"""Confidence for choices against the real vLLM server on the CPU: `create(...,
probabilities=True)` sends ``logprobs`` and ``top_logprobs: 20`` (vLLM's default limit) where
the dialect is forced (the release not asked), and the options' token ids
(``logprob_token_ids``, asked of ``/tokenize`` once per type) where the probes found 0.32;
vLLM's logprobs, which come after the constraint, give every option its share."""

from __future__ import annotations

import math
from typing import Any, Literal

import httpx
import msgspec
import pytest

import lmclient
from lmclient import CallParams, _confidence, _core
from lmclient._dialects import DIALECTS
from lmclient._output.types import compile_output
from tests.helpers import ANIMALS

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


def test_listed_ids_one_request_a_call(vllm_url: str) -> None:
    """The probes find vLLM 0.32: the first call of a type tokenizes its options' pieces (set-up
    requests, before the call's), then every call is one chat request with
    ``logprob_token_ids`` and no ``top_logprobs``; the multi-token fruits need no second
    request, and 22 options (more tokens at the first position than the top 20) all get a
    share."""
    sent: list[Any] = []
    with lmclient.Client(vllm_url, hooks=[sent.append], hook_content=True) as client:
        first = client.create("Which fruit is orange?", FRUIT, probabilities=True, **GREEDY)
        again = client.create("Which fruit is orange?", FRUIT, probabilities=True, **GREEDY)
        many = client.create("Which animal barks?", ANIMALS, probabilities=True, **GREEDY)
    bodies = [
        msgspec.json.decode(e.body or b"null") for e in sent if isinstance(e, lmclient.RequestSent)
    ]
    assert len(bodies) == 3  # one request a call: no continuation
    assert all("logprob_token_ids" in b and "top_logprobs" not in b for b in bodies)
    assert bodies[0]["logprob_token_ids"] == bodies[1]["logprob_token_ids"]
    assert first.probabilities == pytest.approx(again.probabilities)
    for response in (first, many):
        assert math.fsum(response.probabilities.values()) == pytest.approx(1.0)
        assert all(p > 0.0 for p in response.probabilities.values())
    assert max(first.probabilities, key=first.probabilities.__getitem__) == first.value
