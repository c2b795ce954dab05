"""What the typed-turn e2e tests share (tests/e2e/test_turn_llamacpp.py, test_turn_vllm.py): the
question, the tool and the answer's types, bounded so that no turn runs long; the hook that
keeps what reached the server; and the checks of the two shapes a turn's answer takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import msgspec
import pytest

import lmclient
from lmclient import NoValueError, Tool

PROMPT = 'What is the weather in Oslo? Answer as JSON, like {"temperature": 20, "summary": "sun"}.'

City = Annotated[str, msgspec.Meta(max_length=40)]


class Weather(msgspec.Struct):
    """Get the weather for a city."""

    city: City


class Answer(msgspec.Struct):
    temperature: Annotated[int, msgspec.Meta(ge=-90, le=60)]
    summary: Annotated[str, msgspec.Meta(max_length=40)]


WEATHER = Tool(Weather, name="weather")


class Sent:
    """A hook keeping the body of each request the client sends (``hook_content=True``);
    ``grammar`` finds a body's grammar where its server reads it."""

    def __init__(self, grammar: Callable[[dict[str, Any]], Any]) -> None:
        self.bodies: list[dict[str, Any] | None] = []
        self.grammar = grammar

    def __call__(self, event: lmclient.HookEvent) -> None:
        if isinstance(event, lmclient.RequestSent):  # a hook's failure would not fail the call
            self.bodies.append(None if event.body is None else msgspec.json.decode(event.body))

    def turns(self) -> list[dict[str, Any]]:
        """The bodies sent, each checked to be a typed turn's (what reached the server)."""
        bodies = [body for body in self.bodies if body is not None]
        assert len(bodies) == len(self.bodies), "a RequestSent without its body"
        for body in bodies:
            assert body["tool_choice"] == "none", body["tool_choice"]
            assert [tool["function"]["name"] for tool in body["tools"]] == ["weather"]
            grammar = self.grammar(body)
            assert isinstance(grammar, str) and grammar.startswith("root ::="), grammar
        return bodies


def assert_calls(response: lmclient.Response[Answer, Weather]) -> None:
    assert response.tool_calls, f"no call: {response.text!r}"
    for call in response.tool_calls:
        assert call.name == "weather" and isinstance(call.arguments, Weather)
        assert msgspec.json.decode(call.raw_arguments) == msgspec.to_builtins(call.arguments)
    assert response.values == []
    with pytest.raises(NoValueError):
        response.value  # noqa: B018


def assert_answer(response: lmclient.Response[Answer, Weather]) -> None:
    assert response.tool_calls == (), response.text
    assert isinstance(response.value, Answer), response.text
    assert response.values == [response.value]
