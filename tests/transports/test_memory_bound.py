"""Memory per response stays within a stated multiple of ``max_response_bytes`` (the multiples
in docs/reliability.md#limits), measured with tracemalloc around one call against a socket
server in this process that sends fixed bytes: compressed bombs (gzip and deflate, declared and
chunked), bodies and streams just under and over the limit. Issue 26: about 2.2x on
compressed bombs and streams; a bomb now peaks at about 1.2x (inflated a step at a time and
dropped at the limit, never joined)."""

from __future__ import annotations

import gzip
import socket
import threading
import tracemalloc
import zlib
from collections.abc import Iterator

import msgspec
import pytest

import lmclient

pytestmark = pytest.mark.slow  # a 256 MiB bomb compressed per case, bodies of megabytes

LIMIT = 4 << 20
BOMB = 256 << 20  # inflated size: 64x the limit
BOMB_AT_MOST = 1.3  # the multiples stated in docs/reliability.md
BODY_AT_MOST = 2.2
STREAM_AT_MOST = 2.8
ONE_EVENT_AT_MOST = 3.3


class Server:
    """Answers every request on 127.0.0.1 with ``self.response``, keep-alive."""

    def __init__(self) -> None:
        self.response = b""
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffered = b""
        with conn:
            try:
                while True:
                    while b"\r\n\r\n" not in buffered:
                        data = conn.recv(65536)
                        if not data:
                            return
                        buffered += data
                    head, _, rest = buffered.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.partition(b":")[2])
                    while len(rest) < length:
                        rest += conn.recv(65536)
                    buffered = rest[length:]
                    conn.sendall(self.response)
            except OSError:
                return


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.sock.close()


def response(body: bytes, content_type: str, coding: str | None, framing: str) -> bytes:
    head = f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\n"
    if coding:
        head += f"content-encoding: {coding}\r\n"
    if framing == "length":
        return f"{head}content-length: {len(body)}\r\n\r\n".encode() + body
    step = 65536
    chunks = [
        b"%x\r\n%s\r\n" % (len(body[i : i + step]), body[i : i + step])
        for i in range(0, len(body), step)
    ]
    return f"{head}transfer-encoding: chunked\r\n\r\n".encode() + b"".join(chunks) + b"0\r\n\r\n"


def chat(content: str) -> bytes:
    message = {"role": "assistant", "content": content}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return msgspec.json.encode({"id": "x", "model": "m", "choices": [choice]})


def events(count: int, piece: str) -> bytes:
    def event(delta: dict[str, str], finish: str | None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return b"data: " + msgspec.json.encode({"id": "x", "model": "m", "choices": [choice]})

    one = event({"content": piece}, None) + b"\n\n"
    return one * count + event({}, "stop") + b"\n\ndata: [DONE]\n\n"


def peak(server: Server, stream: bool) -> tuple[float, str]:
    """The call's peak of traced memory, as a multiple of the limit, and how it ended."""
    with lmclient.Client(
        server.url, "m", dialect="vllm", max_retries=0, max_response_bytes=LIMIT
    ) as client:
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            ended = "ok"
            try:
                if stream:
                    with client.stream("hi") as deltas:
                        for _ in deltas:
                            pass
                else:
                    client.generate("hi")
            except lmclient.LMClientError as exc:
                ended = type(exc).__name__
            high = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    return high / LIMIT, ended


@pytest.mark.parametrize("framing", ["length", "chunked"])
@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_compressed_bomb(server: Server, coding: str, framing: str) -> None:
    packed = (gzip.compress if coding == "gzip" else zlib.compress)(b"\0" * BOMB, 1)
    server.response = response(packed, "application/json", coding, framing)
    multiple, ended = peak(server, stream=False)
    assert ended == "ProtocolError"
    assert multiple <= BOMB_AT_MOST, f"{multiple:.2f}x max_response_bytes"


@pytest.mark.parametrize("coding", [None, "gzip"])
@pytest.mark.parametrize("size", [LIMIT - 400, LIMIT + 100])
def test_whole_body(server: Server, coding: str | None, size: int) -> None:
    body = chat("x" * size)
    sent = gzip.compress(body, 1) if coding else body
    server.response = response(sent, "application/json", coding, "chunked")
    multiple, ended = peak(server, stream=False)
    assert ended == ("ok" if size < LIMIT else "ProtocolError")
    assert multiple <= BODY_AT_MOST, f"{multiple:.2f}x max_response_bytes"


@pytest.mark.parametrize("coding", [None, "gzip"])
@pytest.mark.parametrize("share", [0.9, 2.0])
def test_stream(server: Server, coding: str | None, share: float) -> None:
    piece = "x" * 1000
    count = int(LIMIT * share) // len(events(1, piece))
    sent = events(count, piece)
    server.response = response(
        gzip.compress(sent, 1) if coding else sent, "text/event-stream", coding, "chunked"
    )
    multiple, ended = peak(server, stream=True)
    assert ended == ("ok" if share < 1 else "ProtocolError")
    assert multiple <= STREAM_AT_MOST, f"{multiple:.2f}x max_response_bytes"


@pytest.mark.parametrize("size", [LIMIT - 400, 2 * LIMIT])
def test_stream_of_one_event(server: Server, size: int) -> None:
    server.response = response(events(1, "x" * size), "text/event-stream", None, "chunked")
    multiple, ended = peak(server, stream=True)
    assert ended == ("ok" if size < LIMIT else "ProtocolError")
    assert multiple <= ONE_EVENT_AT_MOST, f"{multiple:.2f}x max_response_bytes"
