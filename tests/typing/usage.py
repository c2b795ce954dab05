"""Checked by mypy --strict in tests/test_typing.py: what users write must type-check exactly."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from typing_extensions import assert_type

import lmclient


class Person(msgspec.Struct):
    name: str
    age: int


async def usage(client: lmclient.Client, aclient: lmclient.AsyncClient) -> None:
    assert_type(client.generate("Invent a person.", Person), Person)
    assert_type(client.generate("Hi"), str)
    assert_type(client.complete("2 + 2 =", int), int)
    assert_type(client.generate("x", lmclient.Regex("a+")), str)
    assert_type(client.generate("x", Literal["yes", "no"]), Any)
    assert_type(client.create("x", Person, n=2), lmclient.Response[Person])
    assert_type(client.create("x", Person).values, list[Person])
    assert_type(client.stream("x", list[Person]), lmclient._stream.Stream[list[Person]])
    assert_type(await aclient.generate("x", Person), Person)
    assert_type(await aclient.create("x", float, endpoint="completions"), lmclient.Response[float])
    with client.stream("x", list[Person]) as st:
        assert_type(next(st.items()), Person)  # items() yields the elements
    with client.stream("x", tuple[int, ...]) as numbers:
        assert_type(list(numbers.items()), list[int])
    async with aclient.stream("x", list[Person]) as s:
        assert_type(s, lmclient._stream.AsyncStream[list[Person]])
        assert_type([p async for p in s.items()], list[Person])
    client.stream("x", Person).items()  # type: ignore[misc]  # not an array: no items
    assert_type(client.probe().dialect, str)
    assert_type((await aclient.probe()).models, list[str])
    client.generate("x", temperature=0.2, max_tokens=5, extra_body={"top_k": 3})
    client.generate("x", temprature=0.2)  # type: ignore[call-overload]
    client.generate("x", n=2)  # type: ignore[call-overload]
