"""Confidence for choices against the real vLLM server on the CPU: `create(...,
probabilities=True)` sends ``logprobs`` and ``top_logprobs: 20`` (vLLM's default limit), and
vLLM's logprobs, which come after the constraint, give every option its share."""

from __future__ import annotations

import math
from typing import Literal

import pytest

import lmclient
from lmclient import CallParams

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
