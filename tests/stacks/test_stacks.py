"""lmclient's `Client` and `AsyncClient`, through their public API, against real third-party HTTP
stacks: uvicorn (h11, httptools, TLS, a Unix socket), hypercorn, granian, aiohttp, and nginx
(proxy buffering on, off, gzip) and haproxy in front of uvicorn. Each stack serves
`tests.stacks.app`, whose answers echo the prompt and the client's TCP port (a number per
connection over the socket), so every answer is checked against its own question and the tests
can count the connections the client used.

Every stack closes idle connections after 1 s; the client keeps idle connections for 4 s, so
calls spaced around 1 s send on connections the server is closing at that very moment.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

import lmclient
from lmclient._dialects import Endpoint
from tests.stacks.app import MODEL, stream_items
from tests.stacks.helpers import (
    TIMEOUT,
    Echo,
    async_client,
    check,
    expected_text,
    prompt_for,
    sync_client,
)
from tests.stacks.servers import STACKS, Stack, StackFailed, Stacks, StackUnavailable, raw_client

pytestmark = pytest.mark.slow  # real server processes: minutes on 2 cores

T = TypeVar("T")

HANG = 10.0  # an async call that has not returned by then is reported as hung
BIG_LIMIT = 16 << 20  # max_response_bytes that a 5 MB answer fits in
SMALL_LIMIT = 1 << 20  # ... and one that it does not
GAPS = (0.9, 1.0, 1.1, 0.9, 1.0)  # seconds between calls, around the stacks' 1 s keep-alive


async def bounded(call: Awaitable[T]) -> T:
    """An async call that fails the test, rather than hanging it, if it never returns."""
    try:
        return await asyncio.wait_for(call, HANG)
    except asyncio.TimeoutError:
        pass
    pytest.fail(f"the call hung: no result within {HANG:.0f} s", pytrace=False)


def read_stream(client: lmclient.Client, prompt: str, endpoint: Endpoint = "chat") -> list[str]:
    """A 2,000-event stream, its items as they close, checked against the whole value."""
    expected = stream_items(prompt)
    with client.stream(prompt, list[str], endpoint=endpoint) as stream:
        items: list[Any] = list(stream.items())  # typed as list[list[str]]: see the report
        assert stream.value == expected
        assert stream.text == expected_text(prompt)
        assert stream.finish_reason == "stop"
        assert stream.events >= len(expected)
        assert stream.usage is not None and stream.usage.completion_tokens == len(expected)
    assert items == expected
    return items


async def aread_stream(
    client: lmclient.AsyncClient, prompt: str, endpoint: Endpoint = "chat"
) -> list[str]:
    expected = stream_items(prompt)

    async def run() -> list[str]:
        async with client.stream(prompt, list[str], endpoint=endpoint) as stream:
            items: list[Any] = [item async for item in stream.items()]
            assert await stream.aread() == expected
            assert stream.value == expected
            assert stream.text == expected_text(prompt)
            assert stream.finish_reason == "stop"
            assert stream.events >= len(expected)
            assert stream.usage is not None and stream.usage.completion_tokens == len(expected)
        return items

    items = await bounded(run())
    assert items == expected
    return items


# -- many calls on one client ------------------------------------------------------------------


def test_sequential_calls_reuse_one_connection(stack: Stack) -> None:
    """24 calls one after the other, chat and completions: each answer is its own, and all
    travel on one connection. The model is found with GET /v1/models (on that connection too)."""
    ports = []
    with sync_client(stack, None) as client:
        for i in range(24):
            prompt = prompt_for("seq", i)
            if i % 3 == 0:
                ports.append(check(client.generate(prompt, Echo), prompt))
            elif i % 3 == 1:
                ports.append(check(client.complete(prompt, Echo), prompt))
            else:
                response = client.create(prompt, Echo, endpoint="completions")
                assert (response.retries, response.finish_reason) == (0, "stop")
                assert response.usage is not None and response.usage.total_tokens == 2
                ports.append(check(response.value, prompt))
        assert client.model == MODEL
    assert len(set(ports)) == 1, f"{len(set(ports))} connections for 24 sequential calls"


async def test_sequential_calls_reuse_one_connection_async(stack: Stack) -> None:
    ports = []
    async with async_client(stack, None) as client:
        for i in range(24):
            prompt = prompt_for("aseq", i)
            if i % 3 == 0:
                ports.append(check(await bounded(client.generate(prompt, Echo)), prompt))
            elif i % 3 == 1:
                ports.append(check(await bounded(client.complete(prompt, Echo)), prompt))
            else:
                response = await bounded(client.create(prompt, Echo, endpoint="completions"))
                assert (response.retries, response.finish_reason) == (0, "stop")
                ports.append(check(response.value, prompt))
        assert client.model == MODEL
    assert len(set(ports)) == 1, f"{len(set(ports))} connections for 24 sequential calls"


async def test_concurrent_calls_async(stack: Stack) -> None:
    """32 calls at once, twice: each answer is its own; the second round reuses the first
    round's connections. Then `generate_many` over the same pool."""
    async with async_client(stack) as client:

        async def one(label: str, i: int) -> int:
            prompt = prompt_for(label, i)
            return check(await client.generate(prompt, Echo), prompt)

        first = await bounded(asyncio.gather(*(one("c1", i) for i in range(32))))
        second = await bounded(asyncio.gather(*(one("c2", i) for i in range(32))))
        assert len(set(first)) <= 32
        assert set(second) <= set(first), "the second round opened new connections"
        prompts = [prompt_for("many", i) for i in range(48)]
        values = await bounded(client.generate_many(prompts, Echo, concurrency=16))
        for value, prompt in zip(values, prompts, strict=True):
            check(value, prompt)


