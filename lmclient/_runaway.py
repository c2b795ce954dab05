"""Runaways: an answer that no longer makes progress towards a value, told from its text as it
is generated, so that a call stops there instead of at ``max_tokens`` minutes later.

A small model constrained to JSON, or writing prose, falls into loops: a span written again
and again (``"Printer on Floor 3", "Printer on Floor 3", ...``, ``Say hi. Say hi. ...``),
whitespace where the server's JSON mode allows it, a number whose digits never end
(``6000000000...``). Each is the tail of the text repeating with a short period; an honest
value almost never repeats one span 8 times over 64 characters. `Runaway` holds those
thresholds (documented in docs/reliability.md, settable per client and per call).

Who watches, decided once per plan (`guard`): vLLM from 0.17 stops a loop itself
(``repetition_detection``: the call stays one JSON answer, `server_fields`); on every other
server lmclient reads the answer as a stream and `Sentry` looks at its tail every few
characters, and at a runaway the shell closes the connection, which the servers take as an
abort. A bounded output type needs no watch: its token budget already caps its answer.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Literal

import msgspec

__all__ = [
    "DEFAULT",
    "Found",
    "Guard",
    "Runaway",
    "RunawayKind",
    "RunawaySetting",
    "Sentry",
    "find",
    "json_path",
    "padded",
    "runaway_setting",
    "server_fields",
    "whitespace",
]

RunawayKind = Literal["repeat", "whitespace", "digits"]
# Who watches a plan's answers: the server (vLLM's ``repetition_detection``) or lmclient, which
# reads the answer as a stream (`Sentry`).
Guard = Literal["server", "client"]


class Runaway(msgspec.Struct, frozen=True, kw_only=True):
    """When an answer counts as a runaway, for ``runaway=`` (``"on"`` is these defaults): a span
    of at most ``max_span`` characters repeated ``repeats`` times in a row, over at least
    ``min_chars`` characters (so a short repeat such as ``"ha ha ha"`` or ``[0,0,0]`` is not
    one), ``min_chars`` characters of whitespace in a row, or a run of more than ``digits``
    digits. On vLLM, the server's own check is told the
    same in tokens (`server_fields`)."""

    repeats: int = 8
    min_chars: int = 64
    max_span: int = 128
    digits: int = 64

    def __post_init__(self) -> None:
        for name in ("repeats", "min_chars", "max_span", "digits"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise ValueError(f"Runaway({name}=...) must be an int of at least 2, not {value!r}")


DEFAULT = Runaway()
# What ``runaway=`` takes (`runaway_setting`): the default thresholds, none, or others.
RunawaySetting = Literal["on", "off"] | Runaway


def runaway_setting(value: Any, where: str) -> Runaway | None:
    """The thresholds ``runaway=`` asks for (``None``: ``"off"``); anything else is refused."""
    if value == "on" and isinstance(value, str):
        return DEFAULT
    if value == "off" and isinstance(value, str):
        return None
    if isinstance(value, Runaway):
        return value
    raise ValueError(f"{where}(): runaway must be 'on', 'off' or a lmclient.Runaway, not {value!r}")


def server_fields(runaway: Runaway) -> dict[str, Any]:
    """vLLM's ``repetition_detection`` for ``runaway``, in tokens. vLLM has one count for every
    span length, and a one-token span (a digit) repeats honestly more often than a longer one:
    the real vLLM stopped ``1.0000000000000000``, an honest float of an ``Any`` answer, at 16
    repeats. So four times the repeats (32), of spans of up to ``max_span / 8`` tokens (16, a
    token holding about four characters of these answers: the measured loops' spans are up to
    46 characters): a loop of the longest span is stopped within ``4 * repeats * max_span / 8``
    tokens, 512 by default."""
    return {
        "repetition_detection": {
            "max_pattern_size": max(1, runaway.max_span // 8),
            "min_pattern_size": 1,
            "min_count": 4 * runaway.repeats,
        }
    }


class Found(msgspec.Struct, frozen=True, kw_only=True):
    """A runaway in a text: its kind, the span repeated (the whole run, for ``"whitespace"``
    and ``"digits"``), how many times in a row (1 for a run), and where it starts."""

    kind: RunawayKind
    span: str
    repeats: int
    start: int
    what: str  # how a message says it


_DIGITS = re.compile(r"[0-9]+\Z")
_SPACE = re.compile(r"\s+\Z")
_KEY = 8  # the suffix whose earlier occurrences give the candidate periods


def find(text: str, runaway: Runaway, offset: int = 0, *, counting: bool = True) -> Found | None:
    """The runaway that ``text`` (the answer's last characters, from ``offset`` in it) ends
    with, if any; a loop that counts too, unless ``counting`` is false (`Sentry` asks for
    that one less often: it reads every number). The candidate periods are the distances back
    to the earlier occurrences of its last few characters (``str.rfind``, in C), each verified
    by one comparison of the text with itself shifted: a few string operations however long
    the text."""
    n = len(text)
    digits = runaway.digits
    if n > digits:
        run = _DIGITS.search(text, n - digits - 1)
        if run is not None and n - run.start() > digits:
            start = run.start()
            while start > 0 and text[start - 1].isdigit():
                start -= 1
            number = text[start:]
            what = f"a number of {len(number)} digits"
            return Found(kind="digits", span=number, repeats=1, start=offset + start, what=what)
    if n < runaway.min_chars:
        return None
    space = _SPACE.search(text, n - runaway.min_chars)
    if space is not None and space.start() == n - runaway.min_chars:  # a run of min_chars
        start = space.start()
        while start > 0 and text[start - 1].isspace():
            start -= 1
        return _whitespace(text[start:], offset + start)
    found = _periodic(text, runaway.repeats, runaway.min_chars, runaway.max_span)
    if found is not None:
        start, period = found
        span = text[start : start + period]
        if span.isspace():  # whitespace: the whole run, as the rule above finds a longer one
            return _whitespace(text[start:], offset + start)
        repeats = (n - start) // period
        what = f"{_shown(span)} repeated {repeats} times in a row"
        return Found(kind="repeat", span=span, repeats=repeats, start=offset + start, what=what)
    return _counting(text, runaway, offset) if counting else None


def _periodic(text: str, repeats: int, min_chars: int, max_span: int) -> tuple[int, int] | None:
    """Where the run that ``text`` ends with starts, and its period: a span of at most
    ``max_span`` characters repeated ``repeats`` times over ``min_chars`` at least."""
    n = len(text)
    if n < min_chars:
        return None
    key = text[n - _KEY :]
    lowest = max(0, n - _KEY - max_span)
    at = text.rfind(key, lowest, n - 1)
    while at >= 0:
        period = n - _KEY - at
        need = max(period * repeats, min_chars)
        if need <= n and text[n - need : n - period] == text[n - need + period :]:
            start = n - need  # the run, extended back to its first character
            while start >= period and text[start - period : start] == text[start : start + period]:
                start -= period
            while start > 0 and text[start - 1] == text[start - 1 + period]:
                start -= 1
            return start, period
        at = text.rfind(key, lowest, at + _KEY - 1)
    return None


_NUMBER = re.compile(r"[0-9]+")
COUNTING = 2048  # the characters a look for a counting loop reads: 32 spans of 64


def _counting(text: str, runaway: Runaway, offset: int) -> Found | None:
    """A loop that counts, or whose numbers wander (``{"text":"yoyo","minutes":33},
    {"text":"yoyo","minutes":34},...``, ``".421",".422",...``, measured on Gemma 3 270M): the
    same span but for its numbers, found with every number read as ``0`` in the last
    `COUNTING` characters, twice the repeats over four times the characters of an exact loop,
    of a span of at most half ``max_span``; and a span that repeats a word outside its keys
    (``yoyo``), or one of whose numbers steps alike from span to span over those repeats
    (``421``, ``422``). A list of points or numbers, alike but for numbers that differ at
    random, is never one; a list that repeats a word beside a number (a schedule: ``{"day": 3,
    "task": "run"}``) is one past 16 items."""
    cut = max(0, len(text) - COUNTING)
    text = text[cut:]
    offset += cut
    if not _NUMBER.search(text):
        return None
    read = _NUMBER.sub("0", text)
    spans = 2 * runaway.repeats
    found = _periodic(read, spans, 4 * runaway.min_chars, runaway.max_span // 2)
    if found is None:
        return None
    start, period = found
    span = read[start : start + period]
    removed = 0  # the run's start in ``text``: after the digits the numbers before it lost
    for number in _NUMBER.finditer(text):
        if number.start() - removed >= start:
            break
        removed += number.end() - number.start() - 1
    run = text[start + removed :]
    if not (_worded(span) or _counts(run, span.count("0"), spans)):
        return None
    repeats = (len(read) - start) // period
    what = f"{_shown(span)} repeated {repeats} times in a row, but for its numbers"
    return Found(
        kind="repeat", span=span, repeats=repeats, start=offset + start + removed, what=what
    )


_WORD = re.compile(r"[^\W\d_]{2,}")


def _worded(span: str) -> bool:
    """Whether a span (read around: it may start anywhere in its text) holds a word that is
    not a JSON key (a key is followed by ``":``)."""
    around = span + span
    return any(not around.startswith('":', word.end()) for word in _WORD.finditer(around))


def _counts(run: str, per_span: int, spans: int) -> bool:
    """Whether one of the ``per_span`` numbers of each of the last ``spans`` spans of ``run``
    steps by one and the same amount from span to span (the last number left out: it may be
    cut; the spans before them may not count yet: measured, ``2700000000000000000``,
    ``15000000000000000000``, ... then ``0``, ``1``, ``2``...)."""
    numbers = [int(n) for n in _NUMBER.findall(run)][:-1][-per_span * spans :]
    for at in range(per_span):
        seen = numbers[at::per_span]
        step = seen[1] - seen[0] if len(seen) > 2 else 0
        if step and all(b - a == step for a, b in itertools.pairwise(seen)):
            return True
    return False


def _shown(span: str) -> str:
    return repr(span[:80]) + ("…" if len(span) > 80 else "")


def whitespace(text: str) -> int:
    """How many of ``text``'s characters are whitespace."""
    return sum(text.count(c) for c in " \n\t\r")


def padded(text: str) -> Found | None:
    """Whitespace that a JSON answer cut at ``max_tokens`` spent most of itself on: more than
    half its characters, and 32 at least (a server's JSON mode that allows whitespace between
    tokens, padded at each one with a newline and up to 20 spaces). Asked of a cut answer
    only: an honest pretty-printed array of numbers is mostly whitespace too, but it ends."""
    spaces = whitespace(text)
    if spaces < 32 or 2 * spaces <= len(text):
        return None
    what = f"{spaces} of its {len(text)} characters whitespace"
    return Found(kind="whitespace", span="", repeats=1, start=0, what=what)


def _whitespace(run: str, start: int) -> Found:
    what = f"{len(run)} characters of whitespace in a row"
    return Found(kind="whitespace", span=run, repeats=1, start=start, what=what)


class Sentry:
    """The watch over one answer's text as it arrives: `feed` each content delta; it looks at
    the tail every `STEP` characters (a runaway is at least ``min_chars`` long, so a look per
    few of its tokens costs little and misses nothing), for a counting loop every fourth
    look, and returns what it found. Between looks a delta is only kept."""

    __slots__ = ("_looks", "_pending", "_runaway", "_seen", "_tail", "_unlooked", "window")

    STEP = 16

    def __init__(self, runaway: Runaway) -> None:
        self._runaway = runaway
        # the characters a look needs: a whole run of the longest span, a digit run, a
        # counting loop
        needs = runaway.max_span * runaway.repeats, runaway.min_chars, runaway.digits, COUNTING
        self.window = max(needs) + _KEY + self.STEP
        self._tail = ""
        self._pending: list[str] = []  # the deltas since the last look
        self._seen = 0  # the characters before the tail
        self._unlooked = 0
        self._looks = 0

    def feed(self, delta: str) -> Found | None:
        self._pending.append(delta)
        self._unlooked += len(delta)
        if self._unlooked < self.STEP:
            return None
        tail = self._tail + "".join(self._pending)
        self._pending.clear()
        if len(tail) > self.window:
            self._seen += len(tail) - self.window
            tail = tail[-self.window :]
        self._tail = tail
        self._unlooked = 0
        self._looks += 1
        return find(tail, self._runaway, self._seen, counting=self._looks % 4 == 0)


# A JSON text's tokens, for `json_path`: a string (perhaps not closed yet), a structural
# character, or anything else up to the next of those (a number, a literal).
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[{}\[\]:,]|[^\s{}\[\]:,"]+')
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def json_path(text: str, start: int) -> str:
    """The path of what ran away in ``text``, a JSON document cut anywhere, from ``start`` to
    its end: the path both ends share (``$.tags`` for a list whose items repeat from the
    first, ``$.tags[2]`` for one item that never ends, ``$`` for a text that is not JSON)."""
    first, last = _path(text[: start + 1]), _path(text)
    shared = 0
    while shared < min(len(first), len(last)) and first[shared] == last[shared]:
        shared += 1
    return "$" + "".join(_step(p) for p in last[:shared])


def _path(text: str) -> list[str | int]:
    """The keys and indexes of the value ``text`` (JSON cut anywhere) is writing at its end."""
    path: list[str | int] = []  # per open container: its current key, or index
    in_object: list[bool] = []
    before = ""  # the token before this one
    for token in _TOKENS.finditer(text):
        value = token.group()
        if value in ("{", "["):
            in_object.append(value == "{")
            path.append("" if value == "{" else 0)
        elif value in ("}", "]"):
            if in_object:
                in_object.pop()
                path.pop()
        elif value == ",":
            if in_object and not in_object[-1]:
                path[-1] = int(path[-1]) + 1
        elif in_object and in_object[-1] and before in ("{", ",") and value.startswith('"'):
            closed = value if len(value) > 1 and value.endswith('"') else value + '"'
            try:  # an object's key (its value comes after the colon)
                path[-1] = msgspec.json.decode(closed)
            except msgspec.DecodeError:
                path[-1] = value.strip('"')
        before = value
    return path


def _step(part: str | int) -> str:
    if isinstance(part, int):
        return f"[{part}]"
    return f".{part}" if _NAME.match(part) else f"[{msgspec.json.encode(part).decode()}]"
