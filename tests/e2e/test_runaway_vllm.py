"""Runaways against the real vLLM server (issue 39): vLLM stops a loop itself when told to
(``repetition_detection``, which lmclient sends for an answer its type does not bound), ending
it with ``finish_reason: "repetition"``; lmclient raises that as the `RunawayError` its own watch
raises elsewhere, and nothing is left running on the server.

The loop is the one the issue measured on this very server: ``generate("Say hi.")`` at
temperature 0 writes ``Say hi. mendatanguser`` and a newline, again and again (2,036 tokens and
143 s with no guard).
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

import lmclient
from lmclient import CallParams
from scripts import vllm

pytestmark = pytest.mark.timeout(300, func_only=True)

LOOPING: CallParams = {"temperature": 0.0, "seed": 1, "max_tokens": 1500}
BOUND_S = 60.0
_RUNNING = re.compile(r"^vllm:num_requests_running\{[^}]*\} (\S+)$", re.MULTILINE)


def running_requests(server: vllm.VllmServer) -> float:
    with urllib.request.urlopen(f"{server.root_url}/metrics", timeout=10) as resp:
        found = _RUNNING.search(resp.read().decode())
    assert found, "vllm:num_requests_running is missing from /metrics"
    return float(found.group(1))


def wait_until_idle(server: vllm.VllmServer) -> None:
    end = time.monotonic() + BOUND_S
    while running_requests(server):
        if time.monotonic() > end:
            pytest.fail(f"a request still runs {BOUND_S:.0f} s on; log:\n{server.log_tail()}")
        time.sleep(0.2)


def test_vllm_stops_the_loop_itself(vllm_server: vllm.VllmServer) -> None:
    with (
        lmclient.Client(vllm_server.base_url) as client,
        pytest.raises(lmclient.RunawayError) as caught,
    ):
        client.generate("Say hi.", **LOOPING)
    error = caught.value
    assert error.by == "server" and error.path == "$"
    assert error.tokens is not None and error.tokens <= 512  # the server's own count
    assert error.span and error.span in error.text
    assert "raise max_tokens" not in str(error)
    wait_until_idle(vllm_server)


async def test_async_a_stream_is_stopped_by_the_server(vllm_server: vllm.VllmServer) -> None:
    async with lmclient.AsyncClient(vllm_server.base_url) as client:
        with pytest.raises(lmclient.RunawayError) as caught:
            async with client.stream("Say hi.", **LOOPING) as stream:
                async for _ in stream:
                    pass
    assert caught.value.by == "server"
    wait_until_idle(vllm_server)
