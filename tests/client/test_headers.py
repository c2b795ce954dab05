"""Response headers (`lmclient.Headers`): rate limits and request ids readable on a call's
`Response`, an open stream, an `APIStatusError` and the `ResponseHead` hook event; names
case-insensitive, the mapping read-only; sync and async, over lmclient's own transport on real
sockets, a user's httpx client on real sockets, and a respx mock (httpx's transport)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import pytest

import lmclient
from lmclient.testing import FakeLLM
from tests.helpers import chat_body

MODEL = "fake-model"
SENT = {
    "X-RateLimit-Remaining-Requests": "9",
    "X-RateLimit-Reset-Tokens": "6ms",
    "X-Request-Id": "req-abc",
    "OpenAI-Processing-MS": "12",
}
KINDS = ["own", "http_client", "respx"]


def sse(*texts: str) -> bytes:
    """A chat stream of ``texts``, then a finish and ``[DONE]``."""
    events = [{"choices": [{"index": 0, "delta": {"content": t}}]} for t in texts]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    lines = [f"data: {json.dumps(e)}\n\n" for e in events]
    return ("".join(lines) + "data: [DONE]\n\n").encode()


def answer(fake: FakeLLM, text: str, headers: dict[str, str], *, stream: bool = False) -> None:
    """The chat route answers ``text`` with ``headers`` (a fixed route: as any server would)."""
    if stream:
        headers = {**headers, "content-type": "text/event-stream"}
        fake.add_route("POST", "/v1/chat/completions", sse(text), headers=headers)
    else:
        fake.add_route("POST", "/v1/chat/completions", chat_body(text), headers=headers)


@contextmanager
def sync_client(fake: FakeLLM, kind: str, **options: Any) -> Iterator[lmclient.Client]:
    options = {"model": MODEL, "dialect": "vllm", **options}
    if kind == "respx":
        with fake.mock() as url, lmclient.Client(url, **options) as client:
            yield client
        return
    with fake.serve() as url:
        if kind == "own":
            with lmclient.Client(url, **options) as client:
                yield client
        else:
            with httpx.Client() as http, lmclient.Client(url, http_client=http, **options) as c:
                yield c


@asynccontextmanager
async def async_client(
    fake: FakeLLM, kind: str, **options: Any
) -> AsyncIterator[lmclient.AsyncClient]:
    options = {"model": MODEL, "dialect": "vllm", **options}
    if kind == "respx":
        with fake.mock() as url:
            async with lmclient.AsyncClient(url, **options) as client:
                yield client
        return
    with fake.serve() as url:
        if kind == "own":
            async with lmclient.AsyncClient(url, **options) as client:
                yield client
        else:
            async with (
                httpx.AsyncClient() as http,
                lmclient.AsyncClient(url, http_client=http, **options) as aclient,
            ):
                yield aclient


def check(headers: lmclient.Headers, remaining: str = "9") -> None:
    """What every test reads: any spelling of a name, the values as sent, no way to write."""
    assert headers["x-ratelimit-remaining-requests"] == remaining
    assert headers["X-RATELIMIT-REMAINING-REQUESTS"] == remaining
    assert headers.get("X-Request-ID") == "req-abc"
    assert "openai-processing-ms" in headers and "OpenAI-Processing-MS" in headers
    assert headers.get("x-absent") is None and "x-absent" not in headers
    assert "x-ratelimit-reset-tokens" in list(headers)  # iterated as lower-case names
    with pytest.raises(TypeError):
        headers["x-request-id"] = "changed"  # type: ignore[index]
    assert not hasattr(headers, "update") and not hasattr(headers, "pop")


@pytest.mark.parametrize("kind", KINDS)
def test_sync_response_headers(kind: str) -> None:
    fake = FakeLLM()
    answer(fake, "one", SENT)
    with sync_client(fake, kind) as client:
        first = client.create("Q")
        answer(fake, "two", {**SENT, "X-RateLimit-Remaining-Requests": "8"})
        second = client.create("Q")  # the same head but for one value, on the same connection
    check(first.headers)
    check(second.headers, remaining="8")  # each response its own headers, none shared


@pytest.mark.parametrize("kind", KINDS)
async def test_async_response_headers(kind: str) -> None:
    fake = FakeLLM()
    answer(fake, "one", SENT)
    async with async_client(fake, kind) as client:
        first = await client.create("Q")
        answer(fake, "two", {**SENT, "X-RateLimit-Remaining-Requests": "8"})
        second = await client.create("Q")
    check(first.headers)
    check(second.headers, remaining="8")


@pytest.mark.parametrize("kind", KINDS)
def test_sync_stream_headers_before_the_first_token(kind: str) -> None:
    fake = FakeLLM()
    answer(fake, "streamed", SENT, stream=True)
    with sync_client(fake, kind) as client:
        s = client.stream("Q")
        assert dict(s.headers) == {}  # nothing sent before the stream is entered
        with s:
            check(s.headers)
            assert next(iter(s)) == "streamed"
            assert s.value == "streamed"
            check(s.headers)


@pytest.mark.parametrize("kind", KINDS)
async def test_async_stream_headers_before_the_first_token(kind: str) -> None:
    fake = FakeLLM()
    answer(fake, "streamed", SENT, stream=True)
    async with async_client(fake, kind) as client:
        s = client.stream("Q")
        assert dict(s.headers) == {}
        async with s:
            check(s.headers)
            assert await s.__aiter__().__anext__() == "streamed"
            assert await s.aread() == "streamed"
            check(s.headers)


@pytest.mark.parametrize("kind", KINDS)
def test_sync_error_headers(kind: str) -> None:
    fake = FakeLLM()
    fake.fail(429, headers={**SENT, "X-RateLimit-Remaining-Requests": "0"}, retry_after=3600)
    with sync_client(fake, kind) as client, pytest.raises(lmclient.RateLimitError) as info:
        client.generate("Q")
    assert isinstance(info.value, lmclient.APIStatusError)
    check(info.value.headers, remaining="0")
    assert info.value.headers["Retry-After"] == "3600"
    assert info.value.request_id == "req-abc"


@pytest.mark.parametrize("kind", KINDS)
async def test_async_error_headers(kind: str) -> None:
    fake = FakeLLM()
    fake.fail(429, headers={**SENT, "X-RateLimit-Remaining-Requests": "0"}, retry_after=3600)
    async with async_client(fake, kind) as client:
        with pytest.raises(lmclient.RateLimitError) as info:
            await client.generate("Q")
    check(info.value.headers, remaining="0")
    assert info.value.headers["Retry-After"] == "3600"


def test_sync_hook_event_carries_the_headers() -> None:
    fake = FakeLLM()
    answer(fake, "one", SENT)
    events: list[lmclient.HookEvent] = []
    with sync_client(fake, "own", hooks=[events.append]) as client:
        assert client.create("Q").headers["x-request-id"] == "req-abc"
    (head,) = [e for e in events if isinstance(e, lmclient.ResponseHead)]
    check(head.headers)


async def test_async_hook_event_carries_the_headers() -> None:
    fake = FakeLLM()
    answer(fake, "streamed", SENT, stream=True)
    events: list[lmclient.HookEvent] = []
    async with (
        async_client(fake, "own", hooks=[events.append]) as client,
        client.stream("Q") as s,
    ):
        assert await s.aread() == "streamed"
        check(s.headers)  # an observed stream: the same headers
    (head,) = [e for e in events if isinstance(e, lmclient.ResponseHead)]
    check(head.headers)


def test_headers_made_by_hand() -> None:
    """A user's own (a test double of a Response, say): names lower-cased, equal to any
    mapping with the same names in any case."""
    headers = lmclient.Headers({"X-Request-Id": "a", "x-request-id": "b", "Server": "vllm"})
    assert headers["X-REQUEST-ID"] == "a, b"  # a repeated name: one value, joined
    assert headers == {"server": "vllm", "X-Request-Id": "a, b"}
    assert headers != {"server": "vllm"}
    assert len(headers) == 2 and sorted(headers) == ["server", "x-request-id"]
    assert repr(lmclient.Headers()) == "Headers({})"
