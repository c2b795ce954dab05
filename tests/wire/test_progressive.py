"""`Stream.partials()`: a JSON object shown as it is written, in linear work.

The pure reader first (`JsonProgress`: prefixes, whole numbers, nesting, escapes cut anywhere,
malformed text), then a property over random values and chunkings (each snapshot extends the one
before, the last is the value, the work is linear in the text), then recorded real streams, then
streams over real sockets served by `FakeLLM`."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lmclient
from lmclient import errors
from lmclient._output.types import compile_output
from lmclient._wire import progressive as _progressive
from lmclient._wire.partial import ObjectProgress
from lmclient._wire.progressive import JsonProgress, Partial
from lmclient.testing import FakeLLM
from tests.helpers import FIXTURES, LLAMACPP_LIVE, gated_fake
from tests.scripted_server import ScriptedServer, chunked


class Point(msgspec.Struct):
    x: int
    y: int


class Review(msgspec.Struct):
    title: str
    score: int
    tags: list[str]
    where: Point
    summary: str


REVIEW = Review(
    'A "quoted" title, with {braces} and \\ é 😀',
    7,
    ["short", "a longer tag"],
    Point(1, -2),
    "A summary long enough to arrive in many pieces, one after another. " * 3,
)


def shown(parts: list[str], depth: int = 128) -> list[Partial[Any]]:
    """Feed ``parts`` one delta at a time and collect every snapshot."""
    reader = JsonProgress(depth)
    return [s for s in map(reader.feed, parts) if s is not None]


def values(parts: list[str]) -> list[Any]:
    return [s.value for s in shown(parts)]


def builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)


def chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


# -- JsonProgress ------------------------------------------------------------------------------


def test_a_string_grows_and_each_snapshot_keeps_its_own_value() -> None:
    seen = shown(['{"a":"he', "llo", " world", '"', "}"])
    assert [s.value for s in seen] == [
        {"a": "he"},
        {"a": "hello"},
        {"a": "hello world"},
        {"a": "hello world"},  # the string closed: shown as whole
        {"a": "hello world"},
    ]
    assert [s.incomplete for s in seen] == [
        ((), ("a",)),
        ((), ("a",)),
        ((), ("a",)),
        ((),),
        (),
    ]
    assert [s.done for s in seen] == [False, False, False, False, True]


def test_a_snapshot_built_late_shows_its_own_time() -> None:
    """The value is built when first asked, from the shared tree cut at the snapshot's version."""
    reader = JsonProgress(128)
    first = reader.feed('{"s":"ab')
    assert first is not None
    for piece in ['cd", "l": [1', ", 2", ', {"k": "v', '"}]}']:
        reader.feed(piece)
    assert first.value == {"s": "ab"} and first.incomplete == ((), ("s",))
    first.value["s"] = "changed"  # the snapshot's own dict: later ones do not see it
    assert first.value == {"s": "changed"}


def test_numbers_and_literals_show_only_once_whole() -> None:
    assert values(['{"n":12', "3", ',"t":tr', "ue", ',"z":null', "}"]) == [
        {},
        {"n": 123},
        {"n": 123, "t": True},
        {"n": 123, "t": True, "z": None},
    ]
    assert values(['{"f":-1.5e', "3 ", "}"]) == [{}, {"f": -1500.0}, {"f": -1500.0}]


def test_nested_objects_and_arrays_show_as_they_fill() -> None:
    seen = shown(['{"p":{"x":1,', '"tags":["a', '","b"]', ',"y":2}', ',"e":[]', ',"o":{}}'])
    assert [s.value for s in seen] == [
        {"p": {"x": 1}},
        {"p": {"x": 1, "tags": ["a"]}},
        {"p": {"x": 1, "tags": ["a", "b"]}},
        {"p": {"x": 1, "tags": ["a", "b"], "y": 2}},
        {"p": {"x": 1, "tags": ["a", "b"], "y": 2}, "e": []},
        {"p": {"x": 1, "tags": ["a", "b"], "y": 2}, "e": [], "o": {}},
    ]
    assert seen[1].incomplete == ((), ("p",), ("p", "tags"), ("p", "tags", 0))
    assert seen[2].incomplete == ((), ("p",))
    assert seen[4].incomplete == ((),)
    assert seen[-1].done


