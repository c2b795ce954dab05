"""The GBNF recognizer and sentence generator, against llama.cpp's own grammar test cases (an
outside oracle), against Python's json and re modules, and against each other."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmclient.testing import _gbnf_match
from lmclient.testing._gbnf_match import MAX_TEXT
from lmclient.testing._grammar import gbnf_accepts, grammar_sentence

FIXTURE = Path(__file__).parent.parent / "fixtures" / "gbnf" / "llamacpp_cases.json"
LLAMACPP: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = LLAMACPP["cases"]


def test_the_fixture_is_llamacpps_and_big_enough() -> None:
    assert re.search(r"test-grammar-integration\.cpp at commit [0-9a-f]{40}", LLAMACPP["source"])
    assert len(CASES) >= 30
    assert sum(len(case["passing"]) + len(case["failing"]) for case in CASES) >= 200


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_agrees_with_llamacpp(case: dict[str, Any]) -> None:
    for text in case["passing"]:
        assert gbnf_accepts(case["grammar"], text), text
    for text in case["failing"]:
        assert not gbnf_accepts(case["grammar"], text), text


GENERATED = [case for case in CASES if case["name"] != "hang"]  # "hang" has no strings to check


@pytest.mark.parametrize("case", GENERATED, ids=[case["name"] for case in GENERATED])
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_generated_sentences_are_accepted(case: dict[str, Any], seed: int) -> None:
    sentence = grammar_sentence(case["grammar"], seed)
    assert gbnf_accepts(case["grammar"], sentence), sentence
    assert grammar_sentence(case["grammar"], seed) == sentence  # the same for the same seed


# (grammar, in its language, outside it): the syntax, one feature at a time
SYNTAX: list[tuple[str, list[str], list[str]]] = [
    ('root ::= "yes" | "no"', ["yes", "no"], ["", "yesno", "Yes"]),
    ('root ::= "a" "b"? "c"*', ["a", "ab", "acc", "abccc"], ["b", "abb", "ca"]),
    ('root ::= [0-9]+ ("." [0-9]{2})?', ["7", "12.50"], [".50", "1.5", "1.500"]),
    ('root ::= [a-z]{2,3} "-" [0-9]{0,2} "!"{3,}', ["ab-!!!", "abc-42!!!"], ["ab-123!!!", "a-!!"]),
    ('root ::= [^"\\\\]+', ["hello world", "a'b"], ['a"b', "a\\b", ""]),
    ('root ::= [\\]\\[] [a-c-]', ["]a", "[-"], ["]d", "a]"]),
    ('root ::= [\\-x] [a\\-c]', ["-a", "x-", "xc"], ["xb"]),
    ('root ::= "\\x41" "\\u00e9" "\\U0001F600"', ["Aé😀"], ["A", "Aé"]),
    ('root ::= "\\t\\n\\r\\\\\\"\\[\\]"', ['\t\n\r\\"[]'], ["\t"]),
    ('root ::= [\\x00-\\x1f\\u00e0-\\u00ff]', ["\x00", "\x1f", "é"], [" ", "ā"]),
    ('root ::= .', ["x", "\n", "é", "😀"], ["", "ab"]),
    ('root ::= "x"{3}', ["xxx"], ["xx", "xxxx"]),
    ('root ::= "x"{0,2001}', ["", "x" * 2500], ["y"]),  # over 2000: no maximum, as in llama.cpp
    ('root ::= "ab"{ 2 , 3 }', ["abab", "ababab"], ["ab", "abababab"]),
    ('root ::= ""', [""], ["a"]),
    (
        '# a date\nroot ::= year "-" month  # trailing comment\nyear ::= [12] [0-9]{3}\n'
        'month ::= "0" [1-9] | "1" [0-2]\n',
        ["2024-01", "1999-12"], ["2024-13", "3024-01", "2024-1"],
    ),
    ('root ::= (item ",")* item\nitem ::= "x" | "y"', ["x", "x,y", "y,y,x"], ["", "x,", ",x"]),
    ('root ::= (\n  "a" # inside parentheses a rule goes on\n  | "b"\n)\n', ["a", "b"], ["ab"]),
    ('root ::=\n  "a" |\n  "b"', ["a", "b"], [""]),
    ('root ::= x\r\nx ::= "a"\r\n', ["a"], [""]),
    ('Root-2 ::= "r"\nroot ::= Root-2 Root-2', ["rr"], ["r"]),
]  # fmt: skip


@pytest.mark.parametrize(("grammar", "inside", "outside"), SYNTAX)
def test_syntax(grammar: str, inside: list[str], outside: list[str]) -> None:
    for text in inside:
        assert gbnf_accepts(grammar, text), text
    for text in outside:
        assert not gbnf_accepts(grammar, text), text


@pytest.mark.parametrize(
    ("grammar", "message"),
    [
        (  # llama.cpp's test_failure_missing_root
            'rot ::= expr\nexpr ::= term ("+" term)*\nterm ::= number\nnumber ::= [0-9]+',
            "no 'root' rule",
        ),
        (  # llama.cpp's test_failure_missing_reference
            'root ::= expr\nexpr ::= term ("+" term)*\nterm ::= numero\nnumber ::= [0-9]+',
            "undefined rule 'numero'",
        ),
        ('root ::= "a"\nroot ::= "b"', "defined twice"),
        ('root ::= "a"\n  | "b"', "expecting a rule name"),  # a newline ends a rule
        ('root ::= "a" | (', "expecting ')'"),
        ('root ::= ("a"', "expecting ')'"),
        ('root ::= "a" )', "expecting a newline"),
        ('root ::= "bad \\q escape"', "bad escape"),
        ('root ::= "\\x4"', "bad escape"),
        ('root ::= [\\q]', "bad escape"),
        ('root ::= []', "empty character class"),
        ('root ::= [z-a]', "ends before it starts"),
        ('root ::= "unterminated', "unterminated string"),
        ('root ::= [abc', "unterminated character class"),
        ('root ::= *', "expecting an item"),
        ('root ::= "a"{3,2}', "maximum below its minimum"),
        ('root ::= "a"{2001}', "more than 2000"),
        ('root ::= "a"{x}', "expecting an integer"),
        ('root ::= "a"{2', "expecting '}'"),
        ('root ::= "a"{,2}', "write {0,n}"),
        ('root ::= <[1234]>', "token references"),
        ('root ::= !<[1]>', "token references"),
        ('stray "text"\nroot ::= "a"', "expecting ::="),
        ("root = 'a'", "expecting ::="),
        ('start: "a" | "b"', "expecting ::="),  # Lark
        ("", "no 'root' rule"),
    ],
)  # fmt: skip
def test_malformed_grammars_are_refused_saying_why(grammar: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        gbnf_accepts(grammar, "a")
    with pytest.raises(ValueError, match=re.escape(message)):
        grammar_sentence(grammar, 0)


def test_a_grammar_without_a_finite_sentence() -> None:
    assert not gbnf_accepts('root ::= "(" root ")"', "()")
    with pytest.raises(ValueError, match="recursion never ends"):
        grammar_sentence('root ::= "(" root ")"', 0)


EXPRESSION = (
    'root ::= expr\nexpr ::= expr ("+" | "-") term | term\nterm ::= term "*" atom | atom\n'
    'atom ::= [0-9] | "(" expr ")"'
)

# llama.cpp's test_failure_left_recursion grammars: llama.cpp refuses them, this reads them
LEFT_RECURSIVE: list[tuple[str, list[str], list[str]]] = [
    ('root ::= "a" | root "a"', ["a", "aaaa"], ["", "b", "ab"]),
    ('root ::= asdf\nasdf ::= "a" | asdf "a"', ["a", "aaa"], ["", "aab"]),
    (
        'root ::= asdf\nasdf ::= "a" | foo "b"\nfoo ::= "c" | asdf "d" | "e"',
        ["a", "cb", "eb", "adb", "cbdb", "adbdb"], ["", "ad", "ab", "cbd"],
    ),
    (
        'root ::= asdf\nasdf ::= "a" | foo "b"\nfoo ::= "c" | empty asdf "d" | "e"\n'
        'empty ::= "blah" | ',
        ["a", "adb", "blahadb", "blahcbdb", "eb"], ["blah", "ad", "blahab"],
    ),
    (EXPRESSION, ["1", "1+2*3-4", "(1+2)*3", "((1))"], ["", "1+", "(1", "1**2", "+1"]),
    (  # left recursion through a repetition (answers checked with xgrammar)
        'root ::= (x "a")+ | "b"\nx ::= root | ""',
        ["a", "b", "ba", "aaa", "abaa", "baba"], ["", "ab", "bb", "aab", "abb"],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("grammar", "inside", "outside"), LEFT_RECURSIVE)
def test_left_recursion(grammar: str, inside: list[str], outside: list[str]) -> None:
    for text in inside:
        assert gbnf_accepts(grammar, text), text
    for text in outside:
        assert not gbnf_accepts(grammar, text), text
    for seed in range(10):
        assert gbnf_accepts(grammar, grammar_sentence(grammar, seed))


EXPRESSION_RE = re.compile(r"[0-9](?:[-+*][0-9])*")  # the same language without parentheses


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="12+-*", max_size=12))
def test_left_recursion_agrees_with_a_regex(text: str) -> None:
    assert gbnf_accepts(EXPRESSION, text) == bool(EXPRESSION_RE.fullmatch(text))


BALANCED = 'root ::= ("(" root ")")*'


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += 1 if ch == "(" else -1
        if depth < 0:
            return False
    return depth == 0


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="()", max_size=16))
def test_recursion_agrees_with_counting(text: str) -> None:
    assert gbnf_accepts(BALANCED, text) == _balanced(text)


# RFC 8259 JSON: what Python's json module reads (with NaN and Infinity refused)
JSON = r"""
root    ::= ws value ws
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( ws "," ws member )* )? ws "}"
member  ::= string ws ":" ws value
array   ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string  ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \t\n\r]*
"""

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)  # fmt: skip


def _is_json(text: str) -> bool:
    def refuse(constant: str) -> None:
        raise ValueError(constant)

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError:
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.sampled_from([None, 0, 2]), st.booleans())
def test_json_texts_are_accepted(value: Any, indent: int | None, ascii_only: bool) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    if len(text) <= 300:
        assert gbnf_accepts(JSON, text), text


@settings(max_examples=300, deadline=None)
@given(
    JSON_VALUES,
    st.lists(st.tuples(st.integers(0, 300), st.sampled_from('x0-.e,:"\\[]{} ')), max_size=3),
)
def test_broken_json_is_refused_exactly_when_json_refuses_it(
    value: Any, edits: list[tuple[int, str]]
) -> None:  # fmt: skip
    text = json.dumps(value)
    for at, ch in edits:  # replace, or insert at the end
        at %= len(text) + 1
        text = text[:at] + ch + text[at + 1 :]
    assert gbnf_accepts(JSON, text) == _is_json(text), text


def test_json_sentences_are_json() -> None:
    for seed in range(40):
        text = grammar_sentence(JSON, seed)
        assert _is_json(text), text
        assert gbnf_accepts(JSON, text)


def test_deep_nesting_and_long_texts() -> None:
    depth = 2000
    nested = "[" * depth + "]" * depth
    assert gbnf_accepts(JSON, nested)
    assert not gbnf_accepts(JSON, nested[:-1])
    assert gbnf_accepts("root ::= [a-z ]*", "ab " * (MAX_TEXT // 3))
    with pytest.raises(ValueError, match="over 10000 characters"):
        gbnf_accepts("root ::= [a-z ]*", "a" * (MAX_TEXT + 1))


def test_work_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    hang = next(case for case in CASES if case["name"] == "hang")  # once hung llama.cpp
    assert gbnf_accepts(hang["grammar"], "a" * 40)
    monkeypatch.setattr(_gbnf_match, "MAX_WORK", 10_000)
    with pytest.raises(ValueError, match="too ambiguous to match this text: over 10000 steps"):
        gbnf_accepts(hang["grammar"], "a" * 100)


@pytest.mark.parametrize(
    ("grammar", "message"),
    [
        ('root ::= (("x"{999}){999}){999}', "take over 1000000 steps"),
        ("root ::= r0\n" + "".join(f"r{i} ::= r{i + 1}\n" for i in range(3000)) + 'r3000 ::= "x"',
         "nests its rules too deeply"),
    ],
)  # fmt: skip
def test_generation_is_bounded(grammar: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        grammar_sentence(grammar, 0)


def test_sentences_of_recursive_grammars_stay_small() -> None:
    """Recursion and repetition are bounded: even a grammar that multiplies at every level
    gives sentences of a sensible size."""
    grammar = 'root ::= node\nnode ::= "(" node* ")" | "x"'
    sizes = [len(grammar_sentence(grammar, seed)) for seed in range(60)]
    assert max(sizes) < 20_000
    assert len(set(sizes)) > 5  # and they vary (short ones likelier, as a model's)
