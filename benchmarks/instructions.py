"""Instructions per call, counted by callgrind: a measure that a loaded machine does not move.

    .venv/bin/python benchmarks/instructions.py            # every scenario below
    .venv/bin/python benchmarks/instructions.py sync raw   # some of them
    .venv/bin/python benchmarks/instructions.py --check    # the guard (`make bench` runs it)
    .venv/bin/python benchmarks/instructions.py --update-baseline  # accept the counts as they are

CPU time on a shared machine moves with the load by tens of percent; the instructions a call
executes do not. This runs one process under valgrind's callgrind with instrumentation off,
starts `server.py` (outside valgrind), and for each scenario turns counting on, runs it N1 and
then N2 times (after a warm-up), and reports (count at N2 - count at N1) / (N2 - N1): the
instructions of one call, user space only (the kernel's share of a system call is not counted,
so a call's system calls are not in it). Needs valgrind (``callgrind_control`` on the PATH).
Each scenario is the benchmark's own (`scenarios.py`); the async ones run 64 concurrent tasks.

``--check`` counts the realistic and the narrow call, sync and async, and fails when one is more
than 5 % above ``instructions-baseline.json`` (`guard.py` decides; a change that does so says why
in its CHANGELOG entry, then ``--update-baseline`` stores the new counts).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import glob
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import guard

HERE = Path(__file__).resolve().parent
# ``real*``: the call users make (a system and a user message, temperature, max_tokens, a Struct);
# the others: the narrow call (a str prompt, no parameters), by lmclient, its floor and two peers
# (``httpx``: httpx.Client.post + msgspec; ``openai``: the SDK's create + pydantic), and the stream.
SCENARIOS = (
    "realraw",
    "realsync",
    "realrawasync",
    "realasync",
    "raw",
    "sync",
    "rawasync",
    "async",
    "httpx",
    "openai",
    "rawstream",
    "stream",
)
# How many calls each count runs (N1, then N2): a stream of 256 chunks is ~100 small calls.
COUNTS = {
    "rawasync": (1000, 3000),
    "async": (1000, 3000),
    "realrawasync": (1000, 3000),
    "realasync": (1000, 3000),
    "rawstream": (10, 30),
    "stream": (10, 30),
    "httpx": (100, 300),
    "openai": (30, 90),
}


def _sync_call(which: str, port: int) -> Callable[[], Any]:
    import scenarios as s

    import lmclient

    if which == "raw":
        raw = s.RawClient(port, "/small/v1/chat/completions")
        return lambda: s._person_from_completion(raw.fetch(s.request_body(s.PERSON_FIELDS)))
    if which == "sync":
        client = lmclient.Client(f"http://127.0.0.1:{port}/small/v1", model=s.MODEL, dialect="vllm")
        return lambda: client.generate(s.PROMPT, s.Person)
    if which == "realraw":
        raw = s.RawClient(port, "/small/v1/chat/completions")
        return lambda: s._person_from_completion(raw.fetch(s.realistic_body(s.PERSON_FIELDS)))
    if which == "realsync":
        client = lmclient.Client(f"http://127.0.0.1:{port}/small/v1", model=s.MODEL, dialect="vllm")
        return lambda: client.generate(s.realistic_messages(), s.Person, **s.SAMPLING)
    if which in _PEERS:
        found = {x.name: x for x in s.small_call_scenarios(port)}
        call = found[_PEERS[which]].call
        assert call is not None
        return call
    if which == "rawstream":
        raw = s.RawClient(port, "/sse256/v1/chat/completions")
        body = s.RECORDS_FIELDS
        return lambda: s._records.decode(raw.stream_content(s.request_body(body, stream=True)))
    client = lmclient.Client(f"http://127.0.0.1:{port}/sse256/v1", model=s.MODEL, dialect="vllm")

    def stream() -> Any:
        with client.stream(s.PROMPT, list[s.Record]) as opened:
            return opened.value

    return stream


_PEERS = {"httpx": "httpx.Client.post + msgspec", "openai": "openai create + pydantic"}
_ASYNC_NAMES = {
    "rawasync": "raw asyncio.Protocol + msgspec (floor)",
    "async": "lmclient AsyncClient.generate",
    "realrawasync": "raw asyncio.Protocol + msgspec, realistic (floor)",
    "realasync": "lmclient AsyncClient.generate, realistic",
}


def measure(scenarios: list[str], port: int) -> None:
    """The side under valgrind: count each scenario's calls, one dump per count."""
    import scenarios as s

    def control(*args: str) -> None:
        subprocess.run(
            ["callgrind_control", *args, str(os.getpid())], capture_output=True, check=True
        )

    control("-i", "on")
    loop = asyncio.new_event_loop()
    for which in scenarios:
        if which in ("rawasync", "async", "realrawasync", "realasync"):
            found = {x.name: x for x in s.throughput_scenarios(port, 64)}
            acall = found[_ASYNC_NAMES[which]].acall
            assert acall is not None

            async def blast(total: int, acall: Any = acall) -> None:
                remaining = total

                async def worker() -> None:
                    nonlocal remaining
                    while remaining > 0:
                        remaining -= 1
                        await acall()

                await asyncio.gather(*(worker() for _ in range(64)))

            loop.run_until_complete(blast(512))
            for n in COUNTS[which]:
                control("-z")
                loop.run_until_complete(blast(n))
                control("-d")
            continue
        call = _sync_call(which, port)
        for _ in range(20):
            call()
        for n in COUNTS.get(which, (300, 900)):
            control("-z")
            for _ in range(n):
                call()
            control("-d")
    loop.close()