def test_get_and_complete_read_a_path() -> None:
    (snapshot,) = shown(['{"p":{"tags":["a","b'])
    assert repr(snapshot) == (
        "Partial({'p': {'tags': ['a', 'b']}}, done=False, "
        "incomplete=[(), ('p',), ('p', 'tags'), ('p', 'tags', 1)])"
    )
    assert snapshot.get("p", "tags", 1) == "b" and snapshot.get("p", "tags", 0) == "a"
    assert snapshot.get("p", "nope") is None and snapshot.get("p", "tags", 5, default=0) == 0
    assert snapshot.get("p", "tags", 0, "deeper") is None  # a string is not indexed
    assert snapshot.get("p", "tags", -1) == "b" and snapshot.get("p", "tags", -3) is None
    assert snapshot.get("p", 0) is None and snapshot.get("p", "tags", "0") is None
    assert snapshot.complete("p", "tags", 0) and not snapshot.complete("p", "tags", 1)
    assert not snapshot.complete("p") and not snapshot.complete("missing")
    snapshot.value["p"] = "changed"  # the snapshot's own dict: get still reads the snapshot
    assert snapshot.get("p", "tags") == ["a", "b"] and snapshot.get() == {"p": {"tags": ["a", "b"]}}


def test_a_snapshot_only_when_what_it_shows_changes() -> None:
    reader = JsonProgress(128)
    assert reader.feed("  \n") is None  # whitespace before the object
    assert reader.feed("{") is not None  # the object opened: {}
    assert reader.feed('"key') is None  # a key alone shows nothing
    assert reader.feed('": ') is None
    assert reader.feed("12") is None  # a number not yet whole
    assert reader.feed(" ") is not None  # now it is
    assert reader.feed(', "s": "\\') is not None  # the string opened (its escape not yet read)
    assert reader.feed("u00") is None  # half an escape shows nothing
    snapshot = reader.feed("e9")
    assert snapshot is not None and snapshot.value == {"key": 12, "s": "é"}
    assert reader.feed('"}') is not None
    assert reader.feed(' {"after": 1}') is None and not reader.broken  # the value has ended


def test_escapes_and_surrogate_pairs_cut_at_every_point() -> None:
    value = {"k\u00e9\n": 'a\\"/\b\f\n\r\t\u00e9\U0001f600z', "x": "\u2028"}
    text = json.dumps(value, ensure_ascii=True)
    for a, b in itertools.combinations(range(1, len(text)), 2):
        seen = shown([text[:a], text[a:b], text[b:]])
        assert seen[-1].value == value and seen[-1].done, (a, b)
        for snapshot in seen:
            for key, got in snapshot.value.items():
                assert value[key].startswith(got)


def test_duplicate_keys_take_the_later_value() -> None:
    assert values(['{"a":1,"b":2,"a":"x"}'])[-1] == {"a": "x", "b": 2}
    assert shown(['{"a":1,"b":2,"a":"x"}'])[-1].get("a") == "x"
    assert msgspec.json.decode('{"a":1,"b":2,"a":"x"}') == {"a": "x", "b": 2}


