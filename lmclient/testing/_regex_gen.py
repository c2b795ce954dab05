"""Generate a string that fully matches a Python regular expression.

Walks the parse tree of :mod:`re`'s own parser, so the generator reads exactly the syntax
``re`` reads. Lookarounds and word boundaries are not generated for; each candidate is checked
with :func:`re.fullmatch` and regenerated (deterministically) until one matches.
"""

from __future__ import annotations

import math
import random
import re
import sys
from collections.abc import Callable
from typing import Any

from ._errors import UnsatisfiableError

if sys.version_info >= (3, 11):
    from re import _constants as sre_c
    from re import _parser as sre_parse
else:  # pragma: no cover - exercised on Python 3.10 only
    import sre_constants as sre_c
    import sre_parse

__all__ = ["regex_instance"]

_ATTEMPTS = 64
_EXTRA = 3  # repetitions beyond a quantifier's minimum, at most, in short attempts
_OPTIONAL = 0.25  # the chance that ``?`` takes its part (a sign, a fraction, an exponent)
# Characters tried for ".", negated classes and negated categories, in a seeded order.
_ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " _-.,:;!?@#$%&*+=/()[]{}<>'\"~^|\\éüßλЖ中"
)
_CATEGORY_CHARS = {
    sre_c.CATEGORY_DIGIT: "0123456789",
    sre_c.CATEGORY_WORD: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_",
    sre_c.CATEGORY_SPACE: " ",
}


def regex_instance(
    pattern: str | re.Pattern[str],
    *,
    seed: int = 0,
    flags: int = 0,
    min_length: int = 0,
    max_length: int | None = None,
) -> str:
    """Return a string ``s`` with ``re.fullmatch(pattern, s)``; the same seed gives the same ``s``.

    Quantifiers repeat a few times beyond their minimum (seeded), which keeps outputs short.
    With ``min_length``/``max_length`` the output's length also lies within those bounds: when
    short matches miss them, repeats are stretched step by step until one fits.

    Raises :class:`UnsatisfiableError` when no match is found in a bounded number of tries
    (contradictory lookarounds, unreachable lengths, ...).
    """
    compiled = re.compile(pattern, flags)
    tree = sre_parse.parse(compiled.pattern, compiled.flags)
    rng = random.Random(seed)
    high = math.inf if max_length is None else max_length
    # Seeded short attempts first, then the same with ever longer repeats (stretch = extra).
    plans = [(_EXTRA, False)] * _ATTEMPTS + [(n, True) for n in range(max(min_length, 8) * 2)]
    for extra, stretch in plans:
        try:
            text = _Walker(rng, compiled.flags, extra, stretch).emit(tree.data)
        except _NoMatch:
            continue
        if min_length <= len(text) <= high and compiled.fullmatch(text):
            return text
    raise UnsatisfiableError(
        f"could not generate a string matching {compiled.pattern!r}"
        + (f" with a length in [{min_length}, {high}]" if min_length or max_length else "")
    )


class _NoMatch(Exception):
    """This attempt took a path that cannot match (e.g. a backreference to an unset group)."""


class _Walker:
    """One generation attempt: the random choices and the text captured by each group."""

    def __init__(self, rng: random.Random, flags: int, extra: int, stretch: bool) -> None:
        self.rng = rng
        self.extra = extra
        self.stretch = stretch  # repeat as often as ``extra`` allows instead of a seeded count
        self.dotall = bool(flags & re.DOTALL)
        self.groups: dict[int, str] = {}

    def emit(self, items: list[tuple[Any, Any]]) -> str:
        return "".join(self.emit_one(op, av) for op, av in items)

    def emit_one(self, op: Any, av: Any) -> str:
        if op is sre_c.LITERAL:
            return chr(av)
        if op is sre_c.NOT_LITERAL:
            return self.pick_outside(lambda ch: ord(ch) == av)
        if op is sre_c.ANY:
            return self.pick_outside(lambda ch: ch == "\n" and not self.dotall)
        if op is sre_c.IN:
            return self.pick_in(av)
        if op is sre_c.BRANCH:
            return self.emit(self.rng.choice(av[1]).data)
        if op is sre_c.SUBPATTERN:
            group, _add_flags, _del_flags, sub = av
            text = self.emit(sub.data)
            if group is not None:
                self.groups[group] = text
            return text
        if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT) or op.name == "POSSESSIVE_REPEAT":
            low, high, sub = av
            top = min(high, low + self.extra)
            if self.stretch:
                count = top
            elif (low, high) == (0, 1):  # as a model writes a number: seldom signed or split
                count = int(self.rng.random() < _OPTIONAL)
            else:
                count = self.rng.randint(low, top)
            return "".join(self.emit(sub.data) for _ in range(count))
        if op is sre_c.GROUPREF:
            if av not in self.groups:
                raise _NoMatch
            return self.groups[av]
        if op is sre_c.GROUPREF_EXISTS:
            group, yes, no = av
            branch = yes if group in self.groups else no
            return "" if branch is None else self.emit(branch.data)
        if op.name == "ATOMIC_GROUP":
            return self.emit(av.data)
        if op in (sre_c.AT, sre_c.ASSERT, sre_c.ASSERT_NOT):
            return ""  # anchors, boundaries and lookarounds: left to the fullmatch check
        raise UnsatisfiableError(f"unsupported regex construct {op}")

    def pick_in(self, items: list[tuple[Any, Any]]) -> str:
        """One character of a class ``[...]``; negated classes pick from outside it."""
        if items and items[0][0] is sre_c.NEGATE:
            rest = items[1:]
            return self.pick_outside(lambda ch: _in_class(ch, rest))
        op, av = self.rng.choice(items)
        if op is sre_c.LITERAL:
            return chr(av)
        if op is sre_c.RANGE:
            low, high = av
            code = self.rng.randint(low, min(high, low + 0x2FF))
            return chr(code if not 0xD800 <= code <= 0xDFFF else low)
        if op is sre_c.CATEGORY:
            if op_chars := _CATEGORY_CHARS.get(av):
                return self.rng.choice(op_chars)
            return self.pick_outside(lambda ch: not _in_category(ch, av))
        raise UnsatisfiableError(f"unsupported character-class item {op}")

    def pick_outside(self, excluded: Callable[[str], bool]) -> str:
        """A character from a seeded shuffle of the alphabet that ``excluded`` rejects."""
        start = self.rng.randrange(len(_ALPHABET))
        for ch in _ALPHABET[start:] + _ALPHABET[:start]:
            if not excluded(ch):
                return ch
        raise _NoMatch


def _in_class(ch: str, items: list[tuple[Any, Any]]) -> bool:
    """Whether ``ch`` is in the (non-negated) class items; close enough, fullmatch decides."""
    code = ord(ch)
    for op, av in items:
        if op is sre_c.LITERAL and code == av:
            return True
        if op is sre_c.RANGE and av[0] <= code <= av[1]:
            return True
        if op is sre_c.CATEGORY and _in_category(ch, av):
            return True
    return False


def _in_category(ch: str, category: Any) -> bool:
    """Membership in ``\\d``, ``\\w``, ``\\s`` and their negations (Unicode semantics)."""
    name = category.name
    if name.endswith("DIGIT"):
        member = ch.isdecimal()
    elif name.endswith("WORD"):
        member = ch.isalnum() or ch == "_"
    else:
        member = ch.isspace()
    return member != ("_NOT_" in name)
