"""Runaways: the text of an answer that loops, as :meth:`FakeLLM.runaway` plays it, and vLLM's
server-side guard (``repetition_detection``) that ends such a loop.

A runaway starts as a valid prefix of the answer the fake would give, so that the JSON path of
the field that loops is meaningful, then goes on piece by piece. Each piece is cut into deltas on
its own, as a tokenizer splits a repeated phrase the same way every time: a span of ``k`` deltas
repeated ``C`` times is ``C`` repetitions of a ``k``-token pattern, which is what vLLM's guard
counts.
"""

from __future__ import annotations

import itertools
import re
import typing
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from lmclient._servers import SERVERS, release

__all__ = [
    "CAP",
    "RUNAWAY_KINDS",
    "Guard",
    "Loop",
    "Run",
    "RunawayKind",
    "check_span",
    "loop_of",
    "read_guard",
    "reads_guard",
]

RunawayKind = Literal["repeat", "whitespace", "digits", "unclosed"]
RUNAWAY_KINDS: tuple[RunawayKind, ...] = typing.get_args(RunawayKind)

CAP = 2048
"""The deltas of a non-streamed runaway whose request gives no ``max_tokens``: a server stops
somewhere (its context length); this one stops here."""

GUARD_FIELD = "repetition_detection"
_WHITESPACE = "\n  "
_JSON_SPACE = frozenset(" \t\n\r")
_PHRASE_WORDS = 3  # a text's default span: its first words
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")
_LITERAL = re.compile(r"true|false|null")


def check_span(kind: RunawayKind, span: str | None) -> None:
    """Fail at scripting time for a ``span`` the kind cannot play."""
    if kind not in RUNAWAY_KINDS:
        raise ValueError(f"unknown runaway kind {kind!r}; expected one of {RUNAWAY_KINDS}")
    if span is None:
        return
    if kind not in ("repeat", "whitespace"):
        raise ValueError(
            f"span= is for the 'repeat' and 'whitespace' runaways; a {kind!r} runaway "
            "makes up its own text: drop span="
        )
    if not span:
        raise ValueError("span cannot be empty: give the text that repeats")
    if kind == "whitespace" and not set(span) <= _JSON_SPACE:
        raise ValueError(
            f"a 'whitespace' runaway's span must be JSON whitespace (spaces, tabs, newlines), "
            f"not {span!r}; use kind='repeat' for other text"
        )


@dataclass(frozen=True)
class Loop:
    """Where an answer starts looping: ``prefix``, a valid prefix of the answer, then
    ``pieces`` for ever (each cut into deltas on its own)."""

    prefix: str
    pieces: Iterator[str]


@dataclass(frozen=True)
class _Value:
    """A JSON value's place in the text: ``end`` is exclusive; ``items`` are an array's items
    or an object's values, in document order."""

    kind: Literal["object", "array", "string", "number", "literal"]
    start: int
    end: int
    items: tuple[_Value, ...] = ()


