"""Every wait of a call is bounded by its deadline and timeouts, however often a signal
interrupts it, and sending is bounded as receiving is: both clients, a request and a stream,
against byte-level servers (`tests.byte_server`) that stall or read slowly.

A signal handled while a call waits (a profiler's, ``setitimer``'s, a watchdog's) must not
restart the wait afresh: the sync client's waits were the kernel's socket timeouts, which each
signal restarted, so a 1 s deadline under a 0.2 s SIGALRM ran until the server answered. Nor
may a server that reads slowly stretch a send: the kernel's send timeout restarted with each
piece it took, and an 8 MiB prompt ran 54 s past a 2 s deadline."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import lmclient
from tests.byte_server import FIRST_EVENT, HOLD, STREAM_HEAD, ByteServer, read_request

# pytest-timeout's default method is itself a SIGALRM: its thread method leaves the signal to
# the tests. Each test is timed (a second or two, by design).
pytestmark = [
    pytest.mark.timeout(60, method="thread"),
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="no SIGALRM or setitimer on Windows"),
]

BOUND = 1.0  # the deadline, or the timeout, each call is given
GRACE = 0.5  # how far past it a call may end: generous, for a loaded machine
PROMPT = "x" * (8 << 20)  # more than the kernel's buffers take on both sides of a connection
SLOW_BOUND = 2.0


def stall(sock: socket.socket, server: ByteServer) -> None:
    """Reads the request and answers nothing."""
    if read_request(sock):
        server.release.wait(HOLD)


def stall_stream(sock: socket.socket, server: ByteServer) -> None:
    """Reads the request, begins a stream with one event, and sends nothing more."""
    if read_request(sock):
        sock.sendall(STREAM_HEAD + FIRST_EVENT)
        server.release.wait(HOLD)


def read_slowly(sock: socket.socket, server: ByteServer) -> None:
    """Reads 8 KiB every 0.1 s (80 KiB/s: an 8 MiB request takes 100 s), for `HOLD` seconds."""
    ends = time.monotonic() + HOLD
    while time.monotonic() < ends and sock.recv(8192):
        if server.release.wait(0.1):
            return


@pytest.fixture
def alarm() -> Iterator[list[int]]:
    """SIGALRM every 0.2 s, its handler a no-op that counts; the handler and the timer as they
    were afterwards."""
    fired = [0]

    def handler(signum: int, frame: Any) -> None:
        fired[0] += 1

    previous = signal.signal(signal.SIGALRM, handler)
    timer = signal.setitimer(signal.ITIMER_REAL, 0.2, 0.2)
    try:
        yield fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, *timer)
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)


@pytest.fixture(params=["tcp", "uds"])
def serve(request: pytest.FixtureRequest) -> Iterator[Callable[..., ByteServer]]:
    """Starts a `ByteServer` with a handler, over TCP or a Unix socket."""
    servers: list[ByteServer] = []
    with tempfile.TemporaryDirectory(prefix="lmc-waits-", dir="/tmp") as name:

        def start(handle: Callable[[socket.socket, ByteServer], None]) -> ByteServer:
            uds_dir = Path(name) if request.param == "uds" else None
            servers.append(ByteServer(handle, uds_dir))
            return servers[-1]

        yield start
        for server in servers:
            server.stop()


def bound(kind: str, seconds: float) -> dict[str, Any]:
    """A call's deadline, or its timeout (every phase; not retried, so one wait is measured)."""
    if kind == "deadline":
        return {"deadline": seconds}
    return {"timeout": seconds, "max_retries": 0}


PHASES = [("request", "deadline"), ("stream", "deadline"), ("request", "timeout"),
          ("stream", "timeout")]  # fmt: skip


@pytest.mark.parametrize(("phase", "kind"), PHASES)
def test_sync_a_stalled_server_under_a_periodic_signal(
    phase: str, kind: str, serve: Callable[..., ByteServer], alarm: list[int]
) -> None:
    server = serve(stall if phase == "request" else stall_stream)
    with lmclient.Client(**server.options, model="m", dialect="vllm") as client:
        fired = alarm[0]
        started = time.monotonic()
        with pytest.raises(lmclient.APITimeoutError):
            if phase == "request":
                client.generate("hi", **bound(kind, BOUND))
            else:
                with client.stream("hi", **bound(kind, BOUND)) as stream:
                    assert next(iter(stream)) == "a"  # the stream has begun
                    for _ in stream:
                        pass
        elapsed = time.monotonic() - started
        assert not client._transport._pool.connections()
    assert elapsed < BOUND + GRACE
    assert alarm[0] - fired >= 2  # the wait was interrupted, and more than once


async def read_to_the_end(deltas: AsyncIterator[str]) -> None:
    async for _ in deltas:
        pass


@pytest.mark.parametrize(("phase", "kind"), PHASES)
async def test_async_a_stalled_server_under_a_periodic_signal(
    phase: str, kind: str, serve: Callable[..., ByteServer], alarm: list[int]
) -> None:
    server = serve(stall if phase == "request" else stall_stream)
    async with lmclient.AsyncClient(**server.options, model="m", dialect="vllm") as client:
        fired = alarm[0]
        started = time.monotonic()
        with pytest.raises(lmclient.APITimeoutError):
            if phase == "request":
                await asyncio.wait_for(client.generate("hi", **bound(kind, BOUND)), HOLD)
            else:
                async with client.stream("hi", **bound(kind, BOUND)) as stream:
                    deltas = stream.__aiter__()
                    assert await asyncio.wait_for(deltas.__anext__(), HOLD) == "a"
                    await asyncio.wait_for(read_to_the_end(deltas), HOLD)
        elapsed = time.monotonic() - started
        assert not client._transport._pool.connections()
    assert elapsed < BOUND + GRACE
    assert alarm[0] - fired >= 2


@pytest.mark.parametrize("kind", ["deadline", "timeout"])
@pytest.mark.usefixtures("alarm")
def test_sync_a_large_prompt_to_a_slow_reader(kind: str, serve: Callable[..., ByteServer]) -> None:
    server = serve(read_slowly)
    with lmclient.Client(**server.options, model="m", dialect="vllm") as client:
        started = time.monotonic()
        with pytest.raises(lmclient.APITimeoutError):
            client.generate(PROMPT, **bound(kind, SLOW_BOUND))
        elapsed = time.monotonic() - started
        assert not client._transport._pool.connections()
    assert elapsed < SLOW_BOUND + GRACE


@pytest.mark.parametrize("kind", ["deadline", "timeout"])
@pytest.mark.usefixtures("alarm")
async def test_async_a_large_prompt_to_a_slow_reader(
    kind: str, serve: Callable[..., ByteServer]
) -> None:
    server = serve(read_slowly)
    async with lmclient.AsyncClient(**server.options, model="m", dialect="vllm") as client:
        started = time.monotonic()
        with pytest.raises(lmclient.APITimeoutError):
            await asyncio.wait_for(client.generate(PROMPT, **bound(kind, SLOW_BOUND)), HOLD)
        elapsed = time.monotonic() - started
        assert not client._transport._pool.connections()
    assert elapsed < SLOW_BOUND + GRACE