@pytest.mark.parametrize(
    "parts",
    [
        ["Sure! {", '"a":1}'],  # prose before the object
        ['["a"]'],  # not an object
        ['{"a":tru', "x}"],  # not a literal
        ['{"a":01}'],  # not a number
        ['{"a":"\\x"}'],  # not an escape
        ['{"a":"\\u12', 'zz"}'],
        ['{"a":"\\ud83d', 'x"}'],  # a high surrogate alone
        ['{"a":"\\ud83d"}'],
        ['{"a":"\\ud83d\\n"}'],
        ['{"a":"\\ud83d\\u0041"}'],  # followed by what is not a low half
        ['{"a":"\\ude00"}'],  # a low surrogate alone
        ['{"a":1]'],  # the wrong closer
        ['{"a":1,}'],
        ['{"a" 1}'],
        ["{1:2}"],
        ['{"a":[1}'],
        ['{"a":[}'],
        ['{"a":}'],
        ['{"a":[1 2]}'],
    ],
)
def test_malformed_text_stops_the_snapshots(parts: list[str]) -> None:
    reader = JsonProgress(128)
    seen = [reader.feed(p) for p in parts]
    assert reader.broken
    assert reader.feed('"more"}') is None and reader.broken
    assert all(s is None or not s.done for s in seen)


def test_deeper_than_the_type_stops_the_snapshots() -> None:
    reader = JsonProgress(2)
    assert reader.feed('{"a":[') is not None and not reader.broken
    assert reader.feed("[1]]}") is None and reader.broken


# -- the property: each snapshot extends the one before, in linear work -------------------------


def extends(later: Any, earlier: Any) -> bool:
    """Whether ``later`` is what ``earlier`` shows, written further."""
    if isinstance(earlier, dict):
        return (
            isinstance(later, dict)
            and list(later)[: len(earlier)] == list(earlier)
            and all(extends(later[k], v) for k, v in earlier.items())
        )
    if isinstance(earlier, list):
        return (
            isinstance(later, list)
            and len(later) >= len(earlier)
            and all(extends(a, b) for a, b in zip(later, earlier, strict=False))
        )
    if isinstance(earlier, str):
        return isinstance(later, str) and later.startswith(earlier)
    return bool(later == earlier)


class Counting:
    """A compiled pattern that counts the characters its matches look at (one at least)."""

    def __init__(self, pattern: re.Pattern[str], tally: dict[str, int]) -> None:
        self.pattern = pattern
        self.tally = tally

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        m = self.pattern.match(text, pos)
        self.tally["looked"] += max(1, (pos + 1 if m is None else m.end()) - pos)
        return m


@contextlib.contextmanager
def counted() -> Iterator[dict[str, int]]:
    """Every regex match the reader makes, and every snapshot it makes."""
    tally = {"looked": 0, "snapshots": 0}
    names = [n for n, v in vars(_progressive).items() if isinstance(v, re.Pattern)]
    init = Partial.__init__

    def counting_init(self: Partial[Any], *args: Any) -> None:
        tally["snapshots"] += 1
        init(self, *args)

    with pytest.MonkeyPatch.context() as mp:
        for name in names:
            mp.setattr(_progressive, name, Counting(getattr(_progressive, name), tally))
        mp.setattr(Partial, "__init__", counting_init)
        yield tally


keys = st.text(st.characters(codec="utf-8"), max_size=6)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8"), max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
objects = st.dictionaries(keys, json_values, max_size=5)


@settings(max_examples=200, deadline=None)
@given(value=objects, indent=st.sampled_from([None, 0, 2]), ascii=st.booleans(), data=st.data())
def test_snapshots_extend_each_other_to_the_value_in_linear_work(
    value: dict[str, Any], indent: int | None, ascii: bool, data: st.DataObject
) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=60)))
    parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    with counted() as tally:
        seen = shown(parts)
    # Linear: every match looks at characters from where the last one stopped, an escape cut by
    # a delta is looked at again (six characters at most), and a snapshot is made in constant
    # time, at most one per delta.
    assert tally["looked"] <= 3 * len(text) + 6 * len(parts)
    assert tally["snapshots"] == len(seen) <= len(parts)
    assert seen[-1].value == json.loads(text) and seen[-1].done
    assert all(not s.done for s in seen[:-1])
    for before, after in itertools.pairwise(seen):
        assert extends(after.value, before.value)
    for snapshot in seen:
        for path in snapshot.incomplete:
            assert snapshot.get(*path, default=KeyError) is not KeyError


