"""What a test of an agent asserts on the requests the fake recorded: the tools offered and the
results sent back."""

from __future__ import annotations

import msgspec

import lmclient
from lmclient import Tool
from lmclient.testing import FakeLLM


class Weather(msgspec.Struct):
    """The weather in a city."""

    city: str


def test_the_tools_offered_and_the_results_sent_back() -> None:
    weather = Tool(Weather, name="weather")
    fake = FakeLLM(server="vllm")
    with fake.serve() as url, lmclient.Client(url, "fake-model") as client:
        first = client.create("Weather in Oslo?", tools=[weather], tool_choice="required")
        [call] = first.tool_calls
        messages = [{"role": "user", "content": "Weather in Oslo?"}, first.message]
        client.create([*messages, call.result("sunny")], tools=[weather])
    asked, answered = fake.calls
    assert asked.tools == answered.tools == ["weather"]
    assert asked.texts("tool") == [] and answered.texts("tool") == ["sunny"]
    assert fake.calls[0].body["tool_choice"] == "required"
