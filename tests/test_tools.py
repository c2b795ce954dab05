"""Typed tools: declaring them, the exact request fields per dialect, the refusals, decoding
tool calls (bodies and streams, shapes from each server's source) and the fake's calls."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from typing import Any, Literal, TypedDict

import msgspec
import pydantic
import pytest
from typing_extensions import assert_type

import lmclient
from lmclient import Tool, ToolCall, _core, errors
from lmclient._dialects import DIALECTS, PROBE_PATHS
from lmclient._stream_state import StreamState
from lmclient._tools import CHOICES, ENFORCEMENT
from lmclient.testing import FakeLLM
from tests.conftest import LLAMACPP_LIVE, chat_body


class Weather(msgspec.Struct):
    """Get the weather for a city.

    Not sent: only the first paragraph is."""

    city: str
    days: int = 1


@dataclasses.dataclass
class Lookup:
    term: str


class Search(TypedDict):
    query: str


class Convert(pydantic.BaseModel):
    amount: float


def add(a: int, b: int = 2) -> int:
    """Add two numbers."""
    return a + b


WEATHER = Tool(Weather, name="weather")
ADD = Tool.from_function(add)
WEATHER_PARAM = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Get the weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 1}},
            "required": ["city"],
        },
    },
}
ADD_PARAM = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 2}},
            "required": ["a"],
        },
    },
}


# -- declaring tools -----------------------------------------------------------------------


def test_tool_from_a_struct_and_from_a_function() -> None:
    assert WEATHER.param() == WEATHER_PARAM
    assert ADD.param() == ADD_PARAM


@pytest.mark.parametrize(
    ("arguments", "properties"),
    [
        (Lookup, {"term": {"type": "string"}}),
        (Search, {"query": {"type": "string"}}),
        (Convert, {"amount": {"title": "Amount", "type": "number"}}),
    ],
)
def test_tool_from_other_object_types(arguments: Any, properties: dict[str, Any]) -> None:
    tool = Tool(arguments, description="d")
    assert tool.name == arguments.__name__
    assert tool.param()["function"]["parameters"]["properties"] == properties
    assert tool.param()["function"]["description"] == "d"


@pytest.mark.parametrize("arguments", [int, list[Weather], str])
def test_arguments_must_be_an_object(arguments: Any) -> None:
    with pytest.raises(TypeError, match="JSON object"):
        Tool(arguments)


def test_tool_names_are_checked() -> None:
    with pytest.raises(ValueError, match="tool name"):
        Tool(Weather, name="get weather")


def test_functions_take_named_parameters_only() -> None:
    def f(*args: int) -> None: ...

    with pytest.raises(TypeError, match="named parameters"):
        Tool.from_function(f)


# -- request fields per dialect ------------------------------------------------------------


def body_of(dialect: str, output_type: Any = str, endpoint: Any = "chat", **params: Any) -> Any:
    core = _core.ClientCore("http://h/v1", "m", dialect=dialect)
    call = core.prepare("create", "Q", output_type, endpoint, params)
    assert call.request.body is not None
    return msgspec.json.decode(call.request.body)


def sent(dialect: str, **params: Any) -> dict[str, Any]:
    body = body_of(dialect, **params)
    return {k: v for k, v in body.items() if k not in ("model", "messages")}


NAMED = {"type": "function", "function": {"name": "add"}}
ALL_SENT = {
    "auto": {"tools": [WEATHER_PARAM, ADD_PARAM], "tool_choice": "auto"},
    "required": {"tools": [WEATHER_PARAM, ADD_PARAM], "tool_choice": "required"},
    "none": {"tools": [WEATHER_PARAM, ADD_PARAM], "tool_choice": "none"},
    "tool": {"tools": [WEATHER_PARAM, ADD_PARAM], "tool_choice": NAMED},
}
# Written out, not computed: see the table's sources in lmclient/_tools.py.
EXPECTED: dict[str, dict[str, Any]] = {
    "vllm": ALL_SENT,
    "vllm-guided": ALL_SENT,
    "sglang": ALL_SENT,
    "llamacpp": {**ALL_SENT, "tool": {"tools": [ADD_PARAM], "tool_choice": "required"}},
    "tgi": ALL_SENT,
    "generic": ALL_SENT,
    "ollama": {
        "auto": {"tools": [WEATHER_PARAM, ADD_PARAM], "tool_choice": "auto"},
        "required": None,
        "none": None,
        "tool": None,
    },
    "lmstudio": ALL_SENT,
    "openai": ALL_SENT,
}


def test_every_dialect_has_a_row() -> None:
    assert set(EXPECTED) == set(DIALECTS) == set(CHOICES) == set(ENFORCEMENT)


@pytest.mark.parametrize("dialect", list(EXPECTED))
@pytest.mark.parametrize("choice", ["auto", "required", "none", "tool"])
def test_exact_fields_per_dialect(dialect: str, choice: str) -> None:
    tool_choice = ADD if choice == "tool" else choice
    expected = EXPECTED[dialect][choice]
    if expected is None:
        with pytest.raises(lmclient.UnsupportedConstraintError, match="ignored"):
            sent(dialect, tools=[WEATHER, ADD], tool_choice=tool_choice)
    else:
        assert sent(dialect, tools=[WEATHER, ADD], tool_choice=tool_choice) == expected


def test_tools_without_a_choice_send_no_choice() -> None:
    assert sent("vllm", tools=(WEATHER,)) == {"tools": [WEATHER_PARAM]}


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"tools": [WEATHER], "output_type": int}, lmclient.UnsupportedConstraintError, "output"),
        (
            {"tools": [WEATHER], "endpoint": "completions"},
            lmclient.UnsupportedConstraintError,
            "chat",
        ),
        ({"tool_choice": "required"}, ValueError, "needs tools"),
        ({"tools": [WEATHER], "tool_choice": ADD}, ValueError, "not one of"),
        ({"tools": [WEATHER, Tool(Lookup, name="weather")]}, ValueError, "share a name"),
        ({"tools": [WEATHER], "tool_choice": "any"}, ValueError, "must be"),
        ({"tools": [Weather]}, ValueError, "lmclient.Tool"),
        ({"tools": WEATHER}, TypeError, "must be list"),
    ],
)
def test_refusals(params: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        body_of("vllm", **params)


# -- decoding calls ------------------------------------------------------------------------


def finish(body: dict[str, Any], **params: Any) -> lmclient.Response[Any]:
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm")
    call = core.prepare("create", "Q", str, "chat", {"tools": [WEATHER, ADD], **params})
    return call.finish(200, {}, json.dumps(body).encode())


# The shapes of each server's non-streamed tool call, from its source: vLLM and SGLang send
# content null (vLLM ``finish_reason`` "tool_calls" under auto); llama.cpp content null or "";
# Ollama `openai.go::ToToolCalls` adds ``index`` and sets finish_reason "tool_calls".
CALL = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": ""}}
SHAPES = {
    "vllm": chat_body(
        None,
        finish_reason="tool_calls",
        tool_calls=[{**CALL, "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}],
    ),
    "llamacpp": chat_body(
        "",
        finish_reason="tool_calls",
        tool_calls=[{**CALL, "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}}],
    ),
    "ollama": chat_body(
        "",
        finish_reason="tool_calls",
        tool_calls=[
            {**CALL, "index": 0, "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}}
        ],
    ),
    "arguments as an object": chat_body(
        None,
        finish_reason="tool_calls",
        tool_calls=[{**CALL, "function": {"name": "weather", "arguments": {"city": "Oslo"}}}],
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_tool_calls_are_decoded_and_validated(shape: str) -> None:
    response = finish(SHAPES[shape])
    [call] = response.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_1", "weather", Weather("Oslo"))
    assert json.loads(call.raw_arguments) == {"city": "Oslo"}
    assert response.value == ""
    assert response.raw.choices[0].message.tool_calls[0].function.name == "weather"


def test_raw_keeps_tool_calls_of_a_call_without_tools() -> None:
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm")
    call = core.prepare("create", "Q", str, "chat", {})
    response = call.finish(200, {}, json.dumps(SHAPES["vllm"]).encode())
    assert response.tool_calls == ()
    assert response.raw.choices[0].message.tool_calls[0].id == "call_1"


def test_invalid_arguments_are_a_validation_error_with_the_raw_arguments() -> None:
    bad = '{"city": 3}'
    body = chat_body(None, tool_calls=[{**CALL, "function": {"name": "weather", "arguments": bad}}])
    with pytest.raises(errors.ValidationError, match="tool 'weather'") as caught:
        finish(body)
    assert caught.value.text == bad


def test_an_unknown_tool_is_a_validation_error() -> None:
    body = chat_body(None, tool_calls=[{**CALL, "function": {"name": "rm", "arguments": "{}"}}])
    with pytest.raises(errors.ValidationError, match="unknown tool 'rm'"):
        finish(body)


def test_sending_results_back() -> None:
    body = chat_body(
        None, tool_calls=[{**CALL, "function": {"name": "add", "arguments": '{"a":1}'}}]
    )
    response = finish(body)
    [call] = response.tool_calls
    assert call.run() == 3
    assert response.message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a":1}'},
            }
        ],
    }
    assert call.result(3) == {"role": "tool", "tool_call_id": "call_1", "content": "3"}
    assert call.result("three")["content"] == "three"
    weather = ToolCall("c", "weather", Weather("x"), '{"city":"x"}', WEATHER)
    with pytest.raises(TypeError, match="not made from a function"):
        weather.run()


# -- streams -------------------------------------------------------------------------------


def sse(*deltas: dict[str, Any]) -> bytes:
    events = [{"choices": [{"index": 0, "delta": d}]} for d in deltas]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    out = b"".join(b"data: " + msgspec.json.encode(e) + b"\n\n" for e in events)
    return out + b"data: [DONE]\n\n"


def piece(index: int, arguments: str, **head: Any) -> dict[str, Any]:
    function = {"arguments": arguments, **({"name": head.pop("name")} if "name" in head else {})}
    return {"tool_calls": [{"index": index, **head, "function": function}]}


def test_stream_assembles_calls_per_index() -> None:
    """Two calls whose argument pieces interleave (as a server streaming parallel calls may)
    assemble per index into the same values as the non-streamed answer."""
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm")
    call = core.prepare("stream", "Q", str, "chat", {"tools": [WEATHER, ADD]}, stream=True)
    state = StreamState(call)
    data = sse(
        piece(0, "", id="call_a", type="function", name="weather"),
        piece(0, '{"city":'),
        piece(1, '{"a":', id="call_b", type="function", name="add"),
        piece(0, '"Oslo"}'),
        piece(1, "4}"),
    )
    for i in range(0, len(data), 7):  # bytes split anywhere
        state.feed(data[i : i + 7])
    state.end()
    calls = state.result().tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_a", "weather", Weather("Oslo")),
        ("call_b", "add", ADD.decode('{"a":4}')),
    ]


@pytest.mark.parametrize("server", ["vllm", "sglang", "llamacpp", "ollama"])
def test_fake_stream_and_body_give_the_same_calls(server: str) -> None:
    fake = FakeLLM(server=server, chunk_size=3)
    choice: Literal["auto", "required"] = "auto" if server == "ollama" else "required"
    with fake.mock() as url, lmclient.Client(url, "fake-model") as client:
        response = client.create("Q", tools=[WEATHER], tool_choice=choice)
        with client.stream("Q", tools=[WEATHER], tool_choice=choice) as stream:
            stream.read()
            assert stream.tool_calls == response.tool_calls
    assert [c.name for c in response.tool_calls] == ["weather"]
    assert isinstance(response.tool_calls[0].arguments, Weather)


def test_stream_tool_calls_need_the_end() -> None:
    fake = FakeLLM()
    with (
        fake.mock() as url,
        lmclient.Client(url, "fake-model") as client,
        client.stream("Q", tools=[WEATHER]) as stream,
        pytest.raises(errors.LMClientError, match="not finished"),
    ):
        assert stream.tool_calls is None


def test_async_stream_tool_calls() -> None:
    fake = FakeLLM(server="vllm")

    async def main() -> tuple[ToolCall[Any], ...]:
        async with (
            lmclient.AsyncClient(fake.base_url, "fake-model") as client,
            client.stream("Q", tools=[ADD], tool_choice=ADD) as stream,
        ):
            await stream.aread()
            return stream.tool_calls

    with fake.mock():
        [call] = asyncio.run(main())
    assert call.name == "add"
    assert call.run() == call.arguments.a + call.arguments.b


# -- the fake ------------------------------------------------------------------------------


def test_fake_agent_loop_ends_after_the_tool_result() -> None:
    fake = FakeLLM(server="vllm")
    with fake.mock() as url, lmclient.Client(url, "fake-model") as client:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "add"}]
        first = client.create(messages, tools=[ADD])
        [call] = first.tool_calls
        messages += [first.message, call.result(call.run())]
        second = client.create(messages, tools=[ADD])
    assert second.tool_calls == () and second.text == fake.default_text
    assert fake.calls[1].body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": call.id,
        "content": str(call.run()),
    }


def test_fake_answers_text_under_none_and_the_named_tool() -> None:
    fake = FakeLLM(server="vllm")
    with fake.mock() as url, lmclient.Client(url, "fake-model") as client:
        assert client.create("Q", tools=[WEATHER, ADD], tool_choice="none").tool_calls == ()
        named = client.create("Q", tools=[WEATHER, ADD], tool_choice=ADD).tool_calls
    assert [c.name for c in named] == ["add"]


def test_fake_llamacpp_reads_a_named_choice_as_auto() -> None:
    """llama.cpp reads tool_choice as a string only: lmclient sends that tool alone instead."""
    fake = FakeLLM(server="llamacpp")
    body = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "Q"}],
        "tools": [WEATHER_PARAM, ADD_PARAM],
        "tool_choice": NAMED,
    }
    answer = json.loads(
        fake.handle("POST", "/v1/chat/completions", {}, json.dumps(body).encode()).body
    )
    assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "weather"
    with fake.mock() as url, lmclient.Client(url, "fake-model") as client:
        calls = client.create("Q", tools=[WEATHER, ADD], tool_choice=ADD).tool_calls
    assert [c.name for c in calls] == ["add"]


def test_a_llamacpp_template_without_tools_is_refused_before_sending() -> None:
    """llama.cpp b11434 accepts tools its chat template cannot render and ignores them (the
    recorded /props of the Gemma 3 template says so): lmclient refuses them instead."""
    props = json.loads((LLAMACPP_LIVE / "props.response.json").read_text())
    core = _core.ClientCore("http://h/v1", "m")
    info = core.adopt_probes([props if p == "/props" else None for p in PROBE_PATHS] + [["m"]])
    assert (info.dialect, info.tools) == ("llamacpp", False)
    with pytest.raises(lmclient.UnsupportedConstraintError, match="chat_template_caps"):
        core.validate("create", "Q", str, "chat", {"tools": [WEATHER]})
    core.validate("create", "Q", str, "chat", {"tools": []})
    able = {**props, "chat_template_caps": {"supports_tool_calls": True}}
    core.adopt_probes([able if p == "/props" else None for p in PROBE_PATHS] + [["m"]])
    core.validate("create", "Q", str, "chat", {"tools": [WEATHER]})


# -- recorded from llama.cpp b11434 (tests/fixtures/llamacpp-live/tools_*) ------------------


def recorded_call(stream: bool) -> _core.Call:
    core = _core.ClientCore("http://h/v1", "gemma-3-270m", dialect="llamacpp")
    params = {"tools": [Tool(Weather, name="weather")], "tool_choice": "required"}
    return core.prepare("create", "Q", str, "chat", params, stream=stream)


def test_recorded_llamacpp_tool_calls_body_and_stream_agree() -> None:
    body = (LLAMACPP_LIVE / "tools_required.response.json").read_bytes()
    whole = recorded_call(False).finish(200, {}, body)
    state = StreamState(recorded_call(True))
    state.feed((LLAMACPP_LIVE / "tools_required_stream.response.sse").read_bytes())
    state.end()
    streamed = state.result()
    assert [c.arguments for c in whole.tool_calls] == [Weather("Odalvik")] * 3
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [
        (c.name, c.arguments) for c in whole.tool_calls
    ]
    assert (whole.text, whole.finish_reason) == (streamed.text, streamed.finish_reason)


def test_recorded_llamacpp_ignores_tools_its_template_cannot_render() -> None:
    """What lmclient's refusal prevents: 200, no call, the tools not even in the prompt."""
    body = (LLAMACPP_LIVE / "tools_ignored_gemma_template.response.json").read_bytes()
    response = recorded_call(False).finish(200, {}, body)
    assert response.tool_calls == () and response.text.startswith("What is the weather")
    assert response.usage is not None and response.usage.prompt_tokens == 16


