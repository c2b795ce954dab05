"""`lmclient.Tagged`: prose with typed regions (issue 40, item 3). The grammar's language (held
against a direct reading of what it should accept), the structural tag's shape, the decoder,
the marker's checks, the fields per dialect, and calls as users make them: respx, the fake."""

from __future__ import annotations

import re
from typing import Any, Literal

import httpx
import msgspec
import pytest
import respx

import lmclient
from lmclient import NoValueError, Tagged, UnsupportedConstraintError, ValidationError
from lmclient._dialects import DIALECTS
from lmclient._output.types import compile_output
from lmclient.testing import FakeLLM
from lmclient.testing._grammar import gbnf_accepts

BASE = "http://llm.test/v1"


class City(msgspec.Struct):
    name: str
    country: str


def chat_body(content: str, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14},
    }


# -- the grammar of a tagged text ------------------------------------------------------------

TEXTS = [
    "",
    "hi",
    "hi <answer>1</answer>",
    "<answer>1</answer>",
    "x<answer>1</answer> bye",
    "a<answer>1</answer>b<answer>2</answer>",
    "a<answer> 1</answer>",
    "x <answer>1</answer>\n",
]


@pytest.mark.parametrize(
    ("at_least", "at_most", "accepted"),
    [
        (1, 1, [0, 0, 1, 1, 0, 0, 0, 0]),
        (0, 1, [1, 1, 1, 1, 0, 0, 0, 0]),
        (1, None, [0, 0, 1, 1, 1, 1, 0, 1]),
        (0, None, [1, 1, 1, 1, 1, 1, 0, 1]),
        (1, 2, [0, 0, 1, 1, 1, 1, 0, 1]),
        (2, 2, [0, 0, 0, 0, 0, 1, 0, 0]),
    ],
)
def test_grammar_counts_regions(at_least: int, at_most: int | None, accepted: list[int]) -> None:
    """The table xgrammar gave for the structural tag of the same counts (vLLM 0.32's xgrammar
    0.2.8, `Grammar.from_structural_tag`): both forms are one language. A text that has its
    ``at_most`` regions ends with the last; one with room for more may go on."""
    spec = compile_output(Tagged(int, at_least=at_least, at_most=at_most))
    assert spec.grammar is not None
    assert [int(gbnf_accepts(spec.grammar, text)) for text in TEXTS] == accepted


def test_grammar_holds_the_region_in_the_compact_grammar() -> None:
    grammar = compile_output(Tagged(City)).grammar
    assert grammar is not None
    assert gbnf_accepts(grammar, 'So: <answer>{"name":"Paris","country":"France"}</answer>')
    assert not gbnf_accepts(grammar, 'So: <answer>{"name": "Paris","country":"France"}</answer>')
    assert not gbnf_accepts(grammar, 'So: <answer>{"name":"Paris"}</answer>')


def test_a_text_region_is_any_text_without_its_close_tag() -> None:
    grammar = compile_output(Tagged(str, "quote")).grammar
    assert grammar is not None
    assert gbnf_accepts(grammar, "He said <quote>a <b> c</quote>")
    assert not gbnf_accepts(grammar, "He said <quote>a</quote> b</quote>")


def test_structural_tag_of_one_region() -> None:
    spec = compile_output(Tagged(Literal["yes", "no"]))
    assert spec.structural == {
        "type": "sequence",
        "elements": [
            {"type": "tag", "begin": "", "content": {"type": "any_text"}, "end": "<answer>"},
            {"type": "grammar", "grammar": 'root ::= "yes" | "no"\n'},
            {"type": "const_string", "value": "</answer>"},
        ],
    }


def test_structural_tag_of_any_number_of_regions() -> None:
    spec = compile_output(Tagged(str, "q", at_least=0, at_most=None))
    assert spec.structural == {
        "type": "triggered_tags",
        "triggers": ["<q>"],
        "tags": [{"type": "tag", "begin": "<q>", "content": {"type": "any_text"}, "end": "</q>"}],
    }


def test_structural_tag_of_optional_regions_nests() -> None:
    fmt = compile_output(Tagged(int, at_least=1, at_most=3)).structural
    assert fmt is not None and fmt["type"] == "sequence"
    _first, rest = fmt["elements"]
    assert rest["type"] == "or" and rest["elements"][0]["type"] == "any_text"
    assert rest["elements"][0]["excludes"] == ["<answer>"]
    inner = rest["elements"][1]["elements"][1]
    assert inner["type"] == "or" and len(rest["elements"][1]["elements"]) == 2
    assert len(inner["elements"][1]["elements"]) == 1  # the last optional region: no more


