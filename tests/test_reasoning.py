"""Reasoning controls: the exact request fields per dialect, the refusals, the ``max_tokens``
they leave room for, the fake's thinking per server, and reasoning deltas in streams."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Literal

import msgspec
import pytest

import lmclient
from lmclient import _core, errors
from lmclient._dialects import DIALECTS, ServerInfo, detect
from lmclient._output.thinking import thinking_grammar
from lmclient._reasoning import CONTROLS, THINK_MARKUP_TOKENS
from lmclient._stream import Delta
from lmclient._stream_state import StreamState
from lmclient.testing import FakeLLM
from lmclient.testing._grammar import gbnf_accepts
from tests.helpers import LLAMACPP_LIVE, answered, body_of, chat_body, sent

# Written out, not computed: each from the server's own request handling (see _reasoning.py).
ON = {"chat_template_kwargs": {"enable_thinking": True}}
OFF = {"chat_template_kwargs": {"enable_thinking": False}}
EXPECTED: dict[str, dict[str, Any]] = {
    "vllm": {
        "thinking=True": ON,
        "thinking=False": OFF,
        "budget": {"thinking_token_budget": 300},
        "effort": {"reasoning_effort": "low"},
    },
    "vllm-guided": {"thinking=True": ON, "thinking=False": OFF, "budget": None, "effort": None},
    "sglang": {
        "thinking=True": ON,
        "thinking=False": OFF,
        "budget": None,
        "effort": {"reasoning_effort": "low"},
    },
    "llamacpp": {
        "thinking=True": ON,
        "thinking=False": OFF,
        "budget": {"reasoning_budget_tokens": 300},
        "effort": {"reasoning_effort": "low"},
    },
    "tgi": {"thinking=True": None, "thinking=False": None, "budget": None, "effort": None},
    "generic": {
        "thinking=True": None,
        "thinking=False": None,
        "budget": None,
        "effort": {"reasoning_effort": "low"},
    },
    "ollama": {
        "thinking=True": None,
        "thinking=False": {"reasoning_effort": "none"},
        "budget": None,
        "effort": {"reasoning_effort": "low"},
    },
    "lmstudio": {
        "thinking=True": None,
        "thinking=False": None,
        "budget": None,
        "effort": {"reasoning_effort": "low"},
    },
    "sglang-gateway": {  # chat_template_kwargs would pass, but the workers' kind is not known
        "thinking=True": None,
        "thinking=False": None,
        "budget": None,
        "effort": {"reasoning_effort": "low"},
    },
    "openai": {
        "thinking=True": None,
        "thinking=False": None,
        "budget": None,
        "effort": {"reasoning_effort": "low"},
    },
}
CASES: dict[str, dict[str, Any]] = {
    "thinking=True": {"thinking": True},
    "thinking=False": {"thinking": False},
    "budget": {"thinking_budget": 300},
    "effort": {"reasoning_effort": "low"},
}


def test_every_dialect_has_a_row() -> None:
    assert set(EXPECTED) == set(DIALECTS) == set(CONTROLS)


@pytest.mark.parametrize("dialect", list(EXPECTED))
@pytest.mark.parametrize("case", list(CASES))
def test_exact_fields_per_dialect(dialect: str, case: str) -> None:
    expected = EXPECTED[dialect][case]
    if expected is None:
        with pytest.raises(lmclient.UnsupportedConstraintError, match="no request field"):
            sent(dialect, **CASES[case])
    else:
        assert sent(dialect, **CASES[case]) == expected


def test_controls_together() -> None:
    assert sent("vllm", thinking=True, thinking_budget=64, reasoning_effort="high") == {
        "chat_template_kwargs": {"enable_thinking": True},
        "thinking_token_budget": 64,
        "reasoning_effort": "high",
    }


def test_no_control_no_field() -> None:
    for dialect in DIALECTS:
        assert sent(dialect) == {}


@pytest.mark.parametrize("dialect", ["vllm", "llamacpp", "generic"])
def test_completions_endpoint_is_refused(dialect: str) -> None:
    with pytest.raises(lmclient.UnsupportedConstraintError, match="chat template"):
        body_of(dialect, endpoint="completions", reasoning_effort="low")


@pytest.mark.parametrize(
    "params",
    [{"thinking": False, "thinking_budget": 10}, {"thinking": False, "reasoning_effort": "low"}],
)
def test_contradictions_are_refused(params: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="contradicts"):
        body_of("vllm", **params)


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"thinking": "yes"}, TypeError),
        ({"thinking_budget": 1.5}, TypeError),
        ({"thinking_budget": True}, TypeError),
        ({"thinking_budget": -1}, ValueError),
        ({"reasoning_effort": "max"}, ValueError),
        ({"reasoning_effort": 2}, TypeError),
    ],
)
def test_bad_values(params: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        body_of("vllm", **params)


def test_extra_body_merges_beside_the_template_kwargs() -> None:
    extra = {"chat_template_kwargs": {"custom": 1}}
    assert sent("vllm", thinking=True, extra_body=extra)["chat_template_kwargs"] == {
        "enable_thinking": True,
        "custom": 1,
    }


def test_defaults_apply_and_a_call_overrides_them() -> None:
    core = _core.ClientCore("http://h/v1", "m", dialect="vllm", defaults={"thinking": False})
    for params, expected in (({}, False), ({"thinking": True}, True)):
        call = core.prepare("create", "Q", str, "chat", params)
        assert call.request.body is not None
        body = msgspec.json.decode(call.request.body)
        assert body["chat_template_kwargs"] == {"enable_thinking": expected}


def test_defaults_are_refused_before_sending_where_unsupported() -> None:
    core = _core.ClientCore("http://h/v1", "m", dialect="tgi", defaults={"thinking": True})
    with pytest.raises(lmclient.UnsupportedConstraintError):
        core.validate("generate", "Q", str, "chat", {})


# -- max_tokens: room for the thinking and the answer -------------------------------------

CHOICE = Literal["yes", "no"]


def test_bounded_type_gets_the_thinking_budget_on_top() -> None:
    plain = body_of("vllm", CHOICE)["max_tokens"]
    body = body_of("vllm", CHOICE, thinking_budget=200)
    assert body["max_tokens"] == plain + 200 + THINK_MARKUP_TOKENS
    assert body["thinking_token_budget"] == 200


@pytest.mark.parametrize("params", [{"thinking": True}, {"reasoning_effort": "high"}])
def test_unbounded_thinking_gets_no_max_tokens(params: dict[str, Any]) -> None:
    assert "max_tokens" not in body_of("vllm", CHOICE, **params)


def test_thinking_off_keeps_the_answer_budget() -> None:
    assert (
        body_of("vllm", CHOICE, thinking=False)["max_tokens"]
        == body_of("vllm", CHOICE)["max_tokens"]
    )


def test_user_max_tokens_is_sent_as_given() -> None:
    assert body_of("vllm", CHOICE, thinking_budget=10, max_tokens=500)["max_tokens"] == 500


def test_max_tokens_without_room_for_the_thinking_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="after up to 116 of thinking"):
        body_of("vllm", CHOICE, thinking_budget=100, max_tokens=50)


def test_free_text_gets_no_max_tokens() -> None:
    assert "max_tokens" not in body_of("vllm", str, thinking_budget=100)


# -- the fake thinks like its server -------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "key"),
    [("vllm", "reasoning"), ("sglang", "reasoning_content"), ("llamacpp", "reasoning_content")],
)
def test_fake_puts_thinking_where_its_server_does(server: str, key: str) -> None:
    fake = FakeLLM(server=server)
    fake.reply("yes", reasoning="hmm")
    with fake.mock() as url, lmclient.Client(url, "fake-model") as client:
        response = client.create("Q", CHOICE, thinking=True)
        assert (response.value, response.reasoning) == ("yes", "hmm")
        with client.stream("Q", CHOICE, thinking=True) as stream:
            assert [kind for kind, _ in stream.deltas()] == ["reasoning", "content"]
            assert (stream.value, stream.reasoning) == ("yes", "hmm")
    message = fake.calls[0].body
    assert message["chat_template_kwargs"] == {"enable_thinking": True}
    answer = FakeLLM(server=server)
    answer.reply("yes", reasoning="hmm")
    with answer.mock() as url, lmclient.Client(url, "fake-model") as client:
        raw = client.create("Q", CHOICE, thinking=True).raw
        assert raw["choices"][0]["message"][key] == "hmm"


def test_fake_thinks_when_asked_and_not_when_turned_off() -> None:
    fake = FakeLLM(server="vllm")
    with fake.mock() as url, lmclient.Client(url, "fake-model") as client:
        assert client.create("Q", thinking=True).reasoning
        assert client.create("Q").reasoning is None
        fake.reply("ok", reasoning="scripted")
        assert client.create("Q", thinking=False).reasoning is None


def test_fake_cuts_thinking_to_its_budget_and_the_answer_still_fits() -> None:
    fake = FakeLLM(server="llamacpp")
    fake.reply("yes", reasoning="x" * 400)
    with fake.mock() as url, lmclient.Client(url, "fake-model") as client:
        response = client.create("Q", CHOICE, thinking_budget=5)
    assert (response.value, response.reasoning) == ("yes", "x" * 20)
    assert fake.calls[0].body["reasoning_budget_tokens"] == 5


def test_fake_spends_max_tokens_on_thinking_first() -> None:
    """The failure lmclient's room for thinking avoids: thinking takes max_tokens, the
    content is empty, and lmclient names the likely cause."""
    fake = FakeLLM(server="vllm")
    fake.reply('{"a":1}', reasoning="y" * 400)
    with (
        fake.mock() as url,
        lmclient.Client(url, "fake-model") as client,
        pytest.raises(errors.TruncatedError),
    ):
        client.create("Q", dict, thinking=True, max_tokens=20)
    assert fake.calls[0].body["max_tokens"] == 20


# -- streams: reasoning deltas apart from content -----------------------------------------


def sse(*deltas: dict[str, Any], finish: bool = True) -> bytes:
    events = [{"choices": [{"index": 0, "delta": d}]} for d in deltas]
    if finish:
        events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    out = b"".join(b"data: " + msgspec.json.encode(e) + b"\n\n" for e in events)
    return out + b"data: [DONE]\n\n"


def test_tagged_keeps_the_server_order_within_one_chunk() -> None:
    call = _core.ClientCore("http://h/v1", "m", dialect="vllm").prepare(
        "stream", "Q", str, "chat", {}, reading="stream"
    )
    state = StreamState(call)
    data = sse(
        {"reasoning_content": "r1"},
        {"content": "c1"},
        {"reasoning": "r2"},
        {"content": "c2"},
        {"reasoning": "r3"},
    )
    assert state.tagged(state.feed(data)) == [
        ("reasoning", "r1"),
        ("content", "c1"),
        ("reasoning", "r2"),
        ("content", "c2"),
        ("reasoning", "r3"),
    ]
    assert state.tagged(state.end()) == []
    assert state.result().reasoning == "r1r2r3"


def test_deltas_yield_thinking_before_any_content_arrives() -> None:
    """Reasoning is handed out as it arrives, not held back until content comes: the fake
    writes no content until the test has seen the first reasoning delta."""
    seen = threading.Event()

    def pace(index: int) -> None:
        if index == 3:  # the role event, two reasoning events, then the content
            assert seen.wait(10), "the reasoning delta never reached the client"

    fake = FakeLLM(server="vllm", chunk_size=2, on_chunk=pace)
    fake.reply("yes", reasoning="abcd")
    with (
        fake.serve() as url,
        lmclient.Client(url, "fake-model") as client,
        client.stream("Q", CHOICE) as stream,
    ):
        deltas = stream.deltas()
        assert next(deltas) == ("reasoning", "ab")
        assert stream.text == ""
        seen.set()
        assert list(deltas) == [("reasoning", "cd"), ("content", "ye"), ("content", "s")]
        assert stream.value == "yes"


def test_deltas_after_iterating_is_an_error() -> None:
    fake = FakeLLM(server="vllm")
    with (
        fake.mock() as url,
        lmclient.Client(url, "fake-model") as client,
        client.stream("Q") as stream,
    ):
        next(iter(stream))
        with pytest.raises(errors.LMClientError, match="first read"):
            next(stream.deltas())


def test_async_deltas() -> None:
    fake = FakeLLM(server="sglang")
    fake.reply("no", reasoning="think")

    async def main() -> list[Delta]:
        async with (
            lmclient.AsyncClient(fake.base_url, "fake-model") as client,
            client.stream("Q", CHOICE, thinking=True) as stream,
        ):
            out = [d async for d in stream.deltas()]
            assert (await stream.aread(), stream.reasoning) == ("no", "think")
            return out

    with fake.mock():
        got = asyncio.run(main())
    assert got == [("reasoning", "thin"), ("reasoning", "k"), ("content", "no")]


# -- an answer that came back as reasoning ------------------------------------------------------


class Named(msgspec.Struct):
    name: str
    age: int


@pytest.mark.parametrize(
    ("dialect", "names"),
    [
        ("llamacpp", "--reasoning-format"),
        ("vllm", "--reasoning-parser"),
        ("sglang", "--reasoning-parser"),
    ],
)
def test_an_answer_in_the_reasoning_names_the_reasoning_parser(dialect: str, names: str) -> None:
    """The real body of llama.cpp b11434 with a template that opens ``<think>`` (recorded in
    tests/fixtures/llamacpp-live/chat_reasoning_forced_open.*): the constrained answer in
    ``reasoning_content``, the content empty. It was a `ValidationError` telling of max_tokens
    spent on thinking (which the finish reason, ``stop``, rules out); it is the server's
    reasoning parser, named, and what to change."""
    body = (LLAMACPP_LIVE / "chat_reasoning_forced_open.response.json").read_bytes()
    core = _core.ClientCore("http://h/v1", "m", dialect=dialect, runaway="off")
    call = core.prepare("create", "Invent a person.", Named, "chat", {"max_reasks": 0})
    with pytest.raises(lmclient.ConstraintIgnoredError) as caught:
        answered(call, body)
    message = str(caught.value)
    assert "came back as reasoning" in message and names in message
    assert "thinking=False" in message and "spent max_tokens" not in message
    assert caught.value.text == '{"name":"the","age":10}'  # what came back, to see it


# -- llama.cpp: the answer's grammar after a reasoning block -----------------------------------


@pytest.mark.parametrize(
    "output_type",
    [Named, CHOICE, int, lmclient.Grammar('root ::= "qz-" [0-9]'), lmclient.Regex(r"[a-z]{3}")],
)
@pytest.mark.parametrize("params", [{"thinking": True}, {"thinking_budget": 32}])
def test_llamacpp_sends_the_grammar_after_a_reasoning_block(
    output_type: Any, params: dict[str, Any]
) -> None:
    """llama.cpp applies a request's grammar from the first token, thinking included: a call
    that asks for thinking lets the model reason first (`thinking_grammar`), every grammar
    lmclient sends (the compact JSON, a choice, a scalar's, a user's); a regex goes as a JSON
    schema, which the server's own template grammar already starts after the reasoning."""
    plain = body_of("llamacpp", output_type)
    body = body_of("llamacpp", output_type, **params)
    if "grammar" not in plain:
        assert body["json_schema"] == plain["json_schema"]
        return
    assert body["grammar"] == thinking_grammar(plain["grammar"])
    assert gbnf_accepts(body["grammar"], "Hmm.</think>\n\n" + _sentence(output_type))


