"""Read grammars the fake answers from: GBNF, and Lark literal choices.

GBNF (llama.cpp's grammar language, which vLLM reads too) is parsed in full
(`_gbnf_syntax`), matched by a general recognizer (`_gbnf_match`: any recursion, left recursion
included) and generated from (`_gbnf_gen`: recursion bounded by depth). Lark is only read in its
simplest form, a choice between literals, which is how clients emulate a choice with it.
"""

from __future__ import annotations

import functools
import re

from ._gbnf_gen import Generator
from ._gbnf_match import MAX_TEXT, Matcher
from ._gbnf_syntax import parse_gbnf

__all__ = ["MAX_TEXT", "gbnf_accepts", "grammar_literals", "grammar_sentence"]

_HEAD = re.compile(r"\s*(?:root\s*::=|start\s*:)")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}


def gbnf_accepts(grammar: str, text: str) -> bool:
    """Whether the GBNF ``grammar`` derives exactly ``text`` (code points) from its ``root``.

    Raises ``ValueError`` for a malformed grammar (undefined rule, no ``root``, bad syntax: the
    message says where) and for a text over `MAX_TEXT` characters.
    """
    return len(text) in _compiled(grammar)[0].ends(text)


def grammar_sentence(grammar: str, seed: int) -> str:
    """A random sentence of the GBNF ``grammar``, the same for the same seed.

    Raises ``ValueError`` for a malformed grammar and for one whose recursion never ends
    (``root ::= "(" root ")"``), which has no sentence at all.
    """
    return _compiled(grammar)[1].sentence(seed)


@functools.lru_cache(maxsize=64)
def _compiled(grammar: str) -> tuple[Matcher, Generator]:
    """Parsed and analysed once per grammar text: tests check many texts against one."""
    rules = parse_gbnf(grammar)
    return Matcher(rules), Generator(rules)


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