def count(scenarios: list[str]) -> dict[str, int]:
    """Instructions per call of each scenario: one process under callgrind, the server outside."""
    from run import server

    with server() as port, tempfile.TemporaryDirectory(prefix="lmclient-callgrind-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")  # no compiling under valgrind
        out = Path(tmp) / "callgrind.out"
        valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
        script = [str(Path(__file__).resolve()), *scenarios, "--port", str(port)]
        subprocess.run(
            [*valgrind, f"--callgrind-out-file={out}", sys.executable, *script],
            check=True,
            capture_output=True,
            env=env,
            timeout=3600,
        )
        totals = []
        for dump in sorted(glob.glob(f"{out}.*"), key=lambda p: int(p.rsplit(".", 1)[1])):
            text = Path(dump).read_text()
            line = next(x for x in text.splitlines() if x.startswith(("summary:", "totals:")))
            totals.append(int(line.split()[1]))
    counts = {}
    for i, which in enumerate(scenarios):
        n1, n2 = COUNTS.get(which, (300, 900))
        counts[which] = round((totals[2 * i + 1] - totals[2 * i]) / (n2 - n1))
    return counts


def _commit() -> str:
    """The commit counted, ``-dirty`` when the work tree has changes not committed."""
    described = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=7"],
        capture_output=True,
        text=True,
        cwd=HERE,
        check=False,
    )
    return described.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description="Instructions per call, under callgrind.")
    parser.add_argument("scenarios", nargs="*", help=f"some of: {' '.join(SCENARIOS)}")
    guarding = parser.add_mutually_exclusive_group()
    guarding.add_argument(
        "--check",
        action="store_true",
        help=f"count {' '.join(guard.GUARDED)} and fail if one is more than "
        f"{guard.LIMIT_PERCENT} % above {guard.BASELINE.name}",
    )
    guarding.add_argument(
        "--update-baseline",
        action="store_true",
        help=f"count {' '.join(guard.GUARDED)} and store them in {guard.BASELINE.name}",
    )
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)  # the side under valgrind
    args = parser.parse_args()
    if (args.check or args.update_baseline) and args.scenarios:
        parser.error("--check and --update-baseline count the guarded scenarios: name none")
    args.scenarios = args.scenarios or list(
        guard.GUARDED if args.check or args.update_baseline else SCENARIOS
    )
    unknown = set(args.scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    sys.path.insert(0, str(HERE))
    if args.port is not None:
        measure(args.scenarios, args.port)
        return
    python = platform.python_version()
    if args.check:
        baseline = guard.load()
        if python != baseline.python:  # say so before minutes under valgrind, not after
            print(guard.check(baseline, {}, python).message)
            return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        if args.check:
            print(
                "instruction guard not applied: it needs valgrind (callgrind_control on the PATH)"
            )
            return
        raise SystemExit("needs valgrind (callgrind_control on the PATH)")
    counts = count(args.scenarios)
    print("| scenario | instructions per call |\n|---|---:|")
    for which, per_call in counts.items():
        print(f"| {which} | {per_call:,} |")
    if args.update_baseline:
        today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
        guard.dump(guard.Baseline(python=python, date=today, commit=_commit(), counts=counts))
        print(f"stored in {guard.BASELINE}")
    if args.check:
        verdict = guard.check(baseline, counts, python)
        print(verdict.message)
        if verdict.outcome is guard.Outcome.GROWN:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
