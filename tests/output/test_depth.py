"""JSON from a server nested deeper than a bound is refused before msgspec's decoder sees it,
with lmclient's typed error carrying what was received. Issue 26: 100,000-deep content killed
the process (SIGSEGV in msgspec's recursive decoder) in a thread with a 256 KiB stack.

The crash is checked where it happened: in a subprocess (a crash there fails the test instead
of killing pytest), a thread with ``threading.stack_size(256 * 1024)`` calls a client against
the fake (over real loopback sockets), which answers 100,000-deep content, body, stream event,
error body and error event (``event: error``, which crashed the process until every decode went
through `guarded_decoder`). The bounds themselves are checked in-process
(`lmclient._output.depth`)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lmclient
from lmclient._output import depth
from lmclient._output.depth import COUNTED, MAX_DEPTH, nested_deeper, type_depth
from lmclient.testing import FakeLLM

DEEP = 100_000


class Person(msgspec.Struct):
    name: str
    tags: list[str]


class Tree(msgspec.Struct):
    children: list[Tree]


CHILD = textwrap.dedent(
    """
    import sys, threading
    import lmclient
    from lmclient.testing import FakeLLM

    DEEP = 100_000
    kind = sys.argv[1]
    fake = FakeLLM()
    deep = "[" * DEEP + "]" * DEEP
    if kind == "content":
        fake.reply(deep)
    elif kind == "stream":
        fake.reply(deep, chunk_size=len(deep))
    elif kind == "body":
        fake.add_route("GET", "/v1/models", '{"data": ' + deep + "}")
    elif kind == "event":
        sse = {"content-type": "text/event-stream"}
        fake.add_route("POST", "/v1/chat/completions", "event: error\\ndata: " + deep, headers=sse)
    else:
        fake.reply_error(500, '{"error": ' + deep + "}")
    outcome = []

    def call():
        with fake.serve() as url:
            with lmclient.Client(url, "m", dialect="vllm", max_retries=0) as client:
                try:
                    if kind in ("stream", "event"):
                        with client.stream("hi", list) as stream:
                            stream.read()
                    elif kind == "body":
                        client.models()
                    else:
                        client.generate("hi", list)
                except lmclient.LMClientError as exc:
                    received = getattr(exc, "text", None) or getattr(exc, "body", None) or ""
                    outcome.append(f"{type(exc).__name__} {len(received)}: {exc}"[:300])

    threading.stack_size(256 * 1024)
    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    print(outcome[0] if outcome else "no error")
    """
)


@pytest.mark.slow  # a Python process per case
@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("content", "ValidationError"),
        ("stream", "ValidationError|ProtocolError"),
        ("body", "ProtocolError"),
        ("error", "ServerError"),
        ("event", "ServerError"),
    ],
)
def test_deep_json_in_a_small_thread_stack(kind: str, error: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kind], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"the process died ({done.returncode}): {done.stderr[-2000:]}"
    assert any(done.stdout.startswith(e) for e in error.split("|")), done.stdout
    if kind not in ("error", "event"):
        assert "nested deeper than" in done.stdout


@pytest.mark.parametrize(
    ("tp", "depth"),
    [
        (str, 0),
        (int, 0),
        (list[int], 1),
        (Person, 2),
        (list[Person], 3),
        (dict[str, list[int]], 2),
        (Person | None, 2),
        (tuple[int, list[int]], 2),
        (Tree, MAX_DEPTH),  # recursive
        (Any, MAX_DEPTH),
        (dict[str, Any], MAX_DEPTH),
    ],
)
def test_type_depth(tp: Any, depth: int) -> None:
    assert type_depth(tp) == depth


DEEP_ENOUGH = COUNTED + 1  # text with more brackets than COUNTED is measured


@pytest.mark.parametrize(
    ("text", "bound", "deeper"),
    [
        ("[]", 0, False),  # few brackets: not measured (msgspec checks the type)
        ("[" * COUNTED + "]" * COUNTED, 1, False),
        ("[" * DEEP_ENOUGH + "]" * DEEP_ENOUGH, MAX_DEPTH, True),
        ("[" * DEEP_ENOUGH + "]" * DEEP_ENOUGH, DEEP_ENOUGH, False),
        ('[{"a": [1, {"b": []}]}' + ", []" * 300 + "]", 5, False),  # many brackets, shallow
        ('[{"a": [1, {"b": []}]}' + ", []" * 300 + "]", 4, True),
        ('"' + "[" * 500 + '"', 0, False),  # brackets inside a string do not nest
        ('["\\"' + "[" * 500 + '", "]"]', 1, False),  # nor after an escaped quote
        (b"[" * 300 + b"]" * 300, 299, True),
    ],
)
def test_nested_deeper(text: str | bytes, bound: int, deeper: bool) -> None:
    assert nested_deeper(text, bound) is deeper


def test_output_deeper_than_its_type_is_a_validation_error() -> None:
    """A Person is 2 deep: an answer with more brackets than `COUNTED` nested 3 deep or more
    cannot be one (whatever its unknown field holds). With fewer, msgspec skips the field."""
    deep = '{"name": "a", "tags": [], "extra": ' + "[" * 300 + "]" * 300 + "}"
    fake = FakeLLM()
    fake.reply_sequence([deep, '{"name": "a", "tags": [], "extra": [[1]]}'])
    with fake.serve() as url, lmclient.Client(url, "m", dialect="vllm", max_retries=0) as client:
        with pytest.raises(lmclient.ValidationError, match="nested deeper than 2") as caught:
            client.generate("hi", Person)
        assert caught.value.text == deep
        assert client.generate("hi", Person) == Person("a", [])


# -- the one guard: every body, event and output decodes through it ------------------------------


class Refused(Exception):
    """A caller's own error, to see that `guarded_decoder` raises what the caller chose."""


