"""What detection (`dialect="auto"`) costs on a client's first call: its requests and the
first call's milliseconds, per kind of server, against `lmclient.testing.FakeLLM` over loopback
(issue 27). Each row is the median of 31 fresh clients; the next call is shown for comparison.

    .venv/bin/python benchmarks/detection.py
"""

from __future__ import annotations

import asyncio
import statistics
import time

import lmclient
from lmclient.testing import FakeLLM

RUNS = 31
SERVERS: dict[str, dict[str, object]] = {
    "vLLM": {},
    "llama.cpp": {"server": "llamacpp"},
    "SGLang": {"server": "sglang"},
    "TGI": {"server": "tgi"},
    "unknown": {"server": "generic"},
    "gateway": {"gateway": True},
}


def sync_calls(url: str) -> tuple[float, float]:
    with lmclient.Client(url, model="fake-model", max_retries=0) as client:
        started = time.perf_counter()
        client.generate("hi")
        first = time.perf_counter() - started
        started = time.perf_counter()
        client.generate("hi")
        return first, time.perf_counter() - started


async def async_calls(url: str) -> tuple[float, float]:
    async with lmclient.AsyncClient(url, model="fake-model", max_retries=0) as client:
        started = time.perf_counter()
        await client.generate("hi")
        first = time.perf_counter() - started
        started = time.perf_counter()
        await client.generate("hi")
        return first, time.perf_counter() - started


def main() -> None:
    print(f"{'server':10} {'client':6} {'set-up requests':>16} {'first call':>11} {'next':>8}")
    for name, options in SERVERS.items():
        fake = FakeLLM(**options)  # type: ignore[arg-type]
        with fake.serve() as url:
            for kind in ("sync", "async"):
                firsts, nexts, setup = [], [], 0
                for _ in range(RUNS):
                    before = len(fake.requests)
                    if kind == "sync":
                        first, second = sync_calls(url)
                    else:
                        first, second = asyncio.run(async_calls(url))
                    setup = len(fake.requests) - before - 2
                    firsts.append(first)
                    nexts.append(second)
                print(
                    f"{name:10} {kind:6} {setup:>16} "
                    f"{statistics.median(firsts) * 1000:>8.2f} ms "
                    f"{statistics.median(nexts) * 1000:>5.2f} ms"
                )


if __name__ == "__main__":
    main()
