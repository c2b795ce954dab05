"""The compact grammar's building blocks (`lmclient._output.gbnf`): the grammar IR its compiler
builds, and what is done with a finished set of rules: unreachable ones dropped, long repeats
hoisted into rules, equal rules merged, the text rendered in GBNF, and the byte lengths of the
shortest and longest sentences measured (the token budget). Also free text that cannot spell a
marker (`text_until`), which `Tagged`'s prose and a reasoning block before an answer are."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

__all__ = [
    "DIGIT",
    "EMPTY",
    "HEX",
    "MAX_CP",
    "MAX_REPEAT",
    "NONZERO",
    "Alt",
    "Cls",
    "Fallback",
    "Lit",
    "Node",
    "Ref",
    "Rep",
    "Seq",
    "alt",
    "char_class",
    "char_span",
    "chars",
    "complement",
    "dedupe",
    "hoist",
    "intersect",
    "longest_bytes",
    "opt",
    "prefixed",
    "reachable",
    "render",
    "rep",
    "seq",
    "shortest_bytes",
    "text_until",
    "too_many",
]


class Fallback(Exception):
    """The schema uses something the compiler does not cover; the message says what."""


# --------------------------------------------------------------------------------------------
# The grammar IR: what is rendered to GBNF and measured in bytes
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Lit:
    text: str


@dataclasses.dataclass(frozen=True)
class Cls:
    ranges: tuple[tuple[int, int], ...]  # sorted, disjoint, non-adjacent code-point ranges


@dataclasses.dataclass(frozen=True)
class Seq:
    items: tuple[Node, ...]


@dataclasses.dataclass(frozen=True)
class Alt:
    items: tuple[Node, ...]


@dataclasses.dataclass(frozen=True)
class Rep:
    item: Node
    min: int
    max: int | None


@dataclasses.dataclass(frozen=True)
class Ref:
    name: str


Node = Lit | Cls | Seq | Alt | Rep | Ref
MAX_CP = 0x10FFFF
EMPTY = Lit("")


def seq(*items: Node) -> Node:
    flat: list[Node] = []
    for item in items:
        for part in item.items if isinstance(item, Seq) else (item,):
            if isinstance(part, Lit) and flat and isinstance(flat[-1], Lit):
                flat[-1] = Lit(flat[-1].text + part.text)
            elif part != EMPTY:
                flat.append(part)
    if not flat:
        return EMPTY
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*items: Node) -> Node:
    flat: list[Node] = []
    for item in items:
        for part in item.items if isinstance(item, Alt) else (item,):
            if part not in flat:
                flat.append(part)
    if not flat:
        raise Fallback("no value satisfies the schema")
    if EMPTY in flat and len(flat) > 1:  # `x | ""` is written `x?`: no empty literals
        flat.remove(EMPTY)
        return opt(flat[0] if len(flat) == 1 else Alt(tuple(flat)))
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def rep(item: Node, low: int, high: int | None) -> Node:
    if high == 0 or item == EMPTY:
        return EMPTY
    if low == high == 1:
        return item
    return Rep(item, low, high)


def opt(item: Node) -> Node:
    return rep(item, 0, 1)


def char_class(ranges: Iterable[tuple[int, int]]) -> Cls:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
        else:
            merged.append((low, high))
    return Cls(tuple(merged))


def chars(text: str) -> Cls:
    return char_class((ord(c), ord(c)) for c in text)


def char_span(low: str, high: str) -> Cls:
    return Cls(((ord(low), ord(high)),))


def complement(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    nxt = 0
    for low, high in ranges:
        if low > nxt:
            out.append((nxt, low - 1))
        nxt = high + 1
    if nxt <= MAX_CP:
        out.append((nxt, MAX_CP))
    return out


def intersect(a: Iterable[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [
        (max(lo, blo), min(hi, bhi))
        for lo, hi in a
        for blo, bhi in b
        if max(lo, blo) <= min(hi, bhi)
    ]


def text_until(marker: str, name: str, *, ends_with_marker: bool) -> dict[str, Node]:
    """Rules ``name``, ``name-1``, ...: any text in which ``marker`` does not occur, followed by
    the marker itself (``ends_with_marker``) or by nothing (then the text may stop anywhere,
    empty included). A rule per state of a matcher of ``marker`` (Knuth-Morris-Pratt: the
    state is how much of the marker the text ends with), so that ``<<answer>`` and
    ``<ans<answer>`` are read right; rule ``name`` is the state of no match."""
    if not marker:
        raise ValueError("a marker cannot be empty")
    states = [name] + [f"{name}-{q}" for q in range(1, len(marker))]
    fallback = _failure(marker)
    rules: dict[str, Node] = {}
    for q, state in enumerate(states):
        # each character of the marker that moves the matcher on (or back to a partial match);
        # every other character, the marker's own among them, starts it afresh
        moves = {c: _step(marker, fallback, q, c) for c in sorted(set(marker))}
        moves = {c: target for c, target in moves.items() if target}
        ways: list[Node] = []
        for c, target in moves.items():
            if target < len(marker):
                ways.append(seq(Lit(c), Ref(states[target])))
            elif ends_with_marker:
                ways.append(Lit(c))  # the marker is whole: the text ends here
        rest = complement(char_class((ord(c), ord(c)) for c in moves).ranges)
        ways.append(seq(char_class(rest), Ref(states[0])))
        if not ends_with_marker:
            ways.append(EMPTY)
        rules[state] = alt(*ways)
    return rules


def _failure(marker: str) -> list[int]:
    """KMP's failure function: for each prefix, the longest proper prefix that is its suffix."""
    out = [0] * len(marker)
    k = 0
    for i in range(1, len(marker)):
        while k and marker[i] != marker[k]:
            k = out[k - 1]
        if marker[i] == marker[k]:
            k += 1
        out[i] = k
    return out


