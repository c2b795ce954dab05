"""`Stream.fields()`: an object's top-level fields as they close, validated field by field.

The pure splitter and decoders first, then a property over random values and chunkings (the
snapshots grow monotonically to the final value's fields, and the work is linear in the text),
then streams over real sockets, served by `FakeLLM`."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import re
from collections.abc import Iterator
from typing import Annotated, Any, Generic, Literal, TypedDict, TypeVar

import msgspec
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typing_extensions import NotRequired

import lmclient
from lmclient import JsonSchema, errors
from lmclient._dialects import DIALECTS
from lmclient._output.types import compile_output
from lmclient._wire import partial as _partial
from lmclient._wire.partial import ObjectFields, PartialObject, fields_of
from lmclient.testing import FakeLLM
from tests.helpers import gated_fake

T = TypeVar("T")

# -- types -----------------------------------------------------------------------------------


class Point(msgspec.Struct):
    x: int
    y: int


class Record(msgspec.Struct):
    title: str
    count: Annotated[int, msgspec.Meta(ge=0)]
    tags: list[str]
    where: Point
    extra: dict[str, float]
    note: str | None
    flag: bool


class Tagged(msgspec.Struct, tag="tagged", rename="camel"):
    first_name: str
    age: int


@dataclasses.dataclass
class Pet:
    name: str
    legs: int = 4


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


class Spot(pydantic.BaseModel):
    x: int
    y: int


class Owner(pydantic.BaseModel):
    name: str = pydantic.Field(alias="Name")
    pets: list[Spot]
    score: int = pydantic.Field(ge=0)


class Box(msgspec.Struct, Generic[T]):
    item: T
    items: list[T] = []


@dataclasses.dataclass
class Crate(Generic[T]):
    item: T


RECORD = Record(
    'a "quoted", {braced} [bracketed] \\ back:slash\n',
    3,
    ["x,y", "]", "}"],
    Point(1, -2),
    {"k": 1.5, "{": -0.25},
    None,
    True,
)


def fields(value: Any) -> dict[str, Any]:
    return {f: getattr(value, f) for f in value.__struct_fields__}


def chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def snapshots(output_type: Any, parts: list[str]) -> list[dict[Any, Any]]:
    """Feed ``parts`` one delta at a time, as a stream does, and collect every snapshot."""
    partial = PartialObject(compile_output(output_type))
    out: list[dict[Any, Any]] = []
    for k in range(1, len(parts) + 1):
        out.extend(partial.update(parts[:k]))
    return out


def padded(value: Any, indent: int | None = 2, comma: str = " ,\n ", colon: str = " :\t") -> str:
    """JSON as a server's own grammar lets a model write it: whitespace around every token."""
    return json.dumps(msgspec.to_builtins(value), indent=indent, separators=(comma, colon))


# -- ObjectFields ----------------------------------------------------------------------------


def test_splitter_yields_each_field_when_its_value_closes() -> None:
    splitter = ObjectFields()
    assert splitter.feed('{"a":"x,}') == []
    assert splitter.feed('"') == [('"a"', '"x,}"')]  # a string: at its closing quote
    assert splitter.feed(',"b":[1,{"c":"]"}') == []
    assert splitter.feed("]") == [('"b"', '[1,{"c":"]"}]')]  # an array: at its bracket
    assert splitter.feed(',"n":12') == []  # a number: only once something follows it
    assert splitter.feed("3") == []
    assert not splitter.done
    assert splitter.feed("}trailing") == [('"n"', "123")]
    assert splitter.done and splitter.feed('{"z":1}') == []


def test_splitter_escapes_across_deltas() -> None:
    splitter = ObjectFields()
    out = [
        f for piece in ['{"k\\', '"ey":"a\\', "\\", '"', ',"b":null}'] for f in splitter.feed(piece)
    ]
    assert out == [('"k\\"ey"', '"a\\\\"'), ('"b"', "null")]