def _sentence(output_type: Any) -> str:
    return {Named: '{"name":"a","age":1}', CHOICE: "yes", int: "7"}.get(output_type, "qz-1")


@pytest.mark.parametrize(
    ("dialect", "output_type", "params"),
    [
        ("llamacpp", Named, {}),
        ("llamacpp", Named, {"thinking": False}),
        ("llamacpp", Named, {"reasoning_effort": "low", "whitespace": "server"}),
        ("llamacpp", str, {"thinking": True}),
        ("vllm", Named, {"thinking": True}),  # vLLM starts the grammar after the reasoning
        ("sglang", Named, {"thinking": True}),
    ],
)
def test_other_calls_keep_their_constraint(
    dialect: str, output_type: Any, params: dict[str, Any]
) -> None:
    whitespace = params.pop("whitespace", "compact")
    core = _core.ClientCore(
        "http://h/v1", "m", dialect=dialect, runaway="off", whitespace=whitespace
    )
    call = core.prepare("create", "Q", output_type, "chat", params)
    plain = core.prepare("create", "Q", output_type, "chat", {})
    assert call.request.body is not None and plain.request.body is not None
    constraint = set(call.plan.fields)
    body, before = msgspec.json.decode(call.request.body), msgspec.json.decode(plain.request.body)
    assert {k: body[k] for k in constraint} == {k: before[k] for k in constraint}
    assert "think ::=" not in call.request.body.decode()


