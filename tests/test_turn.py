"""A typed turn: ``create(prompt, Answer, tools=[...])`` is one request whose grammar lets the
model call the tools or give the answer, and nothing else; its answer read back either way; the
loop (`Client.run`); the refusals. Against the real servers: tests/e2e/test_turn_*.py."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, Literal

import httpx
import msgspec
import pytest
import respx

import lmclient
from lmclient import NoValueError, Tool, _core
from lmclient._output.turn import MAX_CALLS
from lmclient._turn import TURN_CHOICE
from lmclient.testing import FakeLLM
from lmclient.testing._grammar import gbnf_accepts
from tests.helpers import answered, body_of, chat_body


class Weather(msgspec.Struct):
    """Get the weather for a city."""

    city: Annotated[str, msgspec.Meta(max_length=40)]


class Clock(msgspec.Struct):
    zone: str


class Forecast(msgspec.Struct):
    temperature: int
    summary: str


WEATHER = Tool(Weather, name="weather")
CLOCK = Tool(Clock, name="clock")
TOOLS = [WEATHER, CLOCK]
CALL = '<tool_call>\n{"name": "weather", "arguments": {"city":"Oslo"}}\n</tool_call>'
CLOCK_CALL = '<tool_call>\n{"name": "clock", "arguments": {"zone":"CET"}}\n</tool_call>'
ANSWER = '{"temperature":21,"summary":"sunny"}'


def grammar_of(dialect: str = "llamacpp", output_type: Any = Forecast, **params: Any) -> str:
    body = body_of(dialect, output_type, tools=TOOLS, **params)
    if dialect == "llamacpp":
        return str(body["grammar"])
    if dialect == "sglang":
        return str(body["ebnf"])
    return str(body["structured_outputs"]["grammar"])


# -- the grammar: the calls or the answer, and nothing else ----------------------------------


@pytest.mark.parametrize(
    ("choice", "calls", "answer"),
    [(None, True, True), ("auto", True, True), ("required", True, False), ("none", False, True)],
)
def test_the_grammar_holds_the_branches_tool_choice_allows(
    choice: str | None, calls: bool, answer: bool
) -> None:
    given = {} if choice is None else {"tool_choice": choice}
    grammar = grammar_of(**given)
    assert gbnf_accepts(grammar, CALL) is calls
    assert not gbnf_accepts(grammar, CALL + "\n" + CLOCK_CALL)  # one call a turn
    parallel = grammar_of(**given, parallel_tool_calls=True)
    assert gbnf_accepts(parallel, CALL + "\n" + CLOCK_CALL) is calls
    assert gbnf_accepts(grammar, ANSWER) is answer
    for text in (
        "It is sunny.",
        ANSWER + "\n" + CALL,  # the answer, then a call
        CALL + ANSWER,  # a call, then the answer
        '{"temperature": 21, "summary": "sunny"}',  # compact: no whitespace
        CALL.replace("weather", "radar"),  # a tool that is not offered
        CALL.replace('"Oslo"', "7"),  # arguments of the wrong type
        CALL.replace("Oslo", "O" * 41),  # past the tool's max_length
        CALL + "\n",
    ):
        assert not gbnf_accepts(grammar, text), text


def test_a_named_tool_allows_its_calls_only() -> None:
    grammar = grammar_of(tool_choice=CLOCK)
    assert gbnf_accepts(grammar, CLOCK_CALL)
    assert not gbnf_accepts(grammar, CALL)
    assert not gbnf_accepts(grammar, ANSWER)


def test_parallel_calls_are_bounded() -> None:
    grammar = grammar_of(tool_choice="required", parallel_tool_calls=True)
    assert gbnf_accepts(grammar, "\n".join([CALL] * MAX_CALLS))
    assert not gbnf_accepts(grammar, "\n".join([CALL] * (MAX_CALLS + 1)))


@pytest.mark.parametrize(
    ("output_type", "text"),
    [(int, "-12"), (bool, "true"), (list[str], '["a","b"]'), (Literal["yes", "no"], "no")],
)
def test_scalars_lists_and_choices_answer_as_the_type_is_sent(output_type: Any, text: str) -> None:
    grammar = grammar_of("vllm", output_type)
    assert gbnf_accepts(grammar, text)
    assert gbnf_accepts(grammar, CALL)


# -- what each server is sent ----------------------------------------------------------------


@pytest.mark.parametrize("dialect", sorted(TURN_CHOICE))
def test_each_server_gets_the_grammar_the_tools_and_the_choice_that_keeps_both(
    dialect: str,
) -> None:
    body = body_of(dialect, Forecast, tools=TOOLS, tool_choice="required", max_tokens=99)
    assert body["tool_choice"] == TURN_CHOICE[dialect]  # never the user's: the grammar holds it
    assert [tool["function"]["name"] for tool in body["tools"]] == ["weather", "clock"]
    assert body["max_tokens"] == 99
    constraint = {"grammar", "ebnf", "structured_outputs", "guided_grammar"} & set(body)
    assert len(constraint) == 1, body  # the grammar alone: no json_schema beside it (a 500)
    assert "json_schema" not in body and "response_format" not in body


def test_vllm_gets_strict_tools_and_keeps_its_runaway_guard() -> None:
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm")
    call = core.prepare("create", "Q", Forecast, "chat", {"tools": TOOLS})
    assert call.request.body is not None
    body = msgspec.json.decode(call.request.body)
    assert body["tools"][0]["function"]["strict"] is True
    assert body["repetition_detection"]["min_count"] == 32
    assert set(body["structured_outputs"]) == {"grammar"}


def test_a_bounded_turn_gets_the_max_tokens_of_its_longest_text() -> None:
    """A turn whose every way is bounded (the answer, each tool's arguments) is a bounded type:
    its max_tokens is its longest text's (eight calls of the longest), as a type's would be; an
    unbounded tool leaves it unbounded."""
    alone = body_of("llamacpp", Literal["yes", "no"])
    bounded = body_of("llamacpp", Literal["yes", "no"], tools=[WEATHER])
    parallel = body_of("llamacpp", Literal["yes", "no"], tools=[WEATHER], parallel_tool_calls=True)
    unbounded = body_of("llamacpp", Literal["yes", "no"], tools=TOOLS)  # Clock.zone: any str
    longest = CALL.replace("Oslo", "\\uD83D\\uDE00" * 40)  # 40 characters, 12 bytes each
    assert alone["max_tokens"] == len(b"yes") + 1
    assert bounded["max_tokens"] == len(longest) + 1
    assert parallel["max_tokens"] == MAX_CALLS * len(longest) + (MAX_CALLS - 1) + 1
    assert "max_tokens" not in unbounded


def test_the_turn_is_made_once_per_type_tools_and_choice() -> None:
    core = _core.ClientCore("http://h/v1", "m", dialect="llamacpp")
    first = core.prepare("create", "Q", Forecast, "chat", {"tools": TOOLS}).turn
    again = core.prepare("create", "R", Forecast, "chat", {"tools": TOOLS}).turn
    other = core.prepare("create", "Q", Forecast, "chat", {"tools": TOOLS, "tool_choice": "none"})
    assert first is not None and first is again and other.turn is not first


# -- refused before sending ------------------------------------------------------------------


@pytest.mark.parametrize(
    "dialect", ["generic", "tgi", "ollama", "lmstudio", "openai", "sglang-gateway"]
)
def test_servers_that_take_no_grammar_beside_tools_are_refused(dialect: str) -> None:
    with pytest.raises(lmclient.UnsupportedConstraintError, match="cannot hold both"):
        body_of(dialect, Forecast, tools=TOOLS)


@pytest.mark.parametrize(
    ("output_type", "params", "match"),
    [
        (lmclient.Regex("[a-z]+"), {}, "cannot be the answer of a turn"),
        (lmclient.Grammar('root ::= "a"'), {}, "cannot be the answer of a turn"),
        (Literal["<b>", "c"], {}, "begins as a tool call does"),
        (Forecast, {"n": 2}, "one answer"),
        (Literal["a", "b"], {"probabilities": True}, "one answer"),
    ],
)
def test_what_a_turn_cannot_hold_is_refused(
    output_type: Any, params: dict[str, Any], match: str
) -> None:
    with pytest.raises(lmclient.UnsupportedConstraintError, match=match):
        body_of("vllm", output_type, tools=TOOLS, **params)


def test_parallel_tool_calls_without_an_output_type_is_refused() -> None:
    """Without an output type the server's tool parser decides how many calls: lmclient does
    not send a field it has not read each server's handling of."""
    with pytest.raises(lmclient.UnsupportedConstraintError, match="typed turn"):
        body_of("vllm", str, tools=TOOLS, parallel_tool_calls=True)
    assert "parallel_tool_calls" not in body_of(
        "vllm", Forecast, tools=TOOLS, parallel_tool_calls=True
    )


# -- the answer read back --------------------------------------------------------------------


def finished(content: str, **params: Any) -> lmclient.Response[Any, Any]:
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm", runaway="off")
    call = core.prepare("create", "Q", Forecast, "chat", {"tools": TOOLS, **params})
    return answered(call, json.dumps(chat_body(content)).encode())


def test_calls_written_as_text_are_typed_by_their_tools() -> None:
    response = finished(CALL + "\n" + CLOCK_CALL)
    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("weather", Weather("Oslo")),
        ("clock", Clock("CET")),
    ]
    assert response.values == []
    first, second = response.tool_calls
    assert first.id and second.id and first.id != second.id  # what their results refer to
    assert first.raw_arguments == '{"city":"Oslo"}'
    message = response.message  # for the next turn: the calls once, as the template renders them
    assert message["content"] is None and message["tool_calls"][1]["function"]["name"] == "clock"
    with pytest.raises(NoValueError, match=r"calls tools \(weather, clock\)"):
        _ = response.value


