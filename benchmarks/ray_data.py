"""Rows per second of typed generation over a dataset: lmclient's Ray Data stage
(`lmclient.ray.generate`), `AsyncClient.generate_many` in one process, and Ray's own
``ray.data.llm`` HTTP processor, against the same server in its own process.

Two servers: `benchmarks/server.py` (canned bytes, tens of thousands of requests a second: the
clients are what is measured) and `lmclient.testing.FakeLLM` (Python's http.server, about a
thousand: the server is the ceiling, as a real model is). Each method asks for the same
constraint fields (lmclient's, vLLM's dialect) and gets the same answer. The cluster is up
before any clock starts; a Ray job's rate is counted once it runs (from its first batch out to
its last, as its actors' start takes seconds, minutes on a loaded machine), and its whole time
is reported beside it; ``generate_many`` is timed from its call. The Ray stages run 2 actors
of 0.5 CPU on a ``ray.init(num_cpus=2)`` cluster; the processor's rows are decoded into
`Person` by msgspec.

    python benchmarks/ray_data.py [--rows 20000] [--fake-rows 5000] [--docs docs/performance.md]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import platform
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

# Read when Ray is imported: no usage report (it would reach for the network), and the node's
# address is the loopback one, not the address a UDP socket to the outside would use, so that
# every Ray server listens on 127.0.0.1 only.
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import msgspec
import ray
import ray.data
from ray.data.llm import HttpRequestProcessorConfig, build_processor

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lmclient  # noqa: E402
import lmclient.ray  # noqa: E402
from benchmarks.run import server  # noqa: E402
from benchmarks.scenarios import MODEL, Person  # noqa: E402
from lmclient.testing import FakeLLM  # noqa: E402
from tests.e2e.fake_process import fake_process  # noqa: E402

ACTORS, PER_ACTOR, ONE_PROCESS = 2, 32, 64  # the same requests in flight in every method
MARKERS = ("<!-- ray-data:start -->", "<!-- ray-data:end -->")
# FakeLLM (in its own process) answers every call with the same Person: each method gets the
# same answer, and the fake's cost per call is the same for all.
FAKE = "fake.reply({'name': 'Ada Lovelace', 'age': 36, 'email': 'ada@example.com', 'active': True})"


def prompts(count: int) -> list[str]:
    return [f"Invent person number {i}." for i in range(count)]


def dataset(count: int) -> ray.data.Dataset:
    return ray.data.from_items([{"prompt": p} for p in prompts(count)], override_num_blocks=8)


def constraint_fields() -> dict[str, Any]:
    """What lmclient sends for Person besides the messages, so the processor sends the same."""
    fake = FakeLLM()
    with fake.serve() as url, lmclient.Client(url, model=MODEL, dialect="vllm") as client:
        client.generate("x", Person)
        body = dict(fake.requests[-1].body)
    del body["messages"]
    return body


def many(base_url: str, count: int) -> tuple[int, float]:
    async def run() -> tuple[int, float]:
        async with lmclient.AsyncClient(base_url, model=MODEL, dialect="vllm") as client:
            start = time.perf_counter()
            values = await client.generate_many(prompts(count), Person, concurrency=ONE_PROCESS)
            rate = len(values) / (time.perf_counter() - start)
        assert all(isinstance(v, Person) for v in values)
        return len(values), rate

    return asyncio.run(run())


def steady(ds: ray.data.Dataset) -> tuple[int, float]:
    """The rows a job gives, and the time from its first batch out to its last: its throughput
    once the actors are up (their start takes seconds, far more on a loaded machine)."""
    rows, first, first_rows = 0, 0.0, 0
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        if not rows:
            first, first_rows = time.perf_counter(), batch.num_rows
        rows += batch.num_rows
    return rows, (rows - first_rows) / (time.perf_counter() - first)


def stage(base_url: str, count: int) -> tuple[int, float]:
    out = lmclient.ray.generate(
        dataset(count),
        base_url,
        Person,
        actors=ACTORS,
        concurrency=PER_ACTOR,
        num_cpus=0.5,
        model=MODEL,
        client={"dialect": "vllm"},
    ).filter(lambda row: row["error_type"] is None)  # a failed row would be missing from the count
    return steady(out)


def processor(base_url: str, count: int, fields: dict[str, Any]) -> tuple[int, float]:
    config = HttpRequestProcessorConfig(
        url=f"{base_url}/chat/completions", concurrency=ACTORS, batch_size=PER_ACTOR
    )
    build = build_processor(
        config,
        preprocess=lambda row: {
            "payload": {**fields, "messages": [{"role": "user", "content": row["prompt"]}]}
        },
        postprocess=lambda row: {
            "name": msgspec.json.decode(
                row["http_response"]["choices"][0]["message"]["content"], type=Person
            ).name
        },
    )
    return steady(build(dataset(count)))


def measure(label: str, base_url: str, count: int, fields: dict[str, Any]) -> list[str]:
    lines = []
    for method, run in [
        (f"`AsyncClient.generate_many`, one process, concurrency {ONE_PROCESS}", many),
        (f"`lmclient.ray.generate`, {ACTORS} actors × concurrency {PER_ACTOR}", stage),
        (
            f"`ray.data.llm` HTTP processor, {ACTORS} actors, batch {PER_ACTOR}",
            lambda url, n: processor(url, n, fields),
        ),
    ]:
        start = time.perf_counter()
        rows, rate = run(base_url, count)  # type: ignore[operator]
        seconds = time.perf_counter() - start
        assert rows == count, (method, rows)
        lines.append(f"| {label} | {method} | {rows:,} | {seconds:.1f} | {rate:,.0f} |")
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000, help="rows against server.py")
    parser.add_argument("--fake-rows", type=int, default=5_000, help="rows against FakeLLM")
    parser.add_argument("--docs", type=Path, help="write the table into this page's markers")
    args = parser.parse_args()
    started = time.perf_counter()
    lines = [
        "| server | method | rows | whole job, s | rows/s once running |",
        "|---|---|---:|---:|---:|",
    ]
    try:  # a start that times out (a loaded machine) leaves processes that shutdown() stops
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=256 * 2**20,
            _node_ip_address="127.0.0.1",
            runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}},
            logging_level=logging.WARNING,
        )
        ray.data.DataContext.get_current().enable_progress_bars = False
        with server() as port:
            base_url = f"http://127.0.0.1:{port}/small/v1"
            lines += measure("`benchmarks/server.py`", base_url, args.rows, constraint_fields())
        with fake_process(FAKE) as fake:
            lines += measure("FakeLLM", fake.base_url, args.fake_rows, constraint_fields())
    finally:
        ray.shutdown()
    cpu = platform.processor() or platform.machine()
    head = (
        f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} CPUs "
        f"({cpu}), Python {platform.python_version()}, Ray {ray.__version__}; "
        f"`python benchmarks/ray_data.py --rows {args.rows} --fake-rows {args.fake_rows}` "
        f"({time.perf_counter() - started:.0f} s)."
    )
    report = "\n".join([head, "", *lines])
    print(report)
    if args.docs is not None:
        text = args.docs.read_text()
        pattern = re.compile(re.escape(MARKERS[0]) + ".*?" + re.escape(MARKERS[1]), re.S)
        args.docs.write_text(pattern.sub(f"{MARKERS[0]}\n{report}\n{MARKERS[1]}", text))


if __name__ == "__main__":
    main()
