"""The compact grammar's patterns (`lmclient._output.gbnf`): a Python regex (the dialect msgspec
checks ``pattern`` with) becomes the grammar of the JSON-encoded strings it matches."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .gbnf_ir import (
    EMPTY,
    MAX_CP,
    Fallback,
    Lit,
    Node,
    alt,
    char_class,
    chars,
    complement,
    intersect,
    rep,
    seq,
)
from .gbnf_json import SHORT_ESCAPES

__all__ = ["regex_grammar"]


# --------------------------------------------------------------------------------------------
# Patterns: Python regex (the dialect msgspec checks with) -> the JSON-encoded string's grammar
# --------------------------------------------------------------------------------------------


def _sre() -> Any:
    try:
        import re._parser as parser  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # Python 3.10
        import sre_parse as parser  # type: ignore[no-redef,unused-ignore]
    return parser


def regex_grammar(pattern: Any, low: int, high: int | None, char: Node) -> Node:
    """A string matching ``pattern`` (searched, as msgspec does), ``low`` to ``high`` code
    points long; ``char`` is any one encoded code point (the unanchored ends)."""
    if not isinstance(pattern, str):
        raise Fallback(f"pattern {pattern!r}")
    sre = _sre()  # the parser, with the opcode names in its namespace
    try:
        parsed = sre.parse(pattern)
    except re.error as exc:
        raise Fallback(f"pattern {pattern!r}: {exc}") from None
    flags = parsed.state.flags & ~(re.UNICODE | re.DOTALL)
    if flags:
        raise Fallback(f"pattern {pattern!r} with flags")
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
            raise Fallback(f"length bounds with pattern {pattern!r}")
        rep_low, rep_high, sub = items[0][1]
        rep_high = None if rep_high >= sre.MAXREPEAT else rep_high
        top = rep_high if high is None else (high if rep_high is None else min(high, rep_high))
        if top is not None and top < max(low, rep_low):
            raise Fallback(f"length bounds exclude pattern {pattern!r}")
        return rep(reader.sequence(sub), max(low, rep_low), top)
    anything = rep(char, 0, None)
    return seq(EMPTY if starts else anything, reader.sequence(items), EMPTY if ends else anything)


class _RegexReader:
    """Turns parsed regex items into grammar nodes over JSON-encoded characters."""

    def __init__(self, sre: Any, dotall: bool, pattern: str) -> None:
        self.sre, self.dotall, self.pattern = sre, dotall, pattern

    def fail(self, what: str) -> Fallback:
        return Fallback(f"pattern {self.pattern!r}: {what}")

    def sequence(self, items: Iterable[tuple[Any, Any]]) -> Node:
        return seq(*(self.item(op, av) for op, av in items))

    def item(self, op: Any, av: Any) -> Node:
        sre = self.sre
        if op is sre.LITERAL:
            return self.encode([(av, av)])
        if op is sre.NOT_LITERAL:
            return self.encode(complement([(av, av)]))
        if op is sre.ANY:
            return self.encode([(0, MAX_CP)] if self.dotall else complement([(10, 10)]))
        if op is sre.IN:
            return self.encode(self.members(av))
        if op is sre.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            if add_flags or del_flags:
                raise self.fail("inline flags")
            return self.sequence(sub)
        if op is sre.BRANCH:
            return alt(*(self.sequence(branch) for branch in av[1]))
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            low, high, sub = av
            return rep(self.sequence(sub), low, None if high >= sre.MAXREPEAT else high)
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
        merged = char_class(ranges).ranges
        return complement(merged) if negate else list(merged)

    def encode(self, ranges: Iterable[tuple[int, int]]) -> Node:
        """The JSON encodings (msgspec's) of the characters in ``ranges``."""
        ranges = list(ranges)
        plain = intersect(
            ranges, complement([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0xD800, 0xDFFF)])
        )
        special = {
            cp
            for lo, hi in intersect(ranges, [(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])
            for cp in range(lo, hi + 1)
        }
        escaped: list[Node] = [
            Lit(SHORT_ESCAPES[cp]) for cp in sorted(special & set(SHORT_ESCAPES))
        ]
        for high in (0, 1):  # msgspec writes other controls as lowercase \u00XX
            low = [cp & 0xF for cp in sorted(special - set(SHORT_ESCAPES)) if cp >> 4 == high]
            if low:
                digits = chars("".join(f"{d:x}" for d in low))
                escaped.append(seq(Lit(f"\\u00{high}"), digits))
        if len(plain) == 1 and plain[0][0] == plain[0][1]:
            return alt(Lit(chr(plain[0][0])), *escaped)
        return alt(*([char_class(plain)] if plain else []), *escaped)


_CATEGORY_RANGES = {
    "CATEGORY_DIGIT": [(0x30, 0x39)],
    "CATEGORY_WORD": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    "CATEGORY_SPACE": [(0x09, 0x0D), (0x20, 0x20)],
}
_CATEGORIES = {getattr(_sre(), k): v for k, v in _CATEGORY_RANGES.items()}
