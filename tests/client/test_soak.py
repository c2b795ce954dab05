"""A bounded soak: 20,000 async calls at concurrency 200 against a server that fails 10 % of
requests at random (seeded). Every call ends in a value or an lmclient exception, none hangs,
and the process's open files and tasks return to where they started."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from typing import Any, Literal

import pytest

import lmclient
from lmclient.testing import FakeLLM

CALLS = 20_000
CONCURRENCY = 200


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.slow  # ~15 s on 2 cores
async def test_soak_20000_calls_with_10_percent_failures() -> None:
    rng = random.Random(20261130)
    lock = threading.Lock()

    def fails(share: float) -> Any:
        def pick(request: Any) -> bool:
            with lock:  # server threads share the seeded generator
                return request.endpoint == "chat" and rng.random() < share

        return pick

    fake = FakeLLM()
    fake.reply_error(
        503, "overloaded", times=None, when=fails(0.05), headers={"retry-after-ms": "1"}
    )
    fake.reply_error(400, "rejected", times=None, when=fails(0.05 / 0.95))
    fds_before, tasks_before = open_fds(), len(asyncio.all_tasks())
    started = time.monotonic()
    with fake.serve() as url:
        async with lmclient.AsyncClient(url, deadline=30) as client:
            results = await client.generate_many(
                (f"call {i}" for i in range(CALLS)),
                Literal["yes", "no"],
                concurrency=CONCURRENCY,
                return_exceptions=True,
            )
    elapsed = time.monotonic() - started
    values = [r for r in results if r in ("yes", "no")]
    failures = [r for r in results if isinstance(r, lmclient.LMClientError)]
    assert len(values) + len(failures) == CALLS
    kinds = {type(f).__name__ for f in failures}
    assert kinds <= {"BadRequestError", "ServerError"}, kinds  # a 503 can fail all three tries
    assert 0.03 * CALLS < len(failures) < 0.08 * CALLS
    assert open_fds() == fds_before
    assert len(asyncio.all_tasks()) == tasks_before
    print(f"soak: {CALLS} calls in {elapsed:.1f} s, {len(failures)} failed after retries")
