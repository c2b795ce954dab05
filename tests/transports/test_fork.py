"""Pools belong to one process: a client used before ``os.fork()`` and then in both processes
opens new connections in the child, so no answer crosses to the other process (issue 26:
118 of 300 answers crossed in the child, 98 in the parent).

The fake (`lmclient.testing`, over real loopback sockets) echoes each prompt: every call asks
for a `Regex` of its own label, which the fake answers with that text, so an answer read from
the other process's request fails to validate or differs. 1,000 calls on each side, the two
sides started together through a gate; sync with 100 threads, async with 100 tasks at once
(`generate_many`'s ``concurrency``), as a user bounds a batch. Unbounded, 2,000 calls would open
2,000 connections at once, more than the fake's listen backlog takes: the kernel drops the SYNs
it cannot queue and the clients resend them a second or more later, so the test would time the
kernel's retransmissions rather than which answers cross. Bounded within the pool's idle limit,
each side also keeps and reuses its connections from call to call, as a long-lived client does.
The same against a real uvicorn: `tests/stacks/test_fork.py`."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

import lmclient
from lmclient import Regex
from lmclient.testing import FakeLLM
from tests.forking import calls_after_fork

pytestmark = [
    pytest.mark.slow,  # 4,000 calls over two processes
    pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here"),
]

CALLS = 1000
THREADS = 100  # sync calls at once on each side
TASKS = 100  # async calls at once on each side
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    fake = FakeLLM()
    with fake.serve() as base_url:
        yield base_url


def label(side: str, i: int) -> str:
    return f"{side}_{i}"


def outcome(expected: str, got: object) -> list[str]:
    return [] if got == expected else [f"{expected!r} got {got!r}"]


def sync_side(client: lmclient.Client) -> object:
    def side(name: str) -> list[str]:
        def one(i: int) -> list[str]:
            text = label(name, i)
            try:
                return outcome(text, client.generate(text, Regex(text)))
            except lmclient.LMClientError as exc:
                return [f"{text!r} raised {type(exc).__name__}: {exc}"]

        with ThreadPoolExecutor(THREADS) as pool:
            wrong = [w for ws in pool.map(one, range(CALLS)) for w in ws]
        assert not client._transport._pool.in_use
        return wrong

    return side


async def async_calls(client: lmclient.AsyncClient, name: str) -> list[str]:
    texts = [label(name, i) for i in range(CALLS)]
    calls = client.generate_many(
        [(text, Regex(text)) for text in texts], concurrency=TASKS, return_exceptions=True
    )
    results = await asyncio.wait_for(calls, 100)
    wrong = []
    for text, got in zip(texts, results, strict=True):
        if isinstance(got, lmclient.LMClientError):
            wrong.append(f"{text!r} raised {type(got).__name__}: {got}")
        else:
            wrong += outcome(text, got)
    return wrong


def test_sync_client_after_fork(url: str) -> None:
    with lmclient.Client(url, "m", dialect="vllm", timeout=TIMEOUT, max_retries=0) as client:
        assert client.generate("before", Regex("before")) == "before"  # a pooled connection
        parent, child = calls_after_fork(sync_side(client))  # type: ignore[arg-type]
    assert child == [], f"{len(child)} wrong in the child, first {child[:3]}"
    assert parent == [], f"{len(parent)} wrong in the parent, first {parent[:3]}"


def test_async_client_after_fork(url: str) -> None:
    """The parent keeps its event loop across the fork (as a pre-fork server's master may);
    the child runs its own. The child must neither use nor close the parent's connections:
    closing one would unregister it from the epoll instance the two processes share, and the
    parent's next call on it would never see its answer."""
    client = lmclient.AsyncClient(url, "m", dialect="vllm", timeout=TIMEOUT, max_retries=0)
    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(client.generate("before", Regex("before"))) == "before"

        def side(name: str) -> list[str]:
            if name == "child":
                return asyncio.run(async_calls(client, name))
            return loop.run_until_complete(async_calls(client, name))

        parent, child = calls_after_fork(side)
        loop.run_until_complete(client.aclose())
    finally:
        loop.close()
    assert child == [], f"{len(child)} wrong in the child, first {child[:3]}"
    assert parent == [], f"{len(parent)} wrong in the parent, first {parent[:3]}"


@pytest.mark.skipif(sys.platform == "win32", reason="no fork")
def test_a_forked_child_closes_only_its_own_copies(url: str) -> None:
    """The parent's pooled connection still serves it after the child has used the client
    and exited (the child's reset closed its copy of the socket, not the connection)."""
    with lmclient.Client(url, "m", dialect="vllm", timeout=TIMEOUT, max_retries=0) as client:
        assert client.generate("one", Regex("one")) == "one"
        (before,) = client._transport._pool.connections()

        def side(name: str) -> list[str]:
            text = label(name, 0)
            return outcome(text, client.generate(text, Regex(text)))

        parent, child = calls_after_fork(side)
        assert (parent, child) == ([], [])
        assert client._transport._pool.connections() == [before]
