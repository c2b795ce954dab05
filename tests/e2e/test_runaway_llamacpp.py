"""Runaways against the real llama.cpp server (issue 39): a loop is stopped as it is generated,
and the server stops generating for it (its slot is freed); a long honest answer is not.

The loop is the one a new user meets first: ``generate("Say hi.")`` at temperature 0 makes
Gemma 3 270M write ``Say hi. mendatanguser`` and a newline, again and again (measured: every
text prompt tried runs away on this model, the chat template's end never comes). Without the
watch, that call spends every one of its 1,500 tokens, about 80 s on two cores.
"""

from __future__ import annotations

import json
import time
from typing import Annotated

import msgspec
import pytest

import lmclient
from scripts import llamacpp

PROMPT = "Say hi."
FORCED: lmclient.CallParams = {"temperature": 0.0, "max_tokens": 1500, "seed": 1}
COPY: lmclient.CallParams = {"temperature": 0.0, "seed": 1}
BOUND_S = 60.0  # the slot must be free by then; the whole loop would take minutes


class Essay(msgspec.Struct):
    text: Annotated[str, msgspec.Meta(min_length=1500, max_length=2000)]


_WORDS = [
    "red", "fox", "river", "mill", "blue", "owl", "bridge", "tower", "green", "hare", "field",
    "chapel", "grey", "crow", "valley", "farm", "white", "deer", "ridge", "gate", "black",
    "wolf", "marsh", "well", "brown", "lynx", "forest", "barn", "pink", "swan", "canal", "inn",
    "gold", "mole", "meadow", "church", "silver", "seal", "hill", "school", "amber", "wren",
    "pass", "market", "teal", "toad", "dune", "harbour", "olive", "bear", "glen", "quarry",
    "navy", "kite", "moor", "station", "coral", "newt", "ford", "castle", "plum", "heron",
    "cliff", "forge",
]  # fmt: skip
SOURCE = " ".join(
    f"On day {day} the {_WORDS[4 * day % 64]} {_WORDS[(4 * day + 1) % 64]} crossed the "
    f"{_WORDS[(4 * day + 2) % 64]} near the {_WORDS[(4 * day + 3) % 64]} and counted "
    f"{day * 7} stones."
    for day in range(1, 23)
)


def busy_slots(server: llamacpp.LlamaServer) -> int:
    with llamacpp._NO_PROXY.open(server.root_url + "/slots", timeout=10) as answer:
        return sum(bool(slot.get("is_processing")) for slot in json.loads(answer.read()))


def wait_until_idle(server: llamacpp.LlamaServer) -> None:
    end = time.monotonic() + BOUND_S
    while busy_slots(server):
        if time.monotonic() > end:
            pytest.fail(f"a slot still generates {BOUND_S:.0f} s after the client left")
        time.sleep(0.2)


def test_a_loop_is_stopped_as_it_happens_and_the_slot_freed(
    llama: llamacpp.LlamaServer,
) -> None:
    started = time.monotonic()
    with (
        lmclient.Client(llama.base_url) as client,
        pytest.raises(lmclient.RunawayError) as caught,
    ):
        client.generate(PROMPT, **FORCED)
    error = caught.value
    assert error.by == "client" and error.kind == "repeat" and error.path == "$"
    assert error.span in error.text and error.repeats >= 8
    assert error.tokens is not None and error.tokens <= 512
    assert "raise max_tokens" not in str(error)
    wait_until_idle(llama)  # the closed connection ended the generation
    assert time.monotonic() - started < BOUND_S


async def test_async_a_loop_is_stopped_and_the_slot_freed(llama: llamacpp.LlamaServer) -> None:
    async with lmclient.AsyncClient(llama.base_url) as client:
        with pytest.raises(lmclient.RunawayError) as caught:
            await client.generate(PROMPT, **FORCED)
    assert caught.value.by == "client"
    wait_until_idle(llama)


def test_with_the_watch_off_the_same_call_runs_to_max_tokens(
    llama: llamacpp.LlamaServer,
) -> None:
    """The control: what the watch saves. Cut at a smaller max_tokens to stay quick: with the
    watch off the looping text comes back as it did before, every token spent; with it on, a
    loop that reaches max_tokens is said as one (cut at max_tokens), not as a value."""
    with lmclient.Client(llama.base_url, runaway="off") as client:
        response = client.create(PROMPT, temperature=0.0, max_tokens=200, seed=1)
        assert response.finish_reason == "length" and response.usage is not None
        assert response.usage.completion_tokens == 200
        with pytest.raises(lmclient.RunawayError) as caught:
            client.create(PROMPT, temperature=0.0, max_tokens=200, seed=1, runaway="on")
    assert caught.value.by == "client"  # the watch stopped it before max_tokens


def test_a_long_honest_answer_is_not_stopped(llama: llamacpp.LlamaServer) -> None:
    """A 2,000-character field written in full: a text of one shape sentence after sentence
    (``On day 3 the grey crow crossed ...``), copied from the prompt, so that the answer is
    honest whatever the small model's own habits (asked to write an essay, it loops)."""
    with lmclient.Client(llama.base_url) as client:
        response = client.create(f"Copy this text exactly:\n\n{SOURCE}", Essay, **COPY)
    assert 1500 <= len(response.value.text) <= 2000
    tokens = None if response.usage is None else response.usage.completion_tokens
    assert tokens is not None and tokens > 400


def test_a_stream_of_text_is_stopped_too(llama: llamacpp.LlamaServer) -> None:
    with lmclient.Client(llama.base_url) as client:
        seen: list[str] = []
        with pytest.raises(lmclient.RunawayError), client.stream(PROMPT, **FORCED) as s:
            seen.extend(s)
    assert len("".join(seen)) < 2048
    wait_until_idle(llama)
