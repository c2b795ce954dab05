"""Tests for lmclient._output.jsonschema: keyword behaviour, error paths, and `jsonschema` as an
oracle."""

from __future__ import annotations

import pickle
import re
from typing import Annotated, Any, Literal

import jsonschema
import msgspec
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from lmclient._output.jsonschema import (
    UNCHECKED_KEYWORDS,
    SchemaDefinitionError,
    SchemaError,
    compile_schema,
)


def fails(schema: Any, instance: Any) -> SchemaError:
    with pytest.raises(SchemaError) as info:
        compile_schema(schema)(instance)
    return info.value


def error_of(schema: Any, instance: Any) -> tuple[str, str]:
    exc = fails(schema, instance)
    return exc.message, exc.path


# (schema, valid instances, invalid instances) per keyword; messages and paths are tested below.
CASES: list[tuple[Any, list[Any], list[Any]]] = [
    (True, [None, 1, "x", [], {}], []),
    (False, [], [None, 1, "x", [], {}]),
    ({}, [None, True, 1, 1.5, "x", [1], {"a": 1}], []),
    ({"type": "integer"}, [0, -3, 1.0, 10**30, 1e20], [True, 1.5, "1", None, [], {}]),
    ({"type": "number"}, [0, 1.5, -2, 1e300], [True, False, "1", None]),
    ({"type": "boolean"}, [True, False], [0, 1, None, "true"]),
    ({"type": "null"}, [None], [0, False, "", [], {}]),
    ({"type": "string"}, ["", "x"], [1, None, ["x"]]),
    ({"type": "array"}, [[], [1, "x"]], [{}, "[]", None]),
    ({"type": "object"}, [{}, {"a": 1}], [[], "{}", None]),
    ({"type": ["string", "null"]}, ["x", None], [1, False, []]),
    ({"type": ["integer", "boolean"]}, [1, True, 2.0], [1.5, None]),
    (
        {"enum": ["a", 1, None, [1], {"k": True}]},
        ["a", 1, 1.0, None, [1.0], {"k": True}],
        [True, "b", [True], {"k": 1}, 2],
    ),
    ({"enum": [True]}, [True], [1, 1.0]),
    ({"const": 1}, [1, 1.0], [True, "1", [1]]),
    ({"const": False}, [False], [0, 0.0, None]),
    ({"const": [True, {"a": 1}]}, [[True, {"a": 1.0}]], [[1, {"a": 1}], [True, {"a": 1, "b": 2}]]),
    ({"const": None}, [None], [0, False, ""]),
    (
        {"properties": {"a": {"type": "integer"}}},
        [{}, {"a": 1}, {"b": "x"}, "not an object"],
        [{"a": "x"}],
    ),
    ({"required": ["a", "b"]}, [{"a": 1, "b": None}, [], "x"], [{}, {"a": 1}]),
    (
        {"properties": {"a": {}}, "additionalProperties": False},
        [{}, {"a": 1}],
        [{"b": 1}, {"a": 1, "b": 2}],
    ),
    ({"additionalProperties": {"type": "string"}}, [{}, {"a": "x"}], [{"a": 1}]),
    ({"additionalProperties": False}, [{}], [{"a": 1}]),
    (
        {
            "properties": {"a": {}},
            "patternProperties": {"^x": {"type": "integer"}},
            "additionalProperties": False,
        },
        [{"a": "s", "x1": 1}, {"xx": 2}],
        [{"x": "s"}, {"y": 1}],
    ),
    (
        {"patternProperties": {"a": {"minimum": 0}, "b": {"maximum": 5}}},
        [{"ab": 3}, {"c": -9}],
        [{"ab": 6}, {"ab": -1}],
    ),
    ({"propertyNames": {"maxLength": 2}}, [{}, {"ab": 1}], [{"abc": 1}]),
    ({"propertyNames": {"pattern": "^[a-z]+$"}}, [{"abc": 1}], [{"a1": 1}]),
    (
        {"minProperties": 1, "maxProperties": 2},
        [{"a": 1}, {"a": 1, "b": 2}, []],
        [{}, {"a": 1, "b": 2, "c": 3}],
    ),
    (
        {"dependentRequired": {"a": ["b", "c"]}},
        [{}, {"b": 1}, {"a": 1, "b": 2, "c": 3}],
        [{"a": 1, "b": 2}],
    ),
    ({"dependentSchemas": {"a": {"required": ["b"]}}}, [{}, {"a": 1, "b": 2}], [{"a": 1}]),
    (
        {"dependencies": {"a": ["b"], "c": {"required": ["d"]}}},
        [{"a": 1, "b": 1}, {"c": 1, "d": 1}],
        [{"a": 1}, {"c": 1}],
    ),
    ({"items": {"type": "integer"}}, [[], [1, 2], "x", {}], [[1, "x"], [None]]),
    ({"items": False}, [[]], [[1]]),
    (
        {"prefixItems": [{"type": "string"}, {"type": "integer"}]},
        [[], ["a"], ["a", 1, None]],
        [[1], ["a", "b"]],
    ),
    (
        {"prefixItems": [{"type": "string"}], "items": {"type": "integer"}},
        [["a", 1, 2]],
        [["a", 1, "b"], [1]],
    ),
    ({"prefixItems": [{}], "items": False}, [[], [1]], [[1, 2]]),
    ({"items": [{"type": "string"}], "additionalItems": False}, [[], ["a"]], [[1], ["a", "b"]]),
    (
        {"items": [{"type": "string"}], "additionalItems": {"type": "null"}},
        [["a", None]],
        [["a", 1]],
    ),
    ({"items": [{"type": "string"}]}, [["a", 1, 2]], [[1]]),
    ({"minItems": 1, "maxItems": 2}, [[1], [1, 2], {}], [[], [1, 2, 3]]),
    (
        {"uniqueItems": True},
        [[], [1, 2], [1, True], [0, False], [[1], [True]], [{"a": 1}, {"a": 2}]],
        [[1, 1.0], ["a", "a"], [[1], [1.0]], [{"a": 1}, {"a": 1.0}], [None, None]],
    ),
    ({"uniqueItems": False}, [[1, 1]], []),
    ({"contains": {"type": "string"}}, [["a"], [1, "a"], "x"], [[], [1, 2]]),
    (
        {"contains": {"type": "string"}, "minContains": 2, "maxContains": 3},
        [["a", "b"], ["a", 1, "b", "c"]],
        [["a"], ["a", "b", "c", "d"]],
    ),
    (
        {"contains": {"type": "string"}, "minContains": 0, "maxContains": 1},
        [[], [1], ["a"]],
        [["a", "b"]],
    ),
    ({"minimum": 0, "maximum": 10}, [0, 10, 0.0, 5.5, "x", True], [-1, -0.5, 11, 10.01]),
    ({"exclusiveMinimum": 0, "exclusiveMaximum": 10}, [1, 9.99], [0, 0.0, 10]),
    ({"minimum": 0, "exclusiveMinimum": True}, [1, 0.1], [0]),
    ({"maximum": 10, "exclusiveMaximum": True}, [9], [10]),
    ({"maximum": 10, "exclusiveMaximum": False}, [10], [11]),
    ({"exclusiveMinimum": True}, [-1000], []),
    ({"multipleOf": 3}, [0, 9, -3, 6.0, 10**20 * 3], [1, 7.5, 10**20 + 1]),
    ({"multipleOf": 0.5}, [1, 1.5, -2.5], [1.25, 0.1]),
    ({"multipleOf": 0.01}, [19.99, 0.07, 1, 1e308], [0.001, 19.995]),
    ({"multipleOf": 1.5}, [3, 4.5, 1.5e20], [1e20, 1]),  # 1e20 / 1.5 rounds to an integral float
    ({"minLength": 2, "maxLength": 3}, ["ab", "abc", "😀😀", "éé", 5], ["a", "abcd", "😀"]),
    ({"pattern": "b"}, ["abc", "b", 1], ["ac", ""]),
    ({"pattern": "^a.c$"}, ["abc"], ["abcd", "abc\n", "a\nc", "a\rc", "a\u2028c"]),
    ({"pattern": "^\\d+$"}, ["123"], ["12a", "\u0663"]),
    ({"pattern": "^\\w$"}, ["a", "_", "1"], ["é", "-"]),
    ({"pattern": "^\\s$"}, [" ", "\u00a0", "\ufeff"], ["a"]),
    ({"pattern": "^\\S$"}, ["a"], [" ", "\u00a0"]),
    ({"pattern": "^[\\s]$"}, ["\u00a0", "\t"], ["a"]),
    ({"pattern": "^[.$]+$"}, ["$.", "."], ["a"]),
    ({"pattern": "a\\$"}, ["a$"], ["a"]),
    ({"pattern": "^[]"}, [], ["a", ""]),
    ({"pattern": "^[^]$"}, ["\n", "a"], ["", "ab"]),
    ({"allOf": [{"type": "integer"}, {"minimum": 2}]}, [2, 3], [1, 2.5]),
    ({"anyOf": [{"type": "integer"}, {"minLength": 2}]}, [1, "ab", None], ["a"]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, [1, 2.5], [3, 1.5]),
    ({"not": {"type": "string"}}, [1, None], ["x"]),
    (
        {"if": {"type": "integer"}, "then": {"minimum": 0}, "else": {"type": "string"}},
        [1, "x"],
        [-1, None],
    ),
    ({"if": {"type": "integer"}, "then": {"minimum": 0}}, [1, None], [-1]),
    ({"if": {"type": "integer"}, "else": {"type": "string"}}, [-1, "x"], [None]),
    ({"if": {"type": "integer"}}, [None, 1], []),
    ({"$ref": "#/$defs/A", "$defs": {"A": {"type": "integer"}}}, [1], ["x"]),
    ({"$ref": "#/definitions/A", "definitions": {"A": {"type": "integer"}}}, [1], ["x"]),
    ({"$ref": "#/$defs/a~1b~0c", "$defs": {"a/b~c": {"type": "integer"}}}, [1], ["x"]),
    ({"$ref": "#/$defs/a%20b", "$defs": {"a b": {"type": "integer"}}}, [1], ["x"]),
    ({"$ref": "#/allOf/1", "allOf": [{}, {"type": "integer"}]}, [1], ["x"]),
    ({"$ref": "#/$defs/A", "minimum": 5, "$defs": {"A": {"type": "integer"}}}, [5], [4, "x"]),
    ({"type": "array", "items": {"$ref": "#"}}, [[], [[], [[]]]], [[1], [[], [[1]]]]),
    (
        {"properties": {"next": {"$ref": "#"}}, "required": ["v"]},
        [{"v": 1, "next": {"v": 2}}],
        [{"v": 1, "next": {}}],
    ),
    (
        {"format": "email", "contentEncoding": "base64", "unevaluatedProperties": False},
        ["nope", {"a": 1}],
        [],
    ),
    (
        {
            "title": "t",
            "description": "d",
            "default": 1,
            "examples": [1],
            "nullable": True,
            "x-foo": 1,
        },
        [None],
        [],
    ),
]


