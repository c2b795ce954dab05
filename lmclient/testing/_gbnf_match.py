"""Decide whether a GBNF grammar derives a text: a memoised matcher over sets of end positions.

Each part of the grammar becomes a function from a start position to the set of positions
where a match of it can end, so ambiguity costs sets rather than backtracking, and the answer
of a rule (or of a repetition) at a position is computed once per text (memo). Two things
keep it quick enough for property tests (thousands of JSON texts a second against a grammar of
fifty rules): alternatives are picked by the next character (first sets), and a repetition of
one character (``[^"\\\\]*``) is a scan rather than a loop of calls.

Left recursion (``expr ::= expr "+" term | term``), which llama.cpp refuses but a grammar may
still be written with, would make a plain memoised matcher call itself forever. The rules that
can reach themselves without consuming a character are grouped (strongly connected parts of
that graph); when one of them is asked at a position, the group's answers there are grown from
empty sets until they stop changing (sets only grow, and are bounded by the text's length);
answers that may use those sets so far are not memoised until then.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ._gbnf_syntax import Alt, CharClass, Literal, Node, Ref, Repeat, Seq, solve

__all__ = ["MAX_TEXT", "Matcher"]

# code points: longer texts are refused. The work is about linear in the text for grammars that
# are unambiguous a character ahead (JSON), quadratic for ``.* "a" .*`` (1 s at 5,000), worse for
# grammars more ambiguous than that.
MAX_TEXT = 10_000
# positions carried through ambiguous parts (a few seconds' work): past it the text is refused
# rather than matched, e.g. a 1,000-character text against llama.cpp's "hang" test grammar,
# ``(((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}){0,99}``
MAX_WORK = 10_000_000
_TABLE_LIMIT = 4096  # a class with more characters than this is checked by its ranges
_STACK_PER_CHAR = 12  # frames a nested rule may need per character, for the recursion limit

Ends = frozenset[int]
_EMPTY: Ends = frozenset()


@dataclass
class _Run:
    """One text being matched, with what has been worked out about it."""

    text: str
    memo: list[dict[int, Ends]]
    growing: dict[tuple[int, int], dict[int, Ends]] = field(default_factory=dict)
    work: int = 0  # positions handled by `_step`, against `MAX_WORK`


_Fn = Callable[[_Run, int], Ends]
_First = tuple[frozenset[str] | None, bool]  # (first characters, or None for any; nullable)


class Matcher:
    """The parsed rules of one grammar compiled into matching functions."""

    def __init__(self, rules: dict[str, Node]) -> None:
        self.index = {name: number for number, name in enumerate(rules)}
        self.nullable = _nullable(rules)
        self.first = _first_sets(rules, self.nullable)
        self.groups = _left_recursive_groups(rules, self.nullable)
        self.bodies: list[_Fn] = []  # filled after the callers exist: rules refer to each other
        self.calls: list[_Fn] = [self._caller(name) for name in rules]
        self.tables = len(rules)  # memo tables: one per rule, then one per general repetition
        self.bodies.extend(self._compile(body) for body in rules.values())

    def ends(self, text: str) -> Ends:
        """Where a match of ``root`` starting at 0 can end."""
        if len(text) > MAX_TEXT:
            raise ValueError(f"texts over {MAX_TEXT} characters are not matched")
        run = _Run(text, [{} for _ in range(self.tables)])
        with _stack_for(len(text)):
            try:
                return self.calls[self.index["root"]](run, 0)
            except RecursionError:
                raise ValueError("the text nests the grammar's rules too deeply to match") from None

    # -- rules -----------------------------------------------------------------------------------

    def _caller(self, name: str) -> _Fn:
        number = self.index[name]
        group = self.groups.get(name)
        bodies = self.bodies

        def call(run: _Run, pos: int) -> Ends:
            table = run.memo[number]
            found = table.get(pos)
            if found is None:
                found = table[pos] = bodies[number](run, pos)
            return found

        if group is None:
            return call

        def call_growing(run: _Run, pos: int) -> Ends:
            found = run.memo[number].get(pos)
            if found is not None:
                return found
            key = (group, pos)
            growing = run.growing.get(key)
            if growing is not None:  # inside this group's growth here: the answer so far
                return growing.setdefault(number, _EMPTY)
            growing = run.growing[key] = {number: _EMPTY}
            while True:
                asked = len(growing)
                changed = False
                for member in list(growing):
                    grown = bodies[member](run, pos)
                    if grown != growing[member]:
                        growing[member] = grown
                        changed = True
                if not changed and len(growing) == asked:
                    break
            del run.growing[key]
            for member, final in growing.items():
                run.memo[member][pos] = final
            return growing[number]

        return call_growing

    # -- parts of rules --------------------------------------------------------------------------

    def _compile(self, node: Node) -> _Fn:
        if isinstance(node, Literal):
            return _literal(node.text)
        if isinstance(node, CharClass):
            return _one_char(_char_test(node))
        if isinstance(node, Ref):
            return self.calls[self.index[node.name]]
        if isinstance(node, Seq):
            return _sequence([self._compile(item) for item in node.items])
        if isinstance(node, Alt):
            return self._alternation(node)
        return self._repeat(node)

    def _alternation(self, node: Alt) -> _Fn:
        """Try only the options that can start with the next character (or match nothing)."""
        options = [
            (self._compile(option), _node_first(option, self.first, self.nullable))
            for option in node.options
        ]
        always = tuple(fn for fn, (chars, nullable) in options if chars is None or nullable)
        at_end = tuple(fn for fn, (_, nullable) in options if nullable)
        table: dict[str, tuple[_Fn, ...]] = {}
        for ch in sorted({c for _, (chars, _) in options for c in chars or ()}):
            table[ch] = tuple(
                fn for fn, (chars, nullable) in options if chars is None or nullable or ch in chars
            )

        def alternation(run: _Run, pos: int) -> Ends:
            text = run.text
            chosen = table.get(text[pos], always) if pos < len(text) else at_end
            if len(chosen) == 1:
                return chosen[0](run, pos)
            ends: set[int] = set()
            for fn in chosen:
                ends |= fn(run, pos)
            return frozenset(ends)

        return alternation

    def _repeat(self, node: Repeat) -> _Fn:
        low, high = node.low, node.high
        single = self._single_char(node.item)
        if single is not None:
            return _char_run(single, low, high)
        step = self._compile(node.item)
        number = self.tables  # memoised like a rule: nested repetitions would multiply the work
        self.tables += 1

        def repeat(run: _Run, pos: int) -> Ends:
            if run.growing and any(at == pos for _, at in run.growing):
                return repeat_here(run, pos)  # may use a left-recursive rule's answer so far
            table = run.memo[number]
            found = table.get(pos)
            if found is None:
                found = table[pos] = repeat_here(run, pos)
            return found

        def repeat_here(run: _Run, pos: int) -> Ends:
            level: Ends = frozenset((pos,))
            for _ in range(low):  # exactly `low` times first
                level = _step(step, run, level)
                if not level:
                    return _EMPTY
            # then breadth first: a position reached after fewer repetitions has at least as
            # many left, so it is expanded once, the first time it is reached
            reached = set(level)
            frontier = level
            count = low
            while frontier and (high is None or count < high):
                frontier = frozenset(_step(step, run, frontier) - reached)
                reached |= frontier
                count += 1
            return frozenset(reached)

        return repeat

    def _single_char(self, node: Node) -> Callable[[str], bool] | None:
        """A test for one character when ``node`` always matches exactly one, else None."""
        if isinstance(node, CharClass):
            return _char_test(node)
        if isinstance(node, Literal) and len(node.text) == 1:
            return node.text.__eq__
        return None


# -- building blocks ------------------------------------------------------------------------------


def _literal(literal: str) -> _Fn:
    size = len(literal)

    def match(run: _Run, pos: int) -> Ends:
        return frozenset((pos + size,)) if run.text.startswith(literal, pos) else _EMPTY

    return match


def _one_char(test: Callable[[str], bool]) -> _Fn:
    def match(run: _Run, pos: int) -> Ends:
        text = run.text
        return frozenset((pos + 1,)) if pos < len(text) and test(text[pos]) else _EMPTY

    return match


def _char_run(test: Callable[[str], bool], low: int, high: int | None) -> _Fn:
    def match(run: _Run, pos: int) -> Ends:
        text = run.text
        limit = len(text) if high is None else min(len(text), pos + high)
        end = pos
        while end < limit and test(text[end]):
            end += 1
        if end - pos < low:
            return _EMPTY
        return frozenset(range(pos + low, end + 1))

    return match


def _sequence(parts: list[_Fn]) -> _Fn:
    def sequence(run: _Run, pos: int) -> Ends:
        ends: Ends = frozenset((pos,))
        for part in parts:
            if len(ends) == 1:
                (start,) = ends
                ends = part(run, start)
            else:
                ends = _step(part, run, ends)
            if not ends:
                return _EMPTY
        return ends

    return sequence


def _step(part: _Fn, run: _Run, starts: Ends) -> Ends:
    """Where ``part`` can end from any of ``starts``: the one place ambiguity costs work."""
    ends: set[int] = set()
    for start in starts:
        found = part(run, start)
        run.work += len(found)
        ends |= found
    if run.work > MAX_WORK:
        raise ValueError(f"the grammar is too ambiguous to match this text: over {MAX_WORK} steps")
    return frozenset(ends)


def _char_test(node: CharClass) -> Callable[[str], bool]:
    if not node.ranges:  # "." (a negated empty class): any character at all
        return lambda ch: True
    size = sum(high - low + 1 for low, high in node.ranges)
    if size <= _TABLE_LIMIT:
        chars = frozenset(chr(c) for low, high in node.ranges for c in range(low, high + 1))
        return chars.__contains__ if not node.negated else lambda ch: ch not in chars
    ranges = node.ranges
    negated = node.negated

    def test(ch: str) -> bool:
        code = ord(ch)
        return any(low <= code <= high for low, high in ranges) != negated

    return test


@contextmanager
def _stack_for(length: int) -> Iterator[None]:
    """Let nested rules recurse once per character or so: a text of `MAX_TEXT` nested
    brackets is legitimate, and Python's default limit (1000 frames) is far below that."""
    before = sys.getrecursionlimit()
    needed = 200 + _STACK_PER_CHAR * length
    if needed > before:
        sys.setrecursionlimit(needed)
    try:
        yield
    finally:
        if needed > before:
            sys.setrecursionlimit(before)


