"""Parse GBNF text into rules, following llama.cpp's parser (``src/llama-grammar.cpp``).

The rules it accepts and refuses are llama.cpp's, so that a grammar the fake or the tests accept
is one a real server accepts too: a rule ends at a newline unless inside parentheses or right
after ``::=`` or ``|``; rule names are ``[a-zA-Z0-9-]+``; escapes are ``\\x.. \\u.... \\U........
\\t \\n \\r \\\\ \\" \\[ \\] \\-``; ``-`` before ``]`` in a class is a plain character; ``{m,n}``
with ``n`` over `MAX_REPETITION` means no upper bound and ``m`` over it is refused. It differs
from llama.cpp only where that is stricter or harmless: a rule defined twice (llama.cpp keeps
the last), an empty class ``[]`` and token references (``<[12]>``, ``!<[12]>``, which match
tokens rather than text) are refused. ``{,n}`` is refused as both llama.cpp and xgrammar do.

Two places where vLLM's xgrammar reads GBNF differently, which a grammar meant for both should
avoid: xgrammar reads as many hex digits after ``\\x`` as follow (``"\\x41b"`` is U+041B
there, ``"Ab"`` here and in llama.cpp; ``\\u`` and ``\\U`` are fixed width in both), and it
refuses an alternative written as nothing (``ws ::= | " "``, ``("a" | )``; ``""`` is read by
both).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Alt", "CharClass", "Literal", "Node", "Ref", "Repeat", "Seq", "parse_gbnf", "solve"]

MAX_REPETITION = 2000  # llama.cpp's MAX_REPETITION_THRESHOLD


@dataclass(frozen=True)
class Literal:
    text: str


@dataclass(frozen=True)
class CharClass:
    """One character within ``ranges`` (inclusive code point pairs), or outside when negated;
    ``.`` is the negated empty class."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Seq:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Alt:
    options: tuple[Node, ...]


@dataclass(frozen=True)
class Repeat:
    item: Node
    low: int
    high: int | None  # None: no upper bound


Node = Literal | CharClass | Ref | Seq | Alt | Repeat

_SIMPLE_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


def parse_gbnf(text: str) -> dict[str, Node]:
    """Rule name -> body. Raises ``ValueError`` saying what is wrong and where."""
    rules = _Parser(text).grammar()
    if "root" not in rules:
        raise ValueError("the grammar has no 'root' rule")
    for name, body in rules.items():
        for ref in _refs(body):
            if ref not in rules:
                raise ValueError(f"rule {name!r} refers to the undefined rule {ref!r}")
    return rules


_Value = TypeVar("_Value")


def solve(
    rules: dict[str, Node], start: _Value, evaluate: Callable[[Node, dict[str, _Value]], _Value]
) -> dict[str, _Value]:
    """Each rule's value where ``evaluate`` (of a body, given every rule's value) settles,
    starting from ``start``: for properties defined through recursion (can match nothing,
    first characters, shallowest derivation), where ``evaluate`` only moves values one way.
    A rule is evaluated again only when a rule it refers to changed, so a long chain of rules
    costs its length, not its length squared."""
    values = dict.fromkeys(rules, start)
    users: dict[str, set[str]] = {name: set() for name in rules}
    for name, body in rules.items():
        for ref in _refs(body):
            users[ref].add(name)
    pending = list(rules)  # taken from the end: rules defined last are often the leaves
    queued = set(rules)
    while pending:
        name = pending.pop()
        queued.discard(name)
        found = evaluate(rules[name], values)
        if found != values[name]:
            values[name] = found
            waiting = users[name] - queued
            pending.extend(waiting)
            queued |= waiting
    return values


