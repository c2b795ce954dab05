"""The compact grammar's JSON values (`lmclient._output.gbnf`): a JSON string's code points,
integer and decimal ranges as digit grammars, the floats msgspec writes, multiples, dates and
times, each as msgspec encodes them."""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable
from typing import Any

from .gbnf_ir import (
    DIGIT,
    EMPTY,
    HEX,
    NONZERO,
    Fallback,
    Lit,
    Node,
    Ref,
    alt,
    char_class,
    char_span,
    chars,
    complement,
    opt,
    rep,
    seq,
)

__all__ = [
    "B64",
    "CHAR",
    "I64_MIN",
    "OFFSET",
    "PARTIAL_TIME",
    "SHORT_ESCAPES",
    "U64_MAX",
    "date",
    "float_bound",
    "float_forms",
    "int_range",
    "multiples",
    "number_range",
]


# --------------------------------------------------------------------------------------------
# JSON pieces
# --------------------------------------------------------------------------------------------

# One code point of a JSON string: a plain character, a short escape, a \uXXXX escape that is
# not a surrogate, or a surrogate pair (msgspec rejects a lone surrogate).
_PLAIN = char_class(complement([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]))
_HIGH = seq(chars("dD"), chars("89abAB"), rep(HEX, 2, 2))
_LOW = seq(chars("dD"), char_class([(0x63, 0x66), (0x43, 0x46)]), rep(HEX, 2, 2))
_BMP = alt(
    seq(
        char_class([(0x30, 0x39), (0x41, 0x43), (0x45, 0x46), (0x61, 0x63), (0x65, 0x66)]),
        rep(HEX, 3, 3),
    ),
    seq(chars("dD"), char_span("0", "7"), rep(HEX, 2, 2)),
)
CHAR = alt(
    _PLAIN,
    seq(
        Lit("\\"),
        alt(chars('"\\/bfnrt'), seq(Lit("u"), alt(_BMP, seq(_HIGH, Lit("\\u"), _LOW)))),
    ),
)
SHORT_ESCAPES = {
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}

I64_MIN, U64_MAX = -(2**63), 2**64 - 1


def _uint_same_length(low: str, high: str) -> Node:
    """Decimal strings of one length from ``low`` to ``high`` (the digit-range construction)."""
    if not low:
        return EMPTY
    if low[0] == high[0]:
        return seq(Lit(low[0]), _uint_same_length(low[1:], high[1:]))
    n = len(low) - 1
    parts: list[Node] = []
    first, last = int(low[0]), int(high[0])
    if low[1:] != "0" * n:
        parts.append(seq(Lit(low[0]), _uint_same_length(low[1:], "9" * n)))
        first += 1
    tail: Node | None = None
    if high[1:] != "9" * n:
        tail = seq(Lit(high[0]), _uint_same_length("0" * n, high[1:]))
        last -= 1
    if first <= last:
        lead = Lit(str(first)) if first == last else char_span(str(first), str(last))
        parts.append(seq(lead, rep(DIGIT, n, n)))
    if tail is not None:
        parts.append(tail)
    return alt(*parts)


def _uint_range(low: int, high: int) -> Node:
    parts: list[Node] = []
    full: list[int] = []  # a run of lengths n >= 2 taken whole: one `[1-9] [0-9]{a,b}`
    for n in range(len(str(low)), len(str(high)) + 1):
        a, b = max(low, 10 ** (n - 1) if n > 1 else 0), min(high, 10**n - 1)
        if (a, b) == (10 ** (n - 1), 10**n - 1):
            full.append(n)
            continue
        if full:
            parts.append(seq(NONZERO, rep(DIGIT, full[0] - 1, full[-1] - 1)))
            full = []
        if a <= b:
            parts.append(_uint_same_length(str(a), str(b)))
    if full:
        parts.append(seq(NONZERO, rep(DIGIT, full[0] - 1, full[-1] - 1)))
    return alt(*parts)


def int_range(low: int, high: int) -> Node:
    parts = []
    if low < 0:
        parts.append(seq(Lit("-"), _uint_range(max(1, -high), -low)))
    if high >= 0:
        parts.append(_uint_range(max(low, 0), high))
    return alt(*parts)


