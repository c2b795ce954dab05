"""Streaming without sockets: Stream/AsyncStream over respx (the pure StreamState they share:
test_stream_state.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import msgspec
import pytest
import respx

import lmclient
from lmclient import errors
from tests.helpers import counted_splits, make_core, text_stream

BASE = "http://llm.test/v1"


class Person(msgspec.Struct):
    name: str
    age: int


# -- the request ------------------------------------------------------------------------------


def test_a_stream_is_subscripted_with_one_parameter_or_two_at_run_time() -> None:
    """As `Response`: its tool calls' arguments are a second parameter, left out as before."""
    assert lmclient.Stream[int] == lmclient.Stream[int, Any]
    assert lmclient.AsyncStream[str] == lmclient.AsyncStream[str, Any]
    assert lmclient.Stream[str, int] != lmclient.Stream[str]


def test_request_asks_for_usage_and_streaming() -> None:
    c = make_core().prepare("stream", "Q", str, "chat", {}, reading="stream")
    body = json.loads(c.request.body or b"")
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    tgi = make_core(dialect="tgi").prepare("stream", "Q", str, "chat", {}, reading="stream")
    assert "stream_options" not in json.loads(tgi.request.body or b"")


# -- Stream and AsyncStream over respx ------------------------------------------------------


def sse_response(raw: bytes, status: int = 200) -> httpx.Response:
    return httpx.Response(status, content=raw, headers={"content-type": "text/event-stream"})


def test_stream_text(respx_mock: respx.MockRouter) -> None:
    respx_mock.post(BASE + "/chat/completions").mock(
        return_value=sse_response(text_stream("Hello world"))
    )
    with lmclient.Client(BASE, model="m", dialect="vllm") as client, client.stream("Say hi.") as s:
        assert "".join(s) == "Hello world"
    assert (s.value, s.text, s.finish_reason) == ("Hello world", "Hello world", "stop")


def test_stream_items_and_value(respx_mock: respx.MockRouter) -> None:
    text = '[{"name": "A", "age": 1}, {"name": "B", "age": 2}]'
    respx_mock.post(BASE + "/chat/completions").mock(return_value=sse_response(text_stream(text)))
    with lmclient.Client(BASE, model="m", dialect="vllm").stream("People", list[Person]) as s:
        assert list(s.items()) == [Person("A", 1), Person("B", 2)]
    assert s.value == [Person("A", 1), Person("B", 2)]


def test_items_of_a_wrapped_array(respx_mock: respx.MockRouter) -> None:
    text = '{"value": [1, 2, 3]}'
    respx_mock.post(BASE + "/chat/completions").mock(return_value=sse_response(text_stream(text)))
    with lmclient.Client(BASE, model="m", dialect="openai").stream("N", list[int]) as s:
        assert list(s.items()) == [1, 2, 3]
    assert s.value == [1, 2, 3]


def test_malformed_item_raises_at_that_item(respx_mock: respx.MockRouter) -> None:
    text = '[{"name": "A", "age": 1}, {"name": "B", "age": "x"}]'
    respx_mock.post(BASE + "/chat/completions").mock(return_value=sse_response(text_stream(text)))
    seen: list[Person] = []
    with (
        pytest.raises(errors.ValidationError) as info,
        lmclient.Client(BASE, model="m", dialect="vllm").stream("P", list[Person]) as s,
    ):
        seen.extend(s.items())
    assert seen == [Person("A", 1)]
    assert info.value.text == '{"name": "B", "age": "x"}'


def test_one_long_item_costs_work_linear_in_its_length(respx_mock: respx.MockRouter) -> None:
    """Issue 37: one element of 150k characters in 16-character deltas, as a user streams it;
    the splitter searches each character's delta once, not the element's text so far."""
    long = "x" * 150_000
    text = json.dumps([long, "short"])
    respx_mock.post(BASE + "/chat/completions").mock(
        return_value=sse_response(text_stream(text, size=16))
    )
    with (
        counted_splits() as work,
        lmclient.Client(BASE, model="m", dialect="vllm").stream("S", list[str]) as s,
    ):
        assert list(s.items()) == [long, "short"]
    assert work.held <= len(text) and work.scanned <= len(text)


