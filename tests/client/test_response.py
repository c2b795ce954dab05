"""`Response` (`lmclient._response`): the first choice's shortcuts, the headers as read, and what
is decoded from the kept body only when asked (`raw`, `metrics`); the assistant message to send
back; its msgspec encoding. Responses from real calls: test_client.py, test_loopback.py,
tests/test_usage.py."""

from __future__ import annotations

import base64
from typing import Any, get_args

import msgspec
import pytest

import lmclient
from lmclient._response import Response
from lmclient._tools import ToolCall


def response(body: bytes | list[bytes] | None = None, **fields: Any) -> Response[Any]:
    given: dict[str, Any] = {
        "values": [7, 8],
        "texts": ["7", "8"],
        "finish_reasons": ["stop", "length"],
        "usage": None,
        "model": "m",
        "id": "r1",
        **fields,
    }
    return Response(**given, _body=body)


def test_a_response_is_subscripted_with_one_parameter_or_two_at_run_time() -> None:
    """The second parameter, the calls' arguments, has a default for type checkers only (PEP
    696 is 3.13's): where annotations are evaluated, ``Response[Person]`` stays valid."""
    assert Response[int] == Response[int, Any]
    assert get_args(Response[str, ToolCall[int]]) == (str, ToolCall[int])
    with pytest.raises(TypeError):
        Response[int, str, bytes]  # type: ignore[misc]


def test_the_shortcuts_are_the_first_choice_s() -> None:
    r = response()
    assert (r.value, r.text, r.finish_reason) == (7, "7", "stop")


def test_the_defaults_of_a_plain_call() -> None:
    r = response()
    assert (r.retries, r.reasks, r.compact, r.tool_calls) == (0, 0, False, ())
    assert (r.total_usage, r.reasoning, r.logprobs) == (None, None, None)


def test_headers_read_case_insensitively_and_read_only() -> None:
    r = response(_headers={"x-request-id": "abc", "x-ratelimit-remaining-requests": "9"})
    assert r.headers["X-Request-Id"] == "abc" and "X-RATELIMIT-REMAINING-REQUESTS" in r.headers
    assert dict(r.headers) == {"x-request-id": "abc", "x-ratelimit-remaining-requests": "9"}
    with pytest.raises(TypeError):
        r.headers["x-new"] = "1"  # type: ignore[index]


def test_no_headers_are_an_empty_mapping() -> None:
    assert dict(response().headers) == {}


def test_raw_is_the_whole_body_decoded_anew_each_time() -> None:
    r = response(b'{"id": "r1", "unknown": {"kept": [1, 2]}}')
    first = r.raw
    assert first == {"id": "r1", "unknown": {"kept": [1, 2]}}
    first["unknown"] = None
    assert r.raw["unknown"] == {"kept": [1, 2]}


def test_a_stream_s_raw_is_its_events() -> None:
    assert response([b'{"a": 1}', b'{"b": 2}']).raw == [{"a": 1}, {"b": 2}]


def test_no_body_no_raw_nor_metrics() -> None:
    r = response(None)
    assert (r.raw, r.metrics) == (None, None)


def test_metrics_are_vllm_s_or_llama_cpp_s() -> None:
    vllm = response(b'{"metrics": {"time_to_first_token_ms": 3.5, "queue_time_ms": 0.25}}')
    assert vllm.metrics == lmclient.VllmMetrics(time_to_first_token_ms=3.5, queue_time_ms=0.25)
    llamacpp = response(b'{"timings": {"prompt_n": 4, "predicted_n": 9, "cache_n": 0}}')
    assert llamacpp.metrics == lmclient.LlamaCppTimings(prompt_n=4, predicted_n=9, cache_n=0)
    assert response(b'{"choices": []}').metrics is None


def test_a_stream_s_metrics_are_the_last_event_s_that_has_them() -> None:
    events = [
        b'{"timings": {"predicted_n": 1}}',
        b'{"timings": {"predicted_n": 5}}',
        b'{"choices": []}',
    ]
    assert response(events).metrics == lmclient.LlamaCppTimings(predicted_n=5)


def test_the_message_to_send_back() -> None:
    assert response().message == {"role": "assistant", "content": "7"}
    assert response(texts=[""]).message == {"role": "assistant", "content": None}


def test_the_message_carries_the_tool_calls_as_sent() -> None:
    call = ToolCall(
        id="call-1", name="weather", arguments={"city": "Oslo"}, raw_arguments='{"city":"Oslo"}'
    )
    r = response(texts=[""], tool_calls=(call,))
    assert r.message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call-1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
            }
        ],
    }


def test_msgspec_encodes_the_body_and_headers_under_their_public_names() -> None:
    encoded = msgspec.json.decode(msgspec.json.encode(response(b'{"a":1}', _headers={"x-a": "b"})))
    assert base64.b64decode(encoded["body"]) == b'{"a":1}'
    assert encoded["headers"] == {"x-a": "b"}
    assert "_body" not in encoded and "_headers" not in encoded


def test_a_response_is_frozen() -> None:
    with pytest.raises(AttributeError):
        response().retries = 1  # type: ignore[misc]
