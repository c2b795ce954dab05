"""`FakeLLM` served from a process of its own, for the loads a thread in the test's process
cannot take: 100,000 calls through Ray's actors, the benchmarks. In the driver's process its
accept loop and handlers would share one interpreter lock with Ray's driver threads, and under
load connects time out."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_SERVE = """
import sys
from lmclient.testing import FakeLLM
fake = FakeLLM()
exec(sys.argv[1])  # the caller's script: fake.reply(...), fake.fail(...)
with fake.serve() as url:
    print(url, flush=True)
    sys.stdin.read()  # until the caller closes its end
print(len(fake.calls), flush=True)
"""


class Served:
    """The fake's base URL, and after the block the number of generation calls it answered."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.calls: int | None = None


@contextmanager
def fake_process(script: str = "", timeout: float = 60) -> Iterator[Served]:
    """Serve a FakeLLM (scripted by ``script``, Python run with ``fake`` in scope) in a child
    process on 127.0.0.1; stopped, and waited for, when the block ends."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE, script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        served = Served(proc.stdout.readline().strip())
        if not served.base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the fake did not start: {served.base_url!r}")
        yield served
        proc.stdin.close()
        served.calls = int(proc.stdout.readline())
    finally:
        if not proc.stdin.closed:
            proc.stdin.close()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