def test_splitter_whitespace_everywhere() -> None:
    text = ' \n{ "a" :\n 1 ,\n\t"b"\n:  [ 1 , 2 ]  ,  "c" : { }\n, "d":true }'
    assert ObjectFields().feed(text) == [
        ('"a"', "1"),
        ('"b"', "[ 1 , 2 ]"),
        ('"c"', "{ }"),
        ('"d"', "true"),
    ]


def test_splitter_empty_object_and_cut_text() -> None:
    empty = ObjectFields()
    assert empty.feed("{}") == [] and empty.done
    cut = ObjectFields()
    assert cut.feed('{"a":1,"b":"unfinished') == [('"a"', "1")] and not cut.done


# -- PartialObject: decoding and validating each field --------------------------------------


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
@pytest.mark.parametrize("pretty", [False, True])
def test_struct_snapshots(size: int, pretty: bool) -> None:
    text = padded(RECORD) if pretty else msgspec.json.encode(RECORD).decode()
    seen = snapshots(Record, chunks(text, size))
    names = list(Record.__struct_fields__)
    assert [list(s) for s in seen] == [names[: i + 1] for i in range(len(names))]
    assert seen[-1] == fields(RECORD)
    assert isinstance(seen[-1]["where"], Point)


def test_struct_tag_is_left_out_and_names_are_attributes() -> None:
    text = msgspec.json.encode(Tagged("Ada", 36)).decode()
    assert text.startswith('{"type":"tagged","firstName"')
    assert snapshots(Tagged, [text]) == [{"first_name": "Ada"}, {"first_name": "Ada", "age": 36}]


def test_dataclass_typeddict_and_unknown_keys() -> None:
    assert snapshots(Pet, ['{"name":"Rex","color":"red","legs":3}']) == [
        {"name": "Rex"},
        {"name": "Rex", "legs": 3},  # "color" is not a field: no snapshot
    ]
    assert snapshots(Movie, ['{"title":"Up","year":2009}'])[-1] == {"title": "Up", "year": 2009}


def test_escaped_keys_and_a_key_written_twice() -> None:
    assert snapshots(Point, ['{"\\u0078":1,"y":2,"x":3}']) == [
        {"x": 1},
        {"x": 1, "y": 2},
        {"x": 3, "y": 2},  # the later value, as decoding takes it
    ]
    assert msgspec.json.decode('{"x":1,"y":2,"x":3}', type=Point) == Point(3, 2)
    assert snapshots(dict[str, int], ['{"a\\"b":1}']) == [{'a"b': 1}]


def test_generic_types_take_their_arguments() -> None:
    assert snapshots(Box[int], ['{"item":1,"items":[2]}'])[-1] == {"item": 1, "items": [2]}
    assert snapshots(Crate[Point], ['{"item":{"x":1,"y":2}}']) == [{"item": Point(1, 2)}]
    with pytest.raises(errors.ValidationError, match=r"Expected `int`, got `str` - at `\$\.item`"):
        snapshots(Box[int], ['{"item":"one",'])


def test_dict_keys_and_values_are_decoded_as_the_dict_type() -> None:
    assert snapshots(dict[int, float], ['{"1":1,"2":2.5}']) == [{1: 1.0}, {1: 1.0, 2: 2.5}]
    bounded = Annotated[dict[str, int], msgspec.Meta(min_length=2)]
    assert snapshots(bounded, ['{"a":1,', '"b":2}']) == [{"a": 1}, {"a": 1, "b": 2}]


def test_pydantic_fields_by_alias() -> None:
    text = '{"Name":"Ann","pets":[{"x":1,"y":2}],"score":5}'
    assert snapshots(Owner, [text])[-1] == {"name": "Ann", "pets": [Spot(x=1, y=2)], "score": 5}
    with pytest.raises(errors.ValidationError, match=r"at `\$\.score`"):
        snapshots(Owner, ['{"score":-1,'])


