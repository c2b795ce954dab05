"""Many calls: `generate_many` / `complete_many` on both clients, over real sockets."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import msgspec
import pytest

import lmclient
from lmclient.testing import FakeLLM
from tests.helpers import checked_out


class Person(msgspec.Struct):
    name: str
    age: int


def pinned(i: int) -> tuple[str, lmclient.Regex]:
    """An item whose only valid answer is its own index: order is then checkable."""
    return (f"item {i}", lmclient.Regex(f"item{i}"))


@pytest.mark.slow  # ~11 s on 2 cores
async def test_10000_calls_at_concurrency_256_in_order_and_never_more_in_flight() -> None:
    lock = threading.Lock()
    arrived = 0
    full = threading.Event()

    def hold(request: Any) -> None:  # the first 256 wait until all 256 are in flight together
        nonlocal arrived
        if request.endpoint != "chat":
            return
        with lock:
            arrived += 1
            if arrived == 256:
                full.set()
        assert full.wait(60), "fewer than 256 requests were ever in flight together"

    fake = FakeLLM(on_request=hold)
    items = [pinned(i) for i in range(10_000)]
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            values = await client.generate_many(items, concurrency=256)
            assert checked_out(client) == 0
    assert values == [f"item{i}" for i in range(10_000)]
    assert fake.max_in_flight == 256


def test_sync_return_exceptions_keeps_every_other_value() -> None:
    fake = FakeLLM()
    fake.reply_error(400, "rejected", times=None, when="fail")
    failing = set(range(0, 100, 20))  # 5 % of the items
    items = [
        (f"fail {i}" if i in failing else f"ok {i}", lmclient.Regex(f"v{i}")) for i in range(100)
    ]
    seen: list[int] = []
    with fake.serve() as url, lmclient.Client(url) as client:
        results = client.generate_many(
            items, concurrency=8, return_exceptions=True, on_result=lambda i, _: seen.append(i)
        )
    for i, result in enumerate(results):
        if i in failing:
            assert isinstance(result, lmclient.BadRequestError)
        else:
            assert result == f"v{i}"
    assert sorted(seen) == list(range(100))


def test_sync_first_failure_is_raised_and_the_rest_cancelled() -> None:
    fake = FakeLLM()
    fake.reply_error(400, "rejected", times=None, when="fail")
    items = ["fail 0", *[f"ok {i}" for i in range(1, 200)]]
    with fake.serve() as url, lmclient.Client(url) as client:
        with pytest.raises(lmclient.BadRequestError):
            client.generate_many(items, concurrency=2)
        assert checked_out(client) == 0
    assert len([r for r in fake.requests if r.endpoint == "chat"]) < 200


async def test_async_mixed_types_and_completions() -> None:
    fake = FakeLLM()
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            values = await client.generate_many([("a", int), ("b", Person), "c"], bool)
            completed = await client.complete_many(["x", "y"], int, concurrency=1)
    assert [type(v) for v in values] == [int, Person, bool]
    assert [type(v) for v in completed] == [int, int]
    assert [r.endpoint for r in fake.requests if r.method == "POST"].count("completions") == 2


async def test_cancelling_the_caller_cancels_every_request_in_flight() -> None:
    release = threading.Event()
    started = threading.Semaphore(0)

    def hold(request: Any) -> None:
        if request.endpoint == "chat":
            started.release()
            release.wait(10)

    fake = FakeLLM(on_request=hold)
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            task = asyncio.ensure_future(
                client.generate_many([f"p{i}" for i in range(50)], concurrency=8)
            )
            for _ in range(8):  # all eight workers are waiting on the server
                await asyncio.to_thread(started.acquire, True, 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            release.set()
            assert checked_out(client) == 0
            assert await client.generate("still usable?") == fake.default_text
    assert len([r for r in fake.requests if r.endpoint == "chat"]) == 9


@pytest.mark.parametrize("bad", [{"concurrency": 0}, {"concurrency": 1.5}, {"temprature": 1}])
def test_bad_arguments_raise_before_any_request(bad: dict[str, Any]) -> None:
    fake = FakeLLM()
    with fake.serve() as url, lmclient.Client(url) as client:
        with pytest.raises((TypeError, ValueError)):
            client.generate_many(["a", "b"], **bad)
        with pytest.raises(TypeError):
            client.generate_many("just one prompt")
        with pytest.raises(TypeError):
            client.generate_many(["ok", ("bad", object)])
    assert fake.requests == []
