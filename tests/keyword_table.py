"""The JSON Schema keyword table of docs/output-types.md, as data the tests check.

Each row is a keyword with a probe: a schema using it, a string it allows and one only the
keyword forbids. Who holds the keyword while decoding:

- lmclient compact: worked out from `lmclient._output.gbnf` by
  `tests/output/test_keyword_table.py` (the grammar rejects the forbidden string: "grammar";
  the compiler falls back to the schema: "schema sent");
- xgrammar (vLLM's and SGLang's schema mode): declared here and checked against xgrammar's
  ``Grammar.from_json_schema`` by `tests/e2e/test_compact_strictness.py`;
- llama.cpp: declared from its converter's source (``common/json-schema.cpp`` reads the
  keywords, ``common/json-schema-to-grammar.cpp`` writes the grammar) and checked against the
  real server's converter by `tests/e2e/test_compact_strictness.py` (the grammar the server
  makes of each probe's schema, which ``/completion`` returns, given both strings).

The last column: client-side validation checks every keyword here, msgspec for typed outputs
and `lmclient.JsonSchema`'s validator otherwise, but ``format``, which only typed outputs
(msgspec, pydantic) check.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["KEYWORDS", "Keyword", "render"]

GRAMMAR, IGNORED, SCHEMA = "grammar", "not held", "schema sent"


class Keyword(NamedTuple):
    name: str
    schema: dict[str, Any]
    good: str
    bad: str
    xgrammar: str  # GRAMMAR or IGNORED
    llamacpp: str  # GRAMMAR or IGNORED


_DICT: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "integer"}}
_OBJ: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}}}
_INTS: dict[str, Any] = {"type": "array", "items": {"type": "integer"}}

KEYWORDS: list[Keyword] = [
    Keyword("minimum (integer)", {"type": "integer", "minimum": 3}, "3", "2", GRAMMAR, GRAMMAR),
    Keyword("maximum (integer)", {"type": "integer", "maximum": 3}, "3", "4", GRAMMAR, GRAMMAR),
    Keyword(
        "exclusiveMinimum (integer)",
        {"type": "integer", "exclusiveMinimum": 3},
        "4",
        "3",
        GRAMMAR,
        GRAMMAR,
    ),
    Keyword(
        "exclusiveMaximum (integer)",
        {"type": "integer", "exclusiveMaximum": 3},
        "2",
        "3",
        GRAMMAR,
        GRAMMAR,
    ),
    Keyword(
        "minimum (number)", {"type": "number", "minimum": 0.5}, "0.5", "0.25", GRAMMAR, IGNORED
    ),
    Keyword(
        "maximum (number)", {"type": "number", "maximum": 0.5}, "0.5", "0.75", GRAMMAR, IGNORED
    ),
    Keyword(
        "exclusiveMinimum (number)",
        {"type": "number", "exclusiveMinimum": 0.5},
        "0.75",
        "0.5",
        GRAMMAR,
        IGNORED,
    ),
    Keyword(
        "exclusiveMaximum (number)",
        {"type": "number", "exclusiveMaximum": 0.5},
        "0.25",
        "0.5",
        GRAMMAR,
        IGNORED,
    ),
    Keyword(
        "multipleOf (integer)", {"type": "integer", "multipleOf": 5}, "10", "7", GRAMMAR, IGNORED
    ),
    Keyword(
        "multipleOf (number)",
        {"type": "number", "multipleOf": 0.5},
        "1.5",
        "1.25",
        IGNORED,
        IGNORED,
    ),
    Keyword("minLength", {"type": "string", "minLength": 2}, '"ab"', '"a"', GRAMMAR, GRAMMAR),
    Keyword("maxLength", {"type": "string", "maxLength": 2}, '"ab"', '"abc"', GRAMMAR, GRAMMAR),
    Keyword("pattern", {"type": "string", "pattern": "^a+$"}, '"aa"', '"ab"', GRAMMAR, GRAMMAR),
    Keyword(
        "format: date",
        {"type": "string", "format": "date"},
        '"2024-02-29"',
        '"2024-13-01"',
        GRAMMAR,
        GRAMMAR,
    ),
    Keyword(
        "format: date-time",
        {"type": "string", "format": "date-time"},
        '"2024-01-01T00:00:00Z"',
        '"2024-01-01"',
        GRAMMAR,
        GRAMMAR,
    ),
    Keyword(
        "format: time",
        {"type": "string", "format": "time"},
        '"12:00:00Z"',
        '"25:00:00Z"',
        GRAMMAR,
        GRAMMAR,
    ),
    Keyword(
        "format: uuid",
        {"type": "string", "format": "uuid"},
        '"123e4567-e89b-12d3-a456-426614174000"',
        '"123e4567"',
        GRAMMAR,
        GRAMMAR,
    ),
    Keyword(
        "format: email",
        {"type": "string", "format": "email"},
        '"a@b.co"',
        '"ab"',
        GRAMMAR,
        IGNORED,
    ),
    Keyword("minItems", {**_INTS, "minItems": 1}, "[1]", "[]", GRAMMAR, GRAMMAR),
    Keyword("maxItems", {**_INTS, "maxItems": 1}, "[1]", "[1,2]", GRAMMAR, GRAMMAR),
    Keyword("uniqueItems", {**_INTS, "uniqueItems": True}, "[1,2]", "[1,1]", IGNORED, IGNORED),
    Keyword("required", {**_OBJ, "required": ["a"]}, '{"a":1}', "{}", GRAMMAR, GRAMMAR),
    Keyword(
        "additionalProperties: false",
        {**_OBJ, "additionalProperties": False},
        '{"a":1}',
        '{"a":1,"b":2}',
        GRAMMAR,
        GRAMMAR,
    ),
    Keyword("minProperties", {**_DICT, "minProperties": 1}, '{"a":1}', "{}", GRAMMAR, IGNORED),
    Keyword(
        "maxProperties",
        {**_DICT, "maxProperties": 1},
        '{"a":1}',
        '{"a":1,"b":2}',
        GRAMMAR,
        IGNORED,
    ),
    Keyword(
        "propertyNames",
        {**_DICT, "propertyNames": {"maxLength": 1}},
        '{"a":1}',
        '{"ab":1}',
        GRAMMAR,
        IGNORED,
    ),
    Keyword("enum", {"enum": ["a", "b"]}, '"a"', '"c"', GRAMMAR, GRAMMAR),
    Keyword("const", {"const": "a"}, '"a"', '"b"', GRAMMAR, GRAMMAR),
]


def render(compact: dict[str, str]) -> str:
    """The docs table, with the compact column as worked out (keyword name -> cell)."""
    lines = [
        "| keyword | xgrammar schema mode | llama.cpp schema mode | lmclient compact "
        "| validation only |",
        "|---|---|---|---|---|",
    ]
    for row in KEYWORDS:
        checked = "typed outputs" if row.name.startswith("format") else "checked"
        lines.append(
            f"| `{row.name}` | {row.xgrammar} | {row.llamacpp} | {compact[row.name]} | {checked} |"
        )
    return "\n".join(lines) + "\n"
