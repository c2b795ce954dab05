"""read_constraint: every server's placement maps to the same neutral Constraint."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from lmclient.testing import Constraint, ConstraintError, read_constraint
from lmclient.testing._grammar import grammar_literals

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
SCHEMA_TEXT = msgspec.json.encode(SCHEMA).decode()

CASES: list[tuple[str, dict[str, Any], Constraint]] = [
    # vLLM >= 0.10.2
    ("so json object", {"structured_outputs": {"json": SCHEMA}},
     Constraint("json_schema", SCHEMA, "structured_outputs.json")),
    ("so json string", {"structured_outputs": {"json": SCHEMA_TEXT}},
     Constraint("json_schema", SCHEMA, "structured_outputs.json")),
    ("so regex", {"structured_outputs": {"regex": r"\d+"}},
     Constraint("regex", r"\d+", "structured_outputs.regex")),
    ("so choice", {"structured_outputs": {"choice": ["a", "b"]}},
     Constraint("choice", ["a", "b"], "structured_outputs.choice")),
    ("so grammar", {"structured_outputs": {"grammar": 'root ::= "x"'}},
     Constraint("grammar", 'root ::= "x"', "structured_outputs.grammar")),
    ("so json_object", {"structured_outputs": {"json_object": True}},
     Constraint("json_object", None, "structured_outputs.json_object")),
    # vLLM < 0.12
    ("guided_json object", {"guided_json": SCHEMA},
     Constraint("json_schema", SCHEMA, "guided_json")),
    ("guided_json string", {"guided_json": SCHEMA_TEXT},
     Constraint("json_schema", SCHEMA, "guided_json")),
    ("guided_regex", {"guided_regex": "a|b"}, Constraint("regex", "a|b", "guided_regex")),
    ("guided_choice", {"guided_choice": ["x"]}, Constraint("choice", ["x"], "guided_choice")),
    ("guided_grammar", {"guided_grammar": "start: /a/"},
     Constraint("grammar", "start: /a/", "guided_grammar")),
    # OpenAI-style response_format (vLLM, SGLang, Ollama, LM Studio, llama.cpp chat, OpenAI)
    ("rf json_schema",
     {"response_format": {"type": "json_schema",
                          "json_schema": {"name": "x", "schema": SCHEMA, "strict": True}}},
     Constraint("json_schema", SCHEMA, "response_format")),
    ("rf json_object", {"response_format": {"type": "json_object"}},
     Constraint("json_object", None, "response_format")),
    ("rf text", {"response_format": {"type": "text"}}, Constraint("none")),
    ("rf sglang flat", {"response_format": {"type": "json_schema", "schema": SCHEMA}},
     Constraint("json_schema", SCHEMA, "response_format")),
    # llama.cpp
    ("rf json_object + schema", {"response_format": {"type": "json_object", "schema": SCHEMA}},
     Constraint("json_schema", SCHEMA, "response_format")),
    ("llama.cpp json_schema", {"json_schema": SCHEMA},
     Constraint("json_schema", SCHEMA, "json_schema")),
    ("llama.cpp any json", {"json_schema": {}}, Constraint("json_schema", {}, "json_schema")),
    ("llama.cpp grammar", {"grammar": 'root ::= "a"'},
     Constraint("grammar", 'root ::= "a"', "grammar")),
    # TGI
    ("tgi json", {"response_format": {"type": "json", "value": SCHEMA}},
     Constraint("json_schema", SCHEMA, "response_format")),
    ("tgi json string", {"response_format": {"type": "json", "value": SCHEMA_TEXT}},
     Constraint("json_schema", SCHEMA, "response_format")),
    ("tgi json_object", {"response_format": {"type": "json_object", "value": SCHEMA}},
     Constraint("json_schema", SCHEMA, "response_format")),
    ("tgi json_schema",
     {"response_format": {"type": "json_schema", "value": {"name": "n", "schema": SCHEMA}}},
     Constraint("json_schema", SCHEMA, "response_format")),
    ("tgi regex", {"response_format": {"type": "regex", "value": "[ab]"}},
     Constraint("regex", "[ab]", "response_format")),
    # SGLang
    ("sglang json_schema string", {"json_schema": SCHEMA_TEXT},
     Constraint("json_schema", SCHEMA, "json_schema")),
    ("sglang regex", {"regex": "yes|no"}, Constraint("regex", "yes|no", "regex")),
    ("sglang ebnf", {"ebnf": 'root ::= "y"'}, Constraint("grammar", 'root ::= "y"', "ebnf")),
    # nothing
    ("no constraint", {"messages": []}, Constraint("none")),
    ("null fields are absent", {"guided_json": None, "regex": None}, Constraint("none")),
]  # fmt: skip


@pytest.mark.parametrize(("body", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_placements(body: dict[str, Any], expected: Constraint) -> None:
    assert read_constraint(body) == expected


def test_first_found_wins() -> None:
    body = {"regex": "b", "structured_outputs": {"regex": "a"}}
    assert read_constraint(body).value == "a"


def test_non_object_bodies_carry_nothing() -> None:
    assert read_constraint(None).kind == "none"
    assert read_constraint([1, 2]).kind == "none"


@pytest.mark.parametrize(
    "body",
    [
        {"structured_outputs": "json"},
        {"structured_outputs": {"json": "{not json"}},
        {"structured_outputs": {"json": 3}},
        {"structured_outputs": {"regex": 5}},
        {"structured_outputs": {"choice": []}},
        {"structured_outputs": {"choice": ["a", 1]}},
        {"structured_outputs": {"grammar": "  "}},
        {"response_format": "json"},
        {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
        {"response_format": {"type": "structural_tag"}},
        {"json_schema": "[1,"},
    ],
    ids=str,
)
def test_malformed_constraints_raise(body: dict[str, Any]) -> None:
    with pytest.raises(ConstraintError):
        read_constraint(body)


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
