"""The JSON Schema validator's checks (`lmclient._output.jsonschema`): one small validator per
keyword (bounds, lengths, patterns, properties, items, combinators), each raising `Invalid`
with the message and path `compile_schema` reports; the compiler there puts them together."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any, Final

import msgspec

__all__ = [
    "Invalid",
    "Pointer",
    "Validator",
    "accept",
    "check_any_of",
    "check_bound",
    "check_const",
    "check_contains",
    "check_dependent_required",
    "check_dependent_schemas",
    "check_enum",
    "check_if",
    "check_items",
    "check_length",
    "check_multiple_of",
    "check_not",
    "check_object_fields",
    "check_one_of",
    "check_pattern",
    "check_pattern_fields",
    "check_property_names",
    "check_required",
    "check_unique",
    "combine",
    "format_path",
    "format_pointer",
    "forward",
    "integral_float",
    "reject",
    "translate_pattern",
    "typed_loose",
    "typed_strict",
]

Validator = Callable[[Any], None]
Pointer = tuple[str, ...]

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


class Invalid(Exception):
    """Internal failure; the path is collected innermost-first while unwinding, success is free."""

    def __init__(self, message: str, expected: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.expected = expected  # JSON type names, set only for a type mismatch at this level
        self.segments: list[str | int] = []


def accept(value: Any) -> None:
    """The `true` schema."""


def reject(value: Any) -> None:
    """The `false` schema."""
    raise Invalid("No value is allowed here (schema is `false`)")


def _failure(fn: Validator, value: Any) -> Invalid | None:
    """Run a check whose failure is an answer (anyOf, not, contains, ...) rather than an error."""
    try:
        fn(value)
    except Invalid as exc:
        return exc
    return None


def combine(checks: list[Validator]) -> Validator | None:
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


def format_path(segments: Iterable[str | int]) -> str:
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


def format_pointer(ptr: Pointer) -> str:
    return "#" + "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in ptr)


def _type_error(expected: tuple[str, ...], value: Any) -> Invalid:
    got = _TYPE_NAMES.get(type(value), type(value).__name__)
    return Invalid(f"Expected `{' | '.join(expected)}`, got `{got}`", expected)


def _no_match(keyword: str, errors: list[Invalid], value: Any) -> Invalid:
    """Explain a failed anyOf/oneOf: merged type errors, the one branch past its type check, or all.

    Type mismatches of the value itself say little, so the branches that got further win.
    """
    deeper = [e for e in errors if e.segments or not e.expected]
    if not deeper:
        return _type_error(tuple(dict.fromkeys(n for e in errors for n in e.expected)), value)
    if len(deeper) == 1:
        return deeper[0]
    details = "; ".join(
        f"{e.message} (at `{format_path(reversed(e.segments))}`)" if e.segments else e.message
        for e in deeper
    )
    return Invalid(f"Value matches none of the `{keyword}` subschemas: {details}")


def translate_pattern(pattern: str) -> str:
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


def check_length(kind: str, low: int | None, high: int | None) -> Validator:
    """minLength/maxLength, minItems/maxItems and minProperties/maxProperties."""

    def check(value: Any) -> None:
        size = len(value)
        if low is not None and size < low:
            raise Invalid(f"Expected `{kind}` of length >= {low}")
        if high is not None and size > high:
            raise Invalid(f"Expected `{kind}` of length <= {high}")

    return check


def check_bound(compare: Callable[[Any, Any], bool], symbol: str, limit: float) -> Validator:
    """minimum, maximum, exclusiveMinimum and exclusiveMaximum."""
    message = f"Expected `number` {symbol} {limit}"

    def check(value: Any) -> None:
        if not compare(value, limit):
            raise Invalid(message)

    return check


def _exact(number: float) -> Fraction:
    """The decimal value a float was written as (its shortest repr), or an int's exact value."""
    return Fraction(repr(number)) if type(number) is float else Fraction(number)


def check_multiple_of(divisor: float) -> Validator:
    message = f"Expected `number` that's a multiple of {divisor}"
    exact = _exact(divisor)
    int_divisor = type(divisor) is int

    def check(value: Any) -> None:
        if int_divisor and type(value) is int:
            if value % divisor:
                raise Invalid(message)
        elif (_exact(value) / exact).denominator != 1:
            raise Invalid(message)

    return check


def check_unique(value: Any) -> None:
    seen: dict[Any, int] = {}
    for index, item in enumerate(value):
        first = seen.setdefault(_key(item), index)
        if first != index:
            raise Invalid(
                f"Expected `array` of unique items, but [{first}] and [{index}] are equal"
            )


def check_object_fields(
    required: tuple[str, ...], props: dict[str, Validator], extra: Validator | None
) -> Validator:
    """required + properties + additionalProperties (None = forbidden) in one pass over the keys."""

    def check(value: Any) -> None:
        for name in required:
            if name not in value:
                raise Invalid(f"Object missing required field `{name}`")
        key = ""
        try:
            for key, item in value.items():
                fn = props.get(key, extra)
                if fn is None:
                    break
                fn(item)
            else:
                return
        except Invalid as exc:
            exc.segments.append(key)
            raise
        raise Invalid(f"Object contains unknown field `{key}`")

    return check


