"""A fast OpenAI-compatible loopback target for the benchmarks: canned bytes, no model.

Run as its own process (``python benchmarks/server.py``; it prints ``READY <port>`` and serves on
127.0.0.1 until SIGTERM or SIGINT), so that the client's process CPU time is the client's alone.
One asyncio protocol per connection finds each request's end with two ``bytes.find`` calls and
writes a precomputed response; it never parses JSON. The payload is chosen by the first path
segment, so each scenario's ``base_url`` says what it gets back:

* ``/small/v1/...``   a chat completion whose content is one object of 4 fields;
* ``/large/v1/...``   a chat completion whose content is a JSON array of 200 records, 6 fields;
* ``/sse256/v1/...``  (any N) an SSE stream: N content chunks, whose text is a JSON array of
  records, then a finish chunk, a usage chunk and ``[DONE]``, as HTTP chunks, like vLLM;
* ``/<payload>/v1/models``  the model list;
* ``/stats``          ``{"requests": n, "cpu_seconds": s}``: the server's own CPU time, so the
  harness can report what a request costs the server (it must never be the bottleneck).

With ``--uds PATH`` it also serves the same on a Unix socket (lmclient's ``uds=``), to compare a
call over the socket with one over TCP loopback against the same process.

Responses mirror vLLM's field set, so that decoding them costs what decoding a real one does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from functools import cache

MODEL = "bench-model"
CREATED = 1_760_000_000

SMALL_CONTENT = {"name": "Ada Lovelace", "age": 36, "email": "ada@example.com", "active": True}


def record(i: int) -> dict[str, object]:
    return {
        "id": i,
        "name": f"Person {i}",
        "email": f"person{i}@example.com",
        "score": round(i * 0.37 % 100, 2),
        "active": i % 3 != 0,
        "tags": ["alpha", "beta"] if i % 2 else ["gamma"],
    }


LARGE_CONTENT = [record(i) for i in range(200)]
STREAM_RECORDS = 24  # the streamed array: long enough that 256 chunks carry a few chars each


def _completion(content: str) -> bytes:
    body = {
        "id": "chatcmpl-bench0123456789abcdef",
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": None,
                    "annotations": None,
                    "audio": None,
                    "function_call": None,
                    "tool_calls": [],
                    "reasoning_content": None,
                },
                "logprobs": None,
                "finish_reason": "stop",
                "stop_reason": None,
            }
        ],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": {"prompt_tokens": 17, "total_tokens": 57, "completion_tokens": 40},
        "prompt_logprobs": None,
        "kv_transfer_params": None,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def _json_response(body: bytes, status: str = "200 OK") -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\ndate: Mon, 01 Jan 2024 00:00:00 GMT\r\nserver: uvicorn\r\n"
        f"content-length: {len(body)}\r\ncontent-type: application/json\r\n\r\n"
    )
    return head.encode() + body


def _chunk(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def stream_text() -> str:
    return json.dumps([record(i) for i in range(STREAM_RECORDS)], separators=(",", ":"))


def _sse_response(n: int) -> bytes:
    """``n`` content chunks (the first also carries the role), then finish, usage, [DONE]."""
    text = stream_text()
    cuts = [len(text) * i // n for i in range(n + 1)]
    head = {"id": "chatcmpl-bench0123456789abcdef", "object": "chat.completion.chunk"}
    head |= {"created": CREATED, "model": MODEL}

    def event(payload: dict[str, object]) -> bytes:
        return b"data: " + json.dumps({**head, **payload}, separators=(",", ":")).encode() + b"\n\n"

    events = []
    for i in range(n):
        delta: dict[str, object] = {"content": text[cuts[i] : cuts[i + 1]]}
        if i == 0:
            delta = {"role": "assistant", **delta}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        events.append(event({"choices": [choice]}))
    finish = {"index": 0, "delta": {"content": ""}, "logprobs": None, "finish_reason": "stop"}
    events.append(event({"choices": [finish]}))
    usage = {"prompt_tokens": 17, "total_tokens": 17 + n, "completion_tokens": n}
    events.append(event({"choices": [], "usage": usage}))
    events.append(b"data: [DONE]\n\n")
    head_bytes = (
        b"HTTP/1.1 200 OK\r\ndate: Mon, 01 Jan 2024 00:00:00 GMT\r\nserver: uvicorn\r\n"
        b"content-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    return head_bytes + b"".join(_chunk(e) for e in events) + b"0\r\n\r\n"


MODELS = _json_response(
    json.dumps(
        {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "bench"}]}
    ).encode()
)
NOT_FOUND = _json_response(
    b'{"error":{"message":"no such route","type":"NotFoundError","code":404}}', "404 Not Found"
)


@cache
def response_for(path: bytes) -> bytes:
    """The canned response for a request path (cached: the set of paths is small)."""
    parts = path.split(b"?", 1)[0].split(b"/")
    payload = parts[1] if len(parts) > 1 else b""
    route = b"/".join(parts[2:])
    if route == b"v1/models":
        return MODELS
    if route not in (b"v1/chat/completions", b"v1/completions"):
        return NOT_FOUND
    if payload == b"small":
        return _json_response(_completion(json.dumps(SMALL_CONTENT)))
    if payload == b"large":
        return _json_response(_completion(json.dumps(LARGE_CONTENT)))
    if payload.startswith(b"sse") and payload[3:].isdigit():
        return _sse_response(int(payload[3:]))
    return NOT_FOUND


def _content_length(head: bytes) -> int:
    lower = head.lower()
    at = lower.find(b"\r\ncontent-length:")
    if at < 0:
        return 0  # every client here frames its body with a length
    stop = lower.find(b"\r\n", at + 2)
    return int(head[at + 17 : stop if stop >= 0 else len(head)])


class Stats:
    requests = 0


class Handler(asyncio.Protocol):
    """Answers each complete request on the connection, in order, from canned bytes."""

    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buffer + data if self.buffer else data
        out = []
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            head = buf[:end]
            total = end + 4 + _content_length(head)
            if len(buf) < total:
                break
            path = head.split(b" ", 2)[1]
            if path == b"/stats":
                stats = {"requests": Stats.requests, "cpu_seconds": time.process_time()}
                out.append(_json_response(json.dumps(stats).encode()))
            else:
                Stats.requests += 1
                out.append(response_for(path))
            buf = buf[total:]
        self.buffer = buf
        if out:
            assert self.transport is not None
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))


async def serve(port: int, uds: str | None = None) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Handler, "127.0.0.1", port, backlog=1024)
    if uds is not None:
        await loop.create_unix_server(Handler, uds, backlog=1024)  # closed when the process ends
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--uds", metavar="PATH", help="also serve on this Unix socket")
    args = parser.parse_args()
    try:
        asyncio.run(serve(args.port, args.uds))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
