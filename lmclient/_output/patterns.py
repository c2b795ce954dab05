"""Regex and GBNF text: the languages of scalars, alternations of literals, anchoring.

Pure string functions, shared by the markers (`Grammar.from_choices`), the compiler (a scalar's
pattern) and the dialects (a choice emulated as an alternation, llama.cpp's anchored patterns).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "DECIMAL_PATTERN",
    "INT_KEY_PATTERN",
    "SCALAR_GBNF",
    "SCALAR_PATTERNS",
    "anchored",
    "gbnf_alternation",
    "regex_alternation",
    "search_anchored",
]

# Regexes for the JSON literals of scalars: a constrained model then emits exactly what
# `msgspec.json.decode` reads back (JSON encodings, never Python reprs such as `True`). Floats
# are bounded to what a double holds (an exponent of two digits, 16 significant digits), so a
# model cannot write a literal that overflows or run on with digits until max_tokens.
SCALAR_PATTERNS: dict[type, str] = {
    bool: r"(true|false)",
    int: r"-?(0|[1-9][0-9]{0,18})",
    float: r"-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?([eE][+-]?[0-9]{1,2})?",
}
# The same languages in GBNF, for servers that take grammars but no regex (llama.cpp): exact,
# where a JSON schema {"type": "number"} lets llama.cpp write exponents no double can hold.
SCALAR_GBNF: dict[type, str] = {
    bool: 'root ::= "true" | "false"',
    int: 'root ::= "-"? ("0" | [1-9] [0-9]{0,18})',
    float: 'root ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?',
}
# A `Decimal` as a JSON string: msgspec's own "decimal" format is not one engines know.
DECIMAL_PATTERN = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?$"
INT_KEY_PATTERN = r"^-?(0|[1-9][0-9]*)$"  # a dict[int, ...] key, as msgspec reads one

_GBNF_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_REGEX_SPECIALS = frozenset("\\.^$*+?()[]{}|")


def gbnf_alternation(options: Sequence[str]) -> str:
    """``root ::= "a" | "b"`` with GBNF string escapes."""
    return "root ::= " + " | ".join(_gbnf_literal(o) for o in options)


def _gbnf_literal(text: str) -> str:
    return '"' + "".join(_GBNF_ESCAPES.get(c, c) for c in text) + '"'


def regex_alternation(options: Sequence[str]) -> str:
    """``(?:a|b)`` escaping only regex metacharacters (``re.escape`` also escapes spaces, which
    not every server's regex engine reads back the same way)."""
    escaped = ("".join("\\" + c if c in _REGEX_SPECIALS else c for c in o) for o in options)
    return "(?:" + "|".join(escaped) + ")"


def anchored(pattern: str) -> str:
    """``^(pattern)$``: a JSON-schema ``pattern`` is a search, and llama.cpp's converter takes
    only patterns anchored at both ends; a user's own outer anchors are not doubled (an inner
    ``^`` would be read as a literal character there)."""
    core = pattern.removeprefix("^")
    if core.endswith("$") and not core.endswith("\\$"):
        core = core[:-1]
    return f"^({core})$"


def search_anchored(pattern: str, max_length: int | None = None) -> str:
    """A JSON-schema ``pattern`` (a search) as the equivalent ``^…$`` pattern llama.cpp needs: an
    unanchored side matches a run of plain characters (no quote or backslash: nothing that ends
    or escapes the JSON string), at most the string's ``max_length`` (llama.cpp drops length
    bounds next to a pattern, and a small model may run on). Anchors inside the pattern would
    make that unsound (llama.cpp reads an inner ``^`` as a literal): such a pattern is kept."""
    anchors, alternation = _regex_outline(pattern)
    lead = pattern.startswith("^") and not alternation  # in `^a|b$` each anchor binds a branch
    trail = pattern.endswith("$") and len(pattern) - 1 in anchors and not alternation
    if (lead and trail) or anchors - {0 if lead else -1, len(pattern) - 1 if trail else -1}:
        return pattern
    fill = '[^"\\\\]' + ("*" if max_length is None else f"{{0,{max_length}}}")
    head = "^" if lead else "^" + fill
    tail = "$" if trail else fill + "$"
    return f"{head}({pattern[int(lead) : len(pattern) - int(trail)]}){tail}"


def _regex_outline(pattern: str) -> tuple[set[int], bool]:
    """The positions of ``^``/``$`` anchors outside character classes, and whether the pattern
    has a top-level ``|``: what `search_anchored` needs to know of a regex's shape."""
    anchors: set[int] = set()
    alternation = False
    depth, i, in_class = 0, 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":  # a class; a `]` right after `[` or `[^` is a literal member
            i += 2 if pattern.startswith("^", i + 1) else 1
            i += 1 if pattern.startswith("]", i) else 0
            in_class = True
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            alternation = True
        elif c in "^$":
            anchors.add(i)
        i += 1
    return anchors, alternation
