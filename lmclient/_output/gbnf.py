"""A JSON schema compiled into a compact GBNF grammar: JSON with no whitespace outside strings.

Why: llama.cpp's and vLLM's own schema converters allow whitespace between every JSON token, and
a small model then pads with spaces and newlines until ``max_tokens``. lmclient sends this
grammar instead (llama.cpp ``grammar``, vLLM ``structured_outputs.grammar``), so the text must
parse for both llama.cpp's GBNF reader (rule names ``[a-z][a-z0-9-]*``, no underscore) and
xgrammar's EBNF reader: rule names, double-quoted literals, character classes, ``( ) | * + ?``,
``{m}``, ``{m,n}``, ``{m,}``. Non-ASCII and control characters are written as ``\\u``/``\\U``
escapes, never ``\\x`` (xgrammar reads every hex digit that follows ``\\x``, llama.cpp two), so
the text is ASCII. llama.cpp expands repeats into rules and refuses a count (times the rules
repeated) of 2000: a repeated group becomes a rule of its own, and a count over 1999 (say
``maxLength: 5000``) falls back. One rule per ``$defs`` entry, shared rules for the JSON string
character, any string, any value and the plain integer; rules with equal bodies are merged.

What is compiled, and how (the grammar accepts what msgspec encodes and nothing msgspec rejects,
except the constraints listed last):

- ``type: object`` with ``properties``: the properties in declared order (the order msgspec
  encodes them in), required ones always, optional ones each present or absent, commas right.
  Properties other than the declared ones are not offered (as llama.cpp does) unless the object
  has no ``properties``: ``additionalProperties: <schema>`` (or absent) is a dict, its keys any
  string or the ``propertyNames`` string schema (msgspec writes a key's ``Meta`` there), with
  ``minProperties``/``maxProperties`` as a repeat count. ``properties`` together with an
  ``additionalProperties`` schema, ``patternProperties`` or ``propertyNames`` fall back.
- ``type: array``: ``items`` with ``minItems``/``maxItems``; a tuple is ``prefixItems`` with
  ``minItems == maxItems == len(prefixItems)`` (or ``items: false`` and ``minItems`` equal to it).
- ``enum``/``const``: each value as ``msgspec.json.encode`` writes it.
- ``anyOf``/``oneOf`` (msgspec tagged unions included: the tag is a ``const`` property), ``$ref``
  to ``#``, ``#/$defs/…`` or ``#/definitions/…``: one rule per definition, recursion allowed.
- ``type: string``: any JSON string, with ``minLength``/``maxLength`` counted in code points (one
  unescaped character, one ``\\uXXXX`` escape, or one surrogate-pair escape is one code point;
  lone surrogate escapes, which msgspec rejects, are not offered). ``pattern``: Python's ``re``
  syntax (the one msgspec checks with) for literals, classes, ``.``, groups, alternation and
  repeats; a pattern is searched, so an unanchored end becomes "any characters". Each character
  is written as msgspec encodes it. Falling back: flags, lookarounds, backreferences, anchors
  inside the pattern, negated ``\\d\\w\\s`` (Unicode-wide in Python), and a length bound next to
  a pattern unless the pattern is one repeated character or its widths already fit.
- formats: ``date`` (years 0001-9999, days per month, 29 February in leap years only),
  ``date-time`` and ``time`` (RFC 3339 with a required offset, ``Z`` or ``±HH:MM``; a fraction of
  1-6 digits), ``partial-time`` (no offset), ``uuid`` (lowercase, hyphenated, as msgspec writes
  it), ``contentEncoding: base64`` (padded). Other formats (``duration``, ``email``…) fall back.
- ``type: integer``: the exact range as a digit grammar (as llama.cpp's
  ``_generate_min_max_int``); msgspec reads integers of any size, but the grammar offers at most
  int64/uint64 (``-2**63 .. 2**64-1``), so that an integer is bounded in length. ``multipleOf``
  (as xgrammar's schema mode holds it): the multiples in range written out when there are at
  most 64, else the same digit-range construction run in step with the remainder modulo the
  step (a finite automaton, one rule per length and remainder) for steps up to 16; a larger
  step over a wider range, or a fractional one, falls back.
- ``type: number``: an integer as above, or a float in the forms msgspec writes (shortest
  round-trip: ``1.5``, ``0.00001``, ``1e16``, ``2.5e-10``) with at most 17 significant digits and
  a decimal exponent up to 307 (``1e308``+ can overflow a double, which msgspec rejects).
  ``minimum``/``maximum`` and the exclusive forms (as xgrammar's schema mode holds them): each
  bound becomes the first double on its allowed side (``exclusiveMinimum: 0`` is ``5e-324``), and
  the grammar offers exactly the decimals from one to the other, per length of the integer part
  and per exponent, by the digit-range construction over a fraction of varying length. A decimal
  rounds to a double monotonically, so every sentence reads, as a double, within the bounds
  msgspec compares with, and msgspec's encoding of every double within them is a sentence
  (``-0.0`` too, when 0 is in range). ``multipleOf`` on a number falls back: no grammar of
  decimals states a float remainder, and msgspec's check is one of doubles.
- ``boolean``, ``null``, and ``{}``/``true`` (any compact JSON value, recursive).

Everything else falls back (`compact_grammar` returns ``None`` and logs why at DEBUG).

Where the grammar is narrower than what msgspec decodes (never wider): properties only in
declared order (a ``TypedDict`` or ``dict`` value built in another order encodes in that order);
no ``-0``, no integer beyond int64/uint64, floats as msgspec writes them; escapes in pattern
strings only as msgspec writes them; ``date-time``/``time`` always with an offset (a plain
``datetime``, which reads both, then gets an aware one); Python's ``$`` also matching before a
final newline; ``\\d``, ``\\w``, ``\\s`` only in ASCII.

``shortest``/``longest`` count UTF-8 bytes of the grammar's sentences: one string character may
take 12 (a surrogate-pair escape), so a ``maxLength`` string's ``longest`` is loose for text.

What a context-free grammar here does not state, and client-side validation still enforces:
``uniqueItems`` (sets), duplicate object keys (and the ``minProperties`` they undercut), what a
schema leaves unsaid (msgspec gives a ``tz=False`` datetime no format; lmclient gives the keys
of a ``dict[int, …]`` a ``propertyNames`` pattern), the exclusivity of ``oneOf``, and the
nesting depth msgspec follows. Neither xgrammar's schema mode (vLLM, SGLang) nor llama.cpp's
``json-schema-to-grammar`` holds any of them either: every keyword a server's schema mode
holds, the compact grammar holds or falls back for, so the grammar is never weaker than the
schema it replaces (docs/output-types.md has the table, and
tests/e2e/test_compact_strictness.py compares the two on xgrammar).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import msgspec

from lmclient._log import log as _log

from .gbnf_ir import (
    EMPTY,
    MAX_REPEAT,
    Fallback,
    Lit,
    Node,
    Ref,
    alt,
    char_class,
    dedupe,
    hoist,
    longest_bytes,
    opt,
    reachable,
    render,
    rep,
    seq,
    shortest_bytes,
    too_many,
)
from .gbnf_json import (
    B64,
    CHAR,
    I64_MIN,
    OFFSET,
    PARTIAL_TIME,
    U64_MAX,
    date,
    float_bound,
    float_forms,
    int_range,
    multiples,
    number_range,
)
from .gbnf_regex import regex_grammar

__all__ = ["CompactGrammar", "compact_grammar", "compact_rules", "finished"]


class CompactGrammar(NamedTuple):
    """A compiled grammar and the byte lengths of its shortest and longest sentences."""

    text: str  # GBNF; root rule `root`
    shortest: int  # UTF-8 bytes of the shortest sentence the grammar accepts
    longest: int | None  # UTF-8 bytes of the longest sentence; None when unbounded


def compact_grammar(schema: Mapping[str, Any]) -> CompactGrammar | None:
    """The compact grammar of ``schema``, or ``None`` for a schema it does not cover (then the
    caller sends the JSON schema itself)."""
    rules = compact_rules(schema)
    return None if rules is None else finished(rules)


def compact_rules(schema: Mapping[str, Any]) -> dict[str, Node] | None:
    """The rules of ``schema``'s compact grammar (its value is rule ``root``), unfinished: what a
    grammar of several values (`lmclient._output.turn`) is built from; ``None`` where the
    compiler does not cover the schema."""
    try:
        compiler = _Compiler(schema)
        compiler.rules["root"] = compiler.node(schema)
    except Fallback as exc:
        _log.debug("compact grammar: falls back to json_schema: %s", exc)
        return None
    return reachable(compiler.rules)


def finished(rules: dict[str, Node]) -> CompactGrammar | None:
    """``rules`` as the text a server is sent, with its sentences' byte lengths; ``None`` where a
    repeat count is more than llama.cpp takes."""
    rules = dedupe(hoist(rules))
    if too_many(rules):
        _log.debug("compact grammar: falls back to json_schema: a repeat count over %d", MAX_REPEAT)
        return None
    return CompactGrammar(render(rules), shortest_bytes(rules), longest_bytes(rules))


# --------------------------------------------------------------------------------------------
# The compiler: schema -> rules
# --------------------------------------------------------------------------------------------

_ANNOTATIONS = frozenset(
    [
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "$schema",
        "$id",
        "$defs",
        "definitions",
        "deprecated",
        "readOnly",
        "writeOnly",
        "discriminator",
    ]
)
_IGNORED = frozenset(["uniqueItems"])  # left to validation: see the docstring
_KNOWN = (
    _ANNOTATIONS
    | _IGNORED
    | frozenset(
        [
            "$ref",
            "anyOf",
            "oneOf",
            "enum",
            "const",
            "type",
            "properties",
            "required",
            "additionalProperties",
            "minProperties",
            "maxProperties",
            "propertyNames",
            "items",
            "prefixItems",
            "minItems",
            "maxItems",
            "minLength",
            "maxLength",
            "pattern",
            "format",
            "contentEncoding",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
        ]
    )
)
_FORMATS: dict[str, Callable[[], Node]] = {
    "date": date,
    "date-time": lambda: seq(date(), Lit("T"), PARTIAL_TIME, OFFSET),
    "time": lambda: seq(PARTIAL_TIME, OFFSET),
    "partial-time": lambda: PARTIAL_TIME,
    "uuid": lambda: seq(
        *(
            rep(char_class([(0x30, 0x39), (0x61, 0x66)]), n, n) if n else Lit("-")
            for n in (8, 0, 4, 0, 4, 0, 4, 0, 12)
        )
    ),
}


_SHARED = frozenset(["root", "char", "string", "value", "number", "integer"])  # fixed names


class _Compiler:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.rules: dict[str, Node] = {}
        self.refs: dict[str, str] = {"#": "root"}

    def shared(self, name: str, build: Callable[[], Node]) -> Ref:
        if name not in self.rules:
            self.rules[name] = EMPTY  # a placeholder while the body is built (recursion)
            self.rules[name] = build()
        return Ref(name)

    def named(self, body: Node) -> Ref:
        """``body`` as a rule of its own."""
        name = self.fresh("part")
        self.rules[name] = body
        return Ref(name)

    def fresh(self, base: str) -> str:
        name = re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-") or "def"
        name = name if name[0].isalpha() else "d-" + name
        candidate, n = name, 1
        while candidate in self.rules or candidate in _SHARED:
            n += 1
            candidate = f"{name}-{n}"
        return candidate

    def node(self, schema: Any) -> Node:
        if schema is True or schema == {}:
            return self.any_value()
        if not isinstance(schema, Mapping):
            raise Fallback(f"schema {schema!r}")
        unknown = set(schema) - _KNOWN
        if unknown:
            raise Fallback(f"keyword {sorted(unknown)[0]!r}")
        keys = set(schema) - _ANNOTATIONS
        if "$ref" in schema:
            if keys != {"$ref"}:
                raise Fallback("$ref beside other keywords")
            return self.ref(schema["$ref"])
        for union in ("anyOf", "oneOf"):
            if union in schema:
                if keys != {union}:
                    raise Fallback(f"{union} beside other keywords")
                return alt(*(self.node(branch) for branch in schema[union]))
        if "enum" in schema or "const" in schema:
            values = list(schema["enum"]) if "enum" in schema else [schema["const"]]
            if "enum" in schema and "const" in schema:
                values = [v for v in values if v == schema["const"]]
            if keys - {"enum", "const", "type"}:
                raise Fallback("enum/const beside constraints")
            types = schema.get("type")
            allowed = [types] if isinstance(types, str) else types
            return alt(
                *(
                    Lit(msgspec.json.encode(v).decode())
                    for v in values
                    if allowed is None
                    or _json_type(v) in allowed
                    or (_json_type(v) == "integer" and "number" in allowed)
                )
            )
        types = schema.get("type")
        if types is None:
            if keys - {"type"}:
                raise Fallback("constraints without a type")
            return self.any_value()
        if isinstance(types, str):
            types = [types]
        return alt(*(self.typed(t, schema) for t in types))

    def ref(self, ref: Any) -> Ref:
        if not isinstance(ref, str):
            raise Fallback(f"$ref {ref!r}")
        if ref not in self.refs:
            target: Any = self.root
            if not ref.startswith("#/"):
                raise Fallback(f"$ref {ref!r}")
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, Mapping) or part not in target:
                    raise Fallback(f"unresolved $ref {ref!r}")
                target = target[part]
            name = self.fresh(ref.rsplit("/", 1)[-1])
            self.refs[ref] = name
            self.rules[name] = EMPTY
            self.rules[name] = self.node(target)
        return Ref(self.refs[ref])

    def typed(self, kind: Any, schema: Mapping[str, Any]) -> Node:
        if kind == "string":
            return self.string(schema)
        if kind == "integer":
            return self.integer(schema)
        if kind == "number":
            return self.number(schema)
        if kind == "boolean":
            return alt(Lit("true"), Lit("false"))
        if kind == "null":
            return Lit("null")
        if kind == "array":
            return self.array(schema)
        if kind == "object":
            return self.object(schema)
        raise Fallback(f"type {kind!r}")

    def char(self) -> Ref:
        return self.shared("char", lambda: CHAR)

    def any_string(self) -> Ref:
        return self.shared("string", lambda: seq(Lit('"'), rep(self.char(), 0, None), Lit('"')))

    def any_value(self) -> Ref:
        def build() -> Node:
            value, string = Ref("value"), self.any_string()
            pair = seq(string, Lit(":"), value)
            obj = seq(Lit("{"), opt(seq(pair, rep(seq(Lit(","), pair), 0, None))), Lit("}"))
            arr = seq(Lit("["), opt(seq(value, rep(seq(Lit(","), value), 0, None))), Lit("]"))
            number = self.typed("number", {})
            return alt(obj, arr, string, number, Lit("true"), Lit("false"), Lit("null"))

        return self.shared("value", build)

    def string(self, schema: Mapping[str, Any]) -> Node:
        low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
        high = None if high is None else int(high)
        shaped = [k for k in ("pattern", "format", "contentEncoding") if k in schema]
        if len(shaped) > 1:
            raise Fallback(f"string with both {shaped[0]} and {shaped[1]}")
        if "pattern" in schema:
            body = regex_grammar(schema["pattern"], low, high, self.char())
        elif "format" in schema or "contentEncoding" in schema:
            what = str(schema.get("format") or schema.get("contentEncoding"))
            build = (
                _FORMATS.get(what)
                if "format" in schema
                else (_base64 if what == "base64" else None)
            )
            if build is None:
                raise Fallback(
                    f"string {'format' if 'format' in schema else 'contentEncoding'} {what!r}"
                )
            if low or high is not None:
                raise Fallback(f"length bounds on a {what} string")
            body = build()
        else:
            if high is not None and high < low:
                raise Fallback("maxLength < minLength")
            if low == 0 and high is None:
                return self.any_string()
            body = rep(self.char(), low, high)
        return seq(Lit('"'), body, Lit('"'))

    def key(self, names: Any) -> Node:
        """A dict's key: a JSON string, held to the ``propertyNames`` schema (which applies to
        the key as a string, so it needs no ``type``)."""
        if names is True or names == {}:
            return self.any_string()
        if not isinstance(names, Mapping) or names.get("type", "string") != "string":
            raise Fallback(f"propertyNames {names!r}")
        return self.node({**names, "type": "string"})

    def number(self, schema: Mapping[str, Any]) -> Node:
        low = high = None
        for key, upward in (("minimum", True), ("exclusiveMinimum", True)):
            if key in schema:
                bound = float_bound(schema[key], key.startswith("exclusive"), upward)
                low = bound if low is None else max(low, bound)
        for key in ("maximum", "exclusiveMaximum"):
            if key in schema:
                bound = float_bound(schema[key], key.startswith("exclusive"), False)
                high = bound if high is None else min(high, bound)
        if "multipleOf" in schema:  # see the module docstring: no server states it either
            raise Fallback("multipleOf on a number")
        if low is None and high is None:
            return self.shared("number", lambda: alt(self.integer({}), float_forms()))
        if low is not None and high is not None and low > high:
            raise Fallback("no number within the bounds")
        return number_range(low, high)

    def integer(self, schema: Mapping[str, Any]) -> Node:
        low, high = I64_MIN, U64_MAX
        if "minimum" in schema:
            low = max(low, math.ceil(schema["minimum"]))
        if "exclusiveMinimum" in schema:
            low = max(low, math.floor(schema["exclusiveMinimum"]) + 1)
        if "maximum" in schema:
            high = min(high, math.floor(schema["maximum"]))
        if "exclusiveMaximum" in schema:
            high = min(high, math.ceil(schema["exclusiveMaximum"]) - 1)
        if low > high:
            raise Fallback("no integer within the bounds")
        if "multipleOf" in schema:
            step = schema["multipleOf"]
            if isinstance(step, bool) or not isinstance(step, (int, float)) or step <= 0:
                raise Fallback(f"multipleOf {step!r}")
            if step != int(step):  # a fraction: which integers are multiples is a float question
                raise Fallback(f"multipleOf {step!r} on an integer")
            return multiples(low, high, int(step), self.named)
        if (low, high) == (I64_MIN, U64_MAX):
            return self.shared("integer", lambda: int_range(low, high))
        return int_range(low, high)

    def array(self, schema: Mapping[str, Any]) -> Node:
        low, high = int(schema.get("minItems", 0)), schema.get("maxItems")
        high = None if high is None else int(high)
        items = schema.get("items", True)
        if "prefixItems" in schema:
            prefix = list(schema["prefixItems"])
            closed = high == len(prefix) or items is False
            if not closed or low != len(prefix):
                raise Fallback("prefixItems with a variable length")
            inner = [self.node(s) for s in prefix]
            parts: list[Node] = [Lit("[")]
            for i, part in enumerate(inner):
                parts += [Lit(",")] if i else []
                parts.append(part)
            return seq(*parts, Lit("]"))
        if high is not None and high < low:
            raise Fallback("maxItems < minItems")
        if items is False or high == 0:
            if low:
                raise Fallback("items: false with minItems")
            return Lit("[]")
        item = self.node(items)
        return seq(Lit("["), _list(item, low, high), Lit("]"))

    def object(self, schema: Mapping[str, Any]) -> Node:
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties", not props)
        required = list(schema.get("required", []))
        if set(required) - set(props):
            raise Fallback("a required property without a schema")
        if not props:
            if extra is False:
                return Lit("{}")
            low, high = int(schema.get("minProperties", 0)), schema.get("maxProperties")
            high = None if high is None else int(high)
            if high is not None and high < low:
                raise Fallback("maxProperties < minProperties")
            pair = seq(self.key(schema.get("propertyNames", True)), Lit(":"), self.node(extra))
            return seq(Lit("{"), _list(pair, low, high), Lit("}"))
        if extra not in (False, None) and extra != {} and extra is not True:
            raise Fallback("properties with an additionalProperties schema")
        if "propertyNames" in schema:
            raise Fallback("propertyNames with properties")
        if "minProperties" in schema or "maxProperties" in schema:
            raise Fallback("minProperties/maxProperties with properties")
        pairs = [
            (seq(Lit(msgspec.json.encode(name).decode() + ":"), self.node(sub)), name in required)
            for name, sub in props.items()
        ]
        return seq(Lit("{"), _properties(pairs, self.named), Lit("}"))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "?"


def _list(item: Node, low: int, high: int | None) -> Node:
    """``item`` ``low`` to ``high`` times, comma-separated (no brackets)."""
    if high == 0:
        return EMPTY
    more = rep(seq(Lit(","), item), max(low - 1, 0), None if high is None else high - 1)
    body = seq(item, more)
    return body if low else opt(body)


def _properties(pairs: list[tuple[Node, bool]], named: Callable[[Node], Ref]) -> Node:
    """Properties in order, required ones always, optional ones each present or absent: after
    the first present one, each is preceded by a comma. With k optional properties before the
    first required one, the grammar branches k ways; past a few, the tails become rules
    (``named``), so the grammar grows linearly, not quadratically."""
    leading = next((i for i, (_, req) in enumerate(pairs) if req), len(pairs))
    items = [seq(Lit(","), kv) if req else opt(seq(Lit(","), kv)) for kv, req in pairs]

    @functools.cache
    def rest(i: int) -> Node:
        if i >= leading or leading < 3:
            return seq(*items[i:])
        return named(seq(items[i], rest(i + 1)))

    def first(i: int) -> Node:
        if i == len(pairs):
            return EMPTY
        kv, req = pairs[i]
        here = seq(kv, rest(i + 1))
        return here if req else alt(here, first(i + 1))

    return first(0)


def _base64() -> Node:
    tail = alt(seq(rep(B64, 2, 2), Lit("==")), seq(rep(B64, 3, 3), Lit("=")))
    return seq(rep(rep(B64, 4, 4), 0, None), opt(tail))
