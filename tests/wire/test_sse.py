"""The pure incremental decoders: SSE events and JSON-array items, under any chunking."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmclient._wire.sse import ArrayItems, ServerSentEvent, SSEDecoder
from tests.helpers import EXAMPLES, counted_splits

SSE_FILES = sorted(EXAMPLES.glob("*.sse"))


def decode_all(data: bytes, cuts: list[int] | None = None) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    last = 0
    for cut in sorted(set(cuts or [])):
        events += decoder.feed(data[last:cut])
        last = cut
    events += decoder.feed(data[last:])
    return events + decoder.close()


def test_reference_streams_decode() -> None:
    assert len(SSE_FILES) >= 4
    counts = {p.name: len(decode_all(p.read_bytes())) for p in SSE_FILES}
    assert counts == {
        "llamacpp_chat_stream_with_pings.sse": 1,  # three ":" pings dropped
        "llamacpp_stream_error_legacy_pre_pr16109.sse": 2,  # the error field, then [DONE]
        "sglang_chat_stream_chunks.sse": 2,
        "vllm_chat_stream_chunks.sse": 3,
        "ollama_chat_tool_calls_stream.sse": 5,  # tool calls: tests/test_tools.py decodes them
        "ollama_0.20_chat_tool_calls_stream_index_reused.sse": 5,
        "openai_chat_tool_calls_stream.sse": 10,
        "sglang_chat_tool_calls_stream.sse": 11,
        "vllm_chat_tool_calls_stream.sse": 23,
    }
    legacy = decode_all((EXAMPLES / "llamacpp_stream_error_legacy_pre_pr16109.sse").read_bytes())
    assert legacy[0].event == "error" and json.loads(legacy[0].data)["code"] == 400
    assert legacy[1].data == b"[DONE]"


@pytest.mark.parametrize("path", SSE_FILES, ids=lambda p: p.name)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_split_of_a_recorded_stream_gives_the_same_events(
    path: Any, data: st.DataObject
) -> None:
    raw = path.read_bytes()
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=40))
    assert decode_all(raw, cuts) == decode_all(raw)


def test_one_byte_at_a_time() -> None:
    raw = b"".join(p.read_bytes() for p in SSE_FILES)
    assert decode_all(raw, list(range(len(raw)))) == decode_all(raw)


_line_end = st.sampled_from([b"\n", b"\r\n", b"\r"])
_value = st.binary(max_size=20).filter(lambda b: b"\n" not in b and b"\r" not in b)


@st.composite
def sse_streams(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """A stream with random line ends, comments and data-colon spacing; the expected data."""
    out = b""
    expected: list[bytes] = []
    end = draw(_line_end)  # one style per stream: "\r" then "\n" would be one CRLF
    for _ in range(draw(st.integers(0, 6))):
        lines = draw(st.lists(_value, min_size=1, max_size=3))
        for line in lines:
            if draw(st.booleans()):
                out += b":" + draw(_value) + end  # a comment anywhere
            spaced = draw(st.booleans()) or line.startswith(b" ")  # one space is the separator
            out += (b"data: " if spaced else b"data:") + line + end
        out += end
        expected.append(b"\n".join(lines))
    return out, expected


@pytest.mark.slow  # 300 generated examples: seconds
@settings(max_examples=300, deadline=None)
@given(stream=sse_streams(), data=st.data())
def test_generated_streams_any_split(
    stream: tuple[bytes, list[bytes]], data: st.DataObject
) -> None:
    raw, expected = stream
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=20))
    assert [e.data for e in decode_all(raw, cuts)] == expected


def test_cr_then_lf_across_chunks_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\n\r") == []
    assert decoder.feed(b"\n") == [ServerSentEvent(b"a")]


def test_event_without_blank_line_at_eof_is_kept() -> None:
    assert decode_all(b"data: [DONE]") == [ServerSentEvent(b"[DONE]")]
    assert decode_all(b"") == []
    assert decode_all(b": only a comment\n\n") == []


def test_fields_other_than_data_are_ignored() -> None:
    raw = b"id: 1\nretry: 5\nevent: message\nfoo: bar\ndata: x\n\n"
    assert decode_all(raw) == [ServerSentEvent(b"x", "message")]


# -- array items -------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


def split_items(text: str, cuts: list[int]) -> list[Any]:
    splitter = ArrayItems()
    items: list[str] = []
    last = 0
    for cut in sorted(set(cuts)):
        items += splitter.feed(text[last:cut])
        last = cut
    items += splitter.feed(text[last:])
    return [json.loads(i) for i in items]


@pytest.mark.slow  # 300 generated examples: seconds
@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(json_values, max_size=6),
    wrapped=st.booleans(),
    indent=st.sampled_from([None, 1]),
    data=st.data(),
)
def test_items_under_any_split(
    items: list[Any], wrapped: bool, indent: int | None, data: st.DataObject
) -> None:
    document: Any = {"value": items} if wrapped else items
    text = json.dumps(document, indent=indent, ensure_ascii=bool(data.draw(st.booleans())))
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=30))
    with counted_splits() as work:
        assert split_items(text, cuts) == items
    # Linear: each character is passed over by at most one search and is in one searched
    # string (its delta), and each search consumes a character or ends a delta.
    assert work.scanned <= len(text) and work.held <= len(text)
    assert work.searches <= len(text) + len(cuts) + 1


@pytest.mark.parametrize(
    "element",
    [
        json.dumps("x" * 200_000),  # one long string
        json.dumps('a\\"],[{' * 20_000),  # escapes and brackets inside it
        json.dumps([[i, {"k": [i]}] for i in range(10_000)]),  # nesting: commas inside it
    ],
    ids=["string", "escapes", "nested"],
)
def test_one_long_element_in_small_deltas_is_linear_work(element: str) -> None:
    """Issue 37: the splitter added each delta to the element's text so far and searched that
    from where it had stopped, so an element of n characters in 16-character deltas copied
    n²/32 characters (2M characters: 47 s). Now each delta is searched alone and the element's
    pieces are joined once."""
    text = f'{{"value": [{element}, 1]}}'
    parts = [text[i : i + 16] for i in range(0, len(text), 16)]
    splitter = ArrayItems()
    items: list[str] = []
    with counted_splits() as work:
        for part in parts:
            items += splitter.feed(part)
    assert items == [element, "1"] and splitter.done
    assert work.held <= len(text) and work.scanned <= len(text)
    assert work.searches <= len(text) + len(parts)


def test_nothing_is_kept_but_the_open_element() -> None:
    """Text before the array and after an element closed is not carried into later deltas."""
    splitter = ArrayItems()
    assert splitter.feed("prose " * 1000) == []
    assert splitter.feed('{"value": [') == []
    assert splitter.feed('"ab", "c') == ['"ab"']
    with counted_splits() as work:
        assert splitter.feed('d"]') == ['"cd"']
    assert work.held == len('d"]')
    assert splitter.done and splitter.feed("[1, 2]") == []


def test_items_are_yielded_as_soon_as_they_close() -> None:
    splitter = ArrayItems()
    assert splitter.feed('[{"a": "],[{"}') == []
    assert splitter.feed(", ") == ['{"a": "],[{"}']
    assert splitter.feed("12") == []
    assert splitter.feed("3]") == ["123"]
    assert splitter.done
    assert splitter.feed(", 4]") == []


def test_escaped_backslash_before_quote_across_chunks() -> None:
    splitter = ArrayItems()
    assert splitter.feed('["a\\') == []
    assert splitter.feed('\\", "b\\') == ['"a\\\\"']
    assert splitter.feed('"c"]') == ['"b\\"c"']
