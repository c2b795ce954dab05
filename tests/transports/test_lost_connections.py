"""A connection the server closes before the request is written — a listener shedding load, a
proxy refusing, a server restarting — over TCP and a Unix socket, with a byte-level server that
closes each connection it accepts at once.

Both clients wake with a typed error (`StaleConnection`, an `APIConnectionError`) and retry it;
none waits for ever. `AsyncClient` used to: asyncio had often seen the close by the time the
request went out, dropped the write without a word, and nothing woke the waiter (not the read
timer, which skipped closed connections); only a deadline ended the call."""

from __future__ import annotations

import asyncio
import logging
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

import lmclient
from lmclient._transports.common import StaleConnection
from lmclient._transports.protocol import AsyncConnection
from tests.byte_server import FIRST_EVENT, STREAM_HEAD, ByteServer, answer, read_request
from tests.helpers import retries_logged

pytestmark = pytest.mark.timeout(60)
HANG = 10.0  # an async call that has not returned by then is reported as hung
CALLS = 5


def close_first(closes: int | None) -> Callable[[socket.socket, ByteServer], None]:
    """A handler that closes the first ``closes`` connections on accepting them (every one when
    None) and answers "hi" to every request on the others."""

    def handle(sock: socket.socket, server: ByteServer) -> None:
        if closes is None or server.accepted <= closes:
            return  # `ByteServer` closes it
        while read_request(sock):
            answer(sock, "hi")

    return handle


@pytest.fixture(params=["tcp", "uds"])
def serve(request: pytest.FixtureRequest) -> Iterator[Callable[[int | None], ByteServer]]:
    """Starts a `ByteServer` with `close_first`, over TCP or a Unix socket."""
    servers: list[ByteServer] = []
    with tempfile.TemporaryDirectory(prefix="lmc-lost-", dir="/tmp") as name:

        def start(closes: int | None) -> ByteServer:
            uds_dir = Path(name) if request.param == "uds" else None
            servers.append(ByteServer(close_first(closes), uds_dir))
            return servers[-1]

        yield start
        for server in servers:
            server.stop()


def test_sync_every_connection_closed_on_accept_is_a_connection_error(
    serve: Callable[[int | None], ByteServer],
) -> None:
    server = serve(None)
    with lmclient.Client(**server.options, model="m", dialect="vllm", max_retries=0) as client:
        for _ in range(CALLS):
            with pytest.raises(lmclient.APIConnectionError) as caught:
                client.generate("hi", timeout=2)
            assert not isinstance(caught.value, lmclient.APITimeoutError)
        assert not client._transport._pool.connections()
    assert server.accepted == CALLS


async def test_async_every_connection_closed_on_accept_is_a_connection_error(
    serve: Callable[[int | None], ByteServer],
) -> None:
    server = serve(None)
    options = {**server.options, "model": "m", "dialect": "vllm", "max_retries": 0}
    async with lmclient.AsyncClient(**options) as client:
        for _ in range(CALLS):
            with pytest.raises(lmclient.APIConnectionError) as caught:
                await asyncio.wait_for(client.generate("hi", timeout=2), HANG)
            assert not isinstance(caught.value, lmclient.APITimeoutError)
        assert not client._transport._pool.connections()
    assert server.accepted == CALLS


def test_sync_a_connection_closed_on_accept_is_retried(
    serve: Callable[[int | None], ByteServer], caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(1)
    caplog.set_level(logging.WARNING, logger="lmclient")
    with lmclient.Client(**server.options, model="m", dialect="vllm") as client:
        assert client.generate("hi", timeout=2) == "hi"
        assert client.generate("hi", timeout=2) == "hi"
    assert (server.accepted, retries_logged(caplog)) == (2, 1)


async def test_async_a_connection_closed_on_accept_is_retried(
    serve: Callable[[int | None], ByteServer], caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(1)
    caplog.set_level(logging.WARNING, logger="lmclient")
    async with lmclient.AsyncClient(**server.options, model="m", dialect="vllm") as client:
        assert await asyncio.wait_for(client.generate("hi", timeout=2), HANG) == "hi"
        assert await asyncio.wait_for(client.generate("hi", timeout=2), HANG) == "hi"
    assert (server.accepted, retries_logged(caplog)) == (2, 1)


# -- the connection itself, in the states a socket cannot be relied on to produce ----------------


def fake_connection(closing: bool = False) -> tuple[AsyncConnection, list[bytes]]:
    """A connection over a transport that records what is written to it."""
    written: list[bytes] = []
    conn = AsyncConnection(asyncio.get_running_loop(), ("http", "127.0.0.1", 1))
    conn.transport = SimpleNamespace(  # type: ignore[assignment]
        write=written.append, abort=lambda: None, is_closing=lambda: closing
    )
    return conn, written


@pytest.mark.parametrize("how", ["lost", "closing"])
async def test_a_closed_connection_is_never_written_to(how: str) -> None:
    """Lost (connection_lost has run) or closing (the end of the stream was seen and
    connection_lost is due): the request is not written, no timer is armed, and the error is
    the one a pooled connection is replaced on."""
    conn, written = fake_connection(closing=how == "closing")
    if how == "lost":
        conn.connection_lost(None)
    loop = asyncio.get_running_loop()
    with pytest.raises(StaleConnection, match="before the request was sent"):
        conn.send_request(b"POST / HTTP/1.1\r\n\r\n", 1 << 20, loop.time() + 5, 0.3, False)
    assert (written, conn.timer, conn.parser) == ([], None, None)


async def test_the_read_timer_wakes_a_call_on_a_connection_closed_without_an_error() -> None:
    """Whatever the connection's state, a call in flight gets its read timeout."""
    conn, written = fake_connection()
    conn.send_request(b"POST / HTTP/1.1\r\n\r\n", 1 << 20, None, 0.3, False)
    assert written
    conn.closed = True  # closed, and nothing recorded an error
    conn.last_read -= 10
    conn._on_timer()
    assert isinstance(conn.error, lmclient.APITimeoutError)
    conn.close()


# -- the client's own closes: done when `aclose` returns -------------------------------------


def held_stream(sock: socket.socket, server: ByteServer) -> None:
    """Begins a stream on the connection's request and holds it until the client closes the
    connection; then says so (``server.release`` doubles as "the client let go")."""
    if read_request(sock):
        sock.sendall(STREAM_HEAD + FIRST_EVENT)
        while sock.recv(65536):
            pass
        server.client_closed.set()  # type: ignore[attr-defined]


@pytest.mark.parametrize("how", ["break", "deadline"])
async def test_aclose_returns_with_every_socket_closed(how: str) -> None:
    """When `AsyncClient.aclose` returns, the server has seen every connection close — also
    the one a stream or a call had already given up (a ``break``, a deadline), whose close
    asyncio finishes one loop iteration later. A caller that then blocks the loop (the vLLM
    abort e2e waits for the server's log in the test's own thread) must not keep the server
    generating for a client that left: before, `aclose` skipped that iteration when its pool was
    empty, as it is when the one connection was the stream's."""
    server = ByteServer(held_stream)
    server.client_closed = threading.Event()  # type: ignore[attr-defined]
    try:
        async with lmclient.AsyncClient(**server.options, model="m", dialect="generic") as client:
            if how == "break":
                async with client.stream("Q") as s:
                    async for _ in s:
                        break
            else:
                with pytest.raises(lmclient.APITimeoutError):
                    await client.generate("Q", deadline=0.5, max_retries=0)
        # no await from here on: the loop does not run again before the check
        assert server.client_closed.wait(HANG)  # type: ignore[attr-defined]
    finally:
        server.stop()