@pytest.mark.parametrize(("schema", "valid", "invalid"), CASES)
def test_keyword(schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    validate = compile_schema(schema)
    oracle = jsonschema.Draft202012Validator(schema)
    for instance in valid:
        validate(instance)
    for instance in invalid:
        with pytest.raises(SchemaError):
            validate(instance)
    # Cross-check with jsonschema, except where we deliberately differ (see the module docstring).
    if not _deliberately_differs(schema):
        assert all(oracle.is_valid(i) for i in valid)
        assert not any(oracle.is_valid(i) for i in invalid)


def _deliberately_differs(schema: Any) -> bool:
    differs = {"dependencies", "additionalItems", "pattern"}  # draft 7 keywords, ECMA regexes
    return isinstance(schema, dict) and (
        not schema.keys().isdisjoint(differs | UNCHECKED_KEYWORDS)
        or isinstance(schema.get("multipleOf"), float)  # decimal, not binary, remainders
        or isinstance(schema.get("items"), list)
        or isinstance(schema.get("exclusiveMinimum"), bool)
        or isinstance(schema.get("exclusiveMaximum"), bool)
    )


@pytest.mark.parametrize(
    ("schema", "instance", "message", "path"),
    [
        ({"type": "integer"}, "x", "Expected `integer`, got `str`", "$"),
        ({"type": "integer"}, True, "Expected `integer`, got `bool`", "$"),
        ({"type": "integer"}, 1.5, "Expected `integer`, got `float`", "$"),
        ({"type": ["string", "null"]}, 1, "Expected `string | null`, got `int`", "$"),
        ({"type": "object"}, [], "Expected `object`, got `array`", "$"),
        ({"type": "array"}, {}, "Expected `array`, got `object`", "$"),
        ({"type": "string"}, None, "Expected `string`, got `null`", "$"),
        (False, 1, "No value is allowed here (schema is `false`)", "$"),
        (
            {"properties": {"a": False}},
            {"a": 1},
            "No value is allowed here (schema is `false`)",
            "$.a",
        ),
        (
            {"properties": {"name": {"type": "string"}}},
            {"name": 1},
            "Expected `string`, got `int`",
            "$.name",
        ),
        (
            {"properties": {"first name": {"type": "string"}}},
            {"first name": 1},
            "Expected `string`, got `int`",
            '$["first name"]',
        ),
        (
            {"additionalProperties": {"type": "string"}},
            {"a.b": 1},
            "Expected `string`, got `int`",
            '$["a.b"]',
        ),
        ({"items": {"type": "string"}}, ["a", "b", 3], "Expected `string`, got `int`", "$[2]"),
        (
            {"properties": {"items": {"items": {"properties": {"age": {"minimum": 0}}}}}},
            {"items": [{}, {"age": 1}, {"age": -1}]},
            "Expected `number` >= 0",
            "$.items[2].age",
        ),
        ({"prefixItems": [{}, {"type": "null"}]}, [1, 2], "Expected `null`, got `int`", "$[1]"),
        (
            {"prefixItems": [{}], "items": {"type": "null"}},
            [1, None, 2],
            "Expected `null`, got `int`",
            "$[2]",
        ),
        ({"prefixItems": [{}], "items": False}, [1, 2], "Expected `array` of length <= 1", "$"),
        ({"required": ["name"]}, {}, "Object missing required field `name`", "$"),
        (
            {"properties": {"a": {}}, "additionalProperties": False},
            {"a": 1, "z": 2},
            "Object contains unknown field `z`",
            "$",
        ),
        (
            {"patternProperties": {"^x": {}}, "additionalProperties": False},
            {"x": 1, "z": 2},
            "Object contains unknown field `z`",
            "$",
        ),
        (
            {"patternProperties": {"^x": {"type": "null"}}},
            {"xa": 1},
            "Expected `null`, got `int`",
            "$.xa",
        ),
        (
            {"propertyNames": {"maxLength": 1}},
            {"ab": 1},
            "Invalid property name `ab`: Expected `string` of length <= 1",
            "$",
        ),
        ({"minProperties": 1}, {}, "Expected `object` of length >= 1", "$"),
        ({"maxProperties": 0}, {"a": 1}, "Expected `object` of length <= 0", "$"),
        (
            {"dependentRequired": {"a": ["b"]}},
            {"a": 1},
            "Object has field `a` but is missing field `b`",
            "$",
        ),
        ({"minItems": 2}, [1], "Expected `array` of length >= 2", "$"),
        ({"maxItems": 1}, [1, 2], "Expected `array` of length <= 1", "$"),
        (
            {"uniqueItems": True},
            [1, 2, 1.0],
            "Expected `array` of unique items, but [0] and [2] are equal",
            "$",
        ),
        (
            {"contains": {"type": "null"}},
            [1],
            "Expected `array` with at least 1 item(s) matching `contains`",
            "$",
        ),
        (
            {"contains": {}, "maxContains": 1},
            [1, 2],
            "Expected `array` with at most 1 item(s) matching `contains`",
            "$",
        ),
        ({"minLength": 2}, "😀", "Expected `string` of length >= 2", "$"),
        ({"maxLength": 1}, "ab", "Expected `string` of length <= 1", "$"),
        ({"pattern": "^a"}, "b", "Expected `string` matching regex '^a'", "$"),
        ({"minimum": 1}, 0, "Expected `number` >= 1", "$"),
        ({"maximum": 1.5}, 2, "Expected `number` <= 1.5", "$"),
        ({"exclusiveMinimum": 1}, 1, "Expected `number` > 1", "$"),
        ({"exclusiveMaximum": 1}, 1, "Expected `number` < 1", "$"),
        ({"minimum": 1, "exclusiveMinimum": True}, 1, "Expected `number` > 1", "$"),
        ({"multipleOf": 2}, 3, "Expected `number` that's a multiple of 2", "$"),
        ({"enum": ["a", "b"]}, "c", 'Invalid enum value "c"; expected one of ["a","b"]', "$"),
        ({"const": {"a": 1}}, {"a": 2}, 'Expected {"a":1}, got {"a":2}', "$"),
        ({"not": {"type": "string"}}, "x", "Value must not match the `not` subschema", "$"),
        (
            {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "x",
            "Expected `integer | null`, got `str`",
            "$",
        ),
        (
            {"anyOf": [{"anyOf": [{"type": "integer"}, {"type": "array"}]}, {"type": "null"}]},
            "x",
            "Expected `integer | array | null`, got `str`",
            "$",
        ),
        (
            {"anyOf": [{"type": "null"}, {"properties": {"a": {"type": "integer"}}}]},
            {"a": "x"},
            "Expected `integer`, got `str`",
            "$.a",
        ),
        (
            {"anyOf": [{"type": "null"}, {"type": "object", "required": ["a"]}]},
            {},
            "Object missing required field `a`",
            "$",
        ),
        (
            {"anyOf": [False, {"properties": {"a": {"type": "null"}}}, {"type": "null"}]},
            {"a": 1},
            "Value matches none of the `anyOf` subschemas: "
            "No value is allowed here (schema is `false`); Expected `null`, got `int` (at `$.a`)",
            "$",
        ),
        (
            {"oneOf": [{"type": "integer"}, {"minimum": 0}]},
            1,
            "Value matches more than one `oneOf` subschema ([0] and [1])",
            "$",
        ),
        (
            {"oneOf": [{"type": "integer"}, {"type": "string"}]},
            None,
            "Expected `integer | string`, got `null`",
            "$",
        ),
        ({"allOf": [{"type": "integer"}, {"minimum": 2}]}, 1, "Expected `number` >= 2", "$"),
        ({"if": {"type": "integer"}, "then": {"minimum": 0}}, -1, "Expected `number` >= 0", "$"),
        (
            {"if": {"type": "integer"}, "else": {"type": "string"}},
            None,
            "Expected `string`, got `null`",
            "$",
        ),
        (
            {"dependentSchemas": {"a": {"properties": {"b": {"type": "string"}}}}},
            {"a": 1, "b": 2},
            "Expected `string`, got `int`",
            "$.b",
        ),
        (
            {
                "$ref": "#/$defs/T",
                "$defs": {
                    "T": {
                        "properties": {
                            "kids": {"items": {"$ref": "#/$defs/T"}},
                            "v": {"type": "integer"},
                        }
                    }
                },
            },
            {"kids": [{"kids": []}, {"kids": [{"v": "x"}]}]},
            "Expected `integer`, got `str`",
            "$.kids[1].kids[0].v",
        ),
    ],
)
def test_message_and_path(schema: Any, instance: Any, message: str, path: str) -> None:
    exc = fails(schema, instance)
    assert (exc.message, exc.path) == (message, path)
    assert str(exc) == f"{message} - at `{path}`"


def test_anyof_message_for_irrelevant_branches() -> None:
    # The `false` branch failed without a type error, so it counts as a real branch failure.
    message, path = error_of({"anyOf": [False, {"type": "string"}]}, 1)
    assert (message, path) == ("No value is allowed here (schema is `false`)", "$")


def test_schema_error_api() -> None:
    exc = SchemaError("Boom", "$.a")
    assert (exc.message, exc.path, str(exc)) == ("Boom", "$.a", "Boom - at `$.a`")
    assert SchemaError("Boom").path == "$"
    copy = pickle.loads(pickle.dumps(exc))
    assert (copy.message, copy.path, str(copy)) == ("Boom", "$.a", "Boom - at `$.a`")
    assert issubclass(SchemaDefinitionError, ValueError)


def test_unchecked_keywords() -> None:
    assert {"format", "contentEncoding", "unevaluatedProperties"} <= UNCHECKED_KEYWORDS
    validate = compile_schema(dict.fromkeys(UNCHECKED_KEYWORDS, False))
    validate({"anything": ["goes"]})


def test_compiled_validator_is_reusable_and_schema_independent() -> None:
    schema: dict[str, Any] = {"properties": {"a": {"enum": [1]}}, "required": ["a"]}
    validate = compile_schema(schema)
    schema["properties"]["a"]["enum"].append(2)
    schema["required"].append("b")
    for _ in range(3):
        validate({"a": 1})
        with pytest.raises(SchemaError):
            validate({"a": 2})


DEEP = 10_000


def _nested_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def _nested_dict(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"next": value}
    return value


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"items": {"$ref": "#"}}, _nested_list(DEEP)),
        ({"properties": {"next": {"$ref": "#"}}}, _nested_dict(DEEP)),
        ({"uniqueItems": True}, [_nested_list(DEEP), 1]),
        ({"enum": [1]}, _nested_list(DEEP)),
        ({"const": [[]]}, _nested_list(DEEP)),
    ],
)
def test_deep_nesting_is_a_schema_error_not_a_crash(schema: Any, instance: Any) -> None:
    assert error_of(schema, instance) == ("Value is nested too deeply", "$")