def test_json_schema_properties_patterns_and_additional() -> None:
    schema = JsonSchema(
        {
            "type": "object",
            "properties": {"n": {"$ref": "#/$defs/Natural"}},
            "patternProperties": {"^x_": {"type": "string"}},
            "additionalProperties": False,
            "$defs": {"Natural": {"type": "integer", "minimum": 0}},
        }
    )
    assert snapshots(schema, ['{"n":1,"x_a":"s","other":2}']) == [
        {"n": 1},
        {"n": 1, "x_a": "s"},  # "other" is forbidden: left out (the end says why)
    ]
    with pytest.raises(errors.ValidationError, match=r"at `\$\.n`"):
        snapshots(schema, ['{"n":-1,'])
    with pytest.raises(errors.ValidationError, match=r"got `array` - at `\$\.x_b`"):
        snapshots(schema, ['{"x_b":[1],'])
    open_schema = JsonSchema({"type": "object", "additionalProperties": {"type": "integer"}})
    assert snapshots(open_schema, ['{"a":1,"b":2}'])[-1] == {"a": 1, "b": 2}
    typed = JsonSchema({"type": "object"}, type=Point)
    assert snapshots(typed, ['{"x":1,"y":2}'])[-1] == {"x": 1, "y": 2}


def test_an_invalid_field_raises_with_its_path_and_the_output_type() -> None:
    with pytest.raises(errors.ValidationError) as info:
        snapshots(Record, ['{"title":"t","where":{"x":1,"y":"no"},'])
    assert info.value.output_type is Record
    assert info.value.detail == "Expected `int`, got `str` - at `$.where.y`"
    assert info.value.text == '{"x":1,"y":"no"}'


def test_whole_fieldsare_independent_dicts() -> None:
    first, second = snapshots(Point, ['{"x":1,"y":2}'])
    first["x"] = 99
    assert second == {"x": 1, "y": 2}


def test_decoders_are_built_once_per_type() -> None:
    spec = compile_output(Record)
    assert fields_of(spec) is fields_of(spec)


@pytest.mark.parametrize(
    "output_type",
    [list[Point], str, int, Point | None, Literal["a", "b"], JsonSchema({"type": "array"})],
)
def test_not_an_object_is_a_type_error(output_type: Any) -> None:
    with pytest.raises(TypeError, match=r"use items\(\) for a list, or iterate"):
        PartialObject(compile_output(output_type))


@pytest.mark.parametrize("name", sorted(DIALECTS))
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_object_outputs_are_never_wrapped(name: str, endpoint: Any) -> None:
    """Dialects that need an object root wrap other types in ``{"value": …}``; an object is sent
    as itself, so `fields()` reads the fields of the root object on every dialect."""
    for compact in (False, True):
        try:
            plan = DIALECTS[name].plan(compile_output(Record), endpoint, compact=compact)
        except lmclient.UnsupportedConstraintError:
            continue
        assert not plan.wrapped


# -- the property: monotone snapshots, the final fields, linear work ------------------------


class Counting:
    """A compiled pattern that counts its searches and the characters they pass over."""

    def __init__(self, pattern: re.Pattern[str], tally: dict[str, int]) -> None:
        self.pattern = pattern
        self.tally = tally

    def search(self, text: str, pos: int) -> re.Match[str] | None:
        m = self.pattern.search(text, pos)
        self.tally["searches"] += 1
        self.tally["scanned"] += (len(text) if m is None else m.end()) - pos
        return m


@contextlib.contextmanager
def counted() -> Iterator[dict[str, int]]:
    """Every regex search the splitter makes, and every value text it hands to a decoder."""
    tally = {"searches": 0, "scanned": 0, "decoded": 0}
    names = [n for n, v in vars(_partial).items() if isinstance(v, re.Pattern)]
    feed = ObjectFields.feed

    def counting_feed(self: ObjectFields, delta: str) -> list[tuple[str, str]]:
        out = feed(self, delta)
        tally["decoded"] += sum(len(key) + len(value) for key, value in out)
        return out

    with pytest.MonkeyPatch.context() as mp:
        for name in names:
            mp.setattr(_partial, name, Counting(getattr(_partial, name), tally))
        mp.setattr(ObjectFields, "feed", counting_feed)
        yield tally