def test_a_typed_turn_reasons_first_too() -> None:
    weather = lmclient.Tool(Named, name="person")
    plain = body_of("llamacpp", CHOICE, tools=[weather])["grammar"]
    thinking = body_of("llamacpp", CHOICE, tools=[weather], thinking_budget=16)
    assert thinking["grammar"] == thinking_grammar(plain)
    assert thinking["tool_choice"] == "none" and thinking["reasoning_budget_tokens"] == 16
    core = _core.ClientCore("http://h/v1", "m", dialect="llamacpp", runaway="off")
    call = core.prepare("create", "Q", CHOICE, "chat", {"tools": [weather], "thinking": True})
    call_text = '{"name": "person", "arguments": {"name":"a","age":1}}'
    text = f"<think>Who?</think>\n<tool_call>\n{call_text}\n</tool_call>"
    response = answered(call, msgspec.json.encode(chat_body(text)))
    assert [c.arguments for c in response.tool_calls] == [Named(name="a", age=1)]
    assert response.reasoning == "Who?"


REASONED = '<think>\nA person: a name and an age.\n</think>\n\n{"name":"Ada","age":36}'


def _llamacpp_call(output_type: Any = Named, **params: Any) -> Any:
    core = _core.ClientCore("http://h/v1", "m", dialect="llamacpp", runaway="off")
    return core.prepare("create", "Q", output_type, "chat", {"max_reasks": 0, **params})