def _refs(node: Node) -> list[str]:
    if isinstance(node, Ref):
        return [node.name]
    if isinstance(node, (Seq, Alt)):
        parts = node.items if isinstance(node, Seq) else node.options
        return [name for part in parts for name in _refs(part)]
    if isinstance(node, Repeat):
        return _refs(node.item)
    return []


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> ValueError:
        line = self.text.count("\n", 0, self.pos) + 1
        near = self.text[self.pos : self.pos + 20]
        return ValueError(f"bad GBNF grammar, line {line}: {what} at {near!r}")

    def peek(self, size: int = 1) -> str:
        return self.text[self.pos : self.pos + size]

    def space(self, newline_ok: bool) -> None:
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch == "#":
                while self.pos < len(text) and text[self.pos] not in "\r\n":
                    self.pos += 1
            elif ch in " \t" or (newline_ok and ch in "\r\n"):
                self.pos += 1
            else:
                return

    def name(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in _WORD:
            self.pos += 1
        if self.pos == start:
            raise self.fail("expecting a rule name")
        return self.text[start : self.pos]

    def integer(self) -> int:
        start = self.pos
        while self.peek().isdigit() and self.peek().isascii():
            self.pos += 1
        if self.pos == start:
            raise self.fail("expecting an integer")
        return int(self.text[start : self.pos])

    def grammar(self) -> dict[str, Node]:
        rules: dict[str, Node] = {}
        self.space(newline_ok=True)
        while self.pos < len(self.text):
            name = self.name()
            if name in rules:
                raise self.fail(f"rule {name!r} is defined twice")
            self.space(newline_ok=False)
            if self.peek(3) != "::=":
                raise self.fail("expecting ::=")
            self.pos += 3
            self.space(newline_ok=True)
            rules[name] = self.alternates(nested=False)
            if self.peek(2) == "\r\n":
                self.pos += 2
            elif self.peek() in ("\r", "\n"):
                self.pos += 1
            elif self.pos < len(self.text):
                raise self.fail("expecting a newline or the end")
            self.space(newline_ok=True)
        return rules

    def alternates(self, nested: bool) -> Node:
        options = [self.sequence(nested)]
        while self.peek() == "|":
            self.pos += 1
            self.space(newline_ok=True)
            options.append(self.sequence(nested))
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def sequence(self, nested: bool) -> Node:
        items: list[Node] = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == '"':
                self.pos += 1
                items.append(Literal(self.literal()))
            elif ch == "[":
                self.pos += 1
                items.append(self.char_class())
            elif ch in _WORD:
                items.append(Ref(self.name()))
            elif ch == "(":
                self.pos += 1
                self.space(newline_ok=True)
                inner = self.alternates(nested=True)
                if self.peek() != ")":
                    raise self.fail("expecting ')'")
                self.pos += 1
                items.append(inner)
            elif ch == ".":
                self.pos += 1
                items.append(CharClass((), negated=True))
            elif ch in "*+?{":
                if not items:
                    raise self.fail(f"expecting an item before {ch!r}")
                items[-1] = self.repetition(items[-1], nested)
            elif ch in "<!":
                raise self.fail("token references match tokens, not text; not supported")
            else:
                break
            self.space(nested)
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def repetition(self, item: Node, nested: bool) -> Repeat:
        ch = self.text[self.pos]
        self.pos += 1
        if ch != "{":
            return {
                "*": Repeat(item, 0, None),
                "+": Repeat(item, 1, None),
                "?": Repeat(item, 0, 1),
            }[ch]
        self.space(nested)
        if self.peek() == ",":
            raise self.fail("{,n} is not GBNF (llama.cpp and vLLM refuse it): write {0,n}")
        low = self.integer()
        self.space(nested)
        high: int | None = low
        if self.peek() == ",":
            self.pos += 1
            self.space(nested)
            high = self.integer() if self.peek().isdigit() else None
            self.space(nested)
        if self.peek() != "}":
            raise self.fail("expecting '}'")
        self.pos += 1
        if low > MAX_REPETITION:
            raise self.fail(f"more than {MAX_REPETITION} repetitions")
        if high is not None and high > MAX_REPETITION:
            high = None  # what llama.cpp does
        if high is not None and high < low:
            raise self.fail(f"{{{low},{high}}} has its maximum below its minimum")
        return Repeat(item, low, high)

    def literal(self) -> str:
        out: list[str] = []
        while True:
            if self.pos >= len(self.text):
                raise self.fail("unterminated string literal")
            if self.text[self.pos] == '"':
                self.pos += 1
                return "".join(out)
            out.append(self.char())

    def char_class(self) -> CharClass:
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while self.peek() != "]":
            if self.pos >= len(self.text):
                raise self.fail("unterminated character class")
            low = ord(self.char())
            high = low
            if self.peek() == "-" and self.peek(2) != "-]" and self.pos + 1 < len(self.text):
                self.pos += 1
                high = ord(self.char())
            if high < low:
                raise self.fail("a character range ends before it starts")
            ranges.append((low, high))
        self.pos += 1
        if not ranges:
            raise self.fail("empty character class")
        return CharClass(tuple(ranges), negated)

    def char(self) -> str:
        text = self.text
        ch = text[self.pos]
        if ch != "\\":
            self.pos += 1
            return ch
        code = text[self.pos + 1 : self.pos + 2]
        if code in _SIMPLE_ESCAPES or code == "-":
            self.pos += 2
            return _SIMPLE_ESCAPES.get(code, code)
        size = _HEX_DIGITS.get(code)
        digits = text[self.pos + 2 : self.pos + 2 + size] if size else ""
        if size is None or len(digits) != size or not _is_hex(digits):
            raise self.fail("bad escape")
        value = int(digits, 16)
        if value > 0x10FFFF:
            raise self.fail("escape beyond Unicode")
        self.pos += 2 + size
        return chr(value)


def _is_hex(digits: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in digits)
