"""Client CPU per embeddings answer: lmclient's `embed` next to the openai SDK's
`embeddings.create`, on the same loopback server, for 1,000 vectors of 1,024 floats.

    .venv/bin/python benchmarks/embeddings.py                  # print the report
    .venv/bin/python benchmarks/embeddings.py --docs docs/performance.md   # also write it there
    .venv/bin/python benchmarks/embeddings.py --quick          # a smoke run: numbers are noise

A server in its own process (this file, ``--serve``; stopped by its PID) answers every ``POST
.../embeddings`` with a fixed, precomputed body of 1,000 float32 vectors: ``/b64/v1/...`` in
base64 (what both clients ask for by default), ``/float/v1/...`` as JSON floats; so this
process's CPU time is the clients' alone: the request, the HTTP exchange, and the decoding,
which is most of it. Rounds are interleaved (A B C D, rotated each round) after a warm-up, and
the medians reported. The SDK decodes base64 with numpy when numpy is importable and with the
stdlib ``array`` otherwise; the report says which one ran.
"""

from __future__ import annotations

import argparse
import array
import base64
import datetime
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from typing import Any

VECTORS, WIDTH = 1_000, 1_024
MODEL = "bench-embed"
START_MARK, END_MARK = "<!-- bench-embeddings:start -->", "<!-- bench-embeddings:end -->"


def bodies() -> dict[str, bytes]:
    """The two fixed answers: the same float32 numbers, in base64 and as JSON floats."""
    rng = random.Random(0)
    vectors = [array.array("f", (rng.uniform(-1, 1) for _ in range(WIDTH))) for _ in range(VECTORS)]
    usage = {"prompt_tokens": VECTORS * 8, "total_tokens": VECTORS * 8}

    def body(encode: Callable[[array.array[float]], object]) -> bytes:
        data = [
            {"object": "embedding", "index": i, "embedding": encode(v)}
            for i, v in enumerate(vectors)
        ]
        answer = {"object": "list", "data": data, "model": MODEL, "usage": usage}
        return json.dumps(answer, separators=(",", ":")).encode()

    assert sys.byteorder == "little", "the wire is little-endian float32"
    return {
        "b64": body(lambda v: base64.b64encode(v.tobytes()).decode()),
        "float": body(lambda v: [float(x) for x in v]),  # repr of each float32, as servers print
    }


def serve() -> None:
    """The server process: prints ``READY <port>``, answers until killed."""
    answers = bodies()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            body = answers[self.path.strip("/").split("/")[0]]
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


@contextmanager
def server() -> Iterator[int]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("READY "):
            raise RuntimeError(f"the benchmark server did not start: {line!r}")
        yield int(line.split()[1])
    finally:
        process.terminate()  # this process's own child, by its PID
        process.wait(timeout=10)


def clients(port: int) -> dict[str, Callable[[list[str]], int]]:
    """Each way to embed the texts; each returns the number of floats it got, as a check."""
    import openai

    import lmclient

    root = f"http://127.0.0.1:{port}"
    lm_b64 = lmclient.Client(f"{root}/b64/v1", model=MODEL, dialect="vllm", max_retries=0)
    lm_float = lmclient.Client(f"{root}/float/v1", model=MODEL, dialect="generic", max_retries=0)
    oa_b64 = openai.OpenAI(base_url=f"{root}/b64/v1", api_key="x", max_retries=0)
    oa_float = openai.OpenAI(base_url=f"{root}/float/v1", api_key="x", max_retries=0)

    def lmclient_b64(texts: list[str]) -> int:
        return sum(map(len, lm_b64.embed(texts, batch_size=VECTORS)))

    def lmclient_float(texts: list[str]) -> int:
        return sum(map(len, lm_float.embed(texts, batch_size=VECTORS)))

    def openai_b64(texts: list[str]) -> int:  # the SDK's default: base64
        answer = oa_b64.embeddings.create(input=texts, model=MODEL)
        return sum(len(d.embedding) for d in answer.data)

    def openai_float(texts: list[str]) -> int:
        answer = oa_float.embeddings.create(input=texts, model=MODEL, encoding_format="float")
        return sum(len(d.embedding) for d in answer.data)

    return {
        "lmclient `embed` (base64)": lmclient_b64,
        "openai `embeddings.create` (base64)": openai_b64,
        "lmclient `embed` (floats)": lmclient_float,
        "openai `embeddings.create` (float)": openai_float,
    }


def measure(rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """CPU and wall milliseconds per call, per client, interleaved and rotated."""
    texts = [f"text {i}" for i in range(VECTORS)]
    cpu: dict[str, list[float]] = {}
    wall: dict[str, list[float]] = {}
    with server() as port:
        ways = clients(port)
        for way in ways.values():  # warm-up: connections, imports, caches
            assert way(texts) == VECTORS * WIDTH
        names = list(ways)
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                c0, w0 = time.process_time(), time.perf_counter()
                got = ways[name](texts)
                cpu.setdefault(name, []).append((time.process_time() - c0) * 1000)
                wall.setdefault(name, []).append((time.perf_counter() - w0) * 1000)
                assert got == VECTORS * WIDTH
    return cpu, wall


def sdk_decoder() -> str:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return "the stdlib `array` (numpy is not installed here)"
    return "numpy (`numpy.frombuffer`)"


def report(rounds: int, seconds: float, command: str) -> str:
    cpu, wall = measure(rounds)
    medians = {name: statistics.median(values) for name, values in cpu.items()}
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    versions = ", ".join(f"{p} {metadata.version(p)}" for p in ("msgspec", "openai", "httpx"))
    lines = [
        f"Measured {now} on {os.cpu_count()} CPUs ({_cpu()}), Python "
        f"{platform.python_version()}; {versions}. Command: `{command}` "
        f"({rounds} interleaved rounds, {time.perf_counter() - seconds:.0f} s). The openai SDK "
        f"decoded base64 with {sdk_decoder()}.",
        "",
        f"One call embeds {VECTORS:,} texts; its answer is {VECTORS:,} vectors of {WIDTH:,} "
        "floats, from a loopback server in its own process (a fixed body).",
        "",
        "| client | CPU ms per 1,000 vectors (median) | min | wall ms (median) "
        "| CPU ÷ lmclient base64 |",
        "|---|---:|---:|---:|---:|",
    ]
    base = medians["lmclient `embed` (base64)"]
    for name, values in cpu.items():
        lines.append(
            f"| {name} | {medians[name]:.1f} | {min(values):.1f} | "
            f"{statistics.median(wall[name]):.1f} | {medians[name] / base:.2f} |"
        )
    return "\n".join(lines) + "\n"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="a smoke run: numbers are noise")
    parser.add_argument("--docs", type=Path, default=None, help="also write the report there")
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    for name in ("no_proxy", "NO_PROXY"):  # the loopback server is reached directly
        os.environ[name] = ",".join(filter(None, [os.environ.get(name), "127.0.0.1"]))
    command = "python benchmarks/embeddings.py" + (
        " --docs docs/performance.md" if args.docs else ""
    )
    text = report(3 if args.quick else 15, time.perf_counter(), command)
    print(text)
    if args.docs is not None:
        page = args.docs.read_text()
        start, end = page.index(START_MARK) + len(START_MARK), page.index(END_MARK)
        args.docs.write_text(page[:start] + "\n" + text + page[end:])


if __name__ == "__main__":
    main()