def refused(detail: str, data: str | bytes) -> Refused:
    return Refused(detail, data)


def test_the_guard_decodes_and_raises_the_caller_s_error() -> None:
    person = depth.guarded_decoder(2, refused, msgspec.json.Decoder(Person))
    assert person('{"name": "a", "tags": []}') == Person("a", [])
    deep = '{"name": "a", "tags": [], "x": ' + "[" * 300 + "]" * 300 + "}"
    with pytest.raises(Refused) as caught:
        person(deep)
    assert caught.value.args == ("JSON nested deeper than 2 levels of arrays and objects, "
                                 "refused unread", deep)  # fmt: skip
    with pytest.raises(Refused) as caught:  # msgspec's error, its message kept
        person(b'{"name": 1}')
    assert caught.value.args == ("Expected `str`, got `int` - at `$.name`", b'{"name": 1}')
    assert caught.value.__suppress_context__  # raised from None: msgspec's error is not chained


def test_a_body_decoder_raises_a_protocol_error_carrying_the_body() -> None:
    ranks = depth.body_decoder(list[int], "rerank")
    assert ranks(b"[1]") == [1]
    body = b"[" * 300 + b"]" * 300
    with pytest.raises(lmclient.ProtocolError, match=r"^unexpected rerank body \(JSON nested"):
        ranks(body)
    with pytest.raises(lmclient.ProtocolError, match=r"^unexpected rerank body \(Expected") as e:
        ranks(b'["a"]')
    assert e.value.body == b'["a"]'


def test_the_guard_is_written_once() -> None:
    """No module measures and decodes on its own: `nested_deeper` is called in `depth` only."""
    package = Path(lmclient.__file__).parent
    measuring = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "nested_deeper(" in path.read_text() and path.name != "depth.py"
    )
    assert measuring == []


# -- escapes: the measure reads them as msgspec does ----------------------------------------------

DEEPER = "[" * DEEP_ENOUGH + "]" * DEEP_ENOUGH  # more brackets than COUNTED, DEEP_ENOUGH deep