def test_moderate_recursive_nesting_validates() -> None:
    compile_schema({"items": {"$ref": "#"}})(_nested_list(100))
    compile_schema({"type": "array"})(_nested_list(DEEP))  # no keyword descends: nothing to walk


def _deep_schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    for _ in range(depth):
        schema = {"items": schema}
    return schema


@pytest.mark.parametrize(
    "schema",
    [
        5,
        "string",
        None,
        [],
        {"type": "strnig"},
        {"type": []},
        {"type": ["string", 1]},
        {"type": {"a": 1}},
        {"properties": []},
        {"properties": {"a": 1}},
        {"properties": {"a": {"type": "bad"}}},
        {"required": "a"},
        {"required": [1]},
        {"minLength": -1},
        {"minLength": 1.5},
        {"maxItems": "3"},
        {"minProperties": None},
        {"maxLength": True},
        {"minimum": "0"},
        {"minimum": True},
        {"exclusiveMaximum": "1"},
        {"exclusiveMinimum": None},
        {"multipleOf": 0},
        {"multipleOf": -1},
        {"pattern": "("},
        {"pattern": 5},
        {"patternProperties": {"(": {}}},
        {"additionalProperties": 3},
        {"items": 3},
        {"prefixItems": {}},
        {"prefixItems": [{}], "items": [{}]},
        {"contains": []},
        {"enum": "a"},
        {"uniqueItems": 1},
        {"anyOf": []},
        {"anyOf": {}},
        {"allOf": [3]},
        {"oneOf": [{}, "x"]},
        {"not": "x"},
        {"if": 1, "then": {}},
        {"dependentRequired": {"a": "b"}},
        {"dependentSchemas": {"a": 1}},
        {"$defs": {"A": 1}},
        {"$defs": []},
        {"$ref": "#/$defs/missing"},
        {"$ref": "#/$defs/A/x", "$defs": {"A": {}}},
        {"$ref": "#/allOf/01", "allOf": [{}, {}]},
        {"$ref": "#/allOf/2", "allOf": [{}, {}]},
        {"$ref": "http://example.com/schema"},
        {"$ref": "#anchor"},
        {"$ref": 5},
        {"$dynamicRef": "#meta"},
        {"$recursiveRef": "#"},
        {"properties": {"a": {"$id": "https://example.com/a"}}},
        {"$ref": "#"},
        {"anyOf": [{"type": "null"}, {"$ref": "#"}]},
        {"not": {"$ref": "#"}},
        {"if": {"$ref": "#"}},
        {"dependentSchemas": {"a": {"$ref": "#"}}},
        {"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}},
        {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"allOf": [{"$ref": "#/$defs/A"}]}}},
        {
            # B is first reached under `properties` (progress), but A <-> B loop among themselves.
            "properties": {"x": {"$ref": "#/$defs/B"}},
            "$defs": {
                "A": {"properties": {"y": {"$ref": "#/$defs/B"}}, "allOf": [{"$ref": "#/$defs/B"}]},
                "B": {"allOf": [{"$ref": "#/$defs/A"}]},
            },
        },
        _deep_schema(10_000),
    ],
)
def test_bad_schema_is_rejected_at_compile_time(schema: Any) -> None:
    with pytest.raises(SchemaDefinitionError):
        compile_schema(schema)


