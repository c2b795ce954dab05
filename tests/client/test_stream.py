"""Streaming without sockets: the pure StreamState, and Stream/AsyncStream over respx."""

from __future__ import annotations

import json
from typing import Any

import httpx
import msgspec
import pytest
import respx

import lmclient
from lmclient import _stream_state, errors
from tests.helpers import EXAMPLES, make_core

BASE = "http://llm.test/v1"


class Person(msgspec.Struct):
    name: str
    age: int


def events(*chunks: Any, done: bool = True) -> bytes:
    out = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return out + (b"data: [DONE]\n\n" if done else b"")


def delta(content: str | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {} if content is None else {"content": content}
    d.update(extra)
    return {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
    }


def text_stream(text: str, size: int = 3, finish: str = "stop", usage: bool = True) -> bytes:
    parts = [delta("", role="assistant")]
    parts += [delta(text[i : i + size]) for i in range(0, len(text), size)]
    parts.append(delta(finish=finish))
    if usage:
        parts.append(
            {
                "choices": [],
                "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
            }
        )
    return events(*parts)


def state(output_type: Any = str, endpoint: Any = "chat") -> _stream_state.StreamState:
    return _stream_state.StreamState(
        make_core().prepare("stream", "Q", output_type, endpoint, {}, stream=True)
    )


def run(st: _stream_state.StreamState, raw: bytes) -> list[str]:
    return st.feed(raw) + st.end()


# -- StreamState ----------------------------------------------------------------------------


def test_deltas_text_usage_and_value() -> None:
    st = state(list[Person])
    deltas = run(st, text_stream('[{"name": "A", "age": 1}]'))
    assert "".join(deltas) == '[{"name": "A", "age": 1}]'
    assert st.finish_reason == "stop" and st.usage == lmclient.Usage(1, 2, 3)
    assert st.events == 13
    assert st.result().value == [Person("A", 1)]


def test_request_asks_for_usage_and_streaming() -> None:
    c = make_core().prepare("stream", "Q", str, "chat", {}, stream=True)
    body = json.loads(c.request.body or b"")
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    tgi = make_core(dialect="tgi").prepare("stream", "Q", str, "chat", {}, stream=True)
    assert "stream_options" not in json.loads(tgi.request.body or b"")


def test_reference_vllm_stream_deltas() -> None:
    st = state()
    assert st.feed((EXAMPLES / "vllm_chat_stream_chunks.sse").read_bytes()) == [" .", "<think>"]
    with pytest.raises(errors.ProtocolError, match=r"\[DONE\]"):
        st.end()  # the excerpt is cut: no [DONE], no finish_reason


def test_reference_llamacpp_pings_are_ignored() -> None:
    st = state()
    assert st.feed((EXAMPLES / "llamacpp_chat_stream_with_pings.sse").read_bytes()) == []
    assert st.events == 1


def test_completions_chunks() -> None:
    st = state(int, "completions")
    chunk = {"choices": [{"index": 0, "text": "4", "finish_reason": None}]}
    end = {"choices": [{"index": 0, "text": "2", "finish_reason": "stop"}]}
    assert run(st, events(chunk, end)) == ["4", "2"]
    assert st.result().value == 42


@pytest.mark.parametrize(
    ("event", "cls"),
    [
        (
            {
                "error": {
                    "message": "boom",
                    "type": "InternalServerError",
                    "param": None,
                    "code": 500,
                }
            },
            errors.ServerError,
        ),
        (
            {
                "error": {
                    "object": "error",
                    "message": "bad grammar",
                    "type": "BadRequestError",
                    "code": 400,
                }
            },
            errors.BadRequestError,
        ),
        (
            {"error": {"code": 400, "message": "ctx", "type": "exceed_context_size_error"}},
            errors.BadRequestError,
        ),
        (
            {"error": "Request failed during generation", "error_type": "generation"},
            errors.ServerError,
        ),
    ],
)
def test_error_events_raise_the_right_class(event: Any, cls: type[errors.APIError]) -> None:
    st = state()
    with pytest.raises(cls) as info:
        run(st, events(delta("a"), event))
    assert info.value.message in json.dumps(event)


def test_legacy_llamacpp_error_field() -> None:
    with pytest.raises(errors.BadRequestError, match="context size"):
        run(state(), (EXAMPLES / "llamacpp_stream_error_legacy_pre_pr16109.sse").read_bytes())


def test_stream_without_done_but_with_finish_reason_is_complete() -> None:
    st = state()
    run(st, events(delta("hi"), delta(finish="stop"), done=False))
    assert st.result().value == "hi"


def test_bytes_after_done_are_ignored() -> None:
    st = state()
    run(st, text_stream("ok") + b"data: {not json\n\n")
    assert st.result().value == "ok"


def test_bad_event_json_is_a_protocol_error_with_the_bytes() -> None:
    with pytest.raises(errors.ProtocolError) as info:
        run(state(), b"data: {oops\n\n")
    assert info.value.body == b"{oops"


def test_truncated_stream_raises_truncated_error_at_the_end() -> None:
    st = state(Person)
    run(st, text_stream('{"name": "A', finish="length"))
    with pytest.raises(errors.TruncatedError):
        st.result()


def test_refusal_delta() -> None:
    st = state(int)
    run(st, events(delta(refusal="No."), delta(finish="stop")))
    with pytest.raises(errors.RefusalError, match=r"No\."):
        st.result()


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
