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

import dataclasses
import decimal
import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import msgspec

from lmclient._log import log as _log

__all__ = ["CompactGrammar", "compact_grammar"]


class CompactGrammar(NamedTuple):
    """A compiled grammar and the byte lengths of its shortest and longest sentences."""

    text: str  # GBNF; root rule `root`
    shortest: int  # UTF-8 bytes of the shortest sentence the grammar accepts
    longest: int | None  # UTF-8 bytes of the longest sentence; None when unbounded


def compact_grammar(schema: Mapping[str, Any]) -> CompactGrammar | None:
    """The compact grammar of ``schema``, or ``None`` for a schema it does not cover (then the
    caller sends the JSON schema itself)."""
    try:
        compiler = _Compiler(schema)
        compiler.rules["root"] = compiler.node(schema)
    except _Fallback as exc:
        _log.debug("compact grammar: falls back to json_schema: %s", exc)
        return None
    rules = _dedupe(_hoist(_reachable(compiler.rules)))
    if _too_many(rules):
        _log.debug(
            "compact grammar: falls back to json_schema: a repeat count over %d", _MAX_REPEAT
        )
        return None
    return CompactGrammar(_render(rules), _shortest(rules), _longest(rules))


class _Fallback(Exception):
    """The schema uses something the compiler does not cover; the message says what."""


# --------------------------------------------------------------------------------------------
# The grammar IR: what is rendered to GBNF and measured in bytes
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Lit:
    text: str


@dataclasses.dataclass(frozen=True)
class _Cls:
    ranges: tuple[tuple[int, int], ...]  # sorted, disjoint, non-adjacent code-point ranges


@dataclasses.dataclass(frozen=True)
class _Seq:
    items: tuple[_Node, ...]


@dataclasses.dataclass(frozen=True)
class _Alt:
    items: tuple[_Node, ...]


@dataclasses.dataclass(frozen=True)
class _Rep:
    item: _Node
    min: int
    max: int | None


@dataclasses.dataclass(frozen=True)
class _Ref:
    name: str


_Node = _Lit | _Cls | _Seq | _Alt | _Rep | _Ref
_MAX_CP = 0x10FFFF
_EMPTY = _Lit("")


def _seq(*items: _Node) -> _Node:
    flat: list[_Node] = []
    for item in items:
        for part in item.items if isinstance(item, _Seq) else (item,):
            if isinstance(part, _Lit) and flat and isinstance(flat[-1], _Lit):
                flat[-1] = _Lit(flat[-1].text + part.text)
            elif part != _EMPTY:
                flat.append(part)
    if not flat:
        return _EMPTY
    return flat[0] if len(flat) == 1 else _Seq(tuple(flat))


def _alt(*items: _Node) -> _Node:
    flat: list[_Node] = []
    for item in items:
        for part in item.items if isinstance(item, _Alt) else (item,):
            if part not in flat:
                flat.append(part)
    if not flat:
        raise _Fallback("no value satisfies the schema")
    if _EMPTY in flat and len(flat) > 1:  # `x | ""` is written `x?`: no empty literals
        flat.remove(_EMPTY)
        return _opt(flat[0] if len(flat) == 1 else _Alt(tuple(flat)))
    return flat[0] if len(flat) == 1 else _Alt(tuple(flat))


def _rep(item: _Node, low: int, high: int | None) -> _Node:
    if high == 0 or item == _EMPTY:
        return _EMPTY
    if low == high == 1:
        return item
    return _Rep(item, low, high)


def _opt(item: _Node) -> _Node:
    return _rep(item, 0, 1)


def _cls(ranges: Iterable[tuple[int, int]]) -> _Cls:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
        else:
            merged.append((low, high))
    return _Cls(tuple(merged))


def _chars(text: str) -> _Cls:
    return _cls((ord(c), ord(c)) for c in text)


def _span(low: str, high: str) -> _Cls:
    return _Cls(((ord(low), ord(high)),))


