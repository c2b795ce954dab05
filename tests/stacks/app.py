"""The OpenAI-compatible app that every real server stack in these tests serves.

`respond` holds the behaviour, independent of any server; `app` is its ASGI adapter (uvicorn,
hypercorn, granian) and `tests/stacks/aiohttp_app.py` its aiohttp one.

What an answer holds depends on the request, so that answers cannot be confused:

* a non-streamed answer's content is the JSON ``{"prompt": ..., "port": ..., "pad": ...}``: the
  prompt (the last message, or the completion prompt), the client's TCP port as the server saw
  it (a proxy passes it in ``x-client-port``; over a Unix socket, which has no port, a number
  per connection), so that tests can count connections, and a pad;
* a streamed answer's content is the JSON array ``["<prompt>:0", ..., "<prompt>:N-1"]``, one
  element per ``data:`` event (N = `STREAM_ITEMS`, or `FEW_ITEMS` with ``few``), ending with
  ``data: [DONE]``.

How it is sent is chosen by options in the ``model`` name, joined with ``+``
(``"echo+big+gzip"``), or in the prompt, as words that start with ``+`` (``"+big +gzip hi"``):
``big`` pads the content to `BIG_PAD` characters (a body of about 5 MB); ``few`` makes a
stream short (a server sends every event of a stream, even to a client that left);
``chunked`` sends the body in pieces without a Content-Length; ``gzip`` compresses the body
(``content-encoding: gzip``, incrementally for pieces and streams). A path under ``/close/``
is the same API answered with ``connection: close``.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

__all__ = ["BIG_PAD", "FEW_ITEMS", "MODEL", "STREAM_ITEMS", "Reply", "app", "echo_text", "respond"]

MODEL = "echo"
BIG_PAD = 5_000_000
STREAM_ITEMS = 2_000
FEW_ITEMS = 100
PIECE = 64 * 1024  # the size of a body's pieces with the ``chunked`` option


@dataclass
class Reply:
    """What to send: ``body`` whole (the server frames it with Content-Length), or ``chunks``
    one after the other (the server chooses the framing, chunked for HTTP/1.1)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    chunks: Iterator[bytes] | None = None
    close: bool = False


def echo_text(prompt: str, port: int, *, big: bool = False) -> str:
    """A non-streamed answer's content (what the tests decode into their `Echo`)."""
    pad = "x" * BIG_PAD if big else ""
    return msgspec.json.encode({"prompt": prompt, "port": port, "pad": pad}).decode()


def stream_items(prompt: str, count: int = STREAM_ITEMS) -> list[str]:
    """A streamed answer's elements."""
    return [f"{prompt}:{i}" for i in range(count)]


def respond(method: str, path: str, headers: dict[str, str], body: bytes, port: int) -> Reply:
    """The answer to one request. ``headers`` have lower-case names; ``port`` is the client's."""
    close = path.startswith("/close/")
    if close:
        path = path[len("/close") :]
    reply = _route(method, path, headers, body, int(headers.get("x-client-port", port)))
    reply.close = close
    if close:
        reply.headers.append(("connection", "close"))
    return reply


