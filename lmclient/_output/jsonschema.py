"""A small, fast JSON Schema validator for decoded model output.

lmclient checks a model's reply against the user's ``JsonSchema`` before returning it, and may only
depend on httpx and msgspec, so this is a self-contained validator. A schema is compiled once into
closures; validating then costs a few dict lookups and calls per value, and building an error path
costs nothing until something fails.

Semantics are JSON Schema 2020-12. Older forms are understood too: ``items`` as an array (with
``additionalItems``), boolean ``exclusiveMinimum``/``exclusiveMaximum`` (draft 4) and
``dependencies`` (draft 7). ``$ref`` siblings always apply, as in 2020-12. Instances are what
``msgspec.json.decode`` returns: dict, list, str, int, float, bool and None.

Checked keywords: type, enum, const, properties, required, additionalProperties,
patternProperties, propertyNames, minProperties, maxProperties, dependentRequired,
dependentSchemas, dependencies, items, prefixItems, additionalItems, contains, minContains,
maxContains, minItems, maxItems, uniqueItems, minimum, maximum, exclusiveMinimum,
exclusiveMaximum, multipleOf, minLength, maxLength, pattern, allOf, anyOf, oneOf, not, if, then,
else, $ref, $defs, definitions. Every other keyword is an annotation and ignored. Those in
``UNCHECKED_KEYWORDS`` do assert something in JSON Schema; values are NOT checked against them.

Deliberate choices, all failing closed:

* ``pattern`` is searched (not fully matched) with Python's ``re``, rewritten towards ECMA-262:
  ``$`` matches only at the very end, ``.`` excludes line terminators, ``\\d``, ``\\w`` and ``\\b``
  are ASCII-only and ``\\s`` is the ECMA whitespace set.
* ``multipleOf`` uses the decimal value as written (``19.99`` is a multiple of ``0.01``), not the
  binary float.
* ``$ref`` must be a local JSON pointer (``#``, ``#/$defs/X``); anchors, remote refs, a nested
  ``$id``, ``$dynamicRef`` and ``$recursiveRef`` are rejected with ``SchemaDefinitionError``, as
  is a ``$ref`` cycle that returns to a schema without descending into the instance.
* A value nested deeper than the interpreter's recursion limit allows fails with
  ``SchemaError("Value is nested too deeply")``.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, cast
from urllib.parse import unquote

from .jsonschema_checks import (
    Invalid,
    Pointer,
    Validator,
    accept,
    check_any_of,
    check_bound,
    check_const,
    check_contains,
    check_dependent_required,
    check_dependent_schemas,
    check_enum,
    check_if,
    check_items,
    check_length,
    check_multiple_of,
    check_not,
    check_object_fields,
    check_one_of,
    check_pattern,
    check_pattern_fields,
    check_property_names,
    check_required,
    check_unique,
    combine,
    format_path,
    format_pointer,
    forward,
    integral_float,
    reject,
    translate_pattern,
    typed_loose,
    typed_strict,
)

__all__ = [
    "UNCHECKED_KEYWORDS",
    "SchemaCompiler",
    "SchemaDefinitionError",
    "SchemaError",
    "compile_schema",
]

UNCHECKED_KEYWORDS: Final[frozenset[str]] = frozenset(
    {
        "format",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "unevaluatedProperties",
        "unevaluatedItems",
    }
)

_JSON_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "null": (type(None),),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "array": (list,),
    "object": (dict,),
}
_UNSUPPORTED: Final = ("$dynamicRef", "$recursiveRef")


class SchemaError(Exception):
    """The instance does not satisfy the schema."""

    def __init__(self, message: str, path: str = "$") -> None:
        super().__init__(message, path)  # both in `args`, so pickling round-trips
        self.message = message
        self.path = path

    def __str__(self) -> str:
        return f"{self.message} - at `{self.path}`"


class SchemaDefinitionError(ValueError):
    """The schema itself is malformed or uses an unsupported feature."""


def compile_schema(schema: Mapping[str, Any] | bool) -> Callable[[Any], None]:
    """Compile once; the returned function raises SchemaError on the first violation."""
    compiler = SchemaCompiler(schema)
    try:
        root = compiler.compile(schema, ())
    except RecursionError:
        raise SchemaDefinitionError("Schema is nested too deeply") from None
    compiler.check_cycles()

    def validate(instance: Any) -> None:
        try:
            root(instance)
        except Invalid as exc:
            raise SchemaError(exc.message, format_path(reversed(exc.segments))) from None
        except RecursionError:
            raise SchemaError("Value is nested too deeply") from None

    return validate


class SchemaCompiler:
    """Compiles each subschema once, memoised by JSON pointer so that `$ref` cycles terminate."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.done: dict[Pointer, Validator] = {}
        self.pending: dict[Pointer, list[Validator]] = {}
        # Edges to subschemas applied to the same instance; a cycle here would never terminate.
        self.in_place: dict[Pointer, list[Pointer]] = {}

    def compile(self, schema: Any, ptr: Pointer) -> Validator:
        fn = self.done.get(ptr)
        if fn is not None:
            return fn
        if ptr in self.pending:
            return forward(self.pending[ptr])
        cell: list[Validator] = []
        self.pending[ptr] = cell
        fn = self.build(schema, ptr)
        cell.append(fn)
        del self.pending[ptr]
        self.done[ptr] = fn
        return fn

    def check_cycles(self) -> None:
        state: dict[Pointer, bool] = {}  # False while on the DFS stack, True when finished
        for start in self.in_place:
            if start in state:
                continue
            state[start] = False
            stack = [(start, iter(self.in_place[start]))]
            while stack:
                node, edges = stack[-1]
                for nxt in edges:
                    if nxt not in state:
                        state[nxt] = False
                        stack.append((nxt, iter(self.in_place.get(nxt, ()))))
                        break
                    if not state[nxt]:
                        raise SchemaDefinitionError(
                            f"`$ref` cycle at `{format_pointer(nxt)}` never descends into the"
                            " instance, so validation would not terminate"
                        )
                else:
                    state[node] = True
                    stack.pop()

    def sub(self, schema: Any, ptr: Pointer, *tokens: str, in_place: bool = False) -> Validator:
        child = (*ptr, *tokens)
        if in_place:
            self.in_place.setdefault(ptr, []).append(child)
        return self.compile(schema, child)

    def subs(
        self, schema: Mapping[str, Any], key: str, ptr: Pointer, *, in_place: bool = False
    ) -> list[Validator]:
        """Compile a non-empty array of subschemas."""
        value = schema[key]
        if not isinstance(value, (list, tuple)) or not value:
            raise _error(ptr, f"`{key}` must be a non-empty array of schemas")
        return [self.sub(s, ptr, key, str(i), in_place=in_place) for i, s in enumerate(value)]

    def ref(self, ref: Any, ptr: Pointer) -> Validator:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise _error(ptr, f"only local `$ref`s like '#/$defs/Name' are supported, got {ref!r}")
        fragment = unquote(ref[1:])
        if fragment and not fragment.startswith("/"):
            raise _error(ptr, f"`$ref` anchors are not supported, got {ref!r}")
        target = tuple(t.replace("~1", "/").replace("~0", "~") for t in fragment.split("/")[1:])
        node = self.root
        for token in target:
            if isinstance(node, Mapping) and token in node:
                node = node[token]
            elif (
                isinstance(node, (list, tuple))
                and token.isascii()
                and token.isdigit()
                and str(int(token)) == token
                and int(token) < len(node)
            ):
                node = node[int(token)]
            else:
                raise _error(ptr, f"cannot resolve `$ref` {ref!r}")
        self.in_place.setdefault(ptr, []).append(target)
        return self.compile(node, target)

    def build(self, schema: Any, ptr: Pointer) -> Validator:
        if schema is True:
            return accept
        if schema is False:
            return reject
        if not isinstance(schema, Mapping):
            raise _error(ptr, f"expected a schema (object or boolean), got {schema!r:.80}")
        if ptr and "$id" in schema:
            raise _error(ptr, "`$id` is only supported at the root")
        for keyword in _UNSUPPORTED:
            if keyword in schema:
                raise _error(ptr, f"`{keyword}` is not supported")
        for defs in ("$defs", "definitions"):
            for name, sub in self.mapping(schema, defs, ptr).items():
                self.sub(sub, ptr, defs, name)

        kinds: dict[type, list[Validator]] = {
            dict: self.object_checks(schema, ptr),
            list: self.array_checks(schema, ptr),
            str: self.string_checks(schema, ptr),
            int: self.number_checks(schema, ptr),
        }
        kinds[float] = kinds[int]
        names = self.type_names(schema, ptr)
        checks: list[Validator] = []
        if names is None:
            table = {kind: fn for kind, sub in kinds.items() if (fn := combine(sub)) is not None}
            if table:
                checks.append(typed_loose(table))
        else:
            table, plain = {}, set()
            for kind in {t for n in names for t in _JSON_TYPES[n]}:
                fn = combine(kinds.get(kind, []))
                if fn is None:
                    plain.add(kind)
                else:
                    table[kind] = fn
            if "integer" in names and "number" not in names:
                table[float] = integral_float(names, combine(kinds[float]))
            checks.append(typed_strict(names, frozenset(plain), table))
        checks += self.generic_checks(schema, ptr)
        return combine(checks) or accept

    def generic_checks(self, schema: Mapping[str, Any], ptr: Pointer) -> list[Validator]:
        """Keywords that apply to values of every type."""
        checks: list[Validator] = []
        if "enum" in schema:
            if not isinstance(schema["enum"], (list, tuple)):
                raise _error(ptr, "`enum` must be an array")
            checks.append(check_enum(list(schema["enum"])))
        if "const" in schema:
            checks.append(check_const(schema["const"]))
        if "$ref" in schema:
            checks.append(self.ref(schema["$ref"], ptr))
        if "allOf" in schema:
            checks += self.subs(schema, "allOf", ptr, in_place=True)
        if "anyOf" in schema:
            checks.append(check_any_of(tuple(self.subs(schema, "anyOf", ptr, in_place=True))))
        if "oneOf" in schema:
            checks.append(check_one_of(tuple(self.subs(schema, "oneOf", ptr, in_place=True))))
        if "not" in schema:
            checks.append(check_not(self.sub(schema["not"], ptr, "not", in_place=True)))
        if "if" in schema:
            branches = [
                self.sub(schema[k], ptr, k, in_place=True) if k in schema else accept
                for k in ("if", "then", "else")
            ]
            if branches[1] is not accept or branches[2] is not accept:
                checks.append(check_if(*branches))
        return checks

    def object_checks(self, schema: Mapping[str, Any], ptr: Pointer) -> list[Validator]:
        checks: list[Validator] = []
        required = self.strings(schema, "required", ptr)
        props = {
            name: self.sub(sub, ptr, "properties", name)
            for name, sub in self.mapping(schema, "properties", ptr).items()
        }
        patterns = tuple(
            (self.regex(pattern, ptr), self.sub(sub, ptr, "patternProperties", pattern))
            for pattern, sub in self.mapping(schema, "patternProperties", ptr).items()
        )
        extra: Validator | None = accept
        if "additionalProperties" in schema:
            extra = self.sub(schema["additionalProperties"], ptr, "additionalProperties")
            extra = None if extra is reject else extra
        if patterns:
            checks.append(check_pattern_fields(required, props, patterns, extra))
        elif props or extra is not accept:
            checks.append(check_object_fields(required, props, extra))
        elif required:
            checks.append(check_required(required))
        if "propertyNames" in schema:
            checks.append(
                check_property_names(self.sub(schema["propertyNames"], ptr, "propertyNames"))
            )
        low, high = (
            self.count(schema, "minProperties", ptr),
            self.count(schema, "maxProperties", ptr),
        )
        if low is not None or high is not None:
            checks.append(check_length("object", low, high))
        dep_required: dict[str, tuple[str, ...]] = {}
        dep_schemas: dict[str, Validator] = {}
        for name in self.mapping(schema, "dependentRequired", ptr):
            dep_required[name] = self.strings(schema["dependentRequired"], name, ptr)
        for name, sub in self.mapping(schema, "dependentSchemas", ptr).items():
            dep_schemas[name] = self.sub(sub, ptr, "dependentSchemas", name, in_place=True)
        for name, dep in self.mapping(schema, "dependencies", ptr).items():
            if isinstance(dep, (list, tuple)):
                dep_required[name] = self.strings(schema["dependencies"], name, ptr)
            else:
                dep_schemas[name] = self.sub(dep, ptr, "dependencies", name, in_place=True)
        if dep_required:
            checks.append(check_dependent_required(tuple(dep_required.items())))
        if dep_schemas:
            checks.append(check_dependent_schemas(tuple(dep_schemas.items())))
        return checks

    def array_checks(self, schema: Mapping[str, Any], ptr: Pointer) -> list[Validator]:
        checks: list[Validator] = []
        prefix_key = "prefixItems"
        rest_key = "items"
        if isinstance(schema.get("items"), (list, tuple)):
            if "prefixItems" in schema:
                raise _error(ptr, "`items` must be a schema when `prefixItems` is present")
            prefix_key, rest_key = "items", "additionalItems"
        prefix = tuple(self.subs(schema, prefix_key, ptr)) if prefix_key in schema else ()
        rest = self.sub(schema[rest_key], ptr, rest_key) if rest_key in schema else accept
        forbid_rest = rest is reject
        if prefix or forbid_rest or rest is not accept:
            checks.append(
                check_items(prefix, None if rest in (accept, reject) else rest, forbid_rest)
            )
        low, high = self.count(schema, "minItems", ptr), self.count(schema, "maxItems", ptr)
        if low is not None or high is not None:
            checks.append(check_length("array", low, high))
        unique = schema.get("uniqueItems", False)
        if not isinstance(unique, bool):
            raise _error(ptr, "`uniqueItems` must be a boolean")
        if unique:
            checks.append(check_unique)
        if "contains" in schema:
            low = self.count(schema, "minContains", ptr)
            high = self.count(schema, "maxContains", ptr)
            fn = self.sub(schema["contains"], ptr, "contains")
            checks.append(check_contains(fn, 1 if low is None else low, high))
        return checks

    def string_checks(self, schema: Mapping[str, Any], ptr: Pointer) -> list[Validator]:
        checks: list[Validator] = []
        low, high = self.count(schema, "minLength", ptr), self.count(schema, "maxLength", ptr)
        if low is not None or high is not None:
            checks.append(check_length("string", low, high))
        if "pattern" in schema:
            checks.append(check_pattern(self.regex(schema["pattern"], ptr), schema["pattern"]))
        return checks

    def number_checks(self, schema: Mapping[str, Any], ptr: Pointer) -> list[Validator]:
        checks: list[Validator] = []
        for key, compare, symbol, strict, strict_symbol in (
            ("minimum", operator.ge, ">=", operator.gt, ">"),
            ("maximum", operator.le, "<=", operator.lt, "<"),
        ):
            exclusive_key = f"exclusive{key.title()}"
            exclusive = schema.get(exclusive_key)
            if isinstance(exclusive, bool):  # draft 4: a flag that tightens minimum/maximum
                if exclusive:
                    compare, symbol = strict, strict_symbol
            elif exclusive_key in schema:
                limit = self.number(exclusive, exclusive_key, ptr)
                checks.append(check_bound(strict, strict_symbol, limit))
            if key in schema:
                checks.append(check_bound(compare, symbol, self.number(schema[key], key, ptr)))
        if "multipleOf" in schema:
            divisor = self.number(schema["multipleOf"], "multipleOf", ptr)
            if divisor <= 0:
                raise _error(ptr, "`multipleOf` must be greater than 0")
            checks.append(check_multiple_of(divisor))
        return checks

    @staticmethod
    def type_names(schema: Mapping[str, Any], ptr: Pointer) -> tuple[str, ...] | None:
        """The `type` keyword as a tuple of names, or None when absent (any type passes)."""
        if "type" not in schema:
            return None
        value = schema["type"]
        names = (value,) if isinstance(value, str) else value
        if (
            not isinstance(names, (list, tuple))
            or not names
            or not all(isinstance(n, str) and n in _JSON_TYPES for n in names)
        ):
            raise _error(ptr, f"`type` must be one of {sorted(_JSON_TYPES)} or an array of them")
        return tuple(dict.fromkeys(names))

    @staticmethod
    def mapping(schema: Mapping[str, Any], key: str, ptr: Pointer) -> Mapping[str, Any]:
        """An object-valued keyword (properties, $defs, ...), empty when absent."""
        value = schema.get(key, {})
        if not isinstance(value, Mapping):
            raise _error(ptr, f"`{key}` must be an object")
        return value

    @staticmethod
    def strings(schema: Mapping[str, Any], key: str, ptr: Pointer) -> tuple[str, ...]:
        """A list of property names (required, dependentRequired), empty when absent."""
        value = schema.get(key, ())
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise _error(ptr, f"`{key}` must be an array of strings")
        return tuple(value)

    @staticmethod
    def count(schema: Mapping[str, Any], key: str, ptr: Pointer) -> int | None:
        """A length limit; integral floats like 2.0 are accepted, as JSON Schema allows."""
        if key not in schema:
            return None
        value = schema[key]
        if (type(value) is int or (type(value) is float and value.is_integer())) and value >= 0:
            return int(value)
        raise _error(ptr, f"`{key}` must be a non-negative integer")

    @staticmethod
    def number(value: Any, key: str, ptr: Pointer) -> float:
        """A numeric limit; booleans and NaN are not numbers here."""
        if type(value) not in (int, float) or value != value:
            raise _error(ptr, f"`{key}` must be a number")
        return cast(float, value)  # int or float, kept exact

    @staticmethod
    def regex(pattern: Any, ptr: Pointer) -> Callable[[str], object]:
        """Compile a regex up front (ECMA-adjusted), so a bad one fails before any request."""
        if not isinstance(pattern, str):
            raise _error(ptr, f"pattern must be a string, got {pattern!r:.80}")
        try:
            return re.compile(translate_pattern(pattern), re.ASCII).search
        except re.error as exc:
            raise _error(ptr, f"invalid regex {pattern!r}: {exc}") from None


def _error(ptr: Pointer, text: str) -> SchemaDefinitionError:
    return SchemaDefinitionError(f"Invalid schema at `{format_pointer(ptr)}`: {text}")