def test_schema_definition_error_names_the_location() -> None:
    with pytest.raises(
        SchemaDefinitionError, match=re.escape("at `#/properties/a~1b`: `minLength`")
    ):
        compile_schema({"properties": {"a/b": {"minLength": {"x": -1}}}})
    with pytest.raises(SchemaDefinitionError, match="`exclusiveMaximum` must be a number"):
        compile_schema({"exclusiveMaximum": "1"})
    with pytest.raises(SchemaDefinitionError, match="cycle"):
        compile_schema({"$ref": "#"})


def test_recursion_with_progress_is_fine() -> None:
    validate = compile_schema(
        {"$defs": {"A": {"items": {"$ref": "#/$defs/A"}}}, "$ref": "#/$defs/A"}
    )
    validate([[], [[]]])
    validate = compile_schema({"propertyNames": {"$ref": "#"}, "maxLength": 2})
    validate({"ab": 1})
    with pytest.raises(SchemaError):
        validate({"abc": 1})


# --- msgspec-generated schemas ---------------------------------------------------------------


class Node(msgspec.Struct):
    value: int
    children: list[Node] = []


class Address(msgspec.Struct):
    street: str
    zip_code: Annotated[str, msgspec.Meta(pattern=r"^\d{5}$")]


class Person(msgspec.Struct, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    age: Annotated[int, msgspec.Meta(ge=0)]
    kind: Literal["admin", "user"]
    tags: list[str]
    scores: dict[str, float] = {}
    address: Address | None = None
    nickname: str | None = None
    tree: Node | None = None


PEOPLE = [
    Person(name="Ann", age=0, kind="admin", tags=[]),
    Person(
        name="Bob",
        age=42,
        kind="user",
        tags=["a", "b"],
        scores={"x": 1.5, "y": 2},
        address=Address(street="Main St", zip_code="12345"),
        nickname="bobby",
        tree=Node(1, [Node(2), Node(3, [Node(4)])]),
    ),
]


def _mutations() -> list[tuple[str, Any, str, str]]:
    """(field, new value, expected message, expected path) applied to a copy of PEOPLE[1]."""
    return [
        ("age", -1, "Expected `number` >= 0", "$.age"),
        ("age", "42", "Expected `integer`, got `str`", "$.age"),
        ("age", True, "Expected `integer`, got `bool`", "$.age"),
        ("name", "", "Expected `string` of length >= 1", "$.name"),
        ("kind", "root", 'Invalid enum value "root"; expected one of ["admin","user"]', "$.kind"),
        ("tags", ["a", 1], "Expected `string`, got `int`", "$.tags[1]"),
        ("scores", {"x": "high"}, "Expected `number`, got `str`", "$.scores.x"),
        ("nickname", 5, "Expected `string | null`, got `int`", "$.nickname"),
        (
            "address",
            {"street": "s", "zip_code": "1234"},
            "Expected `string` matching regex '^\\\\d{5}$'",
            "$.address.zip_code",
        ),
        ("address", {"street": "s"}, "Object missing required field `zip_code`", "$.address"),
        (
            "tree",
            {"value": 1, "children": [{"value": 2}, {"value": "x"}]},
            "Expected `integer`, got `str`",
            "$.tree.children[1].value",
        ),
        ("tree", {"children": []}, "Object missing required field `value`", "$.tree"),
        ("unknown", 1, "Object contains unknown field `unknown`", "$"),
    ]


def test_msgspec_schema_accepts_real_objects() -> None:
    validate = compile_schema(msgspec.json.schema(Person))
    for person in PEOPLE:
        validate(msgspec.to_builtins(person))
        validate(msgspec.json.decode(msgspec.json.encode(person)))


@pytest.mark.parametrize(("field", "value", "message", "path"), _mutations())
def test_msgspec_schema_rejects_mutations(field: str, value: Any, message: str, path: str) -> None:
    validate = compile_schema(msgspec.json.schema(Person))
    instance = msgspec.to_builtins(PEOPLE[1])
    instance[field] = value
    assert error_of(msgspec.json.schema(Person), instance) == (message, path)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(instance, Person)
    with pytest.raises(SchemaError):
        validate(instance)


def test_msgspec_schema_rejects_missing_required() -> None:
    instance = msgspec.to_builtins(PEOPLE[0])
    del instance["tags"]
    assert error_of(msgspec.json.schema(Person), instance) == (
        "Object missing required field `tags`",
        "$",
    )


# --- jsonschema as oracle ----------------------------------------------------------------------

KEYS = ["a", "b", "c", "d e"]
DEF_A = "A/x~y"  # exercises ~0/~1 escaping in "#/$defs/A~1x~0y"
REFS_TO_A = ["#/$defs/A~1x~0y"]
REFS_TO_B = ["#/definitions/B", "#"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-4, 4)
    | st.sampled_from([0.0, 1.0, -1.5, 0.5, 2.5, 3.0, 1e15])
    | st.text(alphabet="ab1é😀 ", max_size=4)
)
instances = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)
small_json = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=2)
    ),
    max_leaves=3,
)
numbers = st.integers(-3, 3) | st.sampled_from([0.5, -1.5, 2.5])
counts = st.integers(0, 3)
type_names = st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"])
key_lists = st.lists(st.sampled_from(KEYS), max_size=3, unique=True)