def test_a_long_string_a_character_at_a_time() -> None:
    """A snapshot per character, each a prefix one longer, and no prefix read twice."""
    text = json.dumps({"s": "x" * 5000})
    with counted() as tally:
        seen = shown(list(text))
    assert [len(s.value.get("s", "")) for s in seen[1:-2]] == list(range(5001))
    assert tally["looked"] <= 2 * len(text) and tally["snapshots"] == len(seen)


# -- recorded streams --------------------------------------------------------------------------


def sse_contents(sse: bytes) -> list[str]:
    return [
        chunk["choices"][0]["delta"]["content"]
        for line in sse.decode().splitlines()
        if line.startswith("data: {")
        for chunk in [json.loads(line[6:])]
        if chunk["choices"] and chunk["choices"][0]["delta"].get("content")
    ]


def tool_argument_pieces(sse: bytes) -> list[str]:
    return [
        call["function"]["arguments"]
        for line in sse.decode().splitlines()
        if line.startswith("data: {")
        for choice in json.loads(line[6:])["choices"]
        for call in (choice["delta"].get("tool_calls") or [])
        if call.get("function", {}).get("arguments")
    ]


def test_recorded_llamacpp_object_stream() -> None:
    """llama.cpp's own JSON-schema grammar, with its whitespace, one token per event."""
    parts = sse_contents((LLAMACPP_LIVE / "so_json_schema_stream.response.sse").read_bytes())
    assert "".join(parts).startswith("{\n")
    seen = values(parts)
    assert seen == [
        {},
        {"name": ""},
        {"name": "Person"},
        {"name": "Person"},
        {"name": "Person", "age": 100},
        {"name": "Person", "age": 100},
    ]


@pytest.mark.parametrize("name", ["tools_required_stream", "tools_named_stream"])
def test_recorded_vllm_tool_arguments(name: str) -> None:
    """vLLM streams a tool call's arguments as JSON text in pieces: the same reader shows it."""
    pieces = tool_argument_pieces((FIXTURES / "vllm" / f"{name}.response.sse").read_bytes())
    seen = values(pieces)
    assert [s["city"] for s in seen[1:]] == ["", "Os", "Oslo", "Oslo", "Oslo"]
    assert seen[-1] == json.loads("".join(pieces))
    assert all(extends(b, a) for a, b in itertools.pairwise(seen))


class Person(msgspec.Struct):
    name: str
    age: int


class Story(msgspec.Struct):
    title: str
    text: str


def replay(name: str) -> ScriptedServer:
    """A loopback server that answers with a recorded stream, an event per HTTP chunk."""
    sse = (LLAMACPP_LIVE / f"{name}.response.sse").read_bytes()
    events = [e + b"\n\n" for e in sse.split(b"\n\n") if e.strip()]
    head = (b"content-type", b"text/event-stream")
    body = chunked(*events)
    return ScriptedServer(body.replace(b"\r\n\r\n", b"\r\n%s: %s\r\n\r\n" % head, 1))


def test_recorded_stream_over_a_socket_sync() -> None:
    server = replay("so_json_schema_stream")
    try:
        with (
            lmclient.Client(server.url + "/v1", model="m", dialect="llamacpp") as client,
            client.stream("Q", Person) as s,
        ):
            seen = [snapshot.value for snapshot in s.partials()]
            assert s.value == Person("Person", 100)
    finally:
        server.stop()
    assert seen[2] == {"name": "Person"} and seen[-1] == {"name": "Person", "age": 100}


async def test_recorded_stream_over_a_socket_async() -> None:
    server = replay("so_json_schema_stream")
    try:
        async with (
            lmclient.AsyncClient(server.url + "/v1", model="m", dialect="llamacpp") as client,
            client.stream("Q", Person) as s,
        ):
            seen = [snapshot async for snapshot in s.partials()]
        assert s.value == Person("Person", 100)
    finally:
        server.stop()
    assert [x.done for x in seen] == [False] * 5 + [True] and seen[-1].value["age"] == 100


