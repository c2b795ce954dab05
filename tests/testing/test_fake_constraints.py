"""read_constraint: every server's placement maps to the same neutral Constraint."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from lmclient._servers import SERVERS
from lmclient.testing._constraints import Constraint, read_constraint, served_constraint
from lmclient.testing._errors import ConstraintError

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


# -- what each impersonated server reads ---------------------------------------------------------

SERVED_FIELDS: dict[str, Any] = {
    "structured_outputs": {"structured_outputs": {"regex": "so"}},
    "guided_regex": {"guided_regex": "guided"},
    "response_format": {"response_format": {"type": "regex", "value": "rf"}},
    "regex": {"regex": "top"},
    "ebnf": {"ebnf": 'root ::= "ebnf"'},
    "grammar": {"grammar": 'root ::= "grammar"'},
    "json_schema": {"json_schema": SCHEMA_TEXT},
}


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("server", [*SERVERS, "generic", None])
def test_each_server_reads_only_the_fields_it_obeys(server: str | None, endpoint: str) -> None:
    """The fake obeys what lmclient's table of servers says each kind obeys; an unknown
    server (generic, None) every placement."""
    known = SERVERS.get(server or "generic")
    for name, body in SERVED_FIELDS.items():
        found = served_constraint(body, server, endpoint)
        assert (found.kind != "none") == (known is None or name in known.obeys[endpoint]), name
        if found.kind != "none":
            assert found == read_constraint(body)


def test_ignored_malformed_fields_are_not_errors() -> None:
    body = {"guided_regex": 5}
    assert served_constraint(body, "vllm", "chat") == Constraint("none")
    with pytest.raises(ConstraintError):
        served_constraint(body, "vllm-guided", "chat")
