"""Read grammars the fake can answer from: GBNF, and Lark literal choices.

A GBNF grammar whose rules never refer back to themselves describes a regular language, so it
becomes a Python regex (rules inlined) and the regex generator produces a sentence of it. That
covers what clients send in practice: choices emulated as ``root ::= "a" | "b"``, the exact
grammars lmclient sends for ``int``/``float``/``bool`` on llama.cpp, and most hand-written
formats. A recursive grammar (nested JSON, arithmetic) is unrolled `MAX_NESTING` deep: past
that, a branch or an optional item that would go deeper is left out, so the regex describes the
sentences nested no deeper, a part of the language that is enough to answer with.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

__all__ = ["grammar_literals", "grammar_regex"]

_HEAD = re.compile(r"\s*(?:root\s*::=|start\s*:)")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}


def grammar_literals(grammar: str) -> list[str] | None:
    """The alternatives of ``root ::= "a" | "b" ...`` (GBNF) or ``start: "a" | "b"`` (Lark).

    An alternative may concatenate several literals (``"a" "b"``), and the body may be wrapped
    in one pair of parentheses. Returns ``None`` for anything else.
    """
    lines = grammar.splitlines()
    text = "\n".join(line for line in lines if not line.lstrip().startswith(("#", "//")))
    head = _HEAD.match(text)
    if head is None:
        return None
    body = text[head.end() :].strip()
    if body.startswith("(") and body.endswith(")"):
        body = body[1:-1]
    return _alternatives(body)


def _alternatives(body: str) -> list[str] | None:
    options: list[str] = []
    current: list[str] = []
    pos = 0
    while True:
        pos = _skip_space(body, pos)
        if pos >= len(body) or body[pos] != '"':
            return None
        literal, pos = _literal(body, pos + 1)
        if literal is None:
            return None
        current.append(literal)
        pos = _skip_space(body, pos)
        if pos >= len(body):
            options.append("".join(current))
            return options
        if body[pos] == "|":
            options.append("".join(current))
            current = []
            pos += 1


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _literal(text: str, pos: int) -> tuple[str | None, int]:
    """Decode a GBNF string literal starting after its opening quote."""
    out: list[str] = []
    while pos < len(text):
        ch = text[pos]
        if ch == '"':
            return "".join(out), pos + 1
        if ch != "\\":
            out.append(ch)
            pos += 1
            continue
        code = text[pos + 1 : pos + 2]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            pos += 2
        elif code in _HEX_DIGITS:
            digits = text[pos + 2 : pos + 2 + _HEX_DIGITS[code]]
            if len(digits) != _HEX_DIGITS[code] or not all(
                c in "0123456789abcdefABCDEF" for c in digits
            ):
                return None, pos
            out.append(chr(int(digits, 16)))
            pos += 2 + len(digits)
        else:
            return None, pos
    return None, pos


# -- GBNF to regex -------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
    | (?P<define>::=)
    | (?P<name>[A-Za-z0-9_-]+)
    | (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<klass>\[(?:[^\]\\]|\\.)*\])
    | (?P<brace>\{\s*(?P<low>\d*)\s*(?:(?P<comma>,)\s*(?P<high>\d*)\s*)?\})
    | (?P<op>[()|?*+.])
    """,
    re.VERBOSE | re.DOTALL,
)
_CLASS_SPECIALS = frozenset("\\]^-[")


class _Token(NamedTuple):
    kind: str  # a group name of _TOKEN: define, name, string, klass, brace, op
    text: str
    found: re.Match[str]


MAX_NESTING = 2  # how many times a rule may appear inside itself in a generated sentence
MAX_REGEX = 200_000  # characters: where unrolling a grammar gets too big to be worth it


class _NotRegular(Exception):
    """The grammar uses syntax this converter does not read."""


class _TooDeep(_NotRegular):
    """This part of a sentence would nest a rule deeper than `MAX_NESTING`."""


def grammar_regex(grammar: str) -> str | None:
    """A Python regex for the sentences of a GBNF grammar (from its ``root`` rule) nested at most
    `MAX_NESTING` deep, or ``None`` when it has no ``root``, is not GBNF, or has no such
    sentence (``root ::= "(" root ")"``)."""
    try:
        rules = _rules(list(_tokens(grammar)))
        if "root" not in rules:
            return None
        return _Converter(rules).rule("root")
    except _NotRegular:
        return None


def _tokens(text: str) -> Iterator[_Token]:
    pos = 0
    while pos < len(text):
        found = _TOKEN.match(text, pos)
        if found is None:
            raise _NotRegular(f"unexpected {text[pos : pos + 10]!r}")
        pos = found.end()
        kind = found.lastgroup or ""  # the outer group: a brace closes after its parts
        if kind != "space":
            yield _Token(kind, found.group(kind), found)


def _rules(tokens: list[_Token]) -> dict[str, list[_Token]]:
    """Rule name -> the tokens of its body; a body ends where ``name ::=`` starts the next."""
    rules: dict[str, list[_Token]] = {}
    current: list[_Token] | None = None
    for index, token in enumerate(tokens):
        if token.kind == "define":
            continue
        following = tokens[index + 1].kind if index + 1 < len(tokens) else ""
        if token.kind == "name" and following == "define":
            current = rules.setdefault(token.text, [])
            if current:
                raise _NotRegular(f"rule {token.text!r} is defined twice")
            continue
        if current is None:
            raise _NotRegular("text before the first rule")
        current.append(token)
    return rules