async def test_async_one_long_item_costs_work_linear_in_its_length(
    respx_mock: respx.MockRouter,
) -> None:
    long = "x" * 150_000
    text = json.dumps({"value": [long, "short"]})
    respx_mock.post(BASE + "/chat/completions").mock(
        return_value=sse_response(text_stream(text, size=16))
    )
    # (an item of one repeated character: a runaway but for runaway="off")
    async with lmclient.AsyncClient(BASE, model="m", dialect="openai", runaway="off") as client:
        with counted_splits() as work:
            async with client.stream("S", list[str]) as s:
                assert [item async for item in s.items()] == [long, "short"]
    assert work.held <= len(text) and work.scanned <= len(text)


def test_items_needs_an_array_type(respx_mock: respx.MockRouter) -> None:
    respx_mock.post(BASE + "/chat/completions").mock(return_value=sse_response(text_stream("1")))
    with (
        lmclient.Client(BASE, model="m", dialect="vllm").stream("N", int) as s,
        pytest.raises(TypeError, match="items"),
    ):
        next(iter(s.items()))  # type: ignore[misc]  # deliberately not an array type


def test_value_reads_the_rest(respx_mock: respx.MockRouter) -> None:
    respx_mock.post(BASE + "/chat/completions").mock(
        return_value=sse_response(text_stream("12345"))
    )
    with lmclient.Client(BASE, model="m", dialect="vllm").stream("N", int) as s:
        assert next(iter(s)) == "123"  # the empty role delta is not yielded
        assert s.value == 12345


def test_error_status_at_open_raises_before_iteration(respx_mock: respx.MockRouter) -> None:
    respx_mock.post(BASE + "/chat/completions").mock(
        return_value=httpx.Response(400, json={"error": {"message": "bad schema", "code": 400}})
    )
    with (
        pytest.raises(errors.BadRequestError, match="bad schema"),
        lmclient.Client(BASE, model="m", dialect="vllm").stream("Q"),
    ):
        pass


def test_stream_is_retried_before_it_yields(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(BASE + "/chat/completions").mock(
        side_effect=[
            httpx.Response(503, json={"error": "busy"}, headers={"retry-after-ms": "1"}),
            sse_response(text_stream("ok")),
        ]
    )
    with lmclient.Client(BASE, model="m", dialect="vllm").stream("Q") as s:
        assert s.read() == "ok"
    assert route.call_count == 2


def test_stream_bad_input_raises_at_once(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(BASE + "/chat/completions")
    with pytest.raises(TypeError):
        lmclient.Client(BASE, model="m", dialect="vllm").stream("Q", max_token=3)  # type: ignore[call-overload]
    assert not route.called


def test_stream_with_model_none(respx_mock: respx.MockRouter) -> None:
    respx_mock.get(BASE + "/models").mock(
        return_value=httpx.Response(200, json={"data": [{"id": "solo"}]})
    )
    route = respx_mock.post(BASE + "/chat/completions").mock(
        return_value=sse_response(text_stream("ok"))
    )
    with lmclient.Client(BASE, dialect="vllm").stream("Q") as s:
        assert s.read() == "ok"
    assert json.loads(route.calls.last.request.content)["model"] == "solo"


async def test_async_stream_text_items_and_value(respx_mock: respx.MockRouter) -> None:
    text = '[{"name": "A", "age": 1}, {"name": "B", "age": 2}]'
    respx_mock.post(BASE + "/chat/completions").mock(return_value=sse_response(text_stream(text)))
    async with lmclient.AsyncClient(BASE, model="m", dialect="vllm") as client:
        async with client.stream("People", list[Person]) as s:
            assert [p async for p in s.items()] == [Person("A", 1), Person("B", 2)]
        assert s.value == [Person("A", 1), Person("B", 2)]
        async with client.stream("Say") as s2:
            assert "".join([d async for d in s2]) == text
        assert s2.usage == lmclient.Usage(1, 2, 3)


async def test_async_value_before_the_end_says_how(respx_mock: respx.MockRouter) -> None:
    respx_mock.post(BASE + "/chat/completions").mock(return_value=sse_response(text_stream("7")))
    async with (
        lmclient.AsyncClient(BASE, model="m", dialect="vllm") as client,
        client.stream("N", int) as s,
    ):
        with pytest.raises(errors.LMClientError, match="aread"):
            _ = s.value
        assert await s.aread() == 7