def test_the_answer_is_the_value() -> None:
    response = finished(ANSWER)
    assert response.value == Forecast(21, "sunny") and response.tool_calls == ()


def test_calls_the_server_parsed_itself_are_read_as_any_call() -> None:
    """A server whose tool parser ran anyway (SGLang with --tool-call-parser) sends the calls
    in ``tool_calls`` and no content."""
    core = _core.ClientCore("http://h/v1", "m", dialect="sglang")
    call = core.prepare("create", "Q", Forecast, "chat", {"tools": TOOLS})
    wire = {
        "id": "c1",
        "type": "function",
        "function": {"name": "clock", "arguments": '{"zone":"UTC"}'},
    }
    body = chat_body("", tool_calls=[wire], finish_reason="tool_calls")
    response = answered(call, json.dumps(body).encode())
    assert [c.arguments for c in response.tool_calls] == [Clock("UTC")] and response.values == []


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (CALL.replace("weather", "radar"), "unknown tool 'radar'"),
        (CALL.replace('"Oslo"', "7"), "arguments of a call to tool 'weather' are invalid"),
        (CALL[:-3], "tool call 1 is not"),
        ('<tool_call>\n{"arguments": {}}\n</tool_call>', "not a name and arguments"),
        ('{"temperature":"hot"}', "Expected `int`"),
    ],
)
def test_an_answer_outside_the_grammar_is_a_validation_error(content: str, match: str) -> None:
    with pytest.raises(lmclient.ValidationError, match=match):
        finished(content, max_reasks=0)


