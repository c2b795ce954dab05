"""The compact grammars read back for the tests: the rules of a grammar *text*, parsed by the
testing toolkit's GBNF reader (so the rendering is tested too, rule names included), and its
shortest and longest sentences, built here to check `CompactGrammar.shortest`/`longest`
independently of the compiler's own measure. Whether a text is a sentence is
`lmclient.testing._grammar.gbnf_accepts`'s answer, the full GBNF recognizer.
"""

from __future__ import annotations

from lmclient.testing._gbnf_syntax import (
    Alt,
    CharClass,
    Literal,
    Node,
    Ref,
    Repeat,
    Seq,
    parse_gbnf,
)
from lmclient.testing._grammar import gbnf_accepts

_MAX_DEPTH = 40  # rule references followed: deeper means recursion (no longest sentence)


def _size(text: str) -> int:
    return len(text.encode())


class Grammar:
    def __init__(self, text: str) -> None:
        self.text = text
        self.rules = parse_gbnf(text)  # in the order written: root first
        self._extremes: dict[tuple[Node, bool, int], str] = {}

    def accepts(self, text: str) -> bool:
        return gbnf_accepts(self.text, text)

    def longest(self) -> str:
        """The longest sentence in UTF-8 bytes (of a grammar without recursion)."""
        return self._extreme(Ref("root"), True, 0)

    def shortest(self) -> str:
        return self._extreme(Ref("root"), False, 0)

    def _extreme(self, node: Node, longest: bool, depth: int) -> str:
        key = (node, longest, depth)
        if key not in self._extremes:
            self._extremes[key] = self._extreme_of(node, longest, depth)
        return self._extremes[key]

    def _extreme_of(self, node: Node, longest: bool, depth: int) -> str:
        if depth > _MAX_DEPTH:
            raise RecursionError("too deep")
        if isinstance(node, Literal):
            return node.text
        if isinstance(node, CharClass):
            if node.negated:  # the lowest/highest code point outside the listed ranges
                candidates = [
                    cp
                    for cp in (0x10FFFF, 0x20, 0x7F, 0xFFFF, 0x80)
                    if not any(lo <= cp <= hi for lo, hi in node.ranges)
                ]
                return chr(max(candidates) if longest else min(candidates))
            ends = [hi for _, hi in node.ranges] if longest else [lo for lo, _ in node.ranges]
            return chr(max(ends) if longest else min(ends))
        if isinstance(node, Ref):
            return self._extreme(self.rules[node.name], longest, depth + 1)
        if isinstance(node, Seq):
            return "".join(self._extreme(item, longest, depth) for item in node.items)
        if isinstance(node, Alt):
            options = []
            for item in node.options:
                try:
                    options.append(self._extreme(item, longest, depth))
                except RecursionError:
                    if longest:
                        raise
            return max(options, key=_size) if longest else min(options, key=_size)
        assert isinstance(node, Repeat)
        count = node.high if longest else node.low
        assert count is not None, "unbounded repeat has no longest sentence"
        return self._extreme(node.item, longest, depth) * count if count else ""
