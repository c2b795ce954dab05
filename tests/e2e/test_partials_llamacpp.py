"""`partials()` against the real llama.cpp server: a snapshot arrives before the object closes.

The model's content is not asserted (a 270M base model), only that the fields arrive one by one
while the object is still being generated, each validated, and that they add up to the value.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

import lmclient
from lmclient import CallParams

SMALL: CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 256}


class Pet(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=16)]
    species: Literal["cat", "dog", "bird"]
    age: Annotated[int, msgspec.Meta(ge=0, le=30)]


def check(seen: list[tuple[dict[str, Any], str]], value: Pet, text: str) -> None:
    assert seen, "no snapshot"
    first, text_then = seen[0]
    assert len(first) < 3 and len(text_then) < len(text), "the first snapshot came at the end"
    assert text.startswith(text_then)
    assert seen[-1][0] == {f: getattr(value, f) for f in Pet.__struct_fields__}


def test_partials_sync_chat(base_url: str) -> None:
    with lmclient.Client(base_url) as client, client.stream("Invent a pet.", Pet, **SMALL) as s:
        seen = [(snapshot, s.text) for snapshot in s.partials()]
        check(seen, s.value, s.text)


async def test_partials_async_completions(base_url: str) -> None:
    async with (
        lmclient.AsyncClient(base_url) as client,
        client.stream("A pet as JSON:", Pet, endpoint="completions", **SMALL) as s,
    ):
        seen = [(snapshot, s.text) async for snapshot in s.partials()]
    check(seen, s.value, s.text)
