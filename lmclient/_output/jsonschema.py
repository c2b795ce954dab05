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
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import Any, Final, cast
from urllib.parse import unquote

import msgspec

__all__ = ["UNCHECKED_KEYWORDS", "SchemaDefinitionError", "SchemaError", "compile_schema"]

Validator = Callable[[Any], None]
_Pointer = tuple[str, ...]

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
_TYPE_NAMES: Final[dict[type, str]] = {
    type(None): "null",
    bool: "bool",
    int: "int",
    float: "float",
    str: "str",
    list: "array",
    dict: "object",
}
_ECMA_SPACE: Final = (
    "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
)
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


class _Invalid(Exception):
    """Internal failure; the path is collected innermost-first while unwinding, success is free."""

    def __init__(self, message: str, expected: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.expected = expected  # JSON type names, set only for a type mismatch at this level
        self.segments: list[str | int] = []


def compile_schema(schema: Mapping[str, Any] | bool) -> Callable[[Any], None]:
    """Compile once; the returned function raises SchemaError on the first violation."""
    compiler = _Compiler(schema)
    try:
        root = compiler.compile(schema, ())
    except RecursionError:
        raise SchemaDefinitionError("Schema is nested too deeply") from None
    compiler.check_cycles()

    def validate(instance: Any) -> None:
        try:
            root(instance)
        except _Invalid as exc:
            raise SchemaError(exc.message, _format_path(reversed(exc.segments))) from None
        except RecursionError:
            raise SchemaError("Value is nested too deeply") from None

    return validate


def _accept(value: Any) -> None:
    """The `true` schema."""


def _reject(value: Any) -> None:
    """The `false` schema."""
    raise _Invalid("No value is allowed here (schema is `false`)")


def _failure(fn: Validator, value: Any) -> _Invalid | None:
    """Run a check whose failure is an answer (anyOf, not, contains, ...) rather than an error."""
    try:
        fn(value)
    except _Invalid as exc:
        return exc
    return None


def _seq(checks: list[Validator]) -> Validator | None:
    """Run several checks with as few extra calls as possible."""
    if len(checks) <= 1:
        return checks[0] if checks else None
    frozen = tuple(checks)

    def check(value: Any) -> None:
        for fn in frozen:
            fn(value)

    return check


def _key(value: Any) -> Any:
    """A hashable stand-in with JSON equality: 1 == 1.0, but True != 1 and [True] != [1]."""
    kind = type(value)
    if kind is bool:
        return ("b", value)
    if kind is list:
        return ("l", tuple(map(_key, value)))
    if kind is dict:
        return ("d", frozenset((k, _key(v)) for k, v in value.items()))
    return value


def _show(value: Any, limit: int = 80) -> str:
    """Render a value as short JSON for an error message."""
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _format_path(segments: Iterable[str | int]) -> str:
    """msgspec-style path: `$`, `$.name`, `$.items[2]`; odd keys are JSON-quoted in brackets."""
    parts = ["$"]
    for seg in segments:
        if isinstance(seg, int):
            parts.append(f"[{seg}]")
        elif seg.isidentifier():
            parts.append(f".{seg}")
        else:
            parts.append(f"[{msgspec.json.encode(seg).decode()}]")
    return "".join(parts)


def _format_pointer(ptr: _Pointer) -> str:
    return "#" + "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in ptr)


def _type_error(expected: tuple[str, ...], value: Any) -> _Invalid:
    got = _TYPE_NAMES.get(type(value), type(value).__name__)
    return _Invalid(f"Expected `{' | '.join(expected)}`, got `{got}`", expected)


def _no_match(keyword: str, errors: list[_Invalid], value: Any) -> _Invalid:
    """Explain a failed anyOf/oneOf: merged type errors, the one branch past its type check, or all.

    Type mismatches of the value itself say little, so the branches that got further win.
    """
    deeper = [e for e in errors if e.segments or not e.expected]
    if not deeper:
        return _type_error(tuple(dict.fromkeys(n for e in errors for n in e.expected)), value)
    if len(deeper) == 1:
        return deeper[0]
    details = "; ".join(
        f"{e.message} (at `{_format_path(reversed(e.segments))}`)" if e.segments else e.message
        for e in deeper
    )
    return _Invalid(f"Value matches none of the `{keyword}` subschemas: {details}")


def _translate_pattern(pattern: str) -> str:
    """Rewrite ECMA-262 constructs Python's `re` reads more loosely, so `pattern` fails closed."""
    out: list[str] = []
    in_class = False
    i, end = 0, len(pattern)
    while i < end:
        ch = pattern[i]
        i += 1
        if ch == "\\" and i < end:
            esc = pattern[i]
            i += 1
            if esc == "s":
                out.append(_ECMA_SPACE if in_class else f"[{_ECMA_SPACE}]")
            elif esc == "S" and not in_class:
                out.append(f"[^{_ECMA_SPACE}]")
            else:
                out.append(ch + esc)
        elif in_class:
            in_class = ch != "]"
            out.append(ch)
        elif ch == "[":
            negated = pattern.startswith("^", i)
            if pattern.startswith("]", i + negated):  # ECMA `[]` matches nothing, `[^]` anything
                out.append("(?s:.)" if negated else "(?!)")
                i += 1 + negated
            else:
                in_class = True
                out.append(ch)
        elif ch == "$":
            out.append("\\Z")
        elif ch == ".":
            out.append("[^\\n\\r\\u2028\\u2029]")
        else:
            out.append(ch)
    return "".join(out)


def _length(kind: str, low: int | None, high: int | None) -> Validator:
    """minLength/maxLength, minItems/maxItems and minProperties/maxProperties."""

    def check(value: Any) -> None:
        size = len(value)
        if low is not None and size < low:
            raise _Invalid(f"Expected `{kind}` of length >= {low}")
        if high is not None and size > high:
            raise _Invalid(f"Expected `{kind}` of length <= {high}")

    return check


def _bound(compare: Callable[[Any, Any], bool], symbol: str, limit: float) -> Validator:
    """minimum, maximum, exclusiveMinimum and exclusiveMaximum."""
    message = f"Expected `number` {symbol} {limit}"

    def check(value: Any) -> None:
        if not compare(value, limit):
            raise _Invalid(message)

    return check


def _exact(number: float) -> Fraction:
    """The decimal value a float was written as (its shortest repr), or an int's exact value."""
    return Fraction(repr(number)) if type(number) is float else Fraction(number)


def _multiple_of(divisor: float) -> Validator:
    message = f"Expected `number` that's a multiple of {divisor}"
    exact = _exact(divisor)
    int_divisor = type(divisor) is int

    def check(value: Any) -> None:
        if int_divisor and type(value) is int:
            if value % divisor:
                raise _Invalid(message)
        elif (_exact(value) / exact).denominator != 1:
            raise _Invalid(message)

    return check


def _unique(value: Any) -> None:
    seen: dict[Any, int] = {}
    for index, item in enumerate(value):
        first = seen.setdefault(_key(item), index)
        if first != index:
            raise _Invalid(
                f"Expected `array` of unique items, but [{first}] and [{index}] are equal"
            )


def _object_fields(
    required: tuple[str, ...], props: dict[str, Validator], extra: Validator | None
) -> Validator:
    """required + properties + additionalProperties (None = forbidden) in one pass over the keys."""

    def check(value: Any) -> None:
        for name in required:
            if name not in value:
                raise _Invalid(f"Object missing required field `{name}`")
        key = ""
        try:
            for key, item in value.items():
                fn = props.get(key, extra)
                if fn is None:
                    break
                fn(item)
            else:
                return
        except _Invalid as exc:
            exc.segments.append(key)
            raise
        raise _Invalid(f"Object contains unknown field `{key}`")

    return check


def _pattern_fields(
    required: tuple[str, ...],
    props: dict[str, Validator],
    patterns: tuple[tuple[Callable[[str], object], Validator], ...],
    extra: Validator | None,
) -> Validator:
    """As `_object_fields`, plus patternProperties (additionalProperties skips matched keys)."""

    def check(value: Any) -> None:
        for name in required:
            if name not in value:
                raise _Invalid(f"Object missing required field `{name}`")
        key = ""
        unknown = False
        try:
            for key, item in value.items():
                fn = props.get(key)
                matched = fn is not None
                if fn is not None:
                    fn(item)
                for search, pattern_fn in patterns:
                    if search(key):
                        matched = True
                        pattern_fn(item)
                if not matched:
                    if extra is None:
                        unknown = True
                        break
                    extra(item)
        except _Invalid as exc:
            exc.segments.append(key)
            raise
        if unknown:
            raise _Invalid(f"Object contains unknown field `{key}`")

    return check


def _required(required: tuple[str, ...]) -> Validator:
    def check(value: Any) -> None:
        for name in required:
            if name not in value:
                raise _Invalid(f"Object missing required field `{name}`")

    return check


def _property_names(fn: Validator) -> Validator:
    def check(value: Any) -> None:
        for key in value:
            exc = _failure(fn, key)
            if exc is not None:
                raise _Invalid(f"Invalid property name `{key}`: {exc.message}")

    return check


def _dependent_required(deps: tuple[tuple[str, tuple[str, ...]], ...]) -> Validator:
    def check(value: Any) -> None:
        for name, needed in deps:
            if name in value:
                for other in needed:
                    if other not in value:
                        raise _Invalid(f"Object has field `{name}` but is missing field `{other}`")

    return check


def _dependent_schemas(deps: tuple[tuple[str, Validator], ...]) -> Validator:
    def check(value: Any) -> None:
        for name, fn in deps:
            if name in value:
                fn(value)

    return check


def _items(prefix: tuple[Validator, ...], rest: Validator | None, forbid_rest: bool) -> Validator:
    """prefixItems + items (or the old array form of items + additionalItems)."""
    count = len(prefix)

    def check(value: Any) -> None:
        if forbid_rest and len(value) > count:
            raise _Invalid(f"Expected `array` of length <= {count}")
        index = 0
        try:
            for index, (fn, item) in enumerate(zip(prefix, value, strict=False)):  # noqa: B007
                fn(item)
            if rest is not None:
                for index in range(count, len(value)):
                    rest(value[index])
        except _Invalid as exc:
            exc.segments.append(index)
            raise

    return check


def _contains(fn: Validator, low: int, high: int | None) -> Validator:
    def check(value: Any) -> None:
        found = 0
        for item in value:
            if _failure(fn, item) is not None:
                continue
            found += 1
            if high is None and found >= low:
                return
        if found < low:
            raise _Invalid(f"Expected `array` with at least {low} item(s) matching `contains`")
        if high is not None and found > high:
            raise _Invalid(f"Expected `array` with at most {high} item(s) matching `contains`")

    return check


def _pattern(search: Callable[[str], object], pattern: str) -> Validator:
    message = f"Expected `string` matching regex {pattern!r}"

    def check(value: Any) -> None:
        if not search(value):
            raise _Invalid(message)

    return check


def _enum(options: list[Any]) -> Validator:
    keys = frozenset(map(_key, options))
    allowed = _show(options)

    def check(value: Any) -> None:
        if _key(value) not in keys:
            raise _Invalid(f"Invalid enum value {_show(value)}; expected one of {allowed}")

    return check


def _const(expected: Any) -> Validator:
    key = _key(expected)
    shown = _show(expected)

    def check(value: Any) -> None:
        if _key(value) != key:
            raise _Invalid(f"Expected {shown}, got {_show(value)}")

    return check


def _any_of(subs: tuple[Validator, ...]) -> Validator:
    def check(value: Any) -> None:
        errors = []
        for fn in subs:
            exc = _failure(fn, value)
            if exc is None:
                return
            errors.append(exc)
        raise _no_match("anyOf", errors, value)

    return check


def _one_of(subs: tuple[Validator, ...]) -> Validator:
    def check(value: Any) -> None:
        errors = []
        matched: list[int] = []
        for index, fn in enumerate(subs):
            exc = _failure(fn, value)
            if exc is not None:
                errors.append(exc)
            else:
                matched.append(index)
                if len(matched) > 1:
                    first, second = matched
                    raise _Invalid(
                        f"Value matches more than one `oneOf` subschema ([{first}] and [{second}])"
                    )
        if not matched:
            raise _no_match("oneOf", errors, value)

    return check


def _not(fn: Validator) -> Validator:
    def check(value: Any) -> None:
        if _failure(fn, value) is None:
            raise _Invalid("Value must not match the `not` subschema")

    return check


def _if(condition: Validator, then: Validator, otherwise: Validator) -> Validator:
    def check(value: Any) -> None:
        (then if _failure(condition, value) is None else otherwise)(value)

    return check


def _forward(cell: list[Validator]) -> Validator:
    """A `$ref` to a schema still being compiled; `cell` is filled once it is done."""

    def check(value: Any) -> None:
        cell[0](value)

    return check


def _typed_loose(table: dict[type, Validator]) -> Validator:
    """Type-specific keywords without a `type` keyword: other types pass."""

    def check(value: Any) -> None:
        fn = table.get(type(value))
        if fn is not None:
            fn(value)

    return check


def _typed_strict(
    names: tuple[str, ...], plain: frozenset[type], table: dict[type, Validator]
) -> Validator:
    """`type` plus type-specific keywords in one dispatch on the value's exact Python type.

    `plain` holds the allowed types that need no further checks; `table` the ones that do.
    """

    def check(value: Any) -> None:
        kind = type(value)
        if kind in plain:
            return
        fn = table.get(kind)
        if fn is None:
            raise _type_error(names, value)
        fn(value)

    return check


def _integral_float(names: tuple[str, ...], then: Validator | None) -> Validator:
    """A float is an `integer` when it has no fractional part (JSON Schema's definition)."""

    def check(value: Any) -> None:
        if not value.is_integer():
            raise _type_error(names, value)
        if then is not None:
            then(value)

    return check


class _Compiler:
    """Compiles each subschema once, memoised by JSON pointer so that `$ref` cycles terminate."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.done: dict[_Pointer, Validator] = {}
        self.pending: dict[_Pointer, list[Validator]] = {}
        # Edges to subschemas applied to the same instance; a cycle here would never terminate.
        self.in_place: dict[_Pointer, list[_Pointer]] = {}

    def compile(self, schema: Any, ptr: _Pointer) -> Validator:
        fn = self.done.get(ptr)
        if fn is not None:
            return fn
        if ptr in self.pending:
            return _forward(self.pending[ptr])
        cell: list[Validator] = []
        self.pending[ptr] = cell
        fn = self.build(schema, ptr)
        cell.append(fn)
        del self.pending[ptr]
        self.done[ptr] = fn
        return fn

    def check_cycles(self) -> None:
        state: dict[_Pointer, bool] = {}  # False while on the DFS stack, True when finished
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
                            f"`$ref` cycle at `{_format_pointer(nxt)}` never descends into the"
                            " instance, so validation would not terminate"
                        )
                else:
                    state[node] = True
                    stack.pop()

    def sub(self, schema: Any, ptr: _Pointer, *tokens: str, in_place: bool = False) -> Validator:
        child = (*ptr, *tokens)
        if in_place:
            self.in_place.setdefault(ptr, []).append(child)
        return self.compile(schema, child)

    def subs(
        self, schema: Mapping[str, Any], key: str, ptr: _Pointer, *, in_place: bool = False
    ) -> list[Validator]:
        """Compile a non-empty array of subschemas."""
        value = schema[key]
        if not isinstance(value, (list, tuple)) or not value:
            raise _error(ptr, f"`{key}` must be a non-empty array of schemas")
        return [self.sub(s, ptr, key, str(i), in_place=in_place) for i, s in enumerate(value)]

    def ref(self, ref: Any, ptr: _Pointer) -> Validator:
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

    def build(self, schema: Any, ptr: _Pointer) -> Validator:
        if schema is True:
            return _accept
        if schema is False:
            return _reject
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
            table = {kind: fn for kind, sub in kinds.items() if (fn := _seq(sub)) is not None}
            if table:
                checks.append(_typed_loose(table))
        else:
            table, plain = {}, set()
            for kind in {t for n in names for t in _JSON_TYPES[n]}:
                fn = _seq(kinds.get(kind, []))
                if fn is None:
                    plain.add(kind)
                else:
                    table[kind] = fn
            if "integer" in names and "number" not in names:
                table[float] = _integral_float(names, _seq(kinds[float]))
            checks.append(_typed_strict(names, frozenset(plain), table))
        checks += self.generic_checks(schema, ptr)
        return _seq(checks) or _accept

    def generic_checks(self, schema: Mapping[str, Any], ptr: _Pointer) -> list[Validator]:
        """Keywords that apply to values of every type."""
        checks: list[Validator] = []
        if "enum" in schema:
            if not isinstance(schema["enum"], (list, tuple)):
                raise _error(ptr, "`enum` must be an array")
            checks.append(_enum(list(schema["enum"])))
        if "const" in schema:
            checks.append(_const(schema["const"]))
        if "$ref" in schema:
            checks.append(self.ref(schema["$ref"], ptr))
        if "allOf" in schema:
            checks += self.subs(schema, "allOf", ptr, in_place=True)
        if "anyOf" in schema:
            checks.append(_any_of(tuple(self.subs(schema, "anyOf", ptr, in_place=True))))
        if "oneOf" in schema:
            checks.append(_one_of(tuple(self.subs(schema, "oneOf", ptr, in_place=True))))
        if "not" in schema:
            checks.append(_not(self.sub(schema["not"], ptr, "not", in_place=True)))
        if "if" in schema:
            branches = [
                self.sub(schema[k], ptr, k, in_place=True) if k in schema else _accept
                for k in ("if", "then", "else")
            ]
            if branches[1] is not _accept or branches[2] is not _accept:
                checks.append(_if(*branches))
        return checks

    def object_checks(self, schema: Mapping[str, Any], ptr: _Pointer) -> list[Validator]:
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
        extra: Validator | None = _accept
        if "additionalProperties" in schema:
            extra = self.sub(schema["additionalProperties"], ptr, "additionalProperties")
            extra = None if extra is _reject else extra
        if patterns:
            checks.append(_pattern_fields(required, props, patterns, extra))
        elif props or extra is not _accept:
            checks.append(_object_fields(required, props, extra))
        elif required:
            checks.append(_required(required))
        if "propertyNames" in schema:
            checks.append(_property_names(self.sub(schema["propertyNames"], ptr, "propertyNames")))
        low, high = (
            self.count(schema, "minProperties", ptr),
            self.count(schema, "maxProperties", ptr),
        )
        if low is not None or high is not None:
            checks.append(_length("object", low, high))
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
            checks.append(_dependent_required(tuple(dep_required.items())))
        if dep_schemas:
            checks.append(_dependent_schemas(tuple(dep_schemas.items())))
        return checks

    def array_checks(self, schema: Mapping[str, Any], ptr: _Pointer) -> list[Validator]:
        checks: list[Validator] = []
        prefix_key = "prefixItems"
        rest_key = "items"
        if isinstance(schema.get("items"), (list, tuple)):
            if "prefixItems" in schema:
                raise _error(ptr, "`items` must be a schema when `prefixItems` is present")
            prefix_key, rest_key = "items", "additionalItems"
        prefix = tuple(self.subs(schema, prefix_key, ptr)) if prefix_key in schema else ()
        rest = self.sub(schema[rest_key], ptr, rest_key) if rest_key in schema else _accept
        forbid_rest = rest is _reject
        if prefix or forbid_rest or rest is not _accept:
            checks.append(_items(prefix, None if rest in (_accept, _reject) else rest, forbid_rest))
        low, high = self.count(schema, "minItems", ptr), self.count(schema, "maxItems", ptr)
        if low is not None or high is not None:
            checks.append(_length("array", low, high))
        unique = schema.get("uniqueItems", False)
        if not isinstance(unique, bool):
            raise _error(ptr, "`uniqueItems` must be a boolean")
        if unique:
            checks.append(_unique)
        if "contains" in schema:
            low = self.count(schema, "minContains", ptr)
            high = self.count(schema, "maxContains", ptr)
            fn = self.sub(schema["contains"], ptr, "contains")
            checks.append(_contains(fn, 1 if low is None else low, high))
        return checks

    def string_checks(self, schema: Mapping[str, Any], ptr: _Pointer) -> list[Validator]:
        checks: list[Validator] = []
        low, high = self.count(schema, "minLength", ptr), self.count(schema, "maxLength", ptr)
        if low is not None or high is not None:
            checks.append(_length("string", low, high))
        if "pattern" in schema:
            checks.append(_pattern(self.regex(schema["pattern"], ptr), schema["pattern"]))
        return checks

    def number_checks(self, schema: Mapping[str, Any], ptr: _Pointer) -> list[Validator]:
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
                checks.append(_bound(strict, strict_symbol, limit))
            if key in schema:
                checks.append(_bound(compare, symbol, self.number(schema[key], key, ptr)))
        if "multipleOf" in schema:
            divisor = self.number(schema["multipleOf"], "multipleOf", ptr)
            if divisor <= 0:
                raise _error(ptr, "`multipleOf` must be greater than 0")
            checks.append(_multiple_of(divisor))
        return checks

    @staticmethod
    def type_names(schema: Mapping[str, Any], ptr: _Pointer) -> tuple[str, ...] | None:
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
    def mapping(schema: Mapping[str, Any], key: str, ptr: _Pointer) -> Mapping[str, Any]:
        """An object-valued keyword (properties, $defs, ...), empty when absent."""
        value = schema.get(key, {})
        if not isinstance(value, Mapping):
            raise _error(ptr, f"`{key}` must be an object")
        return value

    @staticmethod
    def strings(schema: Mapping[str, Any], key: str, ptr: _Pointer) -> tuple[str, ...]:
        """A list of property names (required, dependentRequired), empty when absent."""
        value = schema.get(key, ())
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise _error(ptr, f"`{key}` must be an array of strings")
        return tuple(value)

    @staticmethod
    def count(schema: Mapping[str, Any], key: str, ptr: _Pointer) -> int | None:
        """A length limit; integral floats like 2.0 are accepted, as JSON Schema allows."""
        if key not in schema:
            return None
        value = schema[key]
        if (type(value) is int or (type(value) is float and value.is_integer())) and value >= 0:
            return int(value)
        raise _error(ptr, f"`{key}` must be a non-negative integer")

    @staticmethod
    def number(value: Any, key: str, ptr: _Pointer) -> float:
        """A numeric limit; booleans and NaN are not numbers here."""
        if type(value) not in (int, float) or value != value:
            raise _error(ptr, f"`{key}` must be a number")
        return cast(float, value)  # int or float, kept exact

    @staticmethod
    def regex(pattern: Any, ptr: _Pointer) -> Callable[[str], object]:
        """Compile a regex up front (ECMA-adjusted), so a bad one fails before any request."""
        if not isinstance(pattern, str):
            raise _error(ptr, f"pattern must be a string, got {pattern!r:.80}")
        try:
            return re.compile(_translate_pattern(pattern), re.ASCII).search
        except re.error as exc:
            raise _error(ptr, f"invalid regex {pattern!r}: {exc}") from None


def _error(ptr: _Pointer, text: str) -> SchemaDefinitionError:
    return SchemaDefinitionError(f"Invalid schema at `{_format_pointer(ptr)}`: {text}")