def test_fake_scripted_calls_invalid_arguments_and_a_reask() -> None:
    fake = FakeLLM(server="vllm")
    fake.reply(None, tool_calls=[("weather", {"city": 3})], times=1)
    fake.reply(None, tool_calls=[("weather", {"city": "Oslo"}), ("add", '{"a":1}')], times=1)
    with fake.mock() as url, lmclient.Client(url, "fake-model") as client:
        response = client.create("Q", tools=[WEATHER, ADD], max_reasks=1)
        assert [c.arguments for c in response.tool_calls] == [Weather("Oslo"), add_args(1)]
        assert response.reasks == 1 and response.finish_reason == "tool_calls"
        fake.reply(None, tool_calls=[("weather", "{not json")])
        with pytest.raises(errors.ValidationError) as caught:
            client.create("Q", tools=[WEATHER])
    assert caught.value.text == "{not json"
    assert fake.calls[1].body["messages"][-2] == {"role": "assistant", "content": '{"city":3}'}


def add_args(a: int) -> Any:
    return ADD.decode({"a": a})


def test_closed_calls_hand_out_each_call_once_when_it_closes() -> None:
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm")
    call = core.prepare("stream", "Q", str, "chat", {"tools": [WEATHER, ADD]}, stream=True)
    state = StreamState(call)
    state.feed(sse(piece(0, '{"city":', id="a", name="weather"))[:-50])  # no finish yet
    assert state.closed_calls() == []
    state = StreamState(call)
    events = sse(
        piece(0, '{"city":"Oslo"}', id="a", name="weather"), piece(1, '{"a":1}', id="b", name="add")
    )
    cut = events.index(b"data: ", 1)
    state.feed(events[:cut])
    assert state.closed_calls() == []  # the newest call may still grow
    second = events.index(b"data: ", cut + 1)
    state.feed(events[cut:second])
    assert [c.id for c in state.closed_calls()] == ["a"]  # call 1 started: call 0 is whole
    state.feed(events[second:])
    state.end()
    assert [c.id for c in state.closed_calls()] == ["b"]  # the choice finished
    assert state.closed_calls() == []