def test_generate_many_sync(stack: Stack) -> None:
    """`generate_many` (a thread pool over one connection pool): values in input order, at
    most `concurrency` connections."""
    prompts = [prompt_for("many", i) for i in range(32)]
    with sync_client(stack) as client:
        values = client.generate_many(prompts, Echo, concurrency=8)
        again = client.complete_many(prompts, Echo, concurrency=8)
    ports = [check(v, p) for v, p in zip(values, prompts, strict=True)]
    ports += [check(v, p) for v, p in zip(again, prompts, strict=True)]
    assert len(set(ports)) <= 8, f"{len(set(ports))} connections at concurrency 8"


# -- streams ------------------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_stream_of_2000_events(stack: Stack, endpoint: Endpoint) -> None:
    """A 2,000-event SSE stream, then a plain call and another stream on the same client."""
    with sync_client(stack) as client:
        read_stream(client, prompt_for("stream", 0), endpoint)
        prompt = prompt_for("after", 0)
        check(client.generate(prompt, Echo), prompt)
        read_stream(client, prompt_for("stream", 1), endpoint)


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
async def test_stream_of_2000_events_async(stack: Stack, endpoint: Endpoint) -> None:
    async with async_client(stack) as client:
        await aread_stream(client, prompt_for("astream", 0), endpoint)
        prompt = prompt_for("after", 0)
        check(await bounded(client.generate(prompt, Echo)), prompt)
        await aread_stream(client, prompt_for("astream", 1), endpoint)


# -- large bodies --------------------------------------------------------------------------------