@pytest.mark.parametrize(
    ("string", "closed"),
    [
        ('"\\\\"', True),  # an escaped backslash ends the string: the quote after it closes it
        ('"\\\\\\\\"', True),
        ('"a\\\\\\"', False),  # an escaped backslash, then an escaped quote
        ('"\\\\\\\\\\"', False),
        ('"\\""', True),
        ('"\\u00bf"', True),  # hex digits b and f, kept with the escapes, end nothing
        ('"\\u00BF\\u00bf\\ubfbf"', True),
        ('"\\ud83d\\ude00"', True),
        ('"\\/\\b\\f\\n\\r\\t"', True),
        ('"\\b\\""', True),
        ('"\\n\\\\\\"', False),
        ('"\\f\\\\"', True),
        ('"[\\"]\\\\"', True),
        ('"é\\"\\u00e9"', True),
    ],
)
@pytest.mark.parametrize("as_bytes", [False, True])
def test_strings_with_escapes_end_where_json_ends_them(
    string: str, closed: bool, as_bytes: bool
) -> None:
    """Brackets after a string are measured when it is closed, not when it is still open: at
    the start, in the middle and at the end of a text with more brackets than `COUNTED`."""
    for text in (
        f"[{string}, {DEEPER}]",
        f'{{"a\\"b": [1, {string}, {DEEPER}]}}',
        f'["\\n[", {string}, {DEEPER}, "\\u005d\\\\"]',
    ):
        data: str | bytes = text.encode() if as_bytes else text
        assert nested_deeper(data, MAX_DEPTH) is closed, text
        assert not nested_deeper(data, DEEP_ENOUGH + 2)
        if closed:
            assert msgspec.json.decode(text)  # valid JSON: measured exactly


@pytest.mark.parametrize("escape", ["\\a", "\\u00g0", "\\u", "\\udc00", "\\ud800x", "\\x22", "\\'"])
def test_msgspec_stops_at_an_invalid_escape(escape: str) -> None:
    """What the measure relies on (`lmclient._output.depth`): an invalid escape fails msgspec
    where it stands, decoding and skipping an unknown field alike, so nothing after it nests."""

    class Named(msgspec.Struct):
        name: str

    text = '{"name": "a", "other": ["' + escape + '", ' + DEEPER + "]}"
    for tp in (Any, Named):
        with pytest.raises(msgspec.DecodeError):
            msgspec.json.decode(text, type=tp)
    valid = text.replace(escape, "\\n")
    assert msgspec.json.decode(valid, type=Named) == Named("a")
    assert nested_deeper(valid, DEEP_ENOUGH + 1) is True


def test_a_backslash_at_the_end_of_the_text() -> None:
    assert nested_deeper('["\\' + "[" * 300 + "\\", 1) is False
    assert nested_deeper("[" * 300 + "\\", 1) is True


@pytest.mark.parametrize("filler", [" ", "x", "\\n", "[]"])
def test_long_text_is_translated_before_it_is_counted(filler: str) -> None:
    """Past a few KB one translate reads the text (no counting before it), with or without
    escapes, with more or fewer than `COUNTED` brackets in all."""
    deep = "[" * 300 + "]" * 300
    few = "[" * 100 + "]" * 100
    long = filler * 5000
    for text, deeper in (
        (f'["{long}", {deep}]', True),
        (f'["{long}", {few}]', False),
        (f'["{long}", "{deep}"]', False),
    ):
        assert len(text) > depth._SHORT  # pyright: ignore
        assert nested_deeper(text, MAX_DEPTH) is deeper
    # 201 brackets are not measured; with 10,000 more in the string, they are.
    assert nested_deeper(f'["{long}", {few}]', 99) is (filler == "[]")


def test_unbalanced_text_is_measured_no_shallower() -> None:
    """Unclosed arrays nest as deep in msgspec before it finds the end of the text."""
    assert nested_deeper("[" * 300, 299) is True
    assert nested_deeper("[" * 300, 300) is False
    assert nested_deeper("]" * 300 + "[]" * 10, 1) is False
    assert nested_deeper("[" * 300 + "]" * 300, 300) is False
    # Not JSON, and a bracket left unclosed: refused whatever the depth (decoding would fail).
    assert nested_deeper("[" * 300 + "]" * 301 + "[", 300) is True
    assert nested_deeper("[[" + "[]" * 300 + "]", 2) is True


# -- properties: exact on JSON, never shallower than msgspec on any text --------------------------


_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n"}


def _string(text: str, forms: list[int]) -> str:
    """``text`` as a JSON string, each character written as chosen: plain where it may be, a
    short escape, or a ``\\u`` escape in lower or upper case hex (a surrogate pair above
    U+FFFF)."""
    out = []
    for i, char in enumerate(text):
        form = forms[i % len(forms)] if forms else 0
        if form == 0 and char not in '"\\' and char >= " ":
            out.append(char)
        elif form == 1 and char in _ESCAPES:
            out.append(_ESCAPES[char])
        else:
            hexes = json.dumps(char, ensure_ascii=True)[1:-1]  # \\uXXXX, a pair above U+FFFF
            if not hexes.startswith("\\u"):
                hexes = f"\\u{ord(char):04x}"
            out.append(hexes.upper().replace("\\U", "\\u") if form == 3 else hexes)
    return '"' + "".join(out) + '"'