def test_calls_yield_each_call_before_the_stream_ends() -> None:
    """The fake writes nothing after the first call until the test has it."""
    seen = threading.Event()
    fake = FakeLLM(server="vllm", chunk_size=4)
    fake.reply(None, tool_calls=[("weather", {"city": "Oslo"}), ("add", {"a": 1})])
    # the role event, the first call's head and 4 pieces, the second call's head (event 6,
    # which closes the first call), then the second call's pieces: held back at event 7
    fake.on_chunk = lambda index: index != 7 or seen.wait(10) or pytest.fail("no call yet")
    with (
        fake.serve() as url,
        lmclient.Client(url, "fake-model") as client,
        client.stream("Q", tools=[WEATHER, ADD]) as stream,
    ):
        calls = stream.calls()
        first = next(calls)
        assert first.arguments == Weather("Oslo")
        seen.set()
        assert [c.name for c in calls] == ["add"]
        assert [c.name for c in stream.tool_calls] == ["weather", "add"]


def test_calls_need_tools_and_to_be_the_first_read() -> None:
    fake = FakeLLM()
    with fake.mock() as url, lmclient.Client(url, "fake-model") as client:
        with client.stream("Q") as stream, pytest.raises(TypeError, match="tools="):
            next(stream.calls())
        with client.stream("Q", tools=[WEATHER]) as stream:
            next(iter(stream), None)
            with pytest.raises(errors.LMClientError, match="first read"):
                next(stream.calls())


