"""Produce a deterministic JSON value that satisfies a JSON Schema.

Covers what schema generators (msgspec, pydantic, hand-written OpenAI schemas) emit: types and
type lists, objects, arrays and tuples, numeric and length bounds, ``pattern`` (through the
regex generator), common ``format`` values, ``enum``/``const``, ``anyOf``/``oneOf``/``allOf``
and local ``$ref`` with recursion. Past a soft depth it takes the cheapest way out (``null``,
empty arrays, required properties only) so recursive schemas terminate.
"""

from __future__ import annotations

import base64
import math
import random
import re
import uuid
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Literal
from urllib.parse import unquote

import msgspec

from ._errors import UnsatisfiableError
from ._regex_gen import regex_instance

__all__ = ["WORDS", "OptionalFields", "schema_instance"]

OptionalFields = Literal["all", "some", "none"]

_SOFT_DEPTH = 4  # nesting beyond which only the cheapest terminating choices are made
_HARD_DEPTH = 64  # a value still nesting here means the schema cannot terminate
_INF = math.inf
_SCALARS = frozenset({"null", "boolean", "integer", "number", "string"})
_OBJECT_KEYS = frozenset(
    {"properties", "required", "additionalProperties", "minProperties", "propertyNames"}
)
_ARRAY_KEYS = frozenset({"items", "prefixItems", "minItems", "maxItems", "uniqueItems"})
_STRING_KEYS = frozenset({"pattern", "format", "minLength", "maxLength", "contentEncoding"})
_NUMBER_KEYS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)
# the words of generated strings, here and in grammar sentences (`_gbnf_gen`)
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india")
_SAFE_FACTORS: tuple[int, ...] = (0, *(sign * 2**j for j in range(64) for sign in (1, -1)))
_LOWER_BOUNDS = frozenset({"minimum", "exclusiveMinimum", "minLength", "minItems"})
_UPPER_BOUNDS = frozenset({"maximum", "exclusiveMaximum", "maxLength", "maxItems"})


def schema_instance(schema: Any, *, seed: int = 0, optional: OptionalFields = "all") -> Any:
    """Return a JSON-compatible Python value valid against ``schema``; same seed, same value.

    ``optional`` chooses which non-required properties appear: ``"all"`` (default), ``"some"``
    (a seeded half) or ``"none"``. Raises :class:`UnsatisfiableError` for schemas it cannot
    satisfy (``false``, contradictory bounds, remote ``$ref``, non-terminating recursion).
    """
    return _Generator(schema, random.Random(seed), optional).value(schema, 0)


