"""Tool calls are typed by their tools (mypy --strict and pyright strict, as
tests/typing/usage.py): ``create(..., tools=[weather])`` with ``weather: Tool[Weather]`` gives
calls whose ``arguments`` are a ``Weather``, a misspelt attribute of them an error, and so does
``stream(..., tools=[weather])``; a response or stream written with one parameter has calls of
``object`` arguments, which `Tool.match` narrows."""

from __future__ import annotations

from typing import Any, TypedDict

import msgspec
from typing_extensions import assert_type

import lmclient


class Weather(msgspec.Struct):
    """Get the weather for a city."""

    city: str


class Time(TypedDict):
    zone: str


def local_time(zone: str) -> str:
    return zone


async def tools(client: lmclient.Client, aclient: lmclient.AsyncClient) -> None:
    weather = lmclient.Tool(Weather)
    assert_type(weather, lmclient.Tool[Weather])
    r = client.create("Weather in Oslo?", tools=[weather], tool_choice="required")
    assert_type(r, lmclient.Response[str, Weather])
    assert_type(r.tool_calls[0].arguments, Weather)
    assert_type(r.tool_calls[0].arguments.city, str)
    assert_type(r.value, str)
    _ = r.tool_calls[0].arguments.no_such_attr  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    a = await aclient.create("Weather in Oslo?", tools=[weather], n=2, temperature=0)
    assert_type(a.tool_calls[0].arguments, Weather)
    _ = a.tool_calls[0].arguments.no_such_attr  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    client.create("x", tools=[weather], temprature=0.2)  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue]
    # several tools: their arguments' common type (pyright: the union; mypy: the join)
    both = client.create("x", tools=[weather, lmclient.Tool(Time)])
    _ = both.tool_calls[0].arguments.city  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    for call in both.tool_calls:
        named = weather.match(call)
        if named is not None:
            assert_type(named.arguments, Weather)
    # a function's tool: its arguments are a Struct made at run time
    assert_type(
        client.create("x", tools=[lmclient.Tool.from_function(local_time)]),
        lmclient.Response[str, Any],
    )


async def streamed(client: lmclient.Client, aclient: lmclient.AsyncClient) -> None:
    """A stream with tools types its calls the same way, as they close and once it has ended."""
    weather = lmclient.Tool(Weather)
    with client.stream("Weather in Oslo?", tools=[weather]) as s:
        assert_type(s, lmclient.Stream[str, Weather])
        for call in s.calls():
            assert_type(call.arguments, Weather)
        assert_type(s.tool_calls[0].arguments.city, str)
        _ = s.tool_calls[0].arguments.no_such_attr  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    async with aclient.stream("Weather in Oslo?", tools=[weather], max_tokens=64) as a:
        assert_type([c.arguments async for c in a.calls()], list[Weather])
    with client.stream("x") as text:
        assert_type(text, lmclient.Stream[str])
        assert_type(text.tool_calls[0].arguments, object)


def narrowed(response: lmclient.Response[str], weather: lmclient.Tool[Weather]) -> str:
    """One parameter, as before: calls of ``object`` arguments, never ``Any``."""
    call = response.tool_calls[0]
    assert_type(call.arguments, object)
    _ = call.arguments.city  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    matched = weather.match(call)
    return "" if matched is None else matched.arguments.city


def calls_of(stream: lmclient.Stream[str]) -> tuple[lmclient.ToolCall[object], ...]:
    return stream.tool_calls


def passed_on(client: lmclient.Client, weather: lmclient.Tool[Weather]) -> str:
    """A typed response is still a `Response[str]`, a typed stream a `Stream[str]`: a function
    that takes one accepts it."""
    calls_of(client.stream("x", tools=[weather]))
    return narrowed(client.create("x", tools=[weather]), weather)


class Forecast(msgspec.Struct):
    temperature: int
    summary: str


async def turn(client: lmclient.Client, aclient: lmclient.AsyncClient) -> None:
    """A typed turn (tools beside an output type): the calls typed by their tools, the value
    by the output type, in one response; a stream the same."""
    weather = lmclient.Tool(Weather)
    r = client.create("Weather in Oslo?", Forecast, tools=[weather])
    assert_type(r, lmclient.Response[Forecast, Weather])
    assert_type(r.tool_calls[0].arguments.city, str)
    assert_type(r.value.temperature, int)
    _ = r.value.no_such_attr  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    a = await aclient.create("Weather in Oslo?", Forecast, tools=[weather], tool_choice="auto")
    assert_type(a, lmclient.Response[Forecast, Weather])
    with client.stream("Weather in Oslo?", Forecast, tools=[weather]) as s:
        assert_type(s, lmclient.Stream[Forecast, Weather])
        for call in s.calls():
            assert_type(call.arguments, Weather)
    async with aclient.stream("Weather in Oslo?", Forecast, tools=[weather]) as t:
        assert_type(t, lmclient.AsyncStream[Forecast, Weather])
