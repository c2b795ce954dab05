"""A scripted HTTP/1.1 server on 127.0.0.1, and the transports under test: what the transports'
tests (`tests/transports`) and the parser's (`tests/wire/test_http11.py`) share.

`ScriptedServer` answers each request with the next scripted reply (bytes, a close, or silence),
and records what it received and how many connections it accepted, so each test can say exactly
what went over the wire. A module that uses the fixtures names them (``script =
scripted_server.script``), as it would a fixture of its own.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from lmclient._request import PreparedRequest
from lmclient._transports.aio import AsyncTransport
from lmclient._transports.sync import SyncTransport

HEADERS = [("accept", "application/json"), ("content-type", "application/json")]
LIMIT = 1 << 20


def ok(body: bytes = b'{"ok":true}', *extra: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in extra)
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), head.encode(), body)


def chunked(*parts: bytes, trailer: bytes = b"") -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n" + trailer + b"\r\n"
    return b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + body


# -- a scripted loopback server ----------------------------------------------------------------


@dataclass
class Idle:
    """Bytes the server writes to a connection after its answer, once ``go`` is set (the client
    has read the answer, so the connection sits idle in its pool); ``sent`` is set after them."""

    data: bytes
    close: bool = False
    go: threading.Event = field(default_factory=threading.Event)
    sent: threading.Event = field(default_factory=threading.Event)


@dataclass
class Reply:
    """What the server does with one request: send ``data``; then close, or keep the connection;
    ``silent`` sends nothing and leaves the connection open (for timeouts); ``early`` answers as
    soon as the head has arrived and closes without reading the body (a 413 or 401 as servers
    send them); ``idle`` writes more later."""

    data: bytes = b""
    close: bool = False
    silent: bool = False
    early: bool = False
    idle: Idle | None = None


class ScriptedServer:
    """Answers each request, in arrival order, with the next `Reply`; `ok()` when none is left."""

    def __init__(self, *replies: Reply | bytes, tls: Any = None) -> None:
        self.replies = deque(r if isinstance(r, Reply) else Reply(r) for r in replies)
        self.requests: list[bytes] = []
        self.connections = 0
        self.received = threading.Condition()
        self._tls = tls
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._start(self._accept)

    def _start(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return  # closed by stop()
            with self._lock:
                self.connections += 1
                self._socks.append(sock)
            self._start(self._serve, sock)

    def _serve(self, sock: socket.socket) -> None:
        try:
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_side=True)
                with self._lock:
                    self._socks.append(sock)  # the plain socket was detached into this one
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                with self.received:
                    reply = self.replies[0] if self.replies else Reply(ok())
                if reply.early:
                    with self.received:
                        self.replies.popleft()
                        self.requests.append(head + b"\r\n\r\n")
                        self.received.notify_all()
                    sock.sendall(reply.data)
                    sock.close()
                    return
                while len(buf) < length:
                    data = sock.recv(1 << 20)
                    if not data:
                        return
                    buf += data
                with self.received:
                    self.requests.append(head + b"\r\n\r\n" + buf[:length])
                    reply = self.replies.popleft() if self.replies else Reply(ok())
                    self.received.notify_all()
                buf = buf[length:]
                if reply.silent:
                    continue
                sock.sendall(reply.data)
                if reply.idle is not None:
                    assert reply.idle.go.wait(10)
                    sock.sendall(reply.idle.data)
                    reply.idle.sent.set()
                    if reply.idle.close:
                        sock.close()
                        return
                if reply.close:
                    sock.close()
                    return
        except OSError:
            return

    def wait_for_requests(self, n: int) -> None:
        with self.received:
            assert self.received.wait_for(lambda: len(self.requests) >= n, 10)

    def stop(self) -> None:
        with self._lock:
            socks = [self._listener, *self._socks]
        for sock in socks:  # shutdown, unlike close, wakes a thread blocked in accept or recv
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(5)


@pytest.fixture
def script() -> Iterator[Any]:
    servers: list[ScriptedServer] = []

    def start(*replies: Reply | bytes, tls: Any = None) -> ScriptedServer:
        server = ScriptedServer(*replies, tls=tls)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def post(
    url: str, body: bytes = b"{}", headers: list[tuple[str, str]] = HEADERS
) -> PreparedRequest:
    return PreparedRequest("POST", url + "/v1/chat/completions", headers, body)


@pytest.fixture
def sync() -> Iterator[SyncTransport]:
    transport = SyncTransport()
    yield transport
    transport.close()


@pytest.fixture
async def aio() -> AsyncIterator[AsyncTransport]:
    transport = AsyncTransport()
    yield transport
    await transport.aclose()


BODY = {"choices": [{"index": 0, "message": {"content": "4"}, "finish_reason": "stop"}]}
COMPLETION = ok(json.dumps(BODY).encode())
