"""`Client` and `AsyncClient` have the same public surface: the same methods and properties,
each with the same parameters (names, kinds, defaults, annotations) and return annotation, read
with the async names in place of the sync ones. Their bodies are held together by
``scripts/twins.py`` (in ``make lint``)."""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

import lmclient

SYNC_NAMES = [
    ("AsyncStream", "Stream"),
    ("AsyncOpened", "Opened"),
    ("httpx.AsyncClient", "httpx.Client"),
    ("Awaitable[", "["),
]
NOT_AWAITED = {"__init__", "stream"}  # `stream` returns an AsyncStream, used with async with
ROOT = Path(__file__).resolve().parents[1]
RENAMED = {"aclose": "close", "__aenter__": "__enter__", "__aexit__": "__exit__"}


def public(cls: type) -> dict[str, object]:
    """The class's public members, its mixins' included (`rerank`, ... come from one)."""
    return {
        RENAMED.get(name, name): member
        for klass in reversed(cls.__mro__[:-1])
        for name, member in vars(klass).items()
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


# -- the transports: `SyncTransport` and `AsyncTransport` -----------------------------------------


def twins_script() -> ModuleType:
    """``scripts/twins.py`` (``make lint`` runs it), loaded as a module."""
    spec = importlib.util.spec_from_file_location("twins", ROOT / "scripts" / "twins.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["twins"] = module  # (its NamedTuple looks its module up)
    spec.loader.exec_module(module)
    return module


TRANSPORT_NAMES = [
    ("AsyncStreamResponse", "StreamResponse"),
    ("AsyncTransport", "SyncTransport"),
    ("httpx.AsyncClient", "httpx.Client"),
]


def test_the_transports_have_the_same_surface() -> None:
    from lmclient._transports.aio import AsyncTransport
    from lmclient._transports.sync import SyncTransport

    sync, aio = public(SyncTransport), public(AsyncTransport)
    assert sorted(aio) == sorted(sync)
    for name in sync:
        text = described(aio[name], unasync=False)
        for async_name, sync_name in TRANSPORT_NAMES:
            text = text.replace(async_name, sync_name)
        text = re.sub(r"Awaitable\[(\w+)\]", r"\1", text)  # `send`: not a coroutine itself
        assert text == described(sync[name], unasync=False), name


def test_each_pair_differs_only_where_its_diff_file_says() -> None:
    """What ``make lint`` checks, for every pair: the clients, their scoring methods and the
    transports."""
    twins = twins_script()
    assert {pair.twin for pair in twins.PAIRS} == {
        "lmclient/_client.py",
        "lmclient/_scoring_client.py",
        "lmclient/_transports/sync.py",
    }
    assert twins.drifted() == []


def test_a_change_to_one_transport_alone_is_caught(tmp_path: Path) -> None:
    """A change made to the sync transport and not to the async one (or the other way round)
    fails the check, naming the pair and showing the change."""
    twins = twins_script()
    for pair in twins.PAIRS:
        for name in (pair.source, pair.twin, pair.expected):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text((ROOT / name).read_text())
    assert twins.drifted(tmp_path) == []
    sync = tmp_path / "lmclient/_transports/sync.py"
    text = sync.read_text()
    changed = "limiter.head(response.headers, declared_length(response.headers))"
    assert text.count(changed) == 2  # (the whole response's and the stream's)
    sync.write_text(text.replace(changed, "limiter.head(response.headers, None)", 1))
    (apart,) = twins.drifted(tmp_path)
    assert apart[0].twin == "lmclient/_transports/sync.py"
    assert "+                limiter.head(response.headers, None)" in apart[1]


def test_the_same_edit_to_both_twins_passes(tmp_path: Path) -> None:
    """An edit made alike to both twins (an import each) moves the diff's hunks, not what
    differs: the check passes without the diff file being written again."""
    twins = twins_script()
    for pair in twins.PAIRS:
        for name in (pair.source, pair.twin, pair.expected):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text((ROOT / name).read_text())
        for name in (pair.source, pair.twin):
            text = (tmp_path / name).read_text()
            (tmp_path / name).write_text(text.replace("\n\n", "\n\nimport zlib\n\n", 1))
        expected = (tmp_path / pair.expected).read_text()
        if expected:  # (a pair that differs nowhere has no hunk to move)
            assert twins.difference(pair, tmp_path) != expected
    assert twins.drifted(tmp_path) == []
