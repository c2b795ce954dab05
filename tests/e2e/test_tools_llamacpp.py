"""Typed tools against the real llama.cpp server (build b11434, Gemma 3 270M).

What this build does with the Gemma 3 chat template of `make test`: that template renders no
tools, and llama.cpp's template analysis (its "differential autoparser", which replaced the
generic tool-call fallback of older builds) then finds no tool-call format, so the server
accepts ``tools`` and ``tool_choice="required"`` and ignores both: the prompt does not mention
the tools and the answer is plain text. Its /props says so (``chat_template_caps``), and
lmclient refuses tools there before sending. Given a Gemma 3 template that renders tools and
calls (the ``<tool_call>`` JSON format of Qwen 2.5's template, on Gemma's turns: the project's
own, ``scripts/llamacpp.py``'s ``GEMMA_TOOLS_TEMPLATE``), the same build parses the model's
calls and grammar-constrains their arguments: the tests below run a second server with it
(``start_server(tools=True)``). The model's choices are not asserted (a 270M base model), only
that the call validates and that streaming assembles the same call.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest

import lmclient
from lmclient import CallParams, Tool
from scripts import llamacpp

PROMPT = "What is the weather in Oslo?"
SMALL: CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 96}


class Weather(msgspec.Struct):
    """Get the weather for a city."""

    city: str


WEATHER = Tool(Weather, name="weather")
REQUIRED: CallParams = {**SMALL, "tools": [WEATHER], "tool_choice": "required"}
NONE: CallParams = {**SMALL, "tools": [WEATHER], "tool_choice": "none"}


@pytest.fixture(scope="module")
def tools_url() -> Iterator[str]:
    llamacpp.ensure_installed()
    with llamacpp.start_server(parallel=1, tools=True) as server:
        yield server.base_url


def test_required_tool_call_validates(tools_url: str) -> None:
    with lmclient.Client(tools_url) as client:
        assert client.server_info is None or client.server_info.tools is not False
        response = client.create(PROMPT, **REQUIRED)
    assert client.server_info is not None and client.server_info.tools is True
    assert response.tool_calls, f"no tool call: {response.text!r}"
    call = response.tool_calls[0]
    assert call.name == "weather" and isinstance(call.arguments, Weather)
    assert msgspec.json.decode(call.raw_arguments) == msgspec.to_builtins(call.arguments)


def test_streamed_tool_call_assembles_into_the_same_value(tools_url: str) -> None:
    with lmclient.Client(tools_url) as client:
        whole = client.create(PROMPT, **REQUIRED)
        with client.stream(PROMPT, **REQUIRED) as stream:
            streamed = list(stream.calls())  # each call as soon as its arguments close
            assert tuple(streamed) == stream.tool_calls
    assert whole.tool_calls
    assert [(c.name, c.arguments) for c in streamed] == [
        (c.name, c.arguments) for c in whole.tool_calls
    ]


def test_the_result_goes_back(tools_url: str) -> None:
    """The call and its result, sent back as messages, are a request the server takes."""
    with lmclient.Client(tools_url) as client:
        first = client.create(PROMPT, **REQUIRED)
        [call, *_] = first.tool_calls
        messages = [{"role": "user", "content": PROMPT}, first.message, call.result("sunny")]
        second = client.create(messages, **NONE)
    assert second.tool_calls == ()


async def test_the_gemma_template_without_tools_is_refused(base_url: str) -> None:
    """The session's server (the Gemma 3 template, no tools): refused before sending."""
    async with lmclient.AsyncClient(base_url) as client:
        with pytest.raises(lmclient.UnsupportedConstraintError, match="chat_template_caps"):
            await client.create(PROMPT, **REQUIRED)
