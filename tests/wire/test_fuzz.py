"""Every pure decoder fed arbitrary bytes raises only lmclient exceptions: never KeyError,
IndexError, UnicodeDecodeError, RecursionError or anything else that would leak past a caller's
``except lmclient.LMClientError``."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lmclient
from lmclient import _stream_state
from lmclient._dialects import Endpoint
from lmclient._wire.progressive import JsonProgress
from lmclient._wire.sse import ArrayItems, SSEDecoder
from tests.helpers import make_core

pytestmark = pytest.mark.slow  # hundreds of generated inputs per test: seconds


class Person(msgspec.Struct):
    name: str
    age: int


OUTPUT_TYPES: list[Any] = [str, int, Person, list[Person], lmclient.Regex("[a-z]+"), Any]

# Bytes that look like what servers send, mutated: JSON fragments, SSE framing, deep nesting.
json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "choices",
                    "message",
                    "content",
                    "delta",
                    "error",
                    "usage",
                    "text",
                    "finish_reason",
                    "index",
                    "code",
                    "message",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
).map(lambda v: json.dumps(v).encode())
noise = st.one_of(
    st.binary(max_size=300),
    json_like,
    st.builds(lambda n: b"[" * n, st.integers(1000, 20000)),
    st.builds(lambda n: b'{"a":' * n, st.integers(1000, 5000)),
    st.sampled_from(
        [b"\xff\xfe", b'{"choices": [{"message": {"content": "\xff"}}]}', b"data: \xc3\n\n"]
    ),
)


@settings(max_examples=400, deadline=None)
@given(body=noise, status=st.sampled_from([200, 400, 401, 404, 429, 500, 503, 418]), data=st.data())
def test_response_bodies_and_error_envelopes(body: bytes, status: int, data: st.DataObject) -> None:
    output_type = data.draw(st.sampled_from(OUTPUT_TYPES))
    endpoint: Endpoint = data.draw(st.sampled_from(["chat", "completions"]))
    call = make_core().prepare("create", "Q", output_type, endpoint, {})
    try:
        call.finish(
            status, {"retry-after": data.draw(st.sampled_from(["1", "x", "Tue, 99 Foo"]))}, body
        )
    except lmclient.LMClientError:
        pass


@settings(max_examples=400, deadline=None)
@given(chunks=st.lists(noise, max_size=6), data=st.data())
def test_sse_and_stream_state(chunks: list[bytes], data: st.DataObject) -> None:
    output_type = data.draw(st.sampled_from(OUTPUT_TYPES))
    state = _stream_state.StreamState(
        make_core().prepare("stream", "Q", output_type, "chat", {}, reading="stream")
    )
    framed = [b"data: " + c + b"\n\n" if data.draw(st.booleans()) else c for c in chunks]
    try:
        for chunk in framed:
            state.feed(chunk)
        state.end()
        state.result()
    except lmclient.LMClientError:
        pass


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(st.binary(max_size=200), max_size=8))
def test_sse_decoder_never_fails(chunks: list[bytes]) -> None:
    decoder = SSEDecoder()
    for chunk in chunks:
        decoder.feed(chunk)
    decoder.close()


@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(st.text(alphabet='[]{}",\\: ab1\n', max_size=30), max_size=8))
def test_array_item_splitter_never_fails(pieces: list[str]) -> None:
    splitter = ArrayItems()
    decode = msgspec.json.Decoder(int)
    for piece in pieces:
        for item in splitter.feed(piece):
            try:
                decode.decode(item)
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass  # the stream turns these into lmclient.ValidationError


@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(st.text(alphabet='[]{}",\\:u0dD8e ab1tn\n-.', max_size=30), max_size=8))
def test_progressive_reader_never_fails(pieces: list[str]) -> None:
    """Any text: snapshots of plain JSON values, or the reader stops (`broken`), never an error;
    a snapshot marked done shows exactly the JSON its text decodes to."""
    reader = JsonProgress(4)
    fed = ""
    for piece in pieces:
        fed += piece
        snapshot = reader.feed(piece)
        if snapshot is not None:
            assert isinstance(snapshot.value, dict) and snapshot.get() == snapshot.value
            if snapshot.done:
                whole, _ = json.JSONDecoder().raw_decode(fed.lstrip(" \t\n\r"))
                assert snapshot.value == whole


def test_deep_nesting_is_a_typed_error() -> None:
    deep = b"[" * 50_000
    call = make_core().prepare("create", "Q", Any, "chat", {})
    body = json.dumps(
        {"choices": [{"message": {"content": deep.decode()}, "finish_reason": "stop"}]}
    )
    try:
        call.finish(200, {}, body.encode())
    except lmclient.ValidationError as exc:
        assert "recursion" in exc.detail or "deep" in exc.detail
    else:
        raise AssertionError("50,000 levels of nesting decoded")
    try:
        call.finish(200, {}, b"[" * 50_000)
    except lmclient.ProtocolError:
        pass