class _Generator:
    """One generation: the root (for ``$ref``), the seeded choices and the optional policy."""

    def __init__(self, root: Any, rng: random.Random, optional: OptionalFields) -> None:
        self.root = root
        self.rng = rng
        self.optional = optional
        self.costs: dict[tuple[str, frozenset[str]], float] = {}

    # -- schema plumbing -------------------------------------------------------------------

    def resolve(self, ref: str) -> Any:
        """Follow a local JSON pointer such as ``#/$defs/Node`` (``#`` is the root)."""
        if not ref.startswith("#"):
            raise UnsatisfiableError(f"only local $ref are supported, got {ref!r}")
        node = self.root
        for raw in ref[1:].split("/")[1:]:
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            try:
                node = node[int(part)] if isinstance(node, list) else node[part]
            except (KeyError, IndexError, ValueError, TypeError):
                raise UnsatisfiableError(f"$ref {ref!r} points nowhere") from None
        return node

    def flatten(self, schema: Any) -> Any:
        """Replace a top-level ``$ref`` and ``allOf`` by one merged schema."""
        for _ in range(_HARD_DEPTH):
            if not (isinstance(schema, dict) and "$ref" in schema):
                break
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            target = self.resolve(schema["$ref"])
            schema = _merge(target, rest) if rest and isinstance(target, dict) else target
        else:
            raise UnsatisfiableError("$ref chain does not end")
        if isinstance(schema, dict) and "allOf" in schema:
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                flat = self.flatten(part)
                if flat is False:
                    raise UnsatisfiableError("allOf contains false")
                if isinstance(flat, dict):
                    merged = _merge(merged, flat)
            schema = merged
        return schema

    def cost(self, schema: Any, visiting: frozenset[str] = frozenset()) -> float:
        """How much nesting a minimal instance needs; infinite if it can never terminate."""
        if schema is False:
            return _INF
        if not isinstance(schema, dict) or "const" in schema or "enum" in schema:
            return 0
        if "$ref" in schema:
            ref = schema["$ref"]
            if ref in visiting:
                return _INF
            key = (ref, visiting)
            if key not in self.costs:
                self.costs[key] = 1 + self.cost(self.resolve(ref), visiting | {ref})
            return self.costs[key]
        total = sum(self.cost(part, visiting) for part in schema.get("allOf", ()))
        branches = schema.get("anyOf") or schema.get("oneOf")
        if branches:
            rest = _without_branches(schema)
            return total + min(self.cost(_with(rest, b), visiting) for b in branches)
        types = _types(schema)
        if not types or _SCALARS.intersection(types):
            return total
        if "object" in types:
            props = schema.get("properties", {})
            total += sum(self.cost(props.get(name, True), visiting) for name in _required(schema))
        else:
            prefix, items = _array_parts(schema)
            needed = schema.get("minItems", 0)
            total += sum(self.cost(s, visiting) for s in prefix[:needed])
            total += max(0, needed - len(prefix)) * self.cost(items, visiting)
        return total + 1

    # -- values ----------------------------------------------------------------------------

    def value(self, schema: Any, depth: int) -> Any:
        if depth > _HARD_DEPTH:
            raise UnsatisfiableError("the schema nests without end")
        schema = self.flatten(schema)
        if schema is True or schema == {}:
            return self.any_value(depth)
        if not isinstance(schema, dict):
            raise UnsatisfiableError(f"no value satisfies the schema {schema!r}")
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            if not schema["enum"]:
                raise UnsatisfiableError("empty enum")
            return self.rng.choice(schema["enum"])
        branches = schema.get("anyOf") or schema.get("oneOf")
        if branches:
            rest = _without_branches(schema)
            options = [_with(rest, self.flatten(branch)) for branch in branches]
            return self.value(self.pick_branch(options, depth), depth)
        types = _types(schema)
        if not types:
            return self.any_value(depth)
        kind = self.pick_type(types, schema, depth)
        return _MAKERS[kind](self, schema, depth)

    def pick_branch(self, branches: list[Any], depth: int) -> Any:
        """Deep: the cheapest branch. Otherwise a seeded non-null branch that can terminate."""
        costs = [self.cost(branch) for branch in branches]
        finite = [b for b, c in zip(branches, costs, strict=True) if c < _INF]
        if not finite:
            raise UnsatisfiableError("no branch of anyOf/oneOf can terminate")
        if depth >= _SOFT_DEPTH:
            return branches[costs.index(min(costs))]
        return self.rng.choice([b for b in finite if not _is_null(b)] or finite)

    def pick_type(self, types: list[str], schema: dict[str, Any], depth: int) -> str:
        if depth >= _SOFT_DEPTH:
            return min(
                types, key=lambda t: 0 if t in _SCALARS else self.cost({**schema, "type": t})
            )
        return self.rng.choice([t for t in types if t != "null"] or types)

    def any_value(self, depth: int) -> Any:
        """A value for the empty schema: a scalar, or a small object when shallow."""
        if depth >= _SOFT_DEPTH:
            return None
        return self.rng.choice(["fake", 42, True, None, {"key": "value"}])

    def make_object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        props: dict[str, Any] = schema.get("properties", {})
        required = _required(schema)
        extra = schema.get("additionalProperties", True)
        shallow = depth < _SOFT_DEPTH
        out: dict[str, Any] = {}
        for name, sub in props.items():
            if name in required or (shallow and self.wants_optional()):
                out[name] = self.value(sub, depth + 1)
        for name in required:
            if name not in out:
                out[name] = self.value(extra if isinstance(extra, dict) else True, depth + 1)
        low = schema.get("minProperties", 0)
        want = low
        if isinstance(extra, dict) and not props and shallow:
            want = max(want, self.rng.randint(1, 2))
        if "maxProperties" in schema:
            want = min(want, schema["maxProperties"])
        names = schema.get("propertyNames", {})
        for _ in range(4 * want + 4):
            if len(out) >= want or extra is False:
                break
            key = self.value({"type": "string", **names}, depth + 1) if names else f"key{len(out)}"
            out.setdefault(key, self.value(extra, depth + 1))
        if len(out) < low:
            raise UnsatisfiableError("cannot reach minProperties")
        return out

    def wants_optional(self) -> bool:
        if self.optional == "some":
            return self.rng.random() < 0.5
        return self.optional == "all"

    def make_array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        prefix, items = _array_parts(schema)
        low = schema.get("minItems", 0)
        high = schema.get("maxItems")
        if items is False:
            high = len(prefix) if high is None else min(high, len(prefix))
        if high is not None and low > high:
            raise UnsatisfiableError("minItems exceeds what maxItems/items allow")
        if depth >= _SOFT_DEPTH:
            count = low
        elif prefix:
            count = max(low, len(prefix))
        else:
            count = self.rng.randint(max(low, 1), max(low, 1) + 2)
        count = count if high is None else min(count, high)
        unique = bool(schema.get("uniqueItems"))
        out: list[Any] = []
        seen: set[bytes] = set()
        for _ in range(8 * count + 8):
            if len(out) >= count:
                break
            index = len(out)
            item = self.value(prefix[index] if index < len(prefix) else items, depth + 1)
            key = msgspec.json.encode(item)
            if not (unique and key in seen):
                seen.add(key)
                out.append(item)
        if len(out) < low:
            raise UnsatisfiableError("cannot produce enough distinct array items")
        return out

    def make_string(self, schema: dict[str, Any], depth: int) -> str:
        maker = _FORMATS.get(schema.get("format", ""))
        if maker is not None:
            return maker(self.rng)
        low = schema.get("minLength", 0)
        high = schema.get("maxLength", _INF)
        if low > high:
            raise UnsatisfiableError("minLength exceeds maxLength")
        if schema.get("contentEncoding") == "base64":
            size = max(low, min(high, 8)) // 4 * 3
            return base64.b64encode(self.rng.randbytes(size)).decode()
        if "pattern" in schema:
            return self.patterned(schema["pattern"], low, high)
        word = self.rng.choice(WORDS)
        text = word
        while len(text) < low:
            text += "-" + word
        return text[: int(min(high, len(text)))]

    def patterned(self, pattern: str, low: int, high: float) -> str:
        try:
            return regex_instance(
                pattern,
                seed=self.rng.getrandbits(32),
                min_length=low,
                max_length=None if high == _INF else int(high),
            )
        except re.error as exc:
            raise UnsatisfiableError(f"pattern {pattern!r} is not a regex: {exc}") from None

    def make_integer(self, schema: dict[str, Any], depth: int) -> int:
        step = Fraction(str(schema.get("multipleOf", 1)))
        step = Fraction(step.numerator)  # the integer multiples of p/q are the multiples of p
        k_low, k_high = _multiples(step, *_bounds(schema))
        return self.rng.randint(k_low, k_high) * int(step)

    def make_number(self, schema: dict[str, Any], depth: int) -> float:
        low, low_open, high, high_open = _bounds(schema)
        if "multipleOf" in schema:
            step = Fraction(str(schema["multipleOf"]))
            k_low, k_high = _multiples(step, low, low_open, high, high_open)
            return self.exact_multiple(k_low, k_high, float(step))
        if low > high or (low == high and (low_open or high_open)):
            raise UnsatisfiableError("the numeric bounds are empty")
        value = low + (high - low) * self.rng.choice((0.25, 0.5, 0.75))
        rounded = round(value, 2)
        inside = (low < rounded or (not low_open and low == rounded)) and (
            rounded < high or (not high_open and rounded == high)
        )
        return rounded if inside else value

    def exact_multiple(self, k_low: int, k_high: int, step: float) -> float:
        """``k * step`` that validators accept: they test floats with division or ``fmod``,
        which only ``k = 0`` and ``k = ±2**j`` pass for every step."""
        safe = [k for k in _SAFE_FACTORS if k_low <= k <= k_high]
        if safe:
            return self.rng.choice(safe) * step
        for k in range(k_low, min(k_high, k_low + 1000) + 1):
            value = k * step
            if math.fmod(value, step) == 0 and (value / step).is_integer():
                return value
        return k_low * step

    def make_boolean(self, schema: dict[str, Any], depth: int) -> bool:
        return self.rng.random() < 0.5

    def make_null(self, schema: dict[str, Any], depth: int) -> None:
        return None


