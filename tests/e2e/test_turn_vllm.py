"""The typed turn against the real vLLM server on the CPU (Gemma 3 270M): tools and a typed
answer in one request (issue 40).

``create(prompt, Answer, tools=[...])`` sends vLLM lmclient's own grammar
(``structured_outputs.grammar``: the calls in Hermes syntax, or the answer's JSON) with the
tools and ``tool_choice: "none"``, which needs no ``--enable-auto-tool-choice`` and no tool
parser: lmclient reads the calls from the text. The session's Gemma template renders no tools,
so the model never sees them; the grammar holds the shape all the same, and that shape is what
is asserted (never the model's choice: a 270M base model). vLLM decodes a few tokens a second
here, so four short requests in all.
"""

from __future__ import annotations

from typing import Any

import pytest

import lmclient
from lmclient import ToolCallParams
from tests.e2e.turns import PROMPT, WEATHER, Answer, Sent, assert_answer, assert_calls

# The first test also waits for the server to start (minutes on 2 cores): not part of the bound.
pytestmark = pytest.mark.timeout(300, func_only=True)

# One call a turn (the default): at temperature 0 this model repeats its call into every slot
# ``parallel_tool_calls=True`` opens (8: some 330 tokens, four minutes here, measured).
SMALL: ToolCallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 120}
REQUIRED: ToolCallParams = {**SMALL, "tool_choice": "required"}
NONE: ToolCallParams = {**SMALL, "tool_choice": "none"}
NAMED: ToolCallParams = {**SMALL, "tool_choice": WEATHER}


def vllm_grammar(body: dict[str, Any]) -> Any:
    return body["structured_outputs"]["grammar"]


def turn(sent: Sent) -> str:
    """The one request sent, checked to be a typed turn's; its grammar."""
    [body] = sent.turns()
    return str(vllm_grammar(body))


def test_required_is_calls(vllm_url: str) -> None:
    sent = Sent(vllm_grammar)
    with lmclient.Client(vllm_url, hooks=[sent], hook_content=True) as client:
        response = client.create(PROMPT, Answer, tools=[WEATHER], **REQUIRED)
    assert_calls(response)
    assert len(response.tool_calls) == 1  # one call a turn, the default
    grammar = turn(sent)
    assert "<tool_call>" in grammar and "temperature" not in grammar


def test_none_is_the_answer(vllm_url: str) -> None:
    sent = Sent(vllm_grammar)
    with lmclient.Client(vllm_url, hooks=[sent], hook_content=True) as client:
        response = client.create(PROMPT, Answer, tools=[WEATHER], **NONE)
    assert_answer(response)
    grammar = turn(sent)
    assert "<tool_call>" not in grammar and "temperature" in grammar


def test_auto_is_one_or_the_other(vllm_url: str) -> None:
    sent = Sent(vllm_grammar)
    with lmclient.Client(vllm_url, hooks=[sent], hook_content=True) as client:
        response = client.create(PROMPT, Answer, tools=[WEATHER], **SMALL)
    if response.tool_calls:
        assert_calls(response)
    else:
        assert_answer(response)
    grammar = turn(sent)
    assert "<tool_call>" in grammar and "temperature" in grammar


async def test_async_a_named_tool_is_called(vllm_url: str) -> None:
    async with lmclient.AsyncClient(vllm_url) as client:
        response = await client.create(PROMPT, Answer, tools=[WEATHER], **NAMED)
    assert_calls(response)
