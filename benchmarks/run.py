"""Measure lmclient next to what users would otherwise pick, on one machine in one run.

    .venv/bin/python benchmarks/run.py            # or: make bench
    .venv/bin/python benchmarks/run.py --quick    # a smoke run: few rounds, numbers are noise
    .venv/bin/python benchmarks/run.py --docs docs/performance.md   # also write the report there

Starts `server.py` in its own process (so this process's CPU time is the clients' alone), runs
every group of scenarios (`scenarios.py`) in interleaved rounds after a warm-up, A B C A B C ...,
rotating the order each round so that machine drift and order effects fall on all alike, stops
the server, and prints one markdown report: per-call medians and p90s of wall and of process CPU
time, every scenario's CPU ratio to the others, and the issue's targets, met or missed. See
benchmarks/README.md for what each scenario is and how to read the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import inspect
import json
import os
import platform
import re
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scenarios import (  # benchmarks/ is a directory of scripts, not a package
    RawClient,
    Scenario,
    decode_scenarios,
    request_body,
    same_value,
    small_call_scenarios,
    stream_scenarios,
    throughput_scenarios,
)

HERE = Path(__file__).resolve().parent
# The call users make (a system and a user message, temperature, max_tokens, a Struct), and the
# narrow one (a str prompt, no parameters) beside it: `scenarios.realistic_body`.
REAL_SYNC, NARROW_SYNC = "lmclient Client.generate, realistic", "lmclient Client.generate"
REAL_ASYNC = "lmclient AsyncClient.generate, realistic"
NARROW_ASYNC = "lmclient AsyncClient.generate"
START_MARK, END_MARK = "<!-- bench:start -->", "<!-- bench:end -->"


@dataclass
class Plan:
    """How much of everything to run; `--quick` shrinks it for a smoke run."""

    rounds: int = 150
    per_round: int = 20
    stream_rounds: int = 60
    stream_per_round: int = 3
    decode_rounds: int = 60
    decode_per_round: int = 20
    warmup: int = 100
    throughput_total: int = 2000
    throughput_seconds: float = 0.5  # a measurement repeats throughput_total calls this long
    concurrency: int = 64
    throughput_rounds: int = 5
    imports: int = 15
    stream_chunks: int = 256

    @classmethod
    def quick(cls) -> Plan:
        return cls(6, 5, 3, 2, 3, 5, 10, 300, 0.05, 64, 1, 2)


@dataclass
class Samples:
    """Per-call wall and CPU nanoseconds of one scenario."""

    name: str
    wall: list[int] = field(default_factory=list)
    cpu: list[int] = field(default_factory=list)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu) / 1000


def p90(values: list[int]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] / 1000


# -- the server process -------------------------------------------------------------------------


@contextmanager
def server(uds: str | None = None) -> Iterator[int]:
    """Start `server.py` (also on the Unix socket ``uds``, if given), yield its port, stop it by
    PID (SIGTERM, then SIGKILL after 5 s)."""
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "server.py"), "--port", "0", *(["--uds", uds] if uds else [])],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        line = proc.stdout.readline() if ready else ""
        if not line.startswith("READY "):
            raise RuntimeError(f"the benchmark server did not start (said {line!r})")
        yield int(line.split()[1])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def server_stats(port: int) -> tuple[int, float]:
    """(requests answered, CPU seconds used) by the server so far."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /stats HTTP/1.1\r\nhost: x\r\n\r\n")
        data = b""
        while not data.endswith(b"}"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    stats = json.loads(data.split(b"\r\n\r\n", 1)[1])
    return stats["requests"], stats["cpu_seconds"]


@dataclass
class ServerCapacity:
    sequential_rps: float
    cpu_us_per_request: float


def measure_server(port: int, n: int) -> ServerCapacity:
    """The server's own speed, with the least a client can do: one raw socket, sequential."""
    client = RawClient(port, "/small/v1/chat/completions")
    body = request_body({})
    try:
        for _ in range(100):
            client.fetch(body)
        requests0, cpu0 = server_stats(port)
        start = time.perf_counter()
        for _ in range(n):
            client.fetch(body)
        wall = time.perf_counter() - start
        requests1, cpu1 = server_stats(port)
    finally:
        client.close()
    return ServerCapacity(n / wall, (cpu1 - cpu0) / (requests1 - requests0) * 1e6)


# -- running scenarios ---------------------------------------------------------------------------


def call_once(scenario: Scenario, loop: asyncio.AbstractEventLoop) -> Any:
    if scenario.call is not None:
        return scenario.call()
    assert scenario.acall is not None
    return loop.run_until_complete(scenario.acall())


async def _timed_async(scenario: Scenario, n: int, samples: Samples) -> None:
    acall = scenario.acall
    assert acall is not None
    wall, cpu = time.perf_counter_ns, time.process_time_ns
    for _ in range(n):
        w0, c0 = wall(), cpu()
        await acall()
        c1, w1 = cpu(), wall()
        samples.wall.append(w1 - w0)
        samples.cpu.append(c1 - c0)


def _timed_sync(scenario: Scenario, n: int, samples: Samples) -> None:
    call = scenario.call
    assert call is not None
    wall, cpu = time.perf_counter_ns, time.process_time_ns
    for _ in range(n):
        w0, c0 = wall(), cpu()
        call()
        c1, w1 = cpu(), wall()
        samples.wall.append(w1 - w0)
        samples.cpu.append(c1 - c0)


def check_same(scenarios: list[Scenario], loop: asyncio.AbstractEventLoop) -> None:
    """Every scenario of a group must return the same value: none may do less work."""
    first = call_once(scenarios[0], loop)
    for scenario in scenarios[1:]:
        value = call_once(scenario, loop)
        if not same_value(first, value):
            raise AssertionError(f"{scenario.name} returned {value!r}, not {first!r}")


def interleaved(
    scenarios: list[Scenario],
    loop: asyncio.AbstractEventLoop,
    *,
    rounds: int,
    per_round: int,
    warmup: int,
) -> list[Samples]:
    check_same(scenarios, loop)
    for scenario in scenarios:
        for _ in range(warmup):
            call_once(scenario, loop)
    samples = {s.name: Samples(s.name) for s in scenarios}
    for r in range(rounds):
        k = r % len(scenarios)
        for scenario in scenarios[k:] + scenarios[:k]:
            if scenario.call is not None:
                _timed_sync(scenario, per_round, samples[scenario.name])
            else:
                loop.run_until_complete(_timed_async(scenario, per_round, samples[scenario.name]))
    return [samples[s.name] for s in scenarios]


@dataclass
class Throughput:
    name: str
    rps: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    server_cpu_us: list[float] = field(default_factory=list)


async def _blast(scenario: Scenario, total: int, concurrency: int) -> tuple[float, float]:
    """``total`` calls by ``concurrency`` tasks; returns (wall, CPU) seconds."""
    acall = scenario.acall
    assert acall is not None
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await acall()

    w0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - w0, time.process_time() - c0


def throughput(
    scenarios: list[Scenario], loop: asyncio.AbstractEventLoop, port: int, plan: Plan
) -> list[Throughput]:
    check_same(scenarios, loop)
    for scenario in scenarios:  # open the pools' connections
        loop.run_until_complete(_blast(scenario, plan.concurrency * 4, plan.concurrency))
    results = {s.name: Throughput(s.name) for s in scenarios}
    for r in range(plan.throughput_rounds):
        k = r % len(scenarios)
        for scenario in scenarios[k:] + scenarios[:k]:
            # Each measurement starts warm and clean, whatever ran before it: the other clients
            # take seconds, over which a pool lets its idle connections expire (lmclient's after
            # KEEPALIVE_EXPIRY), so an uncounted blast reopens them; and the garbage they left is
            # collected now, not during this client's count.
            loop.run_until_complete(_blast(scenario, plan.concurrency * 4, plan.concurrency))
            gc.collect()
            # At least throughput_seconds per measurement: 2000 calls of a fast client take a few
            # tens of milliseconds, which one descheduling on a shared machine skews by half.
            calls, wall, cpu = 0, 0.0, 0.0
            requests0, server0 = server_stats(port)
            while wall < plan.throughput_seconds:
                w, c = loop.run_until_complete(
                    _blast(scenario, plan.throughput_total, plan.concurrency)
                )
                calls, wall, cpu = calls + plan.throughput_total, wall + w, cpu + c
            requests1, server1 = server_stats(port)
            result = results[scenario.name]
            result.rps.append(calls / wall)
            result.cpu_us.append(cpu / calls * 1e6)
            result.server_cpu_us.append((server1 - server0) / (requests1 - requests0) * 1e6)
    return [results[s.name] for s in scenarios]


def close_all(scenarios: list[Scenario], loop: asyncio.AbstractEventLoop) -> None:
    for scenario in scenarios:
        if scenario.close is not None:
            result = scenario.close()
            if inspect.isawaitable(result):
                loop.run_until_complete(result)


def import_seconds(module: str, env: dict[str, str]) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=env,
    )
    return float(out.stdout)