def test_a_call_under_tool_choice_none_is_refused() -> None:
    with pytest.raises(lmclient.ValidationError, match="tool_choice='none'"):
        finished(CALL, tool_choice="none", max_reasks=0)


def test_calls_that_repeat_until_max_tokens_are_a_runaway() -> None:
    """Gemma 3 270M, in the agent benchmark, wrote the same call until max_tokens cut it:
    "raise max_tokens" cannot help there."""
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm", runaway="off")
    call = core.prepare("create", "Q", Forecast, "chat", {"tools": TOOLS})
    body = chat_body("\n".join([CALL] * 5) + "\n<tool_call>\n{", finish_reason="length")
    with pytest.raises(lmclient.RunawayError, match="repeats its tool calls") as caught:
        answered(call, json.dumps(body).encode())
    assert (caught.value.by, caught.value.path) == ("max_tokens", "$")
    assert "raise max_tokens" not in str(caught.value)


def test_a_call_cut_at_max_tokens_is_truncated() -> None:
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm", runaway="off")
    call = core.prepare("create", "Q", Forecast, "chat", {"tools": TOOLS})
    body = chat_body(CALL[:30], finish_reason="length")
    with pytest.raises(lmclient.TruncatedError):
        answered(call, json.dumps(body).encode())


# -- as a user writes it ----------------------------------------------------------------------


