"""The typed turn against the real llama.cpp server (build b11434, Gemma 3 270M): tools and a
typed answer in one request (issue 40).

``create(prompt, Answer, tools=[...])`` sends llama.cpp lmclient's own grammar (the calls in
Hermes syntax, or the answer's JSON) with the tools and ``tool_choice: "none"``: the server then
renders the tools into the prompt and returns the raw text, which lmclient reads. The server
runs the project's chat template that renders tools (``start_server(tools=True)``, the template
`scripts/llamacpp.py` installs: the GGUF has none). Every request is one turn, asserted from
the bodies a hook sees (`RequestSent` with ``hook_content=True``). The model's choices are not
asserted (a 270M base model), only the shape of what it chose and that it validates; bounded
strings, the grammar's bound on the calls (8) and ``max_tokens`` keep every turn short.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import lmclient
from lmclient import NoValueError, Tool, ToolCallParams
from scripts import llamacpp
from tests.e2e.turns import PROMPT, WEATHER, Answer, City, Sent, assert_answer, assert_calls

# The run test makes up to MAX_TURNS requests; the fixture's start is not counted.
pytestmark = pytest.mark.timeout(300, func_only=True)

# One call a turn (the default): at temperature 0 this model fills every call slot that
# ``parallel_tool_calls=True`` opens (8 of 27 tokens each, 216 tokens, measured).
SMALL: ToolCallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 160}
REQUIRED: ToolCallParams = {**SMALL, "tool_choice": "required"}
NONE: ToolCallParams = {**SMALL, "tool_choice": "none"}
MAX_TURNS = 3


def weather(city: City) -> str:
    """Get the weather for a city."""
    return f"Sunny, 21 degrees, in {city}."


RUNNABLE = Tool.from_function(weather)


def llamacpp_grammar(body: dict[str, Any]) -> Any:
    return body["grammar"]


@pytest.fixture(scope="module")
def tools_server() -> Iterator[llamacpp.LlamaServer]:
    llamacpp.ensure_installed()
    with llamacpp.start_server(parallel=1, tools=True) as server:
        yield server


def client(server: llamacpp.LlamaServer, sent: Sent) -> lmclient.Client:
    return lmclient.Client(server.base_url, hooks=[sent], hook_content=True)


def test_required_is_calls(tools_server: llamacpp.LlamaServer) -> None:
    sent = Sent(llamacpp_grammar)
    with client(tools_server, sent) as c:
        response = c.create(PROMPT, Answer, tools=[WEATHER], **REQUIRED)
    assert_calls(response)
    [body] = sent.turns()  # one request
    assert "<tool_call>" in body["grammar"] and "temperature" not in body["grammar"]


def test_none_is_the_answer(tools_server: llamacpp.LlamaServer) -> None:
    sent = Sent(llamacpp_grammar)
    with client(tools_server, sent) as c:
        response = c.create(PROMPT, Answer, tools=[WEATHER], **NONE)
    assert_answer(response)
    [body] = sent.turns()
    assert "<tool_call>" not in body["grammar"] and "temperature" in body["grammar"]


def test_the_template_renders_the_tools(tools_server: llamacpp.LlamaServer) -> None:
    """The tools reach the model's prompt (``tool_choice: "none"`` does not drop them)."""
    with lmclient.Client(tools_server.base_url) as c:
        plain = c.create(PROMPT, Answer, **SMALL)
        turn = c.create(PROMPT, Answer, tools=[WEATHER], **NONE)
    tokens = [r.usage.prompt_tokens if r.usage else None for r in (plain, turn)]
    assert tokens[0] is not None and tokens[1] is not None, tokens
    assert tokens[1] > tokens[0] + 50, tokens  # the tools' JSON and how to call them


def test_auto_is_one_or_the_other(tools_server: llamacpp.LlamaServer) -> None:
    sent = Sent(llamacpp_grammar)
    with client(tools_server, sent) as c:
        response = c.create(PROMPT, Answer, tools=[WEATHER], **SMALL)
    if response.tool_calls:
        assert_calls(response)
    else:
        assert_answer(response)
    [body] = sent.turns()
    assert "<tool_call>" in body["grammar"] and "temperature" in body["grammar"]


def test_a_streamed_turn_has_the_same_calls(tools_server: llamacpp.LlamaServer) -> None:
    sent = Sent(llamacpp_grammar)
    with client(tools_server, sent) as c:
        whole = c.create(PROMPT, Answer, tools=[WEATHER], **REQUIRED)
        with c.stream(PROMPT, Answer, tools=[WEATHER], **REQUIRED) as stream:
            streamed = list(stream.calls())
            assert tuple(streamed) == stream.tool_calls
            with pytest.raises(NoValueError):
                stream.value  # noqa: B018
    assert_calls(whole)
    assert [(call.name, call.arguments) for call in streamed] == [
        (call.name, call.arguments) for call in whole.tool_calls
    ]
    created, streaming = sent.turns()
    assert streaming["stream"] is True and created.get("stream") is not True
    assert streaming["grammar"] == created["grammar"]


def test_run_ends_in_an_answer_or_at_max_turns(tools_server: llamacpp.LlamaServer) -> None:
    sent = Sent(llamacpp_grammar)
    with client(tools_server, sent) as c:
        try:
            response = c.run(PROMPT, Answer, tools=[RUNNABLE], max_turns=MAX_TURNS, **SMALL)
        except NoValueError as exc:
            assert f"max_turns={MAX_TURNS}" in str(exc)
            answered = False
        else:
            assert_answer(response)
            answered = True
    bodies = sent.turns()  # one request per turn
    assert 1 <= len(bodies) <= MAX_TURNS
    if not answered:
        assert len(bodies) == MAX_TURNS
    # each turn after the first carries the calls before it and their results
    for turn, body in enumerate(bodies):
        messages = body["messages"]
        called = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
        results = [m for m in messages if m["role"] == "tool"]
        assert len(called) == turn
        assert len(results) == sum(len(m["tool_calls"]) for m in called)
        assert all(m["content"].startswith("Sunny, 21 degrees, in ") for m in results)