def loop_of(content: str | None, kind: RunawayKind, span: str | None) -> Loop:
    """The runaway of ``kind`` that the answer ``content`` turns into.

    In a JSON answer: ``repeat`` repeats the last item of the first non-empty list, else the
    first words of the first string inside it, else the digits of the first number (a given
    ``span`` repeats inside the first string, escaped); ``whitespace`` pads after the first
    ``{`` or ``[``; ``digits`` makes the first number's digits never end (without a number: digits
    inside the first string); ``unclosed`` never closes the first string, counting ``step 1
    step 2 ...``. In a text answer, or a JSON one without the piece looked for, the text goes on
    after the answer.
    """
    text = content or ""
    values = _values(text)
    string = next((v for v in values if v.kind == "string"), None)
    number = next((v for v in values if v.kind == "number"), None)
    if kind == "whitespace":
        container = next((v for v in values if v.kind in ("object", "array")), None)
        cut = len(text) if container is None else container.start + 1
        return Loop(text[:cut], itertools.repeat(span or _WHITESPACE))
    if kind == "digits":
        if number is not None:
            return Loop(text[: number.end] + _digit_joint(text, number), _counted_digits())
        head = text if string is None else text[: string.end - 1]
        return Loop(head + " ", _counted_digits())
    if kind == "unclosed":
        head = text if string is None else text[: string.end - 1]
        return Loop(head, (f" step {n}" for n in itertools.count(1)))
    if span is not None:
        if string is None:
            return Loop(text, itertools.repeat(span))
        escaped = msgspec.json.encode(span).decode()[1:-1]
        return Loop(text[: string.end - 1], itertools.repeat(escaped))
    listed = next((v for v in values if v.kind == "array" and v.items), None)
    if listed is not None:
        last = listed.items[-1]
        return Loop(text[: last.end], itertools.repeat("," + text[last.start : last.end]))
    if string is not None:
        words = text[string.start + 1 : string.end - 1]
        return Loop(text[: string.end - 1], itertools.repeat(" " + _phrase(words)))
    if number is not None:
        digits = re.search(r"\d+$", text[number.start : number.end])
        piece = "0" if digits is None or digits.group() == "0" else digits.group()
        joint = _digit_joint(text, number)
        return Loop(text[: number.end] + joint, itertools.repeat(piece))
    return Loop(text, itertools.repeat(" " + _phrase(text)))


def _phrase(text: str) -> str:
    """A text's first words: what a model that loops on it says again."""
    return " ".join(text.split()[:_PHRASE_WORDS]) or "again"


def _digit_joint(text: str, number: _Value) -> str:
    """What must follow ``number`` for more digits to keep it a valid prefix: ``.`` after a bare
    ``0`` (JSON has no leading zeros), nothing otherwise."""
    return "." if text[number.start : number.end].lstrip("-") == "0" else ""


def _counted_digits() -> Iterator[str]:
    """Digits that never end and never repeat exactly: 1000, 1001, 1002, ... run together."""
    return (str(n) for n in itertools.count(1000))


def _values(text: str) -> list[_Value]:
    """Every value of ``text`` in document order, or none when it is not JSON."""
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError:
        return []
    found: list[_Value] = []

    def walk(value: _Value) -> None:
        found.append(value)
        for item in value.items:
            walk(item)

    walk(_parse(text, 0))
    return found


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _JSON_SPACE:
        at += 1
    return at


def _parse(text: str, at: int) -> _Value:
    """The value at ``at`` of ``text``, which is valid JSON (msgspec said so)."""
    at = _skip(text, at)
    char = text[at]
    if char == '"':
        end = at + 1
        while text[end] != '"':
            end += 2 if text[end] == "\\" else 1
        return _Value("string", at, end + 1)
    if char in "{[":
        container: Literal["object", "array"] = "object" if char == "{" else "array"
        close = "}" if char == "{" else "]"
        items: list[_Value] = []
        cursor = _skip(text, at + 1)
        while text[cursor] != close:
            if container == "object":
                key = _parse(text, cursor)
                cursor = _skip(text, key.end) + 1  # the colon
            item = _parse(text, cursor)
            items.append(item)
            cursor = _skip(text, item.end)
            if text[cursor] == ",":
                cursor = _skip(text, cursor + 1)
        return _Value(container, at, cursor + 1, tuple(items))
    number = _NUMBER.match(text, at)
    if number is not None:
        return _Value("number", at, number.end())
    literal = _LITERAL.match(text, at)
    assert literal is not None  # valid JSON has nothing else
    return _Value("literal", at, literal.end())


