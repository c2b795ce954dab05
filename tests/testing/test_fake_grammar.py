"""Grammars the fake answers from: GBNF as a regex (recursion unrolled), Lark literal choices."""

from __future__ import annotations

import json
import re

import pytest

import lmclient
from lmclient._markers import Choice, Grammar
from lmclient._patterns import gbnf_alternation
from lmclient._types import compile_output
from lmclient.testing import FakeLLM
from lmclient.testing._grammar import grammar_literals, grammar_regex
from lmclient.testing._regex_gen import regex_instance

# (grammar, strings in its language, strings outside it)
LANGUAGES: list[tuple[str, list[str], list[str]]] = [
    ('root ::= "yes" | "no"', ["yes", "no"], ["", "yesno", "Yes"]),
    ('root ::= "a" "b"? "c"*', ["a", "ab", "acc", "abccc"], ["b", "abb", "ca"]),
    ('root ::= [0-9]+ ("." [0-9]{2})?', ["7", "12.50"], [".50", "1.5", "1.500"]),
    ('root ::= [a-z]{2,3} "-" [0-9]{,2} "!"{3,}', ["ab-!!!", "abc-42!!!!"], ["ab-123!!!", "a-!!!"]),
    ('root ::= [^"\\\\]+', ["hello world", "a'b"], ['a"b', "a\\b", ""]),
    ('root ::= [\\]\\[] [a-c-]', ["]a", "[-"], ["]d", "a]"]),
    ('root ::= "\\x41" "\\u00e9" "\\t"', ["Aé\t"], ["A\\u00e9\t"]),
    ('root ::= .', ["x", "\n", "é"], ["", "ab"]),
    (
        '# a date\nroot ::= year "-" month\nyear ::= [12] [0-9]{3}\n'
        'month ::= "0" [1-9] | "1" [0-2]\n',
        ["2024-01", "1999-12"], ["2024-13", "3024-01", "2024-1"],
    ),
    (
        'root ::= (item ",")* item\nitem ::= "x" | "y"',
        ["x", "x,y", "y,y,x"], ["", "x,", ",x"],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("grammar", "inside", "outside"), LANGUAGES)
def test_regex_has_the_grammars_language(
    grammar: str, inside: list[str], outside: list[str]
) -> None:
    pattern = grammar_regex(grammar)
    assert pattern is not None
    for text in inside:
        assert re.fullmatch(pattern, text), (pattern, text)
    for text in outside:
        assert not re.fullmatch(pattern, text), (pattern, text)


@pytest.mark.parametrize(
    "grammar",
    [
        'root ::= "(" root ")"',  # recursion that never ends: no sentence at all
        'root ::= "a" root+',
        'value ::= "a"',  # no root
        'root ::= missing',
        'root ::= "a"\nroot ::= "b"',
        'root ::= "a" | (',
        'root ::= ("a"',
        'root ::= "a" )',
        'root ::= "bad \\q escape"',
        'root ::= [\\q]',
        'root ::= []',
        'root ::= <[1234]>',  # llama.cpp token references
        'stray "text"\nroot ::= "a"',
        'start: "a" | "b"',  # Lark
        "",
    ],
)  # fmt: skip
def test_not_regular_or_not_gbnf(grammar: str) -> None:
    assert grammar_regex(grammar) is None


# (recursive grammar, sentences nested at most MAX_NESTING deep, strings its regex must not match:
# outside the language, or nested deeper)
RECURSIVE: list[tuple[str, list[str], list[str]]] = [
    ('root ::= "(" root ")" | ""', ["", "()", "(())"], ["(", "())", "(()", "((()))"]),
    ('root ::= a\na ::= "x" b\nb ::= a | "y"', ["xy", "xxy", "xxxy"], ["y", "x", "xyx"]),
    ('root ::= "a" root? "b"', ["ab", "aabb", "aaabbb"], ["", "aab", "ba"]),
    ('root ::= "[" (root ("," root)*)? "]"', ["[]", "[[],[[]]]"], ["[", "[,]", "[[]"]),
    ('root ::= "<" root{0,2} ">"', ["<>", "<<><>>"], ["<", "<<>"]),
]  # fmt: skip


@pytest.mark.parametrize(("grammar", "inside", "outside"), RECURSIVE)
def test_recursion_is_unrolled_to_a_part_of_the_language(
    grammar: str, inside: list[str], outside: list[str]
) -> None:
    from lmclient.testing._grammar import MAX_NESTING

    assert MAX_NESTING == 2  # `inside` nests a rule in itself up to twice, `outside` deeper
    pattern = grammar_regex(grammar)
    assert pattern is not None
    for text in inside:
        assert re.fullmatch(pattern, text), (pattern, text)
    for text in outside:
        assert not re.fullmatch(pattern, text), (pattern, text)
    for seed in range(10):
        assert re.fullmatch(pattern, regex_instance(pattern, seed=seed))


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
    fake = FakeLLM()
    with fake.mock():
        client = lmclient.Client("http://fake/v1", model="fake-model", dialect="llamacpp")
        for seed in range(10):
            text = client.generate("Q", Grammar(JSON_GBNF), seed=seed)
            assert isinstance(json.loads(text), dict)


@pytest.mark.parametrize("tp", [int, float, bool, Choice(["left", "right", 'say "hi"'])])
def test_the_grammars_lmclient_sends_are_answered(tp: object) -> None:
    spec = compile_output(tp)
    grammar = spec.grammar or gbnf_alternation(spec.options)
    pattern = grammar_regex(grammar)
    assert pattern is not None
    for seed in range(20):
        spec.decode(regex_instance(pattern, seed=seed))  # valid for the type


def test_fake_generates_from_a_grammar_and_names_the_ones_it_cannot() -> None:
    fake = FakeLLM()
    body = b'{"messages": [{"role": "user", "content": "x"}], "grammar": %s}'
    ok = fake.handle("POST", "/v1/chat/completions", {}, body % b'"root ::= [a-f]{8}"')
    assert re.search(rb'"content":"[a-f]{8}"', ok.body)
    refused = fake.handle("POST", "/v1/chat/completions", {}, body % b'"root ::= \\"(\\" root"')
    assert refused.status == 400
    assert b"the grammar 'root ::= \\\"(\\\" root'" in refused.body
    assert b"FakeLLM.reply" in refused.body


def test_lark_choices_still_answered() -> None:
    grammar = Grammar('start: "up" | "down"', syntax="lark")
    assert grammar_regex(grammar.text) is None
    assert grammar_literals(grammar.text) == ["up", "down"]


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
