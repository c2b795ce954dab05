"""Every output kind of DESIGN §3 with the exact constraint each dialect must send for it.

Schemas here are literal on purpose: they pin what goes on the wire, independently of the code
that builds them. `expected_fields` places a kind's constraint the way servers.md says each
server reads it.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal, NamedTuple, Optional, TypedDict, Union

import msgspec
import pydantic

import lmclient
from lmclient._output.types import compile_output
from lmclient.errors import UnsupportedConstraintError

INT_RE = r"-?(0|[1-9][0-9]{0,18})"
FLOAT_RE = r"-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?([eE][+-]?[0-9]{1,2})?"
BOOL_RE = r"(true|false)"


class Person(msgspec.Struct):
    name: str
    age: int


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


class Movie(TypedDict):
    title: str
    year: int


class Pair(NamedTuple):
    left: str
    right: int


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class City(pydantic.BaseModel):
    name: str
    population: int


PERSON_SCHEMA = {
    "title": "Person",
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
PERSON_STRICT = {**PERSON_SCHEMA, "additionalProperties": False}
CITY_SCHEMA = {
    "properties": {
        "name": {"title": "Name", "type": "string"},
        "population": {"title": "Population", "type": "integer"},
    },
    "required": ["name", "population"],
    "title": "City",
    "type": "object",
}
USER_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer", "minimum": 1}, "tags": {"type": "array"}},
    "required": ["id"],
}
GBNF = 'root ::= "A" [0-9] [0-9]'
UNSUPPORTED = "unsupported"
SCALAR_GBNF = {
    "int": 'root ::= "-"? ("0" | [1-9] [0-9]{0,18})',
    "float": 'root ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?',
    "bool": 'root ::= "true" | "false"',
}


@dataclasses.dataclass(frozen=True)
class Kind:
    """One output kind: its type, the model's text under the native constraint, the value."""

    id: str
    output_type: Any
    text: str
    value: Any
    native: str  # text | json | any | regex | choice | grammar
    payload: Any = None  # schema, pattern, options or grammar of the native form
    schema: Any = None  # the JSON-schema form (for dialects without the native field)
    json_text: str | None = None  # the text under the schema form, when it differs
    name: str = "output"
    strict: Any = None  # the schema after OpenAI's strict rewrite, when it differs


def _json(
    kid: str, tp: Any, text: str, value: Any, schema: Any, name: str = "output", **kw: Any
) -> Kind:
    return Kind(kid, tp, text, value, "json", schema, schema, name=name, **kw)