def check_pattern_fields(
    required: tuple[str, ...],
    props: dict[str, Validator],
    patterns: tuple[tuple[Callable[[str], object], Validator], ...],
    extra: Validator | None,
) -> Validator:
    """As `check_object_fields`, plus patternProperties (additionalProperties skips matched
    keys)."""

    def check(value: Any) -> None:
        for name in required:
            if name not in value:
                raise Invalid(f"Object missing required field `{name}`")
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
        except Invalid as exc:
            exc.segments.append(key)
            raise
        if unknown:
            raise Invalid(f"Object contains unknown field `{key}`")

    return check


def check_required(required: tuple[str, ...]) -> Validator:
    def check(value: Any) -> None:
        for name in required:
            if name not in value:
                raise Invalid(f"Object missing required field `{name}`")

    return check


def check_property_names(fn: Validator) -> Validator:
    def check(value: Any) -> None:
        for key in value:
            exc = _failure(fn, key)
            if exc is not None:
                raise Invalid(f"Invalid property name `{key}`: {exc.message}")

    return check


def check_dependent_required(deps: tuple[tuple[str, tuple[str, ...]], ...]) -> Validator:
    def check(value: Any) -> None:
        for name, needed in deps:
            if name in value:
                for other in needed:
                    if other not in value:
                        raise Invalid(f"Object has field `{name}` but is missing field `{other}`")

    return check


def check_dependent_schemas(deps: tuple[tuple[str, Validator], ...]) -> Validator:
    def check(value: Any) -> None:
        for name, fn in deps:
            if name in value:
                fn(value)

    return check


def check_items(
    prefix: tuple[Validator, ...], rest: Validator | None, forbid_rest: bool
) -> Validator:
    """prefixItems + items (or the old array form of items + additionalItems)."""
    count = len(prefix)

    def check(value: Any) -> None:
        if forbid_rest and len(value) > count:
            raise Invalid(f"Expected `array` of length <= {count}")
        index = 0
        try:
            for index, (fn, item) in enumerate(zip(prefix, value, strict=False)):  # noqa: B007
                fn(item)
            if rest is not None:
                for index in range(count, len(value)):
                    rest(value[index])
        except Invalid as exc:
            exc.segments.append(index)
            raise

    return check


def check_contains(fn: Validator, low: int, high: int | None) -> Validator:
    def check(value: Any) -> None:
        found = 0
        for item in value:
            if _failure(fn, item) is not None:
                continue
            found += 1
            if high is None and found >= low:
                return
        if found < low:
            raise Invalid(f"Expected `array` with at least {low} item(s) matching `contains`")
        if high is not None and found > high:
            raise Invalid(f"Expected `array` with at most {high} item(s) matching `contains`")

    return check


def check_pattern(search: Callable[[str], object], pattern: str) -> Validator:
    message = f"Expected `string` matching regex {pattern!r}"

    def check(value: Any) -> None:
        if not search(value):
            raise Invalid(message)

    return check


def check_enum(options: list[Any]) -> Validator:
    keys = frozenset(map(_key, options))
    allowed = _show(options)

    def check(value: Any) -> None:
        if _key(value) not in keys:
            raise Invalid(f"Invalid enum value {_show(value)}; expected one of {allowed}")

    return check


def check_const(expected: Any) -> Validator:
    key = _key(expected)
    shown = _show(expected)

    def check(value: Any) -> None:
        if _key(value) != key:
            raise Invalid(f"Expected {shown}, got {_show(value)}")

    return check


def check_any_of(subs: tuple[Validator, ...]) -> Validator:
    def check(value: Any) -> None:
        errors = []
        for fn in subs:
            exc = _failure(fn, value)
            if exc is None:
                return
            errors.append(exc)
        raise _no_match("anyOf", errors, value)

    return check


def check_one_of(subs: tuple[Validator, ...]) -> Validator:
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
                    raise Invalid(
                        f"Value matches more than one `oneOf` subschema ([{first}] and [{second}])"
                    )
        if not matched:
            raise _no_match("oneOf", errors, value)

    return check


def check_not(fn: Validator) -> Validator:
    def check(value: Any) -> None:
        if _failure(fn, value) is None:
            raise Invalid("Value must not match the `not` subschema")

    return check


def check_if(condition: Validator, then: Validator, otherwise: Validator) -> Validator:
    def check(value: Any) -> None:
        (then if _failure(condition, value) is None else otherwise)(value)

    return check


def forward(cell: list[Validator]) -> Validator:
    """A `$ref` to a schema still being compiled; `cell` is filled once it is done."""

    def check(value: Any) -> None:
        cell[0](value)

    return check


def typed_loose(table: dict[type, Validator]) -> Validator:
    """Type-specific keywords without a `type` keyword: other types pass."""

    def check(value: Any) -> None:
        fn = table.get(type(value))
        if fn is not None:
            fn(value)

    return check


def typed_strict(
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


def integral_float(names: tuple[str, ...], then: Validator | None) -> Validator:
    """A float is an `integer` when it has no fractional part (JSON Schema's definition)."""

    def check(value: Any) -> None:
        if not value.is_integer():
            raise _type_error(names, value)
        if then is not None:
            then(value)

    return check