# Keywords whose values contain no subschemas.
SCALAR_KEYWORDS: dict[str, st.SearchStrategy[Any]] = {
    "type": type_names | st.lists(type_names, min_size=1, max_size=3, unique=True),
    "enum": st.lists(small_json, min_size=1, max_size=3),
    "const": small_json,
    "required": key_lists,
    "minProperties": counts,
    "maxProperties": counts,
    "dependentRequired": st.dictionaries(st.sampled_from(KEYS), key_lists, max_size=2),
    "minItems": counts,
    "maxItems": counts,
    "uniqueItems": st.booleans(),
    "minContains": counts,
    "maxContains": counts,
    "minimum": numbers,
    "maximum": numbers,
    "exclusiveMinimum": numbers,
    "exclusiveMaximum": numbers,
    "multipleOf": st.sampled_from([1, 2, 3, 0.5, 0.25, 1.5]),
    "minLength": counts,
    "maxLength": counts,
    "pattern": st.sampled_from(
        ["a", "^a", "b$", "^$", "^.{2}$", "[ab]+", "é", "^[^a]*$", "\\d", "x|😀"]
    ),
}


def _applicator_keywords(children: st.SearchStrategy[Any]) -> dict[str, st.SearchStrategy[Any]]:
    some = st.lists(children, min_size=1, max_size=3)
    return {
        "properties": st.dictionaries(st.sampled_from(KEYS), children, max_size=3),
        "patternProperties": st.dictionaries(
            st.sampled_from(["^a", "b$", " "]), children, max_size=2
        ),
        "additionalProperties": children,
        "propertyNames": children,
        "dependentSchemas": st.dictionaries(st.sampled_from(KEYS), children, max_size=2),
        "items": children,
        "prefixItems": some,
        "contains": children,
        "allOf": some,
        "anyOf": some,
        "oneOf": some,
        "not": children,
        "if": children,
        "then": children,
        "else": children,
    }