FRAMINGS = {"length": "+big", "chunked": "+big +chunked", "gzip": "+big +gzip"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("framing", list(FRAMINGS))
def test_large_body(stack: Stack, framing: str) -> None:
    """A 5 MB answer (Content-Length, chunked, or gzip-compressed) within max_response_bytes,
    then a small call on the same connection; beyond max_response_bytes, `ProtocolError`, and
    the next call gets a fresh connection."""
    big = f"{FRAMINGS[framing]} big"
    with sync_client(stack, max_response_bytes=BIG_LIMIT) as client:
        port = check(client.generate(big, Echo), big, big=True)
        small = prompt_for("small", 0)
        assert check(client.complete(small, Echo), small) == port
    with sync_client(stack, max_response_bytes=SMALL_LIMIT) as client:
        before = check(client.generate(small, Echo), small)
        with pytest.raises(lmclient.ProtocolError, match="max_response_bytes"):
            client.generate(big, Echo)
        assert check(client.generate(small, Echo), small) != before


@pytest.mark.timeout(60)
@pytest.mark.parametrize("framing", list(FRAMINGS))
async def test_large_body_async(stack: Stack, framing: str) -> None:
    big = f"{FRAMINGS[framing]} big"
    async with async_client(stack, max_response_bytes=BIG_LIMIT) as client:
        port = check(await bounded(client.generate(big, Echo)), big, big=True)
        small = prompt_for("small", 0)
        assert check(await bounded(client.complete(small, Echo)), small) == port
    async with async_client(stack, max_response_bytes=SMALL_LIMIT) as client:
        before = check(await bounded(client.generate(small, Echo)), small)
        with pytest.raises(lmclient.ProtocolError, match="max_response_bytes"):
            await bounded(client.generate(big, Echo))
        assert check(await bounded(client.generate(small, Echo)), small) != before


# -- gzip ------------------------------------------------------------------------------------------


def test_gzip_bodies_from_the_app(stack: Stack) -> None:
    """The app compresses (``content-encoding: gzip``) whole bodies, chunked bodies and a stream,
    unasked; through the proxies too. The connection is kept throughout."""
    ports = []
    with sync_client(stack) as client:
        for i in range(4):
            prompt = prompt_for("+gzip", i) if i % 2 else prompt_for("+gzip +chunked", i)
            ports.append(check(client.generate(prompt, Echo), prompt))
        read_stream(client, prompt_for("+gzip", 9))
        prompt = prompt_for("+gzip", 10)
        ports.append(check(client.complete(prompt, Echo), prompt))
    assert len(set(ports)) == 1


async def test_gzip_bodies_from_the_app_async(stack: Stack) -> None:
    ports = []
    async with async_client(stack) as client:
        for i in range(4):
            prompt = prompt_for("+gzip", i) if i % 2 else prompt_for("+gzip +chunked", i)
            ports.append(check(await bounded(client.generate(prompt, Echo)), prompt))
        await aread_stream(client, prompt_for("+gzip", 9))
        prompt = prompt_for("+gzip", 10)
        ports.append(check(await bounded(client.complete(prompt, Echo)), prompt))
    assert len(set(ports)) == 1


def raw_content_encoding(stack: Stack, prompt: str) -> str | None:
    """What the stack answers a plain HTTP client that accepts gzip (httpx, not lmclient)."""
    verify = ssl.create_default_context(cafile=stack.ca_file) if stack.ca_file else False
    body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}]}
    with raw_client(verify, TIMEOUT, stack.uds) as client:
        response = client.post(
            f"{stack.url}/v1/chat/completions", json=body, headers={"accept-encoding": "gzip"}
        )
        response.raise_for_status()
        coding: str | None = response.headers.get("content-encoding")
        return coding


@pytest.mark.timeout(60)
def test_accept_encoding_gzip(stack: Stack) -> None:
    """With ``accept-encoding: gzip`` in the client's headers, a stack that compresses (nginx's
    ``gzip on``) sends gzip, and lmclient decodes it: small and 5 MB bodies, and a stream.
    The others answer uncompressed, which must work as well."""
    prompt = prompt_for("accept", 0)
    assert raw_content_encoding(stack, prompt) == ("gzip" if stack.compresses else None)
    headers = {"accept-encoding": "gzip"}
    with sync_client(stack, headers=headers, max_response_bytes=BIG_LIMIT) as client:
        port = check(client.generate(prompt, Echo), prompt)
        big = "+big accepted"
        assert check(client.generate(big, Echo), big, big=True) == port
        read_stream(client, prompt_for("accept", 1))
        read_stream(client, prompt_for("accept", 2), "completions")


@pytest.mark.timeout(60)
async def test_accept_encoding_gzip_async(stack: Stack) -> None:
    headers = {"accept-encoding": "gzip"}
    async with async_client(stack, headers=headers, max_response_bytes=BIG_LIMIT) as client:
        prompt = prompt_for("aaccept", 0)
        port = check(await bounded(client.generate(prompt, Echo)), prompt)
        big = "+big accepted"
        assert check(await bounded(client.generate(big, Echo)), big, big=True) == port
        await aread_stream(client, prompt_for("aaccept", 1))


# -- Connection: close ---------------------------------------------------------------------------


def test_connection_close(stack: Stack) -> None:
    """Every answer under /close/ carries ``connection: close`` (nginx: keepalive_requests 1):
    each call gets its own connection and its own answer, streams and 5 MB bodies included."""
    ports = []
    with sync_client(stack, path="/close", max_response_bytes=BIG_LIMIT) as client:
        for i in range(5):
            prompt = prompt_for("close", i)
            call = client.generate if i % 2 else client.complete
            ports.append(check(call(prompt, Echo), prompt))
            if i % 2:
                read_stream(client, prompt_for("close-stream", i))
        big = "+big +chunked closing"
        ports.append(check(client.generate(big, Echo), big, big=True))
    assert len(set(ports)) == len(ports), f"ports {ports}: a closed connection was reused"