def test_a_respx_suite_that_mocks_the_chat_route() -> None:
    """The user's test: one route mocked, the answer a call as the grammar writes it."""
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post("http://llm.test/v1/chat/completions").mock(
            return_value=httpx.Response(200, json=chat_body(CALL))
        )
        with lmclient.Client("http://llm.test/v1", model="m", dialect="llamacpp") as client:
            response = client.create("Weather in Oslo?", Forecast, tools=TOOLS)
    assert response.tool_calls[0].arguments == Weather("Oslo")
    sent = json.loads(route.calls.last.request.content)
    assert sent["tool_choice"] == "none" and "grammar" in sent


@pytest.mark.parametrize("server", ["vllm", "llamacpp", "sglang"])
def test_the_fake_answers_a_turn_from_its_grammar(server: str) -> None:
    fake = FakeLLM(server=server)
    with fake.serve() as url, lmclient.Client(url) as client:
        called = client.create("Weather?", Forecast, tools=TOOLS, tool_choice="required")
        answer = client.create("Weather?", Forecast, tools=TOOLS, tool_choice="none")
        with client.stream("Weather?", Forecast, tools=TOOLS, tool_choice=WEATHER) as stream:
            streamed = list(stream.calls())
    assert called.tool_calls and all(c.name in ("weather", "clock") for c in called.tool_calls)
    assert isinstance(answer.value, Forecast) and answer.tool_calls == ()
    assert streamed and streamed == list(stream.tool_calls)
    assert all(isinstance(c.arguments, Weather) for c in streamed)


def test_a_stream_of_an_answer_is_validated_at_its_end() -> None:
    fake = FakeLLM(server="vllm")
    fake.reply(Forecast(3, "cold"))
    with (
        fake.serve() as url,
        lmclient.Client(url) as client,
        client.stream("Weather?", Forecast, tools=TOOLS) as stream,
    ):
        text = "".join(stream)
        assert stream.value == Forecast(3, "cold") and stream.tool_calls == ()
    assert json.loads(text) == {"temperature": 3, "summary": "cold"}


# -- the loop ----------------------------------------------------------------------------------


def weather(city: str) -> str:
    """Get the weather for a city."""
    return f"sunny in {city}"


async def async_weather(city: str) -> str:
    """Get the weather for a city."""
    await asyncio.sleep(0)
    return f"rain in {city}"


def scripted(fake: FakeLLM, calls: int) -> None:
    for _ in range(calls):
        fake.reply(None, times=1, tool_calls=[("weather", {"city": "Oslo"})])
    fake.reply(Forecast(21, "sunny"), times=1)


def test_run_calls_the_tools_and_asks_again_until_the_answer() -> None:
    fake = FakeLLM(server="vllm")
    scripted(fake, 2)
    prompt = [{"role": "user", "content": "Weather in Oslo?"}]
    with fake.serve() as url, lmclient.Client(url) as client:
        response = client.run(prompt, Forecast, tools=[Tool.from_function(weather)])
    assert response.value == Forecast(21, "sunny")
    turns = [r for r in fake.requests if r.path.endswith("/chat/completions")]
    assert len(turns) == 3
    messages = turns[-1].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert messages[2] == {
        "role": "tool",
        "tool_call_id": messages[1]["tool_calls"][0]["id"],
        "content": "sunny in Oslo",
    }
    assert prompt == [{"role": "user", "content": "Weather in Oslo?"}]  # the caller's, as given


def test_run_runs_a_call_once_and_asks_for_the_answer_after_a_turn_of_repeats() -> None:
    """A small model loops on a tool (Gemma 3 270M called weather(Lisbon) 32 times in 4 turns,
    benchmarks/agent.py): a call made before is not run again, its result is sent once more, and
    after a turn of only such calls the next turn is asked for the answer alone."""
    runs: list[str] = []

    def counted_weather(city: str) -> str:
        """Get the weather for a city."""
        runs.append(city)
        return f"sunny in {city}"

    fake = FakeLLM(server="vllm")
    twice = [("weather", {"city": "Oslo"}), ("weather", {"city": "Oslo"})]
    fake.reply(None, times=1, tool_calls=twice)
    fake.reply(None, times=1, tool_calls=[("weather", {"city": "Oslo"})])
    fake.reply(Forecast(21, "sunny"), times=1)
    with fake.serve() as url, lmclient.Client(url) as client:
        response = client.run(
            "Weather?", Forecast, tools=[Tool.from_function(counted_weather, name="weather")]
        )
    assert response.value == Forecast(21, "sunny") and runs == ["Oslo"]
    first, second, third = [r.body for r in fake.calls]
    assert [m["content"] for m in second["messages"] if m["role"] == "tool"] == [
        "sunny in Oslo"
    ] * 2
    assert len([m for m in third["messages"] if m["role"] == "tool"]) == 3
    grammars = [body["structured_outputs"]["grammar"] for body in (first, second, third)]
    assert ["<tool_call>" in grammar for grammar in grammars] == [True, True, False]
    assert "temperature" in grammars[2]  # the answer alone, after a turn of repeats


