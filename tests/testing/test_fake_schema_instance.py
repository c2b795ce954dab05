"""schema_instance: values must validate (msgspec decode, jsonschema) and be deterministic."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import itertools
import uuid
from typing import Annotated, Any, Literal, NamedTuple, TypedDict

import jsonschema
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmclient.testing._errors import UnsatisfiableError
from lmclient.testing._schema_instance import schema_instance


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Address(msgspec.Struct):
    street: str
    city: Annotated[str, msgspec.Meta(min_length=2, max_length=20)]
    zip: Annotated[str, msgspec.Meta(pattern=r"^\d{5}$")]


class Person(msgspec.Struct):
    name: str
    age: Annotated[int, msgspec.Meta(ge=0, le=130)]
    email: str | None = None
    addresses: list[Address] = []
    tags: dict[str, int] = {}


class Node(msgspec.Struct):
    value: int
    children: list[Node] = []
    parent: Node | None = None


class Cat(msgspec.Struct, tag=True):
    lives: Annotated[int, msgspec.Meta(ge=1, le=9)]


class Dog(msgspec.Struct, tag=True):
    good: bool


class Constrained(msgspec.Struct):
    even: Annotated[int, msgspec.Meta(ge=3, lt=10, multiple_of=2)]
    half: Annotated[float, msgspec.Meta(gt=0.5, le=2.5, multiple_of=0.5)]
    ratio: Annotated[float, msgspec.Meta(gt=0, lt=1)]
    code: Annotated[str, msgspec.Meta(pattern="^[A-Z]{3}-[0-9]{2,4}$")]
    slug: Annotated[str, msgspec.Meta(pattern="^[a-z]+$", min_length=12, max_length=14)]
    short: Annotated[str, msgspec.Meta(max_length=3)]
    long: Annotated[str, msgspec.Meta(min_length=40)]
    items: Annotated[list[int], msgspec.Meta(min_length=2, max_length=3)]
    keys: dict[Annotated[str, msgspec.Meta(min_length=3)], float]
    blob: Annotated[bytes, msgspec.Meta(min_length=4)]
    negative: Annotated[int, msgspec.Meta(lt=0)]


class Times(msgspec.Struct):
    at: Annotated[datetime.datetime, msgspec.Meta(tz=True)]
    day: datetime.date
    clock: Annotated[datetime.time, msgspec.Meta(tz=True)]
    local_clock: Annotated[datetime.time, msgspec.Meta(tz=False)]
    wait: datetime.timedelta
    ident: uuid.UUID
    amount: decimal.Decimal


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Movie(TypedDict):
    title: str
    year: int


class Pair(NamedTuple):
    left: int
    right: str


MSGSPEC_TYPES: list[Any] = [
    int,
    float,
    str,
    bool,
    Any,
    list[int],
    dict[str, float],
    tuple[int, str, bool],
    tuple[int, ...],
    frozenset[int],
    int | None,
    int | str | None,
    Literal["yes", "no"],
    Literal[1, 2, 3],
    Color,
    Level,
    Address,
    Person,
    list[Person],
    dict[str, Person],
    Node,
    list[Node],
    Cat | Dog,
    list[Cat | Dog],
    Constrained,
    Times,
    Point,
    Movie,
    Pair,
    Person | None,
    Annotated[list[Address], msgspec.Meta(min_length=1)],
]


@pytest.mark.parametrize("tp", MSGSPEC_TYPES, ids=repr)
@pytest.mark.parametrize("seed", range(5))
def test_msgspec_types_decode(tp: Any, seed: int) -> None:
    schema = msgspec.json.schema(tp)
    value = schema_instance(schema, seed=seed)
    msgspec.json.decode(msgspec.json.encode(value), type=tp)
    jsonschema.validate(value, schema)


@pytest.mark.parametrize("optional", ["all", "some", "none"])
def test_optional_policy(optional: Any) -> None:
    schema = msgspec.json.schema(Person)
    values = [schema_instance(schema, seed=s, optional=optional) for s in range(10)]
    present = [("email" in v) for v in values]
    if optional == "all":
        assert all(present)
    elif optional == "none":
        assert not any(present)
    else:
        assert any(present) and not all(present)
    for value in values:
        msgspec.convert(value, Person)


def test_deterministic_per_seed_and_varied_across_seeds() -> None:
    schema = msgspec.json.schema(Person)
    assert schema_instance(schema, seed=4) == schema_instance(schema, seed=4)
    assert len({msgspec.json.encode(schema_instance(schema, seed=s)) for s in range(10)}) > 5


def test_recursion_terminates_with_bounded_depth() -> None:
    def depth(node: dict[str, Any]) -> int:
        kids = [*node.get("children", []), *([node["parent"]] if node.get("parent") else [])]
        return 1 + max((depth(k) for k in kids), default=0)

    schema = msgspec.json.schema(Node)
    for seed in range(10):
        assert depth(schema_instance(schema, seed=seed)) <= 6


HAND_SCHEMAS: list[Any] = [
    True,
    {},
    {"type": "null"},
    {"type": ["string", "null"]},
    {"type": "string", "nullable": True},
    {"const": {"fixed": [1, 2]}},
    {"enum": [3, "x", None]},
    {"type": "integer", "minimum": 5, "exclusiveMaximum": 7},
    {"type": "integer", "minimum": 5, "exclusiveMinimum": True, "maximum": 7},
    {"type": "integer", "multipleOf": 7, "minimum": 100},
    {"type": "integer", "multipleOf": 2.5},
    {"type": "number", "exclusiveMinimum": -1, "exclusiveMaximum": -0.5},
    {"type": "number", "minimum": 3, "maximum": 3},
    {"type": "number", "multipleOf": 0.1, "maximum": 0.35},
    {"type": "string", "minLength": 30, "maxLength": 31},
    {"type": "string", "maxLength": 0},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "email"},
    {"type": "string", "format": "uri"},
    {"type": "string", "format": "ipv4"},
    {"type": "string", "format": "ipv6"},
    {"type": "string", "format": "hostname"},
    {"type": "string", "pattern": "^[a-f0-9]{8}$"},
    {"minLength": 3},
    {"minimum": 10},
    {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
    {"type": "object", "required": ["free"]},
    {"type": "object", "minProperties": 3, "additionalProperties": {"type": "boolean"}},
    {"type": "object", "additionalProperties": False, "properties": {"k": {"type": "string"}}},
    {"type": "array", "items": {"type": "integer"}, "minItems": 4, "maxItems": 4},
    {"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": True, "minItems": 3},
    {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": False},
    {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "boolean"}},
    {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 1000}]},
    {"oneOf": [{"type": "null"}, {"type": "boolean"}]},
    {"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
    {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer", "minimum": 1}}},
            {"properties": {"a": {"maximum": 3}, "b": {"type": "string"}}, "required": ["a"]},
        ]
    },
    {"allOf": [{"type": ["integer", "string"]}, {"type": "number", "minimum": 2}]},
    {"$ref": "#/definitions/x", "definitions": {"x": {"type": "string", "format": "date"}}},
    {"$defs": {"a/b": {"type": "integer"}}, "$ref": "#/$defs/a~1b"},
    {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
        },
        "required": ["name", "next"],
    },
    {
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$ref": "#"}, "minItems": 1}},
        "anyOf": [{"required": ["kids"]}, {"properties": {"leaf": {"const": True}}}],
    },
    {
        "type": "object",
        "properties": {"v": {"$ref": "#/$defs/v", "description": "sibling"}},
        "$defs": {"v": {"type": "integer", "maximum": -5}},
    },
]


@pytest.mark.parametrize("schema", HAND_SCHEMAS, ids=str)
@pytest.mark.parametrize("seed", range(4))
def test_hand_written_schemas_validate(schema: Any, seed: int) -> None:
    value = schema_instance(schema, seed=seed)
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    if "definitions" in str(schema) or "additionalItems" in str(schema):
        validator = jsonschema.Draft7Validator(schema)
    if schema.get("exclusiveMinimum") is True if isinstance(schema, dict) else False:
        validator = jsonschema.Draft4Validator(schema)
    validator.validate(value)


def test_empty_schema_gives_any_json_value() -> None:
    values = [schema_instance({}, seed=s) for s in range(20)]
    assert {type(v) for v in values} >= {str, int, bool}


def test_nullable_lists_prefer_a_value_when_shallow() -> None:
    assert all(schema_instance({"type": ["null", "integer"]}, seed=s) is not None for s in range(5))


@pytest.mark.parametrize(
    "schema",
    [
        False,
        {"type": "integer", "minimum": 5, "maximum": 4},
        {"type": "integer", "multipleOf": 10, "minimum": 1, "maximum": 9},
        {"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1},
        {"type": "string", "minLength": 5, "maxLength": 2},
        {"type": "string", "pattern": "^a$", "minLength": 3},
        {"type": "array", "minItems": 3, "maxItems": 1},
        {"type": "array", "items": {"enum": [1]}, "uniqueItems": True, "minItems": 2},
        {"enum": []},
        {"type": "nothing"},
        {"$ref": "https://example.com/schema.json"},
        {"$ref": "#/$defs/missing"},
        {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}},
        {"type": "object", "properties": {"me": {"$ref": "#"}}, "required": ["me"]},
        {"anyOf": [False, False]},
        {"allOf": [{"type": "string"}, {"type": "integer"}]},
        {"allOf": [{"type": "string"}, False]},
        {"type": "object", "minProperties": 1, "additionalProperties": False},
        {"type": "string", "pattern": "("},
    ],
    ids=str,
)
def test_unsatisfiable_schemas_raise(schema: Any) -> None:
    with pytest.raises(UnsatisfiableError):
        schema_instance(schema)


# -- property test over generated msgspec types -------------------------------------------------

_names = itertools.count()

LEAVES: list[Any] = [
    int,
    float,
    str,
    bool,
    uuid.UUID,
    datetime.date,
    Annotated[datetime.datetime, msgspec.Meta(tz=True)],
    Literal["a", "b", "c"],
    Color,
    Annotated[int, msgspec.Meta(ge=-5, le=5)],
    Annotated[float, msgspec.Meta(gt=0.0, lt=1.0)],
    Annotated[str, msgspec.Meta(min_length=3, max_length=8)],
    Annotated[str, msgspec.Meta(pattern=r"^[a-z]{2}\d$")],
]


def _wrap(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        inner.map(lambda t: t | None),
        inner.map(lambda t: list[t]),  # type: ignore[valid-type]
        inner.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
        st.lists(inner, min_size=1, max_size=4).map(_struct),
    )


def _struct(field_types: list[Any]) -> Any:
    fields = [(f"f{i}", tp) for i, tp in enumerate(field_types)]
    return msgspec.defstruct(f"Gen{next(_names)}", fields)


TYPES = st.recursive(st.sampled_from(LEAVES), _wrap, max_leaves=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tp=TYPES, seed=st.integers(0, 2**16))
def test_generated_struct_types_decode(tp: Any, seed: int) -> None:
    value = schema_instance(msgspec.json.schema(tp), seed=seed)
    msgspec.json.decode(msgspec.json.encode(value), type=tp)