def _schema_dicts(keywords: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    names = sorted(keywords)
    return st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True).flatmap(
        lambda chosen: st.fixed_dictionaries({k: keywords[k] for k in chosen})
    )


def _compound(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return _schema_dicts({**SCALAR_KEYWORDS, **_applicator_keywords(children)})


def schemas(refs: list[str]) -> st.SearchStrategy[Any]:
    """Random schemas over every checked keyword; `$ref`s point only at `refs`."""
    ref_schemas = [st.sampled_from(refs).map(lambda r: {"$ref": r})] if refs else []
    leaves = st.one_of(st.booleans(), _schema_dicts(SCALAR_KEYWORDS), *ref_schemas)
    return st.recursive(leaves, _compound, max_leaves=6)


@st.composite
def root_schemas(draw: st.DrawFn) -> Any:
    body = draw(_compound(schemas(REFS_TO_A + REFS_TO_B)))
    a = draw(schemas([]))
    b = draw(schemas(REFS_TO_A))
    return {**body, "$defs": {DEF_A: a}, "definitions": {"B": b}}


BY_TYPE: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "integer": st.integers(-4, 4) | st.sampled_from([1.0, 3.0]),
    "number": st.integers(-4, 4) | st.sampled_from([0.5, -1.5, 2.5, 1e15]),
    "string": st.text(alphabet="ab1é😀 ", max_size=4),
    "array": st.lists(instances, max_size=3),
    "object": st.dictionaries(st.sampled_from(KEYS), instances, max_size=3),
}
OBJECT_KEYWORDS = {
    *("properties", "required", "additionalProperties", "patternProperties", "propertyNames"),
    *("minProperties", "maxProperties", "dependentRequired", "dependentSchemas"),
}
ARRAY_KEYWORDS = {
    *("items", "prefixItems", "contains", "uniqueItems"),
    *("minItems", "maxItems", "minContains", "maxContains"),
}
STRING_KEYWORDS = {"minLength", "maxLength", "pattern"}
NUMBER_KEYWORDS = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}


