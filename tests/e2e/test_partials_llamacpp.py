"""`partials()` and `fields()` against the real llama.cpp server: a long string shows as it
grows, across many snapshots, before the object closes; whole fields arrive one by one.

The model's content is not asserted (a 270M base model), only how it arrives: prefixes that
grow while the object is still being generated, and snapshots that add up to the value.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

import msgspec

import lmclient
from lmclient import CallParams

SMALL: CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 256}


class Pet(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=16)]
    species: Literal["cat", "dog", "bird"]
    age: Annotated[int, msgspec.Meta(ge=0, le=30)]


class Story(msgspec.Struct):
    title: Annotated[str, msgspec.Meta(min_length=1, max_length=40)]
    text: Annotated[str, msgspec.Meta(min_length=60, max_length=200)]


def check(seen: list[tuple[dict[str, Any], str]], value: Pet, text: str) -> None:
    assert seen, "no snapshot"
    first, text_then = seen[0]
    assert len(first) < 3 and len(text_then) < len(text), "the first snapshot came at the end"
    assert text.startswith(text_then)
    assert seen[-1][0] == {f: getattr(value, f) for f in Pet.__struct_fields__}


def test_fields_sync_chat(base_url: str) -> None:
    with lmclient.Client(base_url) as client, client.stream("Invent a pet.", Pet, **SMALL) as s:
        seen = [(snapshot, s.text) for snapshot in s.fields()]
        check(seen, s.value, s.text)


async def test_fields_async_completions(base_url: str) -> None:
    async with (
        lmclient.AsyncClient(base_url) as client,
        client.stream("A pet as JSON:", Pet, endpoint="completions", **SMALL) as s,
    ):
        seen = [(snapshot, s.text) async for snapshot in s.fields()]
    check(seen, s.value, s.text)


def check_growing(seen: list[lmclient.Partial[Story]], story: Story) -> None:
    """The story's text grows over at least three snapshots, each a longer prefix of the text
    the stream validated, while the object is still open."""
    texts = [s.value["text"] for s in seen if "text" in s.value and not s.done]
    growing = [t for t in dict.fromkeys(texts) if t]
    assert len(growing) >= 3, growing
    assert all(b.startswith(a) and len(b) > len(a) for a, b in itertools.pairwise(growing))
    assert story.text.startswith(growing[-1])
    assert all(("text",) in s.incomplete for s in seen if s.value.get("text") in growing[:-1])
    assert seen[-1].done and seen[-1].value == msgspec.to_builtins(story)


def test_partials_sync_chat_a_growing_string(base_url: str) -> None:
    with (
        lmclient.Client(base_url) as client,
        client.stream("Write a short story.", Story, **SMALL) as s,
    ):
        seen = list(s.partials())
        check_growing(seen, s.value)


async def test_partials_async_completions_a_growing_string(base_url: str) -> None:
    async with (
        lmclient.AsyncClient(base_url) as client,
        client.stream("A story as JSON:", Story, endpoint="completions", **SMALL) as s,
    ):
        seen = [snapshot async for snapshot in s.partials()]
    check_growing(seen, s.value)
