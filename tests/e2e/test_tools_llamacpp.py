"""Typed tools against the real llama.cpp server (build b11434, Gemma 3 270M).

What this build does with the Gemma 3 chat template of `make test`: that template renders no
tools, and llama.cpp's template analysis (its "differential autoparser", which replaced the
generic tool-call fallback of older builds) then finds no tool-call format, so the server
accepts ``tools`` and ``tool_choice="required"`` and ignores both: the prompt does not mention
the tools and the answer is plain text. Its /props says so (``chat_template_caps``), and
lmclient refuses tools there before sending. Given a Gemma 3 template that renders tools and
calls (the ``<tool_call>`` JSON format of Qwen 2.5's template, on Gemma's turns), the same
build parses the model's calls and grammar-constrains their arguments: the tests below run a
second server with it. The model's choices are not asserted (a 270M base model), only that
the call validates and that streaming assembles the same call.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

import lmclient
from lmclient import CallParams, Tool
from scripts import llamacpp

GEMMA3_TOOLS_TEMPLATE = """\
{{- bos_token }}
{%- if tools %}
    {{- '<start_of_turn>user\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] + '\\n\\n' }}
    {%- endif %}
    {{- "You may call functions. Their signatures are within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor a function call, return a json object with the function name and \
arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \
\\"arguments\\": <args-json-object>}\\n</tool_call><end_of_turn>\\n" }}
{%- elif messages[0]['role'] == 'system' %}
    {{- '<start_of_turn>user\\n' + messages[0]['content'] + '<end_of_turn>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == "user" or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<start_of_turn>' + ('model' if message.role == 'assistant' else 'user') + '\\n' \
+ message.content + '<end_of_turn>\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<start_of_turn>model' }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<end_of_turn>\\n' }}
    {%- elif message.role == "tool" %}
        {{- '<start_of_turn>user\\n<tool_response>\\n' + message.content \
+ '\\n</tool_response><end_of_turn>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<start_of_turn>model\\n' }}
{%- endif %}
"""
PROMPT = "What is the weather in Oslo?"
SMALL: CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 96}


class Weather(msgspec.Struct):
    """Get the weather for a city."""

    city: str


WEATHER = Tool(Weather, name="weather")
REQUIRED: CallParams = {**SMALL, "tools": [WEATHER], "tool_choice": "required"}
NONE: CallParams = {**SMALL, "tools": [WEATHER], "tool_choice": "none"}


@pytest.fixture(scope="module")
def tools_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    template = Path(tmp_path_factory.mktemp("template")) / "gemma3-tools.jinja"
    template.write_text(GEMMA3_TOOLS_TEMPLATE)
    llamacpp.ensure_installed()
    # The last --chat-template-file wins over the one `LlamaServer` always passes.
    with llamacpp.start_server(
        parallel=1, extra_args=["--chat-template-file", str(template)]
    ) as server:
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
