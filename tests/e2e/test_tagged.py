"""`lmclient.Tagged` against the real servers (Gemma 3 270M): prose with typed regions, decoded
(issue 40, item 3).

On vLLM 0.32 lmclient sends a structural tag (``structured_outputs.structural_tag``: the prose
as xgrammar's ``any_text`` up to the open tag, each region's content in the compact grammar of
its type); on llama.cpp the same language as lmclient's GBNF (``grammar``: the prose as rules
that cannot spell the open tag). The hook asserts which reached each server. What the model
writes in its prose is its own (a 270M model); the regions are lmclient's: present as many times
as the type says, each validated. Temperature 0 and short prompts that show the format keep each
answer short; ``max_tokens`` bounds the prose.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
import pytest

import lmclient
from lmclient import CallParams, Tagged
from tests.e2e.turns import Sent

# The first vLLM test also waits for the server to start: not part of the bound.
pytestmark = pytest.mark.timeout(300, func_only=True)

SMALL: CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 96}


class City(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(max_length=30)]
    country: Annotated[str, msgspec.Meta(max_length=30)]


ANSWER = (
    "Which city is the capital of France? Think in one short sentence, then answer in answer "
    'tags, like: Berlin is in Germany. <answer>{"name":"Berlin","country":"Germany"}</answer>'
)
YES_NO = (
    "Is the sky blue? Say why in a few words, then answer yes or no in answer tags, like: "
    "It rains. <answer>no</answer>"
)


def structural_tag(body: dict[str, Any]) -> Any:
    return msgspec.json.decode(body["structured_outputs"]["structural_tag"])


def sent_body(sent: Sent) -> dict[str, Any]:
    [body] = [b for b in sent.bodies if b is not None]
    return body


def assert_answer(text: lmclient.TaggedText[Any], kind: type) -> None:
    assert len(text.regions) == 1, text.text
    region = text.regions[0]
    assert isinstance(region.value, kind)
    assert text.text[region.start - len("<answer>") : region.start] == "<answer>"
    assert text.text.endswith("</answer>"), text.text  # at_most=1: the text ends with it
    assert text.value is region.value


def test_vllm_struct_region_by_structural_tag(vllm_url: str) -> None:
    sent = Sent(structural_tag)
    with lmclient.Client(vllm_url, hooks=[sent], hook_content=True) as client:
        text = client.generate(ANSWER, Tagged(City), **SMALL)
    assert_answer(text, City)
    tag = structural_tag(sent_body(sent))
    assert tag["type"] == "structural_tag" and tag["format"]["type"] == "sequence"
    assert "grammar" not in sent_body(sent)["structured_outputs"]


def test_vllm_choice_region_streamed(vllm_url: str) -> None:
    with (
        lmclient.Client(vllm_url) as client,
        client.stream(YES_NO, Tagged(Literal["yes", "no"]), **SMALL) as stream,
    ):
        deltas = "".join(stream)
        text = stream.value
    assert deltas == text.text
    assert_answer(text, str)
    assert text.value in ("yes", "no")


def test_llamacpp_struct_region_by_grammar(base_url: str) -> None:
    sent = Sent(lambda body: body["grammar"])
    with lmclient.Client(base_url, hooks=[sent], hook_content=True) as client:
        text = client.generate(ANSWER, Tagged(City), **SMALL)
    assert_answer(text, City)
    grammar = sent_body(sent)["grammar"]
    assert grammar.startswith("root ::= region") and "prose-7 ::=" in grammar


def test_llamacpp_regions_of_a_list(base_url: str) -> None:
    """Several regions of one type, prose between them: at least two, at most three."""
    prompt = (
        "Name two colours, each in a colour tag, like: I like <colour>red</colour> and "
        "<colour>green</colour>."
    )
    with lmclient.Client(base_url) as client:
        text = client.generate(
            prompt,
            Tagged(Literal["red", "green", "blue"], "colour", at_least=2, at_most=3),
            **SMALL,
        )
    assert 2 <= len(text.regions) <= 3, text.text
    assert all(value in ("red", "green", "blue") for value in text.values)