def test_the_answer_follows_the_reasoning_in_the_content() -> None:
    """With llama.cpp's reasoning parser off (``--reasoning-format none``), or a template whose
    markers it does not know, the content begins with the reasoning: the answer is what
    follows it, the reasoning is `Response.reasoning`."""
    response = answered(_llamacpp_call(thinking=True), msgspec.json.encode(chat_body(REASONED)))
    assert response.value == Named(name="Ada", age=36)
    assert response.text == '{"name":"Ada","age":36}'
    assert response.reasoning == "A person: a name and an age."
    split = answered(
        _llamacpp_call(thinking=True),
        msgspec.json.encode(chat_body('{"name":"Ada","age":36}', reasoning_content="Hmm.")),
    )  # the parser on (the default): the server split them
    assert (split.value.age, split.reasoning) == (36, "Hmm.")
    with pytest.raises(lmclient.ValidationError):  # a call without thinking reads it as it is
        answered(_llamacpp_call(), msgspec.json.encode(chat_body(REASONED)))


def test_the_answer_follows_the_reasoning_in_a_stream() -> None:
    fake = FakeLLM(server="llamacpp")
    fake.reply(REASONED)
    with fake.mock() as url, lmclient.Client(url, "fake-model") as client:
        with (
            client.stream("Q", Named, thinking=False) as plain,
            pytest.raises(lmclient.ValidationError),
        ):
            plain.read()
        fake.reply(REASONED)
        with client.stream("Q", Named, reasoning_effort="low") as stream:
            assert stream.read() == Named(name="Ada", age=36)
        assert "think-answer" in fake.calls[-1].body["grammar"]