def _route(method: str, path: str, headers: dict[str, str], body: bytes, port: int) -> Reply:
    if method == "GET" and path == "/v1/models":
        models = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "t"}]}
        return _json(200, models)
    if method != "POST" or path not in ("/v1/chat/completions", "/v1/completions"):
        return _json(404, {"error": {"message": f"no route {method} {path}", "type": "not_found"}})
    try:
        request = msgspec.json.decode(body)
        model = request["model"]
        chat = path == "/v1/chat/completions"
        prompt = request["messages"][-1]["content"] if chat else request["prompt"]
        if not isinstance(model, str) or not isinstance(prompt, str):
            raise TypeError("model and prompt must be strings")
    except (msgspec.DecodeError, KeyError, IndexError, TypeError) as exc:
        return _json(400, {"error": {"message": f"bad request: {exc!r}", "type": "bad_request"}})
    options = set(model.split("+")) | {w[1:] for w in prompt.split() if w.startswith("+")}
    head = {
        "id": "cmpl-stacks",
        "object": "chat.completion" if chat else "text_completion",
        "created": 1,
        "model": model,
    }
    compress = "gzip" in options
    if request.get("stream"):
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        items = stream_items(prompt, FEW_ITEMS if "few" in options else STREAM_ITEMS)
        events = _events(head, chat, items, usage)
        reply = Reply(200, [("content-type", "text/event-stream"), ("cache-control", "no-cache")])
        reply.chunks = _gzip_pieces(events) if compress else events
    else:
        content = echo_text(prompt, port, big="big" in options)
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": "stop"}
        if chat:
            choice["message"] = {"role": "assistant", "content": content}
        else:
            choice["text"] = content
        usage_counts = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        data = msgspec.json.encode({**head, "choices": [choice], "usage": usage_counts})
        reply = Reply(200, [("content-type", "application/json")])
        if "chunked" in options:
            pieces = (data[i : i + PIECE] for i in range(0, len(data), PIECE))
            reply.chunks = _gzip_pieces(pieces) if compress else pieces
        else:
            reply.body = gzip.compress(data, mtime=0) if compress else data
    if compress:
        reply.headers.append(("content-encoding", "gzip"))
    return reply


def _json(status: int, payload: Any) -> Reply:
    return Reply(status, [("content-type", "application/json")], msgspec.json.encode(payload))


def _events(head: dict[str, Any], chat: bool, items: list[str], usage: bool) -> Iterator[bytes]:
    """The SSE events of a streamed answer: one element of the JSON array per event."""
    head = {**head, "object": "chat.completion.chunk" if chat else "text_completion"}

    def event(text: str | None, finish: str | None = None) -> bytes:
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish}
        if chat:
            choice["delta"] = {} if text is None else {"content": text}
        else:
            choice["text"] = text or ""
        return b"data: " + msgspec.json.encode({**head, "choices": [choice]}) + b"\n\n"

    if chat:
        role = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        yield b"data: " + msgspec.json.encode({**head, "choices": [role]}) + b"\n\n"
    last = len(items) - 1
    for i, item in enumerate(items):
        piece = msgspec.json.encode(item).decode()
        yield event(("[" if i == 0 else ",") + piece + ("]" if i == last else ""))
    yield event(None, "stop")
    if usage:
        counts = {
            "prompt_tokens": 1,
            "completion_tokens": len(items),
            "total_tokens": 1 + len(items),
        }
        yield b"data: " + msgspec.json.encode({**head, "choices": [], "usage": counts}) + b"\n\n"
    yield b"data: [DONE]\n\n"


def _gzip_pieces(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """One gzip member across the pieces, each flushed (Z_SYNC_FLUSH) so that it can be
    decoded as soon as it arrives."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    pending = b""
    for piece in pieces:
        if pending:
            yield pending
        pending = compressor.compress(piece) + compressor.flush(zlib.Z_SYNC_FLUSH)
    yield pending + compressor.flush(zlib.Z_FINISH)


# -- ASGI -----------------------------------------------------------------------------------

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


# Every connection seen over a Unix socket, kept (so that no id is reused) with its number.
_CONNECTIONS: dict[int, tuple[object, int]] = {}


def _connection_number(receive: Receive) -> int:
    """A number per connection where the client has no address (a Unix socket): uvicorn's
    request cycle, whose method ``receive`` is, holds its connection's transport."""
    transport = getattr(getattr(receive, "__self__", None), "transport", None)
    if transport is None:
        return 0
    known = _CONNECTIONS.get(id(transport))
    if known is None:
        known = _CONNECTIONS[id(transport)] = (transport, len(_CONNECTIONS) + 1)
    return known[1]


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The ASGI application (HTTP and lifespan)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    parts = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    client = scope.get("client") or ("", _connection_number(receive))
    reply = respond(scope["method"], scope["path"], headers, b"".join(parts), int(client[1]))
    out = [(k.encode(), v.encode()) for k, v in reply.headers]
    if reply.chunks is None:
        out.append((b"content-length", str(len(reply.body)).encode()))
    await send({"type": "http.response.start", "status": reply.status, "headers": out})
    if reply.chunks is None:
        await send({"type": "http.response.body", "body": reply.body})
        return
    for piece in reply.chunks:
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b""})
