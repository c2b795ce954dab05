"""A constrained answer that the server's reasoning parser takes for thinking, on the real
llama.cpp server (b11434, Gemma 3 270M), with a chat template that opens ``<think>`` in the
generation prompt, as thinking models' templates do (the recorded exchange:
tests/fixtures/llamacpp-live/chat_reasoning_forced_open.*). llama.cpp applies the grammar from
the first token and its reasoning parser (``--reasoning-format``, deepseek by default) puts
everything before ``</think>`` into ``reasoning_content``: the whole answer. lmclient says so,
naming the parser, and the advice it gives (``thinking=False``) gets the value.

A call that asks for thinking sends its grammar after lmclient's reasoning block
(`lmclient._output.thinking`): the model reasons first, llama.cpp closes the reasoning after
the call's ``thinking_budget``, and the answer follows, valid; with the server's reasoning
parser off (``--reasoning-format none``) the content holds both, and lmclient splits them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal

import httpx
import msgspec
import pytest

import lmclient
from lmclient._reasoning import THINK_MARKUP_TOKENS
from scripts import llamacpp
from tests.helpers import LLAMACPP_LIVE


class Person(msgspec.Struct):
    name: str
    age: int


class Bounded(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(max_length=20)]
    age: Annotated[int, msgspec.Meta(ge=0, le=120)]


SMALL: lmclient.CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 64, "max_reasks": 0}
OFF: lmclient.CallParams = {**SMALL, "thinking": False}


BUDGET = 32
THINKING: lmclient.CallParams = {
    "temperature": 0.0,
    "seed": 1,
    "max_reasks": 0,
    "thinking_budget": BUDGET,
}

# `Person` is unbounded (no max_tokens of lmclient's own): room for the thinking and the answer
ROOM: lmclient.CallParams = {**THINKING, "max_tokens": 160}


def _server(*args: str) -> Iterator[str]:
    template = LLAMACPP_LIVE / "chat_reasoning_forced_open.template.jinja"
    llamacpp.ensure_installed()
    # The last --chat-template-file wins over the one `LlamaServer` always passes.
    with llamacpp.start_server(
        parallel=1, extra_args=["--chat-template-file", str(template), *args]
    ) as server:
        yield server.base_url


@pytest.fixture(scope="module")
def thinking_url() -> Iterator[str]:
    yield from _server()


@pytest.fixture(scope="module")
def unparsed_url() -> Iterator[str]:
    """The same server with its reasoning parser off: the content holds the reasoning too."""
    yield from _server("--reasoning-format", "none")


def _tokens(url: str, text: str) -> int:
    """How many tokens the server's tokenizer makes of ``text`` (llama.cpp's /tokenize)."""
    answer = httpx.post(url.removesuffix("/v1") + "/tokenize", json={"content": text}, timeout=10)
    return len(answer.raise_for_status().json()["tokens"])


def test_the_answer_in_the_reasoning_is_said_with_the_parser(thinking_url: str) -> None:
    with (
        lmclient.Client(thinking_url) as client,
        pytest.raises(lmclient.ConstraintIgnoredError, match="--reasoning-format") as caught,
    ):
        client.generate("Invent a person.", Person, **SMALL)
    assert "came back as reasoning" in str(caught.value)
    assert msgspec.json.decode(caught.value.text, type=Person)  # the answer, in the reasoning


def test_the_advice_gets_the_value(thinking_url: str) -> None:
    with lmclient.Client(thinking_url) as client:
        person = client.generate("Invent a person.", Person, **OFF)
    assert isinstance(person, Person)


def test_the_constraint_holds_after_the_reasoning_within_its_budget(thinking_url: str) -> None:
    """The grammar after lmclient's reasoning block: the model reasons, llama.cpp closes the
    reasoning after ``thinking_budget`` tokens, and the answer is the value. Sent with the
    grammar alone (before this block existed) the same call was a 500 from llama.cpp: "got
    exception: Unexpected empty grammar stack after accepting piece: <unused24>" (the budget
    forced the end marker into a finished JSON grammar)."""
    with lmclient.Client(thinking_url) as client:
        response = client.create("Invent a person.", Person, **ROOM)
    assert isinstance(response.value, Person)
    assert response.reasoning
    assert _tokens(thinking_url, response.reasoning) <= BUDGET + THINK_MARKUP_TOKENS


def test_a_choice_after_the_reasoning(thinking_url: str) -> None:
    """The server's reasoning parser takes the block off but leaves the whitespace after
    ``</think>`` in the content (``"  \nxylo-7"``, seen by `probe --check`): the choice is read
    past it."""
    with lmclient.Client(thinking_url) as client:
        response = client.create("Pick one.", Literal["xylo-7", "quib-3"], **THINKING)
    assert response.value in ("xylo-7", "quib-3") and response.reasoning


def test_the_answer_follows_the_reasoning_in_the_content(unparsed_url: str) -> None:
    """llama.cpp's reasoning parser off: the content is the reasoning, its end marker, then the
    answer, which lmclient reads after the marker; `Response.reasoning` has the rest."""
    with lmclient.Client(unparsed_url) as client:
        response = client.create("Invent a person.", Bounded, **THINKING)
    assert isinstance(response.value, Bounded)
    assert response.reasoning and "</think>" not in response.reasoning
    raw = response.raw["choices"][0]["message"]
    assert "reasoning_content" not in raw and raw["content"].endswith(response.text)