def _step(marker: str, fallback: list[int], state: int, char: str) -> int:
    """The matcher's state after ``char``, from ``state`` characters of the marker matched."""
    while state and marker[state] != char:
        state = fallback[state - 1]
    return state + 1 if marker[state] == char else 0


DIGIT = char_span("0", "9")
NONZERO = char_span("1", "9")
HEX = char_class([(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)])

# --------------------------------------------------------------------------------------------
# Rules: reachability, deduplication, rendering, lengths
# --------------------------------------------------------------------------------------------


def _refs(node: Node) -> Iterable[str]:
    if isinstance(node, Ref):
        yield node.name
    elif isinstance(node, (Seq, Alt)):
        for item in node.items:
            yield from _refs(item)
    elif isinstance(node, Rep):
        yield from _refs(node.item)


def reachable(rules: dict[str, Node]) -> dict[str, Node]:
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
MAX_REPEAT = 1999


def hoist(rules: dict[str, Node]) -> dict[str, Node]:
    """Each group repeated more than once (``(a b){2,5}``, ``(a | b)+``) moved into a rule."""
    out = dict(rules)
    names = iter(f"{base}-{n}" for base in ("item",) for n in range(1, 1 << 30))

    def walk(node: Node) -> Node:
        if isinstance(node, (Seq, Alt)):
            return type(node)(tuple(walk(i) for i in node.items))
        if isinstance(node, Rep):
            item = walk(node.item)
            if isinstance(item, (Seq, Alt)) and max(node.min, node.max or 0) > 1:
                name = next(n for n in names if n not in out)
                out[name] = item
                item = Ref(name)
            return Rep(item, node.min, node.max)
        return node

    for name, body in rules.items():
        out[name] = walk(body)
    return out


def too_many(rules: Mapping[str, Node]) -> bool:
    def count(node: Node) -> int:
        if isinstance(node, (Seq, Alt)):
            return max(count(i) for i in node.items)
        if isinstance(node, Rep):
            return max(node.min, node.max or 0, count(node.item))
        return 0

    return any(count(body) > MAX_REPEAT for body in rules.values())


def _substitute(node: Node, names: Mapping[str, str]) -> Node:
    if isinstance(node, Ref):
        return Ref(names.get(node.name, node.name))
    if isinstance(node, Seq):
        return Seq(tuple(_substitute(i, names) for i in node.items))
    if isinstance(node, Alt):
        return Alt(tuple(_substitute(i, names) for i in node.items))
    if isinstance(node, Rep):
        return Rep(_substitute(node.item, names), node.min, node.max)
    return node


