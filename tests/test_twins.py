"""`Client` and `AsyncClient` have the same public surface: the same methods and properties,
each with the same parameters (names, kinds, defaults, annotations) and return annotation, read
with the async names in place of the sync ones. Their bodies are held together by
``scripts/twins.py`` (in ``make lint``)."""

from __future__ import annotations

import inspect
import re

import pytest

import lmclient

SYNC_NAMES = [
    ("AsyncStream", "Stream"),
    ("AsyncOpened", "Opened"),
    ("httpx.AsyncClient", "httpx.Client"),
    ("Awaitable[", "["),
]
NOT_AWAITED = {"__init__", "stream"}  # `stream` returns an AsyncStream, used with async with
RENAMED = {"aclose": "close", "__aenter__": "__enter__", "__aexit__": "__exit__"}


def public(cls: type) -> dict[str, object]:
    return {
        RENAMED.get(name, name): member
        for name, member in vars(cls).items()
        if not name.startswith("_") or name in ("__init__", *RENAMED, "__enter__", "__exit__")
    }


def described(member: object, *, unasync: bool) -> str:
    if isinstance(member, property):
        member = member.fget
    text = str(inspect.signature(member))  # type: ignore[arg-type]
    if unasync:
        for async_name, sync_name in SYNC_NAMES:
            text = text.replace(async_name, sync_name)
    return re.sub(r"\s+", " ", text)


def test_the_same_members() -> None:
    assert sorted(public(lmclient.AsyncClient)) == sorted(public(lmclient.Client))


@pytest.mark.parametrize("name", sorted(public(lmclient.Client)))
def test_the_same_signature(name: str) -> None:
    sync = public(lmclient.Client)[name]
    aio = public(lmclient.AsyncClient)[name]
    assert isinstance(sync, property) == isinstance(aio, property)
    assert described(aio, unasync=True) == described(sync, unasync=False)
    if name not in NOT_AWAITED and not isinstance(sync, property):
        assert inspect.iscoroutinefunction(aio), f"AsyncClient.{name} should be awaited"
        assert not inspect.iscoroutinefunction(sync)