texts = st.text(st.characters(codec="utf-8"), max_size=12)
floats = st.floats(allow_nan=False, allow_infinity=False)
records = st.builds(
    Record,
    title=texts,
    count=st.integers(min_value=0),
    tags=st.lists(texts, max_size=3),
    where=st.builds(Point, x=st.integers(), y=st.integers()),
    extra=st.dictionaries(texts, floats, max_size=3),
    note=st.none() | texts,
    flag=st.booleans(),
)
layouts = st.sampled_from(["compact", "indented", "padded"])


def encode(value: Record, layout: str) -> str:
    if layout == "compact":
        return msgspec.json.encode(value).decode()
    if layout == "indented":
        return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()
    return padded(value, indent=None, comma=" ,  ", colon="\n:\n")


@settings(max_examples=150, deadline=None)
@given(value=records, layout=layouts, data=st.data())
def test_whole_fieldsgrow_to_the_final_fields_in_linear_work(
    value: Record, layout: str, data: st.DataObject
) -> None:
    text = encode(value, layout)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=40)))
    parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    with counted() as tally:
        seen = snapshots(Record, parts)
    for before, after in itertools.pairwise(seen):
        assert len(after) == len(before) + 1 and after.items() >= before.items()
    assert seen[-1] == fields(msgspec.json.decode(text, type=Record)) == fields(value)
    # Linear: every character is passed over by at most one search, each search consumes a
    # character or ends a delta, and each field's text is decoded once.
    assert tally["scanned"] <= len(text)
    assert tally["searches"] <= len(text) + len(parts)
    assert tally["decoded"] <= len(text)


def test_work_does_not_grow_with_the_number_of_deltas() -> None:
    """One long field delivered a character at a time: no re-scan of what came before."""
    value = Record("x" * 5000, 1, ["y" * 3000], Point(1, 2), {}, "z" * 2000, False)
    text = msgspec.json.encode(value).decode()
    partial = PartialObject(compile_output(Record))
    parts: list[str] = []
    with counted() as tally:
        for c in text:
            parts.append(c)
            out = list(partial.update(parts))
    assert out[-1] == fields(value)
    assert tally["scanned"] <= len(text) and tally["searches"] <= 2 * len(text)


# -- streams over sockets ---------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_sync_stream_fields(endpoint: Any, fake: FakeLLM, url: str) -> None:
    fake.reply(RECORD, chunk_size=5)
    with lmclient.Client(url) as client, client.stream("Q", Record, endpoint=endpoint) as s:
        seen = list(s.fields())
        assert s.value == RECORD
    assert len(seen) == len(Record.__struct_fields__) and seen[-1] == fields(RECORD)
    assert fake.last_request.stream and fake.last_request.endpoint == endpoint


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
async def test_async_stream_fields(endpoint: Any, fake: FakeLLM, url: str) -> None:
    fake.reply(RECORD, chunk_size=5)
    async with lmclient.AsyncClient(url) as client:
        async with client.stream("Q", Record, endpoint=endpoint) as s:
            seen = [snapshot async for snapshot in s.fields()]
        assert s.value == RECORD
    assert len(seen) == len(Record.__struct_fields__) and seen[-1] == fields(RECORD)


def test_server_whitespace_padded_json(fake: FakeLLM, url: str) -> None:
    fake.reply(padded(RECORD), chunk_size=3)
    with lmclient.Client(url, whitespace="server") as client, client.stream("Q", Record) as s:
        assert list(s.fields())[-1] == fields(RECORD)
        assert s.value == RECORD and "\n" in s.text


def test_first_snapshot_arrives_before_the_last_chunk_is_sent() -> None:
    """The server is held at a gate before its last chunk; a snapshot must already be out."""
    fake, gate = gated_fake(RECORD)
    with (
        fake.serve() as base_url,
        lmclient.Client(base_url) as client,
        client.stream("Q", Record) as s,
    ):
        whole_fields = s.fields()
        assert next(whole_fields) == {"title": RECORD.title}
        gate.set()  # only now may the server send its last chunk
        assert list(whole_fields)[-1] == fields(RECORD)


