"""Checked by mypy --strict and pyright strict (basedpyright) in `make lint` and
tests/test_typing.py: what users write must type-check exactly. An expected error carries both
checkers' comments (mypy's ``type: ignore``, pyright's ``pyright: ignore``), and both report an
ignore that nothing needs, so every expected error is really raised by each."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal, Optional, Union

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
    assert_type(client.generate("x", Literal["yes", "no"]), Literal["yes", "no"])
    assert_type(client.create("x", Person, n=2), lmclient.Response[Person])
    assert_type(client.create("x", Person).values, list[Person])
    assert_type(client.stream("x", list[Person]), lmclient.Stream[list[Person]])
    assert_type(await aclient.generate("x", Person), Person)
    assert_type(await aclient.create("x", float, endpoint="completions"), lmclient.Response[float])
    with client.stream("x", list[Person]) as st:
        assert_type(next(st.items()), Person)  # items() yields the elements
    with client.stream("x", tuple[int, ...]) as numbers:
        assert_type(list(numbers.items()), list[int])
    async with aclient.stream("x", list[Person]) as s:
        assert_type(s, lmclient.AsyncStream[list[Person]])
        assert_type([p async for p in s.items()], list[Person])
    client.stream("x", Person).items()  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    assert_type(client.probe().dialect, str)
    assert_type((await aclient.probe()).models, list[str])
    client.generate("x", temperature=0.2, max_tokens=5, extra_body={"top_k": 3})
    client.generate("x", temprature=0.2)  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue]
    client.generate("x", n=2)  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue]


async def media(client: lmclient.Client, aclient: lmclient.AsyncClient) -> None:
    """A prompt may be a list of text and media parts, and a message's content likewise."""
    image = lmclient.Image.from_bytes(b"\x89PNG\r\n\x1a\n...")
    assert_type(image, lmclient.Image)
    assert_type(lmclient.Audio.from_path("clip.wav"), lmclient.Audio)
    assert_type(lmclient.Video.from_url("https://example.com/v.mp4"), lmclient.Video)
    assert_type(client.generate(["What is in it?", image], Person), Person)
    assert_type(await aclient.generate(["What is in it?", image]), str)
    messages = [{"role": "user", "content": ["Compare them.", image, image]}]
    assert_type(client.generate(messages, bool), bool)
    client.generate(["x", 3])  # type: ignore[list-item]  # pyright: ignore[reportArgumentType]


async def output_types(client: lmclient.Client, aclient: lmclient.AsyncClient) -> None:
    """Every type form infers its value's type (PEP 747 ``TypeForm``); markers give ``str``, a
    ``JsonSchema`` ``Any``; a value that is not a type is an error."""
    assert_type(client.generate("x", Optional[int]), Optional[int])
    assert_type(client.generate("x", int | None), Optional[int])
    assert_type(client.generate("x", Union[int, str]), Union[int, str])
    assert_type(client.generate("x", Annotated[int, msgspec.Meta(ge=0)]), int)
    assert_type(client.generate("x", list[Literal["a", "b"]]), list[Literal["a", "b"]])
    assert_type(client.generate("x", Any), Any)
    assert_type(client.complete("x", Literal[1, 2]), Literal[1, 2])
    assert_type(client.create("x", Optional[Person]).value, Optional[Person])
    assert_type(await aclient.generate("x", Literal["yes", "no"]), Literal["yes", "no"])
    assert_type(await aclient.generate("x", Optional[Person]), Optional[Person])
    assert_type(await aclient.create("x", Union[int, str]), lmclient.Response[Union[int, str]])
    assert_type(client.stream("x", Literal["a"]), lmclient.Stream[Literal["a"]])
    assert_type(client.generate("x", lmclient.Choice(["a", "b"])), str)
    assert_type(client.generate("x", lmclient.JsonSchema({"type": "integer"})), Any)
    tagged = client.generate("x", lmclient.Tagged(Person))
    assert_type(tagged, lmclient.TaggedText[Person])
    assert_type(tagged.value, Person)
    assert_type(tagged.regions[0].value, Person)
    assert_type(tagged.values, list[Person])
    assert_type(
        client.create("x", lmclient.Tagged(Literal["a", "b"], "pick")).value,
        lmclient.TaggedText[Literal["a", "b"]],
    )
    assert_type(
        await aclient.generate("x", lmclient.Tagged(int, at_most=None)), lmclient.TaggedText[int]
    )
    assert_type(client.stream("x", lmclient.Tagged(str)), lmclient.Stream[lmclient.TaggedText[str]])
    client.generate("x", 42)  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue, reportArgumentType]
    client.complete("x", 1.5)  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue, reportArgumentType]
    client.create("x", [int])  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue, reportArgumentType]
    await aclient.generate("x", 42)  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue, reportArgumentType]
    aclient.stream("x", 3.5)  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue, reportArgumentType]


class Mood(enum.Enum):
    HAPPY = "happy"
    SAD = "sad"


async def probabilities(client: lmclient.Client, aclient: lmclient.AsyncClient) -> None:
    """`Response.probabilities` is keyed by the output type: a Literal's options, an Enum's
    members, bool's two values, a Choice's strings; ``probabilities`` is create()'s only."""
    answer = client.create("x", Literal["a", "b"], probabilities=True)
    assert_type(answer.probabilities, dict[Literal["a", "b"], float])
    mood = await aclient.create("x", Mood, probabilities=True)
    assert_type(mood.probabilities, dict[Mood, float])
    assert_type(client.create("x", bool, probabilities=True).probabilities, dict[bool, float])
    choice = client.create("x", lmclient.Choice(["a", "b"]), probabilities=True)
    assert_type(choice.probabilities, dict[str, float])
    client.generate("x", bool, probabilities=True)  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue]