def test_async_calls() -> None:
    fake = FakeLLM(server="llamacpp")

    async def main() -> list[str]:
        async with (
            lmclient.AsyncClient(fake.base_url, "fake-model") as client,
            client.stream("Q", tools=[WEATHER, ADD], tool_choice="required") as stream,
        ):
            return [call.name async for call in stream.calls()]

    with fake.mock():
        assert asyncio.run(main()) == ["weather"]


def assembled(data: bytes) -> list[tuple[str | None, str, Any]]:
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm")
    call = core.prepare("stream", "Q", str, "chat", {"tools": [WEATHER, ADD]}, stream=True)
    state = StreamState(call)
    state.feed(data)
    state.end()
    return [(c.id, c.name, c.arguments) for c in state.result().tool_calls]


def test_stream_of_whole_calls_in_one_delta() -> None:
    """Ollama (`openai.go::ToChunk`) sends each call whole, with its index."""
    calls = [
        {
            "id": "a",
            "index": 0,
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city":"X"}'},
        },
        {
            "id": "b",
            "index": 1,
            "type": "function",
            "function": {"name": "add", "arguments": '{"a":2}'},
        },
    ]
    assert assembled(sse({"content": "", "tool_calls": calls})) == [
        ("a", "weather", Weather("X")),
        ("b", "add", add_args(2)),
    ]


