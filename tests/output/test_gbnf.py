"""The compact grammar compiler (`lmclient._output.gbnf`): the grammars it writes for lmclient's
real schemas, read back as text by `lmclient.testing._grammar.gbnf_accepts` (is it a sentence?) and
`tests.gbnf_match` (the rules, the shortest and longest sentences).

Three properties, over many output types: every value msgspec encodes is a sentence; no sentence
is rejected by ``msgspec.json.decode`` (but for the constraints the module lists as left to
validation); and ``shortest``/``longest`` are the byte lengths of real extreme sentences.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import json
import logging
import re
from typing import Annotated, Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmclient._output.gbnf import CompactGrammar, compact_grammar
from lmclient._output.gbnf_ir import render, text_until
from lmclient._output.types import compile_output
from lmclient.testing._grammar import gbnf_accepts
from tests.gbnf_cases import CASES, JSON_VALUES, Pet, compiled, decoder
from tests.gbnf_match import Grammar

# ------------------------------------------------------------------------------- examples

PET_GRAMMAR = (
    r'root ::= "{\"name\":\"" char{0,20} "\",\"species\":" ("\"cat\"" | "\"dog\"")'
    r' ",\"age\":" ([0-9] | [12] [0-9] | "30") "}"'
    "\n"
)
CHAR_RULE = (
    r'char ::= [^\u0000-\u001F\"\\] | "\\" ([\"/\\bfnrt] | "u" ([0-9A-CEFa-cef] [0-9A-Fa-f]{3}'
    r' | [Dd] [0-7] [0-9A-Fa-f]{2} | [Dd] [89ABab] [0-9A-Fa-f]{2} "\\u" [Dd] [C-Fc-f]'
    r" [0-9A-Fa-f]{2}))"
    "\n"
)


def test_pet_compiles_to_one_compact_rule_and_the_string_character() -> None:
    result = compact_grammar(compile_output(Pet).schema or {})
    assert result == CompactGrammar(PET_GRAMMAR + CHAR_RULE, 35, 276)
    grammar = Grammar(result.text)
    assert grammar.accepts('{"name":"Rex","species":"dog","age":3}')
    assert not grammar.accepts('{"name": "Rex","species":"dog","age":3}')  # no whitespace
    assert not grammar.accepts('{"name":"Rex","species":"dog","age":31}')
    assert not grammar.accepts('{"species":"dog","name":"Rex","age":3}')  # declared order


def test_list_of_pets_refers_to_a_pet_rule() -> None:
    result = compact_grammar(compile_output(list[Pet]).schema or {})
    assert result is not None
    assert (
        result.text
        == 'root ::= "[" (pet ("," pet)*)? "]"\n'
        + PET_GRAMMAR.replace("root", "pet", 1)
        + CHAR_RULE
    )
    assert (result.shortest, result.longest) == (2, None)
    grammar = Grammar(result.text)
    assert grammar.accepts(
        '[{"name":"a","species":"cat","age":0},{"name":"b","species":"dog","age":30}]'
    )
    assert not grammar.accepts('[{"name":"a","species":"cat","age":0},]')


@pytest.mark.parametrize("name", sorted(CASES))
def test_grammar_text_is_ascii_with_llama_cpp_rule_names(name: str) -> None:
    result, grammar = compiled(name)
    assert result.text.isascii()
    assert all(re.fullmatch(r"[a-z][a-z0-9-]*", rule) for rule in grammar.rules)
    assert next(iter(grammar.rules)) == "root"


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "string", "format": "duration"}, "format 'duration'"),
        ({"type": "string", "format": "email"}, "format 'email'"),
        ({"type": "object", "patternProperties": {"a": {}}}, "patternProperties"),
        ({"allOf": [{"type": "integer"}]}, "allOf"),
        ({"not": {"type": "null"}}, "not"),
        ({"type": "string", "pattern": "(?=a)a"}, "pattern"),
        ({"type": "string", "pattern": r"^\D$"}, "pattern"),
        ({"type": "string", "pattern": "(?i)a"}, "pattern"),
        ({"type": "string", "pattern": "a|^b"}, "pattern"),
        ({"type": "string", "pattern": "^a.*$", "maxLength": 3}, "length bounds"),
        ({"type": "string", "pattern": "^ab$", "minLength": 3}, "length bounds"),
        ({"type": "array", "prefixItems": [{}], "items": {}}, "prefixItems"),
        ({"type": "object", "properties": {"a": {}}, "propertyNames": {}}, "propertyNames"),
        ({"type": "object", "propertyNames": {"type": "integer"}}, "propertyNames"),
        ({"type": "integer", "minimum": 3, "maximum": 2}, "no integer"),
        ({"$ref": "#/$defs/Missing"}, "unresolved"),
        (
            {
                "type": "object",
                "properties": {"a": {}},
                "additionalProperties": {"type": "integer"},
            },
            "additionalProperties",
        ),
    ],
)
def test_uncovered_schemas_fall_back_and_say_why(
    schema: dict[str, Any], reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="lmclient"):
        assert compact_grammar(schema) is None
    assert "compact grammar: falls back to json_schema:" in caplog.text
    assert reason in caplog.text


@pytest.mark.parametrize(
    ("low", "high"),
    [(0, 30), (-5, 122), (-100, -10), (7, 7), (95, 1005), (-(2**63), -(2**63) + 40)],
)
def test_integer_ranges_are_exact(low: int, high: int) -> None:
    grammar = Grammar(compact_grammar({"type": "integer", "minimum": low, "maximum": high}).text)  # type: ignore[union-attr]
    for n in range(low - 150, high + 150):
        assert grammar.accepts(str(n)) == (low <= n <= high), n


def test_a_plain_integer_is_int64_or_uint64() -> None:
    result = compact_grammar({"type": "integer"})
    assert result is not None and (result.shortest, result.longest) == (1, 20)
    grammar = Grammar(result.text)
    for n in (0, -1, 9, 10, -(2**63), 2**63, 2**64 - 1, 10**19, -(10**18)):
        assert grammar.accepts(str(n)), n
    for text in ("-0", "01", "+1", str(2**64), str(-(2**63) - 1), "1.0", "1e3", ""):
        assert not grammar.accepts(text), text


def test_dates_are_exactly_the_calendar() -> None:
    grammar = Grammar(compact_grammar({"type": "string", "format": "date"}).text)  # type: ignore[union-attr]
    for year in (0, 1, 4, 100, 400, 1900, 2000, 2023, 2024, 2100, 9996, 9999):
        for month in range(14):
            for day in range(33):
                text = f'"{year:04}-{month:02}-{day:02}"'
                try:
                    dt.date(year, month, day)
                    valid = True
                except ValueError:
                    valid = False
                assert grammar.accepts(text) == valid, text


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        (
            "date-time",
            [
                "2024-02-29T23:59:59Z",
                "0001-01-01T00:00:00.5+23:59",
                "2020-01-02T03:04:05.123456-05:30",
            ],
            [
                "2024-02-29T23:59:59",
                "2024-02-29 23:59:59Z",
                "2024-02-29T24:00:00Z",
                "2024-02-29T00:00:60Z",
                "2024-02-29T00:00:00+24:00",
                "2024-02-29T00:00:00.1234567Z",
                "2024-02-29T00:00:00z",
            ],
        ),
        ("time", ["00:00:00Z", "23:59:59.000001+05:00"], ["00:00:00", "0:00:00Z"]),
        ("partial-time", ["00:00:00", "12:30:15.25"], ["00:00:00Z", "12:30"]),
        (
            "uuid",
            ["efb1c9d8-bc31-4e25-b03d-c6070109dc6a"],
            ["EFB1C9D8-bc31-4e25-b03d-c6070109dc6a", "efb1c9d8bc314e25b03dc6070109dc6a"],
        ),
    ],
)
def test_formats(fmt: str, good: list[str], bad: list[str]) -> None:
    grammar = Grammar(compact_grammar({"type": "string", "format": fmt}).text)  # type: ignore[union-attr]
    for text in good:
        assert grammar.accepts(f'"{text}"'), text
    for text in bad:
        assert not grammar.accepts(f'"{text}"'), text


def test_string_escapes_are_json_s_and_count_as_one_code_point() -> None:
    any_string = Grammar(compact_grammar({"type": "string"}).text)  # type: ignore[union-attr]
    for text in ['"\\u00e9\\/\\b\\f\\n\\r\\t\\"\\\\"', '"\\ud83d\\ude00"', '"\x7f\u2028é😀"', '""']:
        assert any_string.accepts(text), text
    for text in [
        '"\\ud83d"',
        '"\\ude00"',
        '"\\ud83dx"',
        '"\\x41"',
        '"\\u12"',
        '"\x01"',
        '"\n"',
        '"a',
        '"\\"',
    ]:
        assert not any_string.accepts(text), text
    two = Grammar(compact_grammar({"type": "string", "minLength": 2, "maxLength": 2}).text)  # type: ignore[union-attr]
    for text in ['"ab"', '"\\ud83d\\ude00a"', '"\\n\\u0041"', '"😀é"']:
        assert two.accepts(text), text
    for text in ['"a"', '"abc"', '"\\ud83d\\ude00"']:
        assert not two.accepts(text), text


def test_optional_properties_each_present_or_absent_with_commas_right() -> None:
    grammar = compiled("sparse")[1]
    fields = ['"a":1', '"b":"x"', '"say hi é":[2]', '"d":true']
    for mask in range(16):
        present = [f for i, f in enumerate(fields) if mask >> i & 1]
        assert grammar.accepts("{" + ",".join(present) + "}"), present
    for text in ['{,"a":1}', '{"a":1,}', '{"a":1"b":"x"}', '{"b":"x","a":1}', '{"a":1,"a":1}']:
        assert not grammar.accepts(text), text


def test_repeated_groups_become_rules_and_counts_stay_under_llama_cpp_s_limit() -> None:
    schema = {"type": "array", "items": {"enum": [1, 22]}, "minItems": 2, "maxItems": 4}
    result = compact_grammar(schema)
    assert result is not None
    assert result.text == 'root ::= "[" ("1" | "22") item-1{1,3} "]"\nitem-1 ::= "," ("1" | "22")\n'
    assert (result.shortest, result.longest) == (5, 13)
    assert compact_grammar({"type": "string", "maxLength": 1999}) is not None
    assert compact_grammar({"type": "string", "maxLength": 2000}) is None


def test_many_optional_properties_grow_the_grammar_linearly() -> None:
    names = [f"f{i}" for i in range(40)]
    schema = {"type": "object", "properties": {n: {"type": "boolean"} for n in names}}
    result = compact_grammar(schema)
    assert result is not None and len(result.text) < 40 * 100  # quadratic: ~40 * 1200
    grammar = Grammar(result.text)
    assert grammar.accepts("{}")
    assert grammar.accepts('{"f3":true,"f39":false}')
    assert grammar.accepts("{" + ",".join(f'"{n}":true' for n in names) + "}")
    assert not grammar.accepts('{"f39":false,"f3":true}')
    assert not grammar.accepts('{"f3":true,,"f39":false}')


def test_recursion_and_dedupe() -> None:
    result, grammar = compiled("tree")
    assert result.text.count("::=") == 2  # root (the Tree) and integer: $defs.Tree merged
    assert grammar.accepts('{"value":1,"kids":[{"value":2,"kids":[]},{"value":3,"kids":[]}]}')
    assert not grammar.accepts('{"value":1,"kids":[{}]}')


@pytest.mark.parametrize(
    "pattern",
    [
        r"^[a-z]{2}-\d+$",
        r"^(ab|c)*$",
        "b",
        r"^a\.?",
        r'x"y',
        r"[^a\n]$",
        r"^\w\s.",
        r"^(?:a{2,3}|b+)\\$",
        "^$",
    ],
)
@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet='ab c1_-."\\\n', max_size=7))
def test_patterns_match_as_python_searches(pattern: str, text: str) -> None:
    grammar = _pattern_grammar(pattern)
    encoded = msgspec.json.encode(text).decode()
    # JSON Schema's `$` ends the string; Python's also matches before a final newline, a match
    # the grammar does not offer (narrower, never wrong)
    assert grammar.accepts(encoded) == bool(re.search(pattern.replace("$", r"\Z"), text)), encoded


@functools.cache
def _pattern_grammar(pattern: str) -> Grammar:
    return Grammar(compact_grammar({"type": "string", "pattern": pattern}).text)  # type: ignore[union-attr]


# ------------------------------------------------------------------------------- properties


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_encoding_is_a_sentence_within_longest(name: str, data: st.DataObject) -> None:
    result, grammar = compiled(name)
    value = data.draw(CASES[name].values)
    encoded = msgspec.json.encode(value)
    assert grammar.accepts(encoded.decode()), encoded
    assert result.longest is None or len(encoded) <= result.longest


_SNIPPETS: list[str] = [
    *'{}[],:"\\019-.eE+tnfaZT ',
    "null",
    "true",
    "\\u0000",
    "\\ud83d",
    "é",
    "😀",
    "1e999",
    "\x01",
]


@st.composite
def _mutated(draw: st.DrawFn, name: str) -> str:
    text = msgspec.json.encode(draw(CASES[name].values)).decode()
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace", "repeat"]))
        piece = draw(st.sampled_from(_SNIPPETS))
        if op == "insert":
            text = text[:at] + piece + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + 1 :]
        elif op == "replace":
            text = text[:at] + piece + text[at + 1 :]
        else:
            end = draw(st.integers(at, len(text)))
            text = text[:end] + text[at:end] + text[end:]
    return text


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.exact))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_sentence_is_rejected_by_msgspec(name: str, data: st.DataObject) -> None:
    grammar = compiled(name)[1]
    text = data.draw(_mutated(name) | JSON_VALUES.map(lambda v: msgspec.json.encode(v).decode()))
    if grammar.accepts(text):
        try:
            decoder(name)(text.encode())
        except msgspec.ValidationError:
            if not _has_duplicate_keys(text):  # left to validation (see lmclient._output.gbnf)
                raise


def _has_duplicate_keys(text: str) -> bool:
    found = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal found
        found = found or len({k for k, _ in items}) < len(items)
        return dict(items)

    json.loads(text, object_pairs_hook=pairs)
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_shortest_and_longest_are_reached(name: str) -> None:
    result, grammar = compiled(name)
    shortest = grammar.shortest()
    assert grammar.accepts(shortest)
    assert len(shortest.encode()) == result.shortest
    if result.longest is not None:
        longest = grammar.longest()
        assert grammar.accepts(longest)
        assert len(longest.encode()) == result.longest


def test_longest_is_none_exactly_when_unbounded() -> None:
    bounded = {n for n, _ in CASES.items() if compiled(n)[0].longest is not None}
    assert bounded == {
        "pet",
        "list-bounded",
        "intenum",
        "choice",
        "literals",
        "optional",
        "number",
        "bounded-int",
        "float-bounds",
        "unit-float",
        "open-float",
        "quarter-float",
        "negative-float",
        "float-list",
        "multiple-of",
        "multiple-of-range",
        "string-bounded",
        "pattern-length",
        "dict-keys",
    }


# Each bound the compact grammar dropped before it held what xgrammar's schema mode holds
# (issue 28): the value of the issue's report, rejected, and its neighbours inside, accepted.
_BOUND_REGRESSIONS: list[tuple[Any, list[str], list[str]]] = [
    (
        Annotated[float, msgspec.Meta(ge=0, le=1)],
        ["0.0", "1.0", "0", "1", "0.5", "0.00001", "1e-7", "5e-324", "-0.0"],
        ["5", "-0.5", "1.5", "-9.08e58", "1.0000000000000002", "-5e-324", "1e1"],
    ),
    (
        Annotated[float, msgspec.Meta(gt=-10.5, lt=40)],
        ["-10.499999999999998", "39.99999999999999", "0.0", "-10", "39"],
        ["-10.5", "40.0", "40", "-11", "1e2", "-1e300"],
    ),
    (
        Annotated[float, msgspec.Meta(ge=0.25, le=0.75)],
        ["0.25", "0.75", "0.5", "0.2500000000000001"],
        ["0.24999999999999997", "0.7500000000000001", "0", "1", "7.6e-1"],
    ),
    (Annotated[float, msgspec.Meta(le=-1)], ["-1.0", "-1", "-1e300", "-1.5"], ["-0.5", "0.0", "1"]),
    (
        list[Annotated[float, msgspec.Meta(ge=0, le=1)]],
        ["[0.5,1.0]", "[]"],
        ["[0.5,5]", "[-0.5]"],
    ),
    (
        Annotated[int, msgspec.Meta(multiple_of=5)],
        ["0", "5", "-5", "1000000000000000000"],
        ["7", "-3"],
    ),
    (
        Annotated[int, msgspec.Meta(ge=-100, le=10**6, multiple_of=7)],
        ["-98", "0", "7", "999999"],
        ["-105", "1000006", "8", "-99"],
    ),
]


@pytest.mark.parametrize(("tp", "good", "bad"), _BOUND_REGRESSIONS)
def test_bounds_the_server_s_schema_mode_holds_are_held(
    tp: Any, good: list[str], bad: list[str]
) -> None:
    schema = compile_output(tp).schema
    assert schema is not None
    result = compact_grammar(schema)
    assert result is not None
    grammar = Grammar(result.text)
    decode = msgspec.json.Decoder(tp).decode
    for text in good:
        decode(text)  # the examples themselves are right
        assert grammar.accepts(text), text
    for text in bad:
        with pytest.raises(msgspec.ValidationError):
            decode(text)
        assert not grammar.accepts(text), text


def test_bounded_floats_tighten_the_budget() -> None:
    plain = compact_grammar({"type": "number"})
    unit = compact_grammar({"type": "number", "minimum": 0, "maximum": 1})
    assert plain is not None and unit is not None and plain.longest and unit.longest
    assert unit.longest < plain.longest


def test_multiple_of_beyond_the_automaton_falls_back() -> None:
    assert compact_grammar({"type": "integer", "multipleOf": 17}) is None
    assert compact_grammar({"type": "integer", "multipleOf": 1.5}) is None
    assert compact_grammar({"type": "integer", "multipleOf": 17, "maximum": 1000, "minimum": 0})


# -- text without a marker (`text_until`: Tagged's prose, the reasoning before an answer) -----

MARKERS = ["a", "ab", "aa", "aab", "aba", "abab", "abcab", "baa", "</think>", "[/THINK]", '"\\]']


def _strings(alphabet: str, longest: int) -> list[str]:
    return [
        "".join(chars)
        for n in range(longest + 1)
        for chars in itertools.product(alphabet, repeat=n)
    ]


@pytest.mark.parametrize("marker", MARKERS)
@pytest.mark.parametrize("ends_with_marker", [True, False])
def test_text_until_is_exactly_its_language(marker: str, ends_with_marker: bool) -> None:
    """Every short string over the marker's characters and one other (overlapping markers
    included, where a naive "anything but the marker's first character" rule goes wrong): the
    rules accept it exactly when the marker does not occur in it (then, or only at its very
    end)."""
    grammar = render(text_until(marker, "root", ends_with_marker=ends_with_marker))
    alphabet = "".join(sorted(set(marker))) + "x"
    longest = 6 if len(alphabet) <= 3 else 4
    texts = _strings(alphabet[:4], longest)
    texts += [marker, "x" + marker, marker + marker, marker[:-1] + marker, "\n" + marker]
    for text in texts:
        if ends_with_marker:
            want = text.endswith(marker) and text.find(marker) == len(text) - len(marker)
        else:
            want = marker not in text
        assert gbnf_accepts(grammar, text) is want, (marker, text)


def test_text_until_takes_any_character_but_the_marker() -> None:
    grammar = render(text_until("<answer>", "root", ends_with_marker=True))
    assert gbnf_accepts(grammar, "Paris, été 中文 \n\t</answer> <answe <answer>")
    assert not gbnf_accepts(grammar, "x <answer> y <answer>")


def test_an_empty_marker_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        text_until("", "s", ends_with_marker=True)