def _complement(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    nxt = 0
    for low, high in ranges:
        if low > nxt:
            out.append((nxt, low - 1))
        nxt = high + 1
    if nxt <= _MAX_CP:
        out.append((nxt, _MAX_CP))
    return out


def _intersect(a: Iterable[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [
        (max(lo, blo), min(hi, bhi))
        for lo, hi in a
        for blo, bhi in b
        if max(lo, blo) <= min(hi, bhi)
    ]


_DIGIT = _span("0", "9")
_NONZERO = _span("1", "9")
_HEX = _cls([(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)])

# --------------------------------------------------------------------------------------------
# JSON pieces
# --------------------------------------------------------------------------------------------

# One code point of a JSON string: a plain character, a short escape, a \uXXXX escape that is
# not a surrogate, or a surrogate pair (msgspec rejects a lone surrogate).
_PLAIN = _cls(_complement([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]))
_HIGH = _seq(_chars("dD"), _chars("89abAB"), _rep(_HEX, 2, 2))
_LOW = _seq(_chars("dD"), _cls([(0x63, 0x66), (0x43, 0x46)]), _rep(_HEX, 2, 2))
_BMP = _alt(
    _seq(
        _cls([(0x30, 0x39), (0x41, 0x43), (0x45, 0x46), (0x61, 0x63), (0x65, 0x66)]),
        _rep(_HEX, 3, 3),
    ),
    _seq(_chars("dD"), _span("0", "7"), _rep(_HEX, 2, 2)),
)
_CHAR = _alt(
    _PLAIN,
    _seq(
        _Lit("\\"),
        _alt(_chars('"\\/bfnrt'), _seq(_Lit("u"), _alt(_BMP, _seq(_HIGH, _Lit("\\u"), _LOW)))),
    ),
)
_SHORT_ESCAPES = {
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}

_I64_MIN, _U64_MAX = -(2**63), 2**64 - 1


def _uint_same_length(low: str, high: str) -> _Node:
    """Decimal strings of one length from ``low`` to ``high`` (the digit-range construction)."""
    if not low:
        return _EMPTY
    if low[0] == high[0]:
        return _seq(_Lit(low[0]), _uint_same_length(low[1:], high[1:]))
    n = len(low) - 1
    parts: list[_Node] = []
    first, last = int(low[0]), int(high[0])
    if low[1:] != "0" * n:
        parts.append(_seq(_Lit(low[0]), _uint_same_length(low[1:], "9" * n)))
        first += 1
    tail: _Node | None = None
    if high[1:] != "9" * n:
        tail = _seq(_Lit(high[0]), _uint_same_length("0" * n, high[1:]))
        last -= 1
    if first <= last:
        lead = _Lit(str(first)) if first == last else _span(str(first), str(last))
        parts.append(_seq(lead, _rep(_DIGIT, n, n)))
    if tail is not None:
        parts.append(tail)
    return _alt(*parts)


def _uint_range(low: int, high: int) -> _Node:
    parts: list[_Node] = []
    full: list[int] = []  # a run of lengths n >= 2 taken whole: one `[1-9] [0-9]{a,b}`
    for n in range(len(str(low)), len(str(high)) + 1):
        a, b = max(low, 10 ** (n - 1) if n > 1 else 0), min(high, 10**n - 1)
        if (a, b) == (10 ** (n - 1), 10**n - 1):
            full.append(n)
            continue
        if full:
            parts.append(_seq(_NONZERO, _rep(_DIGIT, full[0] - 1, full[-1] - 1)))
            full = []
        if a <= b:
            parts.append(_uint_same_length(str(a), str(b)))
    if full:
        parts.append(_seq(_NONZERO, _rep(_DIGIT, full[0] - 1, full[-1] - 1)))
    return _alt(*parts)


def _int_range(low: int, high: int) -> _Node:
    parts = []
    if low < 0:
        parts.append(_seq(_Lit("-"), _uint_range(max(1, -high), -low)))
    if high >= 0:
        parts.append(_uint_range(max(low, 0), high))
    return _alt(*parts)


_MAX_MULTIPLES = 64  # multiples in range written out one by one; beyond, a residue automaton
_MAX_MODULUS = 16  # residue automata up to this modulus (its rules grow with it); beyond, fall back


def _multiples(low: int, high: int, step: int, named: Callable[[_Node], _Ref]) -> _Node:
    """The multiples of ``step`` from ``low`` to ``high``: each written out when few, else the
    digit-range construction of `_int_range` run in step with the remainder modulo ``step``
    (a finite automaton over the digits: a regular language, one rule per length and
    remainder)."""
    first, last = -(-low // step) * step, high // step * step
    if first > last:
        raise _Fallback("no multiple of multipleOf within the bounds")
    if (last - first) // step < _MAX_MULTIPLES:
        return _alt(*(_Lit(str(n)) for n in range(first, last + 1, step)))
    if step > _MAX_MODULUS:
        raise _Fallback(f"multipleOf {step} over a wide range")

    @functools.cache
    def free(n: int, need: int) -> _Node | None:
        """``n`` digits (leading zeros allowed) whose value is ``need`` modulo ``step``."""
        if n == 0:
            return _EMPTY if need == 0 else None
        return lead(0, 9, n, need)

    def lead(first: int, last: int, n: int, need: int) -> _Node | None:
        """A digit from ``first`` to ``last``, then ``n - 1`` free digits: ``need`` in all."""
        by_rest: dict[int, list[int]] = {}
        for d in range(first, last + 1):
            by_rest.setdefault((need - d * 10 ** (n - 1)) % step, []).append(d)
        parts = []
        for rest, digits in by_rest.items():
            tail = free(n - 1, rest)
            if tail is not None:
                cls = _cls((d + 48, d + 48) for d in digits)
                head = _Lit(chr(digits[0] + 48)) if len(digits) == 1 else cls
                parts.append(_seq(head, named(tail) if n > 2 else tail))
        return _alt(*parts) if parts else None

    def same_length(lo: str, hi: str, need: int) -> _Node | None:
        if not lo:
            return _EMPTY if need == 0 else None
        n, p = len(lo), 10 ** (len(lo) - 1)
        if lo[0] == hi[0]:
            rest = same_length(lo[1:], hi[1:], (need - int(lo[0]) * p) % step)
            return None if rest is None else _seq(_Lit(lo[0]), rest)
        parts: list[_Node | None] = []
        first, last = int(lo[0]), int(hi[0])
        if lo[1:] != "0" * (n - 1):
            rest = same_length(lo[1:], "9" * (n - 1), (need - first * p) % step)
            parts.append(None if rest is None else _seq(_Lit(lo[0]), rest))
            first += 1
        if hi[1:] != "9" * (n - 1):
            rest = same_length("0" * (n - 1), hi[1:], (need - last * p) % step)
            parts.append(None if rest is None else _seq(_Lit(hi[0]), rest))
            last -= 1
        if first <= last:
            parts.append(lead(first, last, n, need))
        found = [part for part in parts if part is not None]
        return _alt(*found) if found else None

    def unsigned(a: int, b: int) -> list[_Node]:
        found = []
        for n in range(len(str(a)), len(str(b)) + 1):
            lo, hi = max(a, 10 ** (n - 1) if n > 1 else 0), min(b, 10**n - 1)
            part = same_length(str(lo), str(hi), 0) if lo <= hi else None
            found += [] if part is None else [part]
        return found

    parts = unsigned(max(low, 0), high) if high >= 0 else []
    if low < 0:
        parts += [_seq(_Lit("-"), p) for p in unsigned(max(1, -high), -low)]
    return _alt(*parts)


def _float_forms() -> _Node:
    """Floats as msgspec writes them (shortest round-trip), bounded so none overflows."""
    fixed = _seq(
        _alt(_Lit("0"), _seq(_NONZERO, _rep(_DIGIT, 0, 16))), _Lit("."), _rep(_DIGIT, 1, 24)
    )
    exponent = _alt(
        _seq(_Lit("-"), _NONZERO, _rep(_DIGIT, 0, 2)),
        _seq(_NONZERO, _rep(_DIGIT, 0, 1)),
        _seq(_chars("12"), _rep(_DIGIT, 2, 2)),
        _seq(_Lit("30"), _span("0", "7")),
    )
    scientific = _seq(_NONZERO, _opt(_seq(_Lit("."), _rep(_DIGIT, 1, 16))), _Lit("e"), exponent)
    return _seq(_opt(_Lit("-")), _alt(fixed, scientific))


_FIXED_INT_DIGITS, _FIXED_FRACTION, _SCI_FRACTION = 17, 24, 16  # as `_float_forms`
_EXPONENTS = (-999, 307)  # the decimal exponents `_float_forms` offers (never 0)


def _aligned_digits(
    low: str | None, high: str | None, point: int, fraction: tuple[int, int]
) -> _Node | None:
    """Digit strings with ``point`` digits before a ``.`` and ``fraction`` (least, most) after
    it (no ``.`` when none follow), whose digits, read as one number padded with zeros, lie
    from ``low`` to ``high`` (digit strings aligned the same way; ``None``: no bound). The
    digit-range construction of ``_uint_same_length``, over a variable-length fraction."""
    least, most = fraction

    def free(pos: int) -> _Node:
        if pos < point:
            return _seq(_rep(_DIGIT, point - pos, point - pos), free(point))
        given = pos - point
        tail = _rep(_DIGIT, max(least - given, 0), most - given)
        if given:
            return tail
        more = _seq(_Lit("."), _rep(_DIGIT, max(least, 1), most))
        return more if least else _opt(more)

    @functools.cache
    def walk(pos: int, low: str | None, high: str | None) -> _Node | None:
        if low is not None and not low.strip("0"):
            low = None  # what follows is at least zero anyway
        if low is None and high is None:
            return free(pos)
        options: list[_Node] = []
        if low is None and pos >= point + least:
            options.append(_EMPTY)  # the rest all zeros: within both bounds
        if pos < point + most:
            lead = _Lit(".") if pos == point else _EMPTY
            first = int(low[0]) if low else 0
            last = 9 if high is None else int(high[0]) if high else 0
            digits: list[_Node] = []
            if low is not None and high is not None and first == last:
                rest = walk(pos + 1, low[1:], high[1:] if high else "")
                digits += [] if rest is None else [_seq(_Lit(str(first)), rest)]
            else:
                if low is not None:
                    rest = walk(pos + 1, low[1:], None)
                    digits += [] if rest is None else [_seq(_Lit(str(first)), rest)]
                    first += 1
                if high is not None:
                    rest = walk(pos + 1, None, high[1:] if high else "")
                    digits += [] if rest is None else [_seq(_Lit(str(last)), rest)]
                    last -= 1
                if first <= last:
                    span = _Lit(str(first)) if first == last else _span(str(first), str(last))
                    digits.append(_seq(span, free(pos + 1)))
            if digits:
                options.append(_seq(lead, _alt(*digits)))
        return _alt(*options) if options else None

    return walk(0, low, high)


def _digits_of(value: decimal.Decimal, point: int) -> str:
    """``value`` (``0 <= value < 10**point``) as ``point`` integer digits and its fraction's."""
    whole, _, fraction = format(value, "f").partition(".")
    return whole.zfill(point)[-point:] + fraction.rstrip("0")


def _float_range(low: decimal.Decimal, high: decimal.Decimal | None) -> _Node | None:
    """The non-negative floats of `_float_forms` from ``low`` (``>= 0``) to ``high``."""
    one = decimal.Decimal(1)
    parts: list[_Node] = []
    for n in range(1, _FIXED_INT_DIGITS + 1):  # fixed notation, n digits before the point
        start, stop = (one.scaleb(n - 1) if n > 1 else decimal.Decimal(0)), one.scaleb(n)
        if low >= stop or (high is not None and high < start):
            continue
        lo = None if low <= start and n == 1 else _digits_of(max(low, start), n)
        hi = None if high is None or high >= stop else _digits_of(high, n)
        found = _aligned_digits(lo, hi, n, (1, _FIXED_FRACTION))
        parts += [] if found is None else [found]
    bottom = _EXPONENTS[0] if low == 0 else max(low.adjusted(), _EXPONENTS[0])
    top = _EXPONENTS[1] if high is None else min(high.adjusted(), _EXPONENTS[1])
    top = bottom - 1 if high is not None and high == 0 else top  # 0 has no scientific form
    whole: list[int] = []  # exponents whose every mantissa is within the bounds
    for e in sorted({bottom, top}):
        start, stop = one.scaleb(e), one.scaleb(e + 1)
        if e == 0 or e > top or e < bottom:
            continue
        if low <= start and (high is None or high >= stop):
            whole.append(e)
            continue
        lo = None if low <= start else _digits_of(low.scaleb(-e), 1)
        hi = None if high is None or high >= stop else _digits_of(high.scaleb(-e), 1)
        found = _aligned_digits(lo or "1", hi, 1, (0, _SCI_FRACTION))
        parts += [] if found is None else [_seq(found, _Lit(f"e{e}"))]
    inner = range(bottom if bottom in whole else bottom + 1, (top if top in whole else top - 1) + 1)
    for a, b in ((inner.start, min(inner.stop - 1, -1)), (max(inner.start, 1), inner.stop - 1)):
        if a <= b:
            mantissa = _seq(_NONZERO, _opt(_seq(_Lit("."), _rep(_DIGIT, 1, _SCI_FRACTION))))
            parts.append(_seq(mantissa, _Lit("e"), _int_range(a, b)))
    return _alt(*parts) if parts else None


def _number_range(low: decimal.Decimal | None, high: decimal.Decimal | None) -> _Node:
    """Numbers as `number` offers them (integers, `_float_forms`), from ``low`` to ``high``
    (``None``: unbounded): the integers among them, the non-negative floats, and ``-`` before
    the negated negative ones (``-0.0`` included when 0 is in range, as msgspec writes it)."""
    parts: list[_Node] = []
    a = _I64_MIN if low is None else max(_I64_MIN, _ceil(low))
    b = _U64_MAX if high is None else min(_U64_MAX, _floor(high))
    if a <= b:
        parts.append(_int_range(a, b))
    zero = decimal.Decimal(0)
    if high is None or high >= 0:
        found = _float_range(max(low, zero) if low is not None else zero, high)
        parts += [] if found is None else [found]
    if low is None or low <= 0:
        found = _float_range(max(-high, zero) if high is not None else zero, _neg(low))
        parts += [] if found is None else [_seq(_Lit("-"), found)]
    return _alt(*parts)


def _neg(value: decimal.Decimal | None) -> decimal.Decimal | None:
    return None if value is None else -value


def _ceil(value: decimal.Decimal) -> int:
    return int(value.to_integral_value(rounding=decimal.ROUND_CEILING))


def _floor(value: decimal.Decimal) -> int:
    return int(value.to_integral_value(rounding=decimal.ROUND_FLOOR))


def _float_bound(value: Any, exclusive: bool, upward: bool) -> decimal.Decimal:
    """A schema's bound on a ``number`` as the float it admits first: the least double
    ``>= value`` (``>`` when ``exclusive``) for a lower bound, the greatest ``<=``/``<`` for an
    upper one, written as its shortest round-trip decimal. Every decimal on the right side of
    that one rounds to a double on the right side of the bound (rounding is monotonic), so the
    grammar holds exactly what msgspec's float comparison holds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Fallback(f"number bound {value!r}")
    try:
        near = float(value)
    except OverflowError:
        raise _Fallback(f"number bound {value!r} beyond a double") from None
    if not math.isfinite(near) or abs(near) > 1e300:
        raise _Fallback(f"number bound {value!r} beyond the grammar's floats")
    if upward and (near < value or (exclusive and near == value)):
        near = math.nextafter(near, math.inf)
    if not upward and (near > value or (exclusive and near == value)):
        near = math.nextafter(near, -math.inf)
    return decimal.Decimal(repr(near))


def _date() -> _Node:
    year = _alt(
        _seq(_Lit("000"), _NONZERO),
        _seq(_Lit("00"), _NONZERO, _DIGIT),
        _seq(_Lit("0"), _NONZERO, _rep(_DIGIT, 2, 2)),
        _seq(_NONZERO, _rep(_DIGIT, 3, 3)),
    )
    # Leap years: the last two digits a non-zero multiple of 4, or "00" after a multiple of 4
    # (0000 is no year).
    by4 = _alt(
        _seq(_chars("02468"), _chars("48")),
        _seq(_chars("13579"), _chars("26")),
        _seq(_chars("2468"), _Lit("0")),
    )
    centuries = _alt(
        _seq(_chars("2468"), _chars("048")),
        _seq(_Lit("0"), _chars("48")),
        _seq(_chars("13579"), _chars("26")),
    )
    leap = _alt(_seq(_DIGIT, _DIGIT, by4), _seq(centuries, _Lit("00")))
    day28 = _alt(
        _seq(_Lit("0"), _NONZERO), _seq(_Lit("1"), _DIGIT), _seq(_Lit("2"), _span("0", "8"))
    )
    day30 = _alt(_seq(_Lit("0"), _NONZERO), _seq(_chars("12"), _DIGIT), _Lit("30"))
    day31 = _alt(day30, _Lit("31"))
    month_day = _alt(
        _seq(_alt(*map(_Lit, ("01", "03", "05", "07", "08", "10", "12"))), _Lit("-"), day31),
        _seq(_alt(*map(_Lit, ("04", "06", "09", "11"))), _Lit("-"), day30),
        _seq(_Lit("02-"), day28),
    )
    return _alt(_seq(year, _Lit("-"), month_day), _seq(leap, _Lit("-02-29")))


_HOUR = _alt(_seq(_chars("01"), _DIGIT), _seq(_Lit("2"), _span("0", "3")))
_MINUTE = _seq(_span("0", "5"), _DIGIT)
_PARTIAL_TIME = _seq(
    _HOUR, _Lit(":"), _MINUTE, _Lit(":"), _MINUTE, _opt(_seq(_Lit("."), _rep(_DIGIT, 1, 6)))
)
_OFFSET = _alt(_Lit("Z"), _seq(_chars("+-"), _HOUR, _Lit(":"), _MINUTE))
_B64 = _cls([(0x2B, 0x2B), (0x2F, 0x39), (0x41, 0x5A), (0x61, 0x7A)])

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
_FORMATS: dict[str, Callable[[], _Node]] = {
    "date": _date,
    "date-time": lambda: _seq(_date(), _Lit("T"), _PARTIAL_TIME, _OFFSET),
    "time": lambda: _seq(_PARTIAL_TIME, _OFFSET),
    "partial-time": lambda: _PARTIAL_TIME,
    "uuid": lambda: _seq(
        *(
            _rep(_cls([(0x30, 0x39), (0x61, 0x66)]), n, n) if n else _Lit("-")
            for n in (8, 0, 4, 0, 4, 0, 4, 0, 12)
        )
    ),
}


_SHARED = frozenset(["root", "char", "string", "value", "number", "integer"])  # fixed names


class _Compiler:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.rules: dict[str, _Node] = {}
        self.refs: dict[str, str] = {"#": "root"}

    def shared(self, name: str, build: Callable[[], _Node]) -> _Ref:
        if name not in self.rules:
            self.rules[name] = _EMPTY  # a placeholder while the body is built (recursion)
            self.rules[name] = build()
        return _Ref(name)

    def named(self, body: _Node) -> _Ref:
        """``body`` as a rule of its own."""
        name = self.fresh("part")
        self.rules[name] = body
        return _Ref(name)

    def fresh(self, base: str) -> str:
        name = re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-") or "def"
        name = name if name[0].isalpha() else "d-" + name
        candidate, n = name, 1
        while candidate in self.rules or candidate in _SHARED:
            n += 1
            candidate = f"{name}-{n}"
        return candidate

    def node(self, schema: Any) -> _Node:
        if schema is True or schema == {}:
            return self.any_value()
        if not isinstance(schema, Mapping):
            raise _Fallback(f"schema {schema!r}")
        unknown = set(schema) - _KNOWN
        if unknown:
            raise _Fallback(f"keyword {sorted(unknown)[0]!r}")
        keys = set(schema) - _ANNOTATIONS
        if "$ref" in schema:
            if keys != {"$ref"}:
                raise _Fallback("$ref beside other keywords")
            return self.ref(schema["$ref"])
        for union in ("anyOf", "oneOf"):
            if union in schema:
                if keys != {union}:
                    raise _Fallback(f"{union} beside other keywords")
                return _alt(*(self.node(branch) for branch in schema[union]))
        if "enum" in schema or "const" in schema:
            values = list(schema["enum"]) if "enum" in schema else [schema["const"]]
            if "enum" in schema and "const" in schema:
                values = [v for v in values if v == schema["const"]]
            if keys - {"enum", "const", "type"}:
                raise _Fallback("enum/const beside constraints")
            types = schema.get("type")
            allowed = [types] if isinstance(types, str) else types
            return _alt(
                *(
                    _Lit(msgspec.json.encode(v).decode())
                    for v in values
                    if allowed is None
                    or _json_type(v) in allowed
                    or (_json_type(v) == "integer" and "number" in allowed)
                )
            )
        types = schema.get("type")
        if types is None:
            if keys - {"type"}:
                raise _Fallback("constraints without a type")
            return self.any_value()
        if isinstance(types, str):
            types = [types]
        return _alt(*(self.typed(t, schema) for t in types))

    def ref(self, ref: Any) -> _Ref:
        if not isinstance(ref, str):
            raise _Fallback(f"$ref {ref!r}")
        if ref not in self.refs:
            target: Any = self.root
            if not ref.startswith("#/"):
                raise _Fallback(f"$ref {ref!r}")
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, Mapping) or part not in target:
                    raise _Fallback(f"unresolved $ref {ref!r}")
                target = target[part]
            name = self.fresh(ref.rsplit("/", 1)[-1])
            self.refs[ref] = name
            self.rules[name] = _EMPTY
            self.rules[name] = self.node(target)
        return _Ref(self.refs[ref])

    def typed(self, kind: Any, schema: Mapping[str, Any]) -> _Node:
        if kind == "string":
            return self.string(schema)
        if kind == "integer":
            return self.integer(schema)
        if kind == "number":
            return self.number(schema)
        if kind == "boolean":
            return _alt(_Lit("true"), _Lit("false"))
        if kind == "null":
            return _Lit("null")
        if kind == "array":
            return self.array(schema)
        if kind == "object":
            return self.object(schema)
        raise _Fallback(f"type {kind!r}")

    def char(self) -> _Ref:
        return self.shared("char", lambda: _CHAR)

    def any_string(self) -> _Ref:
        return self.shared("string", lambda: _seq(_Lit('"'), _rep(self.char(), 0, None), _Lit('"')))

    def any_value(self) -> _Ref:
        def build() -> _Node:
            value, string = _Ref("value"), self.any_string()
            pair = _seq(string, _Lit(":"), value)
            obj = _seq(_Lit("{"), _opt(_seq(pair, _rep(_seq(_Lit(","), pair), 0, None))), _Lit("}"))
            arr = _seq(
                _Lit("["), _opt(_seq(value, _rep(_seq(_Lit(","), value), 0, None))), _Lit("]")
            )
            number = self.typed("number", {})
            return _alt(obj, arr, string, number, _Lit("true"), _Lit("false"), _Lit("null"))

        return self.shared("value", build)

    def string(self, schema: Mapping[str, Any]) -> _Node:
        low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
        high = None if high is None else int(high)
        shaped = [k for k in ("pattern", "format", "contentEncoding") if k in schema]
        if len(shaped) > 1:
            raise _Fallback(f"string with both {shaped[0]} and {shaped[1]}")
        if "pattern" in schema:
            body = _pattern(schema["pattern"], low, high, self.char())
        elif "format" in schema or "contentEncoding" in schema:
            what = str(schema.get("format") or schema.get("contentEncoding"))
            build = (
                _FORMATS.get(what)
                if "format" in schema
                else (_base64 if what == "base64" else None)
            )
            if build is None:
                raise _Fallback(
                    f"string {'format' if 'format' in schema else 'contentEncoding'} {what!r}"
                )
            if low or high is not None:
                raise _Fallback(f"length bounds on a {what} string")
            body = build()
        else:
            if high is not None and high < low:
                raise _Fallback("maxLength < minLength")
            if low == 0 and high is None:
                return self.any_string()
            body = _rep(self.char(), low, high)
        return _seq(_Lit('"'), body, _Lit('"'))

    def key(self, names: Any) -> _Node:
        """A dict's key: a JSON string, held to the ``propertyNames`` schema (which applies to
        the key as a string, so it needs no ``type``)."""
        if names is True or names == {}:
            return self.any_string()
        if not isinstance(names, Mapping) or names.get("type", "string") != "string":
            raise _Fallback(f"propertyNames {names!r}")
        return self.node({**names, "type": "string"})

    def number(self, schema: Mapping[str, Any]) -> _Node:
        low = high = None
        for key, upward in (("minimum", True), ("exclusiveMinimum", True)):
            if key in schema:
                bound = _float_bound(schema[key], key.startswith("exclusive"), upward)
                low = bound if low is None else max(low, bound)
        for key in ("maximum", "exclusiveMaximum"):
            if key in schema:
                bound = _float_bound(schema[key], key.startswith("exclusive"), False)
                high = bound if high is None else min(high, bound)
        if "multipleOf" in schema:  # see the module docstring: no server states it either
            raise _Fallback("multipleOf on a number")
        if low is None and high is None:
            return self.shared("number", lambda: _alt(self.integer({}), _float_forms()))
        if low is not None and high is not None and low > high:
            raise _Fallback("no number within the bounds")
        return _number_range(low, high)

    def integer(self, schema: Mapping[str, Any]) -> _Node:
        low, high = _I64_MIN, _U64_MAX
        if "minimum" in schema:
            low = max(low, math.ceil(schema["minimum"]))
        if "exclusiveMinimum" in schema:
            low = max(low, math.floor(schema["exclusiveMinimum"]) + 1)
        if "maximum" in schema:
            high = min(high, math.floor(schema["maximum"]))
        if "exclusiveMaximum" in schema:
            high = min(high, math.ceil(schema["exclusiveMaximum"]) - 1)
        if low > high:
            raise _Fallback("no integer within the bounds")
        if "multipleOf" in schema:
            step = schema["multipleOf"]
            if isinstance(step, bool) or not isinstance(step, (int, float)) or step <= 0:
                raise _Fallback(f"multipleOf {step!r}")
            if step != int(step):  # a fraction: which integers are multiples is a float question
                raise _Fallback(f"multipleOf {step!r} on an integer")
            return _multiples(low, high, int(step), self.named)
        if (low, high) == (_I64_MIN, _U64_MAX):
            return self.shared("integer", lambda: _int_range(low, high))
        return _int_range(low, high)

    def array(self, schema: Mapping[str, Any]) -> _Node:
        low, high = int(schema.get("minItems", 0)), schema.get("maxItems")
        high = None if high is None else int(high)
        items = schema.get("items", True)
        if "prefixItems" in schema:
            prefix = list(schema["prefixItems"])
            closed = high == len(prefix) or items is False
            if not closed or low != len(prefix):
                raise _Fallback("prefixItems with a variable length")
            inner = [self.node(s) for s in prefix]
            parts: list[_Node] = [_Lit("[")]
            for i, part in enumerate(inner):
                parts += [_Lit(",")] if i else []
                parts.append(part)
            return _seq(*parts, _Lit("]"))
        if high is not None and high < low:
            raise _Fallback("maxItems < minItems")
        if items is False or high == 0:
            if low:
                raise _Fallback("items: false with minItems")
            return _Lit("[]")
        item = self.node(items)
        return _seq(_Lit("["), _list(item, low, high), _Lit("]"))

    def object(self, schema: Mapping[str, Any]) -> _Node:
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties", not props)
        required = list(schema.get("required", []))
        if set(required) - set(props):
            raise _Fallback("a required property without a schema")
        if not props:
            if extra is False:
                return _Lit("{}")
            low, high = int(schema.get("minProperties", 0)), schema.get("maxProperties")
            high = None if high is None else int(high)
            if high is not None and high < low:
                raise _Fallback("maxProperties < minProperties")
            pair = _seq(self.key(schema.get("propertyNames", True)), _Lit(":"), self.node(extra))
            return _seq(_Lit("{"), _list(pair, low, high), _Lit("}"))
        if extra not in (False, None) and extra != {} and extra is not True:
            raise _Fallback("properties with an additionalProperties schema")
        if "propertyNames" in schema:
            raise _Fallback("propertyNames with properties")
        if "minProperties" in schema or "maxProperties" in schema:
            raise _Fallback("minProperties/maxProperties with properties")
        pairs = [
            (_seq(_Lit(msgspec.json.encode(name).decode() + ":"), self.node(sub)), name in required)
            for name, sub in props.items()
        ]
        return _seq(_Lit("{"), _properties(pairs, self.named), _Lit("}"))


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


def _list(item: _Node, low: int, high: int | None) -> _Node:
    """``item`` ``low`` to ``high`` times, comma-separated (no brackets)."""
    if high == 0:
        return _EMPTY
    more = _rep(_seq(_Lit(","), item), max(low - 1, 0), None if high is None else high - 1)
    body = _seq(item, more)
    return body if low else _opt(body)


def _properties(pairs: list[tuple[_Node, bool]], named: Callable[[_Node], _Ref]) -> _Node:
    """Properties in order, required ones always, optional ones each present or absent: after
    the first present one, each is preceded by a comma. With k optional properties before the
    first required one, the grammar branches k ways; past a few, the tails become rules
    (``named``), so the grammar grows linearly, not quadratically."""
    leading = next((i for i, (_, req) in enumerate(pairs) if req), len(pairs))
    items = [_seq(_Lit(","), kv) if req else _opt(_seq(_Lit(","), kv)) for kv, req in pairs]

    @functools.cache
    def rest(i: int) -> _Node:
        if i >= leading or leading < 3:
            return _seq(*items[i:])
        return named(_seq(items[i], rest(i + 1)))

    def first(i: int) -> _Node:
        if i == len(pairs):
            return _EMPTY
        kv, req = pairs[i]
        here = _seq(kv, rest(i + 1))
        return here if req else _alt(here, first(i + 1))

    return first(0)


def _base64() -> _Node:
    tail = _alt(_seq(_rep(_B64, 2, 2), _Lit("==")), _seq(_rep(_B64, 3, 3), _Lit("=")))
    return _seq(_rep(_rep(_B64, 4, 4), 0, None), _opt(tail))


# --------------------------------------------------------------------------------------------
# Patterns: Python regex (the dialect msgspec checks with) -> the JSON-encoded string's grammar
# --------------------------------------------------------------------------------------------


def _sre() -> Any:
    try:
        import re._parser as parser  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # Python 3.10
        import sre_parse as parser  # type: ignore[no-redef,unused-ignore]
    return parser


def _pattern(pattern: Any, low: int, high: int | None, char: _Node) -> _Node:
    """A string matching ``pattern`` (searched, as msgspec does), ``low`` to ``high`` code
    points long; ``char`` is any one encoded code point (the unanchored ends)."""
    if not isinstance(pattern, str):
        raise _Fallback(f"pattern {pattern!r}")
    sre = _sre()  # the parser, with the opcode names in its namespace
    try:
        parsed = sre.parse(pattern)
    except re.error as exc:
        raise _Fallback(f"pattern {pattern!r}: {exc}") from None
    flags = parsed.state.flags & ~(re.UNICODE | re.DOTALL)
    if flags:
        raise _Fallback(f"pattern {pattern!r} with flags")
    items = list(parsed.data)
    at = sre.AT
    starts = (
        bool(items)
        and items[0][0] == at
        and items[0][1] in (sre.AT_BEGINNING, sre.AT_BEGINNING_STRING)
    )
    items = items[1:] if starts else items
    ends = bool(items) and items[-1][0] == at and items[-1][1] in (sre.AT_END, sre.AT_END_STRING)
    items = items[:-1] if ends else items
    reader = _RegexReader(sre, bool(parsed.state.flags & re.DOTALL), pattern)
    width_low, width_high = parsed.getwidth()
    unbounded = width_high >= sre.MAXREPEAT or not (starts and ends)
    if low > width_low or (high is not None and (unbounded or width_high > high)):
        one = len(items) == 1 and items[0][0] is sre.MAX_REPEAT
        if not (one and starts and ends and items[0][1][2].getwidth() == (1, 1)):
            raise _Fallback(f"length bounds with pattern {pattern!r}")
        rep_low, rep_high, sub = items[0][1]
        rep_high = None if rep_high >= sre.MAXREPEAT else rep_high
        top = rep_high if high is None else (high if rep_high is None else min(high, rep_high))
        if top is not None and top < max(low, rep_low):
            raise _Fallback(f"length bounds exclude pattern {pattern!r}")
        return _rep(reader.sequence(sub), max(low, rep_low), top)
    anything = _rep(char, 0, None)
    return _seq(
        _EMPTY if starts else anything, reader.sequence(items), _EMPTY if ends else anything
    )


class _RegexReader:
    """Turns parsed regex items into grammar nodes over JSON-encoded characters."""

    def __init__(self, sre: Any, dotall: bool, pattern: str) -> None:
        self.sre, self.dotall, self.pattern = sre, dotall, pattern

    def fail(self, what: str) -> _Fallback:
        return _Fallback(f"pattern {self.pattern!r}: {what}")

    def sequence(self, items: Iterable[tuple[Any, Any]]) -> _Node:
        return _seq(*(self.item(op, av) for op, av in items))

    def item(self, op: Any, av: Any) -> _Node:
        sre = self.sre
        if op is sre.LITERAL:
            return self.encode([(av, av)])
        if op is sre.NOT_LITERAL:
            return self.encode(_complement([(av, av)]))
        if op is sre.ANY:
            return self.encode([(0, _MAX_CP)] if self.dotall else _complement([(10, 10)]))
        if op is sre.IN:
            return self.encode(self.members(av))
        if op is sre.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            if add_flags or del_flags:
                raise self.fail("inline flags")
            return self.sequence(sub)
        if op is sre.BRANCH:
            return _alt(*(self.sequence(branch) for branch in av[1]))
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            low, high, sub = av
            return _rep(self.sequence(sub), low, None if high >= sre.MAXREPEAT else high)
        raise self.fail(f"{op} is not covered")

    def members(self, items: list[tuple[Any, Any]]) -> list[tuple[int, int]]:
        sre = self.sre
        negate = bool(items) and items[0][0] is sre.NEGATE
        ranges: list[tuple[int, int]] = []
        for op, av in items[1:] if negate else items:
            if op is sre.LITERAL:
                ranges.append((av, av))
            elif op is sre.RANGE:
                ranges.append(av)
            elif op is sre.CATEGORY and not negate and av in _CATEGORIES:
                ranges += _CATEGORIES[av]
            else:  # negated \d \w \s are Unicode-wide in Python: no exact class
                raise self.fail(f"class member {op} {av}")
        merged = _cls(ranges).ranges
        return _complement(merged) if negate else list(merged)

    def encode(self, ranges: Iterable[tuple[int, int]]) -> _Node:
        """The JSON encodings (msgspec's) of the characters in ``ranges``."""
        ranges = list(ranges)
        plain = _intersect(
            ranges, _complement([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0xD800, 0xDFFF)])
        )
        special = {
            cp
            for lo, hi in _intersect(ranges, [(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])
            for cp in range(lo, hi + 1)
        }
        escaped: list[_Node] = [
            _Lit(_SHORT_ESCAPES[cp]) for cp in sorted(special & set(_SHORT_ESCAPES))
        ]
        for high in (0, 1):  # msgspec writes other controls as lowercase \u00XX
            low = [cp & 0xF for cp in sorted(special - set(_SHORT_ESCAPES)) if cp >> 4 == high]
            if low:
                digits = _chars("".join(f"{d:x}" for d in low))
                escaped.append(_seq(_Lit(f"\\u00{high}"), digits))
        if len(plain) == 1 and plain[0][0] == plain[0][1]:
            return _alt(_Lit(chr(plain[0][0])), *escaped)
        return _alt(*([_cls(plain)] if plain else []), *escaped)


_CATEGORY_RANGES = {
    "CATEGORY_DIGIT": [(0x30, 0x39)],
    "CATEGORY_WORD": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    "CATEGORY_SPACE": [(0x09, 0x0D), (0x20, 0x20)],
}
_CATEGORIES = {getattr(_sre(), k): v for k, v in _CATEGORY_RANGES.items()}

# --------------------------------------------------------------------------------------------
# Rules: reachability, deduplication, rendering, lengths
# --------------------------------------------------------------------------------------------


def _refs(node: _Node) -> Iterable[str]:
    if isinstance(node, _Ref):
        yield node.name
    elif isinstance(node, (_Seq, _Alt)):
        for item in node.items:
            yield from _refs(item)
    elif isinstance(node, _Rep):
        yield from _refs(node.item)


def _reachable(rules: dict[str, _Node]) -> dict[str, _Node]:
    seen, todo = {"root"}, ["root"]
    while todo:
        for name in _refs(rules[todo.pop()]):
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return {name: body for name, body in rules.items() if name in seen}


# llama.cpp expands `x{m,n}` into rules and refuses a repeat whose count times the rules inside
# `x` reaches 2000 (src/llama-grammar.cpp, MAX_REPETITION_THRESHOLD; a larger max it silently
# makes unbounded). So a repeated group becomes a rule of its own (one rule inside), and counts
# stay below the threshold.
_MAX_REPEAT = 1999


def _hoist(rules: dict[str, _Node]) -> dict[str, _Node]:
    """Each group repeated more than once (``(a b){2,5}``, ``(a | b)+``) moved into a rule."""
    out = dict(rules)
    names = iter(f"{base}-{n}" for base in ("item",) for n in range(1, 1 << 30))

    def walk(node: _Node) -> _Node:
        if isinstance(node, (_Seq, _Alt)):
            return type(node)(tuple(walk(i) for i in node.items))
        if isinstance(node, _Rep):
            item = walk(node.item)
            if isinstance(item, (_Seq, _Alt)) and max(node.min, node.max or 0) > 1:
                name = next(n for n in names if n not in out)
                out[name] = item
                item = _Ref(name)
            return _Rep(item, node.min, node.max)
        return node

    for name, body in rules.items():
        out[name] = walk(body)
    return out


def _too_many(rules: Mapping[str, _Node]) -> bool:
    def count(node: _Node) -> int:
        if isinstance(node, (_Seq, _Alt)):
            return max(count(i) for i in node.items)
        if isinstance(node, _Rep):
            return max(node.min, node.max or 0, count(node.item))
        return 0

    return any(count(body) > _MAX_REPEAT for body in rules.values())


def _substitute(node: _Node, names: Mapping[str, str]) -> _Node:
    if isinstance(node, _Ref):
        return _Ref(names.get(node.name, node.name))
    if isinstance(node, _Seq):
        return _Seq(tuple(_substitute(i, names) for i in node.items))
    if isinstance(node, _Alt):
        return _Alt(tuple(_substitute(i, names) for i in node.items))
    if isinstance(node, _Rep):
        return _Rep(_substitute(node.item, names), node.min, node.max)
    return node


def _dedupe(rules: dict[str, _Node]) -> dict[str, _Node]:
    """Rules with identical bodies merged into the first (root kept), until none are left."""
    while True:
        by_body: dict[_Node, str] = {}
        names: dict[str, str] = {}
        for name, body in sorted(rules.items(), key=lambda kv: kv[0] != "root"):
            if body in by_body:
                names[name] = by_body[body]
            else:
                by_body[body] = name
        if not names:
            return rules
        rules = {n: _substitute(b, names) for n, b in rules.items() if n not in names}


def _render(rules: Mapping[str, _Node]) -> str:
    order = sorted(rules, key=lambda name: name != "root")
    return "".join(f"{name} ::= {_expr(rules[name])}\n" for name in order)


def _expr(node: _Node, tight: bool = False) -> str:
    if isinstance(node, _Lit):
        return '"' + "".join(_lit_char(c) for c in node.text) + '"'
    if isinstance(node, _Cls):
        return _class(node)
    if isinstance(node, _Ref):
        return node.name
    if isinstance(node, _Rep):
        suffix = {(0, 1): "?", (0, None): "*", (1, None): "+"}.get((node.min, node.max))
        if suffix is None:
            suffix = (
                f"{{{node.min}}}"
                if node.min == node.max
                else f"{{{node.min},{'' if node.max is None else node.max}}}"
            )
        item = _expr(node.item, tight=True)
        return (f"({item})" if isinstance(node.item, _Rep) else item) + suffix  # no `x{4}*`
    if isinstance(node, _Seq):
        text = " ".join(_expr(i, tight=isinstance(i, _Alt)) for i in node.items)
        return f"({text})" if tight else text
    text = " | ".join(_expr(i) for i in node.items)
    return f"({text})" if tight else text


def _lit_char(c: str) -> str:
    if c in '"\\':
        return "\\" + c
    return c if " " <= c <= "~" else _hex(ord(c))


def _hex(cp: int) -> str:
    """``\\uXXXX`` or ``\\UXXXXXXXX``, never ``\\xXX``: xgrammar reads as many hex digits
    after ``\\x`` as follow (``\\x5Ca`` is U+05CA there), llama.cpp exactly two."""
    return f"\\u{cp:04X}" if cp <= 0xFFFF else f"\\U{cp:08X}"


def _class_char(cp: int) -> str:
    c = chr(cp)
    if c in '"\\':
        return "\\" + c
    return c if c.isascii() and (c.isalnum() or c in " !#$%&'()*+,./:;<=>?@_`{|}~") else _hex(cp)


def _class(node: _Cls) -> str:
    members = list(node.ranges)
    outside = _complement(members)
    negate = bool(outside) and len(outside) <= len(members)
    shown = outside if negate else members

    def part(lo: int, hi: int) -> str:
        if lo == hi:
            return _class_char(lo)
        return _class_char(lo) + ("" if hi == lo + 1 else "-") + _class_char(hi)

    return "[" + ("^" if negate else "") + "".join(part(lo, hi) for lo, hi in shown) + "]"


def _utf8_len(cp: int) -> int:
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


def _shortest(rules: Mapping[str, _Node]) -> int:
    best: dict[str, float] = dict.fromkeys(rules, math.inf)

    def low(node: _Node) -> float:
        if isinstance(node, _Lit):
            return len(node.text.encode())
        if isinstance(node, _Cls):
            return _utf8_len(node.ranges[0][0])
        if isinstance(node, _Ref):
            return best[node.name]
        if isinstance(node, _Seq):
            return sum(low(i) for i in node.items)
        if isinstance(node, _Alt):
            return min(low(i) for i in node.items)
        return node.min * low(node.item) if node.min else 0

    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            value = low(body)
            if value < best[name]:
                best[name], changed = value, True
    return int(best["root"])


def _longest(rules: Mapping[str, _Node]) -> int | None:
    memo: dict[str, int | None] = {}
    active: set[str] = set()

    class _Unbounded(Exception):
        pass

    def high(node: _Node) -> int:
        if isinstance(node, _Lit):
            return len(node.text.encode())
        if isinstance(node, _Cls):
            return _utf8_len(node.ranges[-1][1])
        if isinstance(node, _Ref):
            if node.name in active:
                raise _Unbounded
            if node.name not in memo:
                active.add(node.name)
                memo[node.name] = high(rules[node.name])
                active.discard(node.name)
            value = memo[node.name]
            assert value is not None
            return value
        if isinstance(node, _Seq):
            return sum(high(i) for i in node.items)
        if isinstance(node, _Alt):
            return max(high(i) for i in node.items)
        item = high(node.item)
        if node.max is None:
            if item:
                raise _Unbounded
            return 0
        return node.max * item

    try:
        return high(_Ref("root"))
    except _Unbounded:
        return None
