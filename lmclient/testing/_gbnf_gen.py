"""Generate a random sentence of a GBNF grammar straight from its rules.

Recursion must end: each rule's minimal derivation depth (how many rules deep its shortest
finished derivation goes) is worked out first. While the depth budget lasts, any alternative
that can still finish within what is left may be chosen; past it, or once the sentence is long,
only the alternatives that finish fastest are, and repetitions stop at their minimum. Extra
repetitions are chosen with a chance that falls with each one, and never more than `MAX_EXTRA`.

Within that, a sentence is drawn to look like what a model writes, since an app stores what the
fake answers (a number past int64 or an empty name fails it for reasons of the fake): of an
alternation, shorter alternatives are likelier (an integer grammar's one-digit numbers over its
twenty-digit ones), but a choice between fixed texts is even and ``null`` is taken only when
nothing else can be; an optional part with a rule in it or longer than `_SHORT` (a list's items,
an optional field) is written, a short one of plain text (a sign, a fraction, an exponent)
seldom; and a repetition of any letter (a JSON string's characters) is a word: as in the schema
instances, which have every optional field, 1-3 items in a list and words for strings.
"""

from __future__ import annotations

import math
import random

from ._gbnf_syntax import Alt, CharClass, Literal, Node, Ref, Repeat, Seq, solve
from ._schema_instance import WORDS

__all__ = ["Generator"]

DEPTH_BUDGET = 10  # rules nested this deep before only the quickest ways out are taken
SOFT_LENGTH = 2_000  # characters: past this, the sentence is finished the quickest way
MAX_STEPS = 1_000_000  # parts of the grammar walked: ``(("x"{999}){999}){999}`` is refused
MAX_EXTRA = 2  # repetitions beyond a repetition's minimum: a list of 1-3 items, 1-3 digits
_MORE = 0.5  # the chance of a first extra repetition; each further one is `_FADE` as likely
_FADE = 0.8
_OPTIONAL_TEXT = 0.25  # the chance of a short optional part of plain text (a sign, an exponent)
_SHORT = 3  # characters: an optional part this short at least, with no rule in it, is seldom
_NULL = Literal("null")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
# characters a negated class or "." is answered with: printable, some of them beyond ASCII
_POOL = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
    "-_.,:;!?'\"()[]{}<>/\\|@#$%^&*+=~`\u00e9\u00df\u20ac\u4e2d\U0001f600"
)
_SURROGATES = range(0xD800, 0xE000)


class Generator:
    """Sentences of one grammar (its rules already checked: all defined, ``root`` present)."""

    def __init__(self, rules: dict[str, Node]) -> None:
        self.rules = rules
        self.depth = _min_depths(rules)
        self.length = solve(rules, math.inf, _node_length)
        self._depths: dict[int, float] = {}  # id(node) -> min depth; nodes live with `rules`
        self._lengths: dict[int, float] = {}  # id(node) -> min length
        self._wordy: dict[int, bool] = {}  # id(node) -> derives each letter alone

    def sentence(self, seed: int) -> str:
        if math.isinf(self.depth["root"]):
            raise ValueError("the grammar has no finite sentence: its recursion never ends")
        out: list[str] = []
        try:
            _Walk(self, random.Random(seed), out).node(self.rules["root"], DEPTH_BUDGET)
        except RecursionError:
            raise ValueError("the grammar nests its rules too deeply to generate") from None
        return "".join(out)

    def node_depth(self, node: Node) -> float:
        key = id(node)
        found = self._depths.get(key)
        if found is None:
            found = self._depths[key] = _node_depth(node, self.depth)
        return found

    def node_length(self, node: Node) -> float:
        """The length of the shortest text ``node`` derives."""
        key = id(node)
        found = self._lengths.get(key)
        if found is None:
            found = self._lengths[key] = _node_length(node, self.length)
        return found

    def wordy(self, node: Node) -> bool:
        """Whether ``node`` derives each lower-case letter as a text of its own."""
        key = id(node)
        found = self._wordy.get(key)
        if found is None:
            found = self._wordy[key] = all(
                _derives_char(node, ch, self.rules, frozenset()) for ch in _LETTERS
            )
        return found