_MAKERS: dict[str, Callable[[_Generator, dict[str, Any], int], Any]] = {
    "object": _Generator.make_object,
    "array": _Generator.make_array,
    "string": _Generator.make_string,
    "integer": _Generator.make_integer,
    "number": _Generator.make_number,
    "boolean": _Generator.make_boolean,
    "null": _Generator.make_null,
}


def _types(schema: dict[str, Any]) -> list[str]:
    """Declared types (a list), else the one implied by the keywords; ``[]`` means any."""
    declared = schema.get("type")
    if isinstance(declared, str):
        types = [declared]
    elif isinstance(declared, list):
        types = list(declared)
    else:
        keys = schema.keys()
        types = next(
            ([name] for name, marks in _IMPLIED if not marks.isdisjoint(keys)),
            [],
        )
    if schema.get("nullable") is True and types and "null" not in types:
        types.append("null")
    unknown = set(types) - _MAKERS.keys()
    if unknown:
        raise UnsatisfiableError(f"unknown JSON Schema type(s) {sorted(unknown)}")
    return types


_IMPLIED = (
    ("object", _OBJECT_KEYS),
    ("array", _ARRAY_KEYS),
    ("string", _STRING_KEYS),
    ("number", _NUMBER_KEYS),
)


def _required(schema: dict[str, Any]) -> list[str]:
    return list(schema.get("required", ()))


