"""`ByteServer`: a loopback server whose every connection is one function of the raw socket, for
faults below HTTP — a close on accept, a stall, a slow reader — over TCP or a Unix socket.

Its threads block SIGALRM: Linux delivers a process's signal to any thread that does not block
it, and a signal test needs it in the thread that waits in the client (the main one)."""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from tests.helpers import chat_body

HOLD = 10.0  # how long a handler holds a stalled connection: far past any bound a test asserts


class ByteServer:
    """Accepts on 127.0.0.1 (or on a Unix socket in ``uds_dir``) and hands each connection to
    ``handle(sock, server)`` in a thread of its own; `stop` sets ``release`` (a handler holding
    a connection lets go), closes every socket and joins the threads."""

    def __init__(
        self, handle: Callable[[socket.socket, ByteServer], None], uds_dir: Path | None = None
    ) -> None:
        self.handle = handle
        self.release = threading.Event()
        self.accepted = 0
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        if uds_dir is None:
            self.listener = socket.create_server(("127.0.0.1", 0))
            port = self.listener.getsockname()[1]
            self.options: dict[str, Any] = {"base_url": f"http://127.0.0.1:{port}/v1"}
        else:
            path = str(uds_dir / "byte.sock")
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind(path)
            self.listener.listen(128)
            self.options = {"uds": path}
        self._start(self._accept)

    def _start(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # its threads inherit it
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return  # closed by stop()
            with self._lock:
                self.accepted += 1
                self._socks.append(sock)
            self._start(self._serve, sock)

    def _serve(self, sock: socket.socket) -> None:
        try:
            self.handle(sock, self)
        except OSError:
            pass
        finally:
            sock.close()

    def stop(self) -> None:
        self.release.set()
        with self._lock:
            socks = [self.listener, *self._socks]
        for sock in socks:  # shutdown, unlike close, wakes a thread blocked in accept or recv
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(HOLD)


def read_request(sock: socket.socket) -> bool:
    """Read one request (its head, then a Content-Length body); False at the end of the
    connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            return False
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        piece = sock.recv(1 << 20)
        if not piece:
            return False
        body += piece
    return True


def answer(sock: socket.socket, content: str) -> None:
    """A chat completion of ``content``, kept alive."""
    body = msgspec.json.encode(chat_body(content))
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    sock.sendall(head % len(body) + body)


# The head of a stream and its first event: a stream that has begun.
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)
_EVENT = msgspec.json.encode(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "delta": {"content": "a"}, "logprobs": None, "finish_reason": None}
        ],
    }
)
FIRST_EVENT = b"%x\r\n%s\r\n" % (len(_EVENT) + 8, b"data: " + _EVENT + b"\n\n")