def test_an_invalid_field_raises_at_that_field(fake: FakeLLM, url: str) -> None:
    fake.reply('{"title":"t","count":-1,"tags":[]}', chunk_size=4)
    seen: list[dict[str, Any]] = []
    with (
        lmclient.Client(url) as client,
        client.stream("Q", Record) as s,
        pytest.raises(errors.ValidationError, match=r">= 0 - at `\$\.count`"),
    ):
        seen.extend(s.fields())
    assert seen == [{"title": "t"}]


def test_a_cut_object_yields_its_complete_fields_then_truncated_error(
    fake: FakeLLM, url: str
) -> None:
    fake.reply('{"title":"t","count":12', finish_reason="length", chunk_size=4)
    seen: list[dict[str, Any]] = []
    with (
        lmclient.Client(url) as client,
        client.stream("Q", Record) as s,
        pytest.raises(lmclient.TruncatedError),
    ):
        seen.extend(s.fields())
    assert seen == [{"title": "t"}]  # "count" may have been cut mid-number: not given


def test_not_an_object_is_a_type_error_at_the_call(fake: FakeLLM, url: str) -> None:
    fake.reply([Point(1, 2)])
    with lmclient.Client(url) as client, client.stream("Q", list[Point]) as s:
        with pytest.raises(TypeError, match=r"use items\(\)"):
            s.fields()  # deliberately not an object type
        assert list(s.items()) == [Point(1, 2)]  # the stream is still usable


def test_not_entered_opens_at_the_first_step(fake: FakeLLM, url: str) -> None:
    fake.reply(Point(1, 2))
    with lmclient.Client(url) as client:
        stream = client.stream("Q", Point)
        whole_fields = stream.fields()
        assert not fake.calls  # nothing sent yet
        assert list(whole_fields) == [{"x": 1}, {"x": 1, "y": 2}]
        stream.close()
        text_stream = client.stream("Q")
        with pytest.raises(TypeError, match=r"not <class 'str'>"):
            next(text_stream.fields())
        text_stream.close()


# -- mixing fields() with text iteration ----------------------------------------------------


def test_text_read_before_fields_still_counts(fake: FakeLLM, url: str) -> None:
    """Deltas go to whichever iterator asks; the snapshots are built from all the text."""
    fake.reply(RECORD, chunk_size=3)
    with lmclient.Client(url) as client, client.stream("Q", Record) as s:
        deltas = iter(s)
        head = "".join(next(deltas) for _ in range(15))
        assert len(head) == 45
        seen = list(s.fields())
        assert seen[-1] == fields(RECORD) and len(seen) == len(Record.__struct_fields__)
        assert list(deltas) == []  # fields() took the rest
        assert s.value == RECORD


def test_break_iterate_text_then_fields_again(fake: FakeLLM, url: str) -> None:
    fake.reply(RECORD, chunk_size=3)
    text = msgspec.json.encode(RECORD).decode()
    with lmclient.Client(url) as client, client.stream("Q", Record) as s:
        for snapshot in s.fields():
            assert snapshot == {"title": RECORD.title}
            break
        rest = "".join(s)  # the deltas fields() has not taken
        assert rest and text.endswith(rest) and s.text == text
        again = list(s.fields())  # every snapshot again, from the first field
        assert again[0] == {"title": RECORD.title} and again[-1] == fields(RECORD)


async def test_async_fields_after_aread_replays_every_snapshot(fake: FakeLLM, url: str) -> None:
    fake.reply(RECORD, chunk_size=7)
    async with lmclient.AsyncClient(url) as client, client.stream("Q", Record) as s:
        assert await s.aread() == RECORD
        seen = [snapshot async for snapshot in s.fields()]
    assert len(seen) == len(Record.__struct_fields__) and seen[-1] == fields(RECORD)


async def test_async_not_an_object_is_a_type_error_at_the_call(fake: FakeLLM, url: str) -> None:
    fake.reply("hello")
    async with lmclient.AsyncClient(url) as client, client.stream("Q") as s:
        with pytest.raises(TypeError, match=r"iterate the stream for text"):
            s.fields()
        assert "".join([d async for d in s]) == "hello"
