"""`partials()` is typed (mypy --strict and pyright strict, as tests/typing/usage.py): each
snapshot is a `Partial` of the output type, never `Any`, for every kind of object output; the
whole fields of `fields()` keep their old types."""

from __future__ import annotations

import dataclasses
from typing import Any, TypedDict

import msgspec
import pydantic
from typing_extensions import assert_type

import lmclient


class Point(msgspec.Struct):
    x: int
    y: int


@dataclasses.dataclass
class Pet:
    name: str


class Movie(TypedDict):
    title: str


class Owner(pydantic.BaseModel):
    name: str


async def partials(client: lmclient.Client, aclient: lmclient.AsyncClient) -> None:
    with client.stream("x", Point) as s:
        for snapshot in s.partials():
            assert_type(snapshot, lmclient.Partial[Point])
            assert_type(snapshot.value, dict[str, Any])
            assert_type(snapshot.done, bool)
            assert_type(snapshot.incomplete, tuple[tuple[str | int, ...], ...])
            assert_type(snapshot.complete("x"), bool)
        assert_type(s.value, Point)
    with client.stream("x", Pet) as pets:
        assert_type(next(pets.partials()), lmclient.Partial[Pet])
    with client.stream("x", Movie) as movies:
        assert_type(next(movies.partials()), lmclient.Partial[Movie])
    with client.stream("x", Owner) as owners:
        assert_type(next(owners.partials()), lmclient.Partial[Owner])
    with client.stream("x", dict[str, int]) as counts:
        assert_type(next(counts.partials()), lmclient.Partial[dict[str, int]])
        assert_type(next(counts.fields()), dict[str, int])
    with client.stream("x", Point) as points:
        assert_type(next(points.fields()), dict[str, Any])
    async with aclient.stream("x", Point) as a:
        assert_type([p async for p in a.partials()], list[lmclient.Partial[Point]])
        assert_type([f async for f in a.fields()], list[dict[str, Any]])
    async with aclient.stream("x", Owner) as b:
        async for owned in b.partials():
            assert_type(owned, lmclient.Partial[Owner])