def check_story(seen: list[Partial[Story]], story: Story) -> None:
    """llama.cpp wrote the story a token at a time: the text shows growing across dozens of
    snapshots, each a longer prefix of the validated text, marked incomplete until it closed."""
    texts = [s.value["text"] for s in seen if "text" in s.value]
    assert len(set(texts)) > 40 and texts[-1] == story.text
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))
    assert all(
        ("text",) in s.incomplete for s in seen if s.value.get("text", story.text) != story.text
    )
    assert seen[-1].done and seen[-1].value == builtins(story)


def test_recorded_long_string_over_a_socket_sync() -> None:
    server = replay("partials_story_stream")
    try:
        with (
            lmclient.Client(server.url + "/v1", model="m", dialect="llamacpp") as client,
            client.stream("Q", Story) as s,
        ):
            seen = list(s.partials())
            check_story(seen, s.value)
    finally:
        server.stop()


async def test_recorded_long_string_over_a_socket_async() -> None:
    server = replay("partials_story_stream")
    try:
        async with (
            lmclient.AsyncClient(server.url + "/v1", model="m", dialect="llamacpp") as client,
            client.stream("Q", Story) as s,
        ):
            seen = [snapshot async for snapshot in s.partials()]
        check_story(seen, await s.aread())
    finally:
        server.stop()


# -- streams over sockets ----------------------------------------------------------------------


def check_growth(seen: list[Partial[Review]]) -> None:
    """Each snapshot extends the one before; the summary grows over many; the last is whole."""
    assert all(isinstance(s, lmclient.Partial) for s in seen)
    for before, after in itertools.pairwise(seen):
        assert extends(after.value, before.value)
    summaries = {s.value["summary"] for s in seen if "summary" in s.value}
    assert len(summaries) > 10 and REVIEW.summary in summaries
    assert seen[-1].value == builtins(REVIEW) and seen[-1].done


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_sync_stream_partials(endpoint: Any, fake: FakeLLM, url: str) -> None:
    fake.reply(REVIEW, chunk_size=5)
    with lmclient.Client(url) as client, client.stream("Q", Review, endpoint=endpoint) as s:
        seen = list(s.partials())
        assert s.value == REVIEW
    check_growth(seen)


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
async def test_async_stream_partials(endpoint: Any, fake: FakeLLM, url: str) -> None:
    fake.reply(REVIEW, chunk_size=5)
    async with lmclient.AsyncClient(url) as client:
        async with client.stream("Q", Review, endpoint=endpoint) as s:
            seen = [snapshot async for snapshot in s.partials()]
        assert s.value == REVIEW
    check_growth(seen)


def test_server_whitespace_padded_json(fake: FakeLLM, url: str) -> None:
    text = msgspec.json.format(msgspec.json.encode(REVIEW), indent=2).decode()
    fake.reply(text, chunk_size=3)
    with lmclient.Client(url, whitespace="server") as client, client.stream("Q", Review) as s:
        seen = list(s.partials())
        assert s.value == REVIEW and "\n" in s.text
    check_growth(seen)


def test_first_snapshot_arrives_before_the_last_chunk_is_sent() -> None:
    fake, gate = gated_fake(REVIEW)
    with (
        fake.serve() as base_url,
        lmclient.Client(base_url) as client,
        client.stream("Q", Review) as s,
    ):
        snapshots = s.partials()
        assert next(snapshots).value == {}
        second = next(snapshots).value["title"]
        assert second and REVIEW.title.startswith(second) and second != REVIEW.title
        gate.set()  # only now may the server send its last chunk
        assert list(snapshots)[-1].done


