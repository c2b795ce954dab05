"""Serve a :class:`FakeLLM` over real HTTP/1.1 sockets on 127.0.0.1, or on a Unix socket.

Real sockets exercise what respx cannot: connection pooling and keep-alive, chunked SSE bodies
arriving piece by piece, concurrency, timeouts, and connections that break mid-headers,
mid-body or mid-stream. Every wait of a fault (delay, stall, endless stream) is a wait on the
server's ``stopping`` event, so stopping the server ends them at once.
"""

from __future__ import annotations

import math
import os
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ._inflight import Counted
from ._mount import Mountable
from ._wire import FakeResponse, Pause, StreamDropped, error_response

__all__ = ["serve"]

_POLL_INTERVAL = 0.02  # how long shutdown() may wait for the accept loop to notice
_JOIN_TIMEOUT = 5.0  # bound on waiting for connection threads (e.g. a test left a gate shut)


@contextmanager
def serve(fake: Mountable, uds: str | os.PathLike[str] | None = None) -> Iterator[str]:
    """Run the server in a background thread; yields ``http://127.0.0.1:PORT/v1`` (the fake's
    ``base_path``), or with ``uds`` (a path where nothing exists yet) serves on that Unix
    socket, removed afterwards, and yields ``http://localhost/v1``, the base URL of
    ``Client(uds=...)``."""
    server = _Server(fake) if uds is None else _UnixServer(fake, os.fspath(uds))
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": _POLL_INTERVAL},
        name="lmclient-fake-server",
        daemon=True,
    )
    thread.start()
    if uds is None:
        base_url = f"http://127.0.0.1:{server.server_address[1]}{fake.base_path}"
    else:
        # the socket is the server; the URL, Host and paths
        base_url = f"http://localhost{fake.base_path}"
    try:
        with fake._mounted_at(base_url) as url:
            yield url
    finally:
        server.stopping.set()  # first: ends every fault's wait, so the joins below are short
        server.shutdown()
        server.close_connections(_JOIN_TIMEOUT)
        server.server_close()
        thread.join(_JOIN_TIMEOUT)
        if uds is not None:
            try:
                os.unlink(uds)
            except FileNotFoundError:
                pass  # removed by someone else meanwhile


class _Server(ThreadingHTTPServer):
    """Tracks its connections and their threads so that closing it leaves nothing behind."""

    daemon_threads = True
    block_on_close = False
    # The listen backlog. socketserver's default of 5 drops the SYNs of a burst of new
    # connections (256 concurrent calls, say) while the accept loop catches up; the client
    # kernel then resends them after 1, 3, 7, 15… s, which looks like a slow or hung server.
    request_queue_size = 1024

    def __init__(self, fake: Mountable, address: Any = ("127.0.0.1", 0)) -> None:
        self.fake = fake
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._workers: set[threading.Thread] = set()
        self.stopping = threading.Event()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        worker = threading.Thread(
            target=self._work, args=(request, client_address), name="lmclient-fake-conn"
        )
        worker.daemon = True
        with self._lock:
            self._sockets.add(request)
            self._workers.add(worker)
        worker.start()

    def _work(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._sockets.discard(request)
                self._workers.discard(threading.current_thread())

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client goes away; report anything else (a bug worth seeing)."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)

    def close_connections(self, timeout: float) -> None:
        """End idle keep-alive connections and wait (bounded) for their threads."""
        with self._lock:
            sockets, workers = list(self._sockets), list(self._workers)
        for sock in sockets:
            _shutdown(sock)
        deadline = time.monotonic() + timeout
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))


class _UnixServer(_Server):
    """`_Server` on a Unix socket, for clients made with ``uds=``."""

    address_family = socket.AF_UNIX

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # binds the path (HTTPServer's would resolve it)
        self.server_name, self.server_port = "localhost", 0


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # the client closed it already


class _Handler(BaseHTTPRequestHandler):
    """Reads one request, lets the fake answer, and writes the answer (SSE as HTTP chunks)."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        if self.connection.family != socket.AF_UNIX:  # (no TCP options on a Unix socket)
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging: test output should show the tests."""

    def _dispatch(self) -> None:
        body = self._read_body()
        fake = self.server.fake
        with fake._in_flight.scope() as counted:
            headers = dict(self.headers.items())
            try:
                response = fake.handle(self.command, self.path, headers, body)
            except Exception as exc:  # a bug or a raising test hook: answer rather than hang
                message = f"FakeLLM failed: {exc!r}"
                response = error_response(500, message, "InternalServerError", code=500)
            self._send(response, counted)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _dispatch

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("content-length") or 0))
        parts = []
        while size := int(self.rfile.readline().split(b";")[0], 16):
            parts.append(self.rfile.read(size))
            self.rfile.readline()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return b"".join(parts)

    def _send(self, response: FakeResponse, counted: Counted) -> None:
        """Write the answer as the response asks: delayed, cut, paused, or dropped midway; the
        request stops counting as in flight just before the write that completes its answer
        (`_inflight`)."""
        if response.delay and not self._wait(response.delay):
            self.close_connection = True
            return
        head = self._head(response)
        if response.cut is not None:
            self.wfile.write(head[: len(head) // 2] if response.cut == "headers" else b"")
            self.close_connection = True  # the socket is closed when the handler returns
            return
        if response.chunks is None:
            counted.end()
            self.wfile.write(head + response.body)
            return
        self.wfile.write(head)
        chunked = response.length is None
        chunks = response.chunks
        left = response.length or 0  # of a stream framed by its length: what completes it
        try:
            for chunk in chunks:
                if isinstance(chunk, Pause):
                    if not self._wait(chunk.seconds):
                        raise StreamDropped
                elif chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                else:
                    left -= len(chunk)
                    if left <= 0:
                        counted.end()
                    self.wfile.write(chunk)
            if chunked:
                counted.end()
                self.wfile.write(b"0\r\n\r\n")
        except (StreamDropped, ConnectionError):
            self.close_connection = True  # end without the rest: the body is cut
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    def _head(self, response: FakeResponse) -> bytes:
        """Status line and headers; the framing header follows from ``chunks``/``length``."""
        try:
            reason = HTTPStatus(response.status).phrase
        except ValueError:
            reason = "Unknown"
        lines = [f"HTTP/1.1 {response.status} {reason}"]
        lines += [f"{name}: {value}" for name, value in response.headers]
        if response.chunks is None:
            lines.append(f"Content-Length: {len(response.body)}")
        elif response.length is not None:
            lines.append(f"Content-Length: {response.length}")
        else:
            lines.append("Transfer-Encoding: chunked")
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _wait(self, seconds: float) -> bool:
        """Wait ``seconds`` unless the server stops first; ``False`` when it stopped."""
        return not self.server.stopping.wait(None if math.isinf(seconds) else seconds)
