"""`tests/transports/test_fork.py` against a real uvicorn (h11, and httptools on a Unix socket):
a client used once before ``os.fork()``, then by 1,000 calls in the parent and 1,000 in the
child at once; every answer echoes its own prompt."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

import lmclient
from tests.forking import calls_after_fork
from tests.stacks.helpers import Echo, async_client, started, sync_client
from tests.stacks.servers import Stacks

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here"),
]

CALLS = 1000
THREADS = 100


def wrong_answer(prompt: str, echo: Echo) -> list[str]:
    return [] if echo.prompt == prompt else [f"{prompt!r} got {echo.prompt!r}"]


@pytest.mark.parametrize("name", ["uvicorn-h11", "uvicorn-uds"])
def test_sync_client_after_fork(stacks: Stacks, name: str) -> None:
    stack = started(stacks, name)
    with sync_client(stack) as client:
        client.generate("before", Echo)

        def side(label: str) -> list[str]:
            def one(i: int) -> list[str]:
                prompt = f"{label} {i}"
                try:
                    return wrong_answer(prompt, client.generate(prompt, Echo))
                except lmclient.LMClientError as exc:
                    return [f"{prompt!r} raised {type(exc).__name__}: {exc}"]

            with ThreadPoolExecutor(THREADS) as pool:
                return [w for ws in pool.map(one, range(CALLS)) for w in ws]

        parent, child = calls_after_fork(side)
    assert child == [], f"{len(child)} wrong in the child, first {child[:3]}"
    assert parent == [], f"{len(parent)} wrong in the parent, first {parent[:3]}"


@pytest.mark.parametrize("name", ["uvicorn-h11", "uvicorn-uds"])
def test_async_client_after_fork(stacks: Stacks, name: str) -> None:
    stack = started(stacks, name)
    client = async_client(stack)
    loop = asyncio.new_event_loop()

    async def calls(label: str) -> list[str]:
        async def one(i: int) -> list[str]:
            prompt = f"{label} {i}"
            try:
                return wrong_answer(prompt, await client.generate(prompt, Echo))
            except lmclient.LMClientError as exc:
                return [f"{prompt!r} raised {type(exc).__name__}: {exc}"]

        results = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(CALLS))), 100)
        return [w for ws in results for w in ws]

    try:
        loop.run_until_complete(client.generate("before", Echo))

        def side(label: str) -> list[str]:
            if label == "child":
                return asyncio.run(calls(label))
            return loop.run_until_complete(calls(label))

        parent, child = calls_after_fork(side)
        loop.run_until_complete(client.aclose())
    finally:
        loop.close()
    assert child == [], f"{len(child)} wrong in the child, first {child[:3]}"
    assert parent == [], f"{len(parent)} wrong in the parent, first {parent[:3]}"
