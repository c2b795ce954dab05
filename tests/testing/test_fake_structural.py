"""The fake's text for a structural tag (`lmclient.testing._structural`): each format it writes,
checked against what the format means (xgrammar's, as vLLM 0.32 reads it); the older
``structures`` form; the body fields it is read from; a format it cannot write."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import msgspec
import pytest

from lmclient.testing import FakeLLM
from lmclient.testing._constraints import read_constraint
from lmclient.testing._errors import UnsatisfiableError
from lmclient.testing._structural import structural_text

GRAMMAR = {"type": "grammar", "grammar": 'root ::= "x" [0-9]'}
TAG = {"type": "tag", "begin": "<t>", "content": GRAMMAR, "end": "</t>"}


def text(fmt: dict[str, Any], seed: int = 0) -> str:
    return structural_text({"type": "structural_tag", "format": fmt}, seed)


@pytest.mark.parametrize("seed", range(5))
def test_each_format(seed: int) -> None:
    assert text({"type": "const_string", "value": "hi"}, seed) == "hi"
    assert re.fullmatch(r"x[0-9]", text(GRAMMAR, seed))
    assert re.fullmatch(r"[a-c]{2}", text({"type": "regex", "pattern": "[a-c]{2}"}, seed))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    value = json.loads(text({"type": "json_schema", "json_schema": schema}, seed))
    assert isinstance(value["n"], int)
    assert re.fullmatch(r"<t>x[0-9]</t>", text(TAG, seed))
    assert (
        text({"type": "tag", "begin": "<t>", "content": GRAMMAR, "end": ["</t>", "</u>"]}, seed)[
            -4:
        ]
        == "</t>"
    )
    seq = text({"type": "sequence", "elements": [{"type": "const_string", "value": "a"}, GRAMMAR]})
    assert re.fullmatch(r"ax[0-9]", seq)
    either = text(
        {"type": "or", "elements": [{"type": "const_string", "value": "a"}, GRAMMAR]}, seed
    )
    assert either == "a" or re.fullmatch(r"x[0-9]", either)


def test_free_text_keeps_out_of_tags_and_its_bound() -> None:
    prose = text({"type": "any_text"})
    assert prose and "<" not in prose
    assert len(text({"type": "any_text", "max_chars": 3})) <= 3


def test_tags_in_free_text() -> None:
    free = text({"type": "triggered_tags", "triggers": ["<t>"], "tags": [TAG]})
    assert re.fullmatch(r"[^<]+<t>x[0-9]</t>", free)
    first = text(
        {"type": "triggered_tags", "triggers": ["<t>"], "tags": [TAG], "at_least_one": True}
    )
    assert re.fullmatch(r"<t>x[0-9]</t>", first)  # at_least_one: the text begins with a tag
    separated = text({"type": "tags_with_separator", "tags": [TAG], "separator": ","})
    assert re.fullmatch(r"<t>x[0-9]</t>", separated)


def test_repeats_write_the_fewest_allowed() -> None:
    assert text({"type": "optional", "content": GRAMMAR}) == ""
    assert text({"type": "star", "content": GRAMMAR}) == ""
    assert re.fullmatch(r"x[0-9]", text({"type": "plus", "content": GRAMMAR}))
    assert re.fullmatch(
        r"(x[0-9]){2}", text({"type": "repeat", "min": 2, "max": 4, "content": GRAMMAR})
    )


def test_the_older_structures_form() -> None:
    tag = {
        "type": "structural_tag",
        "structures": [{"begin": "<f>", "schema": {"type": "integer"}, "end": "</f>"}],
        "triggers": ["<f>"],
    }
    assert re.fullmatch(r"[^<]+<f>-?[0-9]+</f>", structural_text(tag, 0))
    first = structural_text({**tag, "at_least_one": True}, 0)
    assert re.fullmatch(r"<f>-?[0-9]+</f>", first)
    assert "<" not in structural_text({**tag, "structures": []}, 0)


def test_a_format_it_does_not_write_asks_for_a_script() -> None:
    with pytest.raises(UnsatisfiableError, match=r"'token'.*FakeLLM\.reply"):
        text({"type": "token", "token": 7})


@pytest.mark.parametrize(
    "body",
    [
        {
            "structured_outputs": {
                "structural_tag": json.dumps({"type": "structural_tag", "format": TAG})
            }
        },
        {"response_format": {"type": "structural_tag", "format": TAG}},
    ],
)
def test_read_from_vllm_and_sglang_fields(body: dict[str, Any]) -> None:
    found = read_constraint(body)
    assert found.kind == "structural_tag"
    assert found.value == {"type": "structural_tag", "format": TAG}


@pytest.mark.parametrize(
    "tag", ["not json", json.dumps({"type": "structural_tag"}), json.dumps([1])]
)
def test_a_malformed_structural_tag_is_a_400(tag: str) -> None:
    fake = FakeLLM(server="vllm")
    with fake.serve() as url:
        answer = httpx.post(
            f"{url}/chat/completions",
            json={
                "model": "m",
                "messages": [{"role": "user", "content": "x"}],
                "structured_outputs": {"structural_tag": tag},
            },
        )
    assert answer.status_code == 400
    assert "structural tag" in msgspec.json.decode(answer.content)["error"]["message"]