def _ref_target(root: dict[str, Any], ref: str) -> Any:
    return {"#": root, REFS_TO_A[0]: root["$defs"][DEF_A], REFS_TO_B[0]: root["definitions"]["B"]}[
        ref
    ]


@st.composite
def near(draw: st.DrawFn, schema: Any, root: Any, depth: int = 0) -> Any:
    """Instances shaped like `schema` (keys, items, enum values, branches) so deep checks run."""
    if depth > 3 or not isinstance(schema, dict) or draw(st.integers(0, 5)) == 0:
        return draw(instances)
    branches = [sub for k in ("anyOf", "oneOf", "allOf") for sub in schema.get(k, [])]
    branches += [schema[k] for k in ("if", "then", "else") if k in schema]
    if "$ref" in schema:
        branches.append(_ref_target(root, schema["$ref"]))
    if draw(st.booleans()) and branches:
        return draw(near(draw(st.sampled_from(branches)), root, depth + 1))
    options: list[st.SearchStrategy[Any]] = []
    if "enum" in schema:
        options.append(st.sampled_from(schema["enum"]))
    if "const" in schema:
        options.append(st.just(schema["const"]))
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        options += [BY_TYPE[t] for t in types]
    if not schema.keys().isdisjoint(STRING_KEYWORDS):
        options.append(BY_TYPE["string"])
    if not schema.keys().isdisjoint(NUMBER_KEYWORDS):
        options.append(BY_TYPE["number"])
    if not schema.keys().isdisjoint(OBJECT_KEYWORDS):
        props = schema.get("properties", {})
        keys = sorted({*props, *schema.get("required", []), *KEYS})
        chosen = draw(st.lists(st.sampled_from(keys), max_size=4, unique=True))
        extra = schema.get("additionalProperties", True)
        options.append(
            st.just({k: draw(near(props.get(k, extra), root, depth + 1)) for k in chosen})
        )
    if not schema.keys().isdisjoint(ARRAY_KEYWORDS):
        prefix = schema.get("prefixItems", [])
        rest = schema.get("items", schema.get("contains", True))
        size = draw(st.integers(0, 4))
        items = [prefix[i] if i < len(prefix) else rest for i in range(size)]
        options.append(st.just([draw(near(sub, root, depth + 1)) for sub in items]))
    return draw(st.one_of(options)) if options else draw(instances)