class _Converter:
    """Turns rule bodies into regex text, inlining references and unrolling recursion."""

    def __init__(self, rules: dict[str, list[_Token]]) -> None:
        self.rules = rules
        self.visiting: list[str] = []  # the rules being inlined, outermost first

    def rule(self, name: str) -> str:
        if name not in self.rules:
            raise _NotRegular(f"undefined rule {name!r}")
        if self.visiting.count(name) > MAX_NESTING:
            raise _TooDeep(name)
        self.visiting.append(name)
        try:
            tokens = self.rules[name]
            regex, end = self.alternation(tokens, 0)
            if end != len(tokens):
                raise _NotRegular(f"unexpected {tokens[end].text!r} in rule {name!r}")
        finally:
            self.visiting.pop()
        if len(regex) > MAX_REGEX:
            raise _NotRegular("the unrolled grammar is too big")
        return regex

    def alternation(self, tokens: list[_Token], pos: int) -> tuple[str, int]:
        branches = []
        while True:
            try:
                branch, pos = self.sequence(tokens, pos)
                branches.append(branch)
            except _TooDeep:  # leave this branch out; a shallower one may remain
                pos = _branch_end(tokens, pos)
            if pos < len(tokens) and tokens[pos].text == "|":
                pos += 1
                continue
            if not branches:
                raise _TooDeep("every branch")
            return "(?:" + "|".join(branches) + ")", pos

    def sequence(self, tokens: list[_Token], pos: int) -> tuple[str, int]:
        parts = []
        while pos < len(tokens) and tokens[pos].text not in ("|", ")"):
            start = pos
            try:
                item, pos = self.item(tokens, pos)
            except _TooDeep:  # an item that may be absent is left out: zero repetitions
                pos = _item_end(tokens, start)
                if pos >= len(tokens) or not _may_be_absent(tokens[pos]):
                    raise
                while pos < len(tokens) and _is_quantifier(tokens[pos]):
                    pos += 1
                continue
            while pos < len(tokens) and _is_quantifier(tokens[pos]):
                item = f"(?:{item}){self.quantifier(tokens[pos])}"
                pos += 1
            parts.append(item)
        return "".join(parts), pos

    def item(self, tokens: list[_Token], pos: int) -> tuple[str, int]:
        kind, text = tokens[pos].kind, tokens[pos].text
        if kind == "string":
            return re.escape(_decode(text[1:-1])), pos + 1
        if kind == "klass":
            return _class(text[1:-1]), pos + 1
        if kind == "name":
            return "(?:" + self.rule(text) + ")", pos + 1
        if text == ".":
            return "(?s:.)", pos + 1
        if text == "(":
            inner, pos = self.alternation(tokens, pos + 1)
            if pos >= len(tokens) or tokens[pos].text != ")":
                raise _NotRegular("unbalanced parenthesis")
            return inner, pos + 1
        raise _NotRegular(f"unexpected {text!r}")

    @staticmethod
    def quantifier(token: _Token) -> str:
        if token.kind != "brace":
            return token.text
        low = token.found.group("low") or "0"
        if token.found.group("comma") is None:
            return "{" + low + "}"
        return "{" + low + "," + (token.found.group("high") or "") + "}"


def _is_quantifier(token: _Token) -> bool:
    return token.text in ("?", "*", "+") or token.kind == "brace"


def _may_be_absent(token: _Token) -> bool:
    """Whether a quantifier allows zero repetitions."""
    if token.kind == "brace":
        return int(token.found.group("low") or "0") == 0
    return token.text in ("?", "*")


def _item_end(tokens: list[_Token], pos: int) -> int:
    """Where the item starting at ``pos`` ends: after its closing parenthesis if it opens one."""
    depth = 0
    for index in range(pos, len(tokens)):
        depth += {"(": 1, ")": -1}.get(tokens[index].text, 0)
        if depth <= 0:
            return index + 1
    raise _NotRegular("unbalanced parenthesis")


def _branch_end(tokens: list[_Token], pos: int) -> int:
    """Where the branch starting at ``pos`` ends: at the next ``|`` or ``)`` of its own level."""
    while pos < len(tokens) and tokens[pos].text not in ("|", ")"):
        pos = _item_end(tokens, pos)
    return pos


def _decode(body: str) -> str:
    """The text of a GBNF string literal's body (between the quotes)."""
    text, end = _literal(body + '"', 0)
    if text is None or end != len(body) + 1:
        raise _NotRegular(f"bad string literal {body!r}")
    return text


def _class(body: str) -> str:
    """A GBNF character class body (between the brackets) as a Python regex class."""
    negate = body.startswith("^")
    chars: list[tuple[str, bool]] = []  # (character, written as an escape)
    pos = 1 if negate else 0
    while pos < len(body):
        if body[pos] == "\\":
            step = 2 + _HEX_DIGITS.get(body[pos + 1 : pos + 2], 0)
            decoded, _ = _literal(body[pos : pos + step] + '"', 0)
            if decoded is None:
                raise _NotRegular(f"bad escape in [{body}]")
            chars.append((decoded, True))
            pos += step
        else:
            chars.append((body[pos], False))
            pos += 1
    if not chars:
        raise _NotRegular("empty character class")
    out = []
    index = 0
    while index < len(chars):
        if index + 2 < len(chars) and chars[index + 1] == ("-", False):
            out.append(f"{_in_class(chars[index][0])}-{_in_class(chars[index + 2][0])}")
            index += 3
        else:
            out.append(_in_class(chars[index][0]))
            index += 1
    return "[" + ("^" if negate else "") + "".join(out) + "]"


def _in_class(ch: str) -> str:
    return "\\" + ch if ch in _CLASS_SPECIALS else ch