def command_seconds(argv: list[str], env: dict[str, str]) -> float:
    """Wall time of a whole command, from spawn to exit: what a shell user waits for."""
    started = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, timeout=120, env=env)
    return time.perf_counter() - started


def imports(n: int) -> dict[str, list[float]]:
    """Import wall time in fresh interpreters, and the `lmclient --help` command's, alternating,
    after one unmeasured run each.

    Bytecode is cached for all, as it is for an installed package: in a private cache directory
    (PYTHONPYCACHEPREFIX), so that PYTHONDONTWRITEBYTECODE in the environment, which leaves an
    editable checkout recompiling on every import, does not charge lmclient for it."""
    cli = [str(Path(sys.executable).with_name("lmclient")), "--help"]
    measures: dict[str, Callable[[dict[str, str]], float]] = {
        "import lmclient": lambda env: import_seconds("lmclient", env),
        "import openai": lambda env: import_seconds("openai", env),
        "lmclient --help": lambda env: command_seconds(cli, env),
    }
    times: dict[str, list[float]] = {name: [] for name in measures}
    with tempfile.TemporaryDirectory(prefix="lmclient-bench-pycache-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for measure in measures.values():
            measure(env)
        for _ in range(n):
            for name, measure in measures.items():
                times[name].append(measure(env))
    return times


# -- the report -----------------------------------------------------------------------------------


def _f(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def latency_table(samples: list[Samples], reference: str) -> list[str]:
    ref = next(s for s in samples if s.name == reference).cpu_median
    lines = [
        f"| | scenario | CPU µs median | CPU p90 | wall µs median | wall p90 | CPU ÷ {reference} |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for i, s in enumerate(samples):
        wall = statistics.median(s.wall) / 1000
        lines.append(
            f"| {chr(65 + i)} | {s.name} | {_f(s.cpu_median)} | {_f(p90(s.cpu))} | {_f(wall)} | "
            f"{_f(p90(s.wall))} | {s.cpu_median / ref:.2f} |"
        )
    return lines


def ratio_matrix(names: list[str], values: list[float], what: str) -> list[str]:
    letters = [chr(65 + i) for i in range(len(names))]
    lines = [
        f"{what}, row ÷ column:",
        "",
        "| | " + " | ".join(letters) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for i, value in enumerate(values):
        cells = " | ".join(f"{value / other:.2f}" for other in values)
        lines.append(f"| **{letters[i]}** | {cells} |")
    return lines


@dataclass
class Target:
    what: str
    measured: float
    limit: float
    at_most: bool  # the measured ratio must be <= limit (else >=)

    @property
    def met(self) -> bool:
        return self.measured <= self.limit if self.at_most else self.measured >= self.limit

    def row(self) -> str:
        sign = "≤" if self.at_most else "≥"
        verdict = "met" if self.met else f"**missed** by {abs(self.measured / self.limit - 1):.0%}"
        return f"| {self.what} | {sign} {self.limit:g} | {self.measured:.2f} | {verdict} |"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        text = Path("/proc/cpuinfo").read_text()
        found = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
        if found:
            cpu = found.group(1).strip()
    except OSError:
        pass
    versions = ", ".join(
        f"{p} {metadata.version(p)}" for p in ("aiohttp", "httpx", "msgspec", "openai", "pydantic")
    )
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}; {versions}"
    )


def run(plan: Plan, command: str) -> str:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="lmc-bench-", dir="/tmp") as tmp,
        server(uds := f"{tmp}/bench.sock") as port,
    ):
        capacity = measure_server(port, max(500, plan.throughput_total))
        small_s = small_call_scenarios(port, uds)
        small = interleaved(
            small_s, loop, rounds=plan.rounds, per_round=plan.per_round, warmup=plan.warmup
        )
        close_all(small_s, loop)
        stream_s = stream_scenarios(port, plan.stream_chunks)
        stream = interleaved(
            stream_s,
            loop,
            rounds=plan.stream_rounds,
            per_round=plan.stream_per_round,
            warmup=max(3, plan.warmup // 10),
        )
        close_all(stream_s, loop)
        large = RawClient(port, "/large/v1/chat/completions")
        large_body = large.fetch(request_body({}))
        large.close()
        decode = interleaved(
            decode_scenarios(large_body),
            loop,
            rounds=plan.decode_rounds,
            per_round=plan.decode_per_round,
            warmup=plan.warmup,
        )
        through_s = throughput_scenarios(port, plan.concurrency)
        through = throughput(through_s, loop, port, plan)
        close_all(through_s, loop)
    loop.close()
    import_times = imports(plan.imports)
    elapsed = time.perf_counter() - started
    return report(plan, command, capacity, small, stream, decode, through, import_times, elapsed)


def report(
    plan: Plan,
    command: str,
    capacity: ServerCapacity,
    small: list[Samples],
    stream: list[Samples],
    decode: list[Samples],
    through: list[Throughput],
    import_times: dict[str, list[float]],
    elapsed: float,
) -> str:
    def cpu(group: list[Samples], prefix: str) -> float:  # the name itself, else its prefix
        found = [s for s in group if s.name == prefix] or [
            s for s in group if s.name.startswith(prefix)
        ]
        return found[0].cpu_median

    def rps(prefix: str) -> float:
        found = [t for t in through if t.name == prefix] or [
            t for t in through if t.name.startswith(prefix)
        ]
        return statistics.median(found[0].rps)

    lm_import = statistics.median(import_times["import lmclient"])
    oa_import = statistics.median(import_times["import openai"])
    real_sync, real_floor = cpu(small, REAL_SYNC), cpu(small, "raw socket + msgspec, realistic")
    lm_sync, floor = cpu(small, NARROW_SYNC), cpu(small, "raw socket + msgspec (floor)")
    real_rps = rps(REAL_ASYNC) / rps("raw asyncio.Protocol + msgspec, realistic")
    lm_rps_ratio = rps(NARROW_ASYNC) / rps("raw asyncio.Protocol + msgspec (floor)")
    lm_stream, floor_stream = cpu(stream, "lmclient"), cpu(stream, "raw socket")
    targets = [
        Target(
            "sync realistic call: lmclient ÷ raw socket floor (CPU)",
            real_sync / real_floor,
            1.3,
            True,
        ),
        Target(
            f"async realistic call, concurrency {plan.concurrency}: lmclient ÷ raw asyncio floor "
            "(req/s)",
            real_rps,
            0.6,
            False,
        ),
        Target("sync narrow call: lmclient ÷ raw socket floor (CPU)", lm_sync / floor, 1.5, True),
        Target(
            f"async narrow call, concurrency {plan.concurrency}: lmclient ÷ raw asyncio floor "
            "(req/s)",
            lm_rps_ratio,
            0.6,
            False,
        ),
        Target(
            f"async, concurrency {plan.concurrency}: lmclient ÷ aiohttp (req/s)",
            rps(NARROW_ASYNC) / rps("aiohttp"),
            1,
            False,
        ),
        Target(
            f"stream of {plan.stream_chunks} chunks: (lmclient - raw floor) CPU µs per chunk",
            (lm_stream - floor_stream) / plan.stream_chunks,
            3,
            True,
        ),
        Target(
            "sync narrow call: lmclient ÷ httpx transport direct (CPU)",
            lm_sync / cpu(small, "httpx transport"),
            1.2,
            True,
        ),
        Target(
            "sync narrow call: lmclient ÷ openai create (CPU)",
            lm_sync / cpu(small, "openai create"),
            0.25,
            True,
        ),
        Target(
            f"async, concurrency {plan.concurrency}: lmclient ÷ AsyncOpenAI (req/s)",
            rps(NARROW_ASYNC) / rps("openai"),
            2,
            False,
        ),
        Target(
            f"async, concurrency {plan.concurrency}: lmclient ÷ httpx.AsyncClient (req/s)",
            rps(NARROW_ASYNC) / rps("httpx"),
            4,
            False,
        ),
        Target(
            f"stream of {plan.stream_chunks} chunks: lmclient ÷ openai (CPU)",
            lm_stream / cpu(stream, "openai"),
            0.2,
            True,
        ),
        Target(
            "decode + validate `large`: pydantic ÷ lmclient (CPU)",
            cpu(decode, "pydantic") / cpu(decode, "lmclient"),
            3,
            False,
        ),
        Target("import: lmclient ÷ openai (wall)", lm_import / oa_import, 0.3, True),
    ]
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    out = [
        f"Measured {now} on {machine()}.",
        f"Command: `{command}` ({elapsed:.0f} s). Loopback server (`benchmarks/server.py`, its "
        f"own process): {capacity.sequential_rps:,.0f} req/s to one sequential raw-socket "
        f"client, {capacity.cpu_us_per_request:.1f} CPU µs per request.",
        "",
        "**Targets** (ratios of medians, same run)",
        "",
        "| target | bound | measured | |",
        "|---|---:|---:|---|",
        *(t.row() for t in targets),
        "",
        f"**One call, small structured response** ({plan.rounds} rounds × {plan.per_round} "
        "calls per scenario, interleaved)",
        "",
        *latency_table(small, NARROW_SYNC),
        "",
        *ratio_matrix([s.name for s in small], [s.cpu_median for s in small], "CPU median"),
        "",
        f"**Streaming {plan.stream_chunks} chunks to a validated `list[Record]`** "
        f"({plan.stream_rounds} rounds × {plan.stream_per_round})",
        "",
        *latency_table(stream, "lmclient Client.stream(...).value"),
        "",
        f"**Decode + validate only: the `large` body (200 records), no network** "
        f"({plan.decode_rounds} rounds × {plan.decode_per_round})",
        "",
        *latency_table(decode, "lmclient: Call.finish -> list[Record]"),
        "",
        f"**Async throughput: calls at concurrency {plan.concurrency}, in runs of "
        f"{plan.throughput_total} for at least {plan.throughput_seconds:g} s per measurement** "
        f"(median of {plan.throughput_rounds} interleaved rounds; server CPU shows it is not the "
        "bottleneck)",
        "",
        "| scenario | req/s | client CPU µs / call | server CPU µs / call | req/s ÷ lmclient |",
        "|---|---:|---:|---:|---:|",
    ]
    lm_rps = rps(NARROW_ASYNC)
    for t in through:
        r = statistics.median(t.rps)
        out.append(
            f"| {t.name} | {r:,.0f} | {_f(statistics.median(t.cpu_us))} | "
            f"{_f(statistics.median(t.server_cpu_us))} | {r / lm_rps:.2f} |"
        )
    out += [
        "",
        f"**Import, fresh interpreter, bytecode cached** (wall ms, median of {plan.imports}, "
        "alternating; `lmclient --help` is the whole command, from spawn to exit)",
        "",
        "| measured | median | min | max |",
        "|---|---:|---:|---:|",
    ]
    for name, times in import_times.items():
        ms = [t * 1000 for t in times]
        out.append(f"| `{name}` | {statistics.median(ms):.0f} | {min(ms):.0f} | {max(ms):.0f} |")
    return "\n".join(out) + "\n"


def update_readme(path: Path, report_text: str) -> None:
    text = path.read_text()
    start, end = text.index(START_MARK) + len(START_MARK), text.index(END_MARK)
    path.write_text(text[:start] + "\n" + report_text + text[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description="lmclient next to its peers, one run.")
    parser.add_argument("--quick", action="store_true", help="a smoke run: numbers are noise")
    parser.add_argument(
        "--docs",
        type=Path,
        default=None,
        help="also write the report into this page, between its bench markers "
        "(docs/performance.md)",
    )
    args = parser.parse_args()
    plan = Plan.quick() if args.quick else Plan()
    command = "make bench" if os.environ.get("MAKELEVEL") else " ".join(["python", *sys.argv])
    text = run(plan, command)
    print(text)
    if args.docs is not None:
        update_readme(args.docs, text)


if __name__ == "__main__":
    main()