def prefixed(rules: Mapping[str, Node], prefix: str) -> dict[str, Node]:
    """``rules`` renamed apart, to sit beside another grammar's: ``root`` becomes ``prefix``,
    every other rule ``prefix-name``."""
    names = {name: prefix if name == "root" else f"{prefix}-{name}" for name in rules}
    return {names[name]: _substitute(body, names) for name, body in rules.items()}


def dedupe(rules: dict[str, Node]) -> dict[str, Node]:
    """Rules with identical bodies merged into the first (root kept), until none are left."""
    while True:
        by_body: dict[Node, str] = {}
        names: dict[str, str] = {}
        for name, body in sorted(rules.items(), key=lambda kv: kv[0] != "root"):
            if body in by_body:
                names[name] = by_body[body]
            else:
                by_body[body] = name
        if not names:
            return rules
        rules = {n: _substitute(b, names) for n, b in rules.items() if n not in names}


def render(rules: Mapping[str, Node]) -> str:
    order = sorted(rules, key=lambda name: name != "root")
    return "".join(f"{name} ::= {_expr(rules[name])}\n" for name in order)


def _expr(node: Node, tight: bool = False) -> str:
    if isinstance(node, Lit):
        return '"' + "".join(_lit_char(c) for c in node.text) + '"'
    if isinstance(node, Cls):
        return _class(node)
    if isinstance(node, Ref):
        return node.name
    if isinstance(node, Rep):
        suffix = {(0, 1): "?", (0, None): "*", (1, None): "+"}.get((node.min, node.max))
        if suffix is None:
            suffix = (
                f"{{{node.min}}}"
                if node.min == node.max
                else f"{{{node.min},{'' if node.max is None else node.max}}}"
            )
        item = _expr(node.item, tight=True)
        return (f"({item})" if isinstance(node.item, Rep) else item) + suffix  # no `x{4}*`
    if isinstance(node, Seq):
        text = " ".join(_expr(i, tight=isinstance(i, Alt)) for i in node.items)
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


def _class(node: Cls) -> str:
    members = list(node.ranges)
    outside = complement(members)
    negate = bool(outside) and len(outside) <= len(members)
    shown = outside if negate else members

    def part(lo: int, hi: int) -> str:
        if lo == hi:
            return _class_char(lo)
        return _class_char(lo) + ("" if hi == lo + 1 else "-") + _class_char(hi)

    return "[" + ("^" if negate else "") + "".join(part(lo, hi) for lo, hi in shown) + "]"


def _utf8_len(cp: int) -> int:
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


def shortest_bytes(rules: Mapping[str, Node]) -> int:
    best: dict[str, float] = dict.fromkeys(rules, math.inf)

    def low(node: Node) -> float:
        if isinstance(node, Lit):
            return len(node.text.encode())
        if isinstance(node, Cls):
            return _utf8_len(node.ranges[0][0])
        if isinstance(node, Ref):
            return best[node.name]
        if isinstance(node, Seq):
            return sum(low(i) for i in node.items)
        if isinstance(node, Alt):
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


def longest_bytes(rules: Mapping[str, Node]) -> int | None:
    memo: dict[str, int | None] = {}
    active: set[str] = set()

    class _Unbounded(Exception):
        pass

    def high(node: Node) -> int:
        if isinstance(node, Lit):
            return len(node.text.encode())
        if isinstance(node, Cls):
            return _utf8_len(node.ranges[-1][1])
        if isinstance(node, Ref):
            if node.name in active:
                raise _Unbounded
            if node.name not in memo:
                active.add(node.name)
                memo[node.name] = high(rules[node.name])
                active.discard(node.name)
            value = memo[node.name]
            assert value is not None
            return value
        if isinstance(node, Seq):
            return sum(high(i) for i in node.items)
        if isinstance(node, Alt):
            return max(high(i) for i in node.items)
        item = high(node.item)
        if node.max is None:
            if item:
                raise _Unbounded
            return 0
        return node.max * item

    try:
        return high(Ref("root"))
    except _Unbounded:
        return None
