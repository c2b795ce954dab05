"""Client CPU per call through the SGLang Model Gateway: lmclient next to the openai SDK.

The gateway (sglang-router, `scripts/gateway.py`, --backend openai, cache-aware) runs in front
of `benchmarks/server.py` (canned bytes, its own process), so the wall time is the gateway's and
the worker's, and the client process's CPU time (`time.process_time()`) is the client's alone:
for each client, N sequential calls of the same small structured answer (an object of 4
fields), CPU per call and wall per call. Each client is warmed up (its pool, its detection) with
a few calls first.

    .venv/bin/python benchmarks/gateway.py [--calls 2000] [--rounds 3]

It prints a markdown table, the median of the rounds.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai

import lmclient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.scenarios import MODEL, PROMPT, Person, PersonModel  # noqa: E402
from scripts import gateway  # noqa: E402


def _start_worker() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "server.py")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"benchmarks/server.py did not start: {line!r}")
    return proc, int(line.split()[1])


def _measure(call: Callable[[], Any], calls: int) -> tuple[float, float]:
    """(CPU µs per call, wall µs per call) of ``calls`` sequential calls."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(calls):
        call()
    return (
        (time.process_time() - cpu) / calls * 1e6,
        (time.perf_counter() - wall) / calls * 1e6,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    worker, port = _start_worker()
    try:
        # The worker's health route is its small payload's path; disable the gateway's checks
        # rather than teach the canned server a health answer.
        with gateway.Gateway(
            [f"http://127.0.0.1:{port}/small"], extra_args=("--disable-health-check",)
        ) as router:
            base = router.base_url
            lm = lmclient.Client(base, model=MODEL)  # dialect="auto": it finds the gateway
            oai = openai.OpenAI(base_url=base, api_key="bench", max_retries=0)
            schema = PersonModel.model_json_schema()
            response_format: Any = {
                "type": "json_schema",
                "json_schema": {"name": "Person", "schema": schema, "strict": True},
            }

            def lmclient_call() -> Person:
                value: Person = lm.generate(PROMPT, Person)
                return value

            def openai_call() -> PersonModel:
                completion = oai.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": PROMPT}],
                    response_format=response_format,
                )
                content = completion.choices[0].message.content
                assert content is not None
                return PersonModel.model_validate_json(content)

            cases = {
                "lmclient `Client.generate`": lmclient_call,
                "openai `chat.completions.create` + pydantic": openai_call,
            }
            for call in cases.values():  # warm: pools, detection, caches
                for _ in range(20):
                    call()
            assert lm.dialect == "sglang-gateway", lm.dialect
            results: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
            for _ in range(args.rounds):
                for name, call in cases.items():
                    results[name].append(_measure(call, args.calls))
            lm.close()
            oai.close()
    finally:
        worker.terminate()
        worker.wait(10)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"{date}; {platform.machine()}, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, sglang-router {gateway.VERSION}; "
        f"`benchmarks/gateway.py --calls {args.calls} --rounds {args.rounds}`, "
        "median of the rounds\n"
    )
    print("| client | CPU per call (µs) | wall per call (µs) |")
    print("|---|---|---|")
    for name, runs in results.items():
        cpu = statistics.median(r[0] for r in runs)
        wall = statistics.median(r[1] for r in runs)
        print(f"| {name} | {cpu:.0f} | {wall:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