KINDS: list[Kind] = [
    Kind("str", str, "Hello there.", "Hello there.", "text"),
    Kind("int", int, "42", 42, "regex", INT_RE, {"type": "integer"}, name="int"),
    Kind("float", float, "-2.5e3", -2500.0, "regex", FLOAT_RE, {"type": "number"}, name="float"),
    Kind("bool", bool, "true", True, "regex", BOOL_RE, {"type": "boolean"}, name="bool"),
    Kind(
        "literal",
        Literal["yes", "no"],
        "no",
        "no",
        "choice",
        ["yes", "no"],
        {"type": "string", "enum": ["yes", "no"]},
        json_text='"no"',
        name="choice",
    ),
    Kind(
        "enum",
        Color,
        "green",
        Color.GREEN,
        "choice",
        ["red", "green"],
        {"type": "string", "enum": ["red", "green"]},
        json_text='"green"',
        name="Color",
    ),
    Kind(
        "choice",
        lmclient.Choice(["a b", "c|d"]),
        "c|d",
        "c|d",
        "choice",
        ["a b", "c|d"],
        {"type": "string", "enum": ["a b", "c|d"]},
        json_text='"c|d"',
        name="choice",
    ),
    _json("literal-int", Literal[1, 2], "2", 2, {"enum": [1, 2]}),
    _json("int-enum", Level, "1", Level.LOW, {"title": "Level", "enum": [1, 2]}, name="Level"),
    _json(
        "struct",
        Person,
        '{"name": "Ada", "age": 36}',
        Person("Ada", 36),
        PERSON_SCHEMA,
        name="Person",
        strict=PERSON_STRICT,
    ),
    _json(
        "dataclass",
        Point,
        '{"x": 1.5, "y": 2}',
        Point(1.5, 2.0),
        {
            "title": "Point",
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0.0}},
            "required": ["x"],
        },
        name="Point",
        strict={
            "title": "Point",
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"],
            "additionalProperties": False,
        },
    ),
    _json(
        "typeddict",
        Movie,
        '{"title": "Up", "year": 2009}',
        {"title": "Up", "year": 2009},
        {
            "title": "Movie",
            "type": "object",
            "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
            "required": ["title", "year"],
        },
        name="Movie",
        strict={
            "title": "Movie",
            "type": "object",
            "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
            "required": ["title", "year"],
            "additionalProperties": False,
        },
    ),
    _json(
        "namedtuple",
        Pair,
        '["a", 1]',
        Pair("a", 1),
        {
            "title": "Pair",
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "integer"}],
            "minItems": 2,
            "maxItems": 2,
        },
        name="Pair",
    ),
    _json(
        "list-struct",
        list[Person],
        '[{"name": "A", "age": 1}, {"name": "B", "age": 2}]',
        [Person("A", 1), Person("B", 2)],
        {"type": "array", "items": {"$ref": "#/$defs/Person"}, "$defs": {"Person": PERSON_SCHEMA}},
        strict={
            "type": "array",
            "items": {"$ref": "#/$defs/Person"},
            "$defs": {"Person": PERSON_STRICT},
        },
    ),
    _json(
        "dict",
        dict[str, int],
        '{"a": 1}',
        {"a": 1},
        {"type": "object", "additionalProperties": {"type": "integer"}},
        strict=UNSUPPORTED,  # strict mode has no open-keyed objects
    ),
    _json(
        "optional",
        Optional[int],  # noqa: UP045 - the spelling users write
        "null",
        None,
        {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    ),
    _json(
        "union",
        Union[int, str],  # noqa: UP007 - the spelling users write
        '"x"',
        "x",
        {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    ),
    _json(
        "annotated",
        Annotated[int, msgspec.Meta(ge=0, le=10)],
        "7",
        7,
        {"type": "integer", "minimum": 0, "maximum": 10},
    ),
    _json(
        "datetime",
        datetime.datetime,
        '"2024-05-06T07:08:09Z"',
        datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.timezone.utc),
        {"type": "string", "format": "date-time"},
        name="datetime",
    ),
    _json(
        "uuid",
        uuid.UUID,
        '"12345678-1234-5678-1234-567812345678"',
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        {"type": "string", "format": "uuid"},
        name="UUID",
    ),
    _json(
        "decimal",
        decimal.Decimal,
        '"3.14"',
        decimal.Decimal("3.14"),
        {"type": "string", "pattern": r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?$"},
        name="Decimal",
    ),
    Kind("any", Any, '{"k": [1, 2]}', {"k": [1, 2]}, "any", None, {}),
    _json(
        "pydantic",
        City,
        '{"name": "Oslo", "population": 700000}',
        City(name="Oslo", population=700000),
        CITY_SCHEMA,
        name="City",
        strict={**CITY_SCHEMA, "additionalProperties": False},
    ),
    _json(
        "jsonschema",
        lmclient.JsonSchema(USER_SCHEMA),
        '{"id": 3, "tags": ["x"]}',
        {"id": 3, "tags": ["x"]},
        USER_SCHEMA,
        strict={**USER_SCHEMA, "required": ["id", "tags"], "additionalProperties": False},
    ),
    Kind(
        "regex",
        lmclient.Regex(r"[A-Z]{2}-\d{2}"),
        "AB-12",
        "AB-12",
        "regex",
        r"[A-Z]{2}-\d{2}",
        {"type": "string", "pattern": r"^([A-Z]{2}-\d{2})$"},
        json_text='"AB-12"',
        name="regex",
    ),
    Kind("grammar", lmclient.Grammar(GBNF), "A42", "A42", "grammar", GBNF),
]

DIALECTS = ["vllm", "vllm-guided", "openai", "llamacpp"]


def wrap(schema: dict[str, Any]) -> dict[str, Any]:
    """``{"value": schema}`` with definitions hoisted, as object-root dialects need."""
    inner = {k: v for k, v in schema.items() if k != "$defs"}
    out: dict[str, Any] = {
        "type": "object",
        "properties": {"value": inner},
        "required": ["value"],
        "additionalProperties": False,
    }
    if "$defs" in schema:
        out["$defs"] = schema["$defs"]
    return out


def _regex_alternation(options: list[str]) -> str:
    escaped = ["".join("\\" + c if c in "\\.^$*+?()[]{}|" else c for c in o) for o in options]
    return "(?:" + "|".join(escaped) + ")"


def _object_root(kind: Kind, schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    return (schema, False) if schema.get("type") == "object" else (wrap(schema), True)


# Where each dialect that takes a grammar puts lmclient's compact one (servers.md).
COMPACT_PLACES: dict[str, Callable[[str], dict[str, Any]]] = {
    "vllm": lambda text: {"structured_outputs": {"grammar": text}},
    "vllm-guided": lambda text: {"guided_grammar": text},
    "sglang": lambda text: {"ebnf": text},
    "llamacpp": lambda text: {"grammar": text},
}


def compact_text(kind: Kind) -> str | None:
    """The compact grammar lmclient compiles for a JSON kind (tested on its own in
    tests/output/test_gbnf.py); ``None`` for other kinds."""
    if kind.native not in ("json", "any"):
        return None
    grammar = compile_output(kind.output_type).compact
    return None if grammar is None else grammar.text


def _carries_schema(fields: dict[str, Any]) -> bool:
    """Whether the fields tell the server a JSON schema (a choice emulated as an ``enum``)."""
    formats = ("json_schema", "json", "json_object")
    return (
        "json_schema" in fields
        or "guided_json" in fields
        or "json" in fields.get("structured_outputs", {})
        or fields.get("response_format", {}).get("type") in formats
    )


def expected_budget(
    kind: Kind, dialect: str, endpoint: str = "chat", *, compact: bool = True
) -> dict[str, int]:
    """The ``max_tokens`` a call without one sends for `kind`: one more than the bytes of its
    longest answer, where the server is held to its exact text (a choice, a compact grammar of a
    bounded type); nothing otherwise."""
    fields = expected_fields(kind, dialect, endpoint, compact=compact)
    if kind.native == "choice" and not _carries_schema(fields):
        return {"max_tokens": max(len(o.encode()) for o in kind.payload) + 1}
    if compact and dialect in COMPACT_PLACES and kind.native in ("json", "any"):
        grammar = compile_output(kind.output_type).compact
        if grammar is not None and grammar.longest is not None:
            return {"max_tokens": grammar.longest + 1}
    return {}


def expected_watch(
    kind: Kind, dialect: str, endpoint: str = "chat", *, compact: bool = True
) -> dict[str, Any]:
    """What a call without ``runaway=`` sends for `kind` so that a runaway is stopped (issue
    39): nothing for a bounded type (its ``max_tokens`` caps it); vLLM's own repetition check
    (8 repeats of spans up to 128 characters, told in tokens: 32 of up to 16); else a stream,
    which lmclient watches as it comes (not TGI's, which would carry no usage)."""
    if expected_budget(kind, dialect, endpoint, compact=compact):
        return {}
    if dialect == "vllm":
        return {
            "repetition_detection": {"max_pattern_size": 16, "min_pattern_size": 1, "min_count": 32}
        }
    if dialect == "tgi":  # its streams carry no usage: read whole, not watched
        return {}
    return {"stream": True, "stream_options": {"include_usage": True}}


def expected_fields(
    kind: Kind, dialect: str, endpoint: str = "chat", *, compact: bool = True
) -> dict[str, Any]:
    """The constraint fields `dialect` must send for `kind`, with the client's compact JSON or
    the server's (``compact=False``); raises where it cannot."""
    k, payload = kind.native, kind.payload
    if k == "text":
        return {}
    grammar = compact_text(kind) if compact else None
    if grammar is not None and dialect in COMPACT_PLACES:
        return COMPACT_PLACES[dialect](grammar)
    if dialect == "vllm":
        if k == "any":
            return {"structured_outputs": {"json_object": True}}
        return {"structured_outputs": {k: payload}}
    if dialect == "vllm-guided":
        if k == "any":
            return {"response_format": {"type": "json_object"}}
        return {f"guided_{k}": payload}
    if dialect == "openai":
        if k == "grammar" or kind.strict == UNSUPPORTED:
            raise UnsupportedConstraintError
        if k == "any":
            return {"response_format": {"type": "json_object"}}
        schema, _ = _object_root(kind, kind.strict if kind.strict is not None else kind.schema)
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": kind.name, "schema": schema, "strict": True},
            }
        }
    if dialect == "sglang-gateway":  # strict response_format, chat only, no Regex or grammar
        regex = k == "regex" and kind.id not in SCALAR_GBNF
        if endpoint == "completions" or k == "grammar" or regex or kind.strict == UNSUPPORTED:
            raise UnsupportedConstraintError
        if k == "any":
            return {"response_format": {"type": "json_object"}}
        schema = kind.strict if kind.strict is not None else kind.schema
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": kind.name, "schema": schema, "strict": True},
            }
        }
    if dialect == "llamacpp":
        if k == "grammar":
            return {"grammar": payload}
        if kind.id in SCALAR_GBNF:
            return {"grammar": SCALAR_GBNF[kind.id]}
        if k == "choice":
            return {"grammar": "root ::= " + " | ".join(f'"{o}"' for o in payload)}
        return {"json_schema": kind.schema}
    if dialect == "sglang":
        if k == "grammar":
            return {"ebnf": payload}
        if k == "regex":
            return {"regex": payload}
        if k == "choice":
            return {"regex": _regex_alternation(payload)}
        if k == "any":
            return {"response_format": {"type": "json_object"}}
        if endpoint == "completions":
            return {"json_schema": json.dumps(kind.schema, separators=(",", ":"))}
        return _response_format(kind)
    if dialect == "tgi":
        if endpoint == "completions" or k == "grammar":
            raise UnsupportedConstraintError
        if k == "regex":
            return {"response_format": {"type": "regex", "value": payload}}
        if k == "choice":
            return {"response_format": {"type": "regex", "value": _regex_alternation(payload)}}
        schema, _ = _object_root(kind, kind.schema)
        return {"response_format": {"type": "json", "value": schema}}
    if dialect in ("generic", "ollama", "lmstudio"):
        if k == "grammar" or (dialect == "ollama" and endpoint == "completions"):
            raise UnsupportedConstraintError
        if k == "any" and dialect != "lmstudio":
            return {"response_format": {"type": "json_object"}}
        return _response_format(kind)
    raise AssertionError(dialect)


def _response_format(kind: Kind) -> dict[str, Any]:
    return {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": kind.name, "schema": kind.schema},
        }
    }


def reply_text(kind: Kind, dialect: str, endpoint: str = "chat", *, compact: bool = True) -> str:
    """What a server in `dialect` returns for `kind` (native text, JSON form or wrapped)."""
    fields = expected_fields(kind, dialect, endpoint, compact=compact)
    rf = fields.get("response_format", {})
    uses_schema = rf.get("type") in ("json_schema", "json") or "json_schema" in fields
    uses_schema = uses_schema or (
        compact and dialect in COMPACT_PLACES and compact_text(kind) is not None
    )
    text = kind.json_text if uses_schema and kind.json_text else kind.text
    if kind.native != "text" and dialect in ("openai", "tgi") and uses_schema:
        schema = kind.strict if dialect == "openai" and kind.strict is not None else kind.schema
        if _object_root(kind, schema)[1]:
            return '{"value": ' + text + "}"
    return text
