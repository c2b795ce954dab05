"""A stream's pure state (`lmclient._stream_state`): SSE bytes in, content deltas out, the
validated `Response` at the end; error events inside a 200 stream; reasoning and tool-call
deltas; what a stream keeps for `raw` and ``metrics``. The shells that pull the bytes:
test_stream.py."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

import lmclient
from lmclient import _stream_state, errors
from tests.helpers import EXAMPLES, delta, events, make_core, text_stream


class Person(msgspec.Struct):
    name: str
    age: int


def state(output_type: Any = str, endpoint: Any = "chat") -> _stream_state.StreamState:
    return _stream_state.StreamState(
        make_core().prepare("stream", "Q", output_type, endpoint, {}, reading="stream")
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


# -- what else a stream carries ----------------------------------------------------------------


def test_only_choice_0_is_followed_and_the_id_and_model_are_kept() -> None:
    st = state()
    other = {"id": "c1", "choices": [{"index": 1, "delta": {"content": "no"}}]}
    first = {"id": "c1", "model": "m1", "choices": [{"index": 0, "delta": {"content": "yes"}}]}
    last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    assert run(st, events(other, first, last)) == ["yes"]
    response = st.result()
    assert (response.value, response.id, response.model) == ("yes", "c1", "m1")
    assert st.parts == ["yes"] and st.text == "yes"


def test_reasoning_deltas_are_kept_and_tagged_in_arrival_order() -> None:
    st = state()
    content = st.feed(
        events(
            delta(reasoning="think "),
            delta("A"),
            delta(reasoning_content="more"),
            delta("B"),
            delta(finish="stop"),
        )
    )
    assert content == ["A", "B"]
    assert st.tagged(content) == [
        ("reasoning", "think "),
        ("content", "A"),
        ("reasoning", "more"),
        ("content", "B"),
    ]
    assert st.tagged([]) == []  # each reasoning delta handed out once
    assert st.reasoning == "think more"
    st.end()
    assert st.result().reasoning == "think more"


def test_tool_call_deltas_assemble_per_index_and_close_one_after_another() -> None:
    st = state()
    call = {"id": "call-1", "type": "function", "function": {"name": "f", "arguments": ""}}
    st.feed(events(delta(tool_calls=[{"index": 0, **call}]), done=False))
    st.feed(
        events(delta(tool_calls=[{"index": 0, "function": {"arguments": '{"a":'}}]), done=False)
    )
    assert st.closed_calls() == []  # the newest call may still grow
    second = {"index": 1, "id": "call-2", "function": {"name": "g", "arguments": "{}"}}
    st.feed(
        events(
            delta(tool_calls=[{"index": 0, "function": {"arguments": "1}"}}, second]), done=False
        )
    )
    closed = st.closed_calls()
    assert [(c.id, c.function.name, c.function.arguments) for c in closed] == [
        ("call-1", "f", '{"a":1}')
    ]
    st.feed(events(delta(finish="tool_calls"), done=False))
    assert [c.id for c in st.closed_calls()] == ["call-2"]
    assert st.closed_calls() == []


def test_a_reused_index_with_a_new_id_is_a_new_call() -> None:
    """Ollama 0.20 numbers every streamed call 0 (ollama/ollama#15457)."""
    st = state()
    first = {"index": 0, "id": "a", "function": {"name": "f", "arguments": {"x": 1}}}
    second = {"index": 0, "id": "b", "function": {"name": "g", "arguments": "{}"}}
    run(st, events(delta(tool_calls=[first]), delta(tool_calls=[second]), delta(finish="stop")))
    calls = st.closed_calls()
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("a", "f", '{"x":1}'),  # an object, as some servers send it: kept as its JSON text
        ("b", "g", "{}"),
    ]


def test_deltas_without_an_index_start_a_call_with_an_id_or_a_name() -> None:
    st = state()
    run(
        st,
        events(
            delta(tool_calls=[{"id": "a", "function": {"name": "f", "arguments": '{"x"'}}]),
            delta(tool_calls=[{"function": {"arguments": ":1}"}}]),
            delta(tool_calls=[{"function": {"name": "g", "arguments": "{}"}}]),
            delta(finish="tool_calls"),
        ),
    )
    calls = st.closed_calls()
    assert [(c.id, c.function.name, c.function.arguments, c.index) for c in calls] == [
        ("a", "f", '{"x":1}', 0),
        (None, "g", "{}", 1),
    ]


def test_raw_and_metrics_read_the_events_kept() -> None:
    st = state()
    metrics = {"time_to_first_token_ms": 12.5, "tokens_per_second": 40.0}
    run(st, events(delta("x"), delta(finish="stop"), {"choices": [], "metrics": metrics}))
    assert st.raw == [delta("x"), delta(finish="stop"), {"choices": [], "metrics": metrics}]
    assert st.metrics == lmclient.VllmMetrics(time_to_first_token_ms=12.5, tokens_per_second=40.0)
    assert st.result().metrics == st.metrics


def test_no_measures_is_none() -> None:
    st = state()
    run(st, text_stream("x"))
    assert st.metrics is None


def test_an_event_nested_too_deep_is_a_protocol_error() -> None:
    deep = b"data: " + b"[" * 200_000 + b"]" * 200_000 + b"\n\n"
    with pytest.raises(errors.ProtocolError, match="bad stream event") as info:
        run(state(), deep)
    assert isinstance(info.value.body, bytes) and len(info.value.body) == 400_000


def test_an_error_event_carries_the_stream_s_headers() -> None:
    st = state()
    st.headers = {"x-request-id": "r-1"}
    with pytest.raises(errors.ServerError) as info:
        st.feed(b'event: error\ndata: {"error": {"message": "boom"}}\n\n')
    assert info.value.request_id == "r-1" and info.value.message == "boom"


def test_an_error_event_s_code_gives_its_status() -> None:
    body = {"error": {"message": "slow down", "code": 429}}
    with pytest.raises(errors.RateLimitError):
        run(state(), events(body))
    with pytest.raises(errors.ServerError):  # a code that is no status: a server error
        run(state(), events({"error": {"message": "m", "code": 42}}))


def test_events_after_done_are_not_counted() -> None:
    st = state()
    run(st, events(delta("a"), delta(finish="stop")) + events(delta("b")))
    assert st.events == 3 and st.text == "a"