# -- vLLM's guard --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Guard:
    """vLLM's ``repetition_detection`` (``vllm/sampling_params.py``, RepetitionDetectionParams):
    stop once the last ``n * min_count`` tokens are ``min_count`` repetitions of an ``n``-token
    pattern, ``min_pattern_size <= n <= max_pattern_size``."""

    max_pattern_size: int
    min_pattern_size: int
    min_count: int

    @property
    def window(self) -> int:
        """The most recent tokens :meth:`stops` looks at."""
        return self.max_pattern_size * self.min_count

    def stops(self, tokens: Sequence[str]) -> bool:
        """vLLM's ``check_sequence_repetition`` (``vllm/v1/core/sched/utils.py``), on the
        fake's tokens (its deltas)."""
        smallest = max(1, self.min_pattern_size)
        if self.max_pattern_size <= 0 or self.min_count < 2 or smallest > self.max_pattern_size:
            return False
        for size in range(smallest, self.max_pattern_size + 1):
            if size * self.min_count > len(tokens):
                return False
            if all(
                tokens[-(size * m + n)] == tokens[-n]
                for n in range(1, size + 1)
                for m in range(1, self.min_count)
            ):
                return True
        return False


def reads_guard(server: str | None) -> bool:
    """Whether the server the fake plays reads ``repetition_detection`` (`SERVERS`' ``added``
    releases); the default fake, which reads every field some server reads, does."""
    if server is None:
        return True
    if server == "generic":
        return False
    row = SERVERS[server]
    since = row.added.get(GUARD_FIELD)
    return since is not None and release(str(row.answer[row.version_key])) >= since


_GUARD_KEYS = ("max_pattern_size", "min_pattern_size", "min_count")


def read_guard(body: Mapping[str, Any]) -> Guard | None:
    """The request's guard (``None``: none asked); raises ``ValueError`` with vLLM's 400
    message for one vLLM refuses."""
    given = body.get(GUARD_FIELD)
    if given is None:
        return None
    if not isinstance(given, dict):
        raise ValueError(f"{GUARD_FIELD}: Input should be a valid dictionary")
    numbers = {}
    for key in _GUARD_KEYS:
        value = given.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{GUARD_FIELD}.{key}: Input should be a valid integer")
        numbers[key] = value
    guard = Guard(**numbers)
    smallest, largest = guard.min_pattern_size, guard.max_pattern_size
    if smallest < 0 or largest < 0 or smallest > largest:
        raise ValueError(
            "max_pattern_size, min_pattern_size must be >=0, with min_pattern_size <= "
            "max_pattern_size. Set both to 0 to disable repetitive pattern detection."
        )
    if guard.max_pattern_size > 0 and guard.min_count < 2:
        raise ValueError(
            "min_count must be >= 2 to detect repetitive patterns in engine output. If you do "
            "not wish to detect repetitive patterns, set max_pattern_size to 0."
        )
    return guard


# -- playing it ----------------------------------------------------------------------------------


class Run:
    """The deltas of one runaway answer, up to where it ends: ``limit`` deltas (``finish``
    ``"length"``), the guard's stop (``"repetition"``), or never (``finish`` stays ``None``).
    ``count`` is the deltas produced so far: the completion tokens."""

    def __init__(self, loop: Loop, chunk_size: int, limit: int | None, guard: Guard | None) -> None:
        self._loop = loop
        self._size = max(1, chunk_size)
        self._limit = limit
        self._guard = guard
        self.count = 0
        self.finish: Literal["length", "repetition"] | None = None

    def __iter__(self) -> Iterator[str]:
        recent: deque[str] = deque(maxlen=self._guard.window if self._guard else 1)
        for delta in self._deltas():
            yield delta
            self.count += 1
            recent.append(delta)
            # vLLM's order (check_stop): the length first, then the repetition
            if self._limit is not None and self.count >= self._limit:
                self.finish = "length"
                return
            if self._guard is not None and self._guard.stops(recent):
                self.finish = "repetition"
                return

    def _deltas(self) -> Iterator[str]:
        size = self._size
        prefix = self._loop.prefix
        yield from (prefix[start : start + size] for start in range(0, len(prefix), size))
        for piece in self._loop.pieces:
            yield from (piece[start : start + size] for start in range(0, len(piece), size))
