"""A constrained answer that the server's reasoning parser takes for thinking, on the real
llama.cpp server (b11434, Gemma 3 270M), with a chat template that opens ``<think>`` in the
generation prompt, as thinking models' templates do (the recorded exchange:
tests/fixtures/llamacpp-live/chat_reasoning_forced_open.*). llama.cpp applies the grammar from
the first token and its reasoning parser (``--reasoning-format``, deepseek by default) puts
everything before ``</think>`` into ``reasoning_content``: the whole answer. lmclient says so,
naming the parser, and the advice it gives (``thinking=False``) gets the value."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest

import lmclient
from scripts import llamacpp
from tests.helpers import LLAMACPP_LIVE


class Person(msgspec.Struct):
    name: str
    age: int


SMALL: lmclient.CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 64, "max_reasks": 0}
OFF: lmclient.CallParams = {**SMALL, "thinking": False}


@pytest.fixture(scope="module")
def thinking_url() -> Iterator[str]:
    template = LLAMACPP_LIVE / "chat_reasoning_forced_open.template.jinja"
    llamacpp.ensure_installed()
    # The last --chat-template-file wins over the one `LlamaServer` always passes.
    with llamacpp.start_server(
        parallel=1, extra_args=["--chat-template-file", str(template)]
    ) as server:
        yield server.base_url


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