def test_grammar_and_structural_tag_are_made_once_per_type() -> None:
    assert compile_output(Tagged(City)) is compile_output(Tagged(City))
    assert compile_output(Tagged(City)) is not compile_output(Tagged(City, "city"))


# -- decoding ---------------------------------------------------------------------------------


def decode(output_type: Any, text: str) -> Any:
    return compile_output(output_type).decode(text)


def test_decode_reads_regions_and_prose() -> None:
    text = 'Paris is in France. <answer>{"name":"Paris","country":"France"}</answer>'
    got = decode(Tagged(City), text)
    assert got.value == City("Paris", "France")
    assert got.values == [got.value]
    assert got.prose == "Paris is in France. "
    [region] = got.regions
    assert text[region.start : region.end] == '{"name":"Paris","country":"France"}'
    assert got.text == text and got.tag == "answer"


def test_a_json_string_may_hold_the_close_tag() -> None:
    """The grammar ends a value where its JSON is whole, not at the first close tag."""
    text = '<answer>{"name":"a</answer>b","country":"c"}</answer>'
    assert decode(Tagged(City), text).value == City("a</answer>b", "c")


def test_several_regions_in_order() -> None:
    got = decode(
        Tagged(int, "n", at_least=0, at_most=None), "one <n>1</n>, two <n>2</n> and <n>3</n>."
    )
    assert got.values == [1, 2, 3]
    assert got.value == 3
    assert got.prose == "one , two  and ."


def test_no_region_where_none_is_allowed() -> None:
    got = decode(Tagged(int, at_least=0), "no answer")
    assert got.regions == () and got.prose == "no answer"
    with pytest.raises(NoValueError, match=r"no <answer> region .*at_least=1"):
        got.value  # noqa: B018


@pytest.mark.parametrize(
    ("output_type", "text", "detail"),
    [
        (
            Tagged(int),
            "just prose",
            "the text has 0 <answer> regions, where the output type needs 1",
        ),
        (Tagged(int, at_least=2, at_most=None), "<answer>1</answer>", "needs at least 2"),
        (
            Tagged(int, at_most=2),
            "<answer>1</answer><answer>2</answer><answer>3</answer>",
            "has 3 <answer> regions, where the output type needs 1 to 2",
        ),
        (Tagged(int), "x <answer>12", "<answer> region 0 is not closed by </answer>"),
        (Tagged(City), '<answer>{"name":1}</answer>', "<answer> region 0: Expected `str`"),
        (Tagged(Literal["yes", "no"]), "<answer>maybe</answer>", "region 0: expected one of"),
    ],
)
def test_decode_refuses(output_type: Any, text: str, detail: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(detail)) as info:
        decode(output_type, text)
    assert info.value.text == text and info.value.output_type == output_type


# -- the marker ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tag": ""}, "a Tagged tag is a name"),
        ({"tag": "a b"}, "a Tagged tag is a name"),
        ({"tag": "<answer>"}, "a Tagged tag is a name"),
        ({"tag": "1st"}, "a Tagged tag is a name"),
        ({"at_least": -1}, "at_least is an int >= 0"),
        ({"at_least": True}, "at_least is an int >= 0"),
        ({"at_most": 0, "at_least": 0}, "at_most is None or an int >= max(at_least, 1)"),
        ({"at_most": 1, "at_least": 2}, "at_most is None or an int >= max(at_least, 1)"),
        ({"at_most": 70}, "at most 64 optional regions"),
    ],
)
def test_marker_refuses_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        Tagged(int, **kwargs)


@pytest.mark.parametrize(
    "inner", [lmclient.Regex("a+"), lmclient.Grammar('root ::= "a"'), Tagged(int)]
)
def test_a_region_holds_json_a_choice_or_text(inner: Any) -> None:
    with pytest.raises(TypeError, match="a Tagged region holds a JSON type"):
        compile_output(Tagged(inner))


def test_marker_repr_and_equality() -> None:
    assert repr(Tagged(City)) == "Tagged(City, 'answer', at_least=1, at_most=1)"
    assert Tagged(City) == Tagged(City) and hash(Tagged(City)) == hash(Tagged(City))
    assert Tagged(City) != Tagged(City, at_most=None)


# -- fields per dialect -----------------------------------------------------------------------


def fields_of(dialect: str, output_type: Any) -> dict[str, Any]:
    return DIALECTS[dialect].plan(compile_output(output_type), "chat").fields


def test_vllm_sends_the_structural_tag_as_a_json_string() -> None:
    fields = fields_of("vllm", Tagged(City))
    tag = fields["structured_outputs"]["structural_tag"]
    assert isinstance(tag, str) and list(fields["structured_outputs"]) == ["structural_tag"]
    assert msgspec.json.decode(tag) == {
        "type": "structural_tag",
        "format": compile_output(Tagged(City)).structural,
    }