@st.composite
def schemas_with_instances(draw: st.DrawFn) -> tuple[Any, Any]:
    schema = draw(root_schemas())
    return schema, draw(near(schema, schema))


def test_generated_schemas_use_only_checked_keywords() -> None:
    generated = set(SCALAR_KEYWORDS) | set(_applicator_keywords(st.nothing()))
    assert not generated & UNCHECKED_KEYWORDS


def _resolve_path(instance: Any, path: str) -> Any:
    assert path.startswith("$")
    for name, quoted, index in re.findall(r'\.(\w+)|\[("(?:[^"\\]|\\.)*")\]|\[(\d+)\]', path[1:]):
        instance = instance[int(index)] if index else instance[name or msgspec.json.decode(quoted)]
    return instance


@pytest.mark.slow  # ~14 s on 2 cores: 300 generated schemas
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=schemas_with_instances())
def test_agrees_with_jsonschema(case: tuple[Any, Any]) -> None:
    schema, instance = case
    try:
        validate = compile_schema(schema)
    except SchemaDefinitionError as exc:
        assert "cycle" in str(exc)  # e.g. {"anyOf": [{"$ref": "#"}]}: jsonschema would recurse
        reject()
    expected = jsonschema.Draft202012Validator(schema).is_valid(instance)
    try:
        validate(instance)
    except SchemaError as exc:
        assert not expected, f"rejected valid instance: {exc}"
        _resolve_path(instance, exc.path)  # the path points at a real location in the instance
        assert str(exc) == f"{exc.message} - at `{exc.path}`"
    else:
        assert expected, "accepted an invalid instance"