def test_an_invalid_field_raises_before_it_shows_whole(fake: FakeLLM, url: str) -> None:
    class Bounded(msgspec.Struct):
        name: str
        count: int = msgspec.field(default=0)
        small: list[int] = []

    fake.reply('{"name":"ab","small":[1,"two"],"count":3}', chunk_size=4)
    seen: list[Partial[Bounded]] = []
    with (
        lmclient.Client(url) as client,
        client.stream("Q", Bounded) as s,
        pytest.raises(errors.ValidationError, match=r"at `\$\.small\[1\]`"),
    ):
        seen.extend(s.partials())
    assert seen[-1].get("small", 0) == 1  # shown while still open
    assert not seen[-1].complete("small") and not seen[-1].complete("count")


def test_a_cut_object_shows_what_came_then_truncated_error(fake: FakeLLM, url: str) -> None:
    fake.reply('{"title":"a long title cut', finish_reason="length", chunk_size=4)
    seen: list[Partial[Review]] = []
    with (
        lmclient.Client(url) as client,
        client.stream("Q", Review) as s,
        pytest.raises(lmclient.TruncatedError),
    ):
        seen.extend(s.partials())
    assert seen[-1].value == {"title": "a long title cut"} and not seen[-1].done


def test_prose_shows_nothing_and_the_end_says_why(fake: FakeLLM, url: str) -> None:
    fake.reply("Sure! Here is a review.", chunk_size=4)
    seen: list[Partial[Review]] = []
    with (
        lmclient.Client(url) as client,
        client.stream("Q", Review) as s,
        pytest.raises(lmclient.ValidationError),
    ):
        seen.extend(s.partials())
    assert seen == []


def test_not_an_object_is_a_type_error(fake: FakeLLM, url: str) -> None:
    fake.reply([Point(1, 2)])
    with lmclient.Client(url) as client, client.stream("Q", list[Point]) as s:
        with pytest.raises(TypeError, match=r"use items\(\)"):
            s.partials()  # deliberately not an object type
        assert list(s.items()) == [Point(1, 2)]
    with lmclient.Client(url) as client:
        stream = client.stream("Q")
        with pytest.raises(TypeError, match=r"not <class 'str'>"):
            next(stream.partials())  # not entered: at the first step
        stream.close()


async def test_async_not_an_object_is_a_type_error(fake: FakeLLM, url: str) -> None:
    fake.reply("hello")
    async with lmclient.AsyncClient(url) as client, client.stream("Q") as s:
        with pytest.raises(TypeError, match=r"iterate the stream for text"):
            s.partials()
        assert "".join([d async for d in s]) == "hello"
    async with lmclient.AsyncClient(url) as client:
        stream = client.stream("Q")
        with pytest.raises(TypeError, match=r"iterate the stream for text"):
            await anext(aiter(stream.partials()))
        await stream.aclose()


def test_text_read_before_partials_still_counts(fake: FakeLLM, url: str) -> None:
    fake.reply(REVIEW, chunk_size=3)
    with lmclient.Client(url) as client, client.stream("Q", Review) as s:
        deltas = iter(s)
        head = "".join(next(deltas) for _ in range(15))
        seen = list(s.partials())
        assert head.startswith('{"title":"') and seen[0].value == {}  # from the start
        assert head[9:13] == '"A \\' and seen[1].value == {"title": "A "}  # the escape waits
        assert seen[-1].value == builtins(REVIEW)
        assert list(deltas) == []  # partials() took the rest


async def test_async_partials_after_aread_replay_from_the_start(fake: FakeLLM, url: str) -> None:
    fake.reply(REVIEW, chunk_size=7)
    async with lmclient.AsyncClient(url) as client, client.stream("Q", Review) as s:
        assert await s.aread() == REVIEW
        seen = [snapshot async for snapshot in s.partials()]
    check_growth(seen)


def test_object_progress_reads_only_new_deltas() -> None:
    progress = ObjectProgress(compile_output(Point))
    parts = ['{"x":1', ',"y":2}']
    assert [s.value for s in progress.update(parts[:1])] == [{}]
    assert [s.value for s in progress.update(parts)] == [{"x": 1, "y": 2}]
    assert list(progress.update(parts)) == []
