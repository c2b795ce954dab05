"""Grammars the fake answers from: any GBNF (generated from its rules), Lark literal choices."""

from __future__ import annotations

import json
import re

import msgspec
import pytest

import lmclient
from lmclient._output.markers import Choice, Grammar
from lmclient._output.patterns import gbnf_alternation
from lmclient._output.types import compile_output
from lmclient.testing import FakeLLM
from lmclient.testing._grammar import gbnf_accepts, grammar_literals, grammar_sentence

JSON_GBNF = r"""
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
"""  # llama.cpp's grammars/json.gbnf


def test_a_json_grammar_is_answered_with_json() -> None:
    texts = set()
    for seed in range(10):
        with FakeLLM(seed=seed).mock():
            client = lmclient.Client("http://fake/v1", model="fake-model", dialect="llamacpp")
            text = client.generate("Q", Grammar(JSON_GBNF))
        assert isinstance(json.loads(text), dict)
        assert gbnf_accepts(JSON_GBNF, text)
        texts.add(text)
    assert len(texts) > 5


@pytest.mark.parametrize("tp", [int, float, bool, Choice(["left", "right", 'say "hi"'])])
def test_the_grammars_lmclient_sends_are_answered(tp: object) -> None:
    spec = compile_output(tp)
    grammar = spec.grammar or gbnf_alternation(spec.options)
    for seed in range(20):
        text = grammar_sentence(grammar, seed)
        assert gbnf_accepts(grammar, text)
        spec.decode(text)  # valid for the type


RECURSIVE = r"""
root  ::= "[" ws ( item ( "," ws item )* )? ws "]"
item  ::= root | [1-9] [0-9]{0,2} | "\"" [a-z]{0,5} "\""
ws    ::= [ ]{0,2}
"""


@pytest.mark.parametrize("path", ["guided_grammar", "structured_outputs"])
def test_the_fake_answers_a_recursive_grammar_as_vllm(path: str) -> None:
    field: dict[str, object] = {"guided_grammar": RECURSIVE}
    if path == "structured_outputs":
        field = {"structured_outputs": {"grammar": RECURSIVE}}
    texts = set()
    for seed in range(20):
        fake = FakeLLM(seed=seed)  # impersonates vLLM by default
        body = {"messages": [{"role": "user", "content": "x"}], **field}
        response = fake.handle("POST", "/v1/chat/completions", {}, msgspec.json.encode(body))
        assert response.status == 200, response.body
        text = msgspec.json.decode(response.body)["choices"][0]["message"]["content"]
        assert gbnf_accepts(RECURSIVE, text), text
        json.loads(text)  # this grammar's sentences are JSON arrays
        texts.add(text)
    assert any(text.count("[") > 1 for text in texts)  # nested, not only the shallowest answer


def test_fake_generates_from_a_grammar_and_names_the_ones_it_cannot() -> None:
    fake = FakeLLM()
    body = b'{"messages": [{"role": "user", "content": "x"}], "grammar": %s}'
    ok = fake.handle("POST", "/v1/chat/completions", {}, body % b'"root ::= [a-f]{8}"')
    assert re.search(rb'"content":"[a-f]{8}"', ok.body)
    refused = fake.handle("POST", "/v1/chat/completions", {}, body % b'"root ::= \\"(\\" root"')
    assert refused.status == 400
    assert b"the grammar 'root ::= \\\"(\\\" root' (the grammar has no finite" in refused.body
    assert b"FakeLLM.reply" in refused.body
    malformed = fake.handle("POST", "/v1/chat/completions", {}, body % b'"root ::= missing"')
    assert malformed.status == 400
    assert b"undefined rule 'missing'" in malformed.body


def test_lark_choices_still_answered() -> None:
    grammar = Grammar('start: "up" | "down"', syntax="lark")
    with pytest.raises(ValueError, match="expecting ::="):
        grammar_sentence(grammar.text, 0)
    assert grammar_literals(grammar.text) == ["up", "down"]
    fake = FakeLLM()
    with fake.mock():
        client = lmclient.Client("http://fake/v1", model="fake-model")
        assert client.generate("Q", grammar) in ("up", "down")


@pytest.mark.parametrize(
    ("grammar", "expected"),
    [
        ('root ::= "yes" | "no"', ["yes", "no"]),
        ('root ::= ("a" | "b" | "c")', ["a", "b", "c"]),
        ('# choice\nroot ::= "x"\n  | "y"\n', ["x", "y"]),
        ('root ::= "say \\"hi\\"" | "tab\\there"', ['say "hi"', "tab\there"]),
        ('root ::= "\\x41\\u00e9\\U0001F600" | "\\\\"', ["Aé😀", "\\"]),
        ('root ::= "con" "cat" | "b"', ["concat", "b"]),
        ('start: "lark" | "too"', ["lark", "too"]),
    ],
)
def test_literal_grammars(grammar: str, expected: list[str]) -> None:
    assert grammar_literals(grammar) == expected


@pytest.mark.parametrize(
    "grammar",
    [
        'root ::= [a-z]+',
        'root ::= "a" | word\nword ::= [a-z]+',
        'root ::= "unterminated',
        'root ::= "bad \\q escape"',
        'root ::= "\\x4"',
        'root ::= "a" |',
        "value ::= \"a\"",
        "",
    ],
)  # fmt: skip
def test_other_grammars_are_not_literal_choices(grammar: str) -> None:
    assert grammar_literals(grammar) is None
