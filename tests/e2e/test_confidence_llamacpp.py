"""Confidence for choices against the real llama.cpp server: `create(..., probabilities=True)`
sends ``logprobs`` and ``top_logprobs: 100``, and the options' probabilities are read from what
llama.cpp answers, on both clients and both endpoints."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import pytest

import lmclient
from lmclient import CallParams
from tests.e2e.helpers import Color

GREEDY: CallParams = {"temperature": 0.0, "seed": 1}


def _distribution(probabilities: Mapping[Any, float], options: set[Any]) -> None:
    """Every option, each a probability, summing to 1."""
    assert set(probabilities) == options
    assert all(0.0 <= p <= 1.0 for p in probabilities.values())
    assert math.fsum(probabilities.values()) == pytest.approx(1.0)


def test_a_literal_sync(base_url: str) -> None:
    with lmclient.Client(base_url, dialect="llamacpp") as client:
        response = client.create(
            "Is the sky blue? Answer yes or no.", Literal["yes", "no"], probabilities=True, **GREEDY
        )
    _distribution(response.probabilities, {"yes", "no"})
    assert response.probabilities[response.value] > 0.0
    assert response.logprobs is not None and len(response.logprobs[0].top_logprobs) == 100


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
async def test_bool_and_an_enum_async(
    base_url: str, endpoint: Literal["chat", "completions"]
) -> None:
    async with lmclient.AsyncClient(base_url, dialect="llamacpp") as client:
        truth = await client.create(
            "Water is wet. True or false?", bool, endpoint=endpoint, probabilities=True, **GREEDY
        )
        color = await client.create(
            "The color of grass is", Color, endpoint=endpoint, probabilities=True, **GREEDY
        )
    _distribution(truth.probabilities, {True, False})
    _distribution(color.probabilities, set(Color))
    assert color.probabilities[color.value] > 0.0


def test_multi_token_options(base_url: str) -> None:
    """Options of several tokens that share a beginning, read along the answer's path."""
    fruit = Literal["apple", "apricot", "banana"]
    with lmclient.Client(base_url, dialect="llamacpp") as client:
        response = client.create("Which fruit is orange?", fruit, probabilities=True, **GREEDY)
    _distribution(response.probabilities, {"apple", "apricot", "banana"})
    assert response.probabilities[response.value] > 0.0
    assert response.logprobs is not None and len(response.logprobs) > 1  # several tokens


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_shared_prefix_is_continued(base_url: str, asynchronous: bool) -> None:
    """Gemma 3 270M answers ``Paris``, and Parma's only way among the alternatives is ``Par``,
    which Paris begins too: a second request continues the answer from ``Par`` (llama.cpp
    prefills the assistant's message) and its logprobs split that chance."""
    cities = lmclient.Choice(["Paris", "Parma", "London"])
    prompt = "Pick one: Paris, Parma, London. Answer with one word."
    if asynchronous:
        async with lmclient.AsyncClient(base_url, dialect="llamacpp") as client:
            response = await client.create(prompt, cities, probabilities=True, **GREEDY)
    else:
        with lmclient.Client(base_url, dialect="llamacpp") as client:
            response = client.create(prompt, cities, probabilities=True, **GREEDY)
    _distribution(response.probabilities, {"Paris", "Parma", "London"})
    assert response.value == "Paris"
    assert response.probabilities["Parma"] > 0.0  # through the continuation alone
    assert response.usage is not None and response.total_usage is not None
    one, both = response.usage.total_tokens, response.total_usage.total_tokens
    assert one is not None and both is not None and both > one  # two requests
