"""A closed client refuses every call and stream with `ClientClosedError` (a RuntimeError, as
httpx's refusal), sync and async, before any request: it never reopens a connection."""

from __future__ import annotations

import httpx
import pytest

import lmclient
from lmclient.testing import FakeLLM


def test_a_closed_client_refuses_every_call() -> None:
    fake = FakeLLM()
    with fake.serve() as url:
        with lmclient.Client(url) as client:
            assert client.generate("Q")
        sent = len(fake.requests)
        for call in (
            lambda: client.generate("Q"),
            lambda: client.complete("Q"),
            lambda: client.create("Q"),
            lambda: "".join(client.stream("Q")),
            lambda: client.generate_many(["a", "b"]),
            lambda: client.models(),
            lambda: client.embed(["a"]),
            lambda: client.tokenize("a"),
        ):
            with pytest.raises(lmclient.ClientClosedError, match="closed"):
                call()
        assert len(fake.requests) == sent  # nothing sent, no connection opened
        client.close()  # closing twice is fine


def test_a_client_closed_before_its_first_call_learns_nothing() -> None:
    fake = FakeLLM()
    with fake.serve() as url:
        client = lmclient.Client(url)
        client.close()
        with pytest.raises(RuntimeError):  # as httpx's closed client
            client.generate("Q")
        assert client.dialect == "auto" and client.server_info is None
    assert fake.requests == []


def test_a_closed_client_with_a_users_http_client_refuses_too() -> None:
    fake = FakeLLM()
    with fake.serve() as url, httpx.Client() as http:
        client = lmclient.Client(url, model="m", dialect="vllm", http_client=http)
        client.close()
        with pytest.raises(lmclient.ClientClosedError):
            client.generate("Q")
        assert not http.is_closed  # the user's client stays theirs
    assert fake.requests == []


async def test_a_closed_async_client_refuses_every_call() -> None:
    fake = FakeLLM()
    with fake.serve() as url:
        async with lmclient.AsyncClient(url) as client:
            assert await client.generate("Q")
        sent = len(fake.requests)
        with pytest.raises(lmclient.ClientClosedError):
            await client.generate("Q")
        with pytest.raises(lmclient.ClientClosedError):
            await client.create("Q")
        with pytest.raises(lmclient.ClientClosedError):
            "".join([d async for d in client.stream("Q")])
        with pytest.raises(lmclient.ClientClosedError):
            await client.generate_many(["a", "b"])
        with pytest.raises(lmclient.ClientClosedError):
            await client.models()
        with pytest.raises(lmclient.ClientClosedError):
            await client.embed(["a"])
        assert len(fake.requests) == sent
        await client.aclose()


async def test_an_async_client_closed_before_its_first_call_learns_nothing() -> None:
    fake = FakeLLM()
    with fake.serve() as url:
        client = lmclient.AsyncClient(url)
        await client.aclose()
        with pytest.raises(RuntimeError):
            await client.generate("Q")
        assert client.dialect == "auto"
    assert fake.requests == []
