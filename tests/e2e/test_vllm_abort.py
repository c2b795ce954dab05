"""A caller that stops waiting makes the real vLLM server stop generating (vLLM #54947).

Each request asks for 1,500 tokens with ``ignore_eos``: minutes of decoding on 2 cores. The
client gives up after a few tokens (a ``break`` out of a stream, a deadline), and the server
must then abort that very request: its log says ``Aborted request(s) <id>`` for the id it logged
when the request arrived, and its ``/metrics`` gauge of running requests is back to 0, both
within a bound far shorter than the generation would have taken.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

import lmclient
from lmclient import CallParams
from scripts import vllm

pytestmark = pytest.mark.timeout(300, func_only=True)

LONG: CallParams = {"max_tokens": 1500, "temperature": 0.0, "extra_body": {"ignore_eos": True}}
CUT: CallParams = {**LONG, "deadline": 3.0, "max_retries": 0}  # a few tokens, then give up
PROMPT = "Tell a long story."
BOUND_S = 60.0  # the abort must show by then; the full generation would take minutes
_RECEIVED = re.compile(r"Received request (\S+):")
_RUNNING = re.compile(r"^vllm:num_requests_running\{[^}]*\} (\S+)$", re.MULTILINE)


def wait_for(what: str, check: Callable[[], bool], server: vllm.VllmServer) -> None:
    """Poll the server (its log, its /metrics) until ``check`` holds, at most BOUND_S."""
    end = time.monotonic() + BOUND_S
    while not check():
        if time.monotonic() > end:
            pytest.fail(f"no {what} within {BOUND_S:.0f} s; server log:\n{server.log_tail()}")
        time.sleep(0.2)


def log_since(path: Path, offset: int) -> str:
    with path.open("rb") as fh:
        fh.seek(offset)
        return fh.read().decode("utf-8", errors="replace")


def running_requests(server: vllm.VllmServer) -> float:
    with urllib.request.urlopen(f"{server.root_url}/metrics", timeout=10) as resp:
        found = _RUNNING.search(resp.read().decode())
    assert found, "vllm:num_requests_running is missing from /metrics"
    return float(found.group(1))


def assert_server_aborted(server: vllm.VllmServer, offset: int) -> None:
    """The one request logged after ``offset`` was aborted, and nothing runs any more."""
    received: list[str] = []

    def arrived() -> bool:
        received[:] = _RECEIVED.findall(log_since(server.log_path, offset))
        return bool(received)

    wait_for("logged request", arrived, server)
    assert len(received) == 1, received
    aborted = re.compile(rf"Aborted request\(s\) {re.escape(received[0])}\b")
    wait_for(
        f"abort of {received[0]}",
        lambda: bool(aborted.search(log_since(server.log_path, offset))),
        server,
    )
    wait_for("idle engine", lambda: running_requests(server) == 0, server)


def log_size(server: vllm.VllmServer) -> int:
    wait_for("idle engine", lambda: running_requests(server) == 0, server)  # earlier tests' work
    return server.log_path.stat().st_size


def test_break_out_of_a_stream_aborts_the_request(vllm_server: vllm.VllmServer) -> None:
    offset = log_size(vllm_server)
    with lmclient.Client(vllm_server.base_url) as client, client.stream(PROMPT, **LONG) as s:
        for _ in s:
            break
    assert s.finish_reason is None  # left while the server was still generating
    assert_server_aborted(vllm_server, offset)


async def test_break_out_of_an_async_stream_aborts_the_request(
    vllm_server: vllm.VllmServer,
) -> None:
    offset = log_size(vllm_server)
    async with (
        lmclient.AsyncClient(vllm_server.base_url) as client,
        client.stream(PROMPT, endpoint="completions", **LONG) as s,
    ):
        async for _ in s:
            break
    assert s.finish_reason is None
    assert_server_aborted(vllm_server, offset)


def test_a_deadline_aborts_the_request(vllm_server: vllm.VllmServer) -> None:
    offset = log_size(vllm_server)
    with lmclient.Client(vllm_server.base_url) as client, pytest.raises(lmclient.APITimeoutError):
        client.generate(PROMPT, **CUT)
    assert_server_aborted(vllm_server, offset)


async def test_a_deadline_aborts_the_request_async(vllm_server: vllm.VllmServer) -> None:
    offset = log_size(vllm_server)
    async with lmclient.AsyncClient(vllm_server.base_url) as client:
        with pytest.raises(lmclient.APITimeoutError):
            await client.complete(PROMPT, **CUT)
    assert_server_aborted(vllm_server, offset)