def test_stream_without_index_continues_the_last_call() -> None:
    def bare(arguments: str, **head: Any) -> dict[str, Any]:
        name = {"name": head.pop("name")} if "name" in head else {}
        return {"tool_calls": [{**head, "function": {**name, "arguments": arguments}}]}

    data = sse(
        bare('{"city"', id="a", name="weather"),
        bare(':"Y"}'),
        bare('{"a":', id="b", name="add"),
        bare("3}"),
    )
    assert assembled(data) == [("a", "weather", Weather("Y")), ("b", "add", add_args(3))]


def test_static_types() -> None:
    """mypy checks these (make lint); at run time they only return their argument."""
    assert_type(WEATHER, Tool[Weather])
    assert_type(WEATHER.decode('{"city":"a"}'), Weather)
    assert_type(ADD, Tool[Any])
    response = finish(SHAPES["vllm"])
    assert_type(response.tool_calls, tuple[ToolCall[Any], ...])
    assert_type(response.message, dict[str, Any])


def test_tools_in_defaults() -> None:
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm", defaults={"tools": [WEATHER]})
    call = core.prepare("create", "Q", str, "chat", {})
    assert call.request.body is not None
    assert msgspec.json.decode(call.request.body)["tools"] == [WEATHER_PARAM]
    response = call.finish(200, {}, json.dumps(SHAPES["vllm"]).encode())
    assert [c.arguments for c in response.tool_calls] == [Weather("Oslo")]
    with pytest.raises(lmclient.UnsupportedConstraintError, match="output type"):
        core.validate("generate", "Q", int, "chat", {})