def test_run_stops_at_max_turns() -> None:
    fake = FakeLLM(server="vllm")
    scripted(fake, 3)
    with (
        fake.serve() as url,
        lmclient.Client(url) as client,
        pytest.raises(NoValueError, match="max_turns=2"),
    ):
        client.run("Weather?", Forecast, tools=[Tool.from_function(weather)], max_turns=2)
    assert len([r for r in fake.requests if r.path.endswith("/chat/completions")]) == 2


def test_run_keeps_one_token_budget_over_its_turns() -> None:
    fake = FakeLLM(server="vllm")
    for _ in range(3):
        fake.reply(
            None,
            times=1,
            tool_calls=[("weather", {"city": "Oslo"})],
            usage={"prompt_tokens": 40, "completion_tokens": 20, "total_tokens": 60},
        )
    with (
        fake.serve() as url,
        lmclient.Client(url) as client,
        pytest.raises(lmclient.TokenBudgetExceeded, match="run has spent 120 tokens"),
    ):
        client.run("Weather?", Forecast, tools=[Tool.from_function(weather)], token_budget=100)


def test_run_refuses_tools_it_cannot_run_before_any_request() -> None:
    fake = FakeLLM(server="vllm")
    with fake.serve() as url, lmclient.Client(url) as client:
        with pytest.raises(TypeError, match=r"\['weather'\] have no function"):
            client.run("Weather?", Forecast, tools=[WEATHER])
        with pytest.raises(ValueError, match="max_turns must be a positive int"):
            client.run("Weather?", Forecast, tools=[Tool.from_function(weather)], max_turns=0)
    assert fake.requests == []


async def test_async_run_awaits_async_tools() -> None:
    fake = FakeLLM(server="llamacpp")
    scripted(fake, 1)
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            response = await client.run(
                "Weather in Oslo?",
                Forecast,
                tools=[Tool.from_function(async_weather, name="weather")],
            )
    assert response.value == Forecast(21, "sunny")
    assert fake.requests[-1].body["messages"][-1]["content"] == "rain in Oslo"


# -- a turn that loops ---------------------------------------------------------------------


class Note(msgspec.Struct):
    text: str  # unbounded: the turn is watched


@pytest.mark.parametrize(("server", "by"), [("llamacpp", "client"), ("vllm", "server")])
def test_an_unbounded_turn_that_loops_is_stopped(server: str, by: str) -> None:
    """An unbounded turn is watched as any unbounded answer is (its calls are its text): by
    lmclient as it streams, or by vLLM's own guard, sent for the turn."""
    fake = FakeLLM(server=server)
    looped = fake.runaway("repeat", span="la la ")
    with (
        fake.serve() as url,
        lmclient.Client(url) as client,
        pytest.raises(lmclient.RunawayError) as caught,
    ):
        client.create("Sing.", Note, tools=[CLOCK])
    assert caught.value.by == by and caught.value.tokens is not None
    sent = fake.calls[-1].body
    assert ("repetition_detection" in sent) is (by == "server")
    assert sent.get("stream") is (True if by == "client" else None)
    assert looped.abandoned.is_set() is (by == "client")  # lmclient left: the server stops


def test_a_bounded_turn_is_not_watched() -> None:
    fake = FakeLLM(server="vllm")
    with fake.serve() as url, lmclient.Client(url) as client:
        client.create("Weather?", Literal["yes", "no"], tools=[WEATHER])
    sent = fake.calls[-1].body
    assert "repetition_detection" not in sent and "stream" not in sent and sent["max_tokens"]