_CHARS = st.text(st.sampled_from('"\\/[]{}bfnrtux é\b\f\n😀'), max_size=8)
_FORMS = st.lists(st.integers(0, 3), max_size=4)


@st.composite
def _json(draw: st.DrawFn, level: int = 0) -> tuple[str, Any, int]:
    """A JSON text, its value and its depth, strings written every which way."""
    kinds = ["string", "number", "array", "object"] if level < 6 else ["string"]
    kind = draw(st.sampled_from(kinds))
    if kind == "string":
        value = draw(_CHARS)
        return _string(value, draw(_FORMS)), value, 0
    if kind == "number":
        return "1", 1, 0
    items = draw(st.lists(_json(level + 1), max_size=3))
    deepest = 1 + max((d for _, _, d in items), default=0)
    if kind == "array":
        return "[" + ", ".join(t for t, _, _ in items) + "]", [v for _, v, _ in items], deepest
    pairs = [
        (k, _string(k, draw(_FORMS)) + ": " + t, v) for t, v, _ in items for k in [draw(_CHARS)]
    ]
    text = "{" + ",".join(p for _, p, _ in pairs) + "}"
    return text, {k: v for k, _, v in pairs}, deepest  # the last of a key, as msgspec


@given(_json())
def test_json_is_measured_exactly(document: tuple[str, Any, int]) -> None:
    text, value, deep = document
    assert msgspec.json.decode(text) == value  # the generator writes JSON
    wrapped = msgspec.json.encode({"choices": [{"content": text}]})  # a wire body's shape
    with mock.patch.object(depth, "COUNTED", -1):  # everything measured
        for data in (text, text.encode(), text + " " * depth._SHORT):  # pyright: ignore
            assert nested_deeper(data, deep) is False
            assert nested_deeper(data, deep - 1) is (deep > 0)
        assert nested_deeper(wrapped, 3) is False
        assert nested_deeper(wrapped, 2) is True


def _msgspec_reaches(text: bytes) -> int:
    """How deep msgspec nests reading ``text`` before it stops (at most: other characters are
    taken as valid, surrogate escapes too)."""
    stack: list[int] = []
    deepest = 0
    at = 0
    while at < len(text):
        char = text[at]
        if char in b"[{":
            stack.append(char)
            deepest = max(deepest, len(stack))
        elif char in b"]}":
            if not stack or stack.pop() != (char - 2):  # ord("[") == ord("]") - 2, as {}
                return deepest
        elif char == ord("\\"):
            return deepest
        elif char == ord('"'):
            at += 1
            while at < len(text) and text[at] != ord('"'):
                if text[at] == ord("\\"):
                    escaped = text[at + 1 : at + 2]
                    if escaped == b"u":
                        digits = text[at + 2 : at + 6]
                        if len(digits) < 4 or digits.strip(b"0123456789abcdefABCDEF"):
                            return deepest
                        at += 4
                    elif not escaped or escaped not in b'"\\/bfnrt':
                        return deepest
                    at += 1
                at += 1
            if at == len(text):
                return deepest
        at += 1
    return deepest


_PIECES = st.sampled_from(
    ["[", "]", "{", "}", "[", "{", '"', "\\", '\\"', "\\\\", "\\u00bf", "\\uBF0F", "\\u", "\\u0",
     "\\n", "\\/", "\\a", "b", "f", "u", "x", " ", "é", "\\ud800"]
)  # fmt: skip


@given(st.lists(_PIECES, max_size=60).map("".join))
def test_any_text_is_measured_at_least_as_deep_as_msgspec_nests_it(text: str) -> None:
    reached = _msgspec_reaches(text.encode())
    with mock.patch.object(depth, "COUNTED", -1):
        for bound in range(reached):
            assert nested_deeper(text, bound) is True
            assert nested_deeper(text.encode(), bound) is True