def _array_parts(schema: dict[str, Any]) -> tuple[list[Any], Any]:
    """``(prefixItems, items)``, also for draft-7 tuple form ``items: [...]``."""
    items = schema.get("items", True)
    if isinstance(items, list):
        return items, schema.get("additionalItems", True)
    return list(schema.get("prefixItems", ())), items


def _without_branches(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}


def _with(rest: dict[str, Any], branch: Any) -> Any:
    """A branch of ``anyOf``/``oneOf`` with the keywords beside it; ``False`` if they clash."""
    if not (isinstance(branch, dict) and rest):
        return branch
    try:
        return _merge(rest, branch)
    except UnsatisfiableError:
        return False


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and (
        schema.get("type") == "null" or ("const" in schema and schema["const"] is None)
    )


def _bounds(schema: dict[str, Any]) -> tuple[float, bool, float, bool]:
    """``(low, low_open, high, high_open)``; a missing side lies 100 from the other (or 0/100)."""
    low, low_open = _bound(schema, "minimum", "exclusiveMinimum", max)
    high, high_open = _bound(schema, "maximum", "exclusiveMaximum", min)
    if high is None:
        low = 0 if low is None else low
        return low, low_open, low + 100, False
    if low is None:
        return high - 100, False, high, high_open
    return low, low_open, high, high_open


def _multiples(
    step: Fraction, low: float, low_open: bool, high: float, high_open: bool
) -> tuple[int, int]:
    """The range of ``k`` with ``k * step`` inside the bounds."""
    if step <= 0:
        raise UnsatisfiableError("multipleOf must be positive")
    k_low = math.ceil(Fraction(low) / step)
    if low_open and k_low * step == low:
        k_low += 1
    k_high = math.floor(Fraction(high) / step)
    if high_open and k_high * step == high:
        k_high -= 1
    if k_low > k_high:
        raise UnsatisfiableError("no multiple of multipleOf lies within the bounds")
    return k_low, k_high


def _bound(
    schema: dict[str, Any], inclusive: str, exclusive: str, tighter: Callable[..., float]
) -> tuple[float | None, bool]:
    """One side of a numeric range; also reads draft-4 boolean ``exclusiveMinimum``."""
    value = schema.get(inclusive)
    flag = schema.get(exclusive)
    if isinstance(flag, bool):
        return value, flag and value is not None
    if flag is None:
        return value, False
    if value is None or tighter(value, flag) == flag:
        return flag, True
    return value, False


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Combine two schemas that must both hold (``allOf``, ``$ref`` siblings, ``anyOf`` rest)."""
    out = dict(base)
    for key, value in extra.items():
        if key not in out:
            out[key] = value
        elif key == "properties":
            props = dict(out[key])
            for name, sub in value.items():
                props[name] = {"allOf": [props[name], sub]} if name in props else sub
            out[key] = props
        elif key == "required":
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key == "type":
            mine = [out[key]] if isinstance(out[key], str) else out[key]
            theirs = {value} if isinstance(value, str) else set(value)
            both = [t for t in mine if t in theirs or (t == "integer" and "number" in theirs)]
            both += ["integer"] if "number" in mine and "integer" in theirs else []
            if not both:
                raise UnsatisfiableError(f"allOf types {mine} and {sorted(theirs)} do not meet")
            out[key] = both
        elif key == "enum":
            out[key] = [v for v in out[key] if v in value]
        elif key in _LOWER_BOUNDS and _both_numbers(out[key], value):
            out[key] = max(out[key], value)
        elif key in _UPPER_BOUNDS and _both_numbers(out[key], value):
            out[key] = min(out[key], value)
        else:
            out[key] = value
    return out


def _both_numbers(a: Any, b: Any) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))


def _date(rng: random.Random) -> str:
    return f"{rng.randint(2000, 2030):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _time(rng: random.Random) -> str:
    return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"


def _number_word(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)}{rng.randint(1, 99)}"


_FORMATS: dict[str, Callable[[random.Random], str]] = {
    "date-time": lambda rng: f"{_date(rng)}T{_time(rng)}Z",
    "date": _date,
    "time": lambda rng: f"{_time(rng)}Z",
    "partial-time": _time,
    "duration": lambda rng: f"P{rng.randint(0, 9)}DT{rng.randint(0, 23)}H{rng.randint(0, 59)}M",
    "uuid": lambda rng: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    "email": lambda rng: f"{_number_word(rng)}@example.com",
    "hostname": lambda rng: f"{_number_word(rng)}.example.com",
    "uri": lambda rng: f"https://example.com/{_number_word(rng)}",
    "uri-reference": lambda rng: f"/{_number_word(rng)}",
    "ipv4": lambda rng: ".".join(str(rng.randint(1, 254)) for _ in range(4)),
    "ipv6": lambda rng: f"2001:db8::{rng.getrandbits(16):x}",
    "decimal": lambda rng: f"{rng.randint(0, 999)}.{rng.randint(0, 99):02d}",
}