def test_sglang_sends_the_structural_tag_as_response_format() -> None:
    assert fields_of("sglang", Tagged(City)) == {
        "response_format": {
            "type": "structural_tag",
            "format": compile_output(Tagged(City)).structural,
        }
    }


@pytest.mark.parametrize(
    ("dialect", "field"), [("llamacpp", "grammar"), ("vllm-guided", "guided_grammar")]
)
def test_grammar_servers_get_the_gbnf(dialect: str, field: str) -> None:
    assert fields_of(dialect, Tagged(City)) == {field: compile_output(Tagged(City)).grammar}


@pytest.mark.parametrize(
    "dialect", ["openai", "generic", "tgi", "ollama", "lmstudio", "sglang-gateway"]
)
def test_other_dialects_refuse_before_any_request(dialect: str) -> None:
    refused = pytest.raises(UnsupportedConstraintError, match="cannot take a Tagged output")
    with respx.mock(assert_all_called=False) as mock:
        with lmclient.Client(BASE, model="m", dialect=dialect) as client, refused:
            client.generate("x", Tagged(City))
        assert not mock.calls


def test_a_tagged_answer_is_watched_for_runaways() -> None:
    """The prose is unbounded: the plan has no token budget, so the call is watched."""
    plan = DIALECTS["llamacpp"].plan(compile_output(Tagged(Literal["a"])), "chat")
    assert plan.budget is None


# -- as users call it ------------------------------------------------------------------------


def test_respx_route_gives_typed_regions() -> None:
    """The user's test: the one route mocked; the call is watched (the prose is unbounded), and
    a JSON body answers it all the same."""
    content = 'Paris. <answer>{"name":"Paris","country":"France"}</answer>'
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(f"{BASE}/chat/completions").mock(
            return_value=httpx.Response(200, json=chat_body(content))
        )
        with lmclient.Client(BASE, model="m", dialect="vllm") as client:
            response = client.create("Capital of France?", Tagged(City))
    assert response.value.value == City("Paris", "France")
    assert response.text == content
    sent = msgspec.json.decode(route.calls.last.request.content)
    assert "structural_tag" in sent["structured_outputs"]


@pytest.mark.parametrize("server", ["vllm", "sglang", "llamacpp"])
def test_fake_answers_a_tagged_type(server: str) -> None:
    fake = FakeLLM(server=server)
    with fake.serve() as url, lmclient.Client(url) as client:
        text = client.generate("Capital of France?", Tagged(City))
        several = client.generate("Colours?", Tagged(Literal["red", "blue"], "c", at_most=None))
    assert isinstance(text.value, City)
    assert text.text.endswith("</answer>")
    assert several.values and set(several.values) <= {"red", "blue"}
    fake.assert_called(times=1, with_output_type=Tagged(City))
    fake.assert_called(times=1, with_output_type=Tagged(Literal["red", "blue"], "c", at_most=None))


async def test_async_client_and_the_fake() -> None:
    fake = FakeLLM(server="vllm")
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            text = await client.generate("x", Tagged(int, "n", at_least=2, at_most=2))
    assert len(text.values) == 2 and all(isinstance(v, int) for v in text.values)


# What Gemma 3 270M wrote on the real llama.cpp, asked at temperature 0.7 to think in one sentence
# and answer in <answer> tags: prose to the end of its 4,096-token context, 104 s, no tag.
RAMBLE = (
    "In 1500, the people of Berlin were living in a time of peace, with the population of "
    "45,000. What was the population of Berlin in 1500?\nWhich city is the capital of France? "
)


def cut(content: str) -> lmclient.TruncatedError:
    with respx.mock(assert_all_called=True) as mock:
        mock.post(f"{BASE}/chat/completions").mock(
            return_value=httpx.Response(200, json=chat_body(content, "length"))
        )
        with (
            lmclient.Client(BASE, model="m", dialect="llamacpp") as client,
            pytest.raises(lmclient.TruncatedError) as info,
        ):
            client.generate("Capital of France?", Tagged(City))
    return info.value


def test_prose_cut_before_its_region_is_not_told_to_raise_max_tokens() -> None:
    """Found on the real server: "raise max_tokens" cannot help a model that never began its
    answer; the error says what can."""
    message = str(cut(RAMBLE))
    assert "raise max_tokens" not in message
    assert f"wrote {len(RAMBLE)} characters of prose and never began a <answer> region" in message
    assert "ask the prompt for a short reasoning and the answer in <answer> tags" in message


def test_a_region_cut_is_told_to_raise_max_tokens() -> None:
    assert str(cut('So: <answer>{"name":"Par')).count("raise max_tokens") == 1