class _Walk:
    def __init__(self, gen: Generator, rng: random.Random, out: list[str]) -> None:
        self.gen = gen
        self.rng = rng
        self.out = out
        self.length = 0
        self.steps = 0

    def node(self, node: Node, budget: float) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise ValueError(f"even the grammar's shortest sentences take over {MAX_STEPS} steps")
        if isinstance(node, Literal):
            self.emit(node.text)
        elif isinstance(node, CharClass):
            self.emit(self.char(node))
        elif isinstance(node, Ref):
            self.node(self.gen.rules[node.name], budget - 1)
        elif isinstance(node, Seq):
            for item in node.items:
                self.node(item, budget)
        elif isinstance(node, Alt):
            self.node(self.option(node, budget), budget)
        elif self.gen.wordy(node.item) and self.length <= SOFT_LENGTH:
            self.emit(self.word(node.low, node.high))
        else:
            for _ in range(self.count(node, budget)):
                self.node(node.item, budget)

    def emit(self, text: str) -> None:
        self.out.append(text)
        self.length += len(text)

    def option(self, node: Alt, budget: float) -> Node:
        depths = [self.gen.node_depth(option) for option in node.options]
        fits = [
            option for option, depth in zip(node.options, depths, strict=True) if depth <= budget
        ]
        if not fits or self.length > SOFT_LENGTH:  # finish the quickest way
            quickest = min(depths)
            fits = [
                option
                for option, depth in zip(node.options, depths, strict=True)
                if depth == quickest
            ]
        fits = [option for option in fits if option != _NULL] or fits
        if all(isinstance(option, Literal) for option in fits):  # a choice: each as likely
            return self.rng.choice(fits)
        lengths = [self.gen.node_length(option) for option in fits]
        shortest = min(lengths)
        weights = [1 / (1 + length - shortest) for length in lengths]
        return self.rng.choices(fits, weights)[0]

    def word(self, low: int, high: int | None) -> str:
        """Letters for a repetition of ``low`` to ``high`` letters: a word that fits, else
        words run together and cut to fit."""
        top = math.inf if high is None else high
        fitting = [word for word in WORDS if low <= len(word) <= top]
        if fitting:
            return self.rng.choice(fitting)
        word = self.rng.choice(WORDS)
        text = word * (low // len(word) + 1)  # longer than ``low``, which ``top`` is not below
        return text[: int(min(top, len(text)))]

    def count(self, node: Repeat, budget: float) -> int:
        count = node.low
        if self.gen.node_depth(node.item) > budget or self.length > SOFT_LENGTH:
            return count
        if (node.low, node.high) == (0, 1):
            written = _has_ref(node.item) or self.gen.node_length(node.item) > _SHORT
            return int(written or self.rng.random() < _OPTIONAL_TEXT)
        most = count + MAX_EXTRA if node.high is None else min(node.high, count + MAX_EXTRA)
        chance = _MORE
        while count < most and self.rng.random() < chance:
            count += 1
            chance *= _FADE
        return count

    def char(self, node: CharClass) -> str:
        if node.negated:
            allowed = [ch for ch in _POOL if not _within(ord(ch), node.ranges)]
            if allowed:
                return self.rng.choice(allowed)
            code = 0x20
            while _within(code, node.ranges) or code in _SURROGATES:
                code += 1
            return chr(code)
        low, high = self.rng.choice(node.ranges)
        code = self.rng.randint(low, high)
        if code in _SURROGATES:  # not text on its own: take the range's nearest end instead
            code = low if low not in _SURROGATES else high
        return chr(code)


def _within(code: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(low <= code <= high for low, high in ranges)


def _min_depths(rules: dict[str, Node]) -> dict[str, float]:
    """Rule -> how many rules deep its shallowest finished derivation goes (inf: none)."""
    return solve(rules, math.inf, _node_depth)


def _node_length(node: Node, length: dict[str, float]) -> float:
    """The length of the shortest text ``node`` derives, given each rule's (inf: none yet)."""
    if isinstance(node, Literal):
        return len(node.text)
    if isinstance(node, CharClass):
        return 1
    if isinstance(node, Ref):
        return length[node.name]
    if isinstance(node, Seq):
        return sum(_node_length(item, length) for item in node.items)
    if isinstance(node, Alt):
        return min(_node_length(option, length) for option in node.options)
    return 0 if node.low == 0 else node.low * _node_length(node.item, length)


def _has_ref(node: Node) -> bool:
    """Whether ``node`` itself (not the rules it names) refers to a rule."""
    if isinstance(node, Ref):
        return True
    if isinstance(node, Seq):
        return any(_has_ref(item) for item in node.items)
    if isinstance(node, Alt):
        return any(_has_ref(option) for option in node.options)
    return isinstance(node, Repeat) and _has_ref(node.item)


def _derives_char(node: Node, ch: str, rules: dict[str, Node], seen: frozenset[str]) -> bool:
    """Whether ``node`` derives exactly ``ch`` (a sequence: when it has one part; a rule met
    again on the way: not through it)."""
    if isinstance(node, Literal):
        return node.text == ch
    if isinstance(node, CharClass):
        return _within(ord(ch), node.ranges) != node.negated
    if isinstance(node, Ref):
        inner = seen | {node.name}
        return node.name not in seen and _derives_char(rules[node.name], ch, rules, inner)
    if isinstance(node, Seq):
        return len(node.items) == 1 and _derives_char(node.items[0], ch, rules, seen)
    if isinstance(node, Alt):
        return any(_derives_char(option, ch, rules, seen) for option in node.options)
    within = node.low <= 1 and (node.high is None or node.high >= 1)
    return within and _derives_char(node.item, ch, rules, seen)


def _node_depth(node: Node, depth: dict[str, float]) -> float:
    if isinstance(node, (Literal, CharClass)):
        return 0
    if isinstance(node, Ref):
        return depth[node.name] + 1
    if isinstance(node, Seq):
        return max((_node_depth(item, depth) for item in node.items), default=0)
    if isinstance(node, Alt):
        return min(_node_depth(option, depth) for option in node.options)
    return 0 if node.low == 0 else _node_depth(node.item, depth)