def test_reasoning_cut_by_max_tokens_is_a_cut_not_an_ignored_constraint() -> None:
    body = chat_body("<think>\nFirst, a name. Then", finish_reason="length")
    with pytest.raises(lmclient.TruncatedError):
        answered(_llamacpp_call(thinking=True, max_tokens=60), msgspec.json.encode(body))


def test_an_unclosed_reasoning_says_what_to_change() -> None:
    """The answer in the reasoning although the grammar let the model close it first: the
    advice is a thinking budget (llama.cpp closes the reasoning after it)."""
    body = (LLAMACPP_LIVE / "chat_reasoning_forced_open.response.json").read_bytes()
    with pytest.raises(lmclient.ConstraintIgnoredError) as caught:
        answered(_llamacpp_call(thinking=True), body)
    message = str(caught.value)
    assert "without closing its reasoning" in message and "thinking_budget" in message
    assert caught.value.text == '{"name":"the","age":10}'


def test_the_space_after_the_reasoning_is_not_the_answer() -> None:
    """llama.cpp b11434's reasoning parser takes the block off but leaves the whitespace after
    ``</think>`` (the body of `probe --check` on the template that opens ``<think>``): a choice
    is read past it."""
    body = chat_body("  \nquib-3", reasoning_content="<think>\n<think>")
    response = answered(_llamacpp_call(CHOICE_XQ, thinking_budget=32), msgspec.json.encode(body))
    assert (response.value, response.text) == ("quib-3", "quib-3")
    with pytest.raises(lmclient.ValidationError):  # no reasoning: the space is the answer's
        answered(
            _llamacpp_call(CHOICE_XQ, thinking_budget=32), msgspec.json.encode(chat_body(" quib-3"))
        )