# -- grammar analysis -----------------------------------------------------------------------------


def _nullable(rules: dict[str, Node]) -> dict[str, bool]:
    """Which rules can match the empty text (recursion starts from "no")."""
    return solve(rules, False, _node_nullable)


def _node_nullable(node: Node, nullable: dict[str, bool]) -> bool:
    if isinstance(node, Literal):
        return not node.text
    if isinstance(node, CharClass):
        return False
    if isinstance(node, Ref):
        return nullable[node.name]
    if isinstance(node, Seq):
        return all(_node_nullable(item, nullable) for item in node.items)
    if isinstance(node, Alt):
        return any(_node_nullable(option, nullable) for option in node.options)
    return node.low == 0 or _node_nullable(node.item, nullable)


def _first_sets(
    rules: dict[str, Node], nullable: dict[str, bool]
) -> dict[str, frozenset[str] | None]:
    """The characters each rule's matches can start with (None: too many to list)."""
    start: frozenset[str] | None = frozenset()
    return solve(rules, start, lambda body, first: _node_first(body, first, nullable)[0])


def _node_first(
    node: Node, first: dict[str, frozenset[str] | None], nullable: dict[str, bool]
) -> _First:
    if isinstance(node, Literal):
        return (frozenset(node.text[:1]), not node.text)
    if isinstance(node, CharClass):
        size = sum(high - low + 1 for low, high in node.ranges)
        if node.negated or size > _TABLE_LIMIT:
            return (None, False)
        return (frozenset(chr(c) for low, high in node.ranges for c in range(low, high + 1)), False)
    if isinstance(node, Ref):
        return (first[node.name], nullable[node.name])
    if isinstance(node, Repeat):
        chars, empty = _node_first(node.item, first, nullable)
        return (chars, empty or node.low == 0)
    parts = node.items if isinstance(node, Seq) else node.options
    union: set[str] = set()
    for part in parts:
        chars, empty = _node_first(part, first, nullable)
        if chars is None:
            return (None, _node_nullable(node, nullable))
        union |= chars
        if isinstance(node, Seq) and not empty:
            return (frozenset(union), False)
    return (frozenset(union), isinstance(node, Seq) or _node_nullable(node, nullable))