async def test_connection_close_async(stack: Stack) -> None:
    ports = []
    async with async_client(stack, path="/close", max_response_bytes=BIG_LIMIT) as client:
        for i in range(5):
            prompt = prompt_for("aclose", i)
            call = client.generate if i % 2 else client.complete
            ports.append(check(await bounded(call(prompt, Echo)), prompt))
            if i % 2:
                await aread_stream(client, prompt_for("aclose-stream", i))
        big = "+big +chunked closing"
        ports.append(check(await bounded(client.generate(big, Echo)), big, big=True))
    assert len(set(ports)) == len(ports), f"ports {ports}: a closed connection was reused"


# -- calls spaced around the keep-alive timeout ----------------------------------------------------


@dataclass
class SpacedRun:
    """What happened to one client's calls spaced by `GAPS`."""

    calls: int = 0
    failures: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)


def spaced_sync(stack: Stack) -> SpacedRun:
    run = SpacedRun()
    with sync_client(stack) as client:
        for i in range(len(GAPS) + 1):
            if i:
                time.sleep(GAPS[i - 1])  # real time passing on purpose: the server's idle timer
            prompt = prompt_for("spaced", i)
            try:
                if i % 2:
                    read_stream(client, prompt)
                else:
                    run.ports.append(check(client.generate(prompt, Echo), prompt))
            except (lmclient.LMClientError, AssertionError) as exc:
                run.failures.append(f"call {i} (after {GAPS[i - 1] if i else 0} s): {exc!r}")
            run.calls += 1
    return run


async def spaced_async(stack: Stack) -> SpacedRun:
    run = SpacedRun()
    async with async_client(stack) as client:
        for i in range(len(GAPS) + 1):
            if i:
                await asyncio.sleep(GAPS[i - 1])  # real time passing on purpose, as above
            prompt = prompt_for("aspaced", i)
            try:
                if i % 2:
                    await asyncio.wait_for(aread_stream(client, prompt), HANG)
                else:
                    echo = await asyncio.wait_for(client.generate(prompt, Echo), HANG)
                    run.ports.append(check(echo, prompt))
            except (lmclient.LMClientError, AssertionError, asyncio.TimeoutError) as exc:
                run.failures.append(f"call {i} (after {GAPS[i - 1] if i else 0} s): {exc!r}")
            run.calls += 1
    return run


def spaced_async_in_thread(stack: Stack) -> SpacedRun:
    return asyncio.run(spaced_async(stack))


@pytest.fixture(scope="session")
def spaced_runs(request: pytest.FixtureRequest, stacks: Stacks) -> dict[tuple[str, str], SpacedRun]:
    """The spaced calls of every selected stack, sync and async, all at once: the waits overlap,
    so the whole takes about sum(GAPS) seconds however many stacks there are."""
    names = {
        item.callspec.params["stack"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_calls_spaced_around_keepalive_timeout"
        and hasattr(item, "callspec")
    }
    running = []
    for name in sorted(names, key=STACKS.index):
        try:
            running.append(stacks.get(name))
        except (StackUnavailable, StackFailed):
            pass  # its test says so
    jobs: dict[tuple[str, str], Callable[[], SpacedRun]] = {}
    for stack in running:
        jobs[stack.name, "sync"] = functools.partial(spaced_sync, stack)
        jobs[stack.name, "async"] = functools.partial(spaced_async_in_thread, stack)
    with pytest.MonkeyPatch.context() as env, ThreadPoolExecutor(len(jobs) or 1) as pool:
        for stack in running:
            if stack.ca_file is not None:
                env.setenv("SSL_CERT_FILE", stack.ca_file)
        futures = {key: pool.submit(job) for key, job in jobs.items()}
        return {key: future.result(timeout=120) for key, future in futures.items()}


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_calls_spaced_around_keepalive_timeout(
    stack: Stack, kind: str, spaced_runs: dict[tuple[str, str], SpacedRun]
) -> None:
    """Six calls (plain and streamed) with 0.9, 1.0, 1.1, 0.9 and 1.0 s between them, while the
    server closes connections idle for 1 s and the client keeps them for 4 s: every call
    succeeds (a pooled connection the server closed is replaced), none is lost."""
    run = spaced_runs[stack.name, kind]
    assert run.failures == []
    assert run.calls == len(GAPS) + 1