_MAX_MULTIPLES = 64  # multiples in range written out one by one; beyond, a residue automaton
_MAX_MODULUS = 16  # residue automata up to this modulus (its rules grow with it); beyond, fall back


def multiples(low: int, high: int, step: int, named: Callable[[Node], Ref]) -> Node:
    """The multiples of ``step`` from ``low`` to ``high``: each written out when few, else the
    digit-range construction of `int_range` run in step with the remainder modulo ``step``
    (a finite automaton over the digits: a regular language, one rule per length and
    remainder)."""
    first, last = -(-low // step) * step, high // step * step
    if first > last:
        raise Fallback("no multiple of multipleOf within the bounds")
    if (last - first) // step < _MAX_MULTIPLES:
        return alt(*(Lit(str(n)) for n in range(first, last + 1, step)))
    if step > _MAX_MODULUS:
        raise Fallback(f"multipleOf {step} over a wide range")

    @functools.cache
    def free(n: int, need: int) -> Node | None:
        """``n`` digits (leading zeros allowed) whose value is ``need`` modulo ``step``."""
        if n == 0:
            return EMPTY if need == 0 else None
        return lead(0, 9, n, need)

    def lead(first: int, last: int, n: int, need: int) -> Node | None:
        """A digit from ``first`` to ``last``, then ``n - 1`` free digits: ``need`` in all."""
        by_rest: dict[int, list[int]] = {}
        for d in range(first, last + 1):
            by_rest.setdefault((need - d * 10 ** (n - 1)) % step, []).append(d)
        parts = []
        for rest, digits in by_rest.items():
            tail = free(n - 1, rest)
            if tail is not None:
                cls = char_class((d + 48, d + 48) for d in digits)
                head = Lit(chr(digits[0] + 48)) if len(digits) == 1 else cls
                parts.append(seq(head, named(tail) if n > 2 else tail))
        return alt(*parts) if parts else None

    def same_length(lo: str, hi: str, need: int) -> Node | None:
        if not lo:
            return EMPTY if need == 0 else None
        n, p = len(lo), 10 ** (len(lo) - 1)
        if lo[0] == hi[0]:
            rest = same_length(lo[1:], hi[1:], (need - int(lo[0]) * p) % step)
            return None if rest is None else seq(Lit(lo[0]), rest)
        parts: list[Node | None] = []
        first, last = int(lo[0]), int(hi[0])
        if lo[1:] != "0" * (n - 1):
            rest = same_length(lo[1:], "9" * (n - 1), (need - first * p) % step)
            parts.append(None if rest is None else seq(Lit(lo[0]), rest))
            first += 1
        if hi[1:] != "9" * (n - 1):
            rest = same_length("0" * (n - 1), hi[1:], (need - last * p) % step)
            parts.append(None if rest is None else seq(Lit(hi[0]), rest))
            last -= 1
        if first <= last:
            parts.append(lead(first, last, n, need))
        found = [part for part in parts if part is not None]
        return alt(*found) if found else None

    def unsigned(a: int, b: int) -> list[Node]:
        found = []
        for n in range(len(str(a)), len(str(b)) + 1):
            lo, hi = max(a, 10 ** (n - 1) if n > 1 else 0), min(b, 10**n - 1)
            part = same_length(str(lo), str(hi), 0) if lo <= hi else None
            found += [] if part is None else [part]
        return found

    parts = unsigned(max(low, 0), high) if high >= 0 else []
    if low < 0:
        parts += [seq(Lit("-"), p) for p in unsigned(max(1, -high), -low)]
    return alt(*parts)


def float_forms() -> Node:
    """Floats as msgspec writes them (shortest round-trip), bounded so none overflows."""
    fixed = seq(alt(Lit("0"), seq(NONZERO, rep(DIGIT, 0, 16))), Lit("."), rep(DIGIT, 1, 24))
    exponent = alt(
        seq(Lit("-"), NONZERO, rep(DIGIT, 0, 2)),
        seq(NONZERO, rep(DIGIT, 0, 1)),
        seq(chars("12"), rep(DIGIT, 2, 2)),
        seq(Lit("30"), char_span("0", "7")),
    )
    scientific = seq(NONZERO, opt(seq(Lit("."), rep(DIGIT, 1, 16))), Lit("e"), exponent)
    return seq(opt(Lit("-")), alt(fixed, scientific))


_FIXED_INT_DIGITS, _FIXED_FRACTION, _SCI_FRACTION = 17, 24, 16  # as `float_forms`
_EXPONENTS = (-999, 307)  # the decimal exponents `float_forms` offers (never 0)


def _aligned_digits(
    low: str | None, high: str | None, point: int, fraction: tuple[int, int]
) -> Node | None:
    """Digit strings with ``point`` digits before a ``.`` and ``fraction`` (least, most) after
    it (no ``.`` when none follow), whose digits, read as one number padded with zeros, lie
    from ``low`` to ``high`` (digit strings aligned the same way; ``None``: no bound). The
    digit-range construction of ``_uint_same_length``, over a variable-length fraction."""
    least, most = fraction

    def free(pos: int) -> Node:
        if pos < point:
            return seq(rep(DIGIT, point - pos, point - pos), free(point))
        given = pos - point
        tail = rep(DIGIT, max(least - given, 0), most - given)
        if given:
            return tail
        more = seq(Lit("."), rep(DIGIT, max(least, 1), most))
        return more if least else opt(more)

    @functools.cache
    def walk(pos: int, low: str | None, high: str | None) -> Node | None:
        if low is not None and not low.strip("0"):
            low = None  # what follows is at least zero anyway
        if low is None and high is None:
            return free(pos)
        options: list[Node] = []
        if low is None and pos >= point + least:
            options.append(EMPTY)  # the rest all zeros: within both bounds
        if pos < point + most:
            lead = Lit(".") if pos == point else EMPTY
            first = int(low[0]) if low else 0
            last = 9 if high is None else int(high[0]) if high else 0
            digits: list[Node] = []
            if low is not None and high is not None and first == last:
                rest = walk(pos + 1, low[1:], high[1:] if high else "")
                digits += [] if rest is None else [seq(Lit(str(first)), rest)]
            else:
                if low is not None:
                    rest = walk(pos + 1, low[1:], None)
                    digits += [] if rest is None else [seq(Lit(str(first)), rest)]
                    first += 1
                if high is not None:
                    rest = walk(pos + 1, None, high[1:] if high else "")
                    digits += [] if rest is None else [seq(Lit(str(last)), rest)]
                    last -= 1
                if first <= last:
                    span = Lit(str(first)) if first == last else char_span(str(first), str(last))
                    digits.append(seq(span, free(pos + 1)))
            if digits:
                options.append(seq(lead, alt(*digits)))
        return alt(*options) if options else None

    return walk(0, low, high)


def _digits_of(value: decimal.Decimal, point: int) -> str:
    """``value`` (``0 <= value < 10**point``) as ``point`` integer digits and its fraction's."""
    whole, _, fraction = format(value, "f").partition(".")
    return whole.zfill(point)[-point:] + fraction.rstrip("0")


def _float_range(low: decimal.Decimal, high: decimal.Decimal | None) -> Node | None:
    """The non-negative floats of `float_forms` from ``low`` (``>= 0``) to ``high``."""
    one = decimal.Decimal(1)
    parts: list[Node] = []
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
        parts += [] if found is None else [seq(found, Lit(f"e{e}"))]
    inner = range(bottom if bottom in whole else bottom + 1, (top if top in whole else top - 1) + 1)
    for a, b in ((inner.start, min(inner.stop - 1, -1)), (max(inner.start, 1), inner.stop - 1)):
        if a <= b:
            mantissa = seq(NONZERO, opt(seq(Lit("."), rep(DIGIT, 1, _SCI_FRACTION))))
            parts.append(seq(mantissa, Lit("e"), int_range(a, b)))
    return alt(*parts) if parts else None


def number_range(low: decimal.Decimal | None, high: decimal.Decimal | None) -> Node:
    """Numbers as `number` offers them (integers, `float_forms`), from ``low`` to ``high``
    (``None``: unbounded): the integers among them, the non-negative floats, and ``-`` before
    the negated negative ones (``-0.0`` included when 0 is in range, as msgspec writes it)."""
    parts: list[Node] = []
    a = I64_MIN if low is None else max(I64_MIN, _ceil(low))
    b = U64_MAX if high is None else min(U64_MAX, _floor(high))
    if a <= b:
        parts.append(int_range(a, b))
    zero = decimal.Decimal(0)
    if high is None or high >= 0:
        found = _float_range(max(low, zero) if low is not None else zero, high)
        parts += [] if found is None else [found]
    if low is None or low <= 0:
        found = _float_range(max(-high, zero) if high is not None else zero, _neg(low))
        parts += [] if found is None else [seq(Lit("-"), found)]
    return alt(*parts)


def _neg(value: decimal.Decimal | None) -> decimal.Decimal | None:
    return None if value is None else -value


def _ceil(value: decimal.Decimal) -> int:
    return int(value.to_integral_value(rounding=decimal.ROUND_CEILING))


def _floor(value: decimal.Decimal) -> int:
    return int(value.to_integral_value(rounding=decimal.ROUND_FLOOR))


def float_bound(value: Any, exclusive: bool, upward: bool) -> decimal.Decimal:
    """A schema's bound on a ``number`` as the float it admits first: the least double
    ``>= value`` (``>`` when ``exclusive``) for a lower bound, the greatest ``<=``/``<`` for an
    upper one, written as its shortest round-trip decimal. Every decimal on the right side of
    that one rounds to a double on the right side of the bound (rounding is monotonic), so the
    grammar holds exactly what msgspec's float comparison holds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Fallback(f"number bound {value!r}")
    try:
        near = float(value)
    except OverflowError:
        raise Fallback(f"number bound {value!r} beyond a double") from None
    if not math.isfinite(near) or abs(near) > 1e300:
        raise Fallback(f"number bound {value!r} beyond the grammar's floats")
    if upward and (near < value or (exclusive and near == value)):
        near = math.nextafter(near, math.inf)
    if not upward and (near > value or (exclusive and near == value)):
        near = math.nextafter(near, -math.inf)
    return decimal.Decimal(repr(near))


def date() -> Node:
    year = alt(
        seq(Lit("000"), NONZERO),
        seq(Lit("00"), NONZERO, DIGIT),
        seq(Lit("0"), NONZERO, rep(DIGIT, 2, 2)),
        seq(NONZERO, rep(DIGIT, 3, 3)),
    )
    # Leap years: the last two digits a non-zero multiple of 4, or "00" after a multiple of 4
    # (0000 is no year).
    by4 = alt(
        seq(chars("02468"), chars("48")),
        seq(chars("13579"), chars("26")),
        seq(chars("2468"), Lit("0")),
    )
    centuries = alt(
        seq(chars("2468"), chars("048")),
        seq(Lit("0"), chars("48")),
        seq(chars("13579"), chars("26")),
    )
    leap = alt(seq(DIGIT, DIGIT, by4), seq(centuries, Lit("00")))
    day28 = alt(seq(Lit("0"), NONZERO), seq(Lit("1"), DIGIT), seq(Lit("2"), char_span("0", "8")))
    day30 = alt(seq(Lit("0"), NONZERO), seq(chars("12"), DIGIT), Lit("30"))
    day31 = alt(day30, Lit("31"))
    month_day = alt(
        seq(alt(*map(Lit, ("01", "03", "05", "07", "08", "10", "12"))), Lit("-"), day31),
        seq(alt(*map(Lit, ("04", "06", "09", "11"))), Lit("-"), day30),
        seq(Lit("02-"), day28),
    )
    return alt(seq(year, Lit("-"), month_day), seq(leap, Lit("-02-29")))


_HOUR = alt(seq(chars("01"), DIGIT), seq(Lit("2"), char_span("0", "3")))
_MINUTE = seq(char_span("0", "5"), DIGIT)
PARTIAL_TIME = seq(
    _HOUR, Lit(":"), _MINUTE, Lit(":"), _MINUTE, opt(seq(Lit("."), rep(DIGIT, 1, 6)))
)
OFFSET = alt(Lit("Z"), seq(chars("+-"), _HOUR, Lit(":"), _MINUTE))
B64 = char_class([(0x2B, 0x2B), (0x2F, 0x39), (0x41, 0x5A), (0x61, 0x7A)])