def _left_recursive_groups(rules: dict[str, Node], nullable: dict[str, bool]) -> dict[str, int]:
    """Rule -> number of its group, for the rules that can reach themselves without consuming
    a character (Tarjan's strongly connected components of the "can start with" graph)."""
    edges = {name: _leading_refs(body, nullable) for name, body in rules.items()}
    groups: dict[str, int] = {}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(name: str) -> None:  # recursion depth: at most the number of rules
        order[name] = low[name] = len(order)
        stack.append(name)
        on_stack.add(name)
        for target in edges[name]:
            if target not in order:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in on_stack:
                low[name] = min(low[name], order[target])
        if low[name] == order[name]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == name:
                    break
            if len(members) > 1 or name in edges[name]:
                for member in members:
                    groups[member] = order[name]

    with _stack_for(len(rules)):
        for name in rules:
            if name not in order:
                visit(name)
    return groups


def _leading_refs(node: Node, nullable: dict[str, bool]) -> set[str]:
    """The rules ``node`` may call before consuming anything."""
    if isinstance(node, Ref):
        return {node.name}
    if isinstance(node, Repeat):
        return _leading_refs(node.item, nullable)
    if isinstance(node, Alt):
        return {name for option in node.options for name in _leading_refs(option, nullable)}
    if isinstance(node, Seq):
        found: set[str] = set()
        for item in node.items:
            found |= _leading_refs(item, nullable)
            if not _node_nullable(item, nullable):
                break
        return found
    return set()