CHOICE_XQ = Literal["xylo-7", "quib-3"]


def test_a_template_without_the_markers_keeps_the_grammar() -> None:
    """Detection reads whether the chat template writes ``</think>`` (llama.cpp's /props): the
    recorded Gemma template of `make test` does not (a call with thinking then keeps its
    grammar as it is: the model would never close a reasoning it does not write), the one that
    opens ``<think>`` does, and a server that does not say gets the reasoning block."""
    props = msgspec.json.decode((LLAMACPP_LIVE / "props.response.json").read_bytes())
    template = (LLAMACPP_LIVE / "chat_reasoning_forced_open.template.jinja").read_text()
    assert detect("h", {"/props": props}, ["m"]).thinks is False
    assert detect("h", {"/props": {**props, "chat_template": template}}, ["m"]).thinks is True
    assert detect("h", {"/props": {**props, "chat_template_tool_use": template}}, []).thinks
    bare = {k: v for k, v in props.items() if k != "chat_template"}
    assert detect("h", {"/props": bare}, ["m"]).thinks is None
    for thinks, reasoned in ((False, False), (True, True), (None, True)):
        core = _core.ClientCore("http://h/v1", "m", dialect="llamacpp", runaway="off")
        core.server_info = ServerInfo("llamacpp", "llamacpp", "b11434", ["m"], thinks=thinks)
        call = core.prepare("create", "Q", Named, "chat", {"thinking_budget": 8})
        assert call.request.body is not None
        sent_grammar = msgspec.json.decode(call.request.body)["grammar"]
        assert (sent_grammar != PLAIN, call.plan.reasoned) == (reasoned, reasoned)


PLAIN = body_of("llamacpp", Named)["grammar"]
